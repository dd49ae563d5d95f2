// Where a run's gradients come from: the exact oracle (docs/oracle.md) or
// a real tiny model on synthetic data (docs/models.md). The distributed run
// and the reference trajectory both draw from one GradSource, so they see
// the same data.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "testing/model_spec.h"

namespace shardcheck {

class GradSource {
 public:
  virtual ~GradSource() = default;
  // "oracle:gpt-tiny", "oracle:shapes:...", "oracle:sparse-mixed-small",
  // "gpt-tiny", "moe-tiny": the name MakeGradSource takes.
  virtual std::string name() const = 0;
  virtual const ModelSpec& spec() const = 0;
  // True when micro-batches have a loss (real models).
  virtual bool has_loss() const = 0;
  virtual std::vector<at::Tensor> InitialParams(c10::ScalarType dtype) const = 0;
  // The gradient a DP rank contributes at `step`: the sum over its
  // micro-batches [mb_begin, mb_end) divided by M (one IEEE division per
  // element), fp32 in model shape, written into `out` (resized as needed),
  // for the model params `params`. Returns the sum of the micro-batch
  // losses (0 without loss).
  virtual double RankGrads(const std::vector<at::Tensor>& params, int64_t step, int mb_begin,
                           int mb_end, int micro_batches, std::vector<at::Tensor>& out) const = 0;
  // The gradient of each micro-batch of [mb_begin, mb_end) on its own,
  // divided by M (one IEEE division per element): out[mb - mb_begin][param],
  // fp32 in model shape. Returns the sum of their losses. The exact
  // reduction (harness/models/grad_reduction.h) quantizes each.
  virtual double MicroBatchGrads(const std::vector<at::Tensor>& params, int64_t step, int mb_begin,
                                 int mb_end, int micro_batches,
                                 std::vector<std::vector<at::Tensor>>& out) const = 0;
};

// "oracle:<model>" (<model> as OracleModelByName takes: gpt-tiny,
// mixed-small, shapes:<list> as --shapes takes, or sparse-<one of those>,
// the oracle with its zero mask), "gpt-tiny" or "moe-tiny". Throws Error
// naming the accepted forms.
std::unique_ptr<GradSource> MakeGradSource(const std::string& model, uint64_t seed);
// The oracle on an explicit spec (its zero mask when spec.zero_mask).
std::unique_ptr<GradSource> MakeOracleSource(const ModelSpec& spec, uint64_t seed);

}  // namespace shardcheck
