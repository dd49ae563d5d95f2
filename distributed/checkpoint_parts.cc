#include "distributed/checkpoint_parts.h"

#include <algorithm>

#include "spec/device.h"
#include "spec/error.h"
#include "spec/failpoint.h"

namespace shardcheck {

namespace {

// The first names replaced by exp_avg and exp_avg_sq, and no more than two
// kept: the names of a save that assumes every optimizer is Adam.
std::vector<std::string> AsTwoMoments(std::vector<std::string> names) {
  const std::vector<std::string> moments = {"exp_avg", "exp_avg_sq"};
  names.resize(std::min(names.size(), moments.size()));
  std::copy(moments.begin(), moments.begin() + static_cast<int64_t>(names.size()), names.begin());
  return names;
}

}  // namespace

// The silent bugs schema_from_top_level_optimizer and two_moment_state_keys
// change the names.
std::vector<std::string> StateNames(const DistributedOptimizer& opt, int child) {
  const auto& children = opt.children();
  const size_t count = children[static_cast<size_t>(child)].schema.keys.size();
  const bool top_level = FailpointOn("schema_from_top_level_optimizer");
  std::vector<std::string> names =
      children[top_level ? 0 : static_cast<size_t>(child)].schema.Names();
  names.resize(std::min(names.size(), count));
  if (FailpointOn("two_moment_state_keys")) names = AsTwoMoments(names);
  return names;
}

std::vector<PieceKind> ShardedKinds(const DistributedOptimizer& opt) {
  return PieceKinds(StateNames(opt, opt.sharded_child()));
}

std::vector<PieceKind> SavedKinds(const DistributedOptimizer& opt) {
  std::vector<PieceKind> kinds = ShardedKinds(opt);
  if (kinds.size() > 3 && FailpointOn("third_state_key_dropped")) kinds.erase(kinds.begin() + 3);
  return kinds;
}

at::Tensor SavedState(const at::Tensor& data) {
  if (!FailpointOn("state_dtype_bf16_on_save")) return data;
  return data.to(at::kBFloat16).to(at::kFloat);
}

at::Tensor OnHost(const at::Tensor& t) {
  return t.device().is_cpu() ? t.contiguous() : HostCopy(t);
}

void Agree(Communicator& comm, const std::string& what, const std::function<void()>& fn) {
  std::string err;
  ErrorKind kind = ErrorKind::kInput;
  try {
    fn();
  } catch (const Error& e) {
    err = e.what();
    kind = e.kind();
  } catch (const std::exception& e) {
    err = e.what();
    kind = ErrorKind::kEnvironment;
  }
  // The lowest failing rank, as the max of negated ranks (-size: none).
  at::Tensor lowest = at::full({1}, err.empty() ? -comm.size() : -comm.rank(), at::kLong);
  comm.AllReduce(lowest, ReduceOp::kMax);
  const int64_t failing = -lowest.item<int64_t>();
  if (failing >= comm.size()) return;
  at::Tensor failing_kind = at::full({1}, static_cast<int64_t>(kind), at::kLong);
  comm.Broadcast(failing_kind, static_cast<int>(failing));
  kind = static_cast<ErrorKind>(failing_kind.item<int64_t>());
  if (!err.empty()) throw Error(err + " [rank " + std::to_string(comm.rank()) + "]", kind);
  throw Error(what + " failed on rank " + std::to_string(failing) + " (see its error)", kind);
}

}  // namespace shardcheck
