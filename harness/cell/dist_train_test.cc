// The DistributedOptimizer against the reference with ranks as threads
// (one Gloo group over an in-memory store): bitwise agreement, memory
// accounting, and detection of an injected fault. The full matrix runs as
// separate processes through `shardcheck launch` (label distributed).
#include "harness/cell/dist_train.h"

#include <gtest/gtest.h>

#include "distributed/communicator_local.h"
#include "harness/cell/thread_ranks.h"
#include "spec/error.h"

namespace shardcheck {
namespace {

// A model with a param smaller than 64 elements, biases, norms, 2-D hidden
// weights, embedding and output.
ModelSpec SmallModel() {
  return ParseShapes(
      "emb=96x32:embedding,qkv=96x32,qkv_b=96,proj=32x32,tiny=7,fc1=128x32,"
      "fc1_b=128,fc2=32x128,norm=32,head=96x32:output");
}

TrainOptions Options(const std::string& setup, c10::ScalarType dtype, int steps) {
  TrainOptions t;
  t.run.model = SmallModel();
  t.run.setup = OptimizerSetup::Defaults(setup);
  t.run.setup.main.Set("weight_decay", 0.02);
  if (t.run.setup.scalar) t.run.setup.scalar->Set("weight_decay", 0.02);
  t.run.steps = steps;
  t.run.seed = 77;
  t.run.dtype = dtype;
  t.bucket_size = 1500;
  t.compare_reference = true;
  return t;
}

// Runs `opts` on `dp` thread-ranks; returns rank 0's result.
TrainResult RunThreads(const TrainOptions& opts, int dp) {
  ThreadRun run = RunTrainOnThreads(opts, dp, std::chrono::seconds(60));
  for (const auto& e : run.errors) ADD_FAILURE() << e;
  return run.root;
}

class DistributedThreads
    : public testing::TestWithParam<std::tuple<std::string, int, c10::ScalarType>> {};

TEST_P(DistributedThreads, BitwiseEqualToReferenceEveryStep) {
  const auto [setup, dp, dtype] = GetParam();
  const TrainResult r = RunThreads(Options(setup, dtype, 4), dp);
  EXPECT_TRUE(r.ok) << (r.first_mismatch ? r.first_mismatch->detail : "");
  ASSERT_EQ(r.steps.size(), 4u);
  for (const auto& s : r.steps) {
    ASSERT_FALSE(s.groups.empty());
    for (const auto& g : s.groups) EXPECT_EQ(g.mismatches, 0) << g.group << " step " << s.step;
  }
  EXPECT_EQ(r.final_state.step, 4);
}

INSTANTIATE_TEST_SUITE_P(Setups, DistributedThreads,
                         testing::Combine(testing::ValuesIn(OptimizerSetup::Names()),
                                          testing::Values(2, 3),
                                          testing::Values(at::kFloat, at::kBFloat16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_dp" +
                                  std::to_string(std::get<1>(info.param)) + "_" +
                                  (std::get<2>(info.param) == at::kFloat ? "fp32" : "bf16");
                         });

// Bytes per owned element: fp32 main param + each fp32 state tensor.
TEST(DistributedMemory, BytesPerOwnedElementFollowTheSchema) {
  struct Case {
    std::string setup;
    std::map<std::string, double> bytes_per_elem;  // child -> bytes per owned element
  };
  // Written out for four setups; every other setup of the registry by its
  // schema: 4 bytes for the main param and 4 per state key.
  std::vector<Case> cases = {
      {"adam", {{"adam", 12.0}}},
      {"lion", {{"lion", 8.0}}},
      {"muon_adam", {{"adamw", 12.0}, {"muon", 8.0}}},
      {"muon_lion", {{"lion", 8.0}, {"muon", 8.0}}},
  };
  for (const std::string& name : OptimizerSetup::Names()) {
    Case c{name, {}};
    // Named: a temporary setup would die before the loop reads its children.
    const OptimizerSetup defaults = OptimizerSetup::Defaults(name);
    for (const OptimizerConfig* child : defaults.Children())
      c.bytes_per_elem[child->kind()] = 4.0 * static_cast<double>(1 + child->schema().keys.size());
    cases.push_back(c);
  }
  for (const Case& c : cases) {
    const TrainResult r = RunThreads(Options(c.setup, at::kBFloat16, 1), 3);
    ASSERT_EQ(r.memory.size(), 3u) << c.setup;
    int64_t owned_total = 0;
    for (const MemoryFigures& m : r.memory) {
      std::map<std::string, int64_t> bytes, elems;
      for (const auto& e : m.entries) {
        bytes[e.child] += e.bytes;
        if (e.key == "main_param") elems[e.child] = e.elements;
      }
      for (const auto& [child, per] : c.bytes_per_elem)
        EXPECT_EQ(bytes[child], static_cast<int64_t>(per * elems[child]))
            << c.setup << " " << child;
      owned_total += m.owned_elements;
    }
    // Every element of the model is owned by exactly one rank.
    EXPECT_EQ(owned_total, SmallModel().Numel()) << c.setup;
  }
}

TEST(DistributedDetection, InjectedStateFaultIsReportedWithRankStepAndTensor) {
  TrainOptions t = Options("lion", at::kFloat, 4);
  t.after_step = [](DistributedOptimizer& opt, int64_t step) {
    if (step != 3 || opt.comm().rank() != 1) return;
    std::vector<OwnedPiece> owned = opt.Owned();
    ASSERT_FALSE(owned.empty());
    owned.back().state[0][0] += 1.0f;  // one element of exp_avg
  };
  const TrainResult r = RunThreads(t, 2);
  EXPECT_FALSE(r.ok);
  ASSERT_TRUE(r.first_mismatch.has_value());
  EXPECT_EQ(r.first_mismatch->step, 3);
  EXPECT_EQ(r.first_mismatch->rank, 1);
  EXPECT_EQ(r.first_mismatch->tensor.rfind("state.exp_avg.", 0), 0u) << r.first_mismatch->tensor;
  for (const auto& g : r.steps[2].groups)
    EXPECT_EQ(g.mismatches, g.group == "exp_avg" ? 1 : 0) << g.group;
}

TEST(DistributedErrors, DpMustDivideMicroBatches) {
  auto errors = RunRanksInProcess(5, std::chrono::seconds(30), [&](Communicator& comm) {
    RunDistributed(Options("adam", at::kFloat, 1), comm, nullptr);
  });
  for (const auto& e : errors) {
    ASSERT_TRUE(e);
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("does not divide"), std::string::npos) << err.what();
    }
  }
}

}  // namespace
}  // namespace shardcheck
