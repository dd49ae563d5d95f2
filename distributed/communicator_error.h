// The errors of a communicator backend: one message shape for every op
// ("all_reduce on rank 1 of 3 failed: <reason> (<hint>)"), and the rule
// that a communicator whose collective failed refuses every later one (the
// peers' state is unknown after a failure, so continuing could hang or
// silently pair mismatched ops). Not thread-safe, as a Communicator.
#pragma once

#include <chrono>
#include <string>

namespace shardcheck {

class CollectiveFailure {
 public:
  CollectiveFailure(int rank, int size, std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), timeout_(timeout) {}

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // How long a wait may overrun the backend's own timeout before it is cut:
  // timeout/10, clamped to [0.5 s, 5 s].
  std::chrono::milliseconds grace() const;

  // Throws Error "<op> on rank r of n: <what>" unless `ok` (a caller's
  // mistake, e.g. mismatched sizes; the communicator stays usable).
  void Check(const char* op, bool ok, const std::string& what) const;
  // Throws Error if an earlier collective failed; else does nothing.
  void CheckUsable(const char* op) const;
  // Marks the communicator failed and throws Error "<op> on rank r of n
  // failed: <reason> (<hint>)"; `reason` is the backend's message, cleaned
  // to one line, and the hint says what a reason usually means.
  [[noreturn]] void Throw(const char* op, const std::string& reason);

 private:
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::string failed_;  // the first failure's message; empty while usable
};

// `reason` on one line without source-location prefixes such as
// "[/build/gloo/transport/tcp/pair.cc:598] ".
std::string CleanBackendMessage(const std::string& reason);

}  // namespace shardcheck
