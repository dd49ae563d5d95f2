#include "bench/scaling_model.h"

#include <string>

#include "spec/error.h"
#include "testing/oracle.h"

namespace shardcheck::bench {
namespace {

constexpr uint64_t kSeed = 20241203;
constexpr uint64_t kGradStep = 1;

ParamInfo Param(const std::string& name, std::vector<int64_t> shape,
                ParamRole role = ParamRole::kOther) {
  ParamInfo p;
  p.name = name;
  p.shape = std::move(shape);
  p.role = role;
  return p;
}

// One layer's params at hidden h: 12h^2 weights and 9h bias and norm values.
void AddLayer(ModelSpec& m, int layer, int64_t h) {
  const std::string at = "decoder.layers." + std::to_string(layer) + ".";
  m.params.push_back(Param(at + "input_layernorm.weight", {h}));
  m.params.push_back(Param(at + "self_attention.linear_qkv.weight", {3 * h, h}));
  m.params.push_back(Param(at + "self_attention.linear_qkv.bias", {3 * h}));
  m.params.push_back(Param(at + "self_attention.linear_proj.weight", {h, h}));
  m.params.push_back(Param(at + "mlp.linear_fc1.weight", {4 * h, h}));
  m.params.push_back(Param(at + "mlp.linear_fc1.bias", {4 * h}));
  m.params.push_back(Param(at + "mlp.linear_fc2.weight", {h, 4 * h}));
}

}  // namespace

ModelSpec ScalingModel(int64_t n) {
  if (n < (int64_t{1} << 20))
    throw Error("ScalingModel: " + std::to_string(n) + " params is below the 1M minimum");
  const int64_t h = n <= (int64_t{2} << 20) ? 128 : n <= (int64_t{32} << 20) ? 512 : 1024;
  const int64_t per_layer = 12 * h * h + 9 * h;
  const int layers = static_cast<int>(n * 6 / 10 / per_layer);
  const int64_t rest = n - layers * per_layer;  // embedding + output + final norm
  const int64_t vocab = (rest - h) / (2 * h);   // leaves at least h for the final norm
  ModelSpec m;
  m.name = "scaling-" + std::to_string(n);
  m.params.push_back(Param("embedding.word_embeddings.weight", {vocab, h}, ParamRole::kEmbedding));
  for (int l = 0; l < layers; ++l) AddLayer(m, l, h);
  m.params.push_back(Param("decoder.final_layernorm.weight", {rest - 2 * vocab * h}));
  m.params.push_back(Param("output_layer.weight", {vocab, h}, ParamRole::kOutput));
  return m;
}

std::vector<at::Tensor> ScalingParams(const ModelSpec& model) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < model.params.size(); ++i)
    out.push_back(InitialParam(kSeed, i, model.params[i].shape, at::kFloat));
  return out;
}

std::vector<at::Tensor> ScalingGrads(const ModelSpec& model) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < model.params.size(); ++i)
    out.push_back(GlobalGrad(kSeed, kGradStep, i, model.params[i].shape, /*micro_batches=*/1));
  return out;
}

}  // namespace shardcheck::bench
