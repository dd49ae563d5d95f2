// Checkpoint round trips and resharding: save at step K on thread-ranks,
// load in a fresh process group, compare every tensor with the
// uninterrupted reference right after the load, then continue on oracle
// gradients, bitwise equal to the reference at every step.
//
// The tables (every setup x sharding type x dp x dtype) talk through the
// in-process communicator: the checkpoint code is what they test, and Gloo's
// loopback TCP cost about five times their time. The Gloo slice runs every
// sharding type's round trip and a dp change each way over a real Gloo group
// (its own collectives are the distributed label's).
#include <gtest/gtest.h>

#include <chrono>
#include <utility>

#include "harness/cell/checkpoint_test_util.h"

namespace shardcheck {
namespace {

using testing_util::CheckpointRun;
using testing_util::TempDir;

struct Cell {
  std::string setup;
  ShardingType type;
  int save_dp, load_dp;
  c10::ScalarType dtype;
  ThreadComm comm = ThreadComm::kInProcess;
};

std::string CellName(const Cell& c) {
  std::string n = c.setup + "_" + ShardingTypeName(c.type) + "_dp" + std::to_string(c.save_dp);
  if (c.load_dp != c.save_dp) n += "_to_dp" + std::to_string(c.load_dp);
  n += c.dtype == at::kFloat ? "_fp32" : "_bf16";
  return c.comm == ThreadComm::kGloo ? n + "_gloo" : n;
}

void PrintTo(const Cell& c, std::ostream* os) { *os << CellName(c); }

void ExpectBitwiseEveryStep(const ThreadRun& run, int64_t first_step, int64_t last_step) {
  for (const auto& e : run.errors) ADD_FAILURE() << e;
  ASSERT_TRUE(run.errors.empty());
  const TrainResult& r = run.root;
  EXPECT_TRUE(r.ok) << (r.first_mismatch ? "step " + std::to_string(r.first_mismatch->step) +
                                               " rank " + std::to_string(r.first_mismatch->rank) +
                                               ": " + r.first_mismatch->detail
                                         : "");
  ASSERT_FALSE(r.steps.empty());
  EXPECT_EQ(r.steps.front().step, first_step);
  EXPECT_EQ(r.steps.back().step, last_step);
  for (const auto& s : r.steps) {
    ASSERT_FALSE(s.groups.empty());
    for (const auto& g : s.groups)
      EXPECT_EQ(g.mismatches, 0) << g.group << " at step " << s.step
                                 << (s.after_load ? " (after load)" : "");
  }
}

void RunCell(const Cell& c, int save_at, int continue_steps) {
  TempDir tmp;
  TrainOptions save = CheckpointRun(c.setup, c.dtype, save_at);
  save.save_at = save_at;
  save.save_dir = tmp.Sub("ckpt");
  save.sharding_type = c.type;
  const auto timeout = std::chrono::seconds(120);
  ExpectBitwiseEveryStep(RunTrainOnThreads(save, c.save_dp, timeout, c.comm), 1, save_at);

  TrainOptions load = CheckpointRun(c.setup, c.dtype, save_at + continue_steps);
  load.load_dir = save.save_dir;
  // The fresh run starts from the step-0 params: whatever the load does
  // not overwrite or re-derive shows up as a mismatch right after it.
  const ThreadRun resumed = RunTrainOnThreads(load, c.load_dp, timeout, c.comm);
  EXPECT_EQ(resumed.root.resumed_from, save_at);
  ASSERT_FALSE(resumed.root.steps.empty());
  EXPECT_TRUE(resumed.root.steps.front().after_load);
  ExpectBitwiseEveryStep(resumed, save_at, save_at + continue_steps);
}

class RoundTrip : public testing::TestWithParam<Cell> {};

TEST_P(RoundTrip, SameDpBitwiseAfterLoadAndEveryStep) { RunCell(GetParam(), 3, 3); }

std::vector<Cell> RoundTripCells() {
  std::vector<Cell> cells;
  for (const auto& setup : OptimizerSetup::Names())
    for (ShardingType t : AllShardingTypes())
      for (int dp : {1, 2, 3, 4})
        for (auto dtype : {at::kFloat, at::kBFloat16}) cells.push_back({setup, t, dp, dp, dtype});
  return cells;
}

INSTANTIATE_TEST_SUITE_P(Matrix, RoundTrip, testing::ValuesIn(RoundTripCells()),
                         [](const auto& info) { return CellName(info.param); });

class Reshard : public testing::TestWithParam<Cell> {};

TEST_P(Reshard, OtherDpBitwiseAfterLoadAndEightSteps) { RunCell(GetParam(), 4, 8); }

std::vector<Cell> ReshardCells() {
  std::vector<Cell> cells;
  const std::vector<std::pair<int, int>> pairs = {{1, 2}, {2, 1}, {2, 3}, {3, 4}, {4, 2}, {4, 1}};
  for (const auto& setup : OptimizerSetup::Names())
    for (ShardingType t : AllShardingTypes())  // all four allow a DP change
      for (const auto& [a, b] : pairs) cells.push_back({setup, t, a, b, at::kBFloat16});
  return cells;
}

INSTANTIATE_TEST_SUITE_P(Pairs, Reshard, testing::ValuesIn(ReshardCells()),
                         [](const auto& info) { return CellName(info.param); });

#ifdef SHARDCHECK_HAVE_GLOO  // a build without Gloo runs every table in-process
// Over Gloo, per sharding type: Adam's dp 3 round trip, and dp 2 -> 3 and
// 3 -> 2.
std::vector<Cell> GlooRoundTripCells() {
  std::vector<Cell> cells;
  for (ShardingType t : AllShardingTypes())
    cells.push_back({"adam", t, 3, 3, at::kFloat, ThreadComm::kGloo});
  return cells;
}

std::vector<Cell> GlooReshardCells() {
  std::vector<Cell> cells;
  for (ShardingType t : AllShardingTypes())
    for (const auto& [a, b] : {std::pair{2, 3}, std::pair{3, 2}})
      cells.push_back({"adam", t, a, b, at::kBFloat16, ThreadComm::kGloo});
  return cells;
}

INSTANTIATE_TEST_SUITE_P(Gloo, RoundTrip, testing::ValuesIn(GlooRoundTripCells()),
                         [](const auto& info) { return CellName(info.param); });
INSTANTIATE_TEST_SUITE_P(Gloo, Reshard, testing::ValuesIn(GlooReshardCells()),
                         [](const auto& info) { return CellName(info.param); });
#endif

}  // namespace
}  // namespace shardcheck
