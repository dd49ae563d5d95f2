#include "harness/matrix/interrupt_watch.h"

#include <signal.h>
#include <unistd.h>

namespace shardcheck {

namespace {

// SIGUSR1 is how the destructor wakes the watcher when no signal came.
sigset_t WatchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

}  // namespace

const char* SignalName(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "a signal";
  }
}

InterruptWatch::InterruptWatch(std::function<void(int)> on_signal)
    : on_signal_(std::move(on_signal)) {
  const sigset_t set = WatchedSignals();
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  watcher_ = std::thread([this] { Watch(); });
}

InterruptWatch::~InterruptWatch() {
  pthread_kill(watcher_.native_handle(), SIGUSR1);
  watcher_.join();
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

void InterruptWatch::Watch() {
  const sigset_t set = WatchedSignals();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  if (sig == SIGUSR1) return;
  on_signal_(sig);
  ::_exit(128 + sig);
}

}  // namespace shardcheck
