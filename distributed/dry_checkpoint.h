// The checkpoint engine without data (docs/performance.md, "Cost at
// scale"): for a param list at any DP size, the buffer layout, what every
// rank of a save of each sharding type writes, their safetensors headers,
// the metadata.json rank 0 commits, and the reads a load at another DP
// size plans. It runs the save's and load's own planning steps
// (ShardingFormat::PlanChunks and Locate, LayOutSafetensors, RankFileText,
// AddRankFiles, ChunksCovering) and skips only the tensors, the files and
// the checksums (recorded as zeros), so its costs are the engine's.
// distributed/dry_save_test.cc checks it against real saves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/checkpoint_format.h"
#include "distributed/layout.h"
#include "distributed/sharding_type.h"
#include "spec/config.h"
#include "spec/params.h"

namespace shardcheck {

// What a dry save plans for: the params (registration order; all in the
// buffer, so the setup must be elementwise), the setup, the model dtype and
// the bucket size (elements; 0: one bucket).
struct DryModel {
  std::vector<ParamInfo> params;
  OptimizerSetup setup;
  c10::ScalarType model_dtype = c10::kBFloat16;
  int64_t bucket_size = 0;

  // The setup's state keys (its one child's schema). Throws Error for a
  // composite setup, whose whole-param child the dry mode does not plan.
  std::vector<std::string> StateNames() const;
};

// What a save at one DP size would write, and what it cost to plan.
struct DrySave {
  CheckpointMetadata metadata;          // as rank 0 would commit it
  uint64_t metadata_bytes = 0;          // metadata.json's size
  std::vector<uint64_t> record_bytes;   // per rank: its RankFileText text (0: writes nothing)
  std::vector<uint64_t> header_bytes;   // per rank: its file's 8 + N header bytes (0: none)
  int64_t files = 0;                    // rank files + metadata.json
  int64_t chunks = 0;                   // chunk records in metadata.json
  double layout_seconds = 0.0;          // BufferLayout::Build, one rank's
  double plan_seconds = 0.0;            // every rank's chunks, headers and records
  double metadata_seconds = 0.0;        // rank 0: AddRankFiles and metadata.json's text
};

// Plans a save of `model` with `type` at `dp`. Throws Error on a bad model
// (as the layout and the setup do) or dp < 1.
DrySave PlanDrySave(const DryModel& model, ShardingType type, int dp);

// The reads a load of `saved` at `dp` plans (every rank): each buffer piece
// and kind located in the saved tensors, and the chunks its range touches.
struct DryLoad {
  int64_t pieces = 0;       // (piece, kind) ranges read
  int64_t chunk_reads = 0;  // chunks they touch
  double seconds = 0.0;     // planning every rank's reads
  double max_rank_seconds = 0.0;  // the slowest rank's part of it
};

// Plans a load of `saved` (a DrySave's metadata of `model`) at `dp`.
// Throws Error naming the key when a planned range is not fully covered.
DryLoad PlanDryLoad(const DryModel& model, const CheckpointMetadata& saved, int dp);

}  // namespace shardcheck
