#include "harness/cell/thread_ranks.h"

#include <mutex>

#include "distributed/communicator_local.h"

namespace shardcheck {

ThreadRun RunTrainOnThreads(const TrainOptions& opts, int dp, std::chrono::milliseconds timeout) {
  ThreadRun out;
  std::mutex mu;
  auto body = [&](Communicator& comm) {
    TrainResult r = RunDistributed(opts, comm, nullptr);
    if (comm.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      out.root = std::move(r);
    }
  };
  // Device tensors of every rank on one GPU: the in-process double of NCCL.
  const auto errors = opts.run.device.is_cuda() ? RunLocalRanksInProcess(dp, timeout, body)
                                                : RunRanksInProcess(dp, timeout, body);
  for (size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      out.errors.push_back("rank " + std::to_string(r) + ": " + e.what());
    } catch (...) {
      out.errors.push_back("rank " + std::to_string(r) + ": unknown exception");
    }
  }
  return out;
}

}  // namespace shardcheck
