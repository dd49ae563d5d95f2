// `shardcheck selftest`: does the matrix catch the bugs it exists for?
// (harness/detection/selftest.h, docs/detection.md)
#include <filesystem>

#include "harness/cell/output_target.h"
#include "harness/cli/cli.h"
#include "harness/cli/numeric_flags.h"
#include "harness/detection/selftest.h"

namespace shardcheck {

void AddSelftestCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "selftest",
      "Detection power: run scenario cells once clean and once per silent-bug failpoint "
      "(SHARDCHECK_FAILPOINTS=name, each in its own `run` process), and report which named "
      "check caught each bug, at which step and tensor. By default each failpoint runs its "
      "recorded subset of scenarios/ci. Writes OUT/selftest.json. Exit 0 if every failpoint "
      "was caught and the clean runs passed, 1 otherwise, 2 on bad input.");
  auto o = std::make_shared<SelftestOptions>();
  cmd->add_option("--scenario", o->scenarios,
                  "scenario files or folders: every failpoint runs all their cells (default: "
                  "each failpoint's subset of scenarios/ci)");
  cmd->add_option("--ci-dir", o->ci_dir, "where the subsets' scenario files are")
      ->capture_default_str();
  cmd->add_option("--failpoint", o->failpoint, "only this silent-bug failpoint");
  cmd->add_option("--jobs", o->jobs, "run processes at once")
      ->capture_default_str()
      ->check(IntIn(1, 256, "processes at once"));
  cmd->add_option("--out", o->out_dir, "results folder (selftest.json, selftest/)")
      ->capture_default_str();
  auto force = std::make_shared<bool>(false);
  cmd->add_flag("--force", *force,
                "replace OUT/selftest.json and OUT/selftest/ when they exist (otherwise refused)");
  cmd->add_flag("--quiet", o->quiet, "no progress lines");
  auto list = std::make_shared<bool>(false);
  auto names = std::make_shared<std::string>();
  cmd->add_flag("--list", *list,
                "list the silent-bug failpoints, where each acts, its subset and its bug; run "
                "nothing");
  cmd->add_option("--names", *names,
                  "write the silent-bug failpoint names to this file, one per line (for ctest); "
                  "run nothing");
  cmd->callback([&action, o, list, names, force] {
    action = [=] {
      if (*list) return ListSilentFailpoints();
      if (!names->empty()) {
        CheckFileTarget(*names, *force, "--names");
        return WriteSilentFailpointNames(*names);
      }
      const std::filesystem::path out(o->out_dir);
      CheckFileTarget((out / "selftest.json").string(), *force, "--out");
      CheckFolderTarget((out / "selftest").string(), *force, "--out");
      if (*force) {
        std::filesystem::remove(out / "selftest.json");
        std::filesystem::remove_all(out / "selftest");
      }
      return RunSelftest(*o);
    };
  });
}

}  // namespace shardcheck
