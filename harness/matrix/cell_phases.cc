#include "harness/matrix/cell_phases.h"

#include <filesystem>

#include "spec/error.h"

namespace shardcheck {

std::string CellPhaseName(CellPhase phase) {
  return phase == CellPhase::kUninterrupted ? "uninterrupted" : "resumed";
}

CellPhase ParseCellPhase(const std::string& name) {
  if (name == "uninterrupted") return CellPhase::kUninterrupted;
  if (name == "resumed") return CellPhase::kResumed;
  throw Error("unknown cell phase '" + name + "' (uninterrupted or resumed)");
}

int PhaseDp(const Cell& cell, CellPhase phase) {
  return phase == CellPhase::kUninterrupted ? cell.dp : cell.ResumeDp();
}

OracleRunOptions CellRunOptions(const Cell& cell, const GradSource& source) {
  OracleRunOptions run;
  run.model = source.spec();
  run.setup = cell.optimizer.setup;
  run.steps = cell.steps;
  run.seed = cell.seed;
  run.dtype = ParseDtype(cell.dtype);
  run.micro_batches = cell.micro_batches;
  run.grad_reduction = cell.grad_reduction;
  run.Validate();
  return run;
}

std::pair<double, double> CountTolerance(const Cell& cell) {
  for (const auto& c : cell.checks)
    if (c.kind == CheckKind::kTolerance) return {c.atol, c.rtol};
  return {0.0, 0.0};
}

TrainOptions CellPhaseOptions(const Cell& cell, CellPhase phase, const std::string& cell_dir,
                              const OracleRunOptions& run) {
  if (phase == CellPhase::kResumed && !cell.resume)
    throw Error("cell " + cell.id + " has no resume plan");
  TrainOptions t;
  t.run = run;
  t.compare_reference = true;
  std::tie(t.compare_atol, t.compare_rtol) = CountTolerance(cell);
  t.bucket_size = cell.bucket_size;
  t.sharding_type = cell.sharding_type;
  const std::string ckpt = (std::filesystem::path(cell_dir) / "ckpt").string();
  if (phase == CellPhase::kUninterrupted) {
    if (cell.resume) {
      t.save_at = cell.resume->save_at;
      t.save_dir = ckpt;
    }
  } else {
    t.load_dir = ckpt;
    if (cell.resume->bucket_size) t.bucket_size = *cell.resume->bucket_size;
  }
  return t;
}

}  // namespace shardcheck
