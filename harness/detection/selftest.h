// `shardcheck selftest`: detection power (docs/detection.md). Runs scenario
// cells once clean and once per silent-bug failpoint, each failpoint in its
// own `shardcheck run` process (the switch is process-wide and `run`
// executes cells as threads), and asks of each: was the bug reached, and did
// a named check of the matrix fail on the state it damaged? Prints a table
// and writes OUT/selftest.json.
#pragma once

#include <string>
#include <vector>

namespace shardcheck {

struct SelftestOptions {
  // Scenario files (folders expand to their *.yaml): every failpoint runs
  // every cell of them. Empty: each failpoint runs its detection subset
  // (harness/detection/detection_plan.h) from `ci_dir`.
  std::vector<std::string> scenarios;
  std::string ci_dir = "scenarios/ci";
  std::string failpoint;  // only this one; empty: every silent failpoint
  int jobs = 1;           // `run` processes at once
  std::string out_dir = "out/selftest";
  bool quiet = false;  // no progress lines
};

// Runs the self-test. Returns the exit code: 0 every failpoint caught and
// the clean runs passed, 1 otherwise. Throws Error (kInput) on an unknown
// failpoint, a fault failpoint, a missing scenario or a failpoint without a
// detection subset; kEnvironment when a run cannot be started.
int RunSelftest(const SelftestOptions& options);

// `selftest --list`: every silent failpoint with where it acts, its
// detection subset and its bug, on stdout. Returns 0.
int ListSilentFailpoints();
// `selftest --names FILE`: their names, one per line (ctest reads them).
// Returns 0; throws Error (kEnvironment) when FILE cannot be written.
int WriteSilentFailpointNames(const std::string& path);

}  // namespace shardcheck
