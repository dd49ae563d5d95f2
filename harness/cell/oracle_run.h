// Runs the reference optimizer on oracle gradients.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "harness/models/grad_reduction.h"
#include "reference/optimizer.h"
#include "spec/config.h"
#include "testing/model_spec.h"
#include "testing/oracle.h"

namespace shardcheck {

struct OracleRunOptions {
  ModelSpec model;
  OptimizerSetup setup;
  int steps = 10;
  uint64_t seed = 1234;
  c10::ScalarType dtype = at::kFloat;  // model param dtype: fp32 or bf16
  int micro_batches = kDefaultMicroBatches;
  // Where the optimizer's tensors live (the oracle computes on the host and
  // its gradients are copied there).
  at::Device device = at::kCPU;
  // Threads each rank splits its fused CPU shard kernels over (--threads);
  // any count gives the same bits (kernels/parallel_elementwise.h).
  int kernel_threads = 1;
  // How data-parallel gradients are reduced (harness/models/grad_reduction.h);
  // the reference reduces its M micro-batches the same way.
  GradReduction grad_reduction = GradReduction::kFp32;

  // Throws Error naming the first invalid option (e.g. a whole-param kind
  // that needs 2-D params on a model without a 2-D hidden weight).
  void Validate() const;
};

// Initial model params p0 of every param (model dtype).
std::vector<at::Tensor> InitialParams(const ModelSpec& model, uint64_t seed, c10::ScalarType dtype);

// Global gradients G[step] of every param (fp32, model shape).
std::vector<at::Tensor> GlobalGrads(const ModelSpec& model, uint64_t seed, uint64_t step,
                                    int micro_batches);

// sqrt(sum over params of |after - before|^2), accumulated in fp64.
double UpdateNorm(const std::vector<at::Tensor>& before, const std::vector<at::Tensor>& after);

using StepCallback = std::function<void(const ReferenceOptimizer& opt, double update_norm)>;

// Builds the reference from the oracle's initial params and runs opts.steps
// steps; calls `on_step` after each. Returns the optimizer.
ReferenceOptimizer RunReferenceOnOracle(const OracleRunOptions& opts,
                                        const StepCallback& on_step = nullptr);

}  // namespace shardcheck
