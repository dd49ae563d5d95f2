// `shardcheck inspect`, `ckpt-diff` and `export` end to end, in process, on
// real checkpoints that `shardcheck train` writes (single process, DP size
// 1): a good checkpoint inspects clean; one flipped byte is a checksum error
// naming the rank file and tensor in all three tools; the export equals the
// reference's final.safetensors for the same steps; checkpoints of the same
// run in different sharding types are identical in model space, and runs
// with different seeds or steps are not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "distributed/checkpoint_format.h"
#include "distributed/file_util.h"
#include "distributed/safetensors.h"
#include "harness/cli/cli.h"

namespace shardcheck {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTypes[] = {"dp_reshardable", "fully_reshardable", "dp_zero_gather_scatter",
                                  "fully_sharded_model_space"};

int Cli(std::vector<std::string> args) {
  args.insert(args.begin(), "shardcheck");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return RunCli(static_cast<int>(argv.size()), argv.data());
}

// Exit code, stdout and stderr of one command.
struct CliResult {
  int code;
  std::string out, err;
};
CliResult CliCapture(const std::vector<std::string>& args) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int code = Cli(args);
  std::fflush(stdout);
  std::fflush(stderr);
  CliResult r{code, "", ""};
  r.out = testing::internal::GetCapturedStdout();
  r.err = testing::internal::GetCapturedStderr();
  return r;
}

class CkptTools : public testing::Test {
 protected:
  // Checkpoints at step 3 of muon_lion on gpt-tiny in bf16 (5000-element
  // buckets): one per sharding type (seed 1234), one with seed 99; and the
  // reference's final.safetensors at steps 3 and 2.
  static void SetUpTestSuite() {
    root_ = (fs::temp_directory_path() / ("shardcheck_ckpt_tools_" + std::to_string(::getpid())))
                .string();
    fs::remove_all(root_);
    for (const char* type : kTypes) ASSERT_EQ(Train(type, "1234", Ckpt(type)), 0) << type;
    ASSERT_EQ(Train("dp_reshardable", "99", Ckpt("seed99")), 0);
    for (const char* steps : {"3", "2"})
      ASSERT_EQ(Cli({"reference", "--optimizer", "muon_lion", "--model", "gpt-tiny", "--steps",
                     steps, "--dtype", "bf16", "--out", root_ + "/ref" + steps}),
                0);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static int Train(const std::string& type, const std::string& seed, const std::string& dir) {
    return Cli({"train",      "--optimizer", "muon_lion",
                "--model",    "gpt-tiny",    "--steps",
                "3",          "--seed",      seed,
                "--dtype",    "bf16",        "--bucket-size",
                "5000",       "--save-at",   "3",
                "--save-dir", dir,           "--sharding-type",
                type,         "--out",       root_ + "/out-" + type + "-" + seed});
  }
  static std::string Ckpt(const std::string& name) { return root_ + "/ckpts/" + name; }
  static std::string Ref(int steps) {
    return root_ + "/ref" + std::to_string(steps) + "/final.safetensors";
  }

  // A copy of checkpoint `name` at root/<copy>, to damage.
  static std::string CopyOf(const std::string& name, const std::string& copy) {
    const std::string dst = root_ + "/" + copy;
    fs::remove_all(dst);
    fs::copy(Ckpt(name), dst, fs::copy_options::recursive);
    return dst;
  }

  static std::string root_;
};
std::string CkptTools::root_;

int64_t ChunkCount(const nlohmann::json& meta) {
  int64_t n = 0;
  for (const auto& [key, t] : meta["tensors"].items())
    n += static_cast<int64_t>(t["chunks"].size());
  return n;
}

TEST_F(CkptTools, InspectGoodCheckpointVerifiesEveryChunk) {
  const auto meta = nlohmann::json::parse(ReadFile(Ckpt("dp_reshardable") + "/metadata.json"));
  const int64_t chunks = ChunkCount(meta);
  ASSERT_GT(chunks, 0);
  const CliResult text = CliCapture({"inspect", Ckpt("dp_reshardable")});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("sharding type    dp_reshardable"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("checksums: " + std::to_string(chunks) + " chunks verified"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("numel_unpadded"), std::string::npos);

  const CliResult json = CliCapture({"inspect", "--json", Ckpt("dp_reshardable")});
  ASSERT_EQ(json.code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["sharding_type"], "dp_reshardable");
  EXPECT_EQ(j["format_version"], kCheckpointFormatVersion);
  EXPECT_EQ(j["step"], 3);
  EXPECT_EQ(j["dp_size"], 1);
  EXPECT_EQ(j["optimizer"], "muon_lion");
  EXPECT_EQ(j["model_dtype"], "bf16");
  EXPECT_EQ(j["schemas"]["lion"], nlohmann::json::array({"exp_avg"}));
  EXPECT_EQ(j["schemas"]["muon"], nlohmann::json::array({"momentum_buffer"}));
  EXPECT_EQ(j["param_count"], meta["params"].size());
  EXPECT_EQ(j["tensors"].size(), meta["tensors"].size());
  EXPECT_EQ(j["layout"]["buffers"][0]["buckets"].size(),
            meta["layout"]["buffers"][0]["buckets"].size());
  EXPECT_GT(j["layout"]["buffers"][0]["buckets"].size(), 1u);  // 5000-element buckets
  EXPECT_EQ(j["checksums"]["verified"], true);
  EXPECT_EQ(j["checksums"]["chunks"], chunks);
}

TEST_F(CkptTools, InspectFollowsLatestInTheParent) {
  // The last save of SetUpTestSuite is seed99.
  const CliResult r = CliCapture({"inspect", "--json", "--no-verify", root_ + "/ckpts"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["dir"], Ckpt("seed99"));
  EXPECT_EQ(nlohmann::json::parse(r.out)["checksums"]["verified"], false);
}

TEST_F(CkptTools, OneFlippedByteIsAChecksumErrorNamingFileAndTensor) {
  const std::string dir = CopyOf("dp_reshardable", "corrupt");
  const auto meta = nlohmann::json::parse(ReadFile(dir + "/metadata.json"));
  // A state chunk of a buffer (Lion) param: every tool reads it.
  std::string key;
  for (const auto& [k, t] : meta["tensors"].items())
    if (k.find("bucket_idx_0.exp_avg") != std::string::npos) key = k;
  ASSERT_FALSE(key.empty());
  const auto& chunk = meta["tensors"][key]["chunks"][0];
  const std::string file = chunk["file"];
  {
    std::fstream f(dir + "/" + file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(chunk["byte_range"][0].get<int64_t>() + 5);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(chunk["byte_range"][0].get<int64_t>() + 5);
    f.write(&c, 1);
    ASSERT_TRUE(f.good());
  }
  const std::string want = "checksum mismatch in " + file + ", tensor " + key;
  const CliResult inspect = CliCapture({"inspect", dir});
  EXPECT_EQ(inspect.code, 2);
  EXPECT_NE(inspect.err.find("shardcheck: error: "), std::string::npos) << inspect.err;
  EXPECT_NE(inspect.err.find(want), std::string::npos) << inspect.err;
  EXPECT_EQ(std::count(inspect.err.begin(), inspect.err.end(), '\n'), 1) << inspect.err;
  EXPECT_EQ(inspect.out.find("verified"), std::string::npos) << inspect.out;

  EXPECT_EQ(CliCapture({"inspect", "--no-verify", dir}).code, 0);

  const CliResult diff = CliCapture({"ckpt-diff", Ckpt("dp_reshardable"), dir});
  EXPECT_EQ(diff.code, 2);
  EXPECT_NE(diff.err.find(want), std::string::npos) << diff.err;

  const std::string out = root_ + "/corrupt.safetensors";
  const CliResult exp = CliCapture({"export", dir, "--out", out});
  EXPECT_EQ(exp.code, 2);
  EXPECT_NE(exp.err.find(want), std::string::npos) << exp.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(CkptTools, TruncatedOrUncommittedCheckpointExitsTwo) {
  const std::string truncated = CopyOf("fully_sharded_model_space", "truncated");
  const std::string rank0 = truncated + "/rank_00000.safetensors";
  fs::resize_file(rank0, fs::file_size(rank0) - 12);
  const CliResult t = CliCapture({"inspect", truncated});
  EXPECT_EQ(t.code, 2);
  EXPECT_NE(t.err.find("rank_00000.safetensors"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("truncated"), std::string::npos) << t.err;
  EXPECT_EQ(CliCapture({"export", truncated, "--out", root_ + "/t.safetensors"}).code, 2);

  const std::string uncommitted = CopyOf("fully_reshardable", "uncommitted");
  fs::remove(uncommitted + "/metadata.json");
  const CliResult u = CliCapture({"inspect", uncommitted});
  EXPECT_EQ(u.code, 2);
  EXPECT_NE(u.err.find("not a committed checkpoint"), std::string::npos) << u.err;
  // A save's temporary folder is refused by its name, even when complete.
  const std::string interrupted = CopyOf("fully_reshardable", "interrupted.tmp-1a2b");
  const CliResult i = CliCapture({"inspect", interrupted});
  EXPECT_EQ(i.code, 2);
  EXPECT_NE(i.err.find("is an incomplete save"), std::string::npos) << i.err;
  EXPECT_EQ(CliCapture({"ckpt-diff", uncommitted, Ref(3)}).code, 2);
  EXPECT_EQ(CliCapture({"ckpt-diff", root_ + "/no-such-thing", Ref(3)}).code, 2);
}

TEST_F(CkptTools, ExportEqualsTheReferenceFinalStateForEveryType) {
  std::map<std::string, std::string> ref_meta;
  const auto ref = ReadSafetensors(Ref(3), &ref_meta);
  ASSERT_GT(ref.size(), 0u);
  for (const char* type : kTypes) {
    const std::string out = root_ + "/export-" + type + ".safetensors";
    ASSERT_EQ(Cli({"export", Ckpt(type), "--out", out}), 0) << type;
    std::map<std::string, std::string> meta;
    const auto got = ReadSafetensors(out, &meta);
    EXPECT_EQ(meta.at("step"), "3") << type;
    EXPECT_EQ(meta.at("optimizer"), "muon_lion") << type;
    ASSERT_EQ(got.size(), ref.size()) << type;
    for (const auto& [k, t] : ref) {
      ASSERT_TRUE(got.count(k)) << type << " lacks " << k;
      EXPECT_EQ(got.at(k).scalar_type(), t.scalar_type()) << type << " " << k;
      EXPECT_TRUE(at::equal(got.at(k), t)) << type << " " << k;
    }
    // Same tensors, same order, same metadata: the same file.
    EXPECT_EQ(ReadFile(out), ReadFile(Ref(3))) << type;
  }
}

TEST_F(CkptTools, CkptDiffIdenticalAcrossShardingTypesAndAgainstTheReference) {
  for (const char* type : kTypes) {
    const CliResult r = CliCapture({"ckpt-diff", Ckpt("dp_reshardable"), Ckpt(type)});
    EXPECT_EQ(r.code, 0) << type << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("IDENTICAL"), std::string::npos) << r.out;
  }
  const CliResult a = CliCapture({"ckpt-diff", Ckpt("fully_sharded_model_space"), Ref(3)});
  EXPECT_EQ(a.code, 0) << a.out << a.err;
  const CliResult b = CliCapture({"ckpt-diff", Ref(3), Ckpt("dp_zero_gather_scatter")});
  EXPECT_EQ(b.code, 0) << b.out << b.err;
}

TEST_F(CkptTools, CkptDiffReportsOtherSeedAndOtherStep) {
  const CliResult seed =
      CliCapture({"ckpt-diff", Ckpt("dp_reshardable"), Ckpt("seed99"), "--max-report", "2"});
  EXPECT_EQ(seed.code, 1) << seed.out << seed.err;
  EXPECT_NE(seed.out.find("DIFFERENT"), std::string::npos) << seed.out;
  EXPECT_NE(seed.out.find("differ     main_param."), std::string::npos) << seed.out;
  EXPECT_NE(seed.out.find("max ulp"), std::string::npos) << seed.out;  // the comparator's summary
  EXPECT_NE(seed.out.find("more)"), std::string::npos) << seed.out;    // --max-report 2
  EXPECT_NE(seed.out.find("step       3 vs 3: equal"), std::string::npos) << seed.out;

  const CliResult step = CliCapture({"ckpt-diff", Ckpt("fully_reshardable"), Ref(2)});
  EXPECT_EQ(step.code, 1) << step.out << step.err;
  EXPECT_NE(step.out.find("step       3 vs 2: DIFFER"), std::string::npos) << step.out;

  // One rank's file is not a model-space state.
  const CliResult rank =
      CliCapture({"ckpt-diff", Ckpt("dp_reshardable") + "/rank_00000.safetensors", Ref(3)});
  EXPECT_EQ(rank.code, 2);
  EXPECT_NE(rank.err.find("pass the checkpoint folder"), std::string::npos) << rank.err;
}

}  // namespace
}  // namespace shardcheck
