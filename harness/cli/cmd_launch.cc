// `shardcheck launch --nproc N [--nnodes M --node-rank R --master-addr A
// --master-port P] [--timeout S] -- CMD ARGS...`: the CLI of the launcher
// (harness/launch/launcher.h).
#include "harness/cli/cli.h"
#include "harness/cli/cli_options.h"
#include "harness/launch/launcher.h"

namespace shardcheck {

void AddLaunchCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "launch",
      "Start N ranks of a command on this host with torchrun's environment (RANK, WORLD_SIZE, "
      "LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT), prefix their output "
      "with \"[rank k] \", stop all when one fails, and exit with its code (124 on --timeout). "
      "For several nodes, run one launcher per node with the same --nnodes, --master-addr and "
      "--master-port and its own --node-rank (docs/gpu.md).");
  auto o = std::make_shared<LaunchOptions>();
  cmd->add_option("--nproc,--nproc-per-node", o->nproc, "ranks to start on this node")
      ->required()
      ->check(AtLeast(1, 1024, "ranks of one node"));
  cmd->add_option("--nnodes", o->nnodes, "nodes of the job, one launcher on each")
      ->capture_default_str()
      ->check(AtLeast(1, 1 << 20, "nodes of one job"));
  cmd->add_option("--node-rank", o->node_rank, "this node's index in [0, --nnodes)")
      ->capture_default_str()
      ->check(AtLeast(0, 1 << 20, "nodes of one job"));
  cmd->add_option("--master-addr", o->master_addr,
                  "address of node 0, where global rank 0 serves the rendezvous store; needed "
                  "with --nnodes > 1 (default 127.0.0.1)");
  cmd->add_option("--timeout", o->timeout_s,
                  "stop all ranks and exit 124 after S seconds; 0: never")
      ->capture_default_str()
      ->check(RealIn(0, 604800, "at most a week; 0: never"));
  cmd->add_option("--master-port,--port", o->port,
                  "MASTER_PORT; 0: a free port of this host (one node only)")
      ->capture_default_str()
      ->check(IntIn(0, 65535, "a TCP port"));
  cmd->add_option("--grace", o->grace_s, "seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str()
      ->check(RealIn(0, 3600, "at most an hour"));
  cmd->add_option("command", o->command, "the command of every rank and its arguments, after --")
      ->required();
  cmd->callback([&action, o] { action = [o] { return Launch(*o); }; });
}

}  // namespace shardcheck
