// Strict loading: every way a checkpoint can fail to fit gives one clear
// error naming the key, file or rank, on every rank, before any state
// changes. Plus the seed regression (Muon + Lion) and the commit protocol.
#include <gtest/gtest.h>

#include <regex>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "distributed/checkpoint.h"
#include "distributed/communicator_local.h"
#include "distributed/file_util.h"
#include "distributed/sealed_json.h"
#include "harness/cell/checkpoint_test_util.h"
#include "spec/error.h"

namespace shardcheck {
namespace {

namespace fs = std::filesystem;
using testing_util::CheckpointModel;
using testing_util::CheckpointRun;
using testing_util::TempDir;

// Saves a checkpoint of `setup` at step 2 into `dir`.
void Save(const std::string& setup, const std::string& dir, ShardingType type, int dp = 2,
          c10::ScalarType dtype = at::kFloat, int64_t bucket_size = 1000) {
  const ThreadRun run = testing_util::SaveAtStep2(setup, dir, type, dp, dtype, bucket_size);
  ASSERT_TRUE(run.errors.empty()) << run.errors.front();
}

// Loads `dir` into a fresh `setup` run on `dp` ranks; returns every rank's
// error message (empty strings for ranks that did not throw).
std::vector<std::string> LoadErrors(const std::string& setup, const std::string& dir, int dp = 2,
                                    c10::ScalarType dtype = at::kFloat, int64_t bucket_size = 1000,
                                    const std::string& shapes = "") {
  TrainOptions t = CheckpointRun(setup, dtype, 4);
  t.bucket_size = bucket_size;
  if (!shapes.empty()) t.run.model = ParseShapes(shapes);
  t.load_dir = dir;
  const ThreadRun run = RunTrainOnThreads(t, dp);
  return run.errors;
}

// Every rank failed, and at least one message holds every word.
void ExpectLoadError(const std::vector<std::string>& errors, int dp,
                     const std::vector<std::string>& words) {
  ASSERT_EQ(static_cast<int>(errors.size()), dp) << "some rank loaded a bad checkpoint";
  bool found = false;
  for (const auto& e : errors) {
    EXPECT_EQ(e.find('\n'), std::string::npos) << "not one line: " << e;
    bool all = true;
    for (const auto& w : words) all = all && e.find(w) != std::string::npos;
    found = found || all;
  }
  std::string joined;
  for (const auto& e : errors) joined += "\n  " + e;
  EXPECT_TRUE(found) << "no error names all of the expected words:" << joined;
}

nlohmann::json ReadMeta(const std::string& dir) {
  return nlohmann::json::parse(ReadFile(dir + "/metadata.json"));
}
// Rewrites metadata.json sealed with a fresh checksum, as a tool editing it
// on purpose would: the edit itself is then what the load must refuse.
void WriteMeta(const std::string& dir, const nlohmann::json& j) {
  WriteFileAtomic(dir + "/metadata.json", SealJson(j.dump(1)));
}

// The state keys of a named setup, as its children's registry entries declare them.
std::set<std::string> DeclaredKeys(const std::string& setup) {
  std::set<std::string> keys;
  // Named: a temporary setup would die before the loop reads its children.
  const OptimizerSetup defaults = OptimizerSetup::Defaults(setup);
  for (const OptimizerConfig* c : defaults.Children())
    for (const auto& k : c->schema().Names()) keys.insert(k);
  return keys;
}

// Every named setup's checkpoint, loaded by every other setup: refused on
// every rank, naming the state keys that differ (or, with the same keys,
// both setups). The setups come from the registry.
class EveryOtherOptimizer : public testing::TestWithParam<std::string> {};

TEST_P(EveryOtherOptimizer, LoadIsRefusedNamingWhatDiffers) {
  TempDir tmp;
  const std::string mine = GetParam();
  Save(mine, tmp.Sub("c"), ShardingType::kDpReshardable);
  const std::set<std::string> saved = DeclaredKeys(mine);
  for (const std::string& other : OptimizerSetup::Names()) {
    if (other == mine) continue;
    const std::set<std::string> wanted = DeclaredKeys(other);
    std::vector<std::string> words;
    for (const auto& k : wanted)
      if (!saved.count(k)) words = {"missing state key", k};
    for (const auto& k : saved)
      if (!wanted.count(k)) words = {"unexpected state key", k};
    if (words.empty()) words = {"'" + mine + "'", "'" + other + "'"};
    SCOPED_TRACE(mine + " checkpoint loaded as " + other);
    ExpectLoadError(LoadErrors(other, tmp.Sub("c")), 2, words);
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryOtherOptimizer, testing::ValuesIn(OptimizerSetup::Names()),
                         [](const auto& info) { return info.param; });

TEST(StrictLoad, AdamCheckpointIntoLionNamesExpAvgSqUnexpected) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kDpReshardable);
  ExpectLoadError(LoadErrors("lion", tmp.Sub("c")), 2,
                  {"unexpected state key exp_avg_sq", "adam", "lion"});
}

TEST(StrictLoad, LionCheckpointIntoAdamNamesExpAvgSqMissing) {
  TempDir tmp;
  Save("lion", tmp.Sub("c"), ShardingType::kFullyReshardable);
  ExpectLoadError(LoadErrors("adam", tmp.Sub("c")), 2, {"missing state key exp_avg_sq"});
}

TEST(StrictLoad, SameKeysOtherOptimizerIsRefused) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kFullyShardedModelSpace);
  ExpectLoadError(LoadErrors("adamw", tmp.Sub("c")), 2, {"'adam'", "'adamw'"});
}

TEST(StrictLoad, MuonCheckpointIntoPlainAdamNamesMomentumBuffer) {
  TempDir tmp;
  Save("muon_adam", tmp.Sub("c"), ShardingType::kDpReshardable);
  ExpectLoadError(LoadErrors("adam", tmp.Sub("c")), 2, {"unexpected state key momentum_buffer"});
}

// Other hyperparameters than the checkpoint's: a warning per difference by
// default (the load goes on), an error naming both values on every rank
// under strict_hparams.
TEST(StrictLoad, OtherHyperparametersWarnOrFailUnderStrict) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kDpReshardable);
  const ModelSpec model = CheckpointModel();
  for (const bool strict : {false, true}) {
    SCOPED_TRACE(strict ? "strict" : "default");
    std::vector<std::vector<std::string>> warnings(2);
    auto errors = RunRanksInProcess(2, std::chrono::seconds(30), [&](Communicator& comm) {
      OptimizerSetup setup = OptimizerSetup::Defaults("adam");
      setup.main.Set("weight_decay", 0.02);
      setup.main.Set("beta2", 0.95);
      DistributedOptimizer opt(setup, model.params, at::kFloat, comm, {1000});
      LoadOptions o;
      o.strict_hparams = strict;
      warnings[static_cast<size_t>(comm.rank())] = LoadCheckpoint(opt, tmp.Sub("c"), o);
      EXPECT_EQ(opt.step(), 2);
    });
    if (!strict) {
      for (const auto& e : errors) EXPECT_FALSE(e);
      for (const auto& w : warnings)
        EXPECT_EQ(w, std::vector<std::string>{"adam.beta2: checkpoint 0.999, this run 0.95"});
      continue;
    }
    for (const auto& e : errors) {
      ASSERT_TRUE(e);
      try {
        std::rethrow_exception(e);
      } catch (const Error& err) {
        const std::string what = err.what();
        EXPECT_NE(what.find("--strict-hparams"), std::string::npos) << what;
        EXPECT_NE(what.find("adam.beta2: checkpoint 0.999, this run 0.95"), std::string::npos)
            << what;
      }
    }
  }
}

TEST(StrictLoad, ShapeMismatchNamesTheParam) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kFullyReshardable);
  const std::string shapes =
      "emb=96x32:embedding,pos=16x32:embedding,qkv=96x32,qkv_b=96,proj=32x32,proj_b=32,tiny=9,"
      "norm=32,fc1=128x32,fc1_b=128,fc2=32x128,fc2_b=32,head=96x32:output";
  ExpectLoadError(LoadErrors("adam", tmp.Sub("c"), 2, at::kFloat, 1000, shapes), 2,
                  {"param tiny", "shape 7", "9"});
}

TEST(StrictLoad, MissingParamIsNamed) {
  TempDir tmp;
  Save("lion", tmp.Sub("c"), ShardingType::kFullyReshardable);
  const std::string shapes =
      "emb=96x32:embedding,pos=16x32:embedding,qkv=96x32,qkv_b=96,proj=32x32,proj_b=32,tiny=7,"
      "norm=32,fc1=128x32,fc1_b=128,fc2=32x128,fc2_b=32,head=96x32:output,extra=5";
  ExpectLoadError(LoadErrors("lion", tmp.Sub("c"), 2, at::kFloat, 1000, shapes), 2,
                  {"no param extra"});
}

TEST(StrictLoad, ModelDtypeMismatch) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kDpReshardable, 2, at::kBFloat16);
  ExpectLoadError(LoadErrors("adam", tmp.Sub("c"), 2, at::kFloat), 2, {"bf16 model", "fp32"});
}

TEST(StrictLoad, TensorDtypeMismatchNamesKey) {
  TempDir tmp;
  Save("lion", tmp.Sub("c"), ShardingType::kFullyShardedModelSpace);
  // Declare one tensor as fp16 in the index: the header check or the dtype
  // check must refuse it.
  nlohmann::json j = ReadMeta(tmp.Sub("c"));
  const std::string key = "optimizer.state.exp_avg.norm";
  ASSERT_TRUE(j["tensors"].contains(key));
  j["tensors"][key]["dtype"] = "F16";
  for (auto& c : j["tensors"][key]["chunks"])
    c["byte_range"][1] = c["byte_range"][0].get<int64_t>() + 2 * c["numel"].get<int64_t>();
  WriteMeta(tmp.Sub("c"), j);
  ExpectLoadError(LoadErrors("lion", tmp.Sub("c")), 2, {"exp_avg.norm"});
}

TEST(StrictLoad, DpReshardableRefusesBucketSizeChange) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kDpReshardable, 2, at::kFloat, 1000);
  const std::vector<std::string> errors = LoadErrors("adam", tmp.Sub("c"), 3, at::kFloat, 2500);
  ExpectLoadError(errors, 3,
                  {"layout mismatch", "(bucket size 1000 at save, 2500 now)",
                   "dp_reshardable can change only the DP size"});
  // The message names the first bucket that differs, with its numel_unpadded
  // as the metadata records it and as this run lays it out.
  const nlohmann::json saved = ReadMeta(tmp.Sub("c"))["layout"]["buffers"][0]["buckets"];
  const std::regex named(
      R"(bucket (\d+) has numel_unpadded (\d+) in checkpoint [^,]+, (\d+) in this run)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(errors[0], m, named)) << errors[0];
  const size_t bucket = std::stoul(m[1]);
  ASSERT_LT(bucket, saved.size());
  EXPECT_EQ(std::stoll(m[2]), saved[bucket]["numel_unpadded"].get<int64_t>());
  EXPECT_NE(m[2], m[3]);
}

TEST(StrictLoad, DpZeroGatherScatterRefusesBucketSizeChange) {
  TempDir tmp;
  Save("lion", tmp.Sub("c"), ShardingType::kDpZeroGatherScatter, 2, at::kFloat, 1000);
  ExpectLoadError(LoadErrors("lion", tmp.Sub("c"), 2, at::kFloat, 0), 2, {"layout mismatch"});
}

TEST(StrictLoad, FullyShardedModelSpaceAcceptsBucketSizeChange) {
  TempDir tmp;
  Save("muon_lion", tmp.Sub("c"), ShardingType::kFullyShardedModelSpace, 2, at::kBFloat16, 1000);
  TrainOptions t = CheckpointRun("muon_lion", at::kBFloat16, 4);
  t.bucket_size = 0;
  t.load_dir = tmp.Sub("c");
  const ThreadRun run = RunTrainOnThreads(t, 3);
  EXPECT_TRUE(run.ok()) << (run.errors.empty() ? "" : run.errors.front());
  EXPECT_EQ(run.root.resumed_from, 2);
}

TEST(StrictLoad, ChecksumMismatchNamesFileAndTensor) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kDpReshardable);
  const std::string file = tmp.Sub("c") + "/rank_00001.safetensors";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    char b = 0;
    f.read(&b, 1);
    f.seekp(-3, std::ios::end);
    b = static_cast<char>(b ^ 0x40);
    f.write(&b, 1);
  }
  ExpectLoadError(LoadErrors("adam", tmp.Sub("c")), 2,
                  {"checksum mismatch in rank_00001.safetensors", "tensor optimizer."});
}

TEST(StrictLoad, TruncatedFileIsNamed) {
  TempDir tmp;
  Save("lion", tmp.Sub("c"), ShardingType::kFullyShardedModelSpace);
  const std::string file = tmp.Sub("c") + "/rank_00000.safetensors";
  fs::resize_file(file, fs::file_size(file) - 100);
  ExpectLoadError(LoadErrors("lion", tmp.Sub("c")), 2, {"rank_00000.safetensors", "truncated"});
}

TEST(StrictLoad, MissingFileIsNamed) {
  TempDir tmp;
  Save("lion", tmp.Sub("c"), ShardingType::kDpReshardable);
  fs::remove(tmp.Sub("c") + "/rank_00001.safetensors");
  ExpectLoadError(LoadErrors("lion", tmp.Sub("c")), 2, {"rank_00001.safetensors is missing"});
}

TEST(StrictLoad, UnknownFormatVersion) {
  TempDir tmp;
  Save("adamw", tmp.Sub("c"), ShardingType::kFullyReshardable);
  nlohmann::json j = ReadMeta(tmp.Sub("c"));
  j["format_version"] = 99;
  WriteMeta(tmp.Sub("c"), j);
  ExpectLoadError(LoadErrors("adamw", tmp.Sub("c")), 2,
                  {"unknown format version 99", "metadata.json"});
}

TEST(StrictLoad, UnknownShardingType) {
  TempDir tmp;
  Save("adamw", tmp.Sub("c"), ShardingType::kFullyReshardable);
  nlohmann::json j = ReadMeta(tmp.Sub("c"));
  j["sharding_type"] = "zero3";
  WriteMeta(tmp.Sub("c"), j);
  ExpectLoadError(LoadErrors("adamw", tmp.Sub("c")), 2, {"unknown sharding type 'zero3'"});
}

TEST(StrictLoad, MissingTensorIsNamed) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kFullyShardedModelSpace);
  nlohmann::json j = ReadMeta(tmp.Sub("c"));
  j["tensors"].erase("optimizer.state.exp_avg_sq.fc1_b");
  WriteMeta(tmp.Sub("c"), j);
  ExpectLoadError(LoadErrors("adam", tmp.Sub("c")), 2,
                  {"missing tensor optimizer.state.exp_avg_sq.fc1_b"});
}

TEST(StrictLoad, UncommittedSaveIsNotACheckpoint) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kDpReshardable);
  fs::remove(tmp.Sub("c") + "/metadata.json");
  ExpectLoadError(LoadErrors("adam", tmp.Sub("c")), 2,
                  {"no metadata.json", "not a committed checkpoint"});
}

TEST(StrictLoad, AllowMissingStartsMissingStateFromZero) {
  TempDir tmp;
  Save("lion", tmp.Sub("c"), ShardingType::kFullyReshardable);
  TrainOptions t = CheckpointRun("adam", at::kFloat, 3);
  t.compare_reference = false;
  t.load_dir = tmp.Sub("c");
  t.load_options.allow_missing = true;
  // Lion's default lr differs from Adam's: this run's schedule wins.
  t.load_options.lr_schedule = LoadOptions::LrScheduleChoice::kRun;
  const ThreadRun run = RunTrainOnThreads(t, 2);
  EXPECT_TRUE(run.errors.empty()) << run.errors.front();
  EXPECT_EQ(run.root.resumed_from, 2);
  EXPECT_EQ(run.root.final_state.step, 3);
}

// --allow-missing starts missing *state* from zero, never a main param or a
// bucket-size tensor: for every sharding type, a checkpoint without one of
// them is refused with the tensor named, with the option on.
TEST(StrictLoad, AllowMissingNeverForgivesAMainParamOrTheBucketSizes) {
  const auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  for (const ShardingType type : AllShardingTypes()) {
    TempDir tmp;
    Save("adam", tmp.Sub("c"), type);
    const nlohmann::json saved = ReadMeta(tmp.Sub("c"));
    std::vector<std::string> vital;  // the first main-param key, the first bucket-size key
    for (const char* what : {"param", "per_bucket_numel"})
      for (auto it = saved["tensors"].begin(); it != saved["tensors"].end(); ++it) {
        const std::string& k = it.key();
        const bool hit = std::string(what) == "param"
                             ? ends_with(k, ".param") || k.find(".param.") != std::string::npos ||
                                   k.find(".fp32_param.") != std::string::npos
                             : k.find(what) != std::string::npos;
        if (!hit) continue;
        vital.push_back(k);
        break;
      }
    ASSERT_FALSE(vital.empty()) << type.name() << " saved no main param";
    for (const std::string& key : vital) {
      SCOPED_TRACE(std::string(type.name()) + ": without " + key);
      nlohmann::json j = saved;
      j["tensors"].erase(key);
      WriteMeta(tmp.Sub("c"), j);
      TrainOptions t = CheckpointRun("adam", at::kFloat, 4);
      t.bucket_size = 1000;
      t.load_dir = tmp.Sub("c");
      t.load_options.allow_missing = true;
      ExpectLoadError(RunTrainOnThreads(t, 2).errors, 2, {"missing tensor " + key});
    }
  }
}

// A failed load leaves every rank's state exactly as it was.
TEST(StrictLoad, FailedLoadChangesNoState) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kDpReshardable);
  fs::resize_file(tmp.Sub("c") + "/rank_00001.safetensors", 200);
  const ModelSpec model = CheckpointModel();
  auto errors = RunRanksInProcess(2, std::chrono::seconds(30), [&](Communicator& comm) {
    DistributedOptimizer opt(OptimizerSetup::Defaults("adam"), model.params, at::kFloat, comm,
                             {1000});
    opt.SetParams(InitialParams(model, 5, at::kFloat));
    opt.ZeroGrad();
    for (size_t i = 0; i < model.params.size(); ++i)
      opt.Grad(static_cast<int>(i)).copy_(GlobalGrad(5, 1, i, model.params[i].shape, 24) / 2.0f);
    opt.Step();
    std::vector<at::Tensor> before;
    for (const auto& p : opt.Owned()) {
      before.push_back(p.main.clone());
      for (const auto& s : p.state) before.push_back(s.clone());
    }
    std::vector<at::Tensor> params_before;
    for (size_t i = 0; i < model.params.size(); ++i)
      params_before.push_back(opt.ModelParam(static_cast<int>(i)).clone());
    EXPECT_THROW(LoadCheckpoint(opt, tmp.Sub("c")), Error);
    size_t k = 0;
    for (const auto& p : opt.Owned()) {
      EXPECT_TRUE(at::equal(p.main, before[k++]));
      for (const auto& s : p.state) EXPECT_TRUE(at::equal(s, before[k++]));
    }
    for (size_t i = 0; i < model.params.size(); ++i)
      EXPECT_TRUE(at::equal(opt.ModelParam(static_cast<int>(i)), params_before[i]));
    EXPECT_EQ(opt.step(), 1);
  });
  for (const auto& e : errors) EXPECT_FALSE(e);
}

TEST(CommitProtocol, SavingOntoAnExistingCheckpointIsRefused) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kDpReshardable);
  const std::string before = ReadFile(tmp.Sub("c") + "/metadata.json");
  TrainOptions t = CheckpointRun("adam", at::kFloat, 2);
  t.save_at = 2;
  t.save_dir = tmp.Sub("c");
  const ThreadRun run = RunTrainOnThreads(t, 2);
  ASSERT_EQ(run.errors.size(), 2u);
  EXPECT_NE(run.errors[0].find("refusing to save"), std::string::npos) << run.errors[0];
  EXPECT_EQ(ReadFile(tmp.Sub("c") + "/metadata.json"), before);
}

TEST(CommitProtocol, LatestNamesTheNewestAndNoTemporaryRemains) {
  TempDir tmp;
  Save("lion", tmp.Sub("a"), ShardingType::kDpReshardable);
  EXPECT_EQ(ReadFile(tmp.Sub("latest")), "a\n");
  Save("lion", tmp.Sub("b"), ShardingType::kFullyReshardable);
  EXPECT_EQ(ReadFile(tmp.Sub("latest")), "b\n");
  for (const auto& e : fs::directory_iterator(fs::path(tmp.Sub("a")).parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  // metadata.json is in the committed folder with every rank file it names.
  CheckpointReader r(tmp.Sub("b"));
  EXPECT_EQ(r.metadata().sharding_type, ShardingType::kFullyReshardable);
  EXPECT_EQ(r.metadata().dp_size, 2);
  EXPECT_EQ(r.metadata().step, 2);
}

// The seed regression: a Muon + Lion run keeps exactly Lion's one moment
// for its scalar params, and it survives save and load.
class SeedRegressionMuonLion : public testing::TestWithParam<ShardingType> {};

TEST_P(SeedRegressionMuonLion, ScalarSchemaIsExactlyExpAvgAndSurvivesRoundTrip) {
  TempDir tmp;
  TrainOptions save = CheckpointRun("muon_lion", at::kBFloat16, 3);
  save.save_at = 3;
  save.save_dir = tmp.Sub("c");
  save.sharding_type = GetParam();
  const ThreadRun first = RunTrainOnThreads(save, 2);
  ASSERT_TRUE(first.ok());
  CheckpointReader reader(tmp.Sub("c"));
  const auto& schemas = reader.metadata().schemas;
  ASSERT_EQ(schemas.count("lion"), 1u);
  EXPECT_EQ(schemas.at("lion"), std::vector<std::string>{"exp_avg"});
  EXPECT_EQ(schemas.at("muon"), std::vector<std::string>{"momentum_buffer"});
  for (const TensorRecord& t : reader.metadata().tensors)
    EXPECT_EQ(t.key.find("exp_avg_sq"), std::string::npos) << t.key;
  // Model space of the checkpoint equals the run's own final state.
  const StateDict from_ckpt = ReadModelSpace(reader);
  ASSERT_EQ(from_ckpt.tensors.size(), first.root.final_state.tensors.size());
  for (const auto& [k, t] : first.root.final_state.tensors) {
    ASSERT_TRUE(from_ckpt.tensors.count(k)) << k;
    EXPECT_TRUE(at::equal(from_ckpt.tensors.at(k), t)) << k;
  }
  TrainOptions load = CheckpointRun("muon_lion", at::kBFloat16, 6);
  load.load_dir = tmp.Sub("c");
  const ThreadRun resumed = RunTrainOnThreads(load, 3);
  EXPECT_TRUE(resumed.ok()) << (resumed.errors.empty() ? "" : resumed.errors.front());
  ASSERT_FALSE(resumed.root.steps.empty());
  EXPECT_TRUE(resumed.root.steps.front().after_load);
}

INSTANTIATE_TEST_SUITE_P(Types, SeedRegressionMuonLion,
                         testing::Values(ShardingType::kDpReshardable,
                                         ShardingType::kFullyReshardable),
                         [](const auto& info) { return ShardingTypeName(info.param); });

}  // namespace
}  // namespace shardcheck
