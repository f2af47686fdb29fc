// SPDX-License-Identifier: Apache-2.0
// The communicators the distributed layer makes and the checks it runs over any of them; the
// interface itself is the core layer's (compiler/comm.hpp).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "compiler/comm.hpp"
#include "hetgraph/distributed.hpp"

namespace hetgraph::detail {

/// distributed::check_agreement on `c`; the error starts with `what`.
void agree(Comm& c, std::span<const distributed::Agreed> values, const std::string& what);

/// One process: every collective copies (allgather, reduce_scatter and mean included: one rank).
std::shared_ptr<Comm> make_self_comm();

}  // namespace hetgraph::detail
