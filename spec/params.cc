#include "spec/params.h"

#include "spec/error.h"

namespace shardcheck {

std::string RoleName(ParamRole role) {
  switch (role) {
    case ParamRole::kEmbedding:
      return "embedding";
    case ParamRole::kOutput:
      return "output";
    case ParamRole::kOther:
      return "other";
  }
  return "?";
}

ParamRole ParseRole(const std::string& name) {
  for (auto r : {ParamRole::kEmbedding, ParamRole::kOutput, ParamRole::kOther})
    if (RoleName(r) == name) return r;
  throw Error("unknown param role '" + name + "' (expected embedding, output or other)");
}

int64_t ParamInfo::Numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool ParamInfo::IsBias() const {
  static const std::string kSuffix = ".bias";
  return name == "bias" ||
         (name.size() > kSuffix.size() &&
          name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0);
}

std::string ParamInfo::ShapeString() const {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s.empty() ? "scalar" : s;
}

bool GoesToScalarOptimizer(const ParamInfo& p) {
  return p.role == ParamRole::kEmbedding || p.role == ParamRole::kOutput || p.shape.size() != 2;
}

}  // namespace shardcheck
