// DistEnvFromEnvironment for torchrun, SLURM and Open MPI variables (set
// and unset in the test), and Connect over a real TCPStore with ranks as
// threads.
#include "distributed/rendezvous.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <thread>

#include "spec/error.h"

namespace shardcheck {
namespace {

const char* const kVariables[] = {"RANK",
                                  "WORLD_SIZE",
                                  "LOCAL_RANK",
                                  "LOCAL_WORLD_SIZE",
                                  "MASTER_ADDR",
                                  "MASTER_PORT",
                                  "GROUP_RANK",
                                  "SLURM_PROCID",
                                  "SLURM_NTASKS",
                                  "SLURM_LOCALID",
                                  "SLURM_NTASKS_PER_NODE",
                                  "SLURM_TASKS_PER_NODE",
                                  "SLURM_NODEID",
                                  "OMPI_COMM_WORLD_RANK",
                                  "OMPI_COMM_WORLD_SIZE",
                                  "OMPI_COMM_WORLD_LOCAL_RANK",
                                  "OMPI_COMM_WORLD_LOCAL_SIZE"};

// Clears every launcher variable for the test and restores them after.
class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kVariables) unsetenv(name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  void Set(const std::map<std::string, std::string>& vars) {
    for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
  }
  // The message of the Error that DistEnvFromEnvironment throws.
  std::string ErrorMessage() {
    try {
      DistEnvFromEnvironment();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }

 private:
  std::map<std::string, std::string> saved_;
};

TEST_F(EnvTest, NothingSetIsOneProcess) {
  const DistEnv env = DistEnvFromEnvironment();
  EXPECT_EQ(env.source, "single");
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.local_world_size, 1);
}

TEST_F(EnvTest, Torchrun) {
  Set({{"RANK", "5"},
       {"WORLD_SIZE", "8"},
       {"LOCAL_RANK", "1"},
       {"LOCAL_WORLD_SIZE", "4"},
       {"MASTER_ADDR", "node7"},
       {"MASTER_PORT", "29511"},
       {"GROUP_RANK", "1"}});
  const DistEnv env = DistEnvFromEnvironment();
  EXPECT_EQ(env.source, "torchrun");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 4);
  EXPECT_EQ(env.node_rank, 1);
  EXPECT_EQ(env.master_addr, "node7");
  EXPECT_EQ(env.master_port, 29511);
}

TEST_F(EnvTest, TorchrunWithoutLocalVariablesAssumesOneHost) {
  Set({{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"MASTER_PORT", "29500"}});
  const DistEnv env = DistEnvFromEnvironment();
  EXPECT_EQ(env.local_rank, 2);
  EXPECT_EQ(env.local_world_size, 3);
  EXPECT_EQ(env.node_rank, 0);  // no GROUP_RANK: the first (only) host
  EXPECT_EQ(env.master_addr, "127.0.0.1");
}

TEST_F(EnvTest, TorchrunTakesPrecedenceOverSlurm) {
  Set({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}});
  EXPECT_EQ(DistEnvFromEnvironment().source, "torchrun");
}

TEST_F(EnvTest, MalformedValuesNameTheVariable) {
  Set({{"RANK", "one"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}});
  EXPECT_NE(ErrorMessage().find("RANK='one' is not an integer"), std::string::npos)
      << ErrorMessage();
  Set({{"RANK", "1"}, {"WORLD_SIZE", "2x"}});
  EXPECT_NE(ErrorMessage().find("WORLD_SIZE='2x'"), std::string::npos) << ErrorMessage();
  Set({{"WORLD_SIZE", "2"}, {"MASTER_PORT", "http"}});
  EXPECT_NE(ErrorMessage().find("MASTER_PORT='http'"), std::string::npos) << ErrorMessage();
  Set({{"MASTER_PORT", "70000"}});
  EXPECT_NE(ErrorMessage().find("MASTER_PORT=70000 is not a port"), std::string::npos)
      << ErrorMessage();
}

TEST_F(EnvTest, OutOfRangeValuesNameTheVariable) {
  Set({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_PORT", "29500"}});
  EXPECT_NE(ErrorMessage().find("RANK=4 is outside [0, WORLD_SIZE=4)"), std::string::npos)
      << ErrorMessage();
  Set({{"RANK", "0"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}});
  EXPECT_NE(ErrorMessage().find("LOCAL_RANK=2 is outside [0, LOCAL_WORLD_SIZE=2)"),
            std::string::npos)
      << ErrorMessage();
}

TEST_F(EnvTest, TorchrunWithoutWorldSizeOrPortIsAnError) {
  Set({{"RANK", "0"}});
  EXPECT_NE(ErrorMessage().find("WORLD_SIZE is not set"), std::string::npos) << ErrorMessage();
  Set({{"WORLD_SIZE", "2"}});
  EXPECT_NE(ErrorMessage().find("MASTER_PORT is not set"), std::string::npos) << ErrorMessage();
}

TEST_F(EnvTest, SlurmWithTasksPerNode) {
  Set({{"SLURM_PROCID", "6"},
       {"SLURM_NTASKS", "8"},
       {"SLURM_LOCALID", "2"},
       {"SLURM_NTASKS_PER_NODE", "4"},
       {"MASTER_ADDR", "gpu01"},
       {"MASTER_PORT", "29500"}});
  const DistEnv env = DistEnvFromEnvironment();
  EXPECT_EQ(env.source, "slurm");
  EXPECT_EQ(env.rank, 6);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 2);
  EXPECT_EQ(env.local_world_size, 4);
  EXPECT_EQ(env.master_addr, "gpu01");
}

TEST_F(EnvTest, SlurmDerivesLocalSizeFromCompressedTaskList) {
  Set({{"SLURM_PROCID", "6"},
       {"SLURM_NTASKS", "7"},
       {"SLURM_LOCALID", "0"},
       {"SLURM_TASKS_PER_NODE", "2(x3),1"},
       {"SLURM_NODEID", "3"},
       {"MASTER_ADDR", "gpu01"},
       {"MASTER_PORT", "29500"}});
  EXPECT_EQ(DistEnvFromEnvironment().local_world_size, 1);
  Set({{"SLURM_PROCID", "3"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"}});
  EXPECT_EQ(DistEnvFromEnvironment().local_world_size, 2);
  Set({{"SLURM_TASKS_PER_NODE", "2(x3"}});
  EXPECT_NE(ErrorMessage().find("SLURM_TASKS_PER_NODE='2(x3' is malformed"), std::string::npos)
      << ErrorMessage();
}

TEST_F(EnvTest, SlurmOnSeveralHostsNeedsMasterAddrAndPort) {
  Set({{"SLURM_PROCID", "0"},
       {"SLURM_NTASKS", "8"},
       {"SLURM_LOCALID", "0"},
       {"SLURM_NTASKS_PER_NODE", "4"}});
  EXPECT_NE(ErrorMessage().find("MASTER_ADDR is not set"), std::string::npos) << ErrorMessage();
  Set({{"MASTER_ADDR", "gpu01"}});
  EXPECT_NE(ErrorMessage().find("MASTER_PORT is not set"), std::string::npos) << ErrorMessage();
  Set({{"SLURM_LOCALID", "-1"}, {"MASTER_PORT", "29500"}});
  EXPECT_NE(ErrorMessage().find("SLURM_LOCALID=-1"), std::string::npos) << ErrorMessage();
}

TEST_F(EnvTest, OpenMpi) {
  Set({{"OMPI_COMM_WORLD_RANK", "1"},
       {"OMPI_COMM_WORLD_SIZE", "2"},
       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
       {"MASTER_PORT", "29500"}});
  const DistEnv env = DistEnvFromEnvironment();
  EXPECT_EQ(env.source, "openmpi");
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 2);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "127.0.0.1");  // one host: loopback
  Set({{"OMPI_COMM_WORLD_LOCAL_SIZE", "two"}});
  EXPECT_NE(ErrorMessage().find("OMPI_COMM_WORLD_LOCAL_SIZE='two'"), std::string::npos)
      << ErrorMessage();
}

TEST(Connect, SingleProcessNeedsNoNetwork) {
  DistEnv env;
  auto comm = Connect(env, "gloo", std::chrono::seconds(10));
#ifdef SHARDCHECK_HAVE_GLOO
  EXPECT_EQ(comm->backend(), "gloo");
#else
  EXPECT_EQ(comm->backend(), "local");  // a world of one needs no Gloo
#endif
  EXPECT_EQ(comm->size(), 1);
  at::Tensor t = at::arange(5, at::kFloat);
  comm->AllReduce(t, ReduceOp::kSum);
  EXPECT_TRUE(at::equal(t, at::arange(5, at::kFloat)));
}

TEST(Connect, UnknownBackendIsAnError) {
  EXPECT_THROW(Connect(DistEnv{}, "mpi", std::chrono::seconds(1)), Error);
}

TEST(Connect, NcclWithoutGpuIsAnErrorNotACrash) {
  EXPECT_THROW(Connect(DistEnv{}, "nccl", std::chrono::seconds(5)), Error);
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(Connect, TcpStoreRendezvousWithRanksAsThreads) {
#ifndef SHARDCHECK_HAVE_GLOO
  GTEST_SKIP() << "this build has no Gloo (the torch 2.x build); the default build runs this test";
#endif
  constexpr int kWorld = 3;
  const int port = FreePort();
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      try {
        DistEnv env;
        env.rank = env.local_rank = r;
        env.world_size = env.local_world_size = kWorld;
        env.master_port = port;
        env.source = "test";
        auto comm = Connect(env, "auto", std::chrono::seconds(20));
        at::Tensor t = at::full({4}, static_cast<double>(r + 1), at::kDouble);
        comm->AllReduce(t, ReduceOp::kSum);
        if (!at::equal(t, at::full({4}, 6.0, at::kDouble))) errors[r] = "wrong sum";
        comm->Barrier();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(Connect, MissingPeersTimeOutNamingTheStore) {
#ifndef SHARDCHECK_HAVE_GLOO
  GTEST_SKIP() << "this build has no Gloo (the torch 2.x build); the default build runs this test";
#endif
  DistEnv env;
  env.world_size = env.local_world_size = 2;
  env.master_port = FreePort();
  env.source = "test";
  const auto start = std::chrono::steady_clock::now();
  try {
    Connect(env, "gloo", std::chrono::milliseconds(1500));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rendezvous on rank 0 of 2"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

}  // namespace
}  // namespace shardcheck
