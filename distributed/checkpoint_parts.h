// What the checkpoint engine's files share (distributed/checkpoint.cc
// saves, checkpoint_compat.cc checks, checkpoint_load.cc loads; the
// formats of distributed/sharding/ use SavedState and OnHost). Internal to
// distributed/: the public API is distributed/checkpoint.h.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "distributed/checkpoint.h"
#include "distributed/communicator.h"
#include "distributed/distrib_optimizer.h"
#include "distributed/sharding_format.h"

namespace shardcheck {

// The names under which saves and loads keep the states of child `child`:
// its schema's keys, in order. Under the silent bugs named in the .cc,
// other names, and fewer of them (states past the list are neither saved
// nor loaded).
std::vector<std::string> StateNames(const DistributedOptimizer& opt, int child);

// The main param and the states of the sharded child.
std::vector<PieceKind> ShardedKinds(const DistributedOptimizer& opt);

// The kinds a save writes: ShardedKinds, less the third state under the
// silent bug third_state_key_dropped.
std::vector<PieceKind> SavedKinds(const DistributedOptimizer& opt);

// What a save writes of state `data`: itself, or under the silent bug
// state_dtype_bf16_on_save its bf16 rounding, back in fp32.
at::Tensor SavedState(const at::Tensor& data);

// `t` readable on the host without a copy when it already lives there (the
// save writes it before the optimizer changes again), else a host copy.
at::Tensor OnHost(const at::Tensor& t);

// Runs `fn` on every rank; if it threw on any rank, every rank throws: the
// failing rank its own message, the others one naming the first failing
// rank, all with that rank's error kind (so a full disk on one rank is an
// environment failure everywhere).
void Agree(Communicator& comm, const std::string& what, const std::function<void()>& fn);

// Checks what does not depend on this rank, most telling first: schemas,
// params, groups, the layout (types that store buffer space), tensor keys,
// lr schedule. Throws Error naming `dir` and what differs.
void ValidateCompatibility(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                           const std::string& dir, const LoadOptions& o);

}  // namespace shardcheck
