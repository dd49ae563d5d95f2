#include "harness/models/tiny_model.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "harness/models/synthetic_data.h"
#include "harness/models/tiny_transformer.h"
#include "spec/error.h"
#include "testing/oracle.h"

namespace shardcheck {

namespace {

// Separates the init stream from the oracle's and the data's streams.
constexpr uint64_t kInitDomain = 0x1417BA5EC0FFEE11ull;
constexpr double kInitStd = 0.02;

TinyTransformerConfig GptTinyConfig() { return TinyTransformerConfig{}; }

TinyTransformerConfig MoeTinyConfig() {
  TinyTransformerConfig c;
  c.experts = 4;
  c.topk = 2;
  c.expert_ffn = 128;
  return c;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Standard normal draws (Box–Muller, in double) of `n` elements from `key`:
// element e uses the uniforms of SplitMix64(key ^ 2e) and SplitMix64(key ^ (2e+1)).
std::vector<double> NormalDraws(uint64_t key, int64_t n) {
  constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    const uint64_t i = 2 * static_cast<uint64_t>(e);
    const double u1 =
        static_cast<double>((SplitMix64(key ^ i) >> 11) + 1) * kTwoPowMinus53;  // (0, 1]
    const double u2 =
        static_cast<double>(SplitMix64(key ^ (i + 1)) >> 11) * kTwoPowMinus53;  // [0, 1)
    out[static_cast<size_t>(e)] = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
  }
  return out;
}

void CheckFloating(c10::ScalarType dtype, const std::string& what) {
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kDouble)
    throw Error(what + ": dtype " + std::string(c10::toString(dtype)) +
                " is not fp32, bf16 or fp64");
}

class TinyTransformerModel final : public TinyModel {
 public:
  TinyTransformerModel(const std::string& name, TinyTransformerConfig cfg, RepeatTask task)
      : cfg_(cfg), task_(task), spec_(TinyTransformerSpec(name, cfg)) {}

  const ModelSpec& spec() const override { return spec_; }

  std::vector<at::Tensor> InitialParams(uint64_t seed, c10::ScalarType dtype) const override {
    CheckFloating(dtype, spec_.name + " initial params");
    const double out_std = kInitStd / std::sqrt(2.0 * static_cast<double>(cfg_.layers));
    std::vector<at::Tensor> out;
    for (size_t pid = 0; pid < spec_.params.size(); ++pid) {
      const ParamInfo& p = spec_.params[pid];
      at::Tensor t;
      if (p.IsBias()) {
        t = at::zeros(p.shape, at::kDouble);
      } else if (p.shape.size() == 1) {  // layernorm weight
        t = at::ones(p.shape, at::kDouble);
      } else {
        const bool scaled =
            EndsWith(p.name, "linear_proj.weight") || EndsWith(p.name, "linear_fc2.weight");
        const double std = scaled ? out_std : kInitStd;
        const uint64_t key = SplitMix64(SplitMix64(seed ^ kInitDomain) ^ pid);
        std::vector<double> z = NormalDraws(key, p.Numel());
        for (double& v : z) v = static_cast<double>(static_cast<float>(v * std));  // fp32 value
        t = at::tensor(z, at::kDouble).view(p.shape);
      }
      // Via fp32, so fp64 params hold exactly the fp32 model's values.
      out.push_back(t.to(at::kFloat).to(dtype).contiguous());
    }
    return out;
  }

  double LossAndGrad(const std::vector<at::Tensor>& params, uint64_t seed, int64_t step, int mb,
                     std::vector<at::Tensor>& grads) const override {
    const c10::ScalarType compute = CheckParams(params);
    CheckGrads(grads);
    at::AutoGradMode grad_on(true);
    std::vector<at::Tensor> leaves;
    leaves.reserve(params.size());
    for (const at::Tensor& p : params)
      leaves.push_back(p.detach().to(compute).requires_grad_(true));
    at::Tensor loss = TinyTransformerLoss(cfg_, leaves, RepeatTaskBatch(task_, seed, step, mb));
    loss.backward();
    for (size_t i = 0; i < leaves.size(); ++i) {
      const at::Tensor& g = leaves[i].grad();
      if (g.defined()) grads[i].add_(g.to(at::kFloat));  // undefined: not used by this batch
    }
    return loss.item<double>();
  }

  double Loss(const std::vector<at::Tensor>& params, uint64_t seed, int64_t step,
              int mb) const override {
    const c10::ScalarType compute = CheckParams(params);
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> cast;
    cast.reserve(params.size());
    for (const at::Tensor& p : params) cast.push_back(p.to(compute));
    return TinyTransformerLoss(cfg_, cast, RepeatTaskBatch(task_, seed, step, mb)).item<double>();
  }

 private:
  // Checks count, shapes and one floating dtype; returns the compute dtype.
  c10::ScalarType CheckParams(const std::vector<at::Tensor>& params) const {
    if (params.size() != spec_.params.size())
      throw Error(spec_.name + ": " + std::to_string(params.size()) + " params given, expected " +
                  std::to_string(spec_.params.size()));
    for (size_t i = 0; i < params.size(); ++i) {
      const ParamInfo& p = spec_.params[i];
      if (!params[i].defined() || params[i].sizes() != at::IntArrayRef(p.shape))
        throw Error(spec_.name + ": param " + p.name + " is not of shape " + p.ShapeString());
      CheckFloating(params[i].scalar_type(), spec_.name + ": param " + p.name);
      if (params[i].scalar_type() != params[0].scalar_type())
        throw Error(spec_.name + ": param " + p.name + " has dtype " +
                    std::string(c10::toString(params[i].scalar_type())) + ", param " +
                    spec_.params[0].name + " " +
                    std::string(c10::toString(params[0].scalar_type())));
    }
    return params[0].scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  }

  void CheckGrads(const std::vector<at::Tensor>& grads) const {
    if (grads.size() != spec_.params.size())
      throw Error(spec_.name + ": " + std::to_string(grads.size()) + " grads given, expected " +
                  std::to_string(spec_.params.size()));
    for (size_t i = 0; i < grads.size(); ++i) {
      const ParamInfo& p = spec_.params[i];
      if (!grads[i].defined() || grads[i].scalar_type() != at::kFloat ||
          grads[i].sizes() != at::IntArrayRef(p.shape))
        throw Error(spec_.name + ": grad of " + p.name + " is not an fp32 tensor of shape " +
                    p.ShapeString());
    }
  }

  TinyTransformerConfig cfg_;
  RepeatTask task_;
  ModelSpec spec_;
};

}  // namespace

const std::vector<std::string>& TinyModelNames() {
  static const std::vector<std::string> names = {"gpt-tiny", "moe-tiny"};
  return names;
}

ModelSpec MoeTinySpec() { return TinyTransformerSpec("moe-tiny", MoeTinyConfig()); }

std::unique_ptr<TinyModel> MakeTinyModel(const std::string& name) {
  auto task_of = [](const TinyTransformerConfig& c) {
    RepeatTask task;  // 4 sequences of 32 tokens, period 8
    task.seq = c.seq;
    task.vocab = c.vocab;
    return task;
  };
  if (name == "gpt-tiny")
    return std::make_unique<TinyTransformerModel>(name, GptTinyConfig(), task_of(GptTinyConfig()));
  if (name == "moe-tiny")
    return std::make_unique<TinyTransformerModel>(name, MoeTinyConfig(), task_of(MoeTinyConfig()));
  throw Error("unknown tiny model '" + name + "' (expected gpt-tiny or moe-tiny)");
}

}  // namespace shardcheck
