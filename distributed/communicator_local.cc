#include "distributed/communicator_local.h"

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "distributed/host_staging.h"
#include "spec/error.h"

#ifdef SHARDCHECK_HAVE_GLOO
#include "distributed/communicator_gloo.h"
#endif

namespace shardcheck {

namespace {

// The meeting point of the ranks of one group. Thread-safe.
class LocalGroup {
 public:
  LocalGroup(int size, std::chrono::milliseconds timeout)
      : size_(size), timeout_(timeout), slots_(static_cast<size_t>(size)) {}

  // Deposits rank's contribution to collective `op` and returns every rank's,
  // in rank order, once all have deposited. The returned tensors are copies
  // nobody writes to.
  std::vector<at::Tensor> Exchange(int rank, const at::Tensor& t, const std::string& op) {
    // The copy a peer reads, taken before the lock: the ranks copy in parallel.
    at::Tensor mine;
    if (t.defined()) mine = t.device().is_cpu() ? HostStagingCopy(t) : t.clone();
    std::unique_lock<std::mutex> lock(mu_);
    CheckAlive(rank, op);
    slots_[static_cast<size_t>(rank)] = std::move(mine);
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      // The last to arrive completes the collective. The next one cannot
      // complete before every rank has taken this snapshot: it needs them all.
      snapshot_ = slots_;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return snapshot_;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (generation_ == generation) {
      const bool timed_out = cv_.wait_until(lock, deadline) == std::cv_status::timeout;
      // Completed while this rank slept: its result stands, even if a peer
      // has left since (it left after taking part).
      if (generation_ != generation) break;
      CheckAlive(rank, op);
      if (timed_out) {
        broken_ = "rank " + std::to_string(rank) + " timed out in " + op;
        cv_.notify_all();
        throw Error("local group: " + op + " on rank " + std::to_string(rank) +
                        " timed out after " + std::to_string(timeout_.count()) +
                        " ms waiting for its peers",
                    ErrorKind::kTimeout);
      }
    }
    return snapshot_;
  }

  // A rank whose body threw leaves: everyone waiting now, or later, fails.
  void Leave(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty()) broken_ = "rank " + std::to_string(rank) + " left the group";
    cv_.notify_all();
  }

  int size() const { return size_; }

 private:
  void CheckAlive(int rank, const std::string& op) const {
    if (!broken_.empty())
      throw Error("local group: " + op + " on rank " + std::to_string(rank) + " failed: " + broken_,
                  ErrorKind::kEnvironment);
  }

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<at::Tensor> slots_, snapshot_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::string broken_;
};

// What a sum accumulates in: fp32 for the 16-bit floats, else the dtype.
at::ScalarType AccumulateType(at::ScalarType t) {
  return (t == at::kBFloat16 || t == at::kHalf) ? at::kFloat : t;
}

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  std::string backend() const override { return "local"; }

  void ReduceScatterSum(const at::Tensor& input, at::Tensor& output) override {
    const std::vector<at::Tensor> all = group_->Exchange(rank_, input, "reduce_scatter");
    const int64_t n = output.numel();
    output.copy_(SumInOrder(all, [&](const at::Tensor& t) {
                   return t.reshape({-1}).narrow(0, rank_ * n, n);
                 }).view(output.sizes()));
  }

  void AllGather(const at::Tensor& input, at::Tensor& output) override {
    const std::vector<at::Tensor> all = group_->Exchange(rank_, input, "all_gather");
    const int64_t n = input.numel();
    at::Tensor flat = output.view({-1});
    for (int r = 0; r < size(); ++r)
      flat.narrow(0, r * n, n).copy_(all[static_cast<size_t>(r)].reshape({-1}));
  }

  void AllReduce(at::Tensor& tensor, ReduceOp op) override {
    const std::vector<at::Tensor> all = group_->Exchange(rank_, tensor, "all_reduce");
    if (op == ReduceOp::kSum) {
      tensor.copy_(SumInOrder(all, [](const at::Tensor& t) { return t; }));
      return;
    }
    at::Tensor best = all[0];
    for (size_t r = 1; r < all.size(); ++r) best = at::maximum(best, all[r]);
    tensor.copy_(best);
  }

  void Broadcast(at::Tensor& tensor, int root) override {
    const std::vector<at::Tensor> all = group_->Exchange(rank_, tensor, "broadcast");
    tensor.copy_(all.at(static_cast<size_t>(root)));
  }

  void Barrier() override { group_->Exchange(rank_, at::Tensor(), "barrier"); }

  std::vector<at::Tensor> Gather(const at::Tensor& tensor, int root) override {
    std::vector<at::Tensor> all = group_->Exchange(rank_, tensor, "gather");
    if (rank_ != root) return {};
    return all;
  }

 private:
  template <typename Part>
  at::Tensor SumInOrder(const std::vector<at::Tensor>& all, Part part) const {
    const at::ScalarType acc = AccumulateType(all[0].scalar_type());
    at::Tensor sum = part(all[0]).to(acc).clone();
    for (size_t r = 1; r < all.size(); ++r) sum = sum + part(all[r]).to(acc);
    return sum.to(all[0].scalar_type());
  }

  std::shared_ptr<LocalGroup> group_;
  int rank_;
};

}  // namespace

std::unique_ptr<Communicator> MakeSingleRankCommunicator() {
  return std::make_unique<LocalCommunicator>(
      std::make_shared<LocalGroup>(1, kDefaultCollectiveTimeout), 0);
}

std::vector<std::exception_ptr> RunLocalRanksInProcess(
    int size, std::chrono::milliseconds timeout, const std::function<void(Communicator&)>& body) {
  if (size < 1) throw Error("local group: size must be >= 1, got " + std::to_string(size));
  auto group = std::make_shared<LocalGroup>(size, timeout);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      LocalCommunicator comm(group, r);
      try {
        body(comm);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
        group->Leave(r);
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

std::vector<std::exception_ptr> RunRanksInProcess(int size, std::chrono::milliseconds timeout,
                                                  const std::function<void(Communicator&)>& body) {
#ifdef SHARDCHECK_HAVE_GLOO
  return RunGlooRanksInProcess(size, timeout, body);
#else
  return RunLocalRanksInProcess(size, timeout, body);
#endif
}

}  // namespace shardcheck
