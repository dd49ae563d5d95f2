// How a subcommand that threw ends: one line on stderr and the exit code of
// the contract in spec/error.h (docs/reliability.md, "Exit codes"), also
// for what libraries throw: a filesystem error is the environment's (3),
// an allocation that cannot be served is bad input (2: sizes too large), any
// other library error is the environment's (3).
#pragma once

#include <exception>
#include <ostream>

namespace shardcheck {

// Writes "shardcheck: error: <message>" to `err` and returns the exit code.
int ReportFailure(const std::exception_ptr& failure, std::ostream& err);

}  // namespace shardcheck
