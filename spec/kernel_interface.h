// The interface between the registry and the fast paths: what one update of
// one param group sees (StepContext), and the two kinds of fused kernels a
// registry entry carries. The generic loops around the per-element kernels
// live in kernels/; the per-optimizer kernels in optimizers/.
#pragma once

#include <cstdint>
#include <vector>

namespace at {
class Tensor;
}  // namespace at

namespace shardcheck {

class OptimizerConfig;

// One update of one param group at step t. Scalars are computed from these
// in double and rounded to fp32 once (docs/optimizers.md).
struct StepContext {
  const OptimizerConfig* config = nullptr;  // the child's hyperparameters
  int64_t step = 0;                         // t, counting from 1 at the first update
  double lr = 0.0;            // this step's lr: the config's lr times the schedule factor
  double weight_decay = 0.0;  // the config's weight decay times the group's wd_mult
};

inline constexpr int kMaxStateKeys = 8;

// A contiguous run of one sharded param: fp32 main param, reduced grad and
// state tensors in schema order, all `numel` long and not overlapping. The
// updated param is also written, rounded to the model dtype, to
// `model_bf16` (bf16 bits, round to nearest even) or `model_fp32` when one
// of them is set.
struct ElementwiseSpan {
  int64_t numel = 0;
  float* main = nullptr;
  const float* grad = nullptr;
  float* state[kMaxStateKeys] = {};
  uint16_t* model_bf16 = nullptr;
  float* model_fp32 = nullptr;
};

// Per-step fp32 scalars of an elementwise kernel, type-erased.
struct ScalarBlock {
  alignas(16) unsigned char bytes[256];
};

// The fused shard kernel of an elementwise kind: `prepare` computes the
// step's scalars once per param group, `run_cpu` (and `run_cuda`) updates
// one span.
struct ElementwiseKernel {
  int state_count = 0;  // equals the schema's key count
  void (*prepare)(const StepContext& ctx, ScalarBlock& out) = nullptr;
  void (*run_cpu)(const ScalarBlock& scalars, const ElementwiseSpan& span) = nullptr;
  // The same update on device memory, launched on `stream` (a cudaStream_t);
  // null in a build without CUDA.
  void (*run_cuda)(const ScalarBlock& scalars, const ElementwiseSpan& span, void* stream) = nullptr;
  explicit operator bool() const { return run_cpu != nullptr && prepare != nullptr; }
};

// The update of a whole-param kind on one whole param owned by this rank:
// `main` (fp32, model shape) and `state` (schema order, model shape) are
// replaced by their updated values; `grad` (fp32, model shape) is read only.
using WholeParamKernel = void (*)(const StepContext& ctx, at::Tensor& main, const at::Tensor& grad,
                                  std::vector<at::Tensor>& state);

}  // namespace shardcheck
