#include "harness/cell/reference_trajectory.h"

#include <cmath>
#include <limits>

#include "reference/optimizer.h"

namespace shardcheck {

std::vector<at::Tensor> HostCopies(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : tensors) out.push_back(t.is_cpu() ? t : t.cpu());
  return out;
}

double IndependentGradNorm(const std::vector<at::Tensor>& grads) {
  double sumsq = 0.0;
  for (const at::Tensor& g : grads) {
    const at::Tensor host = g.to(at::kCPU, at::kFloat).contiguous();
    const float* v = host.data_ptr<float>();
    for (int64_t e = 0; e < host.numel(); ++e) sumsq += static_cast<double>(v[e]) * v[e];
  }
  return std::sqrt(sumsq);
}

ReferenceTrajectory RunReferenceTrajectory(const GradSource& source, const OptimizerSetup& setup,
                                           c10::ScalarType dtype, int steps, int micro_batches,
                                           at::Device device, GradReduction reduction) {
  ReferenceOptimizer opt(setup, source.spec().params, source.InitialParams(dtype), device);
  ReferenceTrajectory t;
  t.snapshots.push_back(opt.GetStateDict());
  std::vector<at::Tensor> grads;
  for (int s = 1; s <= steps; ++s) {
    double loss_sum = 0.0;
    if (reduction == GradReduction::kExact) {
      ExactGrads exact = ExactReduceGrads(source, HostCopies(opt.model_params()), s, 0,
                                          micro_batches, micro_batches, [](at::Tensor&, bool) {});
      grads = std::move(exact.grads);
      loss_sum = exact.loss;
    } else {
      loss_sum = source.RankGrads(HostCopies(opt.model_params()), s, 0, micro_batches,
                                  micro_batches, grads);
    }
    t.gradient_norm.push_back(IndependentGradNorm(grads));
    opt.Step(grads);
    t.loss.push_back(source.has_loss() ? loss_sum / micro_batches
                                       : std::numeric_limits<double>::quiet_NaN());
    t.grad_norm.push_back(opt.last_grad_norm());
    t.lr.push_back(opt.last_lr());
    t.snapshots.push_back(opt.GetStateDict());
  }
  return t;
}

}  // namespace shardcheck
