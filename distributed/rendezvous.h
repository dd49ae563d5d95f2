// Where this process sits in a multi-process job, read from the launcher's
// environment (shardcheck launch / torchrun, SLURM's srun, Open MPI's
// mpirun), and the communicator that connects it to its peers.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "distributed/communicator.h"

namespace shardcheck {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // rank among the processes on this host (its GPU: CudaIndexFor)
  int local_world_size = 1;  // processes on this host
  int node_rank = 0;         // this host's index (GROUP_RANK, SLURM_NODEID), for messages
  std::string master_addr = "127.0.0.1";  // host of rank 0's TCPStore
  int master_port = 0;                    // its port; 0 when world_size == 1
  std::string source;                     // "torchrun", "slurm", "openmpi" or "single"
};

// The DistEnv of this process. Tries, in order: torchrun's variables
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
// also what `shardcheck launch` sets), SLURM's (SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID, SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE with
// SLURM_NODEID), Open MPI's (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,
// _LOCAL_SIZE), else a single process (rank 0 of 1). SLURM and Open MPI
// still need MASTER_PORT, and MASTER_ADDR unless every rank is on one host.
// Throws Error naming the variable when one is malformed, missing or out of
// range. Reads the environment only.
DistEnv DistEnvFromEnvironment();

// Connects this process to its peers: rank 0 serves a c10d::TCPStore at
// MASTER_ADDR:MASTER_PORT for world_size workers, every rank joins it, and
// the chosen backend meets through it. `backend` is "gloo", "nccl" or
// "auto" (nccl when built with NCCL and a GPU is visible, else gloo).
// A single process needs no network (in-memory store). Gloo listens on
// loopback when every rank is on this host; across hosts on the interface
// named by GLOO_SOCKET_IFNAME, else on this host's address on the route to
// MASTER_ADDR (so network namespaces and multi-homed nodes pick the
// interface their peers reach). Every wait, the
// rendezvous included, is bounded by `timeout`. Throws Error naming the
// rank, the store address or the backend on failure.
std::unique_ptr<Communicator> ConnectFromEnvironment(const std::string& backend,
                                                     std::chrono::milliseconds timeout);

// The same for an explicit DistEnv (what ConnectFromEnvironment does after
// reading the environment).
std::unique_ptr<Communicator> Connect(const DistEnv& env, const std::string& backend,
                                      std::chrono::milliseconds timeout);

}  // namespace shardcheck
