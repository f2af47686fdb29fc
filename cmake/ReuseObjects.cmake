# SPDX-License-Identifier: Apache-2.0
# hetgraph_reuse_objects(TARGET...): link each target from the object files another build tree
# (HETGRAPH_OBJECTS_FROM, a Release tree of the same sources, built) compiled for it, instead of
# compiling its sources again.
#
# Why: `make test` compiles the test suite twice, in the Release tree and in the
# AddressSanitizer+UBSan one. What the sanitizers check is the library, which the ASan tree
# compiles instrumented as before; the tests' own code (gtest cases, the reference interpreter)
# gains little from instrumentation and was a third of that tree's compile time. So the ASan
# tree links the Release tree's test objects against its own instrumented libraries: every test
# still runs every library line under ASan+UBSan. Nothing a test object holds may depend on the
# build tree: tests find the programs they start beside themselves (tests/test_util.hpp,
# build_program), and ask at run time whether they run under a sanitizer.
function(hetgraph_reuse_objects)
  foreach(target ${ARGN})
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|OBJECT_LIBRARY)$")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    get_target_property(binary_dir ${target} BINARY_DIR)
    file(RELATIVE_PATH binary_rel ${PROJECT_BINARY_DIR} ${binary_dir})
    set(objects "")
    foreach(source ${sources})
      get_filename_component(source ${source} ABSOLUTE BASE_DIR ${source_dir})
      file(RELATIVE_PATH source_rel ${source_dir} ${source})
      if(source_rel MATCHES "^\\.\\./")
        message(FATAL_ERROR "hetgraph_reuse_objects: ${target}'s source ${source} lies outside "
                            "${source_dir}; its object's name in the other tree is not known")
      endif()
      set(object ${HETGRAPH_OBJECTS_FROM}/${binary_rel}/CMakeFiles/${target}.dir/${source_rel}.o)
      if(NOT EXISTS ${object})
        message(FATAL_ERROR "hetgraph_reuse_objects: ${object} does not exist: build the tree "
                            "${HETGRAPH_OBJECTS_FROM} first (`make build`), or configure without "
                            "HETGRAPH_OBJECTS_FROM to compile the tests here")
      endif()
      list(APPEND objects ${object})
    endforeach()
    set_property(TARGET ${target} PROPERTY SOURCES ${objects})
    # From objects alone CMake cannot tell the language that links them.
    set_property(TARGET ${target} PROPERTY LINKER_LANGUAGE CXX)
    # Nothing is compiled, so no precompiled header either (nor its own compile).
    set_property(TARGET ${target} PROPERTY DISABLE_PRECOMPILE_HEADERS ON)
  endforeach()
endfunction()
