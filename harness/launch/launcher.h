// `shardcheck launch`: starts N ranks of one command on this host with
// torchrun's environment, prefixes their output, and ends the job the way a
// test needs: the first failing rank stops all, nothing hangs, and the exit
// code is truthful.
#pragma once

#include <string>
#include <vector>

namespace shardcheck {

struct LaunchOptions {
  int nproc = 1;                     // ranks to start
  std::vector<std::string> command;  // argv of every rank; command[0] is looked up in PATH
  double timeout_s = 0;              // whole-job limit in seconds; 0: none
  int port = 0;                      // MASTER_PORT; 0: a free port of this host
  double grace_s = 5;                // SIGTERM, then SIGKILL after this many seconds
  int out_fd = 1;                    // where the ranks' prefixed stdout goes
  int err_fd = 2;                    // where their prefixed stderr and the launcher's lines go
};

// Runs options.nproc copies of options.command, rank k with RANK=k,
// WORLD_SIZE, LOCAL_RANK=k, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1,
// MASTER_PORT and OMP_NUM_THREADS=1 (unless set), each in its own process
// group. Every line a rank writes to stdout/stderr is copied to out_fd /
// err_fd with the prefix "[rank k] ". When a rank exits non-zero or is
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
