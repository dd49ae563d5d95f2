// The learning-rate schedule of a run (docs/optimizers.md, "LR schedule";
// Megatron-LM's OptimizerParamScheduler, simplified): a linear warm-up of
// `warmup_steps` updates, then `decay_steps` updates of cosine or linear
// decay from max_lr to min_lr, then min_lr; `constant` stays at max_lr after
// the warm-up. All of it in double; the step's fp32 scalars are rounded from
// the result as every optimizer's scalars are.
//
// The schedule yields a factor f(t) = lr(t) / max_lr, and every param group
// of every child uses group_lr * f(t), so children with their own lr follow
// the same shape. Unlike Megatron's lr_decay_iters, decay_steps counts the
// updates after the warm-up.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace shardcheck {

enum class LrDecayStyle { kConstant, kLinear, kCosine };

std::string LrDecayStyleName(LrDecayStyle s);  // "constant", "linear", "cosine"
// Throws Error listing the three names.
LrDecayStyle ParseLrDecayStyle(const std::string& name);

struct LrSchedule {
  LrDecayStyle style = LrDecayStyle::kConstant;
  int64_t warmup_steps = 0;  // W >= 0
  int64_t decay_steps = 0;   // D >= 0, counted after the warm-up
  double min_lr = 0.0;       // in the units of the peak lr
  // The peak lr the factor is taken against; 0: the run's lr (its main
  // child's). Set when a run continues with a checkpoint's schedule.
  double peak_lr = 0.0;

  // The peak: peak_lr, or `run_lr` when peak_lr is 0.
  double Peak(double run_lr) const { return peak_lr > 0.0 ? peak_lr : run_lr; }
  // The lr of update t (t >= 1) for a run whose lr is `run_lr`.
  double LrAt(int64_t t, double run_lr) const;
  // f(t) = LrAt(t) / peak; exactly 1 for a constant schedule without warm-up
  // (and whenever the peak is 0).
  double Factor(int64_t t, double run_lr) const;
  // True when the schedule is constant at max_lr from the first update.
  bool IsConstant() const;
  // Throws Error naming the first invalid field (run_lr: the run's lr).
  void Validate(double run_lr) const;
  // "cosine, warmup 4, decay 8, min_lr 1e-05" or "constant".
  std::string Describe() const;
  // Same style, warm-up, decay and min_lr (peaks aside).
  bool SameShape(const LrSchedule& o) const;
  bool operator==(const LrSchedule& o) const;
  bool operator!=(const LrSchedule& o) const { return !(*this == o); }
};

// {"style", "warmup_steps", "decay_steps", "min_lr"}.
nlohmann::ordered_json LrScheduleJson(const LrSchedule& s);
// Throws Error naming the missing or malformed key.
LrSchedule LrScheduleFromJson(const nlohmann::json& j);

}  // namespace shardcheck
