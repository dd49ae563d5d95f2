// Newton–Schulz orthogonalization and the step scales of Muon-like
// whole-param optimizers (docs/optimizers.md, "Muon"): one definition, used
// by the reference and by the layer-wise fast path.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck {

// Quintic coefficients (a, b, c) of one iteration.
using NsCoefficients = std::array<double, 3>;
inline constexpr NsCoefficients kDefaultNsCoefficients = {3.4445, -4.7750, 2.0315};

struct NewtonSchulzOptions {
  int steps = 5;
  // One triple for every iteration, or one per iteration (size == steps).
  std::vector<NsCoefficients> coefficients = {kDefaultNsCoefficients};
  bool bf16 = false;  // matmuls in bf16 (fp32 by default)

  NsCoefficients At(int i) const;
  // From a flat list of numbers, three per triple. Throws Error when the
  // count is not 3 or 3 * steps.
  static std::vector<NsCoefficients> Triples(const std::vector<double>& flat, int steps);
};

// NS(G) of a 2-D fp32 matrix: works on G^T when rows > cols; returns a new
// fp32 tensor of g's shape whose singular values lie near 1. Throws Error
// on a non-2-D input.
at::Tensor NewtonSchulz(const at::Tensor& g, const NewtonSchulzOptions& o);

enum class MatrixScale { kSpectral, kShape, kMoonlight };
// "spectral" | "shape" | "moonlight"; throws Error on others.
MatrixScale ParseMatrixScale(const std::string& name);
// The step scale of a rows x cols matrix: spectral sqrt(max(r, c)) *
// extra_scale; shape sqrt(max(1, r / c)); moonlight 0.2 * sqrt(max(r, c)).
double MatrixScaleFactor(MatrixScale mode, double extra_scale, int64_t rows, int64_t cols);

}  // namespace shardcheck
