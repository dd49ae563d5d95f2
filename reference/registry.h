// The reference updates, one per optimizer kind: plain tensor math over
// state looked up by schema key, in the op order of docs/optimizers.md.
// Each reference/<name>.cc registers its kinds' updates; CMake generates the
// list that calls them. Registration is not thread-safe (start-up only);
// lookups are.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "spec/kernel_interface.h"
#include "spec/schema.h"

namespace shardcheck {

// The state tensors of one param, by schema key. Holds references into the
// caller's vector; a reference update replaces the tensors it updates.
class StateRefs {
 public:
  StateRefs(const StateSchema& schema, std::vector<at::Tensor>& tensors);
  // The tensor of `key`. Throws Error naming the key and the schema.
  at::Tensor& operator[](const std::string& key);

 private:
  const StateSchema& schema_;
  std::vector<at::Tensor>& tensors_;
};

// One update of one param: `p` (fp32 main param, model shape) and the state
// are replaced by their updated values; `g` (fp32, model shape) is read only.
using ReferenceUpdate = void (*)(const StepContext& ctx, at::Tensor& p, const at::Tensor& g,
                                 StateRefs& state);

// Throws Error when `kind` has no reference update.
ReferenceUpdate FindReferenceUpdate(const std::string& kind);
// Throws Error on a second registration of `kind`.
void RegisterReferenceUpdate(const std::string& kind, ReferenceUpdate update);

// Runs the reference update of `config`'s kind on one param at step `t`
// with the group's wd_mult and the schedule factor `lr_factor`; `state` in
// the kind's schema order. What the reference optimizer does per param, for
// tests that drive a single update.
void ReferenceStep(const OptimizerConfig& config, double wd_mult, int64_t t, double lr_factor,
                   at::Tensor& p, const at::Tensor& g, std::vector<at::Tensor>& state);

// Defined in the list CMake generates from reference/*.cc: registers every
// built-in reference update. Called once, by the first lookup.
void RegisterBuiltinReferenceUpdates();

}  // namespace shardcheck

// Opens the registration function of one reference/ file:
//   SHARDCHECK_REGISTER_REFERENCES(adam) { RegisterReferenceUpdate("adam", &AdamUpdate); }
// The generated list declares and calls RegisterReferencesOf_adam().
#define SHARDCHECK_REGISTER_REFERENCES(file) void RegisterReferencesOf_##file()
