// A scenario cell's distributed runs as rank processes, one per rank,
// started through `shardcheck launch` (NCCL cells: one process per GPU, as
// NCCL requires; any cell with `shardcheck run --processes`). Each rank
// process runs `shardcheck cell-rank`, which rebuilds the cell from its
// scenario file and runs one phase of it (harness/matrix/cell_phases.h)
// exactly as the threads of `shardcheck run` would, on its own device;
// rank 0 writes the phase's result.json and final state into the cell's
// folder, and the runner reads them back.
#pragma once

#include <chrono>
#include <string>

#include "harness/cell/thread_ranks.h"
#include "harness/matrix/cell_phases.h"

namespace shardcheck {

struct RankProcesses {
  std::chrono::milliseconds timeout{120000};  // per collective
  std::string device = "cpu";                 // the ranks' --device
  std::string gpus;  // CUDA_VISIBLE_DEVICES of the ranks ("3,4"); empty: left as it is
};

// Runs `phase` of `cell` as PhaseDp(cell, phase) rank processes, its output
// in CELL_DIR/<phase>.log. Returns rank 0's TrainResult; `errors` holds one
// line when the ranks failed (their exit, and the log's last error line).
ThreadRun RunCellPhaseAsProcesses(const Cell& cell, CellPhase phase, const std::string& cell_dir,
                                  const RankProcesses& how);

// What each rank process does (`shardcheck cell-rank`): finds cell `cell_id`
// of scenario `file`, connects to its peers from the launcher's environment
// (NCCL on cuda, Gloo on cpu), runs `phase` and, on rank 0, writes
// CELL_DIR/<phase>.result.json and CELL_DIR/<phase>.final.safetensors.
// Throws Error when the cell is unknown or the world size is not the
// phase's DP size.
void RunCellRank(const std::string& file, const std::string& cell_id, CellPhase phase,
                 const std::string& cell_dir, const std::string& device,
                 std::chrono::milliseconds timeout);

}  // namespace shardcheck
