// The generic loop around every elementwise optimizer's fused kernel,
// written once. An optimizer (optimizers/*.h) supplies an Op:
//
//   struct Op {
//     struct Scalars { ... };                     // trivially copyable fp32 scalars
//     static constexpr int kStateCount = K;       // its schema's key count
//     static Scalars Prepare(const StepContext&); // once per step and param group
//     SHARDCHECK_HD static void Update(const Scalars&, float& p, float g, float* state);
//   };
//
// `Update` is one element's update in the op order of docs/optimizers.md,
// with `state` the element's K state values in schema order (read, then
// written back by the loop). It is inline and __host__ __device__ under
// nvcc, so the same function serves this CPU loop and a CUDA kernel. The
// project is compiled with -ffp-contract=off (and nvcc with -fmad=false):
// no op is contracted into an FMA, so both produce the reference's bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu_isa.h"
#include "spec/kernel_interface.h"
#include "spec/optimizer_spec.h"
#include "spec/registry.h"

#if defined(__CUDACC__)
#define SHARDCHECK_HD __host__ __device__
#else
#define SHARDCHECK_HD
#endif

namespace shardcheck {

// fp32 -> bf16 bits, rounded to nearest even (NaN -> 0x7FC0), as
// c10::BFloat16's constructor rounds.
SHARDCHECK_HD inline uint16_t RoundToBf16(float x) {
#if defined(__CUDA_ARCH__)
  const uint32_t u = __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
#endif
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  const uint32_t bias = ((u >> 16) & 1u) + 0x7fffu;
  return static_cast<uint16_t>((u + bias) >> 16);
}

namespace detail {

#if SHARDCHECK_CPU_ISA_DISPATCH
// Inlined into each ISA instance below, so that the loop is vectorized for
// that instance's target (an out-of-line copy would be the baseline's).
#define SHARDCHECK_LOOP_INLINE __attribute__((always_inline)) inline
#else
#define SHARDCHECK_LOOP_INLINE inline
#endif

// One pass over the span: load, update, store, then `write_back(i, p)`.
template <class Op, class WriteBack>
SHARDCHECK_LOOP_INLINE void ElementwiseLoop(const typename Op::Scalars& s,
                                            const ElementwiseSpan& span, WriteBack write_back) {
  constexpr int kStates = Op::kStateCount;
  float* __restrict p = span.main;
  const float* __restrict g = span.grad;
  float* st[kStates > 0 ? kStates : 1];
  for (int k = 0; k < kStates; ++k) st[k] = span.state[k];
  const int64_t n = span.numel;
  for (int64_t i = 0; i < n; ++i) {
    float local[kStates > 0 ? kStates : 1];
    for (int k = 0; k < kStates; ++k) local[k] = st[k][i];
    float pi = p[i];
    Op::Update(s, pi, g[i], local);
    p[i] = pi;
    for (int k = 0; k < kStates; ++k) st[k][i] = local[k];
    write_back(i, pi);
  }
}

// The CPU loop of `Op` over one span, with the write-back the span asks for.
template <class Op>
SHARDCHECK_LOOP_INLINE void RunElementwiseCpuBody(const ScalarBlock& block,
                                                  const ElementwiseSpan& span) {
  typename Op::Scalars s;
  std::memcpy(&s, block.bytes, sizeof(s));
  if (span.model_bf16) {
    uint16_t* out = span.model_bf16;
    ElementwiseLoop<Op>(s, span, [out](int64_t i, float v) { out[i] = RoundToBf16(v); });
  } else if (span.model_fp32) {
    float* out = span.model_fp32;
    ElementwiseLoop<Op>(s, span, [out](int64_t i, float v) { out[i] = v; });
  } else {
    ElementwiseLoop<Op>(s, span, [](int64_t, float) {});
  }
}

// One instance of the loop per instruction set (kernels/cpu_isa.h): the
// same source, vectorized by the compiler for that target.
template <class Op>
void RunElementwiseCpuBaseline(const ScalarBlock& block, const ElementwiseSpan& span) {
  RunElementwiseCpuBody<Op>(block, span);
}
#if SHARDCHECK_CPU_ISA_DISPATCH
template <class Op>
__attribute__((target("avx2"))) void RunElementwiseCpuAvx2(const ScalarBlock& block,
                                                           const ElementwiseSpan& span) {
  RunElementwiseCpuBody<Op>(block, span);
}
template <class Op>
__attribute__((target("avx512f"))) void RunElementwiseCpuAvx512(const ScalarBlock& block,
                                                                const ElementwiseSpan& span) {
  RunElementwiseCpuBody<Op>(block, span);
}
#endif

}  // namespace detail

// The CPU loop of `Op` over one span (one thread), in the instance of
// ActiveCpuIsa(): the same bits whichever runs.
template <class Op>
void RunElementwiseCpu(const ScalarBlock& block, const ElementwiseSpan& span) {
#if SHARDCHECK_CPU_ISA_DISPATCH
  switch (ActiveCpuIsa()) {
    case CpuIsa::kAvx512:
      return detail::RunElementwiseCpuAvx512<Op>(block, span);
    case CpuIsa::kAvx2:
      return detail::RunElementwiseCpuAvx2<Op>(block, span);
    case CpuIsa::kBaseline:
      break;
  }
#endif
  detail::RunElementwiseCpuBaseline<Op>(block, span);
}

// Registers an elementwise kind whose fused kernel is `Op`: its CPU loop,
// and in the CUDA build its CUDA launch too. Call it only from a
// SHARDCHECK_REGISTER_OPTIMIZERS body: the generated registration list
// defines it (kernels/register_elementwise.h, or
// kernels/register_elementwise_cuda.cuh compiled by nvcc), so that the CUDA
// launch is compiled once, in that list.
template <class Op>
void RegisterElementwise(OptimizerSpec spec);

// The registry's type-erased form of `Op` (its CPU loop).
template <class Op>
ElementwiseKernel MakeElementwiseKernel() {
  using Scalars = typename Op::Scalars;
  static_assert(std::is_trivially_copyable_v<Scalars>, "Scalars must be trivially copyable");
  static_assert(sizeof(Scalars) <= sizeof(ScalarBlock::bytes), "Scalars do not fit a ScalarBlock");
  static_assert(Op::kStateCount <= kMaxStateKeys, "too many state keys");
  ElementwiseKernel k;
  k.state_count = Op::kStateCount;
  k.prepare = [](const StepContext& ctx, ScalarBlock& out) {
    const Scalars s = Op::Prepare(ctx);
    std::memcpy(out.bytes, &s, sizeof(s));
  };
  k.run_cpu = &RunElementwiseCpu<Op>;
  return k;
}

}  // namespace shardcheck
