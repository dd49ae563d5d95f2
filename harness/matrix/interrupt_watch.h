// SIGINT and SIGTERM during a long run (`shardcheck run`): instead of dying
// with nothing written, the run writes what it has (results.json of the
// finished cells, `interrupted: true`) and exits 128 + the signal
// (docs/reliability.md, "Interrupted runs").
//
// While an InterruptWatch lives, SIGINT and SIGTERM are blocked in this
// process's threads (create it before starting any) and a watcher thread
// waits for them; on one it calls `on_signal` with the signal's number,
// then ends the process with _exit(128 + signal). Child processes started
// meanwhile get the signals unblocked (harness/launch/spawn.h restores the
// mask in the child), so a Ctrl-C still reaches them.
#pragma once

#include <pthread.h>

#include <functional>
#include <thread>

namespace shardcheck {

class InterruptWatch {
 public:
  explicit InterruptWatch(std::function<void(int signal)> on_signal);
  // Stops watching and restores the signal mask (no signal was taken).
  ~InterruptWatch();
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

 private:
  void Watch();

  std::function<void(int)> on_signal_;
  sigset_t old_mask_;
  std::thread watcher_;
};

// "SIGINT", "SIGTERM", else "signal N".
const char* SignalName(int signal);

}  // namespace shardcheck
