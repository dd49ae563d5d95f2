#include "distributed/json_text.h"

#include <nlohmann/json.hpp>

namespace shardcheck {

void AppendJsonString(std::string& out, std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      out += nlohmann::json(std::string(s)).dump();
      return;
    }
  }
  out += '"';
  out.append(s.data(), s.size());
  out += '"';
}

}  // namespace shardcheck
