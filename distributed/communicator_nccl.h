// The NCCL backend of Communicator: NCCL's C API on CUDA tensors, one GPU
// per process. Built only where CMake finds CUDA and NCCL (cmake/nccl.cmake);
// elsewhere the factory throws.
#pragma once

#include <chrono>
#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "distributed/communicator.h"

namespace shardcheck {

// Joins rank `rank` of `size` to an NCCL communicator on CUDA device
// `local_rank` (made current), meeting through `store`: rank 0 creates the
// NCCL unique id and publishes it there. Every collective is blocking and
// runs on the communicator's own stream, which is a blocking stream: it
// waits for work already queued on the legacy default stream and later
// default-stream work waits for it. An op not finished within `timeout`
// (or one that NCCL reports failed) aborts the NCCL communicator and throws
// Error naming the op and rank; later collectives then refuse. Throws
// Error("shardcheck was built without NCCL") in a build without NCCL.
std::unique_ptr<Communicator> MakeNcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                   int size, int local_rank,
                                                   std::chrono::milliseconds timeout);

// True when shardcheck was built with NCCL and this process sees at least
// one CUDA device; never throws.
bool NcclAvailable();

}  // namespace shardcheck
