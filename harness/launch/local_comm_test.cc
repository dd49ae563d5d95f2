// The in-process communicator (the test double of the collectives'
// semantics): it passes the collective self-test every backend must pass,
// fails fast and named when a peer leaves or stalls, and carries a whole
// distributed run bitwise equal to the reference.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "distributed/communicator_local.h"
#include "harness/cell/dist_train.h"
#include "harness/launch/comm_selftest.h"
#include "spec/error.h"
#include "testing/model_spec.h"

namespace shardcheck {
namespace {

std::string Message(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
  return "";
}

class LocalGroups : public testing::TestWithParam<int> {};

TEST_P(LocalGroups, PassTheCollectiveSelfTest) {
  const int world = GetParam();
  std::vector<CollectiveCheckReport> reports(static_cast<size_t>(world));
  const auto errors =
      RunLocalRanksInProcess(world, std::chrono::seconds(30), [&](Communicator& comm) {
        reports[static_cast<size_t>(comm.rank())] = CheckCollectives(comm, 99, 0);
      });
  for (int r = 0; r < world; ++r) {
    ASSERT_FALSE(errors[static_cast<size_t>(r)]) << Message(errors[static_cast<size_t>(r)]);
    const CollectiveCheckReport& rep = reports[static_cast<size_t>(r)];
    EXPECT_GT(rep.checks, 10) << "rank " << r;
    EXPECT_EQ(rep.wrong_elements, 0) << (rep.failures.empty() ? "" : rep.failures.front());
  }
}

TEST_P(LocalGroups, CarryADistributedRunBitwiseEqualToTheReference) {
  TrainOptions t;
  t.run.model = MixedSmallSpec();
  t.run.setup = OptimizerSetup::Defaults("muon_adam");
  t.run.steps = 4;
  t.run.dtype = at::kBFloat16;
  t.bucket_size = 1000;
  t.compare_reference = true;
  TrainResult root;
  const auto errors =
      RunLocalRanksInProcess(GetParam(), std::chrono::seconds(30), [&](Communicator& comm) {
        TrainResult r = RunDistributed(t, comm, nullptr);
        if (comm.rank() == 0) root = std::move(r);
      });
  for (const auto& e : errors) ASSERT_FALSE(e) << Message(e);
  EXPECT_TRUE(root.ok) << (root.first_mismatch ? root.first_mismatch->detail : "");
  ASSERT_EQ(root.steps.size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(World, LocalGroups, testing::Values(1, 2, 3, 4));

TEST(LocalGroup, APeerThatThrowsFailsTheOthersAtOnceNamingIt) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto errors = RunLocalRanksInProcess(3, std::chrono::seconds(30), [&](Communicator& comm) {
    if (comm.rank() == 1) throw Error("rank 1 gives up");
    at::Tensor x = at::ones({4});
    comm.AllReduce(x, ReduceOp::kSum);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(Message(errors[1]), "rank 1 gives up");
  for (int r : {0, 2})
    EXPECT_NE(Message(errors[static_cast<size_t>(r)]).find("rank 1 left the group"),
              std::string::npos)
        << Message(errors[static_cast<size_t>(r)]);
}

// Regression: a rank woken by the completion of a collective checked first
// whether a peer had left, and a peer that took part and then threw made it
// fail too (seen as "rank 1 left the group" instead of the load error every
// rank gives). The result of a completed collective stands.
TEST(LocalGroup, APeerLeavingAfterACompletedCollectiveLeavesTheResult) {
  for (int round = 0; round < 20; ++round) {
    float sum = 0;
    const auto errors =
        RunLocalRanksInProcess(2, std::chrono::seconds(30), [&](Communicator& comm) {
          if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          at::Tensor x = at::full({1}, static_cast<float>(comm.rank() + 1));
          comm.AllReduce(x, ReduceOp::kSum);
          if (comm.rank() == 1) throw Error("rank 1 stops after the all-reduce");
          sum = x.item<float>();
        });
    ASSERT_FALSE(errors[0]) << Message(errors[0]);
    EXPECT_EQ(sum, 3.0f);
  }
}

TEST(LocalGroup, AStalledPeerTimesTheOthersOut) {
  const auto errors =
      RunLocalRanksInProcess(2, std::chrono::milliseconds(300), [&](Communicator& comm) {
        if (comm.rank() == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(900));
          return;
        }
        comm.Barrier();
      });
  EXPECT_NE(Message(errors[0]).find("barrier on rank 0 timed out after 300 ms"), std::string::npos)
      << Message(errors[0]);
  EXPECT_FALSE(errors[1]);
}

// The rank that times out breaks the group; a rank that arrives after is
// told which rank timed out and in which collective.
TEST(LocalGroup, ARankArrivingAfterAPeerTimedOutIsToldWhichAndWhere) {
  const auto errors =
      RunLocalRanksInProcess(2, std::chrono::milliseconds(300), [&](Communicator& comm) {
        if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(900));
        at::Tensor t = at::ones({4});
        comm.AllReduce(t, ReduceOp::kSum);
      });
  EXPECT_NE(Message(errors[0]).find("all_reduce on rank 0 timed out after 300 ms"),
            std::string::npos)
      << Message(errors[0]);
  EXPECT_NE(Message(errors[1]).find("all_reduce on rank 1 failed: rank 0 timed out in all_reduce"),
            std::string::npos)
      << Message(errors[1]);
}

}  // namespace
}  // namespace shardcheck
