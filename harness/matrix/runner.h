// The scenario runner: expands scenario files into cells and runs each
// (reference trajectory, uninterrupted distributed run that saves at the
// plan's step, resumed run at the plan's DP size), evaluates the cell's
// checks and writes DIR/<cell-id>/result.json and DIR/results.json
// (docs/results-schema.md).
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/matrix/scenario.h"

namespace shardcheck {

struct RunnerOptions {
  std::string out_dir = "out/run";
  std::string filter;                         // MatchesFilter expression; empty: every cell
  int jobs = 1;                               // cells run at once (each cell's ranks are threads)
  bool quiet = false;                         // no live progress line
  std::chrono::milliseconds timeout{120000};  // per collective
};

// Runs one cell with its ranks as threads, writing into `cell_dir`.
// Returns the cell's result.json; a cell that cannot run gets verdict
// "error" with the message (never throws for a cell's own failure).
nlohmann::ordered_json RunCell(const Cell& cell, const std::string& cell_dir,
                               std::chrono::milliseconds timeout);

// The environment block of results: commit, libtorch version, backend, host.
nlohmann::ordered_json EnvironmentJson(const std::string& backend);

// Loads every scenario (all are validated before anything runs), runs the
// matching cells, prints progress and a final table to stdout. Returns the
// exit code: 0 all passed, 1 a cell failed or errored, 2 bad input.
int RunScenarios(const std::vector<std::string>& files, const RunnerOptions& options);

}  // namespace shardcheck
