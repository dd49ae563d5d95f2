// The shardcheck command line: subcommands register themselves here.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace shardcheck {

// Runs the CLI. Returns the process exit code: 0 success, 1 a failed run or
// check, 2 bad usage or input. Errors print one line on stderr.
int RunCli(int argc, char** argv);

// Each subcommand file provides one of these; `action` is set to the code
// to run once parsing succeeded.
void AddReferenceCommand(CLI::App& app, std::function<int()>& action);
void AddUpdateNormsCommand(CLI::App& app, std::function<int()>& action);
void AddLaunchCommand(CLI::App& app, std::function<int()>& action);
void AddCommSelftestCommand(CLI::App& app, std::function<int()>& action);
void AddTrainCommand(CLI::App& app, std::function<int()>& action);
void AddRunCommand(CLI::App& app, std::function<int()>& action);
void AddCellRankCommand(CLI::App& app, std::function<int()>& action);
void AddListCommand(CLI::App& app, std::function<int()>& action);
void AddInspectCommand(CLI::App& app, std::function<int()>& action);
void AddCkptDiffCommand(CLI::App& app, std::function<int()>& action);
void AddExportCommand(CLI::App& app, std::function<int()>& action);
void AddOptimizersCommand(CLI::App& app, std::function<int()>& action);
void AddGcCommand(CLI::App& app, std::function<int()>& action);
void AddDryCommand(CLI::App& app, std::function<int()>& action);
void AddSelftestCommand(CLI::App& app, std::function<int()>& action);
void AddOracleCommand(CLI::App& app, std::function<int()>& action);

}  // namespace shardcheck
