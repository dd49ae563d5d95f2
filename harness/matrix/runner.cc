#include "harness/matrix/runner.h"

#include <torch/csrc/api/include/torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "harness/cell/compare.h"
#include "harness/cell/run_files.h"
#include "harness/matrix/cell_checks.h"
#include "harness/matrix/cell_phases.h"
#include "harness/matrix/external_cell.h"
#include "harness/matrix/result_json.h"
#include "harness/matrix/routing_check.h"
#include "spec/config_json.h"
#include "spec/failpoint.h"

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string Shell(const char* cmd) {
  std::string out;
  if (FILE* f = ::popen(cmd, "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof(buf), f)) out += buf;
    ::pclose(f);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// The run of a cell: the reference once, the uninterrupted distributed run
// (saving at the plan's step), then the resumed run at the plan's DP size;
// the distributed runs as thread-ranks, or as rank processes.
CellRuns RunCellRuns(const Cell& cell, const std::string& cell_dir, const CellExecution& how,
                     const GradSource& source) {
  const OracleRunOptions run = CellRunOptions(cell, source);
  CellRuns r;
  r.reference = RunReferenceTrajectory(source, run.setup, run.dtype, run.steps, run.micro_batches,
                                       at::kCPU, run.grad_reduction);
  std::tie(r.count_atol, r.count_rtol) = CountTolerance(cell);
  r.groups = ComparisonGroups(RouteParams(run.setup, run.model.params));
  auto phase = [&](CellPhase p) {
    if (how.processes) return RunCellPhaseAsProcesses(cell, p, cell_dir, how.ranks);
    TrainOptions t = CellPhaseOptions(cell, p, cell_dir, run);
    t.source = &source;
    t.reference = &r.reference;
    return RunTrainOnThreads(t, PhaseDp(cell, p), how.ranks.timeout, how.thread_comm);
  };
  r.uninterrupted = phase(CellPhase::kUninterrupted);
  if (!r.uninterrupted.errors.empty())
    throw Error("uninterrupted run: " + r.uninterrupted.errors.front());
  if (cell.resume) {
    r.resumed = phase(CellPhase::kResumed);
    if (!r.resumed->errors.empty()) throw Error("resumed run: " + r.resumed->errors.front());
  }
  return r;
}

// Fills the result of a cell whose runs finished: schema, groups, series,
// checks with the verdict (the routing check last, for composite setups),
// memory and layout.
void AddRunsAndChecks(const Cell& cell, const CellRuns& r, const GradSource& source,
                      nlohmann::ordered_json& j) {
  const bool has_loss = source.has_loss();
  nlohmann::ordered_json schema = nlohmann::ordered_json::object();
  for (const OptimizerConfig* c : cell.optimizer.setup.Children())
    schema[c->kind()] = c->schema().Names();
  j["schema"] = schema;
  j["groups"] = r.groups;
  j["rel_floor"] = RelFloor(r.count_atol);
  nlohmann::ordered_json runs;
  runs["reference"] = ReferenceJson(r.reference, has_loss);
  runs["uninterrupted"] = RunJson(r.uninterrupted.root, cell.dp, r.groups);
  if (r.resumed) {
    runs["resumed"] = RunJson(r.resumed->root, cell.resume->dp, r.groups);
    runs["resumed"]["save_at"] = cell.resume->save_at;
  }
  j["runs"] = runs;
  CheckList checks;
  for (const CheckSpec& c : cell.checks) {
    const CheckOutcome out = EvaluateCheck(c, cell, r);
    checks.Add(CheckJson(c, out), out);
  }
  if (cell.optimizer.setup.IsComposite()) {
    const CheckOutcome out = CheckRouting(cell.optimizer.setup, source.spec().params);
    checks.Add(RoutingCheckJson(out), out);
  }
  checks.WriteTo(j);
  j["memory"] = MemoryJson(r.uninterrupted.root.memory);
  j["layout"] = r.uninterrupted.root.layout;
}

}  // namespace

nlohmann::ordered_json EnvironmentJson(const std::string& backend) {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  // SHARDCHECK_COMMIT names the commit when the binary runs outside its
  // checkout (ci/pr-report builds from exported trees).
  const char* given = std::getenv("SHARDCHECK_COMMIT");
  std::string commit = given && *given ? given : Shell("git rev-parse --short HEAD 2>/dev/null");
  if (commit.empty()) commit = "unknown";
  return {
      {"commit", commit},
      {"libtorch", std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) +
                       "." + std::to_string(TORCH_VERSION_PATCH)},
      {"backend", backend},
      {"host", host},
      {"shardcheck", "0.1"}};
}

namespace {

// The fields every cell result starts with: format, id, scenario, config,
// environment, `verdict`, no error and no first failure yet.
nlohmann::ordered_json CellResultHead(const Cell& cell, const std::string& verdict) {
  nlohmann::ordered_json j;
  j["format"] = "shardcheck-cell-result/1";
  j["id"] = cell.id;
  j["scenario"] = {{"name", cell.scenario}, {"file", cell.file}, {"line", cell.line}};
  j["config"] = CellConfigJson(cell);
  j["environment"] = EnvironmentJson(cell.backend);
  j["verdict"] = verdict;
  j["error"] = nullptr;
  j["first_failure"] = nullptr;
  return j;
}

}  // namespace

namespace {

// docs/scenarios.md, "Expected failures": a cell expected to fail that
// failed a check (the expected one, when `failing_check` names it) is an
// xfail; one that passed is an xpass, which fails the run (a fixed upstream
// bug must show, so its expectation is dropped). An error stays an error:
// a broken environment is never the bug that was expected.
void ApplyExpectation(const Cell& cell, nlohmann::ordered_json& j) {
  if (!cell.expect_fail) return;
  const ExpectedFailure& e = *cell.expect_fail;
  const std::string got = j["verdict"];
  j["expected"] = {
      {"verdict", "fail"},
      {"reason", e.reason},
      {"failing_check", e.check.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.check)},
      {"got", got}};
  if (got == "fail") {
    const std::string failed = j["first_failure"].value("check", std::string());
    if (e.check.empty() || failed == e.check) {
      j["verdict"] = "xfail";
    } else {
      j["first_failure"]["detail"] =
          "expected " + e.check + " to fail (" + e.reason + "), but " + failed +
          " failed first: " + j["first_failure"].value("detail", std::string());
    }
  } else if (got == "pass") {
    j["verdict"] = "xpass";
    j["first_failure"] = {{"check", "expected-failure"},
                          {"step", nullptr},
                          {"tensor", nullptr},
                          {"detail", "expected to fail (" + e.reason +
                                         "), but every check passed: if the bug is fixed, "
                                         "drop the expectation"}};
  }
}

}  // namespace

nlohmann::ordered_json RunCell(const Cell& cell, const std::string& cell_dir,
                               const CellExecution& how) {
  const auto t0 = std::chrono::steady_clock::now();
  nlohmann::ordered_json j = CellResultHead(cell, "error");
  try {
    fs::remove_all(cell_dir);
    fs::create_directories(cell_dir);
    if (cell.system.External()) {
      RunExternalCell(cell, cell_dir, how.ranks.timeout, j);
    } else {
      const auto source = MakeGradSource(cell.model, cell.seed);
      const CellRuns r = RunCellRuns(cell, cell_dir, how, *source);
      AddRunsAndChecks(cell, r, *source, j);
    }
  } catch (const std::exception& e) {
    // A checkpoint the cell saved and its own load refused is a failed
    // check (strict-load), though the cell could not go on.
    const bool refused = cell.resume && IsStrictLoadRefusal(e.what());
    j["verdict"] = "error";
    j["error"] = e.what();
    j["first_failure"] = {{"check", refused ? "strict-load" : "run"},
                          {"step", refused ? nlohmann::json(cell.resume->save_at) : nullptr},
                          {"tensor", nullptr},
                          {"detail", e.what()}};
  }
  ApplyExpectation(cell, j);
  j["wall_s"] = Seconds(t0);
  try {
    fs::create_directories(cell_dir);
    WriteJsonFile((fs::path(cell_dir) / "result.json").string(), j);
  } catch (const std::exception& e) {
    std::cerr << "shardcheck: cannot write " << cell_dir << "/result.json: " << e.what() << "\n";
  }
  return j;
}

nlohmann::ordered_json SkippedCell(const Cell& cell, const std::string& reason) {
  nlohmann::ordered_json j = CellResultHead(cell, "skipped");
  j["skipped"] = reason;
  j["wall_s"] = 0.0;
  return j;
}

namespace {

// GPUs handed to the cells that run at once, disjoint: a cell takes all it
// needs or waits.
class GpuPool {
 public:
  explicit GpuPool(int count) : free_(static_cast<size_t>(count), true) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    std::stringstream list(visible ? visible : "");
    for (std::string id; std::getline(list, id, ',');) names_.push_back(id);
  }
  int size() const { return static_cast<int>(free_.size()); }

  // `n` free GPUs as a CUDA_VISIBLE_DEVICES value, waiting until there are.
  std::string Acquire(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return std::count(free_.begin(), free_.end(), true) >= n; });
    std::string ids;
    for (size_t i = 0; i < free_.size() && n > 0; ++i) {
      if (!free_[i]) continue;
      free_[i] = false;
      --n;
      ids += (ids.empty() ? "" : ",") + (i < names_.size() ? names_[i] : std::to_string(i));
    }
    return ids;
  }
  void Release(const std::string& ids) {
    std::lock_guard<std::mutex> lock(mu_);
    std::stringstream list(ids);
    for (std::string id; std::getline(list, id, ',');)
      for (size_t i = 0; i < free_.size(); ++i)
        if ((i < names_.size() ? names_[i] : std::to_string(i)) == id) free_[i] = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> free_;
  std::vector<std::string> names_;  // CUDA_VISIBLE_DEVICES entries, when set
};

// A skipped cell's result, also written to CELL_DIR/result.json so the
// reason travels with the cell's folder.
nlohmann::ordered_json WriteSkipped(const Cell& c, const std::string& dir, const std::string& why) {
  nlohmann::ordered_json j = SkippedCell(c, why);
  try {
    fs::remove_all(dir);
    fs::create_directories(dir);
    WriteJsonFile((fs::path(dir) / "result.json").string(), j);
  } catch (const std::exception& e) {
    std::cerr << "shardcheck: cannot write " << dir << "/result.json: " << e.what() << "\n";
  }
  return j;
}

// True when `cell` runs on GPUs: an NCCL cell, or every cell with --device cuda.
bool OnGpus(const Cell& cell, bool cuda) { return cuda || cell.backend == "nccl"; }

// Runs one cell the way the options and its backend say (see RunnerOptions).
nlohmann::ordered_json RunOne(const Cell& c, const RunnerOptions& o, bool cuda, GpuPool& gpus) {
  const std::string dir = (fs::path(o.out_dir) / c.id).string();
  if (!c.unsupported.empty()) return WriteSkipped(c, dir, "not supported: " + c.unsupported);
  CellExecution how;
  how.ranks.timeout = o.timeout;
  // An external system's adapter places its own ranks (on the CPU today).
  if (c.system.External() || !OnGpus(c, cuda)) {
    how.processes = o.processes;
    how.thread_comm = o.thread_comm;
    nlohmann::ordered_json j = RunCell(c, dir, how);
    if (!o.processes) j["thread_comm"] = ThreadCommName(o.thread_comm);
    return j;
  }
  const int need = std::max(c.dp, c.ResumeDp());
  if (need > gpus.size())
    return WriteSkipped(c, dir,
                        "needs " + std::to_string(need) + " GPUs (one per rank), " +
                            std::to_string(gpus.size()) + " available");
  how.processes = true;
  how.ranks.device = "cuda";
  how.ranks.gpus = gpus.Acquire(need);
  nlohmann::ordered_json j = RunCell(c, dir, how);
  gpus.Release(how.ranks.gpus);
  j["gpus"] = how.ranks.gpus;
  return j;
}

// The cells of `scenarios` that match the filter (all are validated first).
std::vector<const Cell*> SelectCells(const std::vector<Scenario>& scenarios,
                                     const std::string& filter) {
  std::vector<const Cell*> cells;
  for (const auto& sc : scenarios)
    for (const auto& c : sc.cells)
      if (filter.empty() || MatchesFilter(c, filter)) cells.push_back(&c);
  if (cells.empty()) throw ScenarioError("no cell matches --filter '" + filter + "'");
  return cells;
}

// Runs every cell on `jobs` workers, with a progress line per finished cell.
std::vector<nlohmann::ordered_json> RunAll(const std::vector<const Cell*>& cells,
                                           const RunnerOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<nlohmann::ordered_json> results(cells.size());
  std::atomic<size_t> next{0}, done{0};
  std::mutex print_mu;
  const bool cuda =
      o.device == DeviceKind::kCuda || (o.device == DeviceKind::kAuto && CudaUsable());
  GpuPool gpus(o.gpus >= 0 ? o.gpus : (CudaUsable() ? static_cast<int>(at::getNumGPUs()) : 0));
  const bool tty = ::isatty(STDOUT_FILENO);
  auto worker = [&] {
    for (size_t i = next++; i < cells.size(); i = next++) {
      const Cell& c = *cells[i];
      results[i] = RunOne(c, o, cuda, gpus);
      const size_t d = ++done;
      if (o.quiet) continue;
      std::lock_guard<std::mutex> lock(print_mu);
      const double elapsed = Seconds(t0);
      const double eta = elapsed / static_cast<double>(d) * static_cast<double>(cells.size() - d);
      std::printf("%s[%zu/%zu] %-5s %s  %.1fs  (elapsed %.0fs, ETA %.0fs)%s", tty ? "\r\033[K" : "",
                  d, cells.size(), results[i]["verdict"].get<std::string>().c_str(), c.id.c_str(),
                  results[i]["wall_s"].get<double>(), elapsed, eta, tty ? "" : "\n");
      if (tty && results[i]["verdict"] != "pass") std::printf("\n");
      std::fflush(stdout);
    }
  };
  std::vector<std::thread> pool;
  for (int k = 0; k < std::max(1, o.jobs); ++k) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (tty && !o.quiet) std::printf("\n");
  return results;
}

struct Counts {
  int passed = 0, failed = 0, errored = 0, skipped = 0, xfailed = 0, xpassed = 0;
  // An xpass fails the run as a failed check does.
  bool Failed() const { return failed + errored + xpassed > 0; }
};

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

// results.json (docs/results-schema.md).
nlohmann::ordered_json AggregateJson(const std::vector<Scenario>& scenarios,
                                     const std::vector<const Cell*>& cells,
                                     const std::vector<nlohmann::ordered_json>& results,
                                     const std::string& started, double wall_s) {
  nlohmann::ordered_json agg;
  agg["format"] = "shardcheck-results/1";
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = *cells[i];
    const auto& r = results[i];
    list.push_back(
        {{"id", c.id},
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
         {"wall_s", r["wall_s"]}});
  }
  const Counts n = Count(results);
  agg["verdict"] = n.Failed() ? "fail" : "pass";
  agg["started"] = started;
  agg["wall_s"] = wall_s;
  agg["environment"] = EnvironmentJson(cells.front()->backend);
  // The registry's order of setups, which the report's matrix rows follow.
  agg["optimizer_order"] = OptimizerSetup::Names();
  agg["scenarios"] = nlohmann::ordered_json::array();
  for (const auto& sc : scenarios)
    agg["scenarios"].push_back(
        {{"name", sc.name}, {"file", sc.file}, {"description", sc.description}});
  agg["counts"] = {{"cells", cells.size()}, {"passed", n.passed},   {"failed", n.failed},
                   {"errored", n.errored},  {"skipped", n.skipped}, {"xfailed", n.xfailed},
                   {"xpassed", n.xpassed}};
  agg["cells"] = list;
  // Failpoints switched on for this run, and those its code reached
  // (docs/detection.md; `shardcheck selftest` reads them).
  const std::string enabled = LoadFailpoints();
  if (!enabled.empty())
    agg["failpoints"] = {{"enabled", enabled}, {"reached", FailpointsReached()}};
  return agg;
}

void PrintTable(const std::vector<const Cell*>& cells,
                const std::vector<nlohmann::ordered_json>& results) {
  size_t w = 4;
  for (const Cell* c : cells) w = std::max(w, c->id.size());
  std::printf("\n%-*s  %-7s  %7s  %s\n", static_cast<int>(w), "cell", "verdict", "time",
              "first failure");
  for (size_t i = 0; i < cells.size(); ++i) {
    const auto& r = results[i];
    std::string ff;
    if (!r["first_failure"].is_null()) ff = r["first_failure"]["detail"].get<std::string>();
    if (r.contains("skipped")) ff = r["skipped"].get<std::string>();
    if (ff.size() > 120) ff = ff.substr(0, 117) + "...";
    std::printf("%-*s  %-7s  %6.1fs  %s\n", static_cast<int>(w), cells[i]->id.c_str(),
                r["verdict"].get<std::string>().c_str(), r["wall_s"].get<double>(), ff.c_str());
  }
}

}  // namespace

int RunScenarios(const std::vector<std::string>& files, const RunnerOptions& o) {
  // Everything is validated before anything runs.
  std::vector<Scenario> scenarios;
  for (const auto& f : files) scenarios.push_back(LoadScenario(f));
  const std::vector<const Cell*> cells = SelectCells(scenarios, o.filter);
  fs::create_directories(o.out_dir);
  const auto t0 = std::chrono::steady_clock::now();
  char started[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const std::vector<nlohmann::ordered_json> results = RunAll(cells, o);
  WriteJsonFile((fs::path(o.out_dir) / "results.json").string(),
                AggregateJson(scenarios, cells, results, started, Seconds(t0)));
  PrintTable(cells, results);
  const Counts n = Count(results);
  std::string expected;
  if (n.xfailed + n.xpassed > 0)
    expected = ", " + std::to_string(n.xfailed) + " failed as expected (xfail), " +
               std::to_string(n.xpassed) + " passed unexpectedly (xpass)";
  std::printf(
      "\n%d passed, %d failed, %d errored, %d skipped%s of %zu cells in %.1fs; results in "
      "%s/results.json\n",
      n.passed, n.failed, n.errored, n.skipped, expected.c_str(), cells.size(), Seconds(t0),
      o.out_dir.c_str());
  // docs/reliability.md, "Exit codes": a failed check (or an xpass) wins over an error.
  return n.failed + n.xpassed > 0 ? 1 : (n.errored > 0 ? 3 : 0);
}

}  // namespace shardcheck
