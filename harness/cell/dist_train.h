// One rank of a distributed run: the DistributedOptimizer on this rank's
// micro-batches (oracle gradients or a real tiny model) and the reference
// trajectory of the same run; after every step this rank's shard (main
// params and every state tensor of the owning child's schema) and every
// gathered model param are compared with the reference (bytes, and the
// tolerance when one is given), and the figures are all-reduced so every
// rank reaches the same verdict.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "distributed/checkpoint.h"
#include "distributed/communicator.h"
#include "distributed/distrib_optimizer.h"
#include "harness/cell/oracle_run.h"
#include "harness/cell/reference_trajectory.h"
#include "harness/models/grad_source.h"

namespace shardcheck {

struct TrainOptions {
  // Setup, steps, seed, dtype, M, and the model spec (for real models: the
  // source's spec).
  OracleRunOptions run;
  // The gradients; null: the oracle on run.model with run.seed.
  const GradSource* source = nullptr;
  // The reference to compare with; null with compare_reference: computed
  // on every rank. Must cover run.steps.
  const ReferenceTrajectory* reference = nullptr;
  // Besides bytes, count elements outside |a - b| <= atol + rtol * |b|.
  double compare_atol = 0.0;
  double compare_rtol = 0.0;
  int64_t bucket_size = 0;
  bool compare_reference = false;
  // Save after step `save_at` (0: never) into `save_dir` as `sharding_type`.
  int save_at = 0;
  std::string save_dir;
  ShardingType sharding_type = ShardingType::kDpReshardable;
  // Load before the first step (empty: start from the oracle's initial
  // params); the run then continues from the loaded step to run.steps.
  std::string load_dir;
  LoadOptions load_options;
  // Called on every rank after each distributed step, before comparing
  // (tests inject faults through it).
  std::function<void(DistributedOptimizer&, int64_t step)> after_step;
};

// Figures of one comparison group at one step, over all ranks.
struct GroupStep {
  std::string group;           // "params", "main_params" or a state key
  int64_t mismatches = 0;      // elements whose bytes differ
  int64_t tol_violations = 0;  // elements outside the tolerance
  double max_abs = 0.0;
  double max_rel = 0.0;      // against max(|b|, RelFloor(compare_atol)) (compare.h)
  int64_t max_ulp = 0;       // over same-sign pairs
  int64_t sign_changes = 0;  // differing pairs of opposite sign (no ULP figure)
};

struct StepRecord {
  int64_t step = 0;
  bool after_load = false;  // the comparison right after a load (no step taken)
  double grad_norm = 0.0;  // this run's global grad norm (before clipping)
  // With a reference: its grad norm and the independent fp64 norm of the
  // step's global gradients (ReferenceTrajectory::gradient_norm); NaN without.
  double reference_grad_norm = std::numeric_limits<double>::quiet_NaN();
  double gradient_norm = std::numeric_limits<double>::quiet_NaN();
  double lr = 0.0;                // the main child's lr of this step (schedule applied)
  double loss = 0.0;              // mean micro-batch loss (NaN without loss)
  std::vector<GroupStep> groups;  // empty without --compare-reference
};

struct FirstMismatch {
  int64_t step = 0;
  int rank = 0;
  std::string tensor;  // e.g. "state.exp_avg.decoder.layers.0.mlp.linear_fc1.bias"
  std::string detail;  // the comparator's summary
};

struct TrainResult {
  bool compared = false;
  int64_t resumed_from = 0;  // step of the loaded checkpoint (0: fresh start)
  bool ok = true;
  std::vector<StepRecord> steps;
  std::optional<FirstMismatch> first_mismatch;
  std::vector<MemoryFigures> memory;  // per rank (complete on rank 0 only)
  StateDict final_state;              // model space, on rank 0 only
  nlohmann::ordered_json layout;      // the sharded child's layout facts
  // Exact gradient reduction (harness/models/grad_reduction.h), over every
  // rank and step of the run: micro-batch gradient elements that were
  // nonzero but fell below one unit of the grid (lost), and all nonzero
  // ones. 0 with fp32 reduction.
  int64_t grad_below_unit = 0;
  int64_t grad_nonzero = 0;
};

// A load refused by the strict checks of LoadCheckpoint (an input error)
// inside a run is rethrown with this prefix, so the scenario runner can tell
// a refused checkpoint, which is a failed check (strict-load), from a run
// that broke.
inline constexpr const char* kStrictLoadRefused = "strict load refused the checkpoint: ";
bool IsStrictLoadRefusal(const std::string& message);

// The comparison groups, identical on every rank: params, main_params, then
// every state key of every child's schema (first appearance order).
std::vector<std::string> ComparisonGroups(const std::vector<ChildOptimizer>& children);

// Runs to opts.run.steps on `comm`. DP size (comm.size()) must divide M.
// Collective; progress lines go to `log` on rank 0 when non-null.
TrainResult RunDistributed(const TrainOptions& opts, Communicator& comm, std::ostream* log);

}  // namespace shardcheck
