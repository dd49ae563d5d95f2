#include "harness/runner.h"

#include <torch/csrc/api/include/torch/version.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "distributed/config_json.h"
#include "harness/compare.h"
#include "harness/run_files.h"
#include "harness/thread_ranks.h"

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

nlohmann::ordered_json Num(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

// Per-step series of one run.
nlohmann::ordered_json RunJson(const TrainResult& r, int dp, const std::vector<std::string>& groups) {
  nlohmann::ordered_json j;
  j["dp"] = dp;
  j["steps"] = nlohmann::ordered_json::array();
  j["after_load"] = nlohmann::ordered_json::array();
  j["loss"] = nlohmann::ordered_json::array();
  j["grad_norm"] = nlohmann::ordered_json::array();
  for (const auto& g : groups)
    j["diff"][g] = {{"max_abs", nlohmann::ordered_json::array()}, {"max_rel", nlohmann::ordered_json::array()},
                    {"max_ulp", nlohmann::ordered_json::array()}, {"mismatches", nlohmann::ordered_json::array()},
                    {"tol_violations", nlohmann::ordered_json::array()}};
  bool any_loss = false;
  for (const auto& s : r.steps) {
    j["steps"].push_back(s.step);
    j["after_load"].push_back(s.after_load);
    j["loss"].push_back(Num(s.loss));
    any_loss = any_loss || std::isfinite(s.loss);
    j["grad_norm"].push_back(s.after_load ? nlohmann::ordered_json(nullptr) : Num(s.grad_norm));
    for (const auto& g : s.groups) {
      auto& d = j["diff"][g.group];
      d["max_abs"].push_back(g.max_abs);
      d["max_rel"].push_back(g.max_rel);
      d["max_ulp"].push_back(g.max_ulp);
      d["mismatches"].push_back(g.mismatches);
      d["tol_violations"].push_back(g.tol_violations);
    }
  }
  if (!any_loss) j["loss"] = nullptr;
  return j;
}

struct CheckOutcome {
  std::string verdict = "pass";  // pass | fail | n/a
  std::optional<int64_t> step;
  std::string tensor, detail, run;
  double max_abs = 0, max_rel = 0;
  int64_t max_ulp = 0;
};

std::vector<std::string> GroupsOf(const std::string& on, const std::vector<std::string>& groups) {
  if (on == "params" || on == "main_params") return {on};
  std::vector<std::string> state;
  for (const auto& g : groups)
    if (g != "params" && g != "main_params") state.push_back(g);
  return state;
}

// A check of distributed runs against the reference trajectory.
void CheckAgainstReference(const CheckSpec& c, const std::vector<std::string>& groups,
                           const std::vector<std::pair<std::string, const TrainResult*>>& runs,
                           double count_atol, double count_rtol, CheckOutcome& out) {
  const std::vector<std::string> sel = GroupsOf(c.on, groups);
  for (const auto& [name, r] : runs) {
    for (const auto& s : r->steps) {
      for (const auto& g : s.groups) {
        if (std::find(sel.begin(), sel.end(), g.group) == sel.end()) continue;
        out.max_abs = std::max(out.max_abs, g.max_abs);
        out.max_rel = std::max(out.max_rel, g.max_rel);
        out.max_ulp = std::max(out.max_ulp, g.max_ulp);
        bool bad;
        if (c.kind == "bitwise") {
          bad = g.mismatches > 0;
        } else {
          const bool counted = c.atol == count_atol && c.rtol == count_rtol;
          bad = counted ? g.tol_violations > 0 : !(g.max_abs <= c.atol || g.max_rel <= c.rtol);
          if (c.max_ulp >= 0 && g.max_ulp > c.max_ulp) bad = true;
        }
        if (bad && out.verdict == "pass") {
          out.verdict = "fail";
          out.step = s.step;
          out.run = name;
          out.tensor = g.group;
          if (r->first_mismatch && r->first_mismatch->step == s.step) out.tensor = r->first_mismatch->tensor;
          std::ostringstream d;
          d << name << " run, step " << s.step << (s.after_load ? " (right after the load)" : "") << ", "
            << g.group << ": " << g.mismatches << " elements differ, max abs " << g.max_abs << ", max rel "
            << g.max_rel << ", max ulp " << g.max_ulp;
          out.detail = d.str();
        }
      }
    }
  }
  if (out.verdict == "pass") {
    std::ostringstream d;
    size_t n = 0;
    for (const auto& [name, r] : runs) n += r->steps.size();
    d << (c.kind == "bitwise" ? "bitwise equal" : "within tolerance") << " to the reference at " << n
      << " compared steps";
    if (c.kind != "bitwise") d << " (max abs " << out.max_abs << ", max rel " << out.max_rel << ")";
    out.detail = d.str();
  }
}

}  // namespace

nlohmann::ordered_json EnvironmentJson(const std::string& backend) {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  std::string commit = Shell("git rev-parse --short HEAD 2>/dev/null");
  if (commit.empty()) commit = "unknown";
  return {{"commit", commit},
          {"libtorch", std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                           std::to_string(TORCH_VERSION_PATCH)},
          {"backend", backend},
          {"host", host},
          {"shardcheck", "0.1"}};
}

nlohmann::ordered_json RunCell(const Cell& cell, const std::string& cell_dir, std::chrono::milliseconds timeout) {
  const auto t0 = std::chrono::steady_clock::now();
  nlohmann::ordered_json j;
  j["format"] = "shardcheck-cell-result/1";
  j["id"] = cell.id;
  j["scenario"] = {{"name", cell.scenario}, {"file", cell.file}, {"line", cell.line}};
  nlohmann::ordered_json cfg;
  cfg["model"] = cell.model;
  cfg["dtype"] = cell.dtype;
  cfg["steps"] = cell.steps;
  cfg["seed"] = cell.seed;
  cfg["micro_batches"] = cell.micro_batches;
  cfg["bucket_size"] = cell.bucket_size;
  cfg["backend"] = cell.backend;
  cfg["sharding_type"] = ShardingTypeName(cell.sharding_type);
  cfg["dp"] = cell.dp;
  cfg["resume"] = cell.resume ? nlohmann::ordered_json{{"save_at", cell.resume->save_at}, {"dp", cell.resume->dp},
                                                       {"bucket_size", cell.resume->bucket_size ? nlohmann::json(*cell.resume->bucket_size) : nlohmann::json(nullptr)}}
                              : nlohmann::ordered_json(nullptr);
  cfg["optimizer"] = SetupJson(cell.optimizer.setup);
  cfg["optimizer"]["label"] = cell.optimizer.label;
  j["config"] = cfg;
  j["environment"] = EnvironmentJson(cell.backend);
  j["verdict"] = "error";
  j["error"] = nullptr;
  j["first_failure"] = nullptr;
  try {
    if (cell.backend == "nccl")
      throw Error("backend nccl runs its ranks as processes: use `shardcheck launch` with `shardcheck train` on a GPU node");
    fs::remove_all(cell_dir);
    fs::create_directories(cell_dir);
    const auto source = MakeGradSource(cell.model, cell.seed);
    OracleRunOptions run;
    run.model = source->spec();
    run.setup = cell.optimizer.setup;
    run.steps = cell.steps;
    run.seed = cell.seed;
    run.dtype = ParseDtype(cell.dtype);
    run.micro_batches = cell.micro_batches;
    run.Validate();
    const ReferenceTrajectory reference =
        RunReferenceTrajectory(*source, run.setup, run.dtype, run.steps, run.micro_batches);
    // One tolerance is counted element by element during the runs: the first tolerance check's.
    double count_atol = 0, count_rtol = 0;
    for (const auto& c : cell.checks)
      if (c.kind == "tolerance") {
        count_atol = c.atol;
        count_rtol = c.rtol;
        break;
      }
    TrainOptions a;
    a.run = run;
    a.source = source.get();
    a.reference = &reference;
    a.compare_reference = true;
    a.compare_atol = count_atol;
    a.compare_rtol = count_rtol;
    a.bucket_size = cell.bucket_size;
    a.sharding_type = cell.sharding_type;
    if (cell.resume) {
      a.save_at = cell.resume->save_at;
      a.save_dir = (fs::path(cell_dir) / "ckpt").string();
    }
    const ThreadRun ua = RunTrainOnThreads(a, cell.dp, timeout);
    if (!ua.errors.empty()) throw Error("uninterrupted run: " + ua.errors.front());
    std::optional<ThreadRun> ub;
    if (cell.resume) {
      TrainOptions b = a;
      b.save_at = 0;
      b.save_dir.clear();
      b.load_dir = a.save_dir;
      if (cell.resume->bucket_size) b.bucket_size = *cell.resume->bucket_size;
      ub = RunTrainOnThreads(b, cell.resume->dp, timeout);
      if (!ub->errors.empty()) throw Error("resumed run: " + ub->errors.front());
    }
    // Schema and groups of the cell.
    std::vector<std::string> groups = {"params", "main_params"};
    nlohmann::ordered_json schema = nlohmann::ordered_json::object();
    for (const auto& child : RouteParams(run.setup, run.model.params)) {
      schema[KindName(child.config.kind)] = child.schema.Names();
      for (const auto& k : child.schema.Names())
        if (std::find(groups.begin(), groups.end(), k) == groups.end()) groups.push_back(k);
    }
    j["schema"] = schema;
    j["groups"] = groups;
    nlohmann::ordered_json runs;
    nlohmann::ordered_json refj;
    refj["dp"] = 1;
    refj["steps"] = nlohmann::ordered_json::array();
    refj["loss"] = source->has_loss() ? nlohmann::ordered_json::array() : nlohmann::ordered_json(nullptr);
    refj["grad_norm"] = nlohmann::ordered_json::array();
    for (int64_t s = 1; s <= reference.steps(); ++s) {
      refj["steps"].push_back(s);
      if (source->has_loss()) refj["loss"].push_back(Num(reference.loss[static_cast<size_t>(s - 1)]));
      refj["grad_norm"].push_back(Num(reference.grad_norm[static_cast<size_t>(s - 1)]));
    }
    runs["reference"] = refj;
    runs["uninterrupted"] = RunJson(ua.root, cell.dp, groups);
    if (ub) {
      runs["resumed"] = RunJson(ub->root, cell.resume->dp, groups);
      runs["resumed"]["save_at"] = cell.resume->save_at;
    }
    j["runs"] = runs;

    // Checks.
    nlohmann::ordered_json checks = nlohmann::ordered_json::array();
    bool all_pass = true;
    nlohmann::ordered_json first_failure = nullptr;
    for (const CheckSpec& c : cell.checks) {
      CheckOutcome out;
      std::string run_name = "uninterrupted+resumed", against = "reference";
      if (c.kind == "loss_fall") {
        // The reference's loss falls: (first - mean of the last 5) / first.
        run_name = "reference";
        against = "its first step";
        const auto& l = reference.loss;
        const size_t tail = std::min<size_t>(5, l.size());
        double last = 0;
        for (size_t k = l.size() - tail; k < l.size(); ++k) last += l[k] / static_cast<double>(tail);
        const double fall = (l.front() - last) / l.front();
        std::ostringstream dd;
        dd << "reference loss " << l.front() << " -> " << last << " (mean of the last " << tail << " steps): fell "
           << 100.0 * fall << "%, needed " << 100.0 * c.min_fall << "%";
        out.detail = dd.str();
        out.max_rel = fall;
        if (!(fall >= c.min_fall)) {
          out.verdict = "fail";
          out.step = static_cast<int64_t>(l.size());
          out.tensor = "loss";
        }
        // Every distributed run must fall too (it trains the same model).
        for (const auto* r : {&ua.root}) {
          const double a0 = r->steps.front().loss, a1 = r->steps.back().loss;
          if (!((a0 - a1) / a0 >= c.min_fall) && out.verdict == "pass") {
            out.verdict = "fail";
            out.step = r->steps.back().step;
            out.tensor = "loss";
            out.detail += "; the uninterrupted run fell only " + std::to_string(100.0 * (a0 - a1) / a0) + "%";
          }
        }
      } else if (c.kind == "tolerance" && c.on == "loss") {
        // Each distributed run's loss against the reference's, step by step.
        run_name = "uninterrupted+resumed";
        size_t compared = 0;
        std::vector<std::pair<std::string, const TrainResult*>> rs = {{"uninterrupted", &ua.root}};
        if (ub) rs.push_back({"resumed", &ub->root});
        for (const auto& [name, r] : rs) {
          for (const auto& s : r->steps) {
            if (s.after_load || s.step < 1 || s.step > reference.steps()) continue;
            const double want = reference.loss[static_cast<size_t>(s.step - 1)];
            const double d = std::fabs(s.loss - want);
            out.max_abs = std::max(out.max_abs, d);
            out.max_rel = std::max(out.max_rel, d / std::max(std::fabs(want), 1e-30));
            ++compared;
            if (!(d <= c.atol + c.rtol * std::fabs(want)) && out.verdict == "pass") {
              out.verdict = "fail";
              out.step = s.step;
              out.run = name;
              out.tensor = "loss";
              std::ostringstream dd;
              dd << name << " run, step " << s.step << ": loss " << s.loss << " vs reference " << want;
              out.detail = dd.str();
            }
          }
        }
        if (out.verdict == "pass") {
          std::ostringstream dd;
          dd << "losses within tolerance of the reference at " << compared << " steps (max rel " << out.max_rel << ")";
          out.detail = dd.str();
        }
      } else if (c.kind == "loss_continuity") {
        run_name = "resumed";
        against = "uninterrupted";
        std::map<int64_t, double> base;
        for (const auto& s : ua.root.steps) base[s.step] = s.loss;
        size_t compared = 0;
        for (const auto& s : ub->root.steps) {
          if (s.after_load || !base.count(s.step)) continue;
          const double a_loss = base[s.step], b_loss = s.loss;
          const double d = std::fabs(b_loss - a_loss);
          out.max_abs = std::max(out.max_abs, d);
          out.max_rel = std::max(out.max_rel, d / std::max(std::fabs(a_loss), 1e-30));
          ++compared;
          if (!(d <= c.atol + c.rtol * std::fabs(a_loss)) && out.verdict == "pass") {
            out.verdict = "fail";
            out.step = s.step;
            out.tensor = "loss";
            std::ostringstream dd;
            dd << "step " << s.step << ": resumed loss " << b_loss << " vs uninterrupted " << a_loss;
            out.detail = dd.str();
          }
        }
        if (out.verdict == "pass") out.detail = "resumed loss continues the uninterrupted curve at " + std::to_string(compared) + " steps";
      } else if (cell.RealModel() && c.kind == "bitwise") {
        // Real models: a same-DP resume must reproduce the uninterrupted run bit for bit.
        run_name = "resumed";
        against = "uninterrupted";
        if (!ub || cell.resume->dp != cell.dp) {
          out.verdict = "n/a";
          out.detail = ub ? "the resume changes the DP size: the reduction order changes, so only tolerance applies"
                          : "no resume plan";
        } else {
          std::map<int64_t, double> base;
          for (const auto& s : ua.root.steps) base[s.step] = s.loss;
          for (const auto& s : ub->root.steps)
            if (!s.after_load && base.count(s.step) && std::memcmp(&base[s.step], &s.loss, sizeof(double)) != 0 && out.verdict == "pass") {
              out.verdict = "fail";
              out.step = s.step;
              out.tensor = "loss";
              out.detail = "step " + std::to_string(s.step) + ": the resumed loss differs from the uninterrupted run's";
            }
          const std::vector<std::string> sel = GroupsOf(c.on, groups);
          const bool fp32 = cell.dtype == "fp32";
          for (const auto& [key, t] : ua.root.final_state.tensors) {
            const std::string kind = key.substr(0, key.find('.'));
            std::string group = kind == "param" ? "params" : kind == "main_param" ? "main_params" : "";
            if (kind == "param" && fp32 && c.on == "main_params") group = "main_params";
            if (kind == "state") group = key.substr(6, key.find('.', 6) - 6);
            if (std::find(sel.begin(), sel.end(), group) == sel.end()) continue;
            const TensorDiff d = CompareBitwise(key, ub->root.final_state.tensors.at(key), t);
            out.max_abs = std::max(out.max_abs, d.max_abs);
            if (!d.Equal() && out.verdict == "pass") {
              out.verdict = "fail";
              out.step = cell.steps;
              out.tensor = key;
              out.detail = "final state differs from the uninterrupted run: " + d.Summary();
            }
          }
          if (out.verdict == "pass") out.detail = "resumed run bitwise equal to the uninterrupted run (losses and final state)";
        }
      } else {
        std::vector<std::pair<std::string, const TrainResult*>> rs = {{"uninterrupted", &ua.root}};
        if (ub) rs.push_back({"resumed", &ub->root});
        CheckAgainstReference(c, groups, rs, count_atol, count_rtol, out);
      }
      nlohmann::ordered_json jc;
      jc["name"] = c.Name();
      jc["kind"] = c.kind;
      jc["on"] = c.on;
      jc["run"] = run_name;
      jc["against"] = against;
      jc["atol"] = c.atol;
      jc["rtol"] = c.rtol;
      jc["max_ulp"] = c.max_ulp >= 0 ? nlohmann::json(c.max_ulp) : nlohmann::json(nullptr);
      jc["verdict"] = out.verdict;
      jc["first_failing_step"] = out.step ? nlohmann::json(*out.step) : nlohmann::json(nullptr);
      jc["first_failing_tensor"] = out.tensor.empty() ? nlohmann::json(nullptr) : nlohmann::json(out.tensor);
      jc["max_abs"] = out.max_abs;
      jc["max_rel"] = out.max_rel;
      jc["max_ulp_seen"] = out.max_ulp;
      jc["detail"] = out.detail;
      checks.push_back(jc);
      if (out.verdict == "fail") {
        all_pass = false;
        if (first_failure.is_null())
          first_failure = {{"check", c.Name()}, {"step", jc["first_failing_step"]},
                           {"tensor", jc["first_failing_tensor"]}, {"detail", out.detail}};
      }
    }
    j["checks"] = checks;
    j["verdict"] = all_pass ? "pass" : "fail";
    j["first_failure"] = first_failure;
    nlohmann::ordered_json mem = nlohmann::ordered_json::array();
    for (size_t r = 0; r < ua.root.memory.size(); ++r) {
      const MemoryFigures& m = ua.root.memory[r];
      nlohmann::ordered_json e;
      e["rank"] = r;
      e["owned_elements"] = m.owned_elements;
      e["total_bytes"] = m.total_bytes;
      e["entries"] = nlohmann::ordered_json::array();
      for (const auto& x : m.entries)
        e["entries"].push_back({{"child", x.child}, {"key", x.key}, {"elements", x.elements}, {"bytes", x.bytes}});
      mem.push_back(e);
    }
    j["memory"] = mem;
    j["layout"] = ua.root.layout;
  } catch (const std::exception& e) {
    j["verdict"] = "error";
    j["error"] = e.what();
    j["first_failure"] = {{"check", "run"}, {"step", nullptr}, {"tensor", nullptr}, {"detail", e.what()}};
  }
  j["wall_s"] = Seconds(t0);
  try {
    fs::create_directories(cell_dir);
    WriteJsonFile((fs::path(cell_dir) / "result.json").string(), j);
  } catch (const std::exception& e) {
    std::cerr << "shardcheck: cannot write " << cell_dir << "/result.json: " << e.what() << "\n";
  }
  return j;
}

int RunScenarios(const std::vector<std::string>& files, const RunnerOptions& o) {
  // Everything is validated before anything runs.
  std::vector<Scenario> scenarios;
  for (const auto& f : files) scenarios.push_back(LoadScenario(f));
  std::vector<const Cell*> cells;
  for (const auto& sc : scenarios)
    for (const auto& c : sc.cells)
      if (o.filter.empty() || MatchesFilter(c, o.filter)) cells.push_back(&c);
  if (cells.empty()) throw ScenarioError("no cell matches --filter '" + o.filter + "'");

  fs::create_directories(o.out_dir);
  const auto t0 = std::chrono::steady_clock::now();
  char started[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::vector<nlohmann::ordered_json> results(cells.size());
  std::atomic<size_t> next{0}, done{0};
  std::mutex print_mu;
  const bool tty = ::isatty(STDOUT_FILENO);
  auto worker = [&] {
    for (size_t i = next++; i < cells.size(); i = next++) {
      const Cell& c = *cells[i];
      results[i] = RunCell(c, (fs::path(o.out_dir) / c.id).string(), o.timeout);
      const size_t d = ++done;
      if (o.quiet) continue;
      std::lock_guard<std::mutex> lock(print_mu);
      const double elapsed = Seconds(t0);
      const double eta = elapsed / static_cast<double>(d) * static_cast<double>(cells.size() - d);
      std::printf("%s[%zu/%zu] %-5s %s  %.1fs  (elapsed %.0fs, ETA %.0fs)%s", tty ? "\r\033[K" : "", d,
                  cells.size(), results[i]["verdict"].get<std::string>().c_str(), c.id.c_str(),
                  results[i]["wall_s"].get<double>(), elapsed, eta, tty ? "" : "\n");
      if (tty && results[i]["verdict"] != "pass") std::printf("\n");
      std::fflush(stdout);
    }
  };
  std::vector<std::thread> pool;
  for (int k = 0; k < std::max(1, o.jobs); ++k) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (tty && !o.quiet) std::printf("\n");

  // The aggregate.
  nlohmann::ordered_json agg;
  agg["format"] = "shardcheck-results/1";
  int passed = 0, failed = 0, errored = 0;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = *cells[i];
    const auto& r = results[i];
    const std::string v = r["verdict"];
    passed += v == "pass";
    failed += v == "fail";
    errored += v == "error";
    list.push_back({{"id", c.id}, {"dir", c.id}, {"scenario", c.scenario}, {"optimizer", c.optimizer.label},
                    {"sharding_type", ShardingTypeName(c.sharding_type)}, {"dp", c.dp},
                    {"resume_dp", c.resume ? nlohmann::json(c.resume->dp) : nlohmann::json(nullptr)},
                    {"save_at", c.resume ? nlohmann::json(c.resume->save_at) : nlohmann::json(nullptr)},
                    {"dtype", c.dtype}, {"model", c.model}, {"steps", c.steps}, {"verdict", v},
                    {"first_failure", r["first_failure"]}, {"wall_s", r["wall_s"]}});
  }
  agg["verdict"] = (failed + errored) == 0 ? "pass" : "fail";
  agg["started"] = started;
  agg["wall_s"] = Seconds(t0);
  agg["environment"] = EnvironmentJson(cells.front()->backend);
  agg["scenarios"] = nlohmann::ordered_json::array();
  for (const auto& sc : scenarios)
    agg["scenarios"].push_back({{"name", sc.name}, {"file", sc.file}, {"description", sc.description}});
  agg["counts"] = {{"cells", cells.size()}, {"passed", passed}, {"failed", failed}, {"errored", errored}};
  agg["cells"] = list;
  WriteJsonFile((fs::path(o.out_dir) / "results.json").string(), agg);

  // The final table.
  size_t w = 4;
  for (const Cell* c : cells) w = std::max(w, c->id.size());
  std::printf("\n%-*s  %-7s  %7s  %s\n", static_cast<int>(w), "cell", "verdict", "time", "first failure");
  for (size_t i = 0; i < cells.size(); ++i) {
    const auto& r = results[i];
    std::string ff;
    if (!r["first_failure"].is_null()) ff = r["first_failure"]["detail"].get<std::string>();
    if (ff.size() > 120) ff = ff.substr(0, 117) + "...";
    std::printf("%-*s  %-7s  %6.1fs  %s\n", static_cast<int>(w), cells[i]->id.c_str(),
                r["verdict"].get<std::string>().c_str(), r["wall_s"].get<double>(), ff.c_str());
  }
  std::printf("\n%d passed, %d failed, %d errored of %zu cells in %.1fs; results in %s/results.json\n", passed,
              failed, errored, cells.size(), Seconds(t0), o.out_dir.c_str());
  return (failed + errored) == 0 ? 0 : 1;
}

}  // namespace shardcheck
