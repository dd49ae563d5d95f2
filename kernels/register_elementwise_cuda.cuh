// How RegisterElementwise<Op> registers an elementwise kind in the CUDA
// build: the CPU loop and the CUDA launch of the same per-element Update.
// Included by the generated registration list alone, which the CUDA build
// compiles with nvcc.
#pragma once

#include "kernels/elementwise.h"
#include "kernels/elementwise_cuda.cuh"

namespace shardcheck {

template <class Op>
void RegisterElementwise(OptimizerSpec spec) {
  ElementwiseKernel kernel = MakeElementwiseKernel<Op>();
  kernel.run_cuda = &RunElementwiseCuda<Op>;
  RegisterOptimizer({std::move(spec), kernel, nullptr});
}

}  // namespace shardcheck
