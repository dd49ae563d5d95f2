// The parts of a cell's result.json (docs/results-schema.md) that every
// kind of cell shares: its config, the per-step series of a run, the
// reference's series and one check's entry.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/cell/dist_train.h"
#include "harness/cell/reference_trajectory.h"
#include "harness/matrix/cell_checks.h"
#include "harness/matrix/scenario.h"

namespace shardcheck {

// A number, or null when it is not finite (JSON has no NaN).
nlohmann::ordered_json Num(double v);

// A distributed run's series: dp, steps, after_load, loss (null when the
// run has none), grad_norm, lr, and per comparison group the figures of
// every step (max_abs, max_rel, max_ulp, mismatches, tol_violations,
// sign_changes); grad_grid for the exact reduction.
nlohmann::ordered_json RunJson(const TrainResult& r, int dp,
                               const std::vector<std::string>& groups);

// The reference's series: dp 1, steps, loss (or null), grad_norm, lr.
nlohmann::ordered_json ReferenceJson(const ReferenceTrajectory& reference, bool has_loss);

// "config": every dimension of the cell and its resolved optimizer setup.
nlohmann::ordered_json CellConfigJson(const Cell& cell);

// One entry of "checks".
nlohmann::ordered_json CheckJson(const CheckSpec& c, const CheckOutcome& out);
// The routing check's entry of "checks" (harness/matrix/routing_check.h).
nlohmann::ordered_json RoutingCheckJson(const CheckOutcome& out);
// The entry of a check that no CheckSpec describes (`routing`,
// `system-raised`): its kind is its name, no tolerance, no figures.
nlohmann::ordered_json NamedCheckJson(const std::string& name, const std::string& on,
                                      const CheckOutcome& out);

// The "checks" of a cell, in order, and its first failure.
class CheckList {
 public:
  // Appends one check's entry (CheckJson or RoutingCheckJson of `out`); the
  // first failing one becomes the first failure.
  void Add(nlohmann::ordered_json entry, const CheckOutcome& out);
  // Sets "checks", "verdict" (pass, or fail when a check failed) and
  // "first_failure" of a cell's result.
  void WriteTo(nlohmann::ordered_json& result) const;

 private:
  nlohmann::ordered_json checks_ = nlohmann::ordered_json::array();
  nlohmann::ordered_json first_failure_ = nullptr;
};

}  // namespace shardcheck
