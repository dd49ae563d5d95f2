// Optimizer kinds that only the tests register, to exercise what no
// built-in kind does. `whole_adam`: AdamW's update applied to whole 2-D
// params with placement whole-param, so the layer-wise path, its
// checkpoints, memory accounting and comparisons carry two state keys
// (exp_avg, exp_avg_sq) and share key names with a scalar optimizer.
#pragma once

namespace shardcheck {

// Registers every test-only kind in the optimizer registry and its
// reference update. Idempotent; call before anything reads the registry.
void RegisterTestOnlyOptimizers();

}  // namespace shardcheck
