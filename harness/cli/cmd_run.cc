// `shardcheck run` and `shardcheck list`: the scenario matrix.
#include <ATen/Parallel.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

#include "distributed/file_util.h"
#include "harness/cell/output_target.h"
#include "harness/cli/cli.h"
#include "harness/cli/cli_options.h"
#include "harness/matrix/check_coverage.h"
#include "harness/matrix/runner.h"

namespace shardcheck {

void AddRunCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "run",
      "Run the cells of scenario files (docs/scenarios.md): for each, the reference, the "
      "uninterrupted DistributedOptimizer run (saving at the resume plan's step), the resumed run "
      "at the plan's DP size, and the cell's checks. Gloo cells run their ranks as threads (or "
      "processes with --processes); NCCL cells, and every cell with --device cuda, run one rank "
      "process per GPU through the launcher, cells at once on disjoint GPUs. Writes "
      "DIR/<cell-id>/result.json and DIR/results.json (docs/results-schema.md). Exit 0 if every "
      "cell that ran passed and one ran, 1 if one failed, 3 if one errored and none failed or if "
      "every cell was skipped, 2 on a malformed scenario or an --out that holds output; on "
      "SIGINT/SIGTERM, results.json of the finished cells and 128 + the signal.");
  auto files = std::make_shared<std::vector<std::string>>();
  auto o = std::make_shared<RunnerOptions>();
  auto timeout_s = std::make_shared<double>(120.0);
  cmd->add_option("scenarios", *files, "scenario YAML files")->required();
  cmd->add_option(
      "--filter", o->filter,
      "only cells matching: comma-separated key=value (id, optimizer, sharding_type, dp, "
      "resume_dp, dtype, model, scenario) or substrings of the cell id");
  cmd->add_option("--out", o->out_dir, "results folder (absent or empty, unless --force)")
      ->capture_default_str();
  cmd->add_flag("--force", o->force, "empty --out first when it holds anything");
  cmd->add_option("--jobs", o->jobs, "cells run at once")
      ->capture_default_str()
      ->check(AtLeast(1, 256, "cells at once"));
  cmd->add_flag("--quiet", o->quiet, "no live progress line");
  cmd->add_option("--timeout", *timeout_s, "collective timeout in seconds")
      ->capture_default_str()
      ->check(RealIn(0, 604800, "at most a week", true));
  auto device = std::make_shared<std::string>("cpu");
  cmd->add_option("--device", *device,
                  "cpu: Gloo cells on the CPU, NCCL cells on GPUs | cuda: every cell on GPUs over "
                  "NCCL | auto: cuda when a GPU is visible")
      ->capture_default_str();
  cmd->add_flag("--processes", o->processes,
                "run Gloo cells' ranks as processes through the launcher, as GPU cells run");
  auto thread_comm = std::make_shared<std::string>("in-process");
  cmd->add_option("--thread-comm", *thread_comm,
                  "what Gloo cells' thread-ranks talk through: in-process (shared memory, the "
                  "same collectives and checks, several times faster) | gloo (TCP on loopback, "
                  "as rank processes talk)")
      ->capture_default_str()
      ->check(CLI::IsMember({"gloo", "in-process"}));
  cmd->add_option("--gpus", o->gpus,
                  "GPUs for GPU cells (default: every visible one); a cell needing more ranks is "
                  "skipped")
      ->check(IntIn(0, 1024, "GPUs of one node"));
  cmd->callback([&action, files, o, timeout_s, device, thread_comm] {
    action = [=]() {
      at::set_num_threads(1);
      RunnerOptions opts = *o;
      opts.device = ParseDeviceKind(*device);
      opts.thread_comm = ParseThreadComm(*thread_comm);
      opts.timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout_s * 1000));
      return RunScenarios(*files, opts);
    };
  });
}

namespace {

// One ctest test: the cells it runs and their labels (the union).
struct CtestGroup {
  std::string name, filter;
  std::vector<std::string> labels;
  int processors = 1;
};

// The cells of `sc` as ctest tests: one per cell, or one per combination of
// the `group_by` dimensions (CellDimension keys).
std::vector<CtestGroup> GroupCells(const Scenario& sc, const std::vector<std::string>& group_by) {
  std::vector<CtestGroup> groups;
  for (const Cell& c : sc.cells) {
    std::string key, filter;
    if (group_by.empty()) {
      key = c.id;
      filter = "id=" + c.id;
    } else {
      for (const auto& dim : group_by) {
        const std::string v = CellDimension(c, dim);
        key += (key.empty() ? "" : ".") + v;
        filter += (filter.empty() ? "" : ",") + dim + "=" + v;
      }
    }
    const std::string name = sc.name + "/" + key;
    CtestGroup* g = nullptr;
    for (auto& x : groups)
      if (x.name == name) g = &x;
    if (!g) {
      groups.push_back({name, filter, {}, 1});
      g = &groups.back();
    }
    for (const auto& l : c.Labels())
      if (std::find(g->labels.begin(), g->labels.end(), l) == g->labels.end())
        g->labels.push_back(l);
    if (std::max(c.dp, c.ResumeDp()) > 1) g->processors = 2;
  }
  return groups;
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

void AddCellRankCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "cell-rank",
      "One rank process of one phase of a scenario cell (what `shardcheck run` starts through "
      "the launcher for GPU cells and --processes; not meant to be run by hand).");
  cmd->group("");  // hidden from the subcommand list
  auto file = std::make_shared<std::string>();
  auto cell = std::make_shared<std::string>();
  auto phase = std::make_shared<std::string>();
  auto dir = std::make_shared<std::string>();
  auto device = std::make_shared<std::string>("cpu");
  auto timeout_s = std::make_shared<double>(120.0);
  cmd->add_option("scenario", *file, "the cell's scenario file")->required();
  cmd->add_option("--cell", *cell, "the cell id")->required();
  cmd->add_option("--phase", *phase, "uninterrupted | resumed")->required();
  cmd->add_option("--dir", *dir, "the cell's folder (checkpoint, results)")->required();
  cmd->add_option("--device", *device, "cpu | cuda | auto")->capture_default_str();
  cmd->add_option("--timeout", *timeout_s, "collective timeout in seconds")
      ->capture_default_str()
      ->check(RealIn(0, 604800, "at most a week", true));
  cmd->callback([&action, file, cell, phase, dir, device, timeout_s] {
    action = [=]() {
      at::set_num_threads(1);
      RunCellRank(*file, *cell, ParseCellPhase(*phase), *dir, *device,
                  std::chrono::milliseconds(static_cast<int64_t>(*timeout_s * 1000)));
      return 0;
    };
  });
}

void AddListCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "list",
      "Validate scenario files and list their cells (id and labels). With --ctest FILE, write a "
      "CTest include file with one test per cell, or per --group-by combination (labels: "
      "checkpoint, "
      "optimizer, sharding type, dpN, dtype).");
  auto files = std::make_shared<std::vector<std::string>>();
  auto ctest = std::make_shared<std::string>();
  auto binary = std::make_shared<std::string>("shardcheck");
  auto out_root = std::make_shared<std::string>("scenario-out");
  auto group_by = std::make_shared<std::string>();
  auto timeout = std::make_shared<int>(600);
  cmd->add_option("scenarios", *files, "scenario YAML files")->required();
  cmd->add_option("--ctest", *ctest, "write a CTest include file here (it must not exist)");
  auto force = std::make_shared<bool>(false);
  cmd->add_flag("--force", *force, "replace the --ctest file when it exists");
  cmd->add_option("--group-by", *group_by,
                  "one test per combination of these cell dimensions, e.g. optimizer,sharding_type "
                  "(default: one test per cell; a test runs its cells in one process)");
  cmd->add_option("--binary", *binary, "the shardcheck binary the tests run")
      ->capture_default_str();
  cmd->add_option("--out-root", *out_root, "results folder of the tests")->capture_default_str();
  cmd->add_option("--test-timeout", *timeout, "CTest TIMEOUT per test, seconds")
      ->capture_default_str()
      ->check(IntIn(1, 604800, "at most a week"));
  auto thread_comm = std::make_shared<std::string>();
  cmd->add_option("--thread-comm", *thread_comm,
                  "the tests' `run --thread-comm` (default: run's own default)")
      ->check(CLI::IsMember({"gloo", "in-process"}));
  cmd->callback([&action, files, ctest, binary, out_root, group_by, timeout, thread_comm, force] {
    action = [=]() {
      if (!ctest->empty()) CheckFileTarget(*ctest, *force, "--ctest");
      const std::vector<std::string> dims = SplitCommas(*group_by);
      std::string out;
      size_t n = 0, tests = 0;
      for (const auto& f : *files) {
        const Scenario sc = LoadScenario(f);
        n += sc.cells.size();
        for (const Cell& c : sc.cells)
          if (const std::string w = UncheckedWarning(c); !w.empty())
            std::cerr << "shardcheck: warning: " << w << "\n";
        if (ctest->empty()) {
          for (const Cell& c : sc.cells) {
            std::string labels;
            for (const auto& l : c.Labels()) labels += (labels.empty() ? "" : ";") + l;
            std::cout << c.id << "  [" << labels << "]\n";
          }
          continue;
        }
        for (const CtestGroup& g : GroupCells(sc, dims)) {
          ++tests;
          std::string labels;
          for (const auto& l : g.labels) labels += (labels.empty() ? "" : ";") + l;
          out += "add_test([=[" + g.name + "]=] [=[" + *binary + "]=] run [=[" + f +
                 "]=] --quiet --force --filter [=[" + g.filter + "]=] --out [=[" + *out_root +
                 "/" + g.name + "]=]" + (thread_comm->empty() ? "" : " --thread-comm " + *thread_comm) +
                 ")\n";
          out += "set_tests_properties([=[" + g.name + "]=] PROPERTIES LABELS [=[" + labels +
                 "]=] TIMEOUT " + std::to_string(*timeout) + " PROCESSORS " +
                 std::to_string(g.processors) + ")\n";
        }
      }
      if (!ctest->empty()) {
        WriteFileAtomic(*ctest, out);
        std::cout << "wrote " << tests << " tests (" << n << " cells) to " << *ctest << "\n";
      } else {
        std::cout << n << " cells\n";
      }
      return 0;
    };
  });
}

}  // namespace shardcheck
