// The generic CUDA launch around every elementwise optimizer's per-element
// Update (kernels/elementwise.h), written once: a grid-stride loop that
// loads an element's state, runs the same SHARDCHECK_HD Update the CPU loop
// runs, stores it and writes the model param back. Compiled with
// -fmad=false -prec-div=true -prec-sqrt=true (cmake/torch_cuda.cmake): the
// device performs the op sequence of docs/optimizers.md bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "kernels/elementwise.h"
#include "spec/error.h"

namespace shardcheck {

namespace detail {

struct NoWriteBack {
  __device__ void operator()(int64_t, float) const {}
};
struct Bf16WriteBack {
  uint16_t* out;
  __device__ void operator()(int64_t i, float v) const { out[i] = RoundToBf16(v); }
};
struct Fp32WriteBack {
  float* out;
  __device__ void operator()(int64_t i, float v) const { out[i] = v; }
};

template <class Op, class WriteBack>
__global__ void ElementwiseCudaKernel(typename Op::Scalars s, ElementwiseSpan span,
                                      WriteBack write_back) {
  constexpr int kStates = Op::kStateCount;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < span.numel;
       i += stride) {
    float local[kStates > 0 ? kStates : 1];
    for (int k = 0; k < kStates; ++k) local[k] = span.state[k][i];
    float p = span.main[i];
    Op::Update(s, p, span.grad[i], local);
    span.main[i] = p;
    for (int k = 0; k < kStates; ++k) span.state[k][i] = local[k];
    write_back(i, p);
  }
}

template <class Op, class WriteBack>
void Launch(const typename Op::Scalars& s, const ElementwiseSpan& span, cudaStream_t stream,
            WriteBack wb) {
  constexpr int kThreads = 256;
  const int64_t blocks = (span.numel + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(blocks < 65535 * 8 ? blocks : 65535 * 8);
  ElementwiseCudaKernel<Op><<<grid, kThreads, 0, stream>>>(s, span, wb);
}

}  // namespace detail

// The CUDA launch of `Op` over one span of device memory, on `stream` (a
// cudaStream_t; null: the legacy default stream). Asynchronous; throws Error
// when the launch fails.
template <class Op>
void RunElementwiseCuda(const ScalarBlock& block, const ElementwiseSpan& span, void* stream) {
  if (span.numel == 0) return;
  typename Op::Scalars s;
  std::memcpy(&s, block.bytes, sizeof(s));
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (span.model_bf16)
    detail::Launch<Op>(s, span, st, detail::Bf16WriteBack{span.model_bf16});
  else if (span.model_fp32)
    detail::Launch<Op>(s, span, st, detail::Fp32WriteBack{span.model_fp32});
  else
    detail::Launch<Op>(s, span, st, detail::NoWriteBack{});
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw Error(std::string("fused kernel launch failed: ") + cudaGetErrorName(e) + ": " +
                cudaGetErrorString(e));
}

}  // namespace shardcheck
