// The presets have the sizes docs/performance.md states, and a shapes file
// reads like the "shapes:" model with a clear error naming file and line.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "harness/scale/scale_presets.h"
#include "spec/error.h"
#include "testing/temp_dir.h"

namespace shardcheck {
namespace {

int64_t Elements(const std::vector<ParamInfo>& params) {
  int64_t n = 0;
  for (const ParamInfo& p : params) n += p.Numel();
  return n;
}

TEST(ScalePresets, Gpt175bHasItsTensorsAndElements) {
  const auto params = ScalePresetParams("gpt-175b");
  EXPECT_EQ(params.size(), 1156u);
  EXPECT_NEAR(static_cast<double>(Elements(params)), 174.6e9, 0.1e9);
  EXPECT_EQ(ScalePresetParams("gpt-175b", 12).size(), 12u * 12 + 4);
}

TEST(ScalePresets, DeepSeekV3MoeHasItsTensorsAndElements) {
  const auto params = ScalePresetParams("deepseek-v3-moe");
  EXPECT_EQ(params.size(), 45395u);
  EXPECT_NEAR(static_cast<double>(Elements(params)), 671e9, 1e9);
  // 3 dense layers, then MoE layers of 256 experts x 3 projections.
  EXPECT_EQ(ScalePresetParams("deepseek-v3-moe", 4).size() - ScalePresetParams("deepseek-v3-moe", 3).size(),
            9u + 2 + 256 * 3 + 3);
}

TEST(ScalePresets, UnknownPresetListsTheNames) {
  try {
    ScalePresetParams("gpt-4");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpt-4"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("deepseek-v3-moe"), std::string::npos);
  }
}

TEST(ShapesFile, ReadsNamedAndUnnamedParamsSkippingComments) {
  TempDir tmp("shapes_file");
  const std::string path = tmp.Sub("shapes.txt");
  std::ofstream(path) << "# a model\nemb=100x8:embedding\n\n  64x8  \nhead=100x8:output\n";
  const auto params = ReadShapesFile(path);
  ASSERT_EQ(params.size(), 3u);
  EXPECT_EQ(params[0].name, "emb");
  EXPECT_EQ(params[1].name, "p1");
  EXPECT_EQ(params[1].shape, (std::vector<int64_t>{64, 8}));
  EXPECT_EQ(params[2].role, ParamRole::kOutput);
}

TEST(ShapesFile, ErrorsNameTheFileAndLine) {
  TempDir tmp("shapes_file");
  const std::string path = tmp.Sub("shapes.txt");
  std::ofstream(path) << "a=4x4\nb=4xq\n";
  try {
    ReadShapesFile(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":2:"), std::string::npos) << e.what();
  }
  std::ofstream(path) << "a=4x4\na=8\n";
  EXPECT_THROW(ReadShapesFile(path), Error);
  std::ofstream(path) << "# nothing\n";
  EXPECT_THROW(ReadShapesFile(path), Error);
  EXPECT_THROW(ReadShapesFile(tmp.Sub("missing.txt")), Error);
}

}  // namespace
}  // namespace shardcheck
