// Child processes of shardcheck itself: the launcher runs as one (`shardcheck
// launch ...`) when a cell's ranks are processes, so several cells can run
// at once (Launch() holds process-wide signal handlers and runs one at a
// time per process).
#pragma once

#include <string>
#include <vector>

namespace shardcheck {

// This process's own binary (/proc/self/exe). Throws Error when unreadable.
std::string SelfBinary();

struct SpawnOptions {
  std::string log;               // stdout and stderr go here (truncated first)
  std::string gpus;              // CUDA_VISIBLE_DEVICES of the child; empty: left as it is
  std::vector<std::string> env;  // "NAME=value" entries added to (or replacing) this environment
};

// Runs argv (argv[0] an absolute path) and waits for it. The child gets
// SIGTERM when the thread that called Spawn dies (PR_SET_PDEATHSIG), and
// starts with no signal blocked. Returns its wait
// status (as waitpid gives it). Throws Error when the log cannot be opened
// or fork fails.
int Spawn(const std::vector<std::string>& argv, const SpawnOptions& options);

// "exited with code N" or "killed by signal N" of a wait status.
std::string DescribeWaitStatus(int status);
// The exit code a wait status stands for: the code, or 128 + the signal.
int ExitCodeOfWaitStatus(int status);

// The last line of `log` that says "error", else its last non-empty line.
std::string LastErrorLine(const std::string& log);

}  // namespace shardcheck
