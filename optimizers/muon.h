// Muon: its registry entry and its whole-param kernel (docs/optimizers.md,
// "Muon"). Keller Jordan, "Muon: An optimizer for hidden layers in neural
// networks", 2024; Megatron-LM / Emerging-Optimizers for the scale modes,
// defaults and the scalar optimizer of the params Muon does not take. The
// reference is reference/muon.cc.
#pragma once

#include <ATen/ATen.h>

#include "kernels/newton_schulz.h"
#include "spec/config.h"
#include "spec/error.h"
#include "spec/registry.h"

namespace shardcheck {

struct MuonScalars {
  bool decay = false;      // wd != 0
  float decay_factor = 1;  // float(1 - lr*wd)
  float mu = 0, omu = 0;   // float(momentum), float(1 - momentum)
  bool nesterov = false;
  float step = 0;  // float(lr * scale) of this matrix
  NewtonSchulzOptions ns;
};

// The scalars of one update of a rows x cols matrix.
inline MuonScalars PrepareMuon(const StepContext& ctx, int64_t rows, int64_t cols) {
  const OptimizerConfig& c = *ctx.config;
  MuonScalars s;
  s.decay = ctx.weight_decay != 0.0;
  s.decay_factor = static_cast<float>(1.0 - ctx.lr * ctx.weight_decay);
  s.mu = static_cast<float>(c.Real("momentum"));
  s.omu = static_cast<float>(1.0 - c.Real("momentum"));
  s.nesterov = c.Flag("nesterov");
  s.ns.steps = static_cast<int>(c.Int("ns_steps"));
  s.ns.coefficients = NewtonSchulzOptions::Triples(c.Reals("ns_coefficients"), s.ns.steps);
  s.ns.bf16 = c.Flag("ns_bf16");
  const double scale = MatrixScaleFactor(ParseMatrixScale(c.Choice("scale_mode")),
                                         c.Real("extra_scale"), rows, cols);
  s.step = static_cast<float>(ctx.lr * scale);
  return s;
}

// The layer-wise update of one whole 2-D param.
inline void MuonWholeParamUpdate(const StepContext& ctx, at::Tensor& p, const at::Tensor& g,
                                 std::vector<at::Tensor>& state) {
  const MuonScalars s = PrepareMuon(ctx, p.size(0), p.size(1));
  at::Tensor& m = state.at(0);  // momentum_buffer
  if (s.decay) p = p * s.decay_factor;
  m = m * s.mu + g * s.omu;
  const at::Tensor u = s.nesterov ? m * s.mu + g * s.omu : m;
  p = p - NewtonSchulz(u, s.ns) * s.step;
}

inline void ValidateMuon(const OptimizerConfig& c) {
  NewtonSchulzOptions::Triples(c.Reals("ns_coefficients"), static_cast<int>(c.Int("ns_steps")));
}

inline OptimizerSpec MuonSpec() {
  OptimizerSpec s;
  s.name = "muon";
  s.title =
      "Muon: momentum orthogonalized by Newton-Schulz, whole 2-D params, with a scalar optimizer";
  s.source = "Keller Jordan 2024; Megatron-LM / Emerging-Optimizers";
  s.schema = {{{"momentum_buffer", c10::kFloat}}};
  HyperParamSpec extra =
      RealParam("extra_scale", 1.0, 0.0, kNoBound, "extra factor of the spectral scale");
  extra.min_open = true;
  s.hyperparams = {
      LrParam(1e-3),
      WeightDecayParam(0.0),
      BetaParam("momentum", 0.95, "momentum"),
      BoolParam("nesterov", false, "Nesterov look-ahead"),
      IntParam("ns_steps", 5, 1, 100, "Newton-Schulz iterations"),
      RealListParam(
          "ns_coefficients",
          std::vector<double>(kDefaultNsCoefficients.begin(), kDefaultNsCoefficients.end()),
          "'a,b,c' for every iteration, or 'a,b,c;a,b,c;...' one triple per iteration"),
      ChoiceParam("scale_mode", "spectral", {"spectral", "shape", "moonlight"},
                  "step scale: sqrt(max(r,c))*extra_scale, sqrt(max(1,r/c)) or 0.2*sqrt(max(r,c))"),
      extra,
      BoolParam("ns_bf16", false, "Newton-Schulz matmuls in bf16")};
  s.placement = Placement::kWholeParam;
  s.needs_2d = true;
  s.default_scalar = "adam";
  s.named_scalars = {"adam", "lion"};
  s.validate = &ValidateMuon;
  return s;
}

SHARDCHECK_REGISTER_OPTIMIZERS(muon) { RegisterOptimizer({MuonSpec(), {}, &MuonWholeParamUpdate}); }

}  // namespace shardcheck
