// Model specs for oracle runs: an ordered list of named params with shape
// and role. The order is the registration order: a param's index is its
// oracle `pid`.
#pragma once

#include <string>
#include <vector>

#include "spec/params.h"

namespace shardcheck {

struct ModelSpec {
  std::string name;  // "gpt-tiny", "shapes:<list>", "sparse-mixed-small", ...
  std::vector<ParamInfo> params;
  // The oracle's zero mask (docs/oracle.md): gradients are exactly 0 on one
  // element in eight, a new set each step. Set by the "sparse-" models.
  bool zero_mask = false;

  int64_t Numel() const;
  bool HasMatrixParams() const;  // at least one param that Muon would take
};

// gpt-tiny: 2 layers, hidden 64, ffn 256, vocab 128, 32 positions, with
// Megatron-LM's param names (embedding, fused qkv, proj, fc1, fc2, their
// biases, two layernorm pairs per layer, final norm, output head).
ModelSpec GptTinySpec();

// A list "64x32,32,name=16x8:embedding,...": each item `[name=]DIMS[:ROLE]`,
// DIMS as NxMx..., ROLE embedding|output|other (default other). Unnamed
// params are called p0, p1, ... by position. Throws Error naming the item.
ModelSpec ParseShapes(const std::string& list);

// mixed-small: 13 params (~19k elements) with every kind a layout test
// needs: embeddings, output head, 2-D hidden weights, biases, a norm and a
// 7-element param; with bucket_size 1000 it gives several buckets.
ModelSpec MixedSmallSpec();

// "gpt-tiny" or "mixed-small". Throws Error on others.
ModelSpec ModelByName(const std::string& name);

// An oracle model as `oracle:<name>` names it: "gpt-tiny", "mixed-small",
// "shapes:<list>" (ParseShapes), or "sparse-" before one of those: that
// model with zero_mask on and the name kept ("sparse-mixed-small"). Throws
// Error "unknown oracle model '<name>' ..." on others, or ParseShapes' error.
ModelSpec OracleModelByName(const std::string& name);

}  // namespace shardcheck
