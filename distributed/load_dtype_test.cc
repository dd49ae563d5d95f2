// A load refuses a checkpoint tensor of another dtype than the run's, and
// its message names the checkpoint, the tensor and both dtypes. The
// checkpoint is rewritten consistently (the rank file, its header, every
// chunk's byte range and checksum, the file records and metadata.json's
// seal), so only the dtype check can refuse it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "distributed/checkpoint.h"
#include "distributed/checkpoint_format.h"
#include "distributed/communicator_local.h"
#include "distributed/distrib_optimizer.h"
#include "distributed/file_util.h"
#include "distributed/safetensors.h"
#include "spec/error.h"
#include "testing/temp_dir.h"

namespace shardcheck {
namespace fs = std::filesystem;
namespace {

const std::vector<ParamInfo> kParams = {{"w", {8, 4}}, {"b", {5}}};

// Runs `body` on one rank; rethrows what it threw.
void OneRank(const std::function<void(DistributedOptimizer&)>& body) {
  const auto errors = RunLocalRanksInProcess(1, std::chrono::seconds(60), [&](Communicator& comm) {
    DistributedOptimizer opt(OptimizerSetup::Defaults("adamw"), kParams, at::kFloat, comm);
    body(opt);
  });
  if (errors[0]) std::rethrow_exception(errors[0]);
}

// Rewrites tensor `key` of the checkpoint in `dir` as bf16, keeping every
// record of the folder true.
void StoreAsBf16(const std::string& dir, const std::string& key) {
  const fs::path meta_path = fs::path(dir) / kMetadataFile;
  CheckpointMetadata m = ReadMetadataFile(meta_path.string());
  const std::string file = m.tensors.At(key).chunks.at(0).file;
  const std::string path = (fs::path(dir) / file).string();
  std::map<std::string, std::string> tags;
  std::map<std::string, at::Tensor> tensors = ReadSafetensors(path, &tags);
  tensors.at(key) = tensors.at(key).to(at::kBFloat16);
  fs::remove(path);
  WriteSafetensors(path, {tensors.begin(), tensors.end()}, tags);
  const SafetensorsFile header = ReadSafetensorsHeader(path);
  for (TensorRecord& t : m.tensors)
    for (ChunkRecord& c : t.chunks) {
      if (c.file != file) continue;
      for (const SafetensorsEntry& e : header.entries)
        if (e.name == c.name) {
          c.byte_begin = header.DataOffset() + e.begin;
          c.byte_end = header.DataOffset() + e.end;
        }
      c.xxh3 = Xxh3Hex(std::vector<at::Tensor>{tensors.at(c.name).contiguous()});
    }
  m.tensors.At(key).dtype = at::kBFloat16;
  m.files[file] = RecordFile(path);
  WriteFileAtomic(meta_path.string(), MetadataFileText(m));
}

TEST(LoadDtype, TensorOfAnotherDtypeIsRefusedNamingCheckpointTensorAndDtypes) {
  TempDir tmp("load_dtype");
  const std::string dir = tmp.Sub("ckpt");
  OneRank([&](DistributedOptimizer& opt) {
    SaveCheckpoint(opt, dir, ShardingType::kFullyShardedModelSpace);
  });
  const std::string key = ModelSpaceKey("exp_avg_sq", "w");
  StoreAsBf16(dir, key);
  CheckpointReader(dir).VerifyAll();  // the rewritten folder is consistent
  try {
    OneRank([&](DistributedOptimizer& opt) { LoadCheckpoint(opt, dir); });
    FAIL() << "the load took a bf16 " << key;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("checkpoint " + dir), std::string::npos) << what;
    EXPECT_NE(what.find("tensor " + key + " has dtype bf16, expected fp32"), std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace shardcheck
