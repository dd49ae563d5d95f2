#include "harness/cell/thread_ranks.h"

#include <mutex>

#include "distributed/communicator_local.h"
#include "spec/error.h"

namespace shardcheck {

std::string ThreadCommName(ThreadComm c) { return c == ThreadComm::kGloo ? "gloo" : "in-process"; }

ThreadComm ParseThreadComm(const std::string& name) {
  if (name == "gloo") return ThreadComm::kGloo;
  if (name == "in-process") return ThreadComm::kInProcess;
  throw Error("thread communicator '" + name + "' (expected gloo or in-process)");
}

ThreadRun RunTrainOnThreads(const TrainOptions& opts, int dp, std::chrono::milliseconds timeout,
                            ThreadComm comm) {
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
  const bool in_process = opts.run.device.is_cuda() || comm == ThreadComm::kInProcess;
  const auto errors =
      in_process ? RunLocalRanksInProcess(dp, timeout, body) : RunRanksInProcess(dp, timeout, body);
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
