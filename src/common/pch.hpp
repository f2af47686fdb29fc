// SPDX-License-Identifier: Apache-2.0
// The library's precompiled header (CMake target_precompile_headers): the standard headers and
// the plan that most of its sources include. Parsing them was 45% of the library's compile time
// (224 of ~500 s of CPU in a Release build, measured with -fsyntax-only), and the library is
// compiled three times by `make test` (Release, ASan+UBSan, TSan). Sources still include what
// they use; this file only changes how fast they compile.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "compiler/plan.hpp"
#include "hetgraph/error.hpp"
