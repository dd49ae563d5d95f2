// metadata.json's tensor and param shapes are validated when read: a
// negative dimension or a shape of over 2^50 elements is refused with an
// error naming the file and the field, before any reader sizes a buffer
// from it (docs/checkpoint-format.md). The metadata comes from a real
// single-rank save, so every other field is valid.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "distributed/checkpoint.h"
#include "distributed/checkpoint_format.h"
#include "distributed/communicator_local.h"
#include "distributed/distrib_optimizer.h"
#include "spec/config.h"
#include "spec/error.h"
#include "testing/model_spec.h"
#include "testing/temp_dir.h"

namespace shardcheck {
namespace {

nlohmann::json SavedMetadata(const TempDir& tmp) {
  std::unique_ptr<Communicator> comm = MakeSingleRankCommunicator();
  const ModelSpec model = MixedSmallSpec();
  DistributedOptimizer opt(OptimizerSetup::Defaults("adam"), model.params, at::kFloat, *comm);
  std::vector<at::Tensor> init;
  for (const ParamInfo& p : model.params) init.push_back(at::zeros(p.shape));
  opt.SetParams(init);
  SaveCheckpoint(opt, tmp.Sub("ckpt"), ShardingType::kFullyReshardable);
  std::ifstream in(tmp.Sub("ckpt") + "/metadata.json");
  return nlohmann::json::parse(in, nullptr, true, /*ignore_comments=*/false);
}

std::string Refusal(const nlohmann::json& j) {
  try {
    CheckpointMetadata::FromJson(j, "m.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(CheckpointMetadataShapes, NegativeOrHugeDimensionsAreRefused) {
  TempDir tmp("metadata_shapes");
  const nlohmann::json saved = SavedMetadata(tmp);
  ASSERT_EQ(Refusal(saved), "accepted");
  ASSERT_FALSE(saved.at("tensors").empty());
  const std::string key = saved.at("tensors").begin().key();
  for (const nlohmann::json& shape : {nlohmann::json::array({-1, 4}),
                                      nlohmann::json::array({int64_t{1} << 30, int64_t{1} << 30})}) {
    nlohmann::json bad = saved;
    bad["tensors"][key]["shape"] = shape;
    const std::string why = Refusal(bad);
    EXPECT_NE(why.find("m.json"), std::string::npos) << why;
    EXPECT_TRUE(why.find("negative dimension") != std::string::npos ||
                why.find("over 2^50") != std::string::npos)
        << why;
    nlohmann::json bad_param = saved;
    bad_param["params"][0]["shape"] = shape;
    EXPECT_NE(Refusal(bad_param), "accepted") << shape.dump();
  }
}

}  // namespace
}  // namespace shardcheck
