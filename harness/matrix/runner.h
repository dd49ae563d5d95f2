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

#include "harness/cell/thread_ranks.h"
#include "harness/matrix/cell_processes.h"
#include "harness/matrix/scenario.h"
#include "spec/device.h"

namespace shardcheck {

struct RunnerOptions {
  std::string out_dir = "out/run";
  bool force = false;  // empty a non-empty out_dir first (otherwise refused)
  std::string filter;                         // MatchesFilter expression; empty: every cell
  int jobs = 1;                               // cells run at once
  bool quiet = false;                         // no live progress line
  std::chrono::milliseconds timeout{120000};  // per collective
  // Where cells run: kCpu runs Gloo cells (ranks as threads, or as
  // processes with `processes`) and NCCL cells on GPUs; kCuda runs every
  // cell on GPUs over NCCL; kAuto is kCuda when a GPU is visible.
  DeviceKind device = DeviceKind::kCpu;
  bool processes = false;  // Gloo cells' ranks as processes through the launcher
  // What Gloo cells' thread-ranks talk through (harness/cell/thread_ranks.h).
  ThreadComm thread_comm = ThreadComm::kInProcess;
  // GPUs for GPU cells (ids 0..gpus-1 of CUDA_VISIBLE_DEVICES' order);
  // -1: every visible one. A cell whose larger DP size exceeds it is
  // skipped with the reason; cells that run at once get disjoint GPUs.
  int gpus = -1;
};

// How one cell runs: its ranks as threads of this process, or as rank
// processes (on GPUs: one per GPU of ranks.gpus).
struct CellExecution {
  bool processes = false;
  ThreadComm thread_comm = ThreadComm::kGloo;  // thread-ranks' communicator
  RankProcesses ranks;
};

// Runs one cell, writing its runs' files into `cell_dir`. Returns the
// cell's result (RunScenarios records it and writes it as
// CELL_DIR/result.json in one step, so an interrupt never finds a
// result.json the run's results.json leaves out); a cell that cannot run
// gets verdict "error" with the message (never throws for a cell's own
// failure).
nlohmann::ordered_json RunCell(const Cell& cell, const std::string& cell_dir,
                               const CellExecution& how);

// Loads every scenario (all are validated before anything runs), runs the
// matching cells, prints progress and a final table to stdout. Returns the
// exit code: 0 every cell that ran passed (or failed as expected) and one
// ran at least, 1 a cell failed (or passed unexpectedly), 3 a cell errored
// and none failed, or no cell ran (every one skipped); 2, bad input (a
// malformed scenario, duplicate cell ids, an --out that holds output), is
// thrown as Error. SIGINT/SIGTERM write results.json with the finished
// cells and `interrupted: true`, then exit 128 + the signal.
int RunScenarios(const std::vector<std::string>& files, const RunnerOptions& options);

}  // namespace shardcheck
