// `shardcheck reference` end to end, in process: every setup in fp32 and
// bf16 writes final.safetensors with exactly the schema's keys and the
// reference's bytes, and config.json with the resolved run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "distributed/file_util.h"
#include "distributed/safetensors.h"
#include "harness/cell/oracle_run.h"
#include "harness/cli/cli.h"

namespace shardcheck {
namespace {

int Cli(std::vector<std::string> args) {
  args.insert(args.begin(), "shardcheck");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return RunCli(static_cast<int>(argv.size()), argv.data());
}

class ReferenceCommand : public testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ReferenceCommand, WritesFinalStateAndConfig) {
  const auto [name, dtype] = GetParam();
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("shardcheck_ref_" + std::to_string(::getpid()) + "_" + name + dtype))
                              .string();
  ASSERT_EQ(Cli({"reference", "--optimizer", name, "--model", "gpt-tiny", "--steps", "3", "--seed",
                 "5", "--dtype", dtype, "--weight-decay", "0.01", "--out", out}),
            0);
  std::map<std::string, std::string> meta;
  auto tensors = ReadSafetensors(out + "/final.safetensors", &meta);
  EXPECT_EQ(meta.at("step"), "3");
  EXPECT_EQ(meta.at("optimizer"), name);

  OracleRunOptions o;
  o.model = GptTinySpec();
  o.setup = OptimizerSetup::Defaults(name);
  o.setup.main.Set("weight_decay", 0.01);
  if (o.setup.scalar) o.setup.scalar->Set("weight_decay", 0.01);
  o.steps = 3;
  o.seed = 5;
  o.dtype = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  const StateDict want = RunReferenceOnOracle(o).GetStateDict();
  ASSERT_EQ(tensors.size(), want.tensors.size());
  for (const auto& [k, t] : want.tensors) {
    ASSERT_TRUE(tensors.count(k)) << k;
    EXPECT_TRUE(at::equal(tensors[k], t)) << k;
    EXPECT_EQ(tensors[k].scalar_type(), t.scalar_type()) << k;
  }
  const bool has_main = tensors.count(MainParamKey(o.model.params[0].name)) > 0;
  EXPECT_EQ(has_main, dtype == "bf16");

  const auto cfg = nlohmann::json::parse(ReadFile(out + "/config.json"));
  EXPECT_EQ(cfg["step"], 3);
  EXPECT_EQ(cfg["dtype"], dtype);
  EXPECT_EQ(cfg["optimizer"]["name"], name);
  EXPECT_EQ(cfg["model"]["params"].size(), o.model.params.size());
  for (const auto& child : cfg["optimizer"]["children"]) EXPECT_FALSE(child["schema"].empty());
  EXPECT_EQ(cfg["optimizer"]["children"][0]["weight_decay"], 0.01);
  std::filesystem::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(All, ReferenceCommand,
                         testing::Combine(testing::ValuesIn(OptimizerSetup::Names()),
                                          testing::Values("fp32", "bf16")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

TEST(ReferenceCommandErrors, BadUsageExitsTwo) {
  EXPECT_EQ(Cli({"reference", "--optimizer", "adagrad", "--out", "/tmp/x"}), 2);
  EXPECT_EQ(Cli({"reference", "--optimizer", "adam", "--dtype", "fp8", "--out", "/tmp/x"}), 2);
  EXPECT_EQ(Cli({"reference", "--optimizer", "adam", "--momentum", "0.9", "--out", "/tmp/x"}), 2);
  EXPECT_EQ(Cli({"reference", "--optimizer", "muon_lion", "--shapes", "8,8", "--out", "/tmp/x"}),
            2);
  EXPECT_EQ(Cli({"reference", "--optimizer", "adam"}), 2);  // --out missing
  EXPECT_EQ(Cli({"reference", "--optimizer", "lion", "--eps", "1e-8", "--out", "/tmp/x"}), 2);
  EXPECT_EQ(Cli({"reference", "--optimizer", "adam", "--scalar-lr", "0.1", "--out", "/tmp/x"}), 2);
  EXPECT_EQ(Cli({"reference", "--optimizer", "adam", "--lr-decay-steps", "5", "--out", "/tmp/x"}),
            2);
  EXPECT_EQ(Cli({"train", "--optimizer", "adam", "--load", "/tmp/x", "--override-lr-schedule",
                 "--use-checkpoint-lr-schedule", "--out", "/tmp/x"}),
            2);
}

// The hyperparameter flags come from the registry: a composite routes each
// to the child that declares it, and the schedule flags reach the setup.
TEST(ReferenceCommandFlags, HyperparametersAndScheduleReachTheRun) {
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("shardcheck_ref_flags_" + std::to_string(::getpid())))
                              .string();
  ASSERT_EQ(Cli({"reference", "--optimizer",       "muon",      "--scalar-optimizer",
                 "lion",      "--shapes",          "w=8x8,b=8", "--momentum",
                 "0.8",       "--beta1",           "0.5",       "--scalar-lr",
                 "0.003",     "--lr-warmup-steps", "2",         "--lr-decay-steps",
                 "3",         "--lr-decay-style",  "linear",    "--min-lr",
                 "1e-5",      "--steps",           "2",         "--out",
                 out}),
            0);
  const nlohmann::json config = nlohmann::json::parse(ReadFile(out + "/config.json"));
  const auto& opt = config.at("optimizer");
  EXPECT_EQ(opt.at("name"), "muon_lion");
  EXPECT_EQ(opt.at("children")[0].at("momentum"), 0.8);
  EXPECT_EQ(opt.at("children")[1].at("beta1"), 0.5);
  EXPECT_EQ(opt.at("children")[1].at("lr"), 0.003);
  EXPECT_EQ(opt.at("lr_schedule").at("style"), "linear");
  EXPECT_EQ(opt.at("lr_schedule").at("warmup_steps"), 2);
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace shardcheck
