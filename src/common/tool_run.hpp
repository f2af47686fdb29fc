// SPDX-License-Identifier: Apache-2.0
// hetgraph-bench's platform with a replay model (--replay-cores): internal, beside the public
// hetgraph/tool.hpp that hetgraph-run and the bench share.
#pragma once

#include <memory>

#include "hetgraph/tool.hpp"

namespace hetgraph::detail::cpu {
class ReplayModel;
}

namespace hetgraph::tool {

/// make_platform(e) whose CPU platform replays kernels with `replay` (null: runs them).
Platform make_platform(const EngineFlags& e,
                       std::shared_ptr<const detail::cpu::ReplayModel> replay);

}  // namespace hetgraph::tool
