# SPDX-License-Identifier: Apache-2.0
# hetgraph_write_if_changed(path content): writes `content` to `path` only when it differs from
# what is there, so that a generated file that did not change recompiles and relinks nothing
# (cmake/EmbedKernels.cmake, cmake/GenerateOps.cmake). Plain text, no variable substitution
# (file(CONFIGURE) would substitute ${...} and @...@ in the content).
function(hetgraph_write_if_changed path content)
  if(EXISTS "${path}")
    file(READ "${path}" old)
    if(old STREQUAL content)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${content}")
endfunction()
