#include "harness/matrix/run_results.h"

#include "harness/matrix/cell_result.h"
#include "harness/matrix/interrupt_watch.h"
#include "spec/failpoint.h"

namespace shardcheck {

Counts Count(const std::vector<nlohmann::ordered_json>& results) {
  Counts n;
  for (const auto& r : results) {
    const std::string v = r["verdict"];
    n.passed += v == "pass";
    n.failed += v == "fail";
    n.errored += v == "error";
    n.skipped += v == "skipped";
    n.xfailed += v == "xfail";
    n.xpassed += v == "xpass";
  }
  return n;
}

std::string RunVerdict(const Counts& n, bool interrupted) {
  if (n.Failed()) return "fail";
  if (interrupted) return "interrupted";
  return n.Ran() == 0 ? "nothing-checked" : "pass";
}

Finished FinishedCells(const std::vector<const Cell*>& cells,
                       const std::vector<nlohmann::ordered_json>& results) {
  Finished f;
  for (size_t i = 0; i < cells.size(); ++i)
    if (!results[i].is_null()) {
      f.cells.push_back(cells[i]);
      f.results.push_back(results[i]);
    }
  return f;
}

namespace {

// One entry of results.json's "cells".
nlohmann::ordered_json CellEntryJson(const Cell& c, const nlohmann::ordered_json& r) {
  return {{"id", c.id},
          {"dir", c.id},
          {"scenario", c.scenario},
          {"system", c.system.Name()},
          {"optimizer", c.optimizer.label},
          {"sharding_type", c.ShardingName()},
          {"dp", c.dp},
          {"resume_dp", c.resume ? nlohmann::json(c.resume->dp) : nlohmann::json(nullptr)},
          {"save_at", c.resume ? nlohmann::json(c.resume->save_at) : nlohmann::json(nullptr)},
          {"dtype", c.dtype},
          {"model", c.model},
          {"steps", c.steps},
          {"verdict", r["verdict"]},
          {"first_failure", r["first_failure"]},
          {"skipped", r.contains("skipped") ? r["skipped"] : nlohmann::ordered_json(nullptr)},
          {"wall_s", r["wall_s"]}};
}


}  // namespace

nlohmann::ordered_json AggregateJson(const std::vector<Scenario>& scenarios, const Finished& f,
                                     const RunEnd& end) {
  nlohmann::ordered_json agg;
  agg["format"] = "shardcheck-results/1";
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (size_t i = 0; i < f.cells.size(); ++i) list.push_back(CellEntryJson(*f.cells[i], f.results[i]));
  const Counts n = Count(f.results);
  agg["verdict"] = RunVerdict(n, end.interrupted_by != 0);
  agg["interrupted"] = end.interrupted_by != 0;
  if (end.interrupted_by != 0) agg["interrupted_by"] = SignalName(end.interrupted_by);
  agg["started"] = end.started;
  agg["wall_s"] = end.wall_s;
  agg["environment"] = EnvironmentJson(scenarios.front().cells.front().backend);
  // The registry's order of setups, which the report's matrix rows follow.
  agg["optimizer_order"] = OptimizerSetup::Names();
  agg["scenarios"] = nlohmann::ordered_json::array();
  for (const auto& sc : scenarios)
    agg["scenarios"].push_back(
        {{"name", sc.name}, {"file", sc.file}, {"description", sc.description}});
  agg["counts"] = {{"cells", end.selected},  {"passed", n.passed},   {"failed", n.failed},
                   {"errored", n.errored},   {"skipped", n.skipped}, {"xfailed", n.xfailed},
                   {"xpassed", n.xpassed},   {"not_run", end.selected - f.cells.size()}};
  agg["cells"] = list;
  // Failpoints switched on for this run, and those its code reached
  // (docs/detection.md; `shardcheck selftest` reads them).
  const std::string enabled = LoadFailpoints();
  if (!enabled.empty())
    agg["failpoints"] = {{"enabled", enabled}, {"reached", FailpointsReached()}};
  return agg;
}

}  // namespace shardcheck
