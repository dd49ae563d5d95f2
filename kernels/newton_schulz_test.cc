// Newton–Schulz: the output band of singular values, the orientation, the
// per-step coefficients, and the three step scales of Muon-like kinds.
#include "kernels/newton_schulz.h"

#include <gtest/gtest.h>

#include "spec/error.h"

namespace shardcheck {
namespace {

struct Shape {
  const char* desc;
  int64_t rows, cols;
};

class NewtonSchulzShapes : public testing::TestWithParam<Shape> {};

// Singular values of NS(G) for Gaussian G: the quintic with the default
// coefficients does not converge to 1 but pushes every singular value above
// a small threshold into a band around 1 (Keller Jordan reports roughly
// (0.7, 1.2)). Measured here (docs/optimizers.md): after 5 steps all
// singular values of 1.1e-2 * max or more lie in [0.68, 1.21]
// (tall 96x24: [0.683, 1.072], wide: [0.683, 1.044], square 64x64: [0.682, 1.201]:
// 1.2 is near the maximum of the quintic a x + b x^3 + c x^5 on [0, 1]).
TEST_P(NewtonSchulzShapes, SingularValuesInBand) {
  at::manual_seed(17);
  const Shape s = GetParam();
  const at::Tensor g = at::randn({s.rows, s.cols});
  const at::Tensor o = NewtonSchulz(g, NewtonSchulzOptions{});
  ASSERT_EQ(o.sizes(), g.sizes());
  const at::Tensor sv_in = at::linalg_svdvals(g.to(at::kDouble));
  const at::Tensor sv = at::linalg_svdvals(o.to(at::kDouble));
  // Singular values of G that are not tiny relative to its largest.
  const at::Tensor big = sv_in >= sv_in.max() * 0.011;
  const at::Tensor kept = sv.masked_select(big);
  std::printf("[ measured ] %s %ldx%ld: %ld of %ld singular values kept, in [%.4f, %.4f]\n", s.desc,
              static_cast<long>(s.rows), static_cast<long>(s.cols), static_cast<long>(kept.numel()),
              static_cast<long>(sv.numel()), kept.min().item<double>(), kept.max().item<double>());
  EXPECT_GE(kept.min().item<double>(), 0.68);
  EXPECT_LE(sv.max().item<double>(), 1.21);
  EXPECT_GE(kept.numel(), sv.numel() * 9 / 10);
}

INSTANTIATE_TEST_SUITE_P(Shapes, NewtonSchulzShapes,
                         testing::Values(Shape{"tall", 96, 24}, Shape{"wide", 24, 96},
                                         Shape{"square", 64, 64}),
                         [](const auto& info) { return std::string(info.param.desc); });

TEST(NewtonSchulz, TallIsTransposeOfWide) {
  at::manual_seed(3);
  const at::Tensor g = at::randn({40, 16});
  EXPECT_TRUE(at::equal(NewtonSchulz(g, NewtonSchulzOptions{}),
                        NewtonSchulz(g.t().contiguous(), NewtonSchulzOptions{}).t()));
}

TEST(NewtonSchulz, PerStepCoefficientsAreUsedInOrder) {
  at::manual_seed(4);
  const at::Tensor g = at::randn({8, 12});
  NewtonSchulzOptions a;
  a.steps = 2;
  a.coefficients = {{2.0, -1.5, 0.5}, {3.4445, -4.7750, 2.0315}};
  NewtonSchulzOptions b = a;
  b.coefficients = {{3.4445, -4.7750, 2.0315}, {2.0, -1.5, 0.5}};
  EXPECT_FALSE(at::equal(NewtonSchulz(g, a), NewtonSchulz(g, b)));
  NewtonSchulzOptions one = a;
  one.coefficients = {{3.4445, -4.7750, 2.0315}};
  NewtonSchulzOptions dflt;
  dflt.steps = 2;
  EXPECT_TRUE(at::equal(NewtonSchulz(g, one), NewtonSchulz(g, dflt)));
}

TEST(NewtonSchulz, TriplesFromAFlatList) {
  EXPECT_EQ(NewtonSchulzOptions::Triples({1, 2, 3}, 5).size(), 1u);
  const auto two = NewtonSchulzOptions::Triples({1, 2, 3, 4, 5, 6}, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1][0], 4.0);
  EXPECT_THROW(NewtonSchulzOptions::Triples({1, 2, 3, 4}, 2), Error);
  EXPECT_THROW(NewtonSchulzOptions::Triples({1, 2, 3, 4, 5, 6}, 3), Error);
}

TEST(MatrixScale, ThreeModes) {
  EXPECT_DOUBLE_EQ(MatrixScaleFactor(MatrixScale::kSpectral, 1.0, 64, 256), 16.0);
  EXPECT_DOUBLE_EQ(MatrixScaleFactor(MatrixScale::kSpectral, 0.5, 256, 64), 8.0);
  EXPECT_DOUBLE_EQ(MatrixScaleFactor(MatrixScale::kShape, 0.5, 64, 256), 1.0);
  EXPECT_DOUBLE_EQ(MatrixScaleFactor(MatrixScale::kShape, 0.5, 256, 64), 2.0);
  EXPECT_DOUBLE_EQ(MatrixScaleFactor(MatrixScale::kMoonlight, 0.5, 64, 256), 0.2 * 16.0);
  EXPECT_THROW(ParseMatrixScale("spectrl"), Error);
}

}  // namespace
}  // namespace shardcheck
