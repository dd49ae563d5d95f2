// The comparator's figures: what a reviewer reads in the report must mean
// what compare.h says (relative error against max(|b|, floor), ULP
// distances between same-sign values only).
#include "harness/cell/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace shardcheck {
namespace {

at::Tensor F32(std::vector<float> v) {
  return at::tensor(at::ArrayRef<float>(v), at::kFloat).clone();
}

TEST(Compare, EqualBytesAreEqualAndSignedZerosAreNot) {
  const TensorDiff same = CompareBitwise("t", F32({1.0f, -2.5f}), F32({1.0f, -2.5f}));
  EXPECT_TRUE(same.Equal());
  EXPECT_EQ(same.max_abs, 0.0);
  const TensorDiff zeros = CompareBitwise("t", F32({0.0f}), F32({-0.0f}));
  EXPECT_FALSE(zeros.Equal());
  EXPECT_EQ(zeros.mismatches, 1);
  EXPECT_EQ(zeros.sign_changes, 0) << "a zero has no sign to change";
}

TEST(Compare, RelativeErrorIsTakenAgainstTheFloorNearZero) {
  // |b| = 1e-12 is far below the default floor 1e-5: rel = 1e-12 / 1e-5.
  const TensorDiff d = CompareBitwise("t", F32({2e-12f}), F32({1e-12f}));
  EXPECT_NEAR(d.max_rel, (2e-12f - 1e-12f) / kDefaultRelFloor, 1e-12);
  EXPECT_LT(d.max_rel, 1e-6);
  // Far above the floor it is the plain relative error.
  const TensorDiff big = CompareBitwise("t", F32({1.5f}), F32({1.0f}));
  EXPECT_DOUBLE_EQ(big.max_rel, 0.5);
}

TEST(Compare, ToleranceUsesItsAtolAsTheFloor) {
  const TensorDiff d = CompareTolerance("t", F32({3e-3f}), F32({1e-3f}), 0.0, 1e-2);
  EXPECT_EQ(d.mismatches, 0) << "within atol";
  EXPECT_NEAR(d.max_rel, (3e-3f - 1e-3f) / 1e-2, 1e-7);
}

TEST(Compare, UlpDistanceSkipsSignChangesAndCountsThem) {
  const float one = 1.0f, next = std::nextafter(1.0f, 2.0f);
  const TensorDiff d = CompareBitwise("t", F32({next, 1e-30f}), F32({one, -1e-30f}));
  EXPECT_EQ(d.mismatches, 2);
  EXPECT_EQ(d.max_ulp, 1) << "only the same-sign pair has a ULP figure";
  EXPECT_EQ(d.sign_changes, 1);
  EXPECT_NE(d.Summary().find("1 sign changes"), std::string::npos) << d.Summary();
}

TEST(Compare, SignChangeViolatesAnyUlpBound) {
  const TensorDiff d = CompareTolerance("t", F32({1e-30f}), F32({-1e-30f}), 0.0, 1.0, 1000);
  EXPECT_EQ(d.mismatches, 1) << "within atol, but a sign change exceeds every ULP bound";
  EXPECT_EQ(d.sign_changes, 1);
  const TensorDiff same = CompareTolerance("t", F32({1e-30f}), F32({1e-30f}), 0.0, 1.0, 0);
  EXPECT_EQ(same.mismatches, 0);
}

}  // namespace
}  // namespace shardcheck
