#include "harness/models/grad_source.h"

#include "harness/models/model_name.h"
#include "harness/models/tiny_model.h"
#include "spec/error.h"
#include "spec/failpoint.h"
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
                           mb_begin, mb_end, spec_.zero_mask);
    return 0.0;
  }
  double MicroBatchGrads(const std::vector<at::Tensor>& params, int64_t step, int mb_begin,
                         int mb_end, int m,
                         std::vector<std::vector<at::Tensor>>& out) const override {
    out.clear();
    for (int mb = mb_begin; mb < mb_end; ++mb) {
      out.emplace_back();
      RankGrads(params, step, mb, mb + 1, m, out.back());
    }
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
    out = Zeros();
    const int first = FirstDataIndex(mb_begin);
    double loss = 0.0;
    for (int mb = mb_begin; mb < mb_end; ++mb)
      loss += model_->LossAndGrad(params, seed_, step, first + (mb - mb_begin), out);
    const float mf = static_cast<float>(m);
    for (auto& g : out) g = g / mf;
    return loss;
  }
  double MicroBatchGrads(const std::vector<at::Tensor>& params, int64_t step, int mb_begin,
                         int mb_end, int m,
                         std::vector<std::vector<at::Tensor>>& out) const override {
    out.clear();
    const int first = FirstDataIndex(mb_begin);
    const float mf = static_cast<float>(m);
    double loss = 0.0;
    for (int mb = mb_begin; mb < mb_end; ++mb) {
      out.push_back(Zeros());
      loss += model_->LossAndGrad(params, seed_, step, first + (mb - mb_begin), out.back());
      for (auto& g : out.back()) g = g / mf;
    }
    return loss;
  }

 private:
  std::vector<at::Tensor> Zeros() const {
    std::vector<at::Tensor> z;
    for (const ParamInfo& p : model_->spec().params) z.push_back(at::zeros(p.shape, at::kFloat));
    return z;
  }
  // The data index of micro-batch `mb_begin`, the first of a rank's: itself,
  // or under the silent bug data_from_dp_rank_not_global_microbatch
  // (docs/detection.md) 0, as if drawn by its index within the rank.
  static int FirstDataIndex(int mb_begin) {
    return FailpointOn("data_from_dp_rank_not_global_microbatch") ? 0 : mb_begin;
  }

  std::unique_ptr<TinyModel> model_;
  std::string name_;
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<GradSource> MakeOracleSource(const ModelSpec& spec, uint64_t seed) {
  return std::make_unique<OracleSource>(spec, seed);
}

std::unique_ptr<GradSource> MakeGradSource(const std::string& model, uint64_t seed) {
  const ModelName name = ModelName::Parse(model);
  if (name.IsOracle()) return MakeOracleSource(name.OracleSpec(), seed);
  return std::make_unique<TinyModelSource>(MakeTinyModel(model), model, seed);
}

}  // namespace shardcheck
