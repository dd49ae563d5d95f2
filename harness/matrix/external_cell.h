// A cell of an external system under test (docs/systems.md): shardcheck
// writes the plan, runs the adapter's single-device, uninterrupted and
// resumed runs (each as one adapter process per rank through the
// launcher), reads the snapshots they wrote, runs its own reference, and
// judges the cell's checks on them.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/cell/reference_trajectory.h"
#include "harness/matrix/cell_checks.h"
#include "harness/matrix/scenario.h"
#include "harness/systems/adapter_process.h"
#include "harness/systems/run_snapshots.h"

namespace shardcheck {

// What an external cell ran.
struct ExternalRuns {
  ReferenceTrajectory reference;        // shardcheck's reference, for checks against the reference
  RunSnapshots single_device;           // the system's own optimizer on one device
  RunSnapshots uninterrupted;           // at the cell's DP size, saving at the plan's step
  std::optional<RunSnapshots> resumed;  // from that checkpoint, at the plan's DP size
  // Comparison groups: params, main_params (bf16 models), then every state
  // key the system's optimizer keeps (its own names, e.g. torch's `step`).
  std::vector<std::string> groups;
};

// Checks `check` on the runs (docs/systems.md, "Checks on an external
// system"): bitwise or within a tolerance, every distributed run's every
// snapshot against the system's single device, the resumed run against the
// uninterrupted one, or against shardcheck's reference (the registry
// schema's keys; a key the system lacks fails).
CheckOutcome EvaluateExternalCheck(const CheckSpec& check, const Cell& cell,
                                   const ExternalRuns& runs);

// Runs an external cell in `cell_dir` and fills its result `j` (schema,
// groups, runs, checks, verdict, first_failure, adapter). An exception the
// system under test raised is a failed check `system-raised` naming the
// run, rank, phase, step and the system's file:line. Throws Error for what
// is not the system's failure (no adapter, bad plan, environment).
void RunExternalCell(const Cell& cell, const std::string& cell_dir,
                     std::chrono::milliseconds timeout, nlohmann::ordered_json& j);

}  // namespace shardcheck
