// Running an external system's adapter (docs/systems.md, "The protocol"):
// where the adapter and its Python are, one run of a plan as one adapter
// process per rank started through `shardcheck launch` (torchrun's
// environment), and what the ranks reported.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/systems/system.h"

namespace shardcheck {

// The program that drives `system`: argv before `--plan`.
struct AdapterCommand {
  std::string python;  // the interpreter
  std::string script;  // systems/<system>/adapter.py
};

// Finds the adapter of `system`. The root is SHARDCHECK_SYSTEMS_ROOT or the
// folder above this binary's (build/shardcheck -> the checkout); the
// interpreter SHARDCHECK_SYSTEMS_PYTHON or <root>/.venv-torch/bin/python
// (made by ci/setup-systems). Throws Error (kEnvironment) naming what is
// missing and the command that sets it up.
AdapterCommand FindAdapter(const SystemSpec& system);

// What one rank wrote in RUN_DIR/rank_<r>.json.
struct AdapterRank {
  int rank = 0;
  std::string status;  // ok | system_failed | bad_plan | environment | timeout | adapter_error
  int exit_code = 0;
  nlohmann::json error;     // null, or {type, message, phase, step, where, traceback}
  nlohmann::json versions;  // {package: version}
  std::vector<std::string> notes;
};

// One run of a plan by the adapter's rank processes.
struct AdapterRun {
  std::string run;                 // single_device | uninterrupted | resumed
  int exit_code = 0;               // the launcher's (the failing rank's code)
  std::vector<AdapterRank> ranks;  // the rank files found, by rank
  std::string log;                 // the ranks' prefixed output

  bool Ok() const { return exit_code == 0; }
  // The system under test raised (exit 1 and a rank's status system_failed): a finding.
  bool SystemFailed() const;
  // The rank whose report explains the failure (the system's error first), or null.
  const AdapterRank* Culprit() const;
  // One line: "uninterrupted run, rank 1, save at step 4: KeyError: 'step'
  // (megatron/core/optimizer/distrib_optimizer.py:1222 in ...)", or the
  // launcher's exit and the log's last error line when no rank reported.
  std::string Failure() const;
};

// Runs `run` of the plan at `plan_path` as `dp` adapter processes, output
// into RUN_DIR.log beside the plan; `timeout_s` bounds the whole run.
// Returns what happened (never throws for the adapter's own failure);
// throws Error when the launcher cannot be started.
AdapterRun RunAdapter(const AdapterCommand& adapter, const std::string& plan_path,
                      const std::string& run, int dp, double timeout_s);

}  // namespace shardcheck
