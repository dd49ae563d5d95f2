#include "spec/schema.h"

#include "spec/error.h"

namespace shardcheck {

bool StateSchema::Has(const std::string& key) const {
  for (const auto& k : keys)
    if (k.name == key) return true;
  return false;
}

std::vector<std::string> StateSchema::Names() const {
  std::vector<std::string> out;
  for (const auto& k : keys) out.push_back(k.name);
  return out;
}

std::string StateSchema::ToString() const {
  std::string s;
  for (const auto& k : keys) {
    if (!s.empty()) s += ", ";
    s += k.name + ":" + DtypeName(k.dtype);
  }
  return s;
}

std::string DtypeName(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat:
      return "fp32";
    case c10::kBFloat16:
      return "bf16";
    case c10::kHalf:
      return "fp16";
    case c10::kDouble:
      return "fp64";
    case c10::kLong:
      return "int64";
    case c10::kInt:
      return "int32";
    case c10::kByte:
      return "uint8";
    default:
      return c10::toString(dtype);
  }
}

c10::ScalarType ParseDtype(const std::string& name) {
  for (auto t :
       {c10::kFloat, c10::kBFloat16, c10::kHalf, c10::kDouble, c10::kLong, c10::kInt, c10::kByte}) {
    if (DtypeName(t) == name) return t;
  }
  throw Error("unknown dtype '" + name +
              "' (expected fp32, bf16, fp16, fp64, int64, int32, uint8)");
}

}  // namespace shardcheck
