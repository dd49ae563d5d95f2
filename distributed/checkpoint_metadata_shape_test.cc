// metadata.json's tensor and param shapes are validated when read: a
// negative dimension or a shape of over 2^50 elements is refused with an
// error naming the file and the field, before any reader sizes a buffer
// from it (docs/checkpoint-format.md). The metadata comes from a real
// single-rank save, so every other field is valid. The text reader
// (simdjson for the tensor index, nlohmann for the rest) and FromJson agree,
// and its refusals name the file and the field.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distributed/checkpoint.h"
#include "distributed/checkpoint_format.h"
#include "distributed/communicator_local.h"
#include "distributed/distrib_optimizer.h"
#include "distributed/sealed_json.h"
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

TEST(CheckpointMetadataShapes, TextReaderAgreesWithFromJsonAndNamesTheField) {
  TempDir tmp("metadata_text");
  const nlohmann::json saved = SavedMetadata(tmp);
  const std::string text = MetadataFileText(CheckpointMetadata::FromJson(saved, "m.json"));
  const CheckpointMetadata parsed = ParseMetadataText(text, "m.json");
  EXPECT_EQ(parsed.ToJson().dump(), CheckpointMetadata::FromJson(saved, "m.json").ToJson().dump());
  const std::string key = saved.at("tensors").begin().key();
  nlohmann::json bad = saved;
  bad["tensors"][key]["chunks"][0]["offset"] = "zero";
  std::string why = Refusal(bad);
  EXPECT_NE(why.find("m.json: malformed field 'tensors." + key + "'"), std::string::npos) << why;
  bad = saved;
  bad.erase("tensors");
  why = Refusal(bad);
  EXPECT_NE(why.find("m.json: malformed field 'tensors'"), std::string::npos) << why;
  // A key listed twice (the text alone can say so): refused, not last-wins.
  std::string twice = saved.dump(1);
  const std::string entry = "\"tensors\": {";
  const size_t at = twice.find(entry);
  ASSERT_NE(at, std::string::npos);
  twice.insert(at + entry.size(), "\n  \"" + key + "\": " + saved["tensors"][key].dump() + ",");
  try {
    ParseMetadataText(twice, "m.json");
    ADD_FAILURE() << "a tensor listed twice was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensors." + key + ": listed twice"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ParseMetadataText(text.substr(0, text.size() / 2), "m.json"), Error);
}

// Writers list the tensors in key order and the reader takes that run
// without a search; any other order is read to the same metadata, and a
// key met again out of order is still refused.
TEST(CheckpointMetadataShapes, TensorsInAnyOrderReadTheSame) {
  TempDir tmp("metadata_order");
  const nlohmann::json saved = SavedMetadata(tmp);
  ASSERT_GE(saved.at("tensors").size(), 3u);
  const std::string sorted = MetadataFileText(CheckpointMetadata::FromJson(saved, "m.json"));
  nlohmann::ordered_json reversed = nlohmann::ordered_json::parse(saved.dump());
  reversed.erase(kSealMember);  // sealed again below
  nlohmann::ordered_json tensors = nlohmann::ordered_json::object();
  std::vector<std::string> keys;
  for (auto it = saved["tensors"].begin(); it != saved["tensors"].end(); ++it) keys.push_back(it.key());
  for (auto k = keys.rbegin(); k != keys.rend(); ++k) tensors[*k] = reversed["tensors"][*k];
  reversed["tensors"] = tensors;
  EXPECT_EQ(MetadataFileText(ParseMetadataText(SealJson(reversed.dump(1)), "m.json")), sorted);

  // The last key listed again after a smaller one: refused, naming it.
  std::string again = reversed.dump(1);
  const std::string last = "\"" + keys.front() + "\": ";  // listed last in `reversed`
  const size_t at = again.rfind(last);
  ASSERT_NE(at, std::string::npos);
  again.insert(at, last + saved["tensors"][keys[1]].dump() + ",\n  ");
  try {
    ParseMetadataText(SealJson(again), "m.json");
    ADD_FAILURE() << "a tensor listed twice was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensors." + keys.front() + ": listed twice"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardcheck
