// Corrupt checkpoints: bit flips at dense positions of metadata.json, of a
// rank file's header and of its tensor bytes, truncation of each file type,
// extra and missing files. Each is refused with an error naming the file
// (and the tensor, for tensor bytes) before any optimizer state changes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "distributed/checkpoint.h"
#include "distributed/communicator_local.h"
#include "distributed/file_util.h"
#include "harness/cell/checkpoint_test_util.h"
#include "spec/error.h"

namespace shardcheck {
namespace {

namespace fs = std::filesystem;
using testing_util::CheckpointModel;
using testing_util::TempDir;

void Save(const std::string& setup, const std::string& dir, ShardingType type) {
  const ThreadRun run = testing_util::SaveAtStep2(setup, dir, type);
  ASSERT_TRUE(run.errors.empty()) << run.errors.front();
}

void FlipBit(const std::string& path, uint64_t byte, int bit) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(byte));
  char b = 0;
  f.read(&b, 1);
  b = static_cast<char>(b ^ (1 << bit));
  f.seekp(static_cast<std::streamoff>(byte));
  f.write(&b, 1);
}

// The error of opening `dir` and verifying every chunk ("" if none).
std::string ReadError(const std::string& dir) {
  try {
    CheckpointReader r(dir);
    r.VerifyAll();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Flips one bit at each of `positions` of `file` (bit = position % 8, so
// every bit place is covered), expects a one-line error holding `names`,
// and restores the byte. Returns how many flips were refused.
int FlipEach(const std::string& dir, const std::string& file,
             const std::vector<uint64_t>& positions, const std::vector<std::string>& names) {
  const std::string path = dir + "/" + file;
  int refused = 0;
  for (uint64_t at : positions) {
    const int bit = static_cast<int>(at % 8);
    FlipBit(path, at, bit);
    const std::string err = ReadError(dir);
    FlipBit(path, at, bit);
    bool named = !err.empty() && err.find('\n') == std::string::npos;
    for (const auto& n : names) named = named && err.find(n) != std::string::npos;
    if (named) {
      ++refused;
    } else {
      ADD_FAILURE() << "bit " << bit << " of byte " << at << " of " << file
                    << (err.empty() ? " passed unnoticed" : " gave: " + err);
    }
  }
  EXPECT_EQ(ReadError(dir), "") << "restored checkpoint no longer reads";
  return refused;
}

std::vector<uint64_t> Every(uint64_t begin, uint64_t end, uint64_t stride = 1) {
  std::vector<uint64_t> v;
  for (uint64_t i = begin; i < end; i += stride) v.push_back(i);
  return v;
}

TEST(Corruption, EveryByteOfMetadataJsonFlippedIsRefused) {
  TempDir tmp;
  Save("ademamix", tmp.Sub("c"), ShardingType::kDpReshardable);
  const uint64_t size = fs::file_size(tmp.Sub("c/metadata.json"));
  const int refused = FlipEach(tmp.Sub("c"), "metadata.json", Every(0, size), {"metadata.json"});
  EXPECT_EQ(refused, static_cast<int>(size));
  std::cout << "metadata.json: " << refused << " of " << size << " one-bit flips refused\n";
}

TEST(Corruption, EveryByteOfARankFileHeaderFlippedIsRefused) {
  TempDir tmp;
  Save("muon_lion", tmp.Sub("c"), ShardingType::kFullyShardedModelSpace);
  const std::string file = "rank_00001.safetensors";
  const uint64_t header = CheckpointReader(tmp.Sub("c")).metadata().files.at(file).header_bytes;
  const int refused = FlipEach(tmp.Sub("c"), file, Every(0, header), {file});
  EXPECT_EQ(refused, static_cast<int>(header));
  std::cout << file << " header: " << refused << " of " << header << " one-bit flips refused\n";
}

TEST(Corruption, TensorBytesFlippedAreRefusedNamingFileAndTensor) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kDpZeroGatherScatter);
  const std::string file = "rank_00000.safetensors";
  const FileRecord f = CheckpointReader(tmp.Sub("c")).metadata().files.at(file);
  // 997 positions spread over the data section, first and last byte included.
  std::vector<uint64_t> at = Every(f.header_bytes, f.bytes, (f.bytes - f.header_bytes) / 997 + 1);
  at.push_back(f.bytes - 1);
  const int refused = FlipEach(tmp.Sub("c"), file, at, {"checksum mismatch in " + file, "tensor "});
  EXPECT_EQ(refused, static_cast<int>(at.size()));
}

TEST(Corruption, TruncationOfEachFileTypeIsRefused) {
  TempDir tmp;
  Save("lion", tmp.Sub("c"), ShardingType::kFullyReshardable);
  // Rank 0 holds every tensor of this type.
  const std::string meta = tmp.Sub("c/metadata.json"), rank = tmp.Sub("c/rank_00000.safetensors");
  const FileRecord f = CheckpointReader(tmp.Sub("c")).metadata().files.at("rank_00000.safetensors");
  const std::string meta_bytes = ReadFile(meta), rank_bytes = ReadFile(rank);
  struct Cut {
    std::string path, name;
    uint64_t keep;
  };
  const uint64_t meta_size = meta_bytes.size();
  for (const Cut& c :
       {Cut{meta, "metadata.json", 0}, Cut{meta, "metadata.json", meta_size / 2},
        Cut{meta, "metadata.json", meta_size - 1}, Cut{rank, "rank_00000.safetensors", 4},
        Cut{rank, "rank_00000.safetensors", f.header_bytes / 2},
        Cut{rank, "rank_00000.safetensors", f.header_bytes},
        Cut{rank, "rank_00000.safetensors", f.bytes - 1}}) {
    fs::resize_file(c.path, c.keep);
    const std::string err = ReadError(tmp.Sub("c"));
    EXPECT_NE(err.find(c.name), std::string::npos) << c.name << " cut to " << c.keep << ": " << err;
    WriteFileAtomic(meta, meta_bytes);
    WriteFileAtomic(rank, rank_bytes);
  }
  EXPECT_EQ(ReadError(tmp.Sub("c")), "");
}

TEST(Corruption, ExtraAndMissingFilesAreRefused) {
  TempDir tmp;
  Save("adamw", tmp.Sub("c"), ShardingType::kDpReshardable);
  { std::ofstream(tmp.Sub("c/rank_00002.safetensors")) << "x"; }
  EXPECT_NE(ReadError(tmp.Sub("c")).find("unexpected file rank_00002.safetensors"),
            std::string::npos)
      << ReadError(tmp.Sub("c"));
  fs::remove(tmp.Sub("c/rank_00002.safetensors"));
  fs::rename(tmp.Sub("c/rank_00001.safetensors"), tmp.Sub("rank_00001.safetensors"));
  EXPECT_NE(ReadError(tmp.Sub("c")).find("rank_00001.safetensors is missing"), std::string::npos)
      << ReadError(tmp.Sub("c"));
}

// A corrupt checkpoint of each file type, loaded into a running optimizer:
// every rank fails and no state, model param or step changes.
TEST(Corruption, FailedLoadOfACorruptFileChangesNoState) {
  TempDir tmp;
  Save("adam", tmp.Sub("c"), ShardingType::kDpReshardable);
  const FileRecord f = CheckpointReader(tmp.Sub("c")).metadata().files.at("rank_00001.safetensors");
  const ModelSpec model = CheckpointModel();
  struct Flip {
    std::string file;
    uint64_t at;
  };
  for (const Flip& flip : {Flip{"metadata.json", 200}, Flip{"rank_00001.safetensors", 40},
                           Flip{"rank_00001.safetensors", f.bytes - 5}}) {
    SCOPED_TRACE(flip.file + " byte " + std::to_string(flip.at));
    FlipBit(tmp.Sub("c/" + flip.file), flip.at, 2);
    auto errors = RunRanksInProcess(2, std::chrono::seconds(30), [&](Communicator& comm) {
      DistributedOptimizer opt(OptimizerSetup::Defaults("adam"), model.params, at::kFloat, comm,
                               {1000});
      opt.SetParams(InitialParams(model, 5, at::kFloat));
      opt.ZeroGrad();
      for (size_t i = 0; i < model.params.size(); ++i)
        opt.Grad(static_cast<int>(i)).copy_(GlobalGrad(5, 1, i, model.params[i].shape, 24));
      opt.Step();
      std::vector<at::Tensor> before;
      for (const auto& p : opt.Owned()) {
        before.push_back(p.main.clone());
        for (const auto& s : p.state) before.push_back(s.clone());
      }
      for (size_t i = 0; i < model.params.size(); ++i)
        before.push_back(opt.ModelParam(static_cast<int>(i)).clone());
      EXPECT_THROW(LoadCheckpoint(opt, tmp.Sub("c")), Error);
      std::vector<at::Tensor> after;
      for (const auto& p : opt.Owned()) {
        after.push_back(p.main);
        for (const auto& s : p.state) after.push_back(s);
      }
      for (size_t i = 0; i < model.params.size(); ++i)
        after.push_back(opt.ModelParam(static_cast<int>(i)));
      ASSERT_EQ(after.size(), before.size());
      for (size_t k = 0; k < after.size(); ++k)
        EXPECT_TRUE(at::equal(after[k].view(at::kByte), before[k].view(at::kByte))) << k;
      EXPECT_EQ(opt.step(), 1);
    });
    for (const auto& e : errors) EXPECT_FALSE(e);
    FlipBit(tmp.Sub("c/" + flip.file), flip.at, 2);
  }
}

}  // namespace
}  // namespace shardcheck
