// A distributed run's result as JSON (docs/results-schema.md): what a rank
// process of a cell reports and `shardcheck train` writes, and the layout
// and memory figures a cell's result.json shows.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "harness/cell/dist_train.h"

namespace shardcheck {

// Buckets, numel_unpadded, shard sizes, params cut across ranks, smallest
// param, layer-wise owners: what a reviewer needs to see the case covered.
nlohmann::ordered_json LayoutJson(const DistributedOptimizer& opt);

// Per-rank memory figures: [{rank, owned_elements, total_bytes, entries: [{child, key, elements,
// bytes}]}].
nlohmann::ordered_json MemoryJson(const std::vector<MemoryFigures>& memory);

// result.json: resolved config, dp, per-step series, verdict, first
// mismatch, per-rank memory figures.
nlohmann::ordered_json TrainResultJson(const TrainOptions& opts, int dp, const TrainResult& r);

// A TrainResult read back from its result.json (what a rank process of a
// cell reports): everything but final_state. Throws Error on a malformed
// file.
TrainResult TrainResultFromJson(const nlohmann::ordered_json& j);

}  // namespace shardcheck
