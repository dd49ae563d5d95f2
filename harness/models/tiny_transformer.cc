#include "harness/models/tiny_transformer.h"

#include <ATen/core/Reduction.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "spec/error.h"

namespace shardcheck {

ModelSpec TinyTransformerSpec(const std::string& name, const TinyTransformerConfig& c) {
  ModelSpec m;
  m.name = name;
  auto add = [&](std::string n, std::vector<int64_t> shape, ParamRole role = ParamRole::kOther) {
    m.params.push_back({std::move(n), std::move(shape), role});
  };
  const int64_t h = c.hidden;
  add("embedding.word_embeddings.weight", {c.vocab, h}, ParamRole::kEmbedding);
  add("embedding.position_embeddings.weight", {c.seq, h}, ParamRole::kEmbedding);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "decoder.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {h});
    add(p + "input_layernorm.bias", {h});
    add(p + "self_attention.linear_qkv.weight", {3 * h, h});
    add(p + "self_attention.linear_qkv.bias", {3 * h});
    add(p + "self_attention.linear_proj.weight", {h, h});
    add(p + "self_attention.linear_proj.bias", {h});
    add(p + "pre_mlp_layernorm.weight", {h});
    add(p + "pre_mlp_layernorm.bias", {h});
    if (c.experts == 0) {
      add(p + "mlp.linear_fc1.weight", {c.ffn, h});
      add(p + "mlp.linear_fc1.bias", {c.ffn});
      add(p + "mlp.linear_fc2.weight", {h, c.ffn});
      add(p + "mlp.linear_fc2.bias", {h});
    } else {
      add(p + "mlp.router.weight", {c.experts, h});
      for (int64_t e = 0; e < c.experts; ++e) {
        const std::string x = p + "mlp.experts.local_experts." + std::to_string(e) + ".";
        add(x + "linear_fc1.weight", {c.expert_ffn, h});
        add(x + "linear_fc1.bias", {c.expert_ffn});
        add(x + "linear_fc2.weight", {h, c.expert_ffn});
        add(x + "linear_fc2.bias", {h});
      }
    }
  }
  add("decoder.final_layernorm.weight", {h});
  add("decoder.final_layernorm.bias", {h});
  add("output_layer.weight", {c.vocab, h}, ParamRole::kOutput);
  return m;
}

namespace {

// Hands out the params in registration order.
class ParamCursor {
 public:
  explicit ParamCursor(const std::vector<at::Tensor>& params) : params_(params) {}
  const at::Tensor& Next() {
    if (next_ >= params_.size()) throw Error("tiny transformer: too few params");
    return params_[next_++];
  }
  bool Done() const { return next_ == params_.size(); }

 private:
  const std::vector<at::Tensor>& params_;
  size_t next_ = 0;
};

at::Tensor LayerNorm(const TinyTransformerConfig& c, const at::Tensor& x, ParamCursor& ps) {
  const at::Tensor& w = ps.Next();
  const at::Tensor& b = ps.Next();
  return at::layer_norm(x, {c.hidden}, w, b, c.layernorm_eps);
}

at::Tensor Linear(const at::Tensor& x, ParamCursor& ps, bool bias = true) {
  const at::Tensor& w = ps.Next();
  if (!bias) return at::linear(x, w);
  const at::Tensor& b = ps.Next();
  return at::linear(x, w, b);
}

// fc2(gelu(fc1(x))) over the last dim.
at::Tensor Mlp(const at::Tensor& x, ParamCursor& ps) {
  at::Tensor y = at::gelu(Linear(x, ps));
  return Linear(y, ps);
}

// Causal multi-head self-attention with Megatron's fused qkv layout: the
// qkv output of each token is `heads` groups of [q, k, v], each head_dim wide.
at::Tensor Attention(const TinyTransformerConfig& c, const at::Tensor& x, ParamCursor& ps) {
  const int64_t b = x.size(0), t = x.size(1), hd = c.hidden / c.heads;
  at::Tensor qkv = Linear(x, ps).view({b, t, c.heads, 3 * hd});
  std::vector<at::Tensor> parts = qkv.split(hd, -1);
  at::Tensor q = parts[0].transpose(1, 2);  // (b, heads, t, hd)
  at::Tensor k = parts[1].transpose(1, 2);
  at::Tensor v = parts[2].transpose(1, 2);
  at::Tensor scores =
      at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hd)));
  at::Tensor future = at::ones({t, t}, x.options().dtype(at::kBool)).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  at::Tensor ctx = at::matmul(at::softmax(scores, -1), v);  // (b, heads, t, hd)
  ctx = ctx.transpose(1, 2).reshape({b, t, c.hidden});
  return Linear(ctx, ps);
}

// Top-k routed experts (Megatron's defaults: softmax over the top-k router
// logits, no aux loss, no capacity limit). Each expert runs on the tokens
// routed to it; their gated outputs are summed per token in expert order.
at::Tensor MixtureOfExperts(const TinyTransformerConfig& c, const at::Tensor& x, ParamCursor& ps) {
  constexpr int kParamsPerExpert = 4;  // fc1 weight, bias; fc2 weight, bias
  const auto sizes = x.sizes().vec();
  at::Tensor flat = x.reshape({-1, c.hidden});           // (tokens, hidden)
  at::Tensor logits = Linear(flat, ps, /*bias=*/false);  // (tokens, experts)
  at::Tensor top_logits, top_experts;
  std::tie(top_logits, top_experts) = at::topk(logits, c.topk, -1);
  at::Tensor gates = at::softmax(top_logits, -1);  // (tokens, topk)
  at::Tensor out = at::zeros_like(flat);
  for (int64_t e = 0; e < c.experts; ++e) {
    at::Tensor chosen = top_experts.eq(e);  // (tokens, topk); at most one true per row
    at::Tensor idx = chosen.any(-1).nonzero().squeeze(1);
    if (idx.numel() == 0) {
      for (int i = 0; i < kParamsPerExpert; ++i) ps.Next();  // no tokens: no output, no gradient
      continue;
    }
    at::Tensor gate = (gates * chosen).sum(-1).index_select(0, idx).unsqueeze(1);
    at::Tensor y = Mlp(flat.index_select(0, idx), ps) * gate;
    out = out.index_add(0, idx, y);
  }
  return out.view(sizes);
}

}  // namespace

at::Tensor TinyTransformerLoss(const TinyTransformerConfig& c,
                               const std::vector<at::Tensor>& params, const TokenBatch& batch) {
  ParamCursor ps(params);
  const int64_t t = batch.tokens.size(1);
  const at::Tensor& word = ps.Next();
  const at::Tensor& pos = ps.Next();
  at::Tensor x = at::embedding(word, batch.tokens) + pos.slice(0, 0, t);  // (b, t, hidden)
  for (int64_t l = 0; l < c.layers; ++l) {
    x = x + Attention(c, LayerNorm(c, x, ps), ps);
    at::Tensor h = LayerNorm(c, x, ps);
    x = x + (c.experts == 0 ? Mlp(h, ps) : MixtureOfExperts(c, h, ps));
  }
  x = LayerNorm(c, x, ps);
  at::Tensor logits = Linear(x, ps, /*bias=*/false);  // (b, t, vocab)
  if (!ps.Done()) throw Error("tiny transformer: too many params");
  return at::cross_entropy_loss(logits.reshape({-1, c.vocab}), batch.targets.reshape({-1}),
                                /*weight=*/{}, at::Reduction::Mean, kIgnoreIndex);
}

}  // namespace shardcheck
