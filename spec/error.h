// The one error type of shardcheck. Loads, parsers and runs throw it with a
// message that names the artifact (file, tensor key, rank, step, line); the
// CLI turns it into one line on stderr and the exit code of its kind
// (docs/reliability.md, "Exit codes"):
//   0 ok; 1 a check failed; 2 bad input (kInput, the default: a malformed
//   argument, file or checkpoint, a size that cannot be allocated);
//   3 the environment or communication failed (kEnvironment: a dead peer,
//   a filesystem error); 124 a timeout (kTimeout: a collective's
//   included); 128+n killed by signal n.
#pragma once

#include <stdexcept>
#include <string>

namespace shardcheck {

enum class ErrorKind { kInput, kEnvironment, kTimeout };

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ErrorKind kind = ErrorKind::kInput)
      : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// The process exit code of an error of `kind`: 2, 3 or 124.
inline int ExitCodeFor(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInput:
      return 2;
    case ErrorKind::kEnvironment:
      return 3;
    case ErrorKind::kTimeout:
      return 124;
  }
  return 2;
}

}  // namespace shardcheck
