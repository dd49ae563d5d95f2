// How RegisterElementwise<Op> registers an elementwise kind in a build
// without CUDA: the fused kernel's CPU loop only. Included by the generated
// registration list alone (cmake/registry.cmake), before the optimizers/
// headers; kernels/register_elementwise_cuda.cuh is its CUDA counterpart.
#pragma once

#include "kernels/elementwise.h"

namespace shardcheck {

template <class Op>
void RegisterElementwise(OptimizerSpec spec) {
  RegisterOptimizer({std::move(spec), MakeElementwiseKernel<Op>(), nullptr});
}

}  // namespace shardcheck
