#include "distributed/rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef SHARDCHECK_HAVE_GLOO
#include "distributed/communicator_gloo.h"
#endif
#include "distributed/communicator_local.h"
#include "distributed/communicator_nccl.h"
#include "spec/device.h"
#include "spec/error.h"

namespace shardcheck {
namespace {

// The variable's value, or null when unset or empty.
const char* Get(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

int ParseInt(const char* name, const std::string& value, const std::string& source) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || end == value.c_str() || *end != '\0' || errno == ERANGE || v < INT_MIN ||
      v > INT_MAX) {
    throw Error(std::string(name) + "='" + value + "' is not an integer (" + source +
                " environment)");
  }
  return static_cast<int>(v);
}

int RequireInt(const char* name, const std::string& source) {
  const char* v = Get(name);
  if (v == nullptr) {
    throw Error(std::string(name) + " is not set (" + source + " environment: found " +
                (source == "torchrun" ? "RANK or WORLD_SIZE" : "the launcher's other variables") +
                ")");
  }
  return ParseInt(name, v, source);
}

int IntOr(const char* name, int fallback, const std::string& source) {
  const char* v = Get(name);
  return v == nullptr ? fallback : ParseInt(name, v, source);
}

// The variable names one launcher uses, for messages.
struct Names {
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_world;
};

void CheckRanges(const DistEnv& env, const Names& n) {
  auto fail = [&](const char* var, int value, const std::string& why) {
    throw Error(std::string(var) + "=" + std::to_string(value) + " " + why + " (" + env.source +
                " environment)");
  };
  if (env.world_size < 1) fail(n.world, env.world_size, "must be at least 1");
  if (env.rank < 0 || env.rank >= env.world_size) {
    fail(n.rank, env.rank,
         "is outside [0, " + std::string(n.world) + "=" + std::to_string(env.world_size) + ")");
  }
  if (env.local_world_size < 1 || env.local_world_size > env.world_size) {
    fail(n.local_world, env.local_world_size,
         "is outside [1, " + std::string(n.world) + "=" + std::to_string(env.world_size) + "]");
  }
  if (env.local_rank < 0 || env.local_rank >= env.local_world_size) {
    fail(n.local_rank, env.local_rank,
         "is outside [0, " + std::string(n.local_world) + "=" +
             std::to_string(env.local_world_size) + ")");
  }
}

// MASTER_ADDR and MASTER_PORT: the address may default to 127.0.0.1 when
// every rank is on this host; the port is needed whenever there are peers.
void ReadMaster(DistEnv& env) {
  const char* addr = Get("MASTER_ADDR");
  if (addr != nullptr) {
    env.master_addr = addr;
  } else if (env.world_size > 1 && env.local_world_size != env.world_size) {
    throw Error("MASTER_ADDR is not set: with " + env.source +
                " and ranks on several hosts, export MASTER_ADDR=<host of rank 0> and "
                "MASTER_PORT=<a free port there>");
  }
  if (env.world_size == 1) {
    env.master_port = IntOr("MASTER_PORT", 0, env.source);
  } else if (Get("MASTER_PORT") == nullptr) {
    throw Error("MASTER_PORT is not set: with " + env.source + " (world size " +
                std::to_string(env.world_size) +
                "), export MASTER_PORT=<a free port on rank 0's host>, e.g. 29500");
  } else {
    env.master_port = ParseInt("MASTER_PORT", Get("MASTER_PORT"), env.source);
  }
  if (env.master_port < 0 || env.master_port > 65535 ||
      (env.world_size > 1 && env.master_port == 0)) {
    throw Error("MASTER_PORT=" + std::to_string(env.master_port) +
                " is not a port in [1, 65535] (" + env.source + " environment)");
  }
}

// Tasks on node `node` from SLURM's compressed list, e.g. "2(x3),1".
int SlurmTasksOnNode(const std::string& spec, int node) {
  int index = 0;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t comma = spec.find(',', pos);
    const std::string item =
        spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t paren = item.find("(x");
    int count = 0;
    int repeat = 1;
    if (paren == std::string::npos) {
      count = ParseInt("SLURM_TASKS_PER_NODE", item, "slurm");
    } else {
      if (item.back() != ')') {
        throw Error("SLURM_TASKS_PER_NODE='" + spec + "' is malformed (slurm environment)");
      }
      count = ParseInt("SLURM_TASKS_PER_NODE", item.substr(0, paren), "slurm");
      repeat = ParseInt("SLURM_TASKS_PER_NODE", item.substr(paren + 2, item.size() - paren - 3),
                        "slurm");
    }
    if (node < index + repeat) return count;
    index += repeat;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  throw Error("SLURM_TASKS_PER_NODE='" + spec + "' lists " + std::to_string(index) +
              " nodes, but SLURM_NODEID=" + std::to_string(node) + " (slurm environment)");
}

DistEnv FromTorchrun() {
  DistEnv env;
  env.source = "torchrun";
  env.rank = RequireInt("RANK", env.source);
  env.world_size = RequireInt("WORLD_SIZE", env.source);
  // Without torchrun's local variables, assume every rank is on this host.
  env.local_rank = IntOr("LOCAL_RANK", env.rank, env.source);
  env.local_world_size = IntOr("LOCAL_WORLD_SIZE", env.world_size, env.source);
  env.node_rank = IntOr("GROUP_RANK", 0, env.source);
  CheckRanges(env, {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"});
  ReadMaster(env);
  return env;
}

DistEnv FromSlurm() {
  DistEnv env;
  env.source = "slurm";
  env.rank = RequireInt("SLURM_PROCID", env.source);
  env.world_size = RequireInt("SLURM_NTASKS", env.source);
  env.local_rank = RequireInt("SLURM_LOCALID", env.source);
  const char* names = "SLURM_NTASKS_PER_NODE";
  if (Get("SLURM_NTASKS_PER_NODE") != nullptr) {
    env.local_world_size = RequireInt("SLURM_NTASKS_PER_NODE", env.source);
  } else if (Get("SLURM_TASKS_PER_NODE") != nullptr) {
    names = "SLURM_TASKS_PER_NODE";
    env.local_world_size =
        SlurmTasksOnNode(Get("SLURM_TASKS_PER_NODE"), IntOr("SLURM_NODEID", 0, env.source));
  } else {
    throw Error(
        "SLURM_NTASKS_PER_NODE and SLURM_TASKS_PER_NODE are both unset: cannot tell how many "
        "ranks share this host (slurm environment)");
  }
  env.node_rank = IntOr("SLURM_NODEID", 0, env.source);
  CheckRanges(env, {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", names});
  ReadMaster(env);
  return env;
}

DistEnv FromOpenMpi() {
  DistEnv env;
  env.source = "openmpi";
  env.rank = RequireInt("OMPI_COMM_WORLD_RANK", env.source);
  env.world_size = RequireInt("OMPI_COMM_WORLD_SIZE", env.source);
  env.local_rank = RequireInt("OMPI_COMM_WORLD_LOCAL_RANK", env.source);
  env.local_world_size = RequireInt("OMPI_COMM_WORLD_LOCAL_SIZE", env.source);
  CheckRanges(env, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                    "OMPI_COMM_WORLD_LOCAL_SIZE"});
  ReadMaster(env);
  return env;
}

// This host's IPv4 address on the route to `host` (a UDP connect sends
// nothing), or "" when `host` does not resolve or has no route.
std::string LocalAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return "";
  std::string local;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    char text[INET_ADDRSTRLEN] = {};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text)) != nullptr) {
      local = text;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return local;
}

}  // namespace

DistEnv DistEnvFromEnvironment() {
  if (Get("RANK") != nullptr || Get("WORLD_SIZE") != nullptr) return FromTorchrun();
  if (Get("SLURM_PROCID") != nullptr) return FromSlurm();
  if (Get("OMPI_COMM_WORLD_RANK") != nullptr) return FromOpenMpi();
  DistEnv env;
  env.source = "single";
  return env;
}

std::unique_ptr<Communicator> Connect(const DistEnv& env, const std::string& backend,
                                      std::chrono::milliseconds timeout) {
  if (backend != "gloo" && backend != "nccl" && backend != "auto") {
    throw Error("unknown communicator backend '" + backend + "' (gloo, nccl or auto)");
  }
  const bool nccl = backend == "nccl" || (backend == "auto" && NcclAvailable());
#ifndef SHARDCHECK_HAVE_GLOO
  if (!nccl && env.world_size == 1) return MakeSingleRankCommunicator();
  if (!nccl)
    throw Error(
        "this shardcheck is built without Gloo (the torch 2.x build talks NCCL only): use "
        "--backend nccl "
        "on GPUs, or the default build for CPU ranks");
#endif
  const bool one_host = env.local_world_size == env.world_size;
  const std::string where =
      "rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) +
      (one_host ? "" : " on node " + std::to_string(env.node_rank)) + " (" + env.source + ")";
  c10::intrusive_ptr<c10d::Store> store;
  if (env.world_size == 1) {
    store = c10::make_intrusive<c10d::HashStore>();
  } else {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(env.master_port);
    opts.isServer = env.rank == 0;
    opts.numWorkers = static_cast<std::size_t>(env.world_size);
    // No separate wait for the workers (1.13's wait lets a timeout pass
    // silently): the backend's connect below waits for every peer, bounded.
    opts.waitWorkers = false;
    opts.timeout = timeout;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
    } catch (const std::exception& e) {
      const c10::Error* c10_error = dynamic_cast<const c10::Error*>(&e);
      throw Error("rendezvous on " + where + " failed at " + env.master_addr + ":" +
                      std::to_string(env.master_port) + " within " +
                      std::to_string(timeout.count()) +
                      " ms: " + (c10_error ? c10_error->what_without_backtrace() : e.what()),
                  ErrorKind::kEnvironment);
    }
  }
  try {
    if (nccl)
      return MakeNcclCommunicator(store, env.rank, env.world_size, CudaIndexFor(env.local_rank),
                                  timeout);
    // Gloo listens on loopback when every rank is on this host, else on the
    // address that routes to rank 0's host (GLOO_SOCKET_IFNAME wins over both).
    const std::string bind_host = one_host ? "127.0.0.1" : LocalAddressToward(env.master_addr);
#ifdef SHARDCHECK_HAVE_GLOO
    return MakeGlooCommunicator(store, env.rank, env.world_size, timeout, bind_host);
#else
    (void)bind_host;
    throw Error("this shardcheck is built without Gloo");
#endif
  } catch (const Error& e) {
    if (env.world_size == 1) throw;
    throw Error("rendezvous on " + where + " through the store at " + env.master_addr + ":" +
                    std::to_string(env.master_port) + " failed: " + e.what(),
                e.kind() == ErrorKind::kInput ? ErrorKind::kEnvironment : e.kind());
  }
}

std::unique_ptr<Communicator> ConnectFromEnvironment(const std::string& backend,
                                                     std::chrono::milliseconds timeout) {
  return Connect(DistEnvFromEnvironment(), backend, timeout);
}

}  // namespace shardcheck
