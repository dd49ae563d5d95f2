// `shardcheck launch`: starts N ranks of one command on this host with
// torchrun's environment, prefixes their output, and ends the job the way a
// test needs: the first failing rank stops all (the most direct failure is
// named as the cause: a rank exiting 3 or 124 waits up to 1 s for a peer
// killed by a signal or exiting otherwise), nothing hangs, and the exit
// code is truthful. With --nnodes > 1, one launcher runs on each node, as
// with torchrun's static rendezvous: node r starts global ranks
// r*nproc .. r*nproc+nproc-1, and every rank meets at MASTER_ADDR:MASTER_PORT.
#pragma once

#include <string>
#include <vector>

namespace shardcheck {

struct LaunchOptions {
  int nproc = 1;                     // ranks to start on this node
  int nnodes = 1;                    // nodes of the job, one launcher each
  int node_rank = 0;                 // this node's index in [0, nnodes)
  std::string master_addr;           // host of global rank 0; empty: 127.0.0.1 (one node only)
  std::vector<std::string> command;  // argv of every rank; command[0] is looked up in PATH
  double timeout_s = 0;              // whole-job limit in seconds; 0: none
  int port = 0;                      // MASTER_PORT; 0: a free port of this host
  double grace_s = 5;                // SIGTERM, then SIGKILL after this many seconds
  int out_fd = 1;                    // where the ranks' prefixed stdout goes
  int err_fd = 2;                    // where their prefixed stderr and the launcher's lines go
};

// Runs options.nproc copies of options.command, local rank k with
// RANK = node_rank*nproc + k, WORLD_SIZE = nnodes*nproc, LOCAL_RANK=k,
// LOCAL_WORLD_SIZE=nproc, GROUP_RANK=node_rank, GROUP_WORLD_SIZE=nnodes,
// MASTER_ADDR, MASTER_PORT and OMP_NUM_THREADS=1 (unless set), each in its
// own process group; CUDA_VISIBLE_DEVICES is left alone. Every line a rank
// writes to stdout/stderr is copied to out_fd / err_fd with the prefix
// "[rank R] " ("[node n rank R] " when nnodes > 1). With nnodes > 1,
// master_addr and a non-zero port are required (every node must name the
// same ones). When a rank exits non-zero or is
// killed by a signal, says so in one line, sends SIGTERM to the other
// ranks and SIGKILL after grace_s. SIGINT/SIGTERM sent to the launcher are
// forwarded to the ranks. Returns 0 if every rank exited 0; else the first
// failing rank's exit code (128 + signal if it was killed), 124 when
// timeout_s expired, or 128 + the signal the launcher received. Throws
// Error for bad options or when it cannot start (pipes, fork). Installs
// process-wide signal handlers while it runs (restored on return), so one
// Launch runs at a time in a process.
int Launch(const LaunchOptions& options);

}  // namespace shardcheck
