// The gradient oracle (docs/oracle.md): exact-sum gradients and initial
// params as pure functions of (seed, step, micro-batch, param id, element).
//
// Every micro-batch gradient is an integer multiple of 2^-24 scaled by M, so
// any partial sum over micro-batches, divided by M, is exact in fp32: the
// global gradient is bitwise the same for every DP size and reduction order.
// External tools reproduce these values; change nothing without changing
// the contract.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace shardcheck {

inline constexpr int kDefaultMicroBatches = 24;
inline constexpr uint64_t kInitMicroBatch = 0xFFFFFFFFull;

uint64_t SplitMix64(uint64_t x);
uint64_t OracleKey(uint64_t seed, uint64_t step, uint64_t mb, uint64_t pid);
// In [-16384, 16383].
int32_t OracleDraw(uint64_t key, uint64_t e);

// Micro-batch gradient g[step][mb][pid] of a param of `shape`: fp32,
// float(draw * M) * 2^-24.
at::Tensor MicroBatchGrad(uint64_t seed, uint64_t step, uint64_t mb, uint64_t pid,
                          at::IntArrayRef shape, int micro_batches);

// Initial param p0[pid]: float(draw(key(seed, 0, 0xFFFFFFFF, pid), e)) * 2^-15,
// rounded (RNE) to `dtype` (fp32 or bf16).
at::Tensor InitialParam(uint64_t seed, uint64_t pid, at::IntArrayRef shape, c10::ScalarType dtype);

// Sum of micro-batches [mb_begin, mb_end) of one param, each in fp32 in
// increasing order, divided by M: the gradient a DP rank contributes before
// the SUM reduction. [0, M) gives the global gradient.
at::Tensor PartialGrad(uint64_t seed, uint64_t step, uint64_t pid, at::IntArrayRef shape,
                       int micro_batches, int mb_begin, int mb_end);

// The global gradient G[step][pid] (all M micro-batches).
at::Tensor GlobalGrad(uint64_t seed, uint64_t step, uint64_t pid, at::IntArrayRef shape,
                      int micro_batches);

}  // namespace shardcheck
