// The Gloo communicator against each collective's plain definition, with
// ranks as threads (one HashStore). Inputs come from (seed, rank, index),
// so every rank computes the expected result of every collective locally.
#include "distributed/communicator_gloo.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "distributed/communicator_error.h"
#include "spec/error.h"
#include "testing/rank_inputs.h"

namespace shardcheck {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kTimeout{10000};
constexpr uint64_t kSeed = 20240611;

// Throws Error unless `actual` and `expected` have the same dtype, shape and bytes.
void ExpectSameBytes(const at::Tensor& actual, const at::Tensor& expected,
                     const std::string& what) {
  const bool same = actual.scalar_type() == expected.scalar_type() &&
                    actual.sizes() == expected.sizes() &&
                    at::equal(actual.contiguous().reshape({-1}).view(at::kByte),
                              expected.contiguous().reshape({-1}).view(at::kByte));
  if (!same) throw Error(what + ": result differs from its definition");
}

void ExpectAllRanksOk(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << ": " << e.what();
    }
  }
}

std::string Message(const std::exception_ptr& error) {
  if (!error) return "";
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a shardcheck::Error: ") + e.what();
  }
}

const at::ScalarType kSumTypes[] = {at::kFloat, at::kDouble, at::kLong, at::kBFloat16};
const at::ScalarType kMoveTypes[] = {at::kFloat, at::kLong, at::kBFloat16, at::kByte};

class GlooCollectives : public ::testing::TestWithParam<int> {};

TEST_P(GlooCollectives, ReduceScatterSumIsSliceOfSum) {
  const int world = GetParam();
  ExpectAllRanksOk(RunGlooRanksInProcess(world, kTimeout, [&](Communicator& comm) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1037}}) {
      for (at::ScalarType dt : kSumTypes) {
        at::Tensor input = RankValues(kSeed + n, comm.rank(), world * n, dt);
        at::Tensor output = at::full({n}, 7, dt);
        comm.ReduceScatterSum(input, output);
        at::Tensor sum = at::zeros({world * n}, at::kDouble);
        for (int r = 0; r < world; ++r)
          sum += RankValues(kSeed + n, r, world * n, dt).to(at::kDouble);
        ExpectSameBytes(
            output, sum.narrow(0, comm.rank() * n, n).to(dt),
            "reduce_scatter " + std::string(c10::toString(dt)) + " n=" + std::to_string(n));
      }
    }
  }));
}

TEST_P(GlooCollectives, AllGatherIsConcatenation) {
  const int world = GetParam();
  ExpectAllRanksOk(RunGlooRanksInProcess(world, kTimeout, [&](Communicator& comm) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1037}}) {
      for (at::ScalarType dt : kMoveTypes) {
        at::Tensor output = at::empty({world * n}, dt);
        comm.AllGather(RankBits(kSeed, comm.rank(), n, dt), output);
        std::vector<at::Tensor> parts;
        for (int r = 0; r < world; ++r) parts.push_back(RankBits(kSeed, r, n, dt));
        ExpectSameBytes(output, at::cat(parts), "all_gather " + std::string(c10::toString(dt)));
      }
    }
  }));
}

TEST_P(GlooCollectives, AllReduceIsElementwiseSumOrMax) {
  const int world = GetParam();
  ExpectAllRanksOk(RunGlooRanksInProcess(world, kTimeout, [&](Communicator& comm) {
    for (at::ScalarType dt : kSumTypes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        at::Tensor t = RankValues(kSeed, comm.rank(), 999, dt).view({37, 27});
        comm.AllReduce(t, op);
        at::Tensor expected = RankValues(kSeed, 0, 999, dt).to(at::kDouble);
        for (int r = 1; r < world; ++r) {
          at::Tensor v = RankValues(kSeed, r, 999, dt).to(at::kDouble);
          expected = op == ReduceOp::kSum ? expected + v : at::maximum(expected, v);
        }
        ExpectSameBytes(t, expected.to(dt).view({37, 27}),
                        std::string("all_reduce ") + (op == ReduceOp::kSum ? "sum " : "max ") +
                            c10::toString(dt));
      }
    }
    // A non-contiguous tensor is reduced in place too.
    at::Tensor base = RankValues(kSeed, comm.rank(), 200, at::kFloat).view({10, 20});
    at::Tensor column_major = base.t();
    comm.AllReduce(column_major, ReduceOp::kSum);
    at::Tensor expected = at::zeros({200}, at::kFloat);
    for (int r = 0; r < world; ++r) expected += RankValues(kSeed, r, 200, at::kFloat);
    ExpectSameBytes(base, expected.view({10, 20}), "all_reduce of a transposed view");
  }));
}

TEST_P(GlooCollectives, BroadcastCopiesRootBytes) {
  const int world = GetParam();
  ExpectAllRanksOk(RunGlooRanksInProcess(world, kTimeout, [&](Communicator& comm) {
    for (int root = 0; root < world; ++root) {
      for (at::ScalarType dt : kMoveTypes) {
        at::Tensor t = RankBits(kSeed + root, comm.rank(), 555, dt).view({5, 111});
        comm.Broadcast(t, root);
        ExpectSameBytes(t, RankBits(kSeed + root, root, 555, dt).view({5, 111}),
                        "broadcast from " + std::to_string(root) + " " + c10::toString(dt));
      }
      at::Tensor scalar = at::scalar_tensor(comm.rank() + 0.5, at::kBFloat16);
      comm.Broadcast(scalar, root);
      ExpectSameBytes(scalar, at::scalar_tensor(root + 0.5, at::kBFloat16), "broadcast 0-dim");
    }
  }));
}

TEST_P(GlooCollectives, GatherDeliversEveryRankInOrderToRoot) {
  const int world = GetParam();
  ExpectAllRanksOk(RunGlooRanksInProcess(world, kTimeout, [&](Communicator& comm) {
    for (int root = 0; root < world; ++root) {
      for (at::ScalarType dt : kMoveTypes) {
        std::vector<at::Tensor> got =
            comm.Gather(RankBits(kSeed, comm.rank(), 64, dt).view({8, 8}), root);
        if (comm.rank() != root) {
          if (!got.empty()) throw Error("gather: non-root rank received tensors");
          continue;
        }
        if (static_cast<int>(got.size()) != world) throw Error("gather: wrong count");
        for (int r = 0; r < world; ++r) {
          ExpectSameBytes(got[static_cast<size_t>(r)], RankBits(kSeed, r, 64, dt).view({8, 8}),
                          "gather to " + std::to_string(root) + " from " + std::to_string(r));
        }
      }
    }
    comm.Barrier();
  }));
}

INSTANTIATE_TEST_SUITE_P(World, GlooCollectives, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "world" + std::to_string(info.param);
                         });

TEST(GlooFailures, StuckPeerMakesOthersThrowWithinTimeout) {
  constexpr int kWorld = 3;
  constexpr milliseconds kShort{1000};
  std::atomic<int> finished{0};
  std::vector<double> seconds(kWorld, 0.0);
  auto errors = RunGlooRanksInProcess(kWorld, kShort, [&](Communicator& comm) {
    if (comm.rank() == 1) {
      // Stays alive but never joins the all-reduce, until the others gave up.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (finished.load() < kWorld - 1 && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(milliseconds(10));
      }
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      at::Tensor t = at::ones({16});
      comm.AllReduce(t, ReduceOp::kSum);
    } catch (...) {
      seconds[static_cast<size_t>(comm.rank())] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++finished;
      throw;
    }
    ++finished;
  });
  EXPECT_EQ(Message(errors[1]), "");
  for (int r : {0, 2}) {
    const std::string m = Message(errors[static_cast<size_t>(r)]);
    EXPECT_NE(m.find("all_reduce on rank " + std::to_string(r) + " of 3 failed"), std::string::npos)
        << m;
    // Gloo's 1 s timeout, plus the 0.5 s grace, plus scheduling slack.
    EXPECT_LT(seconds[static_cast<size_t>(r)], 3.0) << m;
  }
}

TEST(GlooFailures, ExitedPeerMakesOthersThrowAndLaterOpsRefuse) {
  constexpr int kWorld = 3;
  std::atomic<int> entered{0};
  auto errors = RunGlooRanksInProcess(kWorld, milliseconds(2000), [&](Communicator& comm) {
    if (comm.rank() == 2) {
      // Leaves (its communicator is destroyed) once the others are connected
      // and about to all-gather, so that only the all-gather can fail.
      while (entered.load() < kWorld - 1) std::this_thread::sleep_for(milliseconds(1));
      std::this_thread::sleep_for(milliseconds(50));
      return;
    }
    at::Tensor out = at::empty({kWorld * 4}, at::kBFloat16);
    ++entered;
    try {
      comm.AllGather(at::ones({4}, at::kBFloat16), out);
    } catch (const Error&) {
      at::Tensor t = at::ones({1});
      comm.AllReduce(t, ReduceOp::kSum);  // must refuse, not hang
    }
  });
  EXPECT_EQ(Message(errors[2]), "");
  for (int r : {0, 1}) {
    const std::string m = Message(errors[static_cast<size_t>(r)]);
    EXPECT_NE(m.find("all_reduce on rank " + std::to_string(r) + " of 3 refused"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("all_gather on rank " + std::to_string(r) + " of 3 failed"), std::string::npos)
        << m;
  }
}

TEST(GlooFailures, MismatchedSizesNameOpAndRank) {
  auto errors = RunGlooRanksInProcess(2, kTimeout, [&](Communicator& comm) {
    at::Tensor out = at::empty({3});
    comm.ReduceScatterSum(at::ones({5}), out);
  });
  for (int r : {0, 1}) {
    EXPECT_NE(Message(errors[static_cast<size_t>(r)])
                  .find("reduce_scatter on rank " + std::to_string(r) + " of 2: input has 5"),
              std::string::npos)
        << Message(errors[static_cast<size_t>(r)]);
  }
}

TEST(GlooFailures, CleanBackendMessageDropsSourceLocations) {
  EXPECT_EQ(CleanBackendMessage("[/build/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
                                "[127.0.0.1]:4242\nmore"),
            "Connection closed by peer [127.0.0.1]:4242; more");
}

}  // namespace
}  // namespace shardcheck
