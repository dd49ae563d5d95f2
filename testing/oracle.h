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
// The `mb` of the zero mask's key: key(seed, step, 0xFFFFFFFE, pid).
inline constexpr uint64_t kMaskMicroBatch = 0xFFFFFFFEull;

uint64_t SplitMix64(uint64_t x);
uint64_t OracleKey(uint64_t seed, uint64_t step, uint64_t mb, uint64_t pid);
// In [-16384, 16383].
int32_t OracleDraw(uint64_t key, uint64_t e);

// The zero mask (oracle models `oracle:sparse-<model>`): true when element
// `e` of param `pid` has gradient exactly 0 at `step` in every micro-batch,
// i.e. (splitmix64(key(seed, step, 0xFFFFFFFE, pid) ^ e) >> 61) == 0. One
// element in eight, a new set each step; initial params are never masked.
bool OracleMasked(uint64_t seed, uint64_t step, uint64_t pid, uint64_t e);

// OracleMasked for every element of a param of `shape`: a kBool tensor of
// `shape`, true where the gradient is zeroed.
at::Tensor OracleMask(uint64_t seed, uint64_t step, uint64_t pid, at::IntArrayRef shape);

// Micro-batch gradient g[step][mb][pid] of a param of `shape`: fp32,
// float(draw * M) * 2^-24. With `zero_mask`, +0 where OracleMasked, the
// same bits as without elsewhere.
at::Tensor MicroBatchGrad(uint64_t seed, uint64_t step, uint64_t mb, uint64_t pid,
                          at::IntArrayRef shape, int micro_batches, bool zero_mask = false);

// Initial param p0[pid]: float(draw(key(seed, 0, 0xFFFFFFFF, pid), e)) * 2^-15,
// rounded (RNE) to `dtype` (fp32 or bf16).
at::Tensor InitialParam(uint64_t seed, uint64_t pid, at::IntArrayRef shape, c10::ScalarType dtype);

// Sum of micro-batches [mb_begin, mb_end) of one param, each in fp32 in
// increasing order, divided by M: the gradient a DP rank contributes before
// the SUM reduction. [0, M) gives the global gradient. With `zero_mask`,
// the sum of the masked micro-batch gradients: +0 where OracleMasked, the
// same bits as without elsewhere.
at::Tensor PartialGrad(uint64_t seed, uint64_t step, uint64_t pid, at::IntArrayRef shape,
                       int micro_batches, int mb_begin, int mb_end, bool zero_mask = false);

// The global gradient G[step][pid] (all M micro-batches; `zero_mask` as in
// PartialGrad).
at::Tensor GlobalGrad(uint64_t seed, uint64_t step, uint64_t pid, at::IntArrayRef shape,
                      int micro_batches, bool zero_mask = false);

}  // namespace shardcheck
