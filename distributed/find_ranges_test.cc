// FindRanges (distributed/sharding_format.h): a load's ranges resolved to
// the saved tensors as one batch, a range falling back to its `or_key`
// only where the checkpoint lacks its key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distributed/checkpoint_format.h"
#include "distributed/sharding_format.h"

namespace shardcheck {
namespace {

CheckpointMetadata WithTensors(const std::vector<std::string>& keys) {
  CheckpointMetadata m;
  for (const std::string& key : keys) m.tensors.FindOrAdd(key);
  m.tensors.SortByKey();
  return m;
}

TEST(FindRanges, EachRangeFindsItsKeyElseItsOtherName) {
  const CheckpointMetadata m = WithTensors({"a", "b.param", "c.fp32_param"});
  std::vector<TensorRange> ranges = {
      {"a", 0},                             // there
      {"b.param", 5, false, "b.fp32_param"},  // there: the other name is not looked at
      {"c.param", 7, false, "c.fp32_param"},  // absent: read under its other name
      {"d.param", 0, false, "d.fp32_param"},  // neither there
      {"e", 0},                             // absent, no other name
  };
  const std::vector<const TensorRecord*> found = FindRanges(m.tensors, ranges);
  ASSERT_EQ(found.size(), ranges.size());
  EXPECT_EQ(found[0], &m.tensors.At("a"));
  EXPECT_EQ(found[1], &m.tensors.At("b.param"));
  EXPECT_EQ(ranges[1].key, "b.param");
  EXPECT_EQ(found[2], &m.tensors.At("c.fp32_param"));
  EXPECT_EQ(ranges[2].key, "c.fp32_param");
  EXPECT_EQ(ranges[2].begin, 7);
  EXPECT_EQ(found[3], nullptr);
  EXPECT_EQ(ranges[3].key, "d.param");
  EXPECT_EQ(found[4], nullptr);
}

TEST(FindRanges, ManyRangesAgreeWithOneLookupEach) {
  std::vector<std::string> keys;
  for (int i = 0; i < 5000; ++i) keys.push_back("optimizer.state.exp_avg.layers." + std::to_string(i));
  const CheckpointMetadata m = WithTensors(keys);
  std::vector<TensorRange> ranges;
  for (int i = 4999; i >= -10; i -= 3)
    ranges.push_back({"optimizer.state.exp_avg.layers." + std::to_string(i), i});
  std::vector<TensorRange> asked = ranges;
  const std::vector<const TensorRecord*> found = FindRanges(m.tensors, ranges);
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(found[i], m.tensors.Find(asked[i].key)) << asked[i].key;
    EXPECT_EQ(ranges[i].key, asked[i].key);
  }
}

}  // namespace
}  // namespace shardcheck
