// Param lists of real-scale models for the dry mode (`shardcheck dry`,
// docs/performance.md "Cost at scale"), with Megatron-LM's param names:
//
//   gpt-175b         GPT-3 175B: 96 layers, hidden 12288, ffn 49152, vocab
//                    51200, 2048 positions; 12 tensors per layer, 1,156 in
//                    all, 174.6B elements.
//   deepseek-v3-moe  DeepSeek-V3-like: 61 layers, hidden 7168, MLA attention
//                    (q rank 1536, kv rank 512, 128 heads), the first 3
//                    layers dense (ffn 18432), then 256 routed experts and
//                    one shared expert of ffn 2048 with gate, up and down
//                    projections apart, as its released checkpoint keeps
//                    them; 45,395 tensors, 671B elements.
//
// `layers` scales a preset (0: its own count); the MoE preset keeps its 3
// dense layers while there are more than 3.
#pragma once

#include <string>
#include <vector>

#include "spec/params.h"

namespace shardcheck {

// The params of preset `name` with `layers` layers, registration order.
// Throws Error naming the preset and listing the names, or on layers < 0.
std::vector<ParamInfo> ScalePresetParams(const std::string& name, int layers = 0);

// "gpt-175b, deepseek-v3-moe".
std::string ScalePresetNames();

// A shapes file: one param per line, `[name=]DIMS[:ROLE]` as the
// "shapes:" model takes them (docs/models.md), DIMS as NxMx...; blank lines
// and lines starting with # are skipped. Throws Error naming the file and
// line.
std::vector<ParamInfo> ReadShapesFile(const std::string& path);

}  // namespace shardcheck
