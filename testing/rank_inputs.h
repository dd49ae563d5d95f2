// Inputs of collective tests, in the style of nccl-tests: pure functions of
// (seed, rank, element index) drawn with the oracle's SplitMix64, so every
// rank can compute every other rank's input, and so the expected result of
// any collective, on its own.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace shardcheck {

// The i-th draw of `rank`'s stream.
uint64_t RankDraw(uint64_t seed, int rank, int64_t i);

// Small integers as `dtype`: [-64, 63], or [-8, 7] for bf16, so that every
// sum over up to 32 ranks is exact in every dtype (bf16 holds integers up to
// 256 exactly) and a sum has one right answer whatever the reduction order.
// Compare with RankValues(..., dtype).to(kDouble), not with a kDouble draw.
at::Tensor RankValues(uint64_t seed, int rank, int64_t n, at::ScalarType dtype);

// Arbitrary bit patterns viewed as `dtype` (NaNs and denormals included):
// what a byte-moving collective must deliver unchanged.
at::Tensor RankBits(uint64_t seed, int rank, int64_t n, at::ScalarType dtype);

}  // namespace shardcheck
