// results.json of a run (docs/results-schema.md): the counts of its
// cells' verdicts, the run's verdict, and one entry per finished cell.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/matrix/scenario.h"

namespace shardcheck {

struct Counts {
  int passed = 0, failed = 0, errored = 0, skipped = 0, xfailed = 0, xpassed = 0;
  // An xpass fails the run as a failed check does.
  bool Failed() const { return failed + errored + xpassed > 0; }
  // Cells whose checks ran (every verdict but skipped).
  int Ran() const { return passed + failed + errored + xfailed + xpassed; }
};

// The verdicts of `results` counted.
Counts Count(const std::vector<nlohmann::ordered_json>& results);

// The run's verdict: a failure wins; then a run stopped by a signal; then a
// run in which no cell ran (every one skipped) checked nothing and is no pass.
std::string RunVerdict(const Counts& n, bool interrupted);

// What finished of a run: the cells (in selection order) with their results.
struct Finished {
  std::vector<const Cell*> cells;
  std::vector<nlohmann::ordered_json> results;
};

// The cells whose result is not null (those that finished).
Finished FinishedCells(const std::vector<const Cell*>& cells,
                       const std::vector<nlohmann::ordered_json>& results);

// How a run ended, beside its finished cells.
struct RunEnd {
  std::string started;
  double wall_s = 0.0;
  size_t selected = 0;     // cells selected; more than finished when interrupted
  int interrupted_by = 0;  // the signal that stopped the run, 0: none
};

// results.json.
nlohmann::ordered_json AggregateJson(const std::vector<Scenario>& scenarios, const Finished& f,
                                     const RunEnd& end);

}  // namespace shardcheck
