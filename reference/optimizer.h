// The reference optimizer: a single-device, full-model optimizer that runs
// one setup (an elementwise kind, or a whole-param kind such as Muon chained
// with its scalar optimizer) exactly as docs/optimizers.md defines it, each
// param through its kind's registered reference update (reference/*.cc).
//
// It owns fp32 main params (float() of the initial model params), the model
// params (the main params rounded to the model dtype after every step), one
// state tensor per (param, schema key) and one int64 step counter shared by
// every child; the setup's lr schedule scales every group's lr. Not
// thread-safe; one instance per thread.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "spec/config.h"
#include "spec/params.h"
#include "spec/routing.h"
#include "spec/schema.h"
#include "spec/state_dict.h"

namespace shardcheck {

// sqrt of the sum of squares of every element, accumulated in fp64.
double GlobalGradNorm(const std::vector<at::Tensor>& grads);

class ReferenceOptimizer {
 public:
  // `initial` holds one tensor per param in model shape and model dtype
  // (fp32 or bf16; all the same), on any device; they are copied to
  // `device`. Throws Error on a mismatch.
  ReferenceOptimizer(OptimizerSetup setup, std::vector<ParamInfo> params,
                     const std::vector<at::Tensor>& initial, at::Device device = at::kCPU);

  // One step on the global fp32 gradients (one per param, model shape, any
  // device: copied to this optimizer's). Clips first when
  // setup.max_grad_norm > 0. Grads are not modified.
  void Step(const std::vector<at::Tensor>& grads);

  int64_t step() const { return step_; }
  double last_grad_norm() const { return last_grad_norm_; }
  // The main child's lr at the last step (its lr times the schedule factor).
  double last_lr() const { return last_lr_; }
  const OptimizerSetup& setup() const { return setup_; }
  const std::vector<ParamInfo>& params() const { return params_; }
  const std::vector<ChildOptimizer>& children() const { return children_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }
  c10::ScalarType model_dtype() const { return model_dtype_; }
  at::Device device() const { return device_; }
  // The child that owns param `i` and its schema.
  int ChildOf(int i) const { return child_of_[static_cast<size_t>(i)]; }
  const StateSchema& SchemaOf(int i) const { return children_[ChildOf(i)].schema; }

  // On device().
  const std::vector<at::Tensor>& model_params() const { return model_; }
  const std::vector<at::Tensor>& main_params() const { return main_; }
  // State tensor `key` of param `i`; throws Error if the owner's schema has no `key`.
  const at::Tensor& State(int i, const std::string& key) const;

  // A host copy of everything needed to continue the run bit for bit.
  StateDict GetStateDict() const;
  // Validates names, keys, shapes, dtypes, optimizer and groups first; on any
  // mismatch throws Error (naming missing and unexpected keys) and leaves the
  // optimizer unchanged.
  void LoadStateDict(const StateDict& sd);

 private:
  OptimizerSetup setup_;
  std::vector<ParamInfo> params_;
  std::vector<ChildOptimizer> children_;
  std::vector<ParamGroup> groups_;
  std::vector<int> child_of_;
  std::vector<double> wd_mult_;
  c10::ScalarType model_dtype_;
  at::Device device_;
  std::vector<at::Tensor> model_;  // model shape, model dtype
  std::vector<at::Tensor> main_;   // model shape, fp32
  // state_[i][k]: param i, key k of its owner's schema; model shape, schema dtype.
  std::vector<std::vector<at::Tensor>> state_;
  int64_t step_ = 0;
  double last_grad_norm_ = 0.0;
  double last_lr_ = 0.0;
};

}  // namespace shardcheck
