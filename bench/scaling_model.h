// The models of the distributed and checkpoint benchmarks: GPT-shaped
// oracle models of exactly `n` params, so that step and checkpoint time can
// be read against model size (1M to 80M) and DP size.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "testing/model_spec.h"

namespace shardcheck::bench {

// A GPT-shaped model of exactly `n` params (n >= 1M): an embedding and an
// output head of vocab x hidden (Megatron's roles, so composites route them
// to the scalar optimizer), `layers` transformer layers of hidden h (fused
// qkv with its bias, proj, fc1 with its bias, fc2, a layernorm weight: the
// 2-D hidden weights Muon takes whole) and a final norm vector that takes
// the remainder. hidden is 128 up to 2M params, 512 up to 32M and 1024
// above; the layers take up to 60% of the params. Throws Error below 1M.
ModelSpec ScalingModel(int64_t n);

// Its initial params in fp32, model shapes, from the gradient oracle's
// InitialParam (testing/oracle.h) with a fixed seed.
std::vector<at::Tensor> ScalingParams(const ModelSpec& model);

// One fp32 grad per param, model shapes, from a fixed seed: what every rank
// writes into its grad buffer before each step (the same grad every step;
// the benchmarks time the optimizer, not the gradient).
std::vector<at::Tensor> ScalingGrads(const ModelSpec& model);

}  // namespace shardcheck::bench
