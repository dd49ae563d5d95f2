// Tensor ops the reference needs correctly rounded, where ATen's own may
// not be on every libtorch or device: every op of docs/optimizers.md is one
// IEEE op. The other ops the references use are exact on both devices as
// they stand: tensor * scalar and tensor + scalar (one rounding in fp32),
// tensor - tensor, sign (0 for 0 on both), and the RNE cast to bf16.
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

// t / d as IEEE division on every device. ATen's CUDA `tensor / scalar`
// multiplies by the scalar's reciprocal, which is not division (it differs
// in the last bit for many divisors); a 0-dim tensor on t's device makes it
// a tensor-tensor division, which CUDA and the CPU both do exactly.
inline at::Tensor Divide(const at::Tensor& t, float d) {
  return t / at::scalar_tensor(d, t.options());
}

}  // namespace shardcheck
