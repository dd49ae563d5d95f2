// The failpoint registry's silent bugs (spec/failpoint.h): off unless named,
// `on` their only action, reached recorded, rank filters, and every silent
// bug documented with where it acts and what goes wrong.
#include "spec/failpoint.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "spec/error.h"

namespace shardcheck {
namespace {

TEST(SilentFailpoints, OffUnlessNamed) {
  SetFailpointsForTest("");
  EXPECT_FALSE(FailpointOn("drop_step_on_save"));
  SetFailpointsForTest("skip_post_load_param_sync");
  EXPECT_FALSE(FailpointOn("drop_step_on_save"));
  EXPECT_TRUE(FailpointsReached().empty());
  EXPECT_TRUE(FailpointOn("skip_post_load_param_sync"));
  EXPECT_EQ(FailpointsReached(), std::vector<std::string>{"skip_post_load_param_sync"});
  SetFailpointsForTest("");
}

TEST(SilentFailpoints, OnIsTheirOnlyActionAndFaultsRefuseIt) {
  EXPECT_NO_THROW(SetFailpointsForTest("drop_step_on_save=on"));
  for (const char* bad : {"drop_step_on_save=crash", "drop_step_on_save=error",
                          "save.before_rename=on", "drop_step_on_sav", "drop_step_on_save=of"}) {
    EXPECT_THROW(SetFailpointsForTest(bad), Error) << bad;
  }
  SetFailpointsForTest("");
}

TEST(SilentFailpoints, RankFilter) {
  SetFailpointsForTest("allgather_skips_last_bucket@1");
  EXPECT_FALSE(FailpointOn("allgather_skips_last_bucket", 0));
  EXPECT_TRUE(FailpointOn("allgather_skips_last_bucket", 1));
  SetFailpointsForTest("");
}

TEST(SilentFailpoints, AtLeastTwentyEachDocumented) {
  std::set<std::string> names;
  int silent = 0;
  for (const FailpointInfo& f : AllFailpoints()) {
    EXPECT_TRUE(names.insert(f.name).second) << "duplicate " << f.name;
    EXPECT_EQ(FindFailpoint(f.name), &f);
    if (f.kind != FailpointKind::kSilentBug) continue;
    ++silent;
    EXPECT_GT(std::string(f.where).size(), 10u) << f.name;
    EXPECT_GT(std::string(f.bug).size(), 20u) << f.name;
  }
  EXPECT_GE(silent, 20);
  EXPECT_EQ(FindFailpoint("no_such_failpoint"), nullptr);
}

}  // namespace
}  // namespace shardcheck
