#include "spec/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "spec/error.h"

namespace shardcheck {

namespace {

enum class Action { kCrash, kSegv, kExit, kStall, kError };

struct Enabled {
  Action action = Action::kCrash;
  int rank = -1;  // -1: every rank
};

struct State {
  std::mutex mu;
  bool parsed = false;
  std::string spec;
  std::map<std::string, Enabled> enabled;
  std::set<std::string> reached;
};

State& Global() {
  static State s;
  return s;
}

// True once a configuration with at least one failpoint is in place, or
// before the environment was read.
std::atomic<bool> g_maybe_enabled{true};

const FailpointInfo* Find(const std::string& name) {
  for (const FailpointInfo& f : AllFailpoints())
    if (name == f.name) return &f;
  return nullptr;
}

std::string KnownNames() {
  std::string s;
  for (const FailpointInfo& f : AllFailpoints()) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

Action ParseAction(const std::string& term, const std::string& word) {
  if (word == "crash") return Action::kCrash;
  if (word == "segv") return Action::kSegv;
  if (word == "exit") return Action::kExit;
  if (word == "stall") return Action::kStall;
  if (word == "error") return Action::kError;
  throw Error("SHARDCHECK_FAILPOINTS: '" + term + "': unknown action '" + word +
              "' (crash, segv, exit, stall or error)");
}

int ParseRank(const std::string& term, const std::string& digits) {
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
      digits.size() > 6)
    throw Error("SHARDCHECK_FAILPOINTS: '" + term + "': rank must be a number, got '" + digits +
                "'");
  return std::stoi(digits);
}

// name[=action][@rank]
std::pair<std::string, Enabled> ParseTerm(const std::string& term) {
  std::string rest = term;
  Enabled e;
  if (const size_t at = rest.find('@'); at != std::string::npos) {
    e.rank = ParseRank(term, rest.substr(at + 1));
    rest = rest.substr(0, at);
  }
  if (const size_t eq = rest.find('='); eq != std::string::npos) {
    e.action = ParseAction(term, rest.substr(eq + 1));
    rest = rest.substr(0, eq);
  }
  if (!Find(rest))
    throw Error("SHARDCHECK_FAILPOINTS: unknown failpoint '" + rest + "' (known: " + KnownNames() +
                ")");
  return {rest, e};
}

void Parse(State& s, const std::string& spec) {
  s.enabled.clear();
  s.reached.clear();
  std::stringstream terms(spec);
  std::string term;
  while (std::getline(terms, term, ',')) {
    if (term.empty()) continue;
    s.enabled.insert(ParseTerm(term));
  }
  s.spec = s.enabled.empty() ? "" : spec;
  s.parsed = true;
  g_maybe_enabled.store(!s.enabled.empty(), std::memory_order_relaxed);
}

int ProcessRank() {
  const char* r = std::getenv("RANK");
  return r ? std::atoi(r) : 0;
}

[[noreturn]] void Act(const std::string& name, Action action) {
  switch (action) {
    case Action::kCrash:
      ::kill(::getpid(), SIGKILL);
      break;
    case Action::kSegv:
      ::signal(SIGSEGV, SIG_DFL);
      ::raise(SIGSEGV);
      break;
    case Action::kExit:
      std::_Exit(1);
    case Action::kStall:
      break;
    case Action::kError:
      throw Error("failpoint " + name, ErrorKind::kEnvironment);
  }
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace

const std::vector<FailpointInfo>& AllFailpoints() {
  static const std::vector<FailpointInfo> all = {
      {"step.before_update",
       "DistributedOptimizer::Step, after the gradient reduce-scatter, "
       "before the shard update"},
      {"save.rank_file_partial",
       "a rank file of a checkpoint save, after half of its bytes "
       "(header included) are written, before the file's rename"},
      {"save.after_rank_file", "a checkpoint save, after this rank's file is written and fsynced"},
      {"save.before_metadata",
       "a checkpoint save on rank 0, every rank file written, before "
       "metadata.json"},
      {"save.before_rename",
       "a checkpoint save on rank 0, metadata.json written, before the "
       ".tmp- folder's rename"},
      {"save.before_latest",
       "a checkpoint save on rank 0, after the rename, before `latest` "
       "is updated"},
      {"load.before_read", "a checkpoint load, metadata validated, before tensors are read"},
  };
  return all;
}

void Failpoint(const char* name, int rank) {
  if (!g_maybe_enabled.load(std::memory_order_relaxed)) return;
  State& s = Global();
  Enabled e;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.parsed) {
      const char* env = std::getenv("SHARDCHECK_FAILPOINTS");
      Parse(s, env ? env : "");
    }
    auto it = s.enabled.find(name);
    if (it == s.enabled.end()) return;
    if (rank < 0) rank = ProcessRank();
    if (it->second.rank >= 0 && it->second.rank != rank) return;
    s.reached.insert(name);
    e = it->second;
  }
  Act(name, e.action);
}

std::string LoadFailpoints() {
  State& s = Global();
  std::lock_guard<std::mutex> lock(s.mu);
  const char* env = std::getenv("SHARDCHECK_FAILPOINTS");
  if (!s.parsed) Parse(s, env ? env : "");
  return s.spec;
}

std::vector<std::string> FailpointsReached() {
  State& s = Global();
  std::lock_guard<std::mutex> lock(s.mu);
  return {s.reached.begin(), s.reached.end()};
}

void SetFailpointsForTest(const std::string& spec) {
  State& s = Global();
  std::lock_guard<std::mutex> lock(s.mu);
  Parse(s, spec);
}

}  // namespace shardcheck
