// The forward pass of the tiny models (harness/tiny_model.h): a pre-LN
// decoder-only transformer with Megatron-LM's param layout, its MLP either
// dense or a top-k routed mixture of experts. Internal to the harness.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "harness/models/synthetic_data.h"
#include "testing/model_spec.h"

namespace shardcheck {

struct TinyTransformerConfig {
  int64_t vocab = 128;
  int64_t seq = 32;  // positions
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t ffn = 256;  // dense MLP width
  // Mixture of experts (experts > 0): router + `experts` MLPs of width
  // expert_ffn, each token sent to its top `topk` experts.
  int64_t experts = 0;
  int64_t topk = 2;
  int64_t expert_ffn = 128;
  double layernorm_eps = 1e-5;
};

// Params of `cfg` in registration order, named as Megatron-LM names them.
ModelSpec TinyTransformerSpec(const std::string& name, const TinyTransformerConfig& cfg);

// Mean cross entropy over the scored targets of `batch` (a 0-d tensor of
// the params' dtype). `params` follow TinyTransformerSpec's order, all of
// one floating dtype, which is the compute dtype. Builds the autograd graph
// when grad mode is on and params require grad.
at::Tensor TinyTransformerLoss(const TinyTransformerConfig& cfg,
                               const std::vector<at::Tensor>& params, const TokenBatch& batch);

}  // namespace shardcheck
