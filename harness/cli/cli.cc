#include "harness/cli/cli.h"

#include <ATen/Parallel.h>

#include <iostream>

#include "spec/error.h"

namespace shardcheck {

int RunCli(int argc, char** argv) {
  CLI::App app{
      "shardcheck: checks that a sharded data-parallel optimizer keeps every optimizer's state "
      "right across checkpoints and DP-size changes, against a single-device reference.",
      "shardcheck"};
  app.require_subcommand(1);
  std::function<int()> action;
  AddReferenceCommand(app, action);
  AddUpdateNormsCommand(app, action);
  AddLaunchCommand(app, action);
  AddCommSelftestCommand(app, action);
  AddTrainCommand(app, action);
  AddRunCommand(app, action);
  AddCellRankCommand(app, action);
  AddListCommand(app, action);
  AddInspectCommand(app, action);
  AddCkptDiffCommand(app, action);
  AddExportCommand(app, action);
  AddOptimizersCommand(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    return action ? action() : 2;
  } catch (const Error& e) {
    std::cerr << "shardcheck: error: " << e.what() << "\n";
    return 2;
  } catch (const c10::Error& e) {
    std::cerr << "shardcheck: error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "shardcheck: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace shardcheck
