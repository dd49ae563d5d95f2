// The dry mode (distributed/dry_checkpoint.h) against the engine it
// models: for every sharding type, DP sizes 1-4, two setups (three and two
// tensors per piece) and both model dtypes, a real save of the same model
// (ranks as threads) writes exactly the metadata, files and headers the
// dry save plans: every tensor's chunks (offset, numel, file, byte range),
// every file's size and header size, and metadata.json's length (the real
// checksums have the dry zeros' length). The dry load plans every piece of
// every rank at another DP size, and ChunksCovering finds the chunks a
// range touches, with any hint.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "distributed/checkpoint.h"
#include "distributed/checkpoint_format.h"
#include "distributed/communicator_local.h"
#include "distributed/distrib_optimizer.h"
#include "distributed/dry_checkpoint.h"
#include "distributed/sharding_format.h"
#include "spec/error.h"
#include "testing/model_spec.h"
#include "testing/temp_dir.h"

namespace shardcheck {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kBucketSize = 1000;  // mixed-small in several buckets

DryModel SmallModel(const std::string& setup, c10::ScalarType dtype) {
  return {MixedSmallSpec().params, OptimizerSetup::Defaults(setup), dtype, kBucketSize};
}

// Saves `model` with `type` at `dp` into `dir` (ranks as threads).
void RealSave(const DryModel& model, ShardingType type, int dp, const std::string& dir) {
  DistOptions o;
  o.bucket_size = model.bucket_size;
  const auto errors = RunLocalRanksInProcess(dp, std::chrono::seconds(60), [&](Communicator& comm) {
    DistributedOptimizer opt(model.setup, model.params, model.model_dtype, comm, o);
    SaveCheckpoint(opt, dir, type);
  });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void ExpectSameIndex(const CheckpointMetadata& real, const DrySave& dry, const std::string& dir) {
  ASSERT_EQ(real.tensors.size(), dry.metadata.tensors.size());
  for (const TensorRecord& t : real.tensors) {
    SCOPED_TRACE(t.key);
    const TensorRecord* d = dry.metadata.tensors.Find(t.key);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(t.dtype, d->dtype);
    EXPECT_EQ(t.shape, d->shape);
    ASSERT_EQ(t.chunks.size(), d->chunks.size());
    for (size_t i = 0; i < t.chunks.size(); ++i) {
      const ChunkRecord &a = t.chunks[i], &b = d->chunks[i];
      EXPECT_EQ(a.offset, b.offset);
      EXPECT_EQ(a.numel, b.numel);
      EXPECT_EQ(a.file, b.file);
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.byte_begin, b.byte_begin);
      EXPECT_EQ(a.byte_end, b.byte_end);
    }
  }
  ASSERT_EQ(real.files.size(), dry.metadata.files.size());
  for (const auto& [name, f] : real.files) {
    SCOPED_TRACE(name);
    const auto d = dry.metadata.files.find(name);
    ASSERT_NE(d, dry.metadata.files.end());
    EXPECT_EQ(f.bytes, d->second.bytes);
    EXPECT_EQ(f.header_bytes, d->second.header_bytes);
    const int rank = std::stoi(name.substr(5, 5));
    EXPECT_EQ(f.header_bytes, dry.header_bytes[static_cast<size_t>(rank)]);
  }
  size_t on_disk = 0;
  for (const auto& entry : fs::directory_iterator(dir)) on_disk += entry.is_regular_file() ? 1 : 0;
  EXPECT_EQ(static_cast<int64_t>(on_disk), dry.files);
  EXPECT_EQ(fs::file_size(fs::path(dir) / kMetadataFile), dry.metadata_bytes);
}

TEST(DrySave, PlansTheMetadataAndFilesOfARealSave) {
  for (const ShardingType type : AllShardingTypes())
    for (const std::string setup : {"adamw", "lion"})
      for (const c10::ScalarType dtype : {at::kFloat, at::kBFloat16})
        for (int dp = 1; dp <= 4; ++dp) {
          SCOPED_TRACE(std::string(type.name()) + " " + setup + " " + c10::toString(dtype) +
                       " dp " + std::to_string(dp));
          const DryModel model = SmallModel(setup, dtype);
          TempDir tmp("dry_save");
          const std::string dir = tmp.Sub("ckpt");
          RealSave(model, type, dp, dir);
          const CheckpointMetadata real = ReadMetadataFile((fs::path(dir) / kMetadataFile).string());
          const DrySave dry = PlanDrySave(model, type, dp);
          ExpectSameIndex(real, dry, dir);
          EXPECT_GT(dry.chunks, 0);
        }
}

TEST(DryLoad, PlansEveryPieceOfEveryRankAtAnotherDp) {
  for (const ShardingType type : AllShardingTypes())
    for (int dp_load = 1; dp_load <= 4; ++dp_load) {
      SCOPED_TRACE(std::string(type.name()) + " dp 3 -> " + std::to_string(dp_load));
      const DryModel model = SmallModel("adamw", at::kFloat);
      const DrySave saved = PlanDrySave(model, type, 3);
      const DryLoad load = PlanDryLoad(model, saved.metadata, dp_load);
      std::vector<BufferParamSpec> specs;
      for (size_t i = 0; i < model.params.size(); ++i)
        specs.push_back({static_cast<int>(i), model.params[i].Numel()});
      const BufferLayout layout = BufferLayout::Build(specs, dp_load, kBucketSize);
      int64_t pieces = 0;
      for (int r = 0; r < dp_load; ++r) pieces += static_cast<int64_t>(BufferPiecesOf(layout, r).size());
      const int64_t kinds = 1 + static_cast<int64_t>(model.StateNames().size());
      EXPECT_EQ(load.pieces, pieces * kinds);
      EXPECT_GE(load.chunk_reads, load.pieces);
    }
}

TEST(DryModel, CompositeSetupIsRefusedNamingIt) {
  DryModel model = SmallModel("adamw", at::kFloat);
  model.setup = OptimizerSetup::Defaults("muon");
  try {
    model.StateNames();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("whole-param"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("muon"), std::string::npos) << e.what();
  }
}

TEST(ChunksCovering, FindsExactlyTheChunksARangeTouches) {
  TensorRecord t;
  t.shape = {100};
  // [0, 10) [10, 40) [40, 70) [70, 100)
  for (const auto& [offset, numel] : {std::pair<int64_t, int64_t>{0, 10}, {10, 30}, {40, 30}, {70, 30}}) {
    ChunkRecord c;
    c.offset = offset;
    c.numel = numel;
    t.chunks.push_back(c);
  }
  const auto span = [&](int64_t b, int64_t n) {
    const ChunkSpan s = ChunksCovering(t, b, n);
    return std::make_pair(s.first, s.last);
  };
  EXPECT_EQ(span(0, 10), std::make_pair(size_t{0}, size_t{1}));
  EXPECT_EQ(span(0, 11), std::make_pair(size_t{0}, size_t{2}));
  EXPECT_EQ(span(9, 2), std::make_pair(size_t{0}, size_t{2}));
  EXPECT_EQ(span(10, 30), std::make_pair(size_t{1}, size_t{2}));
  EXPECT_EQ(span(39, 32), std::make_pair(size_t{1}, size_t{4}));
  EXPECT_EQ(span(99, 1), std::make_pair(size_t{3}, size_t{4}));
  EXPECT_EQ(span(0, 100), std::make_pair(size_t{0}, size_t{4}));
  EXPECT_EQ(ChunksCovering(t, 50, 0).Size(), 0u);
  // Any hint, right, wrong or past the end, gives the same span, and is
  // left at the span's first chunk.
  for (int64_t b = 0; b < 100; ++b)
    for (int64_t n = 1; b + n <= 100; n += 7)
      for (size_t h = 0; h < 6; ++h) {
        size_t hint = h;
        const ChunkSpan with = ChunksCovering(t, b, n, &hint), without = ChunksCovering(t, b, n);
        EXPECT_EQ(with.first, without.first) << b << " " << n << " hint " << h;
        EXPECT_EQ(with.last, without.last) << b << " " << n << " hint " << h;
        EXPECT_EQ(hint, with.first);
      }
}

}  // namespace
}  // namespace shardcheck
