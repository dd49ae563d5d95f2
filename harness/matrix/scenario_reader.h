// The typed reader of a scenario's keys (docs/scenarios.md, "Keys"): each
// dimension's values with the node they came from, so that the expansion
// into cells (harness/matrix/scenario.cc) can point its errors at them.
// Internal to the scenario files.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/matrix/scenario.h"
#include "harness/matrix/scenario_parser.h"

namespace shardcheck {
namespace scenario_detail {

// A value of the sharding-type axis: one of Megatron's four types, or dcp.
struct ShardingChoice {
  ShardingType type = ShardingType::kDpReshardable;
  bool dcp = false;
};

// Everything a cell is made from, each value with the node it came from.
struct Dimensions {
  int steps = 12;
  int micro_batches = 24;
  std::string backend = "gloo";
  GradReduction grad_reduction = GradReduction::kFp32;
  std::vector<std::pair<SystemSpec, YAML::Node>> systems;
  std::vector<std::pair<std::string, YAML::Node>> models;
  std::vector<std::string> dtypes = {"fp32"};
  std::vector<std::pair<ScenarioOptimizer, YAML::Node>> optimizers;
  std::vector<ShardingChoice> types;
  std::vector<std::pair<int, YAML::Node>> dps;
  std::vector<std::pair<std::optional<ResumePlan>, YAML::Node>> plans;
  std::vector<int64_t> buckets = {0};
  std::vector<uint64_t> seeds = {1};
  std::vector<std::pair<CheckSpec, YAML::Node>> checks;
  std::optional<ExpectedFailure> expect_fail;  // the top-level `expect: fail`
};


// Every dimension of the scenario `root` (its keys already checked).
Dimensions ReadDimensions(const Parser& p, const YAML::Node& root);

// One value of a dimension, as an include entry gives it.
std::vector<ScenarioOptimizer> ReadOptimizer(const Parser& p, const YAML::Node& n);
SystemSpec ReadSystem(const Parser& p, const YAML::Node& n);
std::string ReadModel(const Parser& p, const YAML::Node& n);
std::string ReadDtype(const Parser& p, const YAML::Node& n);
ShardingChoice ReadShardingType(const Parser& p, const YAML::Node& n);
// A resume plan {save_at, dp: N|same, bucket_size} for a run of `steps`
// steps of `m` micro-batches.
ResumePlan ReadPlan(const Parser& p, const YAML::Node& n, int steps, int m);

// `expect: fail` and its `reason` in mapping `n` (the scenario or an include
// entry); nothing when `n` has neither.
std::optional<ExpectedFailure> ReadExpect(const Parser& p, const YAML::Node& n);
// A reason must point into docs/findings.md ("docs/findings.md#<anchor>"),
// and the anchor must be a heading there when that file can be found.
void CheckFindingReason(const Parser& p, const YAML::Node& n, const std::string& reason);

}  // namespace scenario_detail
}  // namespace shardcheck
