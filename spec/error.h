// The one error type of shardcheck. Loads, parsers and runs throw it with a
// message that names the artifact (file, tensor key, rank, step, line); the
// CLI turns it into one line on stderr and a non-zero exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace shardcheck {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace shardcheck
