#include "kernels/newton_schulz.h"

#include <algorithm>
#include <cmath>

#include "kernels/ieee.h"
#include "spec/error.h"

namespace shardcheck {

NsCoefficients NewtonSchulzOptions::At(int i) const {
  if (coefficients.size() == 1) return coefficients[0];
  return coefficients.at(static_cast<size_t>(i));
}

std::vector<NsCoefficients> NewtonSchulzOptions::Triples(const std::vector<double>& flat,
                                                         int steps) {
  if (flat.size() != 3 && flat.size() != 3 * static_cast<size_t>(steps))
    throw Error("ns_coefficients: " + std::to_string(flat.size()) +
                " numbers; give one triple, or one triple per step (" + std::to_string(3 * steps) +
                ")");
  std::vector<NsCoefficients> out;
  for (size_t i = 0; i < flat.size(); i += 3) out.push_back({flat[i], flat[i + 1], flat[i + 2]});
  return out;
}

at::Tensor NewtonSchulz(const at::Tensor& g, const NewtonSchulzOptions& o) {
  if (g.dim() != 2)
    throw Error("Newton-Schulz needs a 2-D matrix, got " + std::to_string(g.dim()) + "-D");
  // Work on the wide orientation.
  const bool transposed = g.size(0) > g.size(1);
  at::Tensor x = transposed ? g.t().contiguous() : g.contiguous();
  // Normalize by the Frobenius norm: sum of squares in fp64, rounded once.
  const double sumsq = x.to(at::kDouble).square().sum().item<double>();
  const float norm = std::max(static_cast<float>(std::sqrt(sumsq)), 1e-7f);
  x = Divide(x, norm);
  if (o.bf16) x = x.to(at::kBFloat16);
  for (int i = 0; i < o.steps; ++i) {
    const NsCoefficients k = o.At(i);
    const float a = static_cast<float>(k[0]);
    const float b = static_cast<float>(k[1]);
    const float c = static_cast<float>(k[2]);
    // A = X X^T, B = b A + c A A, X = a X + B X.
    const at::Tensor gram = at::mm(x, x.t());
    const at::Tensor poly = gram * b + at::mm(gram, gram) * c;
    x = x * a + at::mm(poly, x);
  }
  x = x.to(at::kFloat);
  return transposed ? x.t().contiguous() : x;
}

MatrixScale ParseMatrixScale(const std::string& name) {
  if (name == "spectral") return MatrixScale::kSpectral;
  if (name == "shape") return MatrixScale::kShape;
  if (name == "moonlight") return MatrixScale::kMoonlight;
  throw Error("unknown scale mode '" + name + "' (expected spectral, shape or moonlight)");
}

double MatrixScaleFactor(MatrixScale mode, double extra_scale, int64_t rows, int64_t cols) {
  const double r = static_cast<double>(rows), k = static_cast<double>(cols);
  switch (mode) {
    case MatrixScale::kSpectral:
      return std::sqrt(std::max(r, k)) * extra_scale;
    case MatrixScale::kShape:
      return std::sqrt(std::max(1.0, r / k));
    case MatrixScale::kMoonlight:
      return 0.2 * std::sqrt(std::max(r, k));
  }
  return 1.0;
}

}  // namespace shardcheck
