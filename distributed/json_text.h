// JSON text written without a DOM, for the large records of a checkpoint's
// index (distributed/tensor_index_text.h, distributed/checkpoint_index.h):
// a string as nlohmann's dump writes it (same escapes, same refusal of
// invalid UTF-8), an integer in decimal.
#pragma once

#include <charconv>
#include <string>
#include <string_view>

namespace shardcheck {

// Appends `s` quoted. Printable ASCII is copied; a string with any other
// byte goes through nlohmann (its escapes; throws nlohmann::json::type_error
// on invalid UTF-8).
void AppendJsonString(std::string& out, std::string_view s);

template <typename Int>
void AppendJsonInteger(std::string& out, Int v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

}  // namespace shardcheck
