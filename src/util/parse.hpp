// SPDX-License-Identifier: Apache-2.0
// Strict parsing of numbers from text (command lines, environment variables), shared by the
// library and the tools. Header-only so that tools, tests and fuzz targets use it without
// linking the library.
//
//   parse_int("10abc")  -> nullopt (the whole text must be the number)
//   parse_int("1e3")    -> nullopt (integers have no exponent)
//   parse_real("nan")   -> NaN: parse_real accepts what from_chars does; callers check ranges
//
// Accepted integers: an optional '-' then decimal digits, nothing else (no '+', no spaces, no
// hex). Accepted reals: from_chars' general format (1, 0.5, .5, 1e-3, inf, nan), whole text.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace hetgraph::detail {

enum class ParseStatus : std::uint8_t { ok, malformed, out_of_range };

/// The integer `text` holds, whole; out_of_range when it does not fit in 64 bits.
inline ParseStatus parse_int(std::string_view text, std::int64_t& out) {
  if (text.empty()) return ParseStatus::malformed;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, out, 10);
  if (ec == std::errc::result_out_of_range && ptr == end) return ParseStatus::out_of_range;
  if (ec != std::errc() || ptr != end) return ParseStatus::malformed;
  return ParseStatus::ok;
}

inline std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  return parse_int(text, v) == ParseStatus::ok ? std::optional(v) : std::nullopt;
}

/// The real number `text` holds, whole (inf and nan included: callers check ranges);
/// out_of_range when its magnitude does not fit in a double.
inline ParseStatus parse_real(std::string_view text, double& out) {
  if (text.empty()) return ParseStatus::malformed;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, out, std::chars_format::general);
  if (ec == std::errc::result_out_of_range && ptr == end) return ParseStatus::out_of_range;
  if (ec != std::errc() || ptr != end) return ParseStatus::malformed;
  return ParseStatus::ok;
}

/// "A<sep>B" split at the first `sep`; nullopt when there is none.
inline std::optional<std::pair<std::string_view, std::string_view>> split_pair(
    std::string_view text, char sep) {
  const auto at = text.find(sep);
  if (at == std::string_view::npos) return std::nullopt;
  return std::pair{text.substr(0, at), text.substr(at + 1)};
}

/// `text` in single quotes for a message, with control and non-ASCII bytes escaped (\xNN) and long
/// values cut, so a hostile value cannot garble a terminal or a log.
inline std::string quote(std::string_view text, std::size_t max = 64) {
  std::string s = "'";
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i == max) {
      s += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\') {
      static const char* hex = "0123456789abcdef";
      s += "\\x";
      s += hex[c >> 4];
      s += hex[c & 15];
    } else {
      s += static_cast<char>(c);
    }
  }
  return s + "'";
}

}  // namespace hetgraph::detail
