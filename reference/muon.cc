#include "reference/muon.h"

#include <algorithm>
#include <cmath>

#include "reference/error.h"

namespace shardcheck {

at::Tensor NewtonSchulz(const at::Tensor& g, const OptimizerConfig& c) {
  if (g.dim() != 2) throw Error("Newton-Schulz needs a 2-D matrix, got " + std::to_string(g.dim()) + "-D");
  const bool transposed = g.size(0) > g.size(1);
  at::Tensor x = transposed ? g.t().contiguous() : g.contiguous();
  // Normalize by the Frobenius norm: sum of squares in fp64, rounded once.
  const double sumsq = x.to(at::kDouble).square().sum().item<double>();
  const float norm = std::max(static_cast<float>(std::sqrt(sumsq)), 1e-7f);
  x = x / norm;
  if (c.ns_bf16) x = x.to(at::kBFloat16);
  for (int i = 0; i < c.ns_steps; ++i) {
    const NsCoefficients k = c.CoefficientsAt(i);
    const float a = static_cast<float>(k[0]);
    const float b = static_cast<float>(k[1]);
    const float cc = static_cast<float>(k[2]);
    // A = X X^T, B = b A + c A A, X = a X + B X.
    at::Tensor gram = at::mm(x, x.t());
    at::Tensor poly = gram * b + at::mm(gram, gram) * cc;
    x = x * a + at::mm(poly, x);
  }
  x = x.to(at::kFloat);
  return transposed ? x.t().contiguous() : x;
}

double MuonScaleFactor(const OptimizerConfig& c, int64_t rows, int64_t cols) {
  const double r = static_cast<double>(rows), k = static_cast<double>(cols);
  switch (c.scale) {
    case MuonScale::kSpectral: return std::sqrt(std::max(r, k)) * c.extra_scale;
    case MuonScale::kShape: return std::sqrt(std::max(1.0, r / k));
    case MuonScale::kMoonlight: return 0.2 * std::sqrt(std::max(r, k));
  }
  return 1.0;
}

void MuonUpdate(const OptimizerConfig& c, double wd_mult, at::Tensor& p, const at::Tensor& g,
                at::Tensor& momentum_buffer) {
  const double wd = c.weight_decay * wd_mult;
  const float mu = static_cast<float>(c.momentum);
  const float omu = static_cast<float>(1.0 - c.momentum);
  // Decoupled weight decay: one multiply.
  if (wd != 0.0) p = p * static_cast<float>(1.0 - c.lr * wd);
  // Momentum.
  momentum_buffer = momentum_buffer * mu + g * omu;
  // Nesterov look-ahead, or the momentum itself.
  at::Tensor update = c.nesterov ? momentum_buffer * mu + g * omu : momentum_buffer;
  // Orthogonalize and take the scaled step.
  at::Tensor ortho = NewtonSchulz(update, c);
  const float step = static_cast<float>(c.lr * MuonScaleFactor(c, p.size(0), p.size(1)));
  p = p - ortho * step;
}

}  // namespace shardcheck
