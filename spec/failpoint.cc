#include "spec/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "spec/error.h"

namespace shardcheck {

namespace {

enum class Action { kCrash, kSegv, kExit, kStall, kError, kOn };

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

FailpointInfo Silent(const char* name, const char* where, const char* bug) {
  return {name, where, FailpointKind::kSilentBug, bug};
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
  if (word == "on") return Action::kOn;
  throw Error("SHARDCHECK_FAILPOINTS: '" + term + "': unknown action '" + word +
              "' (crash, segv, exit, stall, error or on)");
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
  std::string action;
  if (const size_t eq = rest.find('='); eq != std::string::npos) {
    action = rest.substr(eq + 1);
    rest = rest.substr(0, eq);
  }
  const FailpointInfo* f = FindFailpoint(rest);
  if (!f)
    throw Error("SHARDCHECK_FAILPOINTS: unknown failpoint '" + rest + "' (known: " + KnownNames() +
                ")");
  const bool silent = f->kind == FailpointKind::kSilentBug;
  e.action = action.empty() ? (silent ? Action::kOn : Action::kCrash) : ParseAction(term, action);
  if (silent != (e.action == Action::kOn))
    throw Error("SHARDCHECK_FAILPOINTS: '" + term + "': " +
                (silent ? "a silent bug takes no action but 'on'"
                        : "'on' is the action of silent bugs; a fault crashes, segfaults, "
                          "exits, stalls or throws"));
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
    case Action::kOn:
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
      // Silent bugs (docs/detection.md), in the order of the code they live in.
      Silent("grad_scale_applied_twice", "harness/cell/dist_train.cc, a rank's gradient copy",
             "the rank's gradient, already divided by M, is divided by M again"),
      Silent("grad_divided_by_dp_not_microbatches",
             "harness/cell/dist_train.cc, a rank's gradient copy",
             "the rank's micro-batch sum is divided by the DP size instead of M"),
      Silent("data_from_dp_rank_not_global_microbatch",
             "harness/models/grad_source.cc, a real model's micro-batch data",
             "a micro-batch's data is drawn by its index within the DP rank instead of its "
             "global index, so data order changes with the DP size (Megatron-LM #6858 class)"),
      Silent("scalar_params_routed_to_muon", "spec/routing.cc, RouteParams",
             "embedding and output matrices go to Muon instead of the scalar optimizer (only the "
             "number of dimensions is looked at)"),
      Silent("shard_range_off_by_one", "distributed/distrib_optimizer.cc, the shard update",
             "the update of the slice that ends a rank's shard stops one element short (an "
             "inclusive end taken as exclusive)"),
      Silent("skip_straddling_param", "distributed/distrib_optimizer.cc, the shard update",
             "a param cut by a shard boundary is updated only by the rank that holds its start"),
      Silent("lion_updated_moment_in_sign", "optimizers/lion.h, the Lion kernel (prepare)",
             "Lion takes the sign of the moment already updated with beta2 instead of the "
             "beta1 interpolation of the old one"),
      Silent("lion_sign_zero_is_one", "optimizers/lion.h, the Lion kernel (prepare)",
             "Lion's sign(0) is taken as +1, so a param whose gradient and moment are 0 moves"),
      Silent("allgather_skips_last_bucket",
             "distributed/distrib_optimizer.cc, the param all-gather",
             "the last bucket is not all-gathered: other ranks keep stale params"),
      Silent("two_moment_state_keys", "distributed/checkpoint.cc, the state keys of a save/load",
             "the checkpoint code names the states (exp_avg, exp_avg_sq) instead of the schema's "
             "keys and drops any other (Megatron-LM PR #5742)"),
      Silent("schema_from_top_level_optimizer",
             "distributed/checkpoint.cc, the state keys of a save/load",
             "the scalar optimizer's states are saved and loaded with the top-level optimizer's "
             "schema (Muon + Adam loses exp_avg_sq)"),
      Silent("third_state_key_dropped", "distributed/checkpoint.cc, a save",
             "an optimizer with three states saves two, and its schema record says two "
             "(AdEMAMix loses its third)"),
      Silent("state_dtype_bf16_on_save", "distributed/checkpoint.cc, a save",
             "optimizer state is rounded through bf16 on its way to the file"),
      Silent("layerwise_state_not_saved", "distributed/checkpoint.cc, a save",
             "a whole-param (layer-wise) optimizer's state is left out of the checkpoint and "
             "zero-filled at load"),
      Silent("bucket_offsets_use_padded_sizes",
             "distributed/checkpoint.cc, a dp_zero_gather_scatter save",
             "buckets are concatenated with their end padding while loads step over unpadded "
             "sizes (Megatron-LM PR #5077 class)"),
      Silent("drop_step_on_save", "distributed/checkpoint.cc, the metadata of a save",
             "the step counter is not saved: a resumed run starts again at step 1 "
             "(torchtitan #275 class)"),
      Silent("ignore_param_start_padding",
             "distributed/checkpoint.cc, where a load reads a bucket-space tensor",
             "a load ignores the 64-element padding of param starts in buffer space"),
      Silent("reshard_rank_order_reversed",
             "distributed/checkpoint.cc, where a load reads a dp_reshardable tensor",
             "at a new DP size, ranks read the shards of the mirrored rank (dp-1-r)"),
      Silent("wrong_dp_rank_in_dp_zero_scatter",
             "distributed/checkpoint.cc, where a load reads a dp_zero_gather_scatter tensor",
             "each rank reads the shard of the next rank from the flat tensor"),
      Silent("step_off_by_one_on_load", "distributed/checkpoint.cc, the end of a load",
             "the loaded step counter is one less than the saved one"),
      Silent("lr_schedule_restarts_on_load", "distributed/checkpoint.cc, the end of a load",
             "the lr schedule restarts at the loaded step (warm-up again; torchtitan #275 class)"),
      Silent("skip_post_load_param_sync", "distributed/checkpoint.cc, the end of a load",
             "model params are not re-derived from the loaded main params (Megatron-LM PR #6920 "
             "class)"),
  };
  return all;
}

const FailpointInfo* FindFailpoint(const std::string& name) {
  for (const FailpointInfo& f : AllFailpoints())
    if (name == f.name) return &f;
  return nullptr;
}

namespace {

// The action of `name` for `rank` if it is enabled there (recording that it
// was reached), nothing otherwise.
std::optional<Action> Reach(const char* name, int rank) {
  if (!g_maybe_enabled.load(std::memory_order_relaxed)) return std::nullopt;
  State& s = Global();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.parsed) {
    const char* env = std::getenv("SHARDCHECK_FAILPOINTS");
    Parse(s, env ? env : "");
  }
  auto it = s.enabled.find(name);
  if (it == s.enabled.end()) return std::nullopt;
  if (rank < 0) rank = ProcessRank();
  if (it->second.rank >= 0 && it->second.rank != rank) return std::nullopt;
  s.reached.insert(name);
  return it->second.action;
}

}  // namespace

void Failpoint(const char* name, int rank) {
  if (const std::optional<Action> a = Reach(name, rank)) Act(name, *a);
}

bool FailpointOn(const char* name, int rank) { return Reach(name, rank).has_value(); }

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
