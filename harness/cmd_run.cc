// `shardcheck run` and `shardcheck list`: the scenario matrix.
#include <ATen/Parallel.h>

#include <fstream>
#include <iostream>

#include "distributed/file_util.h"
#include "harness/cli.h"
#include "harness/runner.h"

namespace shardcheck {

void AddRunCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "run",
      "Run the cells of scenario files (docs/scenarios.md): for each, the reference, the "
      "uninterrupted DistributedOptimizer run (saving at the resume plan's step), the resumed run "
      "at the plan's DP size, and the cell's checks. Ranks run as threads over Gloo. Writes "
      "DIR/<cell-id>/result.json and DIR/results.json (docs/results-schema.md). Exit 0 if every "
      "cell passed, 1 if one failed, 2 on a malformed scenario.");
  auto files = std::make_shared<std::vector<std::string>>();
  auto o = std::make_shared<RunnerOptions>();
  auto timeout_s = std::make_shared<double>(120.0);
  cmd->add_option("scenarios", *files, "scenario YAML files")->required();
  cmd->add_option("--filter", o->filter,
                  "only cells matching: comma-separated key=value (id, optimizer, sharding_type, dp, "
                  "resume_dp, dtype, model, scenario) or substrings of the cell id");
  cmd->add_option("--out", o->out_dir, "results folder")->capture_default_str();
  cmd->add_option("--jobs", o->jobs, "cells run at once")->capture_default_str();
  cmd->add_flag("--quiet", o->quiet, "no live progress line");
  cmd->add_option("--timeout", *timeout_s, "collective timeout in seconds")->capture_default_str();
  cmd->callback([&action, files, o, timeout_s] {
    action = [=]() {
      at::set_num_threads(1);
      RunnerOptions opts = *o;
      opts.timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout_s * 1000));
      return RunScenarios(*files, opts);
    };
  });
}

void AddListCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "list",
      "Validate scenario files and list their cells (id and labels). With --ctest FILE, write a "
      "CTest include file with one test per cell (labels: checkpoint, optimizer, sharding type, "
      "dpN, dtype).");
  auto files = std::make_shared<std::vector<std::string>>();
  auto ctest = std::make_shared<std::string>();
  auto binary = std::make_shared<std::string>("shardcheck");
  auto out_root = std::make_shared<std::string>("scenario-out");
  auto timeout = std::make_shared<int>(600);
  cmd->add_option("scenarios", *files, "scenario YAML files")->required();
  cmd->add_option("--ctest", *ctest, "write a CTest include file here");
  cmd->add_option("--binary", *binary, "the shardcheck binary the tests run")->capture_default_str();
  cmd->add_option("--out-root", *out_root, "results folder of the tests")->capture_default_str();
  cmd->add_option("--test-timeout", *timeout, "CTest TIMEOUT per cell, seconds")->capture_default_str();
  cmd->callback([&action, files, ctest, binary, out_root, timeout] {
    action = [=]() {
      std::string out;
      size_t n = 0;
      for (const auto& f : *files) {
        const Scenario sc = LoadScenario(f);
        for (const Cell& c : sc.cells) {
          ++n;
          std::string labels;
          for (const auto& l : c.Labels()) labels += (labels.empty() ? "" : ";") + l;
          if (ctest->empty()) {
            std::cout << c.id << "  [" << labels << "]\n";
            continue;
          }
          const std::string name = sc.name + "/" + c.id;
          out += "add_test([=[" + name + "]=] [=[" + *binary + "]=] run [=[" + f + "]=] --quiet --filter [=[id=" +
                 c.id + "]=] --out [=[" + *out_root + "/" + sc.name + "]=])\n";
          out += "set_tests_properties([=[" + name + "]=] PROPERTIES LABELS [=[" + labels + "]=] TIMEOUT " +
                 std::to_string(*timeout) + " PROCESSORS " + std::to_string(std::max(c.dp, c.ResumeDp()) > 1 ? 2 : 1) +
                 ")\n";
        }
      }
      if (!ctest->empty()) {
        WriteFileAtomic(*ctest, out);
        std::cout << "wrote " << n << " tests to " << *ctest << "\n";
      } else {
        std::cout << n << " cells\n";
      }
      return 0;
    };
  });
}

}  // namespace shardcheck
