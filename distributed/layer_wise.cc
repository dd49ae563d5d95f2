#include "distributed/layer_wise.h"

#include <algorithm>
#include <cmath>

#include "reference/error.h"

namespace shardcheck {

namespace {

double ScaleOf(const OptimizerConfig& c, int64_t rows, int64_t cols) {
  const double r = static_cast<double>(rows), k = static_cast<double>(cols);
  switch (c.scale) {
    case MuonScale::kSpectral: return std::sqrt(std::max(r, k)) * c.extra_scale;
    case MuonScale::kShape: return std::sqrt(std::max(1.0, r / k));
    case MuonScale::kMoonlight: return 0.2 * std::sqrt(std::max(r, k));
  }
  throw Error("unknown Muon scale mode");
}

}  // namespace

at::Tensor OrthogonalizeNewtonSchulz(const at::Tensor& g, const OptimizerConfig& c) {
  if (g.dim() != 2) throw Error("layer-wise Muon: Newton-Schulz needs a 2-D matrix");
  // Work on the wide orientation.
  const bool tall = g.size(0) > g.size(1);
  at::Tensor x = (tall ? g.t() : g).contiguous();
  const float fro = static_cast<float>(std::sqrt(x.to(at::kDouble).square().sum().item<double>()));
  x = x / std::max(fro, 1e-7f);
  if (c.ns_bf16) x = x.to(at::kBFloat16);
  for (int it = 0; it < c.ns_steps; ++it) {
    const NsCoefficients abc = c.CoefficientsAt(it);
    const at::Tensor a_mat = at::mm(x, x.t());
    const at::Tensor b_mat =
        a_mat * static_cast<float>(abc[1]) + at::mm(a_mat, a_mat) * static_cast<float>(abc[2]);
    x = x * static_cast<float>(abc[0]) + at::mm(b_mat, x);
  }
  x = x.to(at::kFloat);
  return tall ? x.t().contiguous() : x;
}

void LayerWiseMuonUpdate(const OptimizerConfig& c, double wd_mult, at::Tensor& main,
                         const at::Tensor& grad, at::Tensor& momentum) {
  const double wd = c.weight_decay * wd_mult;
  const float mu = static_cast<float>(c.momentum);
  const float one_minus_mu = static_cast<float>(1.0 - c.momentum);
  if (wd != 0.0) main = main * static_cast<float>(1.0 - c.lr * wd);
  momentum = momentum * mu + grad * one_minus_mu;
  const at::Tensor look = c.nesterov ? momentum * mu + grad * one_minus_mu : momentum;
  const at::Tensor ortho = OrthogonalizeNewtonSchulz(look, c);
  main = main - ortho * static_cast<float>(c.lr * ScaleOf(c, main.size(0), main.size(1)));
}

}  // namespace shardcheck
