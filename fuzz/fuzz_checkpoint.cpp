// The checkpoint reader on raw file bytes: it either lists variables whose data lies inside
// the file (names unique, sizes matching their dims) or throws DataError.
#include <set>
#include <string>

#include "hetgraph/error.hpp"
#include "onnx/checkpoint_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const auto entries = hetgraph::detail::parse_checkpoint(bytes, "fuzz.ckpt");
    std::set<std::string> names;
    for (const auto& e : entries) {
      std::uint64_t n = 1;
      for (auto d : e.dims) n *= static_cast<std::uint64_t>(d);
      if (e.dims.size() > 4 || e.bytes != n * 4 || e.offset + e.bytes > size ||
          !names.insert(e.name).second) {
        __builtin_trap();
      }
    }
  } catch (const hetgraph::DataError&) {
  }
  return 0;
}
