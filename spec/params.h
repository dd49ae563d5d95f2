// Param descriptions, roles and the routing rule of composite setups.
//
// Routing follows Megatron-LM's _is_muon_excluded: embedding and output
// weights and every param that is not 2-D go to the scalar optimizer; every
// other 2-D weight goes to the whole-param optimizer (Muon).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck {

enum class ParamRole { kEmbedding, kOutput, kOther };

std::string RoleName(ParamRole role);
ParamRole ParseRole(const std::string& name);

struct ParamInfo {
  std::string name;            // unique, e.g. "decoder.layers.0.mlp.linear_fc1.weight"
  std::vector<int64_t> shape;  // model shape
  ParamRole role = ParamRole::kOther;

  int64_t Numel() const;
  bool IsBias() const;
  // Megatron's default: no weight decay for biases and 1-D params.
  double DefaultWdMult() const { return (shape.size() < 2 || IsBias()) ? 0.0 : 1.0; }
  // "64x32".
  std::string ShapeString() const;
};

// True if a composite's whole-param optimizer (Muon) must not take this
// param: it goes to the scalar optimizer.
bool GoesToScalarOptimizer(const ParamInfo& p);

}  // namespace shardcheck
