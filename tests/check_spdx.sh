#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every source file of the project (C++, OpenCL, CMake, Python, JavaScript, shell) names its
# license in its first lines, "SPDX-License-Identifier: Apache-2.0" (LICENSE). Usage:
# check_spdx.sh SOURCE_DIR. Lists the files without it and fails; build trees, npm's folders
# and test data are not the project's sources.
set -u
cd "$1" || exit 2
missing=$(find . \( -path './build*' -o -path '*/node_modules' -o -path './.git' \
                    -o -path './tests/data' -o -path './tests/onnx_conformance' \) -prune -o \
               -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cl' \
                          -o -name '*.cmake' -o -name 'CMakeLists.txt' -o -name '*.py' \
                          -o -name '*.js' -o -name '*.sh' -o -name 'Makefile' \) -print |
          while read -r f; do head -n 3 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0' || echo "$f"; done)
if [ -n "$missing" ]; then
  echo "FAIL: no 'SPDX-License-Identifier: Apache-2.0' in the first lines of:"
  echo "$missing"
  exit 1
fi
echo "ok: every source file names its license"
