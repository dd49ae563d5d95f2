// Ranks as threads: runs one distributed oracle run with every DP rank on
// its own thread of this process, over one Gloo group that meets through an
// in-memory store. Much cheaper than processes for large test matrices;
// `shardcheck launch` stays the real path. With opts.run.device on CUDA,
// every rank's tensors share that one GPU and the ranks talk through the
// in-process communicator (distributed/communicator_local.h), the test
// double of NCCL: NCCL refuses two ranks on one GPU.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "harness/cell/dist_train.h"

namespace shardcheck {

// What thread-ranks talk through on the CPU: a Gloo group that meets
// through an in-memory store (real TCP on loopback, Gloo's emulations of
// reduce_scatter and all_gather), or the in-process communicator
// (distributed/communicator_local.h: shared memory, the same collective
// semantics, about 7x faster for the scenario matrix; docs/performance.md).
// CUDA runs always use the in-process one.
enum class ThreadComm { kGloo, kInProcess };
std::string ThreadCommName(ThreadComm c);             // "gloo" | "in-process"
ThreadComm ParseThreadComm(const std::string& name);  // throws Error on another name

struct ThreadRun {
  TrainResult root;                 // rank 0's result
  std::vector<std::string> errors;  // "rank r: message" for every rank that threw
  bool ok() const { return errors.empty() && root.ok; }
};

// Runs `opts` on `dp` thread-ranks over `comm`; collectives time out after
// `timeout`.
ThreadRun RunTrainOnThreads(const TrainOptions& opts, int dp,
                            std::chrono::milliseconds timeout = std::chrono::seconds(120),
                            ThreadComm comm = ThreadComm::kGloo);

}  // namespace shardcheck
