// An in-process communicator for ranks as threads: a test double of the
// collectives' semantics, used by tests only (and by the ranks-as-threads
// runner of a build without Gloo). Every rank deposits a copy of its input;
// once all have, each computes its result from all of them, summing in rank
// order 0, 1, ... (bf16 and fp16 through fp32), so results are fixed
// whatever the thread timing. Works on CPU and CUDA tensors alike: it only
// copies and adds with ATen. A rank that waits longer than the timeout, or
// whose peer left the group by throwing, throws Error naming the op and the
// ranks it waited for.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "distributed/communicator.h"

namespace shardcheck {

// Runs `body` once per rank on `size` threads, each with a communicator of
// one in-process group, and joins them. Returns one entry per rank: null if
// its body returned, else what it threw. A rank that throws leaves the
// group: its peers' next collective fails at once, naming it.
std::vector<std::exception_ptr> RunLocalRanksInProcess(
    int size, std::chrono::milliseconds timeout, const std::function<void(Communicator&)>& body);

// The communicator of a world of one rank (every collective is a copy),
// for single-process runs of a build without Gloo.
std::unique_ptr<Communicator> MakeSingleRankCommunicator();

// Ranks as threads over this build's CPU backend: Gloo where shardcheck is
// built with it (the default build), else the in-process double above (the
// torch 2.x build, which has no Gloo). Same contract as both.
std::vector<std::exception_ptr> RunRanksInProcess(int size, std::chrono::milliseconds timeout,
                                                  const std::function<void(Communicator&)>& body);

}  // namespace shardcheck
