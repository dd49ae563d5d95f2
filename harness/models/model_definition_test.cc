// Checks each tiny model (gpt-tiny, moe-tiny: every name TinyModelNames()
// gives) against its DEFINITION in docs/models.md, not against its own code.
//
// The reference optimizer and the optimizer under test train the same model,
// so a model bug (a causal mask that lets a token see the next one, a
// dropped residual, the wrong attention scale, a router that picks the wrong
// experts) is invisible to their comparison: both sides see the same wrong
// gradients. These tests hold the model to the doc instead:
//
//   - causality: tokens after position t never touch an output at <= t (bit
//     for bit), and every token at <= t does reach the output at t;
//   - gradients and loss: equal to autograd of a plain re-implementation
//     written from docs/models.md alone (the Ref* functions below; they take
//     only the param tensors and their names from the project's model);
//   - MoE routing: each token goes to the top-k experts of its router logits,
//     with the per-expert load counted and recomputed;
//   - the loss at initialisation is near ln(vocab).
//
// Causality and routing need arbitrary token batches and per-position
// targets, which the public TinyModel interface (the repeat task) does not
// take, so those two call TinyTransformerLoss with the model's config; a
// helper first checks that this config is the public model's (same spec,
// same loss bits).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/models/synthetic_data.h"
#include "harness/models/tiny_model.h"
#include "harness/models/tiny_transformer.h"
#include "harness/models/model_definition_test_util.h"
#include "testing/oracle.h"

namespace shardcheck {
namespace {

using namespace model_definition;  // NOLINT: the re-implementation, by name

// ---------------------------------------------------------------------------
// Params and the implementation's entry point.

// Generic params, not the init: every weight, bias and norm param random
// (2-D weights with std 1/sqrt(fan-in), embeddings std 1, norm weights
// 1 ± 0.2, biases std 0.1), so that an ignored, swapped or misplaced bias or
// norm param shows and attention and routing are far from uniform.
std::vector<at::Tensor> GenericParams(const ModelSpec& spec, uint64_t seed, c10::ScalarType dtype) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  std::vector<at::Tensor> out;
  for (const ParamInfo& p : spec.params) {
    at::Tensor n = at::randn(p.shape, gen, at::TensorOptions().dtype(at::kDouble));
    const bool norm_weight = p.shape.size() == 1 && !p.IsBias();
    double std = 0.1, mean = 0.0;
    if (p.role == ParamRole::kEmbedding) {
      std = 1.0;
    } else if (p.shape.size() == 2) {
      std = 1.0 / std::sqrt(static_cast<double>(p.shape[1]));
    } else if (norm_weight) {
      std = 0.2;
      mean = 1.0;
    }
    out.push_back((n * std + mean).to(dtype).contiguous());
  }
  return out;
}

TinyTransformerConfig ImplConfigOf(const ModelDefinition& d) {
  TinyTransformerConfig c;
  c.vocab = d.vocab;
  c.seq = d.positions;
  c.hidden = d.hidden;
  c.heads = d.heads;
  c.layers = d.layers;
  c.ffn = d.ffn;
  c.experts = d.experts;
  c.topk = d.topk;
  c.expert_ffn = d.expert_ffn;
  c.layernorm_eps = d.layernorm_eps;
  return c;
}

// TinyTransformerLoss with ImplConfigOf(d) is the public model `name`: the
// same spec and, on the model's own batch, the same loss bits.
void ExpectImplConfigIsTheModel(const std::string& name, const ModelDefinition& d) {
  auto model = MakeTinyModel(name);
  const TinyTransformerConfig cfg = ImplConfigOf(d);
  const ModelSpec spec = TinyTransformerSpec(name, cfg);
  ASSERT_EQ(spec.params.size(), model->spec().params.size());
  for (size_t i = 0; i < spec.params.size(); ++i) {
    EXPECT_EQ(spec.params[i].name, model->spec().params[i].name);
    EXPECT_EQ(spec.params[i].shape, model->spec().params[i].shape) << spec.params[i].name;
  }
  const std::vector<at::Tensor> params = GenericParams(spec, 5, at::kFloat);
  RepeatTask task;
  task.batch = d.batch;
  task.seq = d.seq;
  task.vocab = d.vocab;
  task.period = d.period;
  at::NoGradGuard no_grad;
  const double impl =
      TinyTransformerLoss(cfg, params, RepeatTaskBatch(task, 5, 2, 1)).item<double>();
  EXPECT_EQ(impl, model->Loss(params, 5, 2, 1)) << name << ": the config is not the model's";
}

// The implementation's loss on `batch` and its gradient of every param, in
// the params' dtype (fp32 runs as the optimizers' models do).
LossAndGrads ImplLossAndGrad(const TinyTransformerConfig& cfg,
                             const std::vector<at::Tensor>& params, const TokenBatch& batch) {
  at::AutoGradMode grad_on(true);
  std::vector<at::Tensor> leaves;
  for (const at::Tensor& p : params) leaves.push_back(p.detach().clone().requires_grad_(true));
  at::Tensor loss = TinyTransformerLoss(cfg, leaves, batch);
  loss.backward();
  LossAndGrads out;
  out.loss = loss.item<double>();
  for (const at::Tensor& leaf : leaves)
    out.grads.push_back(leaf.grad().defined() ? leaf.grad() : at::zeros_like(leaf));
  return out;
}

size_t IndexOf(const ModelSpec& spec, const std::string& name) {
  for (size_t i = 0; i < spec.params.size(); ++i)
    if (spec.params[i].name == name) return i;
  throw std::runtime_error("no param " + name);
}

// Random tokens (batch, seq), a pure function of `key`.
at::Tensor RandomTokens(int64_t batch, int64_t seq, int64_t vocab, uint64_t key) {
  at::Tensor out = at::empty({batch, seq}, at::kLong);
  int64_t* p = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < batch * seq; ++i)
    p[i] = static_cast<int64_t>(SplitMix64(key ^ static_cast<uint64_t>(i)) % vocab);
  return out;
}

class ModelDefinitionTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    std::optional<ModelDefinition> d = DefinitionOf(GetParam());
    ASSERT_TRUE(d) << GetParam() << " has no definition in this test (add docs/models.md's)";
    def_ = *d;
  }
  ModelDefinition def_;
};

// ---------------------------------------------------------------------------
// 1. Causality.

// What position t outputs, seen through the loss (the model returns no
// logits): with only position t of each sequence scored, against targets
// that do not depend on the tokens, the loss -log_softmax(logits_t)[target]
// and the gradient of output_layer.weight, (softmax(logits_t) - onehot) ⊗
// LN(x_t) summed over the sequences. The gradient holds every logit of
// position t (through the softmax) and the final hidden state, so equal
// observations mean (bar a coincidence in 8192 values) equal logits.
struct PositionOutput {
  double loss = 0;
  at::Tensor output_grad;

  bool BitwiseEqual(const PositionOutput& o) const {
    return loss == o.loss && at::equal(output_grad, o.output_grad);
  }
};

// Observes the implementation (fp32, generic params) at one position.
class PositionProbe {
 public:
  PositionProbe(const std::string& name, const ModelDefinition& d)
      : cfg_(ImplConfigOf(d)),
        spec_(TinyTransformerSpec(name, cfg_)),
        params_(GenericParams(spec_, 11, at::kFloat)),
        output_(IndexOf(spec_, "output_layer.weight")) {}

  PositionOutput At(const at::Tensor& tokens, int64_t t) const {
    TokenBatch batch{tokens, at::full_like(tokens, kIgnoreIndex)};
    for (int64_t b = 0; b < tokens.size(0); ++b)
      batch.targets[b][t].fill_((7 * t + 3 * b + 1) % cfg_.vocab);
    LossAndGrads r = ImplLossAndGrad(cfg_, params_, batch);
    return {r.loss, r.grads[output_]};
  }

 private:
  TinyTransformerConfig cfg_;
  ModelSpec spec_;
  std::vector<at::Tensor> params_;
  size_t output_;
};

// `tokens` with every token at positions [from, to) replaced by another one.
at::Tensor Perturbed(const at::Tensor& tokens, int64_t from, int64_t to, int64_t vocab,
                     uint64_t key) {
  at::Tensor out = tokens.clone();
  auto a = out.accessor<int64_t, 2>();
  for (int64_t b = 0; b < out.size(0); ++b)
    for (int64_t t = from; t < to; ++t) {
      const uint64_t r = SplitMix64(key ^ static_cast<uint64_t>(b * 1000 + t)) % (vocab - 1);
      a[b][t] = (a[b][t] + 1 + static_cast<int64_t>(r)) % vocab;
    }
  return out;
}

// The positions t the causality tests cut at: the first, the last that has
// a later token, and some between.
std::vector<int64_t> CutPositions(int64_t seq) { return {0, 1, 7, seq / 2 - 1, seq - 2}; }

// Changing every token after t leaves the outputs at 0..t bit for bit, and
// changes the output at t + 1 (so the probe sees a change where one belongs).
TEST_P(ModelDefinitionTest, LaterTokensLeaveEveryEarlierOutputBitwiseUnchanged) {
  ASSERT_NO_FATAL_FAILURE(ExpectImplConfigIsTheModel(GetParam(), def_));
  const PositionProbe probe(GetParam(), def_);
  const int64_t seq = def_.positions;
  const at::Tensor tokens = RandomTokens(2, seq, def_.vocab, 0xCA05A1);
  std::vector<PositionOutput> before;
  for (int64_t p = 0; p < seq; ++p) before.push_back(probe.At(tokens, p));
  for (int64_t t : CutPositions(seq)) {
    const at::Tensor changed = Perturbed(tokens, t + 1, seq, def_.vocab, 100 + t);
    for (int64_t p = 0; p <= t; ++p)
      EXPECT_TRUE(probe.At(changed, p).BitwiseEqual(before[p]))
          << "changing the tokens after position " << t << " changed the output at " << p;
    EXPECT_FALSE(probe.At(changed, t + 1).BitwiseEqual(before[t + 1]))
        << "changing the tokens after position " << t << " left the output at " << t + 1;
  }
}

// Changing any one token at p <= t changes the loss read from the logits at t.
TEST_P(ModelDefinitionTest, EveryTokenAtOrBeforeTReachesTheOutputAtT) {
  ASSERT_NO_FATAL_FAILURE(ExpectImplConfigIsTheModel(GetParam(), def_));
  const PositionProbe probe(GetParam(), def_);
  const int64_t seq = def_.positions;
  const at::Tensor tokens = RandomTokens(2, seq, def_.vocab, 0xCA05A2);
  for (int64_t t : CutPositions(seq)) {
    const PositionOutput before = probe.At(tokens, t);
    for (int64_t p = 0; p <= t; ++p) {
      const at::Tensor changed = Perturbed(tokens, p, p + 1, def_.vocab, 200 + p);
      EXPECT_NE(probe.At(changed, t).loss, before.loss)
          << "changing the token at " << p << " left the output at " << t;
    }
  }
}

// ---------------------------------------------------------------------------
// 2. Gradients and loss against the re-implementation.

// Tolerance, per element: |got - want| <= 2^-24 |want| + 1e-12 max|want|.
// The model runs the whole pass in fp64 (fp64 params) and LossAndGrad rounds
// its gradient once to fp32 (RNE: relative error at most 2^-24, the first
// term). The two fp64 computations differ only in rounding order: dot
// products of at most 256 terms and sums over 128 tokens, through softmax and
// LayerNorm, bound the difference by roughly 256 · 2^-53 · (a small
// amplification) ≈ 1e-13 of the param's largest gradient (measured: below
// 1e-16, hidden under the fp32 rounding). The second term, 1e-12 of the
// largest gradient, covers that and elements near zero, and is 1e8 times
// below the 1e-4 and larger changes any of the model bugs tried here cause.
constexpr double kFp32Rounding = 1.0 / (1 << 24);
constexpr double kFp64OrderSlack = 1e-12;

void ExpectGradientMatches(const std::string& name, const at::Tensor& got32,
                           const at::Tensor& want64) {
  const at::Tensor got = got32.to(at::kDouble);
  const double scale = want64.abs().max().item<double>();
  const at::Tensor allowed = want64.abs() * kFp32Rounding + kFp64OrderSlack * scale;
  const at::Tensor excess = (got - want64).abs() - allowed;
  const int64_t worst = excess.reshape({-1}).argmax().item<int64_t>();
  EXPECT_LE(excess.reshape({-1})[worst].item<double>(), 0.0)
      << name << ": element " << worst << " is " << got.reshape({-1})[worst].item<double>()
      << ", the re-implementation's " << want64.reshape({-1})[worst].item<double>()
      << " (largest |gradient| " << scale << ")";
}

TEST_P(ModelDefinitionTest, GradientsAndLossEqualAutogradOfThePlainReimplementation) {
  auto model = MakeTinyModel(GetParam());
  const ModelSpec& spec = model->spec();
  const std::vector<at::Tensor> params = GenericParams(spec, 21, at::kDouble);
  const uint64_t seed = 77;
  const int64_t step = 3;
  const int mb = 2;
  const LossAndGrads ref = RefLossAndGrad(def_, spec, params, RefRepeatBatch(def_, seed, step, mb));
  std::vector<at::Tensor> grads;
  for (const ParamInfo& p : spec.params) grads.push_back(at::zeros(p.shape, at::kFloat));
  const double loss = model->LossAndGrad(params, seed, step, mb, grads);
  // Both fp64, different rounding orders of a loss near 5 (measured 2e-16
  // relative apart): 1e-13 relative.
  EXPECT_NEAR(loss, ref.loss, 1e-13 * std::abs(ref.loss));
  for (size_t i = 0; i < spec.params.size(); ++i)
    ExpectGradientMatches(spec.params[i].name, grads[i], ref.grads[i]);
  // The fp32 pass the optimizers train: params rounded to fp32 (relative
  // 6e-8) and fp32 arithmetic over sums of <= 256 terms; measured 2e-8
  // relative from the fp64 re-implementation, bounded by 1e-6.
  std::vector<at::Tensor> params32;
  for (const at::Tensor& p : params) params32.push_back(p.to(at::kFloat));
  EXPECT_NEAR(model->Loss(params32, seed, step, mb), ref.loss, 1e-6 * std::abs(ref.loss));
}

// ---------------------------------------------------------------------------
// 3. MoE routing.

// The k experts with the largest logits (a plain sort of one token's router
// logits), and the gap between the k-th and the (k+1)-th logit.
std::set<int64_t> TopExperts(const at::Tensor& logits, int64_t k, double* gap) {
  std::vector<std::pair<double, int64_t>> ranked;
  for (int64_t e = 0; e < logits.size(0); ++e) ranked.push_back({logits[e].item<double>(), e});
  std::sort(ranked.begin(), ranked.end(), std::greater<>());
  std::set<int64_t> out;
  for (int64_t i = 0; i < k; ++i) out.insert(ranked[i].second);
  *gap = k < logits.size(0) ? ranked[k - 1].first - ranked[k].first : kInf;
  return out;
}

// The experts of `layer` that got a nonzero gradient.
std::set<int64_t> ExpertsWithGradient(const ModelDefinition& d, const ModelSpec& spec,
                                      const std::vector<at::Tensor>& grads, int64_t layer) {
  std::set<int64_t> out;
  for (int64_t e = 0; e < d.experts; ++e) {
    const std::string prefix = "decoder.layers." + std::to_string(layer) +
                               ".mlp.experts.local_experts." + std::to_string(e) + ".";
    for (const char* p :
         {"linear_fc1.weight", "linear_fc1.bias", "linear_fc2.weight", "linear_fc2.bias"})
      if (grads[IndexOf(spec, prefix + p)].ne(0).any().item<bool>()) out.insert(e);
  }
  return out;
}

// Params under which each token's routing can be read off the gradients:
// generic, except that the last layer's attention output ignores its input
// (linear_proj.weight = 0). With only token n scored, no gradient then
// reaches any other token's expert outputs in any layer, so an expert's
// params get a gradient exactly when token n is routed to it (its gate is > 0).
std::vector<at::Tensor> RoutingProbeParams(const ModelDefinition& d, const ModelSpec& spec) {
  std::vector<at::Tensor> params = GenericParams(spec, 31, at::kDouble);
  const std::string last = "decoder.layers." + std::to_string(d.layers - 1) + ".";
  params[IndexOf(spec, last + "self_attention.linear_proj.weight")].zero_();
  return params;
}

// Per token and layer: the experts the model sends the token to (read from
// the gradients, fp64 pass) against the top-k of the re-implementation's
// router logits; per layer: the loads, counted both ways.
void ExpectRoutingIsTopK(const std::string& name, const ModelDefinition& d) {
  const TinyTransformerConfig cfg = ImplConfigOf(d);
  const ModelSpec spec = TinyTransformerSpec(name, cfg);
  const std::vector<at::Tensor> params = RoutingProbeParams(d, spec);
  const int64_t batch = 2, seq = d.positions, tokens_n = batch * seq;
  const at::Tensor tokens = RandomTokens(batch, seq, d.vocab, 0x7011E);
  std::vector<at::Tensor> router_logits;  // per layer, (tokens, experts)
  {
    at::NoGradGuard no_grad;
    NamedParams ps(spec, params);
    RefLogits(d, ps, tokens, &router_logits);
  }
  ASSERT_EQ(static_cast<int64_t>(router_logits.size()), d.layers);
  std::vector<std::vector<int64_t>> load(d.layers, std::vector<int64_t>(d.experts, 0));
  std::vector<std::vector<int64_t>> want_load = load;
  for (int64_t n = 0; n < tokens_n; ++n) {
    TokenBatch one{tokens, at::full_like(tokens, kIgnoreIndex)};
    one.targets[n / seq][n % seq].fill_(n % d.vocab);
    const LossAndGrads r = ImplLossAndGrad(cfg, params, one);
    for (int64_t l = 0; l < d.layers; ++l) {
      double gap = 0;
      const std::set<int64_t> want = TopExperts(router_logits[l][n], d.topk, &gap);
      ASSERT_GT(gap, 1e-9) << "layer " << l << " token " << n << ": a near tie, pick other params";
      const std::set<int64_t> got = ExpertsWithGradient(d, spec, r.grads, l);
      EXPECT_EQ(got, want) << "layer " << l << " token " << n;
      for (int64_t e : got) ++load[l][e];
      for (int64_t e : want) ++want_load[l][e];
    }
  }
  for (int64_t l = 0; l < d.layers; ++l) {
    int64_t total = 0;
    for (int64_t e = 0; e < d.experts; ++e) total += load[l][e];
    EXPECT_EQ(total, tokens_n * d.topk) << "layer " << l << ": loads do not sum to tokens x k";
    EXPECT_EQ(load[l], want_load[l]) << "layer " << l << ": loads per expert";
  }
}

TEST(ModelDefinition, MoeSendsEachTokenToTheTopKExpertsOfItsRouterLogits) {
  at::set_num_threads(1);
  int moe_models = 0;
  for (const std::string& name : TinyModelNames()) {
    std::optional<ModelDefinition> d = DefinitionOf(name);
    ASSERT_TRUE(d) << name << " has no definition in this test";
    if (d->experts == 0) continue;
    ++moe_models;
    SCOPED_TRACE(name);
    ASSERT_NO_FATAL_FAILURE(ExpectImplConfigIsTheModel(name, *d));
    ExpectRoutingIsTopK(name, *d);
  }
  EXPECT_GE(moe_models, 1);
}

// ---------------------------------------------------------------------------
// 4. Loss at initialisation.

// At init the logits are z = LN(x) · Woutᵀ with Wout ~ N(0, 0.02²) and LN(x)
// of unit variance (weight 1, bias 0): z ≈ N(0, σ²), σ² = hidden · 0.02² =
// 0.0256, so the cross entropy is ln(vocab) + σ²/2 ≈ ln 128 + 0.013 on
// average. One micro-batch scores 100 targets, 25 per sequence of 8 repeated
// tokens, so the logits are correlated and its loss spreads by ~0.02
// (measured over these 12: 4.835 to 4.907): each within 0.08 (4 spreads), the
// mean of 12 within 0.02 of ln(vocab) + σ²/2. A wrong init scale, an
// unnormalised or summed loss, or logits not read through the final
// LayerNorm and the output head miss this by far.
TEST_P(ModelDefinitionTest, LossAtInitialisationIsNearLnVocab) {
  auto model = MakeTinyModel(GetParam());
  const double init_std = 0.02;
  const double expected = std::log(static_cast<double>(def_.vocab)) +
                          0.5 * static_cast<double>(def_.hidden) * init_std * init_std;
  double sum = 0;
  int n = 0;
  for (uint64_t seed : {1, 2, 3}) {
    const std::vector<at::Tensor> params = model->InitialParams(seed, at::kFloat);
    for (int mb = 0; mb < 4; ++mb, ++n) {
      const double loss = model->Loss(params, seed, 0, mb);
      sum += loss;
      EXPECT_NEAR(loss, expected, 0.08) << "seed " << seed << " mb " << mb;
    }
  }
  EXPECT_NEAR(sum / n, expected, 0.02);
}

// docs/models.md, "Initial params": every 2-D param is normal with std
// 0.02, but the linear_proj and linear_fc2 weights, 0.02/sqrt(2·layers)
// (Megatron's scaled init); LayerNorm weights 1, biases 0. Each 2-D param's
// sample std (over seeds 1-12, at least 3,000 draws) within 6% of its
// definition, which tells 0.01 from 0.02 by far; its mean within 5 standard
// errors of 0.
TEST_P(ModelDefinitionTest, InitialParamsHaveTheDefinedScales) {
  auto model = MakeTinyModel(GetParam());
  const double scaled = 0.02 / std::sqrt(2.0 * static_cast<double>(def_.layers));
  const auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  std::vector<std::vector<at::Tensor>> draws;
  for (uint64_t seed = 1; seed <= 12; ++seed) draws.push_back(model->InitialParams(seed, at::kDouble));
  const std::vector<ParamInfo>& params = model->spec().params;
  int checked = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].name;
    std::vector<at::Tensor> all;
    for (const auto& d : draws) all.push_back(d[i].reshape({-1}));
    const at::Tensor x = at::cat(all);
    if (params[i].shape.size() != 2) {
      const double want = ends_with(name, "weight") ? 1.0 : 0.0;
      EXPECT_TRUE(at::equal(x, at::full_like(x, want))) << name << " (LayerNorm or bias)";
      continue;
    }
    const bool is_scaled = ends_with(name, "linear_proj.weight") || ends_with(name, "linear_fc2.weight");
    const double want = is_scaled ? scaled : 0.02;
    const double std = x.std().item<double>(), mean = x.mean().item<double>();
    ASSERT_GE(x.numel(), 3000) << name;
    EXPECT_NEAR(std, want, 0.06 * want) << name << (is_scaled ? " (scaled init)" : "");
    EXPECT_LT(std::abs(mean), 5 * want / std::sqrt(static_cast<double>(x.numel()))) << name;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(ModelDefinition, ModelDefinitionTest,
                         ::testing::ValuesIn(TinyModelNames()), [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace shardcheck
