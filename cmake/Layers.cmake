# SPDX-License-Identifier: Apache-2.0
# The layers as build targets (docs/ARCHITECTURE.md, "Layers"). A layer's sources compile with an
# include root of their own, build/layers/<layer>/, which holds links to the layer's folder and
# to the folders of the layers it may use, and nothing else: `#include "onnx/ir.hpp"` in the core
# layer finds no such file. Programs (tools, examples) get such a root without a target.
#
#   hetgraph_layer(cpu FOLDER src/cpu USES util core runtime LIBS DNNL::dnnl SOURCES a.cpp b.cpp)
#     -> OBJECT library hetgraph_cpu (no SOURCES: only the include root)
#   hetgraph_layer_target(target cpu)   any other target compiled as part of the cpu layer
#   hetgraph_layer_includes(target examples)   a program's include root
#   hetgraph_write_layer_manifest(file)  the layers as declared, one table row each, for the
#     layer check to compare with the document's table
# Layers are declared in order: a layer may only use layers declared before it.

function(hetgraph_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 L "" "FOLDER" "USES;LIBS;SOURCES")
  set(root ${PROJECT_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root})
  set(folders ${L_FOLDER})
  foreach(used IN LISTS L_USES)
    get_property(folder GLOBAL PROPERTY HETGRAPH_LAYER_FOLDER_${used})
    if(NOT folder)
      message(FATAL_ERROR "Layer ${name} uses layer ${used}, which is not declared before it")
    endif()
    list(APPEND folders ${folder})
  endforeach()
  foreach(folder IN LISTS folders)
    if(folder MATCHES "^src/")  # what others include by path: "cpu/engine.hpp"
      get_filename_component(leaf ${folder} NAME)
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${root}/${leaf} SYMBOLIC)
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY HETGRAPH_LAYER_FOLDER_${name} ${L_FOLDER})
  set_property(GLOBAL PROPERTY HETGRAPH_LAYER_ROOT_${name} ${root})
  list(JOIN L_USES ", " uses)
  set_property(GLOBAL APPEND_STRING PROPERTY HETGRAPH_LAYER_MANIFEST "| ${name} | ${L_FOLDER} | ${uses} |\n")
  if(L_SOURCES)
    add_library(hetgraph_${name} OBJECT ${L_SOURCES})
    hetgraph_layer_target(hetgraph_${name} ${name})
    target_link_libraries(hetgraph_${name} PRIVATE ${L_LIBS})
    # util includes no plan: it compiles without the header that would bring one in.
    if(TARGET hetgraph_pch AND NOT name STREQUAL "util")
      target_precompile_headers(hetgraph_${name} REUSE_FROM hetgraph_pch)
    endif()
  endif()
endfunction()

function(hetgraph_layer_target target layer)
  hetgraph_layer_includes(${target} ${layer})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(${target} PRIVATE hetgraph_flags)
  add_dependencies(${target} hetgraph_layers)
endfunction()

# hetgraph_layer_includes(target layer): the layer's include root, privately.
function(hetgraph_layer_includes target layer)
  get_property(root GLOBAL PROPERTY HETGRAPH_LAYER_ROOT_${layer})
  if(NOT root)
    message(FATAL_ERROR "hetgraph_layer_includes(${target}): no layer ${layer}")
  endif()
  target_include_directories(${target} PRIVATE ${root})
endfunction()

function(hetgraph_write_layer_manifest file)
  get_property(rows GLOBAL PROPERTY HETGRAPH_LAYER_MANIFEST)
  file(CONFIGURE OUTPUT ${file} CONTENT "${rows}")
endfunction()
