// The plan shardcheck hands an adapter (docs/systems.md, "The plan"): the
// params in pid order, the oracle's seed, M and zero mask, the resolved
// optimizer setup with its param groups and the lr factor of every step,
// the sharding type, and the runs (DP size, step range, save and load).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/systems/system.h"
#include "spec/config.h"
#include "testing/model_spec.h"

namespace shardcheck {

inline constexpr const char* kPlanFormat = "shardcheck-plan/1";
// The runs of a plan, by name.
inline constexpr const char* kSingleDeviceRun = "single_device";
inline constexpr const char* kUninterruptedRun = "uninterrupted";
inline constexpr const char* kResumedRun = "resumed";

struct PlanRun {
  std::string name;
  int dp = 1;
  int first_step = 1, last_step = 1;
  int save_at = 0;    // save after this step (0: never)
  bool load = false;  // starts from the checkpoint of step first_step - 1
};

struct PlanInputs {
  std::string cell;  // the cell id
  SystemSpec system;
  ModelSpec model;
  std::string dtype;  // fp32 | bf16
  uint64_t seed = 1;
  int micro_batches = 24;
  OptimizerSetup setup;
  std::string sharding_type;  // "dcp" or a Megatron type's name
  int steps = 1;
  double timeout_s = 120;  // each collective's
  std::vector<PlanRun> runs;
  std::vector<std::string> inject;  // adapter-side bugs a test switches on ("load_model_only")
};

// The plan as JSON (format shardcheck-plan/1). The checkpoint folder is
// "ckpt" beside the plan.
nlohmann::ordered_json PlanJson(const PlanInputs& inputs);

}  // namespace shardcheck
