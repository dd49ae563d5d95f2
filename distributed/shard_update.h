// Fused elementwise shard updates of the distributed side: one pass over a
// contiguous slice of main params, gradient and state, performing exactly
// the op sequence of docs/optimizers.md in the same order (this file is
// built with -ffp-contract=off like the whole project, so the reference's
// bits come out). Scalars are prepared once per step by the Prepare*
// functions, from the same OptimizerConfig the reference uses.
#pragma once

#include <cstdint>

#include "reference/config.h"

namespace shardcheck {

// Per-step fp32 scalars of Adam/AdamW for one param group.
struct AdamScalars {
  bool decoupled = false;  // AdamW
  bool decay = false;      // wd != 0
  float decay_factor = 1;  // float(1 - lr*wd), decoupled only
  float wd = 0;            // float(wd), L2 only
  float b1 = 0, omb1 = 0, b2 = 0, omb2 = 0, eps = 0;
  float bc2_sqrt = 1, step_size = 0;
};
AdamScalars PrepareAdam(const OptimizerConfig& c, double wd_mult, int64_t step);

struct LionScalars {
  bool decay = false;
  float decay_factor = 1;
  float b1 = 0, omb1 = 0, b2 = 0, omb2 = 0, lr = 0;
};
LionScalars PrepareLion(const OptimizerConfig& c, double wd_mult);

// Updates p[0..n), m, v in place from g. Arrays must not overlap.
void AdamShardUpdate(const AdamScalars& s, float* p, const float* g, float* m, float* v, int64_t n);
void LionShardUpdate(const LionScalars& s, float* p, const float* g, float* m, int64_t n);

}  // namespace shardcheck
