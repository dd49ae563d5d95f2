// Real tiny models on synthetic data (docs/models.md): a small decoder-only
// transformer ("gpt-tiny") and its top-2 mixture-of-experts twin
// ("moe-tiny"), written with plain ATen ops and autograd, trained on a
// sequence-repeat task whose batches are a pure function of (seed, step,
// micro-batch).
//
// Where the oracle (harness/oracle.h) gives exact gradients, these give the
// gradients of a real loss, so a run can show that the optimizer trains.
// Every call is deterministic: the same inputs give the same bytes (with one
// intra-op thread, which the callers set).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "testing/model_spec.h"

namespace shardcheck {

// A small libtorch model on synthetic data that is a pure function of
// (seed, step, micro-batch). Implementations are immutable after
// construction: const calls may run concurrently on different threads.
class TinyModel {
 public:
  virtual ~TinyModel() = default;

  // Params in registration order: names, shapes and roles, the same
  // ParamInfo the optimizers route on (Muon takes the 2-D hidden weights;
  // embeddings, the output head, biases and norms go to the scalar optimizer).
  virtual const ModelSpec& spec() const = 0;

  // Initial params, one per spec param in model shape and `dtype` (fp32 or
  // bf16; kDouble is accepted for tests), a pure function of `seed`: normal
  // weights (std 0.02; linear_proj and linear_fc2 weights 0.02/sqrt(2*layers)),
  // layernorm weights 1, biases 0, each rounded (RNE) to `dtype`.
  virtual std::vector<at::Tensor> InitialParams(uint64_t seed, c10::ScalarType dtype) const = 0;

  // Loss of micro-batch `mb` of step `step` for `params` (model shape, any
  // one floating dtype; fp32 and bf16 params are cast to fp32 for the
  // forward, fp64 params run in fp64). Its gradient, cast to fp32, is ADDED
  // into `grads` (one fp32 tensor per param, model shape; checked). The loss
  // is the mean cross entropy over the micro-batch's predicted tokens.
  // Throws Error on a count, shape or dtype mismatch, before touching `grads`.
  virtual double LossAndGrad(const std::vector<at::Tensor>& params, uint64_t seed, int64_t step,
                             int mb, std::vector<at::Tensor>& grads) const = 0;

  // The same loss without gradients.
  virtual double Loss(const std::vector<at::Tensor>& params, uint64_t seed, int64_t step,
                      int mb) const = 0;
};

// "gpt-tiny" or "moe-tiny"; throws Error naming the accepted names.
std::unique_ptr<TinyModel> MakeTinyModel(const std::string& name);

// The names MakeTinyModel accepts, in a fixed order.
const std::vector<std::string>& TinyModelNames();

// moe-tiny's spec: gpt-tiny's (GptTinySpec) with each layer's dense MLP
// replaced by a router (decoder.layers.N.mlp.router.weight, 4x64, role
// other: Muon takes it, as Megatron's rule does) and 4 experts
// (decoder.layers.N.mlp.experts.local_experts.E.linear_fc{1,2}.{weight,bias},
// fc1 128x64, fc2 64x128).
ModelSpec MoeTinySpec();

}  // namespace shardcheck
