// The Gloo backend of Communicator: libtorch 1.13's c10d::ProcessGroupGloo
// on CPU tensors, with the ops Gloo lacks emulated exactly (see the .cc).
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "distributed/communicator.h"

namespace shardcheck {

// Joins rank `rank` of `size` to a Gloo group that meets through `store`
// and returns its communicator (which keeps `store` alive). Blocks until
// every rank has joined; throws Error naming this rank if that takes longer
// than `timeout`. Every collective of the result is bounded by `timeout`
// (plus a short grace, see docs/distributed-comm.md) and throws Error on
// failure, after which the communicator refuses further collectives.
// `bind_host` is the address this rank's Gloo device listens on:
// "127.0.0.1" for ranks on one host, "" for the address of this host's name
// (several hosts; GLOO_SOCKET_IFNAME, when set, picks the interface instead).
std::unique_ptr<Communicator> MakeGlooCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                   int size, std::chrono::milliseconds timeout,
                                                   const std::string& bind_host = "127.0.0.1");

// Ranks as threads, for fast tests: runs `body` once per rank on `size`
// threads, each with its own Gloo communicator over one shared in-memory
// c10d::HashStore, and joins them all. Returns one entry per rank: null if
// its body returned, else what it threw (connect failures included). A
// rank's communicator is destroyed on its own thread when its body ends.
std::vector<std::exception_ptr> RunGlooRanksInProcess(
    int size, std::chrono::milliseconds timeout, const std::function<void(Communicator&)>& body);

}  // namespace shardcheck
