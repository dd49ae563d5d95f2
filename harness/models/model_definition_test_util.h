// A plain re-implementation of the tiny models (gpt-tiny, moe-tiny) written
// from their definition in docs/models.md alone, for the tests that hold the
// models to that definition (model_definition_test.cc): the definitions as
// numbers, the params by name, and a forward in plain ATen ops that autograd
// differentiates. It takes nothing from the project's model code but the
// param tensors and their names.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/models/synthetic_data.h"
#include "harness/models/tiny_model.h"
#include "testing/oracle.h"

namespace shardcheck {
namespace model_definition {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------
// The definitions, transcribed from docs/models.md (tables "gpt-tiny",
// "moe-tiny", "Synthetic data: the repeat task"), not from the code.

struct ModelDefinition {
  int64_t vocab = 128;
  int64_t positions = 32;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t ffn = 256;    // dense MLP width (experts == 0)
  int64_t experts = 0;  // > 0: a routed mixture of experts replaces each MLP
  int64_t topk = 0;     // experts per token
  int64_t expert_ffn = 0;
  double layernorm_eps = 1e-5;
  // The repeat task: sequences per micro-batch, tokens per sequence, period.
  int64_t batch = 4;
  int64_t seq = 32;
  int64_t period = 8;

  int64_t HeadDim() const { return hidden / heads; }
};

inline std::optional<ModelDefinition> DefinitionOf(const std::string& name) {
  ModelDefinition d;
  if (name == "gpt-tiny") return d;
  if (name == "moe-tiny") {
    d.experts = 4;
    d.topk = 2;
    d.expert_ffn = 128;
    return d;
  }
  return std::nullopt;  // a new model needs its definition here and in the doc
}

// ---------------------------------------------------------------------------
// Params by name, as the re-implementation reads them.

// Hands out a model's params by their docs/models.md names, checking each
// shape, and remembers which were read: a param the definition never reads
// is a param the model has and the doc does not define.
class NamedParams {
 public:
  NamedParams(const ModelSpec& spec, const std::vector<at::Tensor>& values) {
    for (size_t i = 0; i < spec.params.size(); ++i) by_name_[spec.params[i].name] = values[i];
  }

  const at::Tensor& Get(const std::string& name, const std::vector<int64_t>& shape) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) throw std::runtime_error("the model has no param " + name);
    if (it->second.sizes() != at::IntArrayRef(shape))
      throw std::runtime_error("param " + name + " has shape " + ShapeOf(it->second));
    read_.insert(name);
    return it->second;
  }

  std::vector<std::string> Unread() const {
    std::vector<std::string> out;
    for (const auto& kv : by_name_)
      if (!read_.count(kv.first)) out.push_back(kv.first);
    return out;
  }

 private:
  static std::string ShapeOf(const at::Tensor& t) {
    std::string s;
    for (int64_t n : t.sizes()) s += (s.empty() ? "" : "x") + std::to_string(n);
    return s;
  }

  std::map<std::string, at::Tensor> by_name_;
  std::set<std::string> read_;
};

// ---------------------------------------------------------------------------
// The plain re-implementation of docs/models.md, in fp64 ATen ops.

// y = x Wᵀ (+ b), W stored (out, in).
inline at::Tensor RefLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}) {
  at::Tensor y = at::matmul(x, w.t());
  return b.defined() ? y + b : y;
}

// LayerNorm over the hidden dim: biased variance, eps inside the root.
inline at::Tensor RefLayerNorm(const ModelDefinition& d, NamedParams& ps, const std::string& name,
                        const at::Tensor& x) {
  at::Tensor centered = x - x.mean(-1, /*keepdim=*/true);
  at::Tensor var = (centered * centered).mean(-1, /*keepdim=*/true);
  return centered / at::sqrt(var + d.layernorm_eps) * ps.Get(name + ".weight", {d.hidden}) +
         ps.Get(name + ".bias", {d.hidden});
}

// Exact GELU: x Φ(x).
inline at::Tensor RefGelu(const at::Tensor& x) {
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  return 0.5 * x * (1.0 + at::erf(x * kInvSqrt2));
}

// fc2(gelu(fc1(x))) with biases; `prefix` ends in '.'.
inline at::Tensor RefMlp(const ModelDefinition& d, NamedParams& ps, const std::string& prefix,
                  const at::Tensor& x, int64_t width) {
  at::Tensor h = RefLinear(x, ps.Get(prefix + "linear_fc1.weight", {width, d.hidden}),
                           ps.Get(prefix + "linear_fc1.bias", {width}));
  return RefLinear(RefGelu(h), ps.Get(prefix + "linear_fc2.weight", {d.hidden, width}),
                   ps.Get(prefix + "linear_fc2.bias", {d.hidden}));
}

// Causal self-attention, one head at a time. Head h reads the fused qkv
// output's columns [3·hd·h, 3·hd·h + hd) as q, the next hd as k, the next hd
// as v; query i sees keys j <= i; the heads' outputs are concatenated in head
// order before linear_proj.
inline at::Tensor RefAttention(const ModelDefinition& d, NamedParams& ps, const std::string& prefix,
                        const at::Tensor& x) {
  const int64_t t = x.size(1), hd = d.HeadDim();
  at::Tensor qkv = RefLinear(x, ps.Get(prefix + "linear_qkv.weight", {3 * d.hidden, d.hidden}),
                             ps.Get(prefix + "linear_qkv.bias", {3 * d.hidden}));
  at::Tensor index = at::arange(t, at::kLong);
  at::Tensor key_after_query = index.unsqueeze(0) > index.unsqueeze(1);  // [i][j]: j > i
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < d.heads; ++h) {
    at::Tensor q = qkv.narrow(-1, 3 * hd * h, hd);
    at::Tensor k = qkv.narrow(-1, 3 * hd * h + hd, hd);
    at::Tensor v = qkv.narrow(-1, 3 * hd * h + 2 * hd, hd);
    at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
    at::Tensor probs = at::softmax(scores.masked_fill(key_after_query, -kInf), -1);
    heads.push_back(at::matmul(probs, v));
  }
  return RefLinear(at::cat(heads, -1), ps.Get(prefix + "linear_proj.weight", {d.hidden, d.hidden}),
                   ps.Get(prefix + "linear_proj.bias", {d.hidden}));
}

// The doc's top-k, by plain counting: expert e is chosen for a token when
// fewer than k experts have a larger router logit. (tokens, experts) bool.
inline at::Tensor TopKByCounting(const at::Tensor& router_logits, int64_t k) {
  // larger[n][e][f] = logit[n][f] > logit[n][e]
  at::Tensor larger = router_logits.unsqueeze(1) > router_logits.unsqueeze(2);
  return larger.sum(-1) < k;
}

// Routed experts, written densely: every expert runs on every token and is
// weighted by its gate, 0 for the experts a token is not routed to. Gates:
// softmax over the chosen experts' router logits. Appends the router logits
// of the layer to `router_logits` when given.
inline at::Tensor RefMixtureOfExperts(const ModelDefinition& d, NamedParams& ps, const std::string& prefix,
                               const at::Tensor& x, std::vector<at::Tensor>* router_logits) {
  at::Tensor flat = x.reshape({-1, d.hidden});
  at::Tensor logits = RefLinear(flat, ps.Get(prefix + "router.weight", {d.experts, d.hidden}));
  if (router_logits) router_logits->push_back(logits.detach());
  at::Tensor chosen = TopKByCounting(logits.detach(), d.topk);
  at::Tensor gates = at::softmax(logits.masked_fill(chosen.logical_not(), -kInf), -1);
  at::Tensor out = at::zeros_like(flat);
  for (int64_t e = 0; e < d.experts; ++e) {
    const std::string expert = prefix + "experts.local_experts." + std::to_string(e) + ".";
    out = out + gates.narrow(1, e, 1) * RefMlp(d, ps, expert, flat, d.expert_ffn);
  }
  return out.view(x.sizes());
}

// Logits (batch, seq, vocab) of `tokens` (batch, seq): pre-LN decoder layers
// on word + position embeddings, a final LayerNorm, the untied output head.
inline at::Tensor RefLogits(const ModelDefinition& d, NamedParams& ps, const at::Tensor& tokens,
                     std::vector<at::Tensor>* router_logits = nullptr) {
  const int64_t b = tokens.size(0), t = tokens.size(1);
  const at::Tensor& word = ps.Get("embedding.word_embeddings.weight", {d.vocab, d.hidden});
  const at::Tensor& pos = ps.Get("embedding.position_embeddings.weight", {d.positions, d.hidden});
  at::Tensor x =
      word.index_select(0, tokens.reshape({-1})).view({b, t, d.hidden}) + pos.narrow(0, 0, t);
  for (int64_t l = 0; l < d.layers; ++l) {
    const std::string p = "decoder.layers." + std::to_string(l) + ".";
    x = x +
        RefAttention(d, ps, p + "self_attention.", RefLayerNorm(d, ps, p + "input_layernorm", x));
    at::Tensor h = RefLayerNorm(d, ps, p + "pre_mlp_layernorm", x);
    x = x + (d.experts == 0 ? RefMlp(d, ps, p + "mlp.", h, d.ffn)
                            : RefMixtureOfExperts(d, ps, p + "mlp.", h, router_logits));
  }
  x = RefLayerNorm(d, ps, "decoder.final_layernorm", x);
  return RefLinear(x, ps.Get("output_layer.weight", {d.vocab, d.hidden}));
}

// Mean over the scored targets of logsumexp(z) - z[target].
inline at::Tensor RefMeanCrossEntropy(const at::Tensor& logits, const at::Tensor& targets) {
  at::Tensor flat = logits.reshape({-1, logits.size(-1)});
  at::Tensor scored = targets.reshape({-1}).ne(kIgnoreIndex).nonzero().squeeze(1);
  at::Tensor z = flat.index_select(0, scored);
  at::Tensor target = targets.reshape({-1}).index_select(0, scored);
  return (z.logsumexp(-1) - z.gather(1, target.unsqueeze(1)).squeeze(1)).mean();
}

// Micro-batch `mb` of step `step` of the repeat task, by the doc's formula:
// s[t] = a[b][t mod period], the input s[0..seq), the target of position t
// s[t+1], scored when t >= period - 1.
inline TokenBatch RefRepeatBatch(const ModelDefinition& d, uint64_t seed, int64_t step, int mb) {
  const uint64_t key = SplitMix64(
      SplitMix64(SplitMix64(seed ^ 0xDA7A5EEDDA7A5EEDull) ^ static_cast<uint64_t>(step)) ^
      static_cast<uint64_t>(mb));
  TokenBatch out{at::empty({d.batch, d.seq}, at::kLong), at::empty({d.batch, d.seq}, at::kLong)};
  auto tokens = out.tokens.accessor<int64_t, 2>();
  auto targets = out.targets.accessor<int64_t, 2>();
  for (int64_t b = 0; b < d.batch; ++b) {
    auto s = [&](int64_t t) {
      const uint64_t j = static_cast<uint64_t>(d.period * b + t % d.period);
      return static_cast<int64_t>(((SplitMix64(key ^ j) >> 32) * d.vocab) >> 32);
    };
    for (int64_t t = 0; t < d.seq; ++t) {
      tokens[b][t] = s(t);
      targets[b][t] = t >= d.period - 1 ? s(t + 1) : kIgnoreIndex;
    }
  }
  return out;
}

struct LossAndGrads {
  double loss = 0;
  std::vector<at::Tensor> grads;  // one per param of the spec, in the compute dtype
};

// Loss and autograd gradient of the re-implementation at `params` (cast to fp64).
inline LossAndGrads RefLossAndGrad(const ModelDefinition& d, const ModelSpec& spec,
                            const std::vector<at::Tensor>& params, const TokenBatch& batch) {
  at::AutoGradMode grad_on(true);
  std::vector<at::Tensor> leaves;
  for (const at::Tensor& p : params)
    leaves.push_back(p.detach().to(at::kDouble).clone().requires_grad_(true));
  NamedParams ps(spec, leaves);
  at::Tensor loss = RefMeanCrossEntropy(RefLogits(d, ps, batch.tokens), batch.targets);
  for (const std::string& name : ps.Unread()) ADD_FAILURE() << "docs/models.md never uses " << name;
  loss.backward();
  LossAndGrads out;
  out.loss = loss.item<double>();
  for (const at::Tensor& leaf : leaves)
    out.grads.push_back(leaf.grad().defined() ? leaf.grad() : at::zeros_like(leaf));
  return out;
}

}  // namespace model_definition
}  // namespace shardcheck
