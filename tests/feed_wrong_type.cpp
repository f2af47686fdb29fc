// SPDX-License-Identifier: Apache-2.0
// Must not compile (ctest feed_wrong_element_type_is_a_clear_error): a feed of int64 values is
// a static_assert naming the element types a Feed takes, not a page of template errors.
#include <cstdint>
#include <vector>

#include "hetgraph/hetgraph.hpp"

void feed_int64(hetgraph::CompiledGraph& cg) {
  const std::vector<std::int64_t> ids{1, 2};
  cg.run({{"ids", ids}});
}
