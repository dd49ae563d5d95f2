// The runs of one scenario cell, as options: the oracle-run options every
// run of the cell shares, and the TrainOptions of each phase (the
// uninterrupted run, which saves at the plan's step, and the resumed run at
// the plan's DP size). One definition for both ways a cell runs: ranks as
// threads of `shardcheck run`, or rank processes (harness/matrix/cell_processes.h).
#pragma once

#include <string>

#include "harness/cell/dist_train.h"
#include "harness/matrix/scenario.h"
#include "harness/models/grad_source.h"

namespace shardcheck {

enum class CellPhase { kUninterrupted, kResumed };
std::string CellPhaseName(CellPhase phase);         // "uninterrupted" | "resumed"
CellPhase ParseCellPhase(const std::string& name);  // throws Error on another name
int PhaseDp(const Cell& cell, CellPhase phase);     // the phase's DP size

// Model (the source's spec), setup, steps, seed, dtype, M; validated.
OracleRunOptions CellRunOptions(const Cell& cell, const GradSource& source);

// The tolerance counted element by element during the runs: the first
// tolerance check's (atol, rtol), or (0, 0) when the cell has none.
std::pair<double, double> CountTolerance(const Cell& cell);

// The phase's TrainOptions, with the checkpoint under `cell_dir`/ckpt;
// `source` and `reference` are left null (the caller's to set).
TrainOptions CellPhaseOptions(const Cell& cell, CellPhase phase, const std::string& cell_dir,
                              const OracleRunOptions& run);

}  // namespace shardcheck
