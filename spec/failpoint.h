// Named failpoints: switches compiled into every build that make a run
// crash, stall or fail at an exact place, so tests can inject faults
// deterministically (docs/reliability.md, "Failpoints"). Off unless the
// environment lists them:
//
//   SHARDCHECK_FAILPOINTS=name[=action][@rank][,name[=action][@rank]...]
//
//   action  crash  the process SIGKILLs itself (the default)
//           segv   the process raises SIGSEGV (as a segfault would)
//           exit   the process exits at once with code 1 (no unwinding)
//           stall  the thread sleeps until the process is killed
//           error  throws Error (kEnvironment) "failpoint <name>"
//   @rank   only that rank acts (default: every rank)
//
// A call site costs one relaxed atomic load when no failpoint is set; call
// sites are at phase boundaries, never inside a kernel loop. Every name
// must be one of AllFailpoints(): an unknown name is an input error, so a
// misspelt injection cannot pass unnoticed as "survived".
#pragma once

#include <string>
#include <vector>

namespace shardcheck {

struct FailpointInfo {
  const char* name;
  const char* where;  // the exact place it acts, for `shardcheck failpoints` and the docs
};

// Every failpoint compiled into shardcheck, in the order a run reaches them.
const std::vector<FailpointInfo>& AllFailpoints();

// Acts if `name` is enabled for `rank` (crash, stall or throw), and records
// that it was reached. `rank` -1 stands for this process's RANK environment
// variable (0 when unset), for places that do not know their rank. Throws
// Error (kInput) on the first call if SHARDCHECK_FAILPOINTS is malformed.
void Failpoint(const char* name, int rank);

// Reads SHARDCHECK_FAILPOINTS now, so a malformed list fails before any work
// (the CLI calls it first), and returns the enabled terms as written there,
// empty when none.
std::string LoadFailpoints();

// The enabled failpoints reached so far in this process (names).
std::vector<std::string> FailpointsReached();

// Replaces the configuration (as if SHARDCHECK_FAILPOINTS were `spec`) and
// clears the reached set. For tests; not thread-safe against Failpoint().
void SetFailpointsForTest(const std::string& spec);

}  // namespace shardcheck
