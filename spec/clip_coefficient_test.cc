// The clipping rule against its definition (docs/optimizers.md, "Gradient
// clipping"): coef = max_norm / (norm + 1e-6) in double, applied as
// float(coef) only when it is below 1, and never when clipping is off.
// The reference and the DistributedOptimizer share ClipCoefficient, so a
// bug in it is invisible to their comparison: this test is its independent
// check. The definition is written out here on its own, not by calling the
// code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "spec/routing.h"

namespace shardcheck {
namespace {

// docs/optimizers.md, written out: 1 (no scaling) unless the double
// quotient is below 1.
float Definition(double max_norm, double norm) {
  if (max_norm <= 0.0) return 1.0f;
  const double q = max_norm / (norm + 1e-6);
  return q < 1.0 ? static_cast<float>(q) : 1.0f;
}

TEST(ClipCoefficient, OffWhenMaxNormIsZero) {
  for (double norm : {0.0, 1e-12, 0.5, 1.0, 1e6, std::numeric_limits<double>::infinity()})
    EXPECT_EQ(ClipCoefficient(0.0, norm), 1.0f) << "norm " << norm;
}

// A norm below the bound leaves the gradients alone: the coefficient is
// exactly 1, never above (a coefficient above 1 would scale small gradients up).
TEST(ClipCoefficient, ExactlyOneBelowTheBound) {
  for (double max_norm : {1e-3, 0.5, 1.0, 4.0})
    for (double frac : {0.0, 1e-9, 0.25, 0.5, 0.999}) {
      const double norm = max_norm * frac;
      EXPECT_EQ(ClipCoefficient(max_norm, norm), 1.0f)
          << "max_norm " << max_norm << ", norm " << norm;
    }
}

TEST(ClipCoefficient, NeverAboveOne) {
  for (double max_norm : {1e-6, 1e-3, 1.0, 1e3})
    for (double norm = 0.0; norm < 1e4; norm = norm * 3 + 1e-7)
      EXPECT_LE(ClipCoefficient(max_norm, norm), 1.0f) << "max_norm " << max_norm << ", norm " << norm;
}

// Above the bound: float(max_norm / (norm + 1e-6)), the quotient in double
// and rounded once.
TEST(ClipCoefficient, QuotientAboveTheBound) {
  const std::vector<std::pair<double, double>> cases = {
      {1.0, 1.0}, {1.0, 2.0}, {1.0, 3.7}, {0.5, 0.50001}, {1e-3, 1e3}, {2.0, 1e30}};
  for (const auto& [max_norm, norm] : cases) {
    const float want = static_cast<float>(max_norm / (norm + 1e-6));
    EXPECT_EQ(ClipCoefficient(max_norm, norm), want) << "max_norm " << max_norm << ", norm " << norm;
    EXPECT_EQ(ClipCoefficient(max_norm, norm), Definition(max_norm, norm));
  }
  // norm = max_norm: the 1e-6 in the denominator still clips (slightly).
  EXPECT_LT(ClipCoefficient(1.0, 1.0), 1.0f);
}

TEST(ClipCoefficient, MatchesTheDefinitionOnAGrid) {
  for (double max_norm : {0.0, 1e-4, 0.3, 1.0, 7.5})
    for (int e = -20; e <= 20; ++e)
      for (double m : {1.0, 1.5, 1.999}) {
        const double norm = std::ldexp(m, e);
        EXPECT_EQ(ClipCoefficient(max_norm, norm), Definition(max_norm, norm))
            << "max_norm " << max_norm << ", norm " << norm;
      }
}

}  // namespace
}  // namespace shardcheck
