// Scenario files (docs/scenarios.md): YAML that parametrizes model x dtype
// x optimizer x sharding type x DP size x resume plan x bucket size x seed,
// with checks. Parsing validates everything before anything runs; every
// error is one line "file:line:column: what was expected".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "distributed/checkpoint_format.h"
#include "reference/config.h"
#include "reference/error.h"

namespace shardcheck {

// A scenario error: the CLI exits 2 with its one-line message.
class ScenarioError : public Error {
 public:
  using Error::Error;
};

struct CheckSpec {
  std::string kind;  // bitwise | tolerance | loss_continuity | loss_fall
  std::string on;    // params | main_params | state | loss
  double atol = 0.0;
  double rtol = 0.0;
  int64_t max_ulp = -1;  // -1: no ULP bound
  double min_fall = 0.0;  // loss_fall: (first - last) / first must reach this
  std::string Name() const;  // "bitwise-params", "tolerance-state", ...
};

struct ResumePlan {
  int save_at = 0;
  int dp = 0;                         // 0: the cell's own DP size
  std::optional<int64_t> bucket_size;  // a bucket-size change on resume
};

struct OptimizerEntry {
  std::string label;  // the setup name, or the entry's `label`
  OptimizerSetup setup;
};

// One cell of the expanded matrix, fully resolved.
struct Cell {
  std::string id;
  std::string scenario, file;
  int line = 0;  // of the scenario (or include entry) that produced it
  std::string model;  // oracle:gpt-tiny | oracle:shapes:<list> | gpt-tiny | moe-tiny
  std::string dtype;  // fp32 | bf16
  OptimizerEntry optimizer;
  ShardingType sharding_type = ShardingType::kDpReshardable;
  int dp = 1;
  std::optional<ResumePlan> resume;  // dp resolved (never 0)
  int steps = 12;
  int64_t bucket_size = 0;
  uint64_t seed = 1;
  int micro_batches = 24;
  std::string backend = "gloo";
  std::vector<CheckSpec> checks;

  bool RealModel() const { return model.rfind("oracle:", 0) != 0; }
  int ResumeDp() const { return resume ? resume->dp : dp; }
  // Labels for ctest: checkpoint, optimizer, sharding type, dpN (both DP sizes).
  std::vector<std::string> Labels() const;
};

struct Scenario {
  std::string file, name, description;
  std::vector<Cell> cells;  // expanded, excludes applied, includes added
};

// Parses, validates and expands `path`. Throws ScenarioError.
Scenario LoadScenario(const std::string& path);

// True if `cell` matches a --filter expression: comma-separated terms
// key=value (id, optimizer, sharding_type, dp, resume_dp, dtype, model,
// scenario) or a bare substring of the id; all terms must match.
bool MatchesFilter(const Cell& cell, const std::string& filter);

}  // namespace shardcheck
