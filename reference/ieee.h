// Tensor ops the reference needs correctly rounded, where ATen's own may
// not be on every libtorch: every op of docs/optimizers.md is one IEEE op.
#pragma once

#include <ATen/ATen.h>

namespace shardcheck {

// sqrt of an fp32 tensor, correctly rounded. ATen's vectorized fp32 sqrt is
// not on every build: pip torch 2.11 on an AVX-512 CPU (MKL) returned a
// result one ULP off for 3,444 of 20,000 random floats (measured here);
// Debian's libtorch 1.13 and CUDA are exact. The fp32 rounding of a double
// sqrt is exact: double carries more than 2 * 24 + 2 bits, so the double
// result cannot round to the wrong float (0 of the same 20,000 wrong).
inline at::Tensor CorrectlyRoundedSqrt(const at::Tensor& t) {
  return t.to(at::kDouble).sqrt().to(t.scalar_type());
}

}  // namespace shardcheck
