// Named failpoints: switches compiled into every build, off unless the
// environment lists them. Two kinds:
//
// - Faults (docs/reliability.md, "Failpoints") make a run crash, stall or
//   fail at an exact place, so tests inject faults deterministically.
// - Silent bugs (docs/detection.md) reproduce a real bug class at its
//   natural place in the code: the run goes on with silently wrong state,
//   and the scenario matrix must catch it (`shardcheck selftest`).
//
//   SHARDCHECK_FAILPOINTS=name[=action][@rank][,name[=action][@rank]...]
//
//   action  crash  the process SIGKILLs itself (the default for faults)
//           segv   the process raises SIGSEGV (as a segfault would)
//           exit   the process exits at once with code 1 (no unwinding)
//           stall  the thread sleeps until the process is killed
//           error  throws Error (kEnvironment) "failpoint <name>"
//           on     the bug is switched on (the only action of a silent bug)
//   @rank   only that rank acts (default: every rank)
//
// A call site costs one relaxed atomic load when no failpoint is set; call
// sites are at phase boundaries or once per kernel call, never inside a
// kernel loop. Every name must be one of AllFailpoints(): an unknown name is
// an input error, so a misspelt injection cannot pass unnoticed.
#pragma once

#include <string>
#include <vector>

namespace shardcheck {

enum class FailpointKind { kFault, kSilentBug };

struct FailpointInfo {
  const char* name;
  const char* where;  // the exact place it acts, for `shardcheck failpoints` and the docs
  FailpointKind kind = FailpointKind::kFault;
  const char* bug = "";  // a silent bug: what goes wrong, and the real bug it stands for
};

// Every failpoint compiled into shardcheck: the faults in the order a run
// reaches them, then the silent bugs.
const std::vector<FailpointInfo>& AllFailpoints();
// The entry of `name`, or nullptr.
const FailpointInfo* FindFailpoint(const std::string& name);

// Acts if `name` is enabled for `rank` (crash, stall or throw), and records
// that it was reached. `rank` -1 stands for this process's RANK environment
// variable (0 when unset), for places that do not know their rank. Throws
// Error (kInput) on the first call if SHARDCHECK_FAILPOINTS is malformed.
void Failpoint(const char* name, int rank);

// True if the silent bug `name` is switched on for `rank` (recording that it
// was reached); `rank` as for Failpoint(). Call it once per phase or kernel
// call and branch on the result. Throws Error (kInput) as Failpoint() does.
bool FailpointOn(const char* name, int rank = -1);

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
