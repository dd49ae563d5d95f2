#include "harness/models/grad_source.h"

#include "harness/models/tiny_model.h"
#include "spec/error.h"
#include "testing/oracle.h"

namespace shardcheck {

namespace {

class OracleSource final : public GradSource {
 public:
  OracleSource(ModelSpec spec, uint64_t seed) : spec_(std::move(spec)), seed_(seed) {}
  std::string name() const override { return "oracle:" + spec_.name; }
  const ModelSpec& spec() const override { return spec_; }
  bool has_loss() const override { return false; }
  std::vector<at::Tensor> InitialParams(c10::ScalarType dtype) const override {
    std::vector<at::Tensor> out;
    for (size_t i = 0; i < spec_.params.size(); ++i)
      out.push_back(InitialParam(seed_, i, spec_.params[i].shape, dtype));
    return out;
  }
  double RankGrads(const std::vector<at::Tensor>&, int64_t step, int mb_begin, int mb_end, int m,
                   std::vector<at::Tensor>& out) const override {
    out.resize(spec_.params.size());
    for (size_t i = 0; i < spec_.params.size(); ++i)
      out[i] = PartialGrad(seed_, static_cast<uint64_t>(step), i, spec_.params[i].shape, m,
                           mb_begin, mb_end);
    return 0.0;
  }

 private:
  ModelSpec spec_;
  uint64_t seed_;
};

class TinyModelSource final : public GradSource {
 public:
  TinyModelSource(std::unique_ptr<TinyModel> model, std::string name, uint64_t seed)
      : model_(std::move(model)), name_(std::move(name)), seed_(seed) {}
  std::string name() const override { return name_; }
  const ModelSpec& spec() const override { return model_->spec(); }
  bool has_loss() const override { return true; }
  std::vector<at::Tensor> InitialParams(c10::ScalarType dtype) const override {
    return model_->InitialParams(seed_, dtype);
  }
  double RankGrads(const std::vector<at::Tensor>& params, int64_t step, int mb_begin, int mb_end,
                   int m, std::vector<at::Tensor>& out) const override {
    const auto& ps = model_->spec().params;
    out.resize(ps.size());
    for (size_t i = 0; i < ps.size(); ++i) out[i] = at::zeros(ps[i].shape, at::kFloat);
    double loss = 0.0;
    for (int mb = mb_begin; mb < mb_end; ++mb)
      loss += model_->LossAndGrad(params, seed_, step, mb, out);
    const float mf = static_cast<float>(m);
    for (auto& g : out) g = g / mf;
    return loss;
  }

 private:
  std::unique_ptr<TinyModel> model_;
  std::string name_;
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<GradSource> MakeOracleSource(const ModelSpec& spec, uint64_t seed) {
  return std::make_unique<OracleSource>(spec, seed);
}

std::unique_ptr<GradSource> MakeGradSource(const std::string& model, uint64_t seed) {
  const std::string prefix = "oracle:";
  if (model.rfind(prefix, 0) == 0) {
    const std::string rest = model.substr(prefix.size());
    if (rest.rfind("shapes:", 0) == 0) return MakeOracleSource(ParseShapes(rest.substr(7)), seed);
    return MakeOracleSource(ModelByName(rest), seed);
  }
  if (model == "gpt-tiny" || model == "moe-tiny")
    return std::make_unique<TinyModelSource>(MakeTinyModel(model), model, seed);
  throw Error("unknown model '" + model +
              "' (expected oracle:gpt-tiny, oracle:shapes:<list>, gpt-tiny or moe-tiny)");
}

}  // namespace shardcheck
