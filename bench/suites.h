// The benchmark families shardcheck_bench registers besides the optimizer
// step (optimizer_step_bench.cc): each .cc of bench/ registers its own.
#pragma once

#include <string>

namespace shardcheck::bench {

// dist_step/... and dist_state/... (dist_step_bench.cc).
void RegisterDistributedBenchmarks();
// checkpoint/... (checkpoint_bench.cc); their files go under `dir`
// (default out/bench/scratch), set before the benchmarks run.
void RegisterCheckpointBenchmarks();
void SetCheckpointScratchDir(const std::string& dir);
// newton_schulz/... and at_mm/... (newton_schulz_bench.cc).
void RegisterNewtonSchulzBenchmarks();

}  // namespace shardcheck::bench
