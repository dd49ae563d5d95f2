// A save that fails at each of its phases (the save.* failpoints with the
// error action, on rank 0 and on another rank), for every sharding type:
// every rank fails, nothing half-written is committed or left behind, the
// previous checkpoint still verifies and `latest` still names it. A save
// that fails after its rename is complete. Crashes (SIGKILL) at the same
// phases are distributed/crash_during_save_test.py's.
#include <gtest/gtest.h>

#include <filesystem>

#include "distributed/checkpoint.h"
#include "distributed/file_util.h"
#include "harness/cell/checkpoint_test_util.h"
#include "spec/error.h"
#include "spec/failpoint.h"

namespace shardcheck {
namespace {

namespace fs = std::filesystem;
using testing_util::TempDir;

ThreadRun SaveRun(const std::string& dir, ShardingType type) {
  return testing_util::SaveAtStep2("adam", dir, type);
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct Phase {
  std::string failpoint;
  int rank;
  bool committed;  // the checkpoint is complete when this phase fails
};

class FailedSave : public testing::TestWithParam<ShardingType> {};

TEST_P(FailedSave, CommitsNothingHalfWrittenAtAnyPhase) {
  const ShardingType type = GetParam();
  for (const Phase& p : std::vector<Phase>{{"save.rank_file_partial", 0, false},
                                           {"save.rank_file_partial", 1, false},
                                           {"save.after_rank_file", 0, false},
                                           {"save.after_rank_file", 1, false},
                                           {"save.before_metadata", 0, false},
                                           {"save.before_rename", 0, false},
                                           {"save.before_latest", 0, true}}) {
    SCOPED_TRACE(p.failpoint + " on rank " + std::to_string(p.rank));
    TempDir tmp;
    ASSERT_TRUE(SaveRun(tmp.Sub("a"), type).ok());
    // The gathered types are written by rank 0 alone: another rank has no file phase.
    if (!CheckpointReader(tmp.Sub("a")).metadata().files.count(RankFileName(p.rank))) continue;
    SetFailpointsForTest(p.failpoint + "=error@" + std::to_string(p.rank));
    const ThreadRun failed = SaveRun(tmp.Sub("b"), type);
    const std::vector<std::string> reached = FailpointsReached();
    SetFailpointsForTest("");
    ASSERT_EQ(failed.errors.size(), 2u) << "every rank fails";
    EXPECT_EQ(reached, std::vector<std::string>{p.failpoint});
    bool named = false;
    for (const auto& e : failed.errors)
      named = named || e.find("failpoint " + p.failpoint) != std::string::npos;
    EXPECT_TRUE(named) << failed.errors.front();
    EXPECT_EQ(ReadFile(tmp.Sub("latest")), "a\n");
    CheckpointReader previous(tmp.Sub("a"));
    previous.VerifyAll();
    if (p.committed) {
      EXPECT_EQ(Entries(tmp.Sub("")), (std::vector<std::string>{"a", "b", "latest"}));
      CheckpointReader(tmp.Sub("b")).VerifyAll();
    } else {
      EXPECT_EQ(Entries(tmp.Sub("")), (std::vector<std::string>{"a", "latest"}));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, FailedSave, testing::ValuesIn(AllShardingTypes()),
                         [](const auto& info) { return ShardingTypeName(info.param); });

TEST(Failpoints, MalformedListsAreInputErrorsNamingTheTerm) {
  for (const auto& [spec, words] : std::vector<std::pair<std::string, std::string>>{
           {"save.no_such_phase", "unknown failpoint 'save.no_such_phase'"},
           {"save.before_rename=explode", "unknown action 'explode'"},
           {"save.before_rename@x", "rank must be a number, got 'x'"}}) {
    try {
      SetFailpointsForTest(spec);
      ADD_FAILURE() << spec << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInput);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  }
  SetFailpointsForTest("");
}

TEST(Failpoints, OnlyTheNamedRankActs) {
  SetFailpointsForTest("load.before_read=error@1");
  EXPECT_NO_THROW(Failpoint("load.before_read", 0));
  EXPECT_TRUE(FailpointsReached().empty());
  EXPECT_THROW(Failpoint("load.before_read", 1), Error);
  EXPECT_EQ(FailpointsReached(), std::vector<std::string>{"load.before_read"});
  SetFailpointsForTest("");
  EXPECT_NO_THROW(Failpoint("load.before_read", 1));
}

}  // namespace
}  // namespace shardcheck
