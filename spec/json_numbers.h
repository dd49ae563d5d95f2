// Typed reads of JSON numbers from files shardcheck did not necessarily
// write (metadata.json, safetensors headers). nlohmann's get<int64_t>()
// converts a float such as 1e40 with undefined behaviour, and get<int>()
// truncates silently; these accept only integers that fit, and throw Error
// naming what they got.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spec/error.h"

namespace shardcheck {

template <typename Int, typename Json>
Int JsonInteger(const Json& j) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.template get<uint64_t>();
    if (v <= static_cast<uint64_t>(std::numeric_limits<Int>::max())) return static_cast<Int>(v);
  } else if (j.is_number_integer()) {
    const int64_t v = j.template get<int64_t>();
    if (v >= 0 || std::numeric_limits<Int>::is_signed) {
      if (static_cast<long double>(v) >=
              static_cast<long double>(std::numeric_limits<Int>::lowest()) &&
          static_cast<long double>(v) <= static_cast<long double>(std::numeric_limits<Int>::max()))
        return static_cast<Int>(v);
    }
  }
  throw Error("expected an integer in range, got " + j.dump());
}

template <typename Int, typename Json>
std::vector<Int> JsonIntegers(const Json& j) {
  if (!j.is_array()) throw Error("expected a list of integers, got " + j.dump());
  std::vector<Int> out;
  for (const auto& x : j) out.push_back(JsonInteger<Int>(x));
  return out;
}

}  // namespace shardcheck
