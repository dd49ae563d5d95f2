// The tensor comparator: bitwise and tolerance comparison of named tensors,
// with the figures a reviewer needs to see where two runs part.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck {

struct Mismatch {
  int64_t index = 0;  // flat element index
  double a = 0.0, b = 0.0;
};

struct TensorDiff {
  std::string name;
  bool shape_or_dtype_differs = false;
  std::string note;  // what differs when shape/dtype do
  int64_t numel = 0;
  int64_t mismatches = 0;    // elements whose bytes (bitwise) or values (tolerance) differ
  double max_abs = 0.0;      // max |a - b| (in fp64)
  double max_rel = 0.0;      // max |a - b| / max(|b|, rel_floor)
  int64_t max_ulp = 0;       // max ULP distance of a's dtype, over same-sign pairs only
  int64_t sign_changes = 0;  // differing pairs of opposite sign (both nonzero): no ULP figure
  int64_t worst_index = -1;  // index of max_abs
  double worst_a = 0.0, worst_b = 0.0;
  std::vector<Mismatch> first;  // the first few mismatches, by index

  bool Equal() const { return !shape_or_dtype_differs && mismatches == 0; }
  // One line: "exp_avg.w: 3/4096 differ, max abs 1.2e-07 at [17] (a=.. b=..), max rel .., max ulp
  // 1".
  std::string Summary() const;
};

// The floor of relative differences: |a - b| / max(|b|, floor), so values
// near 0 do not turn tiny absolute differences into huge relative ones.
// It is the tolerance's atol, or kDefaultRelFloor (fp32's default atol in
// docs/scenarios.md, "Tolerances") when there is none.
constexpr double kDefaultRelFloor = 1e-5;
inline double RelFloor(double atol) { return atol > 0.0 ? atol : kDefaultRelFloor; }

// ULP distances are given only between values of the same sign (or a zero):
// across a sign change the distance counts every float between, which says
// nothing about closeness. Such pairs are counted in sign_changes instead.

// Byte comparison of every element (+0 and -0 differ, NaNs of the same bits
// are equal). Figures are filled in for the elements that differ.
TensorDiff CompareBitwise(const std::string& name, const at::Tensor& a, const at::Tensor& b,
                          double rel_floor = kDefaultRelFloor);

// |a - b| <= atol + rtol * |b| per element (and max_ulp, when >= 0, in ULPs;
// a sign change exceeds any ULP bound). Relative figures use RelFloor(atol).
TensorDiff CompareTolerance(const std::string& name, const at::Tensor& a, const at::Tensor& b,
                            double rtol, double atol, int64_t max_ulp = -1);

// ULP distance between two values of a floating dtype (fp32, bf16, fp16, fp64).
int64_t UlpDistance(const at::Tensor& a, const at::Tensor& b, int64_t index);

}  // namespace shardcheck
