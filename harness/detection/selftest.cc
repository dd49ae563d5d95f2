#include "harness/detection/selftest.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "harness/cell/run_files.h"
#include "harness/detection/detection_plan.h"
#include "harness/matrix/cell_result.h"
#include "harness/matrix/runner.h"
#include "spec/error.h"
#include "spec/failpoint.h"

extern char** environ;

namespace shardcheck {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One `shardcheck run` process: the cells of `files` matching `filter`,
// with `failpoint` switched on (none for a clean run).
struct Task {
  std::string name;  // the failpoint, or "clean-<n>"
  std::string failpoint;
  std::vector<std::string> files;
  std::string filter;
  std::string dir;  // its results folder
  int exit_code = -1;
  double wall_s = 0.0;
};

std::vector<std::string> ScenarioFiles(const std::vector<std::string>& given) {
  std::vector<std::string> files;
  for (const std::string& g : given) {
    if (fs::is_directory(g)) {
      std::vector<std::string> in;
      for (const auto& e : fs::directory_iterator(g))
        if (e.path().extension() == ".yaml") in.push_back(e.path().string());
      std::sort(in.begin(), in.end());
      if (in.empty()) throw Error("--scenario " + g + ": no *.yaml file in the folder");
      files.insert(files.end(), in.begin(), in.end());
    } else if (fs::is_regular_file(g)) {
      files.push_back(g);
    } else {
      throw Error("--scenario " + g + ": no such file or folder");
    }
  }
  return files;
}

// The silent failpoints to try: one named, or all.
std::vector<const FailpointInfo*> ChosenFailpoints(const std::string& name) {
  std::vector<const FailpointInfo*> out;
  if (!name.empty()) {
    const FailpointInfo* f = FindFailpoint(name);
    if (!f) {
      std::string known;
      for (const FailpointInfo& g : AllFailpoints())
        if (g.kind == FailpointKind::kSilentBug)
          known += (known.empty() ? "" : ", ") + std::string(g.name);
      throw Error("--failpoint: unknown failpoint '" + name + "' (silent bugs: " + known + ")");
    }
    if (f->kind != FailpointKind::kSilentBug)
      throw Error(
          "--failpoint " + name +
          " is a fault (docs/reliability.md), not a silent bug: selftest tries silent bugs");
    out.push_back(f);
    return out;
  }
  for (const FailpointInfo& f : AllFailpoints())
    if (f.kind == FailpointKind::kSilentBug) out.push_back(&f);
  return out;
}

// The failpoint runs and the clean runs they need: with scenarios given, one
// clean run of all of them; otherwise one per distinct detection subset.
std::vector<Task> PlanTasks(const SelftestOptions& o,
                            const std::vector<const FailpointInfo*>& failpoints) {
  const fs::path work = fs::path(o.out_dir) / "selftest";
  const std::vector<std::string> given = ScenarioFiles(o.scenarios);
  std::vector<Task> tasks;
  std::map<std::pair<std::string, std::string>, bool> clean;  // (file, filter) planned
  for (const FailpointInfo* f : failpoints) {
    Task t;
    t.name = t.failpoint = f->name;
    if (!given.empty()) {
      t.files = given;
    } else {
      const DetectionSubset* d = FindDetectionSubset(f->name);
      if (!d) throw Error(std::string("failpoint ") + f->name + " has no detection subset");
      const fs::path file = fs::path(o.ci_dir) / d->scenario;
      if (!fs::is_regular_file(file))
        throw Error("scenario " + file.string() + " of failpoint " + f->name +
                    " not found (run from the source folder or pass --ci-dir)");
      t.files = {file.string()};
      t.filter = d->cells.Filter();
    }
    t.dir = (work / t.name).string();
    tasks.push_back(t);
  }
  std::vector<Task> cleans;
  for (const Task& t : tasks) {
    const auto key = std::make_pair(t.files.front() + (t.files.size() > 1 ? "+" : ""), t.filter);
    if (clean[key]) continue;
    clean[key] = true;
    Task c = t;
    c.failpoint.clear();
    c.name = "clean-" + std::to_string(cleans.size() + 1);
    c.dir = (work / c.name).string();
    cleans.push_back(c);
  }
  cleans.insert(cleans.end(), tasks.begin(), tasks.end());
  return cleans;
}

// Runs one task to completion: `shardcheck run` with its output in DIR.log.
void Execute(Task& t, const std::string& self) {
  fs::remove_all(t.dir);
  std::vector<std::string> args = {self, "run"};
  args.insert(args.end(), t.files.begin(), t.files.end());
  args.insert(args.end(), {"--out", t.dir, "--quiet"});
  if (!t.filter.empty()) args.insert(args.end(), {"--filter", t.filter});
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "SHARDCHECK_FAILPOINTS=", 22) != 0) env.emplace_back(*e);
  if (!t.failpoint.empty()) env.push_back("SHARDCHECK_FAILPOINTS=" + t.failpoint);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  for (auto& e : env) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  const std::string log = t.dir + ".log";
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, self.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    throw Error("cannot start " + self + " run: " + std::strerror(rc), ErrorKind::kEnvironment);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  t.wall_s = Since(t0);
  t.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

Json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  try {
    return Json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return nullptr;
  }
}

// The failing checks of one cell's result: every check with verdict "fail",
// and strict-load when the cell's load was refused.
std::vector<Json> FailedChecks(const Json& cell_result) {
  std::vector<Json> out;
  if (cell_result.is_null()) return out;
  if (cell_result.contains("checks"))
    for (const Json& c : cell_result["checks"])
      if (c.value("verdict", "") == "fail")
        out.push_back({{"check", c["name"]},
                       {"step", c["first_failing_step"]},
                       {"tensor", c["first_failing_tensor"]},
                       {"detail", c["detail"]}});
  const Json& ff = cell_result["first_failure"];
  if (ff.is_object() && ff.value("check", "") == "strict-load")
    out.push_back({{"check", "strict-load"},
                   {"step", ff["step"]},
                   {"tensor", ff["tensor"]},
                   {"detail", ff["detail"]}});
  return out;
}

// The selftest.json entry of a failpoint's run.
Json Judge(const Task& t, const FailpointInfo& f, const DetectionSubset* d) {
  Json j;
  j["name"] = f.name;
  j["bug"] = f.bug;
  j["where"] = f.where;
  std::string files;
  for (const auto& file : t.files) files += (files.empty() ? "" : " ") + file;
  j["scenario"] = files;
  j["filter"] = t.filter;
  j["why"] = d ? d->why : "";
  const Json results = ReadJson(t.dir + "/results.json");
  j["cells"] = results.is_object() ? results["cells"].size() : 0;
  j["reached"] = false;
  j["verdict"] = "error";
  j["checks"] = Json::array();
  j["caught_by"] = Json::array();
  j["first_failure"] = nullptr;
  j["time_to_first_failure_s"] = nullptr;
  j["wall_s"] = t.wall_s;
  j["error"] = nullptr;
  if (!results.is_object()) {
    j["error"] = "run exited " + std::to_string(t.exit_code) +
                 " without results: " + LastLine(t.dir + ".log");
    return j;
  }
  for (const Json& r : results["failpoints"]["reached"])
    if (r == f.name) j["reached"] = true;
  std::set<std::string> names;
  double elapsed = 0.0;
  bool broke = false;
  for (const Json& cell : results["cells"]) {
    elapsed += cell.value("wall_s", 0.0);
    const std::string id = cell["id"];
    const Json ff = cell["first_failure"];
    if (ff.is_object() && ff.value("check", "") == "run") broke = true;
    for (Json c : FailedChecks(ReadJson(t.dir + "/" + id + "/result.json"))) {
      names.insert(c["check"].get<std::string>());
      c["cell"] = id;
      if (j["first_failure"].is_null()) {
        j["first_failure"] = {
            {"cell", id}, {"check", c["check"]}, {"step", c["step"]}, {"tensor", c["tensor"]}};
        j["time_to_first_failure_s"] = elapsed;
      }
      j["caught_by"].push_back(c);
    }
  }
  for (const auto& n : names) j["checks"].push_back(n);
  const bool caught = !names.empty();
  if (!j["reached"].get<bool>())
    j["verdict"] = "not_reached";
  else if (caught)
    j["verdict"] = "caught";
  else
    j["verdict"] = broke ? "error" : "escaped";
  if (broke && !caught)
    j["error"] = "a cell broke instead of failing a check: " + LastLine(t.dir + ".log");
  return j;
}

std::string Clip(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

void PrintTable(const Json& failpoints) {
  std::printf("\n%-40s %-11s %-32s %-60s %s\n", "failpoint", "caught", "by", "first failure",
              "time");
  for (const Json& f : failpoints) {
    const std::string v = f["verdict"];
    std::string by, first = "-", time = "-";
    for (const Json& c : f["checks"]) by += (by.empty() ? "" : ", ") + c.get<std::string>();
    std::set<std::string> cells;
    for (const Json& c : f["caught_by"]) cells.insert(c["cell"].get<std::string>());
    if (!cells.empty())
      by += " (" + std::to_string(cells.size()) + " of " + std::to_string(f["cells"].get<int>()) +
            " cells)";
    if (f["first_failure"].is_object()) {
      const Json& ff = f["first_failure"];
      first = ff["cell"].get<std::string>() + " step " +
              (ff["step"].is_null() ? "-" : std::to_string(ff["step"].get<int64_t>())) +
              (ff["tensor"].is_null() ? "" : " " + ff["tensor"].get<std::string>());
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.1fs", f["time_to_first_failure_s"].get<double>());
      time = buf;
    }
    std::printf("%-40s %-11s %-32s %-60s %s\n", f["name"].get<std::string>().c_str(),
                v == "caught" ? "yes" : ("NO: " + v).c_str(),
                Clip(by.empty() ? "-" : by, 32).c_str(), Clip(first, 60).c_str(), time.c_str());
  }
}

// Runs `tasks` on `jobs` workers, printing a line as each ends.
void ExecuteAll(std::vector<Task>& tasks, int jobs, bool quiet) {
  std::error_code ec;
  const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw Error("cannot find the shardcheck binary (/proc/self/exe): " + ec.message());
  std::atomic<size_t> next{0}, done{0};
  std::mutex mu;
  std::string failure;
  auto worker = [&] {
    for (size_t i = next++; i < tasks.size(); i = next++) {
      try {
        Execute(tasks[i], self);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (failure.empty()) failure = e.what();
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!quiet)
        std::printf("[%zu/%zu] %s: run exited %d in %.1fs\n", ++done, tasks.size(),
                    tasks[i].name.c_str(), tasks[i].exit_code, tasks[i].wall_s);
      std::fflush(stdout);
    }
  };
  std::vector<std::thread> pool;
  for (int k = 0; k < std::max(1, jobs); ++k) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (!failure.empty()) throw Error(failure, ErrorKind::kEnvironment);
}

// The clean runs: each must pass, or a catch would mean nothing.
Json CleanJson(const std::vector<Task>& tasks) {
  Json clean = {{"verdict", "pass"}, {"cells", 0}, {"failed_cells", Json::array()}};
  int cells = 0;
  for (const Task& t : tasks) {
    if (!t.failpoint.empty()) continue;
    const Json r = ReadJson(t.dir + "/results.json");
    if (!r.is_object()) {
      clean["verdict"] = "fail";
      clean["failed_cells"].push_back(t.name + ": " + LastLine(t.dir + ".log"));
      continue;
    }
    for (const Json& c : r["cells"]) {
      ++cells;
      if (c["verdict"] != "pass" && c["verdict"] != "skipped") {
        clean["verdict"] = "fail";
        clean["failed_cells"].push_back(c["id"]);
      }
    }
  }
  clean["cells"] = cells;
  return clean;
}

}  // namespace

int RunSelftest(const SelftestOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<const FailpointInfo*> failpoints = ChosenFailpoints(o.failpoint);
  std::vector<Task> tasks = PlanTasks(o, failpoints);
  fs::create_directories(fs::path(o.out_dir) / "selftest");
  if (!o.quiet)
    std::printf("selftest: %zu failpoint(s), %zu run(s), %d at once; runs in %s/selftest\n",
                failpoints.size(), tasks.size(), o.jobs, o.out_dir.c_str());
  ExecuteAll(tasks, o.jobs, o.quiet);
  Json out;
  out["format"] = "shardcheck-selftest/1";
  out["environment"] = EnvironmentJson("gloo");
  out["clean"] = CleanJson(tasks);
  out["failpoints"] = Json::array();
  Json escaped = Json::array();
  int caught = 0;
  for (const Task& t : tasks) {
    if (t.failpoint.empty()) continue;
    const FailpointInfo& f = *FindFailpoint(t.failpoint);
    Json j = Judge(t, f, o.scenarios.empty() ? FindDetectionSubset(f.name) : nullptr);
    if (j["verdict"] == "caught")
      ++caught;
    else
      escaped.push_back(f.name);
    out["failpoints"].push_back(j);
  }
  out["summary"] = {{"tried", failpoints.size()}, {"caught", caught}, {"escaped", escaped}};
  out["wall_s"] = Since(t0);
  const std::string path = (fs::path(o.out_dir) / "selftest.json").string();
  WriteJsonFile(path, out);
  PrintTable(out["failpoints"]);
  const bool clean = out["clean"]["verdict"] == "pass";
  std::printf("\n%d of %zu failpoints caught; clean run %s (%d cells); %.1fs; %s\n", caught,
              failpoints.size(), clean ? "passed" : "FAILED", out["clean"]["cells"].get<int>(),
              Since(t0), path.c_str());
  if (!clean) std::printf("clean run failed: %s\n", out["clean"]["failed_cells"].dump().c_str());
  return (clean && escaped.empty()) ? 0 : 1;
}

int ListSilentFailpoints() {
  for (const FailpointInfo& f : AllFailpoints()) {
    if (f.kind != FailpointKind::kSilentBug) continue;
    const DetectionSubset* d = FindDetectionSubset(f.name);
    std::printf("%s\n  where:  %s\n  bug:    %s\n  subset: %s --filter %s\n", f.name, f.where,
                f.bug, d ? d->scenario : "(none)", d ? d->cells.Filter().c_str() : "");
  }
  return 0;
}

int WriteSilentFailpointNames(const std::string& path) {
  std::string text;
  for (const FailpointInfo& f : AllFailpoints())
    if (f.kind == FailpointKind::kSilentBug) text += std::string(f.name) + "\n";
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) throw Error("cannot write " + path, ErrorKind::kEnvironment);
  return 0;
}

}  // namespace shardcheck
