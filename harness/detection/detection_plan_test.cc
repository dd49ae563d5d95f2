// The detection plan covers exactly the silent-bug failpoints, each with a
// scenarios/ci file, a filter and a reason. (That each subset catches its bug
// is ctest's detection.<name>, which runs it.)
#include "harness/detection/detection_plan.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "spec/failpoint.h"

namespace shardcheck {
namespace {

TEST(DetectionPlan, OneSubsetPerSilentFailpointAndNoOther) {
  std::set<std::string> silent, planned;
  for (const FailpointInfo& f : AllFailpoints())
    if (f.kind == FailpointKind::kSilentBug) silent.insert(f.name);
  for (const DetectionSubset& d : DetectionPlan()) {
    EXPECT_TRUE(planned.insert(d.failpoint).second) << "planned twice: " << d.failpoint;
    EXPECT_TRUE(silent.count(d.failpoint)) << d.failpoint << " is not a silent failpoint";
    const std::string file = d.scenario;
    EXPECT_EQ(file.find('/'), std::string::npos) << file << ": a file of scenarios/ci, by name";
    EXPECT_EQ(file.substr(file.size() - 5), ".yaml") << file;
    EXPECT_GT(std::string(d.why).size(), 10u) << d.failpoint;
    EXPECT_EQ(FindDetectionSubset(d.failpoint), &d);
  }
  EXPECT_EQ(planned, silent);
}

// The filter names the set dimensions in one order, with the names
// `run --filter` takes.
TEST(DetectionPlan, CellsWriteTheRunFilter) {
  EXPECT_EQ(Cells().Filter(), "");
  EXPECT_EQ(Cells().Optimizer("adam").Dp(1).Fp32().Sharding(ShardingType::kDpReshardable).Filter(),
            "optimizer=adam,dp=1,dtype=fp32,sharding_type=dp_reshardable");
  EXPECT_EQ(Cells().Sharding(ShardingType::kDpZeroGatherScatter).ResumeDp(3).Model("gpt-tiny")
                .Optimizer("lion").Filter(),
            "model=gpt-tiny,optimizer=lion,resume_dp=3,sharding_type=dp_zero_gather_scatter");
}

}  // namespace
}  // namespace shardcheck
