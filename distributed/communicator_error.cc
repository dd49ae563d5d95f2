#include "distributed/communicator_error.h"

#include <algorithm>

#include "spec/error.h"

namespace shardcheck {
namespace {

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

std::chrono::milliseconds CollectiveFailure::grace() const {
  return std::clamp(timeout_ / 10, std::chrono::milliseconds(500), std::chrono::milliseconds(5000));
}

void CollectiveFailure::Check(const char* op, bool ok, const std::string& what) const {
  if (ok) return;
  throw Error(std::string(op) + " on rank " + std::to_string(rank_) + " of " +
                  std::to_string(size_) + ": " + what,
              ErrorKind::kEnvironment);
}

void CollectiveFailure::CheckUsable(const char* op) const {
  if (failed_.empty()) return;
  throw Error(std::string(op) + " on rank " + std::to_string(rank_) + " of " +
                  std::to_string(size_) + " refused: an earlier collective failed (" + failed_ +
                  ")",
              ErrorKind::kEnvironment);
}

void CollectiveFailure::Throw(const char* op, const std::string& reason) {
  std::string why = CleanBackendMessage(reason);
  std::string hint;
  ErrorKind kind = ErrorKind::kEnvironment;
  if (Contains(why, "reset by peer") || Contains(why, "closed by peer") ||
      Contains(why, "Broken pipe") || Contains(why, "Connection refused")) {
    hint = "a peer rank exited?";
  } else if (Contains(why, "imed out") || Contains(why, "imeout")) {
    hint = "no answer within " + std::to_string(timeout_.count()) +
           " ms: a peer rank stopped participating, or has not started?";
    kind = ErrorKind::kTimeout;
  }
  std::string message = std::string(op) + " on rank " + std::to_string(rank_) + " of " +
                        std::to_string(size_) + " failed: " + why;
  if (!hint.empty()) message += " (" + hint + ")";
  failed_ = message;
  throw Error(message, kind);
}

std::string CleanBackendMessage(const std::string& reason) {
  std::string out;
  size_t i = 0;
  while (i < reason.size()) {
    // Drop "[path:line] " prefixes that Gloo and c10 put before messages.
    if (reason[i] == '[') {
      const size_t close = reason.find(']', i);
      if (close != std::string::npos) {
        const std::string inside = reason.substr(i + 1, close - i - 1);
        if (inside.find('/') != std::string::npos && inside.find(':') != std::string::npos) {
          i = close + 1;
          while (i < reason.size() && reason[i] == ' ') ++i;
          continue;
        }
      }
    }
    const char c = reason[i++];
    if (c == '\n' || c == '\r') {
      if (!out.empty() && out.back() != ' ') out += "; ";
    } else {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  return out.empty() ? std::string("unknown error") : out;
}

}  // namespace shardcheck
