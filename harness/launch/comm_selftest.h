// Every collective of a Communicator against its plain definition, in the
// style of nccl-tests: inputs are a function of (seed, rank, index), so each
// rank computes every expected result on its own and counts wrong elements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace shardcheck {

struct CollectiveCheckReport {
  int64_t checks = 0;                 // collectives run and compared
  int64_t wrong_elements = 0;         // on this rank, over all checks
  std::vector<std::string> failures;  // "all_reduce sum bf16 n=1037: 3 wrong elements", ...
};

// Runs reduce_scatter, all_gather, all_reduce (sum, max), broadcast and
// gather from every root, and barrier, over fp32/fp64/int64/bf16/uint8 and
// several sizes, on `comm` (CPU tensors for gloo, CUDA for nccl). Every rank
// of the group must call it with the same seed. Throws the communicator's
// Error when a collective fails; a wrong result is counted, not thrown.
CollectiveCheckReport CheckCollectives(Communicator& comm, uint64_t seed, int local_rank);

}  // namespace shardcheck
