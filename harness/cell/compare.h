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
  double max_rel = 0.0;      // max |a - b| / max(|b|, tiny)
  int64_t max_ulp = 0;       // max distance in units in the last place of a's dtype
  int64_t worst_index = -1;  // index of max_abs
  double worst_a = 0.0, worst_b = 0.0;
  std::vector<Mismatch> first;  // the first few mismatches, by index

  bool Equal() const { return !shape_or_dtype_differs && mismatches == 0; }
  // One line: "exp_avg.w: 3/4096 differ, max abs 1.2e-07 at [17] (a=.. b=..), max rel .., max ulp
  // 1".
  std::string Summary() const;
};

// Byte comparison of every element (+0 and -0 differ, NaNs of the same bits
// are equal). Figures are filled in for the elements that differ.
TensorDiff CompareBitwise(const std::string& name, const at::Tensor& a, const at::Tensor& b);

// |a - b| <= atol + rtol * |b| per element (and max_ulp, when >= 0, in ULPs).
TensorDiff CompareTolerance(const std::string& name, const at::Tensor& a, const at::Tensor& b,
                            double rtol, double atol, int64_t max_ulp = -1);

// ULP distance between two values of a floating dtype (fp32, bf16, fp16, fp64).
int64_t UlpDistance(const at::Tensor& a, const at::Tensor& b, int64_t index);

}  // namespace shardcheck
