#include "testing/model_spec.h"

#include <set>
#include <sstream>

#include "spec/error.h"

namespace shardcheck {

int64_t ModelSpec::Numel() const {
  int64_t n = 0;
  for (const auto& p : params) n += p.Numel();
  return n;
}

bool ModelSpec::HasMatrixParams() const {
  for (const auto& p : params)
    if (!GoesToScalarOptimizer(p)) return true;
  return false;
}

ModelSpec GptTinySpec() {
  constexpr int64_t kVocab = 128, kSeq = 32, kHidden = 64, kFfn = 256, kLayers = 2;
  ModelSpec m;
  m.name = "gpt-tiny";
  auto add = [&](std::string name, std::vector<int64_t> shape, ParamRole role = ParamRole::kOther) {
    m.params.push_back({std::move(name), std::move(shape), role});
  };
  add("embedding.word_embeddings.weight", {kVocab, kHidden}, ParamRole::kEmbedding);
  add("embedding.position_embeddings.weight", {kSeq, kHidden}, ParamRole::kEmbedding);
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = "decoder.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {kHidden});
    add(p + "input_layernorm.bias", {kHidden});
    add(p + "self_attention.linear_qkv.weight", {3 * kHidden, kHidden});
    add(p + "self_attention.linear_qkv.bias", {3 * kHidden});
    add(p + "self_attention.linear_proj.weight", {kHidden, kHidden});
    add(p + "self_attention.linear_proj.bias", {kHidden});
    add(p + "pre_mlp_layernorm.weight", {kHidden});
    add(p + "pre_mlp_layernorm.bias", {kHidden});
    add(p + "mlp.linear_fc1.weight", {kFfn, kHidden});
    add(p + "mlp.linear_fc1.bias", {kFfn});
    add(p + "mlp.linear_fc2.weight", {kHidden, kFfn});
    add(p + "mlp.linear_fc2.bias", {kHidden});
  }
  add("decoder.final_layernorm.weight", {kHidden});
  add("decoder.final_layernorm.bias", {kHidden});
  add("output_layer.weight", {kVocab, kHidden}, ParamRole::kOutput);
  return m;
}

ModelSpec ParseShapes(const std::string& list) {
  ModelSpec m;
  m.name = "shapes:" + list;
  std::stringstream items(list);
  std::string item;
  std::set<std::string> names;
  int index = 0;
  while (std::getline(items, item, ',')) {
    const std::string where = "--shapes item " + std::to_string(index) + " '" + item + "'";
    ParamInfo p;
    std::string dims = item;
    if (auto eq = dims.find('='); eq != std::string::npos) {
      p.name = dims.substr(0, eq);
      dims = dims.substr(eq + 1);
      if (p.name.empty()) throw Error(where + ": empty name before '='");
    } else {
      p.name = "p" + std::to_string(index);
    }
    if (auto colon = dims.find(':'); colon != std::string::npos) {
      try {
        p.role = ParseRole(dims.substr(colon + 1));
      } catch (const Error& e) {
        throw Error(where + ": " + e.what());
      }
      dims = dims.substr(0, colon);
    }
    std::stringstream ds(dims);
    std::string d;
    while (std::getline(ds, d, 'x')) {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(d, &used);
      } catch (...) {
        used = 0;
      }
      if (used != d.size() || d.empty() || v <= 0 || v > (1ll << 31))
        throw Error(where + ": dimension '" + d + "' is not a positive integer");
      p.shape.push_back(v);
    }
    if (p.shape.empty()) throw Error(where + ": no dimensions");
    if (!names.insert(p.name).second) throw Error(where + ": duplicate param name " + p.name);
    m.params.push_back(std::move(p));
    ++index;
  }
  if (m.params.empty()) throw Error("--shapes: empty list");
  return m;
}

ModelSpec MixedSmallSpec() {
  ModelSpec m = ParseShapes(
      "emb=96x32:embedding,pos=16x32:embedding,qkv=96x32,qkv_b=96,proj=32x32,proj_b=32,tiny=7,"
      "norm=32,fc1=128x32,fc1_b=128,fc2=32x128,fc2_b=32,head=96x32:output");
  m.name = "mixed-small";
  return m;
}

ModelSpec ModelByName(const std::string& name) {
  if (name == "gpt-tiny") return GptTinySpec();
  if (name == "mixed-small") return MixedSmallSpec();
  throw Error("unknown oracle model '" + name +
              "' (expected gpt-tiny or mixed-small, or give --shapes)");
}

ModelSpec OracleModelByName(const std::string& name) {
  const std::string sparse = "sparse-", shapes = "shapes:";
  const bool masked = name.rfind(sparse, 0) == 0;
  const std::string base = masked ? name.substr(sparse.size()) : name;
  ModelSpec m;
  if (base.rfind(shapes, 0) == 0) {
    m = ParseShapes(base.substr(shapes.size()));
  } else if (base == "gpt-tiny" || base == "mixed-small") {
    m = ModelByName(base);
  } else {
    throw Error("unknown oracle model '" + name +
                "' (expected gpt-tiny, mixed-small, shapes:<list>, or one of those after "
                "sparse-)");
  }
  if (masked) {
    m.name = sparse + m.name;
    m.zero_mask = true;
  }
  return m;
}

}  // namespace shardcheck
