#include "harness/cli/cli.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "harness/cli/exit_codes.h"
#include "harness/cli/suggest.h"
#include "kernels/cpu_isa.h"
#include "spec/error.h"
#include "spec/failpoint.h"

namespace shardcheck {

namespace {

// "unknown flag '--stesp' for `shardcheck train` (did you mean --steps?)"
// for the first word of the form --name that the subcommand lacks, or "".
// Checked before CLI11 parses, whose own message would name a missing
// required flag or list the stray words instead.
std::string UnknownFlag(CLI::App& app, int argc, char** argv) {
  if (argc < 3 || argv[1][0] == '-') return "";
  const CLI::App* sub = app.get_subcommand(argv[1]);
  std::vector<std::string> names = {"--help"};
  for (const CLI::Option* o : sub->get_options())
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  for (int i = 2; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;  // launch: the rank command follows
    if (word.rfind("--", 0) != 0) continue;
    const std::string flag = word.substr(0, word.find('='));
    if (std::find(names.begin(), names.end(), flag) != names.end()) continue;
    return "unknown flag '" + flag + "' for `shardcheck " + argv[1] + "`" +
           DidYouMean(flag, names) + " (see shardcheck " + argv[1] + " --help)";
  }
  return "";
}

}  // namespace

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
  AddGcCommand(app, action);
  AddDryCommand(app, action);
  AddSelftestCommand(app, action);
  AddOracleCommand(app, action);
  // A first word that is no option and no subcommand: say so (CLI11 would
  // say a subcommand is required).
  bool known = true;
  try {
    if (argc > 1 && argv[1][0] != '-') app.get_subcommand(argv[1]);
  } catch (const CLI::OptionNotFound&) {
    known = false;
  }
  if (!known) {
    std::string names;
    std::vector<std::string> list;
    for (const CLI::App* sub :
         app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); })) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      list.push_back(sub->get_name());
    }
    std::cerr << "shardcheck: error: unknown subcommand '" << argv[1] << "'"
              << DidYouMean(argv[1], list) << " (one of: " << names << "; shardcheck --help)\n";
    return 2;
  }
  if (const std::string typo = UnknownFlag(app, argc, argv); !typo.empty()) {
    std::cerr << "shardcheck: error: " << typo << "\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // One line, like every other error (CLI11 would add a second).
    std::cerr << "shardcheck: error: " << e.what() << " (see shardcheck "
              << (argc > 1 && argv[1][0] != '-' ? std::string(argv[1]) + " " : "") << "--help)\n";
    return 2;
  }
  try {
    // A malformed failpoint list fails here, before any work; an enabled one
    // is said, so a log never hides that faults were injected.
    const std::string failpoints = LoadFailpoints();
    if (!failpoints.empty()) std::cerr << "shardcheck: failpoints enabled: " << failpoints << "\n";
    // So does a SHARDCHECK_CPU_ISA outside baseline|avx2|avx512, or one
    // this CPU lacks (kernels/cpu_isa.h).
    ActiveCpuIsa();
    return action ? action() : 2;
  } catch (...) {
    return ReportFailure(std::current_exception(), std::cerr);
  }
}

}  // namespace shardcheck
