#include "harness/scale/scale_presets.h"

#include <fstream>
#include <set>

#include "spec/error.h"
#include "testing/model_spec.h"

namespace shardcheck {

namespace {

using Shape = std::vector<int64_t>;

struct Builder {
  std::vector<ParamInfo> params;
  void Add(const std::string& name, Shape shape, ParamRole role = ParamRole::kOther) {
    params.push_back({name, std::move(shape), role});
  }
};

std::vector<ParamInfo> Gpt175b(int layers) {
  const int64_t h = 12288, ffn = 4 * h, vocab = 51200, positions = 2048;
  Builder b;
  b.Add("embedding.word_embeddings.weight", {vocab, h}, ParamRole::kEmbedding);
  b.Add("embedding.position_embeddings.weight", {positions, h}, ParamRole::kEmbedding);
  for (int l = 0; l < layers; ++l) {
    const std::string p = "decoder.layers." + std::to_string(l) + ".";
    b.Add(p + "input_layernorm.weight", {h});
    b.Add(p + "input_layernorm.bias", {h});
    b.Add(p + "self_attention.linear_qkv.weight", {3 * h, h});
    b.Add(p + "self_attention.linear_qkv.bias", {3 * h});
    b.Add(p + "self_attention.linear_proj.weight", {h, h});
    b.Add(p + "self_attention.linear_proj.bias", {h});
    b.Add(p + "pre_mlp_layernorm.weight", {h});
    b.Add(p + "pre_mlp_layernorm.bias", {h});
    b.Add(p + "mlp.linear_fc1.weight", {ffn, h});
    b.Add(p + "mlp.linear_fc1.bias", {ffn});
    b.Add(p + "mlp.linear_fc2.weight", {h, ffn});
    b.Add(p + "mlp.linear_fc2.bias", {h});
  }
  b.Add("decoder.final_layernorm.weight", {h});
  b.Add("decoder.final_layernorm.bias", {h});
  return b.params;
}

// One gated MLP (gate, up, down) under `p`.
void AddGatedMlp(Builder& b, const std::string& p, int64_t h, int64_t ffn) {
  b.Add(p + "gate_proj.weight", {ffn, h});
  b.Add(p + "up_proj.weight", {ffn, h});
  b.Add(p + "down_proj.weight", {h, ffn});
}

std::vector<ParamInfo> DeepSeekV3Moe(int layers) {
  const int64_t h = 7168, vocab = 129280, heads = 128, q_rank = 1536, kv_rank = 512;
  const int64_t qk_nope = 128, qk_rope = 64, v_head = 128, dense_ffn = 18432, expert_ffn = 2048;
  const int64_t experts = 256;
  const int dense_layers = layers > 3 ? 3 : layers;
  Builder b;
  b.Add("embedding.word_embeddings.weight", {vocab, h}, ParamRole::kEmbedding);
  for (int l = 0; l < layers; ++l) {
    const std::string p = "decoder.layers." + std::to_string(l) + ".";
    b.Add(p + "input_layernorm.weight", {h});
    b.Add(p + "self_attention.linear_q_down_proj.weight", {q_rank, h});
    b.Add(p + "self_attention.q_layernorm.weight", {q_rank});
    b.Add(p + "self_attention.linear_q_up_proj.weight", {heads * (qk_nope + qk_rope), q_rank});
    b.Add(p + "self_attention.linear_kv_down_proj.weight", {kv_rank + qk_rope, h});
    b.Add(p + "self_attention.kv_layernorm.weight", {kv_rank});
    b.Add(p + "self_attention.linear_kv_up_proj.weight", {heads * (qk_nope + v_head), kv_rank});
    b.Add(p + "self_attention.linear_proj.weight", {h, heads * v_head});
    b.Add(p + "pre_mlp_layernorm.weight", {h});
    if (l < dense_layers) {
      AddGatedMlp(b, p + "mlp.", h, dense_ffn);
      continue;
    }
    b.Add(p + "mlp.router.weight", {experts, h});
    b.Add(p + "mlp.router.expert_bias", {experts});
    for (int64_t e = 0; e < experts; ++e)
      AddGatedMlp(b, p + "mlp.experts.local_experts." + std::to_string(e) + ".", h, expert_ffn);
    AddGatedMlp(b, p + "mlp.shared_experts.", h, expert_ffn);
  }
  b.Add("decoder.final_layernorm.weight", {h});
  b.Add("output_layer.weight", {vocab, h}, ParamRole::kOutput);
  return b.params;
}

}  // namespace

std::string ScalePresetNames() { return "gpt-175b, deepseek-v3-moe"; }

std::vector<ParamInfo> ScalePresetParams(const std::string& name, int layers) {
  if (layers < 0) throw Error("preset " + name + ": layers must be >= 0, got " + std::to_string(layers));
  if (name == "gpt-175b") return Gpt175b(layers == 0 ? 96 : layers);
  if (name == "deepseek-v3-moe") return DeepSeekV3Moe(layers == 0 ? 61 : layers);
  throw Error("unknown preset '" + name + "' (expected one of " + ScalePresetNames() + ")");
}

std::vector<ParamInfo> ReadShapesFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open shapes file " + path);
  std::vector<ParamInfo> params;
  std::set<std::string> names;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const size_t last = line.find_last_not_of(" \t\r");
    const std::string item = line.substr(first, last - first + 1);
    try {
      ParamInfo p = ParseShapes(item).params.at(0);
      // An unnamed param is named by its place in the file.
      if (item.find('=') == std::string::npos) p.name = "p" + std::to_string(params.size());
      if (!names.insert(p.name).second) throw Error("param " + p.name + " is listed twice");
      params.push_back(std::move(p));
    } catch (const Error& e) {
      throw Error(path + ":" + std::to_string(n) + ": " + e.what());
    }
  }
  if (params.empty()) throw Error("shapes file " + path + " lists no params");
  return params;
}

}  // namespace shardcheck
