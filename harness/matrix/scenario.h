// Scenario files (docs/scenarios.md): YAML that parametrizes model x dtype
// x optimizer x sharding type x DP size x resume plan x bucket size x seed,
// with checks. Parsing validates everything before anything runs; every
// error is one line "file:line:column: what was expected". Optimizer names,
// their hyperparameter keys and `optimizer: all` come from the registry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "distributed/checkpoint_format.h"
#include "harness/matrix/check_spec.h"
#include "harness/models/grad_reduction.h"
#include "harness/models/model_name.h"
#include "harness/systems/system.h"
#include "spec/config.h"
#include "spec/error.h"

namespace shardcheck {

// A scenario error: the CLI exits 2 with its one-line message.
class ScenarioError : public Error {
 public:
  using Error::Error;
};

struct ResumePlan {
  int save_at = 0;
  int dp = 0;                          // 0: the cell's own DP size
  std::optional<int64_t> bucket_size;  // a bucket-size change on resume
};

struct ScenarioOptimizer {
  std::string label;  // the setup name, or the entry's `label`
  OptimizerSetup setup;
};

// A cell that is expected to fail (`expect: fail` with a `reason`; docs/scenarios.md,
// "Expected failures"): a known upstream bug, described in docs/findings.md.
struct ExpectedFailure {
  std::string reason;  // "docs/findings.md#<anchor>", with words around it if any
  // The check that must fail first (`failing_check`), e.g. "system-raised" or
  // "bitwise-state-vs-single_device"; "" for any check.
  std::string check;
};

// One cell of the expanded matrix, fully resolved.
struct Cell {
  std::string id;
  std::string scenario, file;
  int line = 0;       // of the scenario (or include entry) that produced it
  SystemSpec system;  // the system under test (default: shardcheck's own)
  std::string model;  // oracle:<model> (OracleModelByName) | gpt-tiny | moe-tiny
  std::string dtype;  // fp32 | bf16
  ScenarioOptimizer optimizer;
  // The sharding type: one of Megatron's four, or (dcp) the checkpoint of
  // torch.distributed.checkpoint, which `sharding_type` then does not name.
  ShardingType sharding_type = ShardingType::kDpReshardable;
  bool dcp = false;
  int dp = 1;
  std::optional<ResumePlan> resume;  // dp resolved (never 0)
  int steps = 12;
  int64_t bucket_size = 0;
  uint64_t seed = 1;
  int micro_batches = 24;
  std::string backend = "gloo";
  // How data-parallel gradients are reduced (harness/models/grad_reduction.h):
  // `exact` makes a real model's training bitwise the same at every DP size.
  GradReduction grad_reduction = GradReduction::kFp32;
  std::vector<CheckSpec> checks;
  std::optional<ExpectedFailure> expect_fail;
  // Why the cell's system cannot run it (SystemUnsupported); "" when it can.
  // Such a cell is reported skipped with this reason, never run.
  std::string unsupported;
  // The scenario's `unchecked:` text: why its checks leave comparison
  // groups unchecked (UncheckedGroups, check_coverage.h); "" when none is given.
  std::string unchecked_reason;

  bool RealModel() const { return !ModelName::IsOracleText(model); }
  int ResumeDp() const { return resume ? resume->dp : dp; }
  // "dcp" or the Megatron type's name.
  std::string ShardingName() const;
  // Labels for ctest: checkpoint, optimizer, sharding type, dpN (both DP
  // sizes), dtype, model kind; an external system's cells: `systems` and the
  // system's label, and `checkpoint` only when they save and load.
  std::vector<std::string> Labels() const;
};

struct Scenario {
  std::string file, name, description;
  std::vector<Cell> cells;  // expanded, excludes applied, includes added
};

// Parses, validates and expands `path`. Throws ScenarioError.
Scenario LoadScenario(const std::string& path);
// The same, of a scenario file's text (no file access; the fuzz target's
// entry point). Errors name `path`.
Scenario ParseScenario(const std::string& text, const std::string& path);

// The value of a dimension of `cell` as scenario files and filters name it:
// id, system, optimizer, sharding_type, dp, resume_dp ("none" without a
// resume), dtype, model, bucket_size, seed, scenario. Throws Error on
// another key.
std::string CellDimension(const Cell& cell, const std::string& key);

// True if `cell` matches a --filter expression: comma-separated terms
// key=value (a CellDimension key) or a bare substring of the id; all terms
// must match. Throws Error on an unknown key.
bool MatchesFilter(const Cell& cell, const std::string& filter);

}  // namespace shardcheck
