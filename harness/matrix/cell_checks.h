// The checks of one scenario cell, evaluated on its finished runs
// (docs/scenarios.md, "Checks"; docs/results-schema.md, "checks"): each
// check of the cell gives a verdict (pass, fail or n/a), the first failing
// step and tensor, and the largest differences seen.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/cell/reference_trajectory.h"
#include "harness/cell/thread_ranks.h"
#include "harness/matrix/scenario.h"

namespace shardcheck {

// What a cell ran: the reference, the uninterrupted distributed run (which
// saved at the plan's step) and, with a resume plan, the resumed run.
struct CellRuns {
  ReferenceTrajectory reference;
  ThreadRun uninterrupted;
  std::optional<ThreadRun> resumed;
  // Comparison groups: params, main_params, then every child's state keys.
  std::vector<std::string> groups;
  // The tolerance counted element by element during the runs (the first
  // tolerance check's; 0/0 when the cell has none).
  double count_atol = 0.0, count_rtol = 0.0;
};

enum class Verdict { kPass, kFail, kNotApplicable };
std::string VerdictName(Verdict v);  // "pass", "fail", "n/a"

struct CheckOutcome {
  Verdict verdict = Verdict::kPass;
  std::string run = "uninterrupted+resumed";  // which runs were judged
  std::string against = "reference";          // against what
  std::optional<int64_t> step;                // first failing step
  std::string tensor, detail;
  double max_abs = 0, max_rel = 0;
  int64_t max_ulp = 0;
  // Elements outside atol + rtol * |b|, summed over the compared steps, when
  // a tolerance check judged element by element (unset: judged from the
  // max figures).
  std::optional<int64_t> violations;
};

// Evaluates one check of `cell` on its runs.
CheckOutcome EvaluateCheck(const CheckSpec& check, const Cell& cell, const CellRuns& runs);

}  // namespace shardcheck
