#include "harness/matrix/runner.h"

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
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "harness/cell/compare.h"
#include "harness/cell/run_files.h"
#include "harness/cell/train_result_json.h"
#include "harness/matrix/cell_checks.h"
#include "harness/matrix/cell_phases.h"
#include "harness/matrix/cell_result.h"
#include "harness/cell/output_target.h"
#include "harness/matrix/check_coverage.h"
#include "harness/matrix/external_cell.h"
#include "harness/matrix/interrupt_watch.h"
#include "harness/matrix/result_json.h"
#include "harness/matrix/routing_check.h"
#include "harness/matrix/run_results.h"
#include "spec/config_json.h"
#include "spec/failpoint.h"

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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

// The folder of cell `c`'s files and result.json.
std::string CellDir(const RunnerOptions& o, const Cell& c) {
  return (fs::path(o.out_dir) / c.id).string();
}

// Writes a cell's result as CELL_DIR/result.json (a skipped cell's too, so
// the reason travels with the folder). A write that fails is reported and
// the run goes on: results.json still holds the result.
void WriteCellResult(const std::string& dir, const nlohmann::ordered_json& j) {
  try {
    fs::create_directories(dir);
    WriteJsonFile((fs::path(dir) / "result.json").string(), j);
  } catch (const std::exception& e) {
    std::cerr << "shardcheck: cannot write " << dir << "/result.json: " << e.what() << "\n";
  }
}

// A skipped cell's result, its folder emptied of an earlier run's files.
nlohmann::ordered_json Skipped(const Cell& c, const std::string& dir, const std::string& why) {
  std::error_code ignored;  // a folder that cannot be removed shows when its result.json is written
  fs::remove_all(dir, ignored);
  return SkippedCell(c, why);
}

// True when `cell` runs on GPUs: an NCCL cell, or every cell with --device cuda.
bool OnGpus(const Cell& cell, bool cuda) { return cuda || cell.backend == "nccl"; }

// Where this run places cells: on GPUs or not, and the GPUs it may use.
struct CellPlacement {
  bool cuda = false;  // every cell on GPUs (--device cuda, or auto with a GPU)
  GpuPool& gpus;
};

// Why `c` is not run, or "" when it is: a combination its system lacks, or
// more GPUs than this run has.
std::string SkipReason(const Cell& c, const CellPlacement& p) {
  if (!c.unsupported.empty()) return "not supported: " + c.unsupported;
  if (c.system.External() || !OnGpus(c, p.cuda)) return "";
  const int need = std::max(c.dp, c.ResumeDp());
  if (p.gpus.size() == 0 && !CudaUsable())
    return std::string(p.cuda ? "--device cuda" : "an NCCL cell") +
           " needs GPUs: this build or machine has no usable CUDA GPU";
  if (need > p.gpus.size())
    return "needs " + std::to_string(need) + " GPUs (one per rank), " +
           std::to_string(p.gpus.size()) + " available";
  return "";
}

// Runs one cell the way the options and its backend say (see RunnerOptions).
nlohmann::ordered_json RunOne(const Cell& c, const RunnerOptions& o, const CellPlacement& p) {
  const std::string dir = CellDir(o, c);
  const std::string skip = SkipReason(c, p);
  if (!skip.empty()) return Skipped(c, dir, skip);
  CellExecution how;
  how.ranks.timeout = o.timeout;
  // An external system's adapter places its own ranks (on the CPU today).
  if (c.system.External() || !OnGpus(c, p.cuda)) {
    how.processes = o.processes;
    how.thread_comm = o.thread_comm;
    nlohmann::ordered_json j = RunCell(c, dir, how);
    if (!o.processes) j["thread_comm"] = ThreadCommName(o.thread_comm);
    return j;
  }
  how.processes = true;
  how.ranks.device = "cuda";
  how.ranks.gpus = p.gpus.Acquire(std::max(c.dp, c.ResumeDp()));
  nlohmann::ordered_json j = RunCell(c, dir, how);
  p.gpus.Release(how.ranks.gpus);
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

// Cell ids are the names of the cells' folders: one id twice (the same
// file given twice, or two files that expand to one cell) would run into
// one folder and count twice.
void RefuseDuplicateCells(const std::vector<Scenario>& scenarios) {
  std::map<std::string, const Cell*> seen;
  for (const auto& sc : scenarios)
    for (const auto& c : sc.cells) {
      const auto [it, fresh] = seen.emplace(c.id, &c);
      if (fresh) continue;
      const Cell& first = *it->second;
      throw ScenarioError(c.file + ":" + std::to_string(c.line) + ": cell " + c.id +
                          " is also made by " + first.file + ":" + std::to_string(first.line) +
                          (first.file == c.file ? " (is the file given twice?)" : "") +
                          ": cell ids must be unique across the files of one run");
    }
}

// What the workers have finished, shared with the interrupt handler.
struct RunProgress {
  std::mutex mu;
  std::vector<nlohmann::ordered_json> results;  // null until the cell finished
  size_t done = 0;
  bool stopped = false;  // an interrupt wrote results.json: record nothing more
};

// Runs every cell on `jobs` workers, with a progress line per finished cell.
void RunAll(const std::vector<const Cell*>& cells, const RunnerOptions& o, const CellPlacement& p,
            RunProgress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0};
  const bool tty = ::isatty(STDOUT_FILENO);
  auto worker = [&] {
    for (size_t i = next++; i < cells.size(); i = next++) {
      const Cell& c = *cells[i];
      nlohmann::ordered_json r = RunOne(c, o, p);
      // Recorded and written in one step under the lock the interrupt
      // handler takes: its results.json lists every cell with a result.json.
      std::lock_guard<std::mutex> lock(progress.mu);
      if (progress.stopped) return;
      progress.results[i] = std::move(r);
      WriteCellResult(CellDir(o, c), progress.results[i]);
      const size_t d = ++progress.done;
      if (o.quiet) continue;
      const auto& ri = progress.results[i];
      const double elapsed = Seconds(t0);
      const double eta = elapsed / static_cast<double>(d) * static_cast<double>(cells.size() - d);
      std::printf("%s[%zu/%zu] %-5s %s  %.1fs  (elapsed %.0fs, ETA %.0fs)%s", tty ? "\r\033[K" : "",
                  d, cells.size(), ri["verdict"].get<std::string>().c_str(), c.id.c_str(),
                  ri["wall_s"].get<double>(), elapsed, eta, tty ? "" : "\n");
      if (tty && ri["verdict"] != "pass") std::printf("\n");
      std::fflush(stdout);
    }
  };
  std::vector<std::thread> pool;
  for (int k = 0; k < std::max(1, o.jobs); ++k) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (tty && !o.quiet) std::printf("\n");
}

void PrintTable(const std::vector<const Cell*>& cells,
                const std::vector<nlohmann::ordered_json>& results) {
  size_t w = 4;
  for (const Cell* c : cells) w = std::max(w, c->id.size());
  std::printf("\n%-*s  %-7s  %7s  %s\n", static_cast<int>(w), "cell", "verdict", "time",
              "first failure or skip reason");
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

// The run's first line: how many cells, and how many will be skipped and
// why (each distinct reason once).
void PrintPlan(const std::vector<const Cell*>& cells, const CellPlacement& p, const RunnerOptions& o) {
  std::map<std::string, int> reasons;
  int skipped = 0;
  for (const Cell* c : cells) {
    const std::string why = SkipReason(*c, p);
    if (why.empty()) continue;
    ++skipped;
    ++reasons[why];
  }
  std::printf("running %zu cells (%d to run, %d skipped), %d at once; results in %s\n",
              cells.size(), static_cast<int>(cells.size()) - skipped, skipped,
              std::max(1, o.jobs), o.out_dir.c_str());
  for (const auto& [why, k] : reasons) std::printf("  skipped %d: %s\n", k, why.c_str());
  std::fflush(stdout);
}

std::string Now() {
  char started[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return started;
}

// The last lines: counts, where the results are, and why nothing passed
// when no cell ran.
void PrintSummary(const Counts& n, size_t cells, double wall_s, const std::string& out_dir) {
  std::string expected;
  if (n.xfailed + n.xpassed > 0)
    expected = ", " + std::to_string(n.xfailed) + " failed as expected (xfail), " +
               std::to_string(n.xpassed) + " passed unexpectedly (xpass)";
  std::printf(
      "\n%d passed, %d failed, %d errored, %d skipped%s of %zu cells in %.1fs; results in "
      "%s/results.json\n",
      n.passed, n.failed, n.errored, n.skipped, expected.c_str(), cells, wall_s, out_dir.c_str());
  std::fflush(stdout);
  if (n.Ran() == 0)
    std::fprintf(stderr,
                 "shardcheck: error: no cell ran: all %zu were skipped (see the reasons above), so "
                 "nothing was checked\n",
                 cells);
}

}  // namespace

int RunScenarios(const std::vector<std::string>& files, const RunnerOptions& o) {
  // Everything is validated before anything runs.
  std::vector<Scenario> scenarios;
  for (const auto& f : files) scenarios.push_back(LoadScenario(f));
  RefuseDuplicateCells(scenarios);
  const std::vector<const Cell*> cells = SelectCells(scenarios, o.filter);
  PrepareFolderTarget(o.out_dir, o.force);
  for (const Cell* c : cells)
    if (const std::string w = UncheckedWarning(*c); !w.empty())
      std::cerr << "shardcheck: warning: " << w << "\n";
  GpuPool gpus(o.gpus >= 0 ? o.gpus : (CudaUsable() ? static_cast<int>(at::getNumGPUs()) : 0));
  const CellPlacement place{
      o.device == DeviceKind::kCuda || (o.device == DeviceKind::kAuto && CudaUsable()), gpus};
  const auto t0 = std::chrono::steady_clock::now();
  RunEnd end{Now(), 0.0, cells.size(), 0};
  const std::string results_path = (fs::path(o.out_dir) / "results.json").string();
  RunProgress progress;
  progress.results.resize(cells.size());
  if (!o.quiet) PrintPlan(cells, place, o);
  {
    // A SIGINT or SIGTERM writes what finished, then ends the process.
    InterruptWatch watch([&](int sig) {
      std::lock_guard<std::mutex> lock(progress.mu);
      progress.stopped = true;
      RunEnd stopped = end;
      stopped.wall_s = Seconds(t0);
      stopped.interrupted_by = sig;
      const Finished f = FinishedCells(cells, progress.results);
      WriteJsonFile(results_path, AggregateJson(scenarios, f, stopped));
      std::fprintf(stderr,
                   "\nshardcheck: interrupted by %s: %zu of %zu cells finished; wrote %s "
                   "(interrupted: true)\n",
                   SignalName(sig), f.cells.size(), cells.size(), results_path.c_str());
    });
    RunAll(cells, o, place, progress);
  }
  end.wall_s = Seconds(t0);
  const Finished f = FinishedCells(cells, progress.results);
  WriteJsonFile(results_path, AggregateJson(scenarios, f, end));
  PrintTable(f.cells, f.results);
  const Counts n = Count(f.results);
  PrintSummary(n, cells.size(), end.wall_s, o.out_dir);
  // docs/reliability.md, "Exit codes": a failed check (or an xpass) wins
  // over an error; a run that checked nothing is an environment error.
  if (n.failed + n.xpassed > 0) return 1;
  return n.errored > 0 || n.Ran() == 0 ? 3 : 0;
}

}  // namespace shardcheck
