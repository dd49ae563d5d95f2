// CTEST_RESOURCE_GROUP_* parsing: the GPU ids ctest allocated, in group order.
#include "testing/ctest_resources.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace shardcheck {
namespace {

class CtestResources : public testing::Test {
 protected:
  void TearDown() override {
    for (const char* v :
         {"CTEST_RESOURCE_GROUP_COUNT", "CTEST_RESOURCE_GROUP_0", "CTEST_RESOURCE_GROUP_0_GPUS",
          "CTEST_RESOURCE_GROUP_1", "CTEST_RESOURCE_GROUP_1_GPUS"})
      unsetenv(v);
  }
};

TEST_F(CtestResources, NoAllocationGivesNoIds) {
  unsetenv("CTEST_RESOURCE_GROUP_COUNT");
  EXPECT_TRUE(CtestGpuIds().empty());
}

TEST_F(CtestResources, GroupsGiveTheirIdsInOrder) {
  setenv("CTEST_RESOURCE_GROUP_COUNT", "2", 1);
  setenv("CTEST_RESOURCE_GROUP_0", "gpus", 1);
  setenv("CTEST_RESOURCE_GROUP_0_GPUS", "id:5,slots:1", 1);
  setenv("CTEST_RESOURCE_GROUP_1", "gpus", 1);
  setenv("CTEST_RESOURCE_GROUP_1_GPUS", "id:2,slots:1", 1);
  EXPECT_EQ(CtestGpuIds(), (std::vector<std::string>{"5", "2"}));
}

TEST_F(CtestResources, MalformedValuesNameTheVariable) {
  setenv("CTEST_RESOURCE_GROUP_COUNT", "1", 1);
  setenv("CTEST_RESOURCE_GROUP_0_GPUS", "slots:1", 1);
  try {
    CtestGpuIds();
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("CTEST_RESOURCE_GROUP_0_GPUS"), std::string::npos)
        << e.what();
  }
  setenv("CTEST_RESOURCE_GROUP_COUNT", "x", 1);
  EXPECT_THROW(CtestGpuIds(), std::exception);
}

}  // namespace
}  // namespace shardcheck
