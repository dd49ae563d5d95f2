// `shardcheck launch --nproc N [--timeout S] [--port P] -- CMD ARGS...`:
// the CLI of the launcher (harness/launcher.h).
#include "harness/cli/cli.h"
#include "harness/launch/launcher.h"

namespace shardcheck {

void AddLaunchCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "launch",
      "Start N ranks of a command on this host with torchrun's environment (RANK, WORLD_SIZE, "
      "LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), prefix their output with "
      "\"[rank k] \", stop all when one fails, and exit with its code (124 on --timeout).");
  auto o = std::make_shared<LaunchOptions>();
  cmd->add_option("--nproc", o->nproc, "ranks to start")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--timeout", o->timeout_s,
                  "stop all ranks and exit 124 after S seconds; 0: never")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--port", o->port, "MASTER_PORT; 0: a free port")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--grace", o->grace_s, "seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("command", o->command, "the command of every rank and its arguments, after --")
      ->required();
  cmd->callback([&action, o] { action = [o] { return Launch(*o); }; });
}

}  // namespace shardcheck
