// What MakeNcclCommunicator is in a build without NCCL. With NCCL
// (SHARDCHECK_HAVE_NCCL, set by cmake/nccl.cmake) the real backend is
// distributed/nccl/communicator_nccl.cc and this file is empty.
#ifndef SHARDCHECK_HAVE_NCCL

#include "distributed/communicator_nccl.h"

#include "spec/error.h"

namespace shardcheck {

std::unique_ptr<Communicator> MakeNcclCommunicator(c10::intrusive_ptr<c10d::Store>, int, int, int,
                                                   std::chrono::milliseconds) {
  throw Error("shardcheck was built without NCCL");
}

bool NcclAvailable() { return false; }

}  // namespace shardcheck

#endif  // SHARDCHECK_HAVE_NCCL
