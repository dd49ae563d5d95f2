// Which x86-64 vector instruction set the fused CPU loops use, chosen at
// run time (kernels/elementwise.h): the binaries are built for the x86-64
// baseline (SSE2, no -march) and carry an AVX2 and an AVX-512 instance of
// every loop besides, so they travel to any x86-64 machine and still use
// the widest vectors the machine has. Every instance performs the same IEEE
// op sequence per element (no FMA: -ffp-contract=off; no -ffast-math), so
// the choice never changes a bit (kernels/parallel_elementwise_test.cc).
//
// The choice is the widest set this CPU supports, lowered by the
// environment variable SHARDCHECK_CPU_ISA=baseline|avx2|avx512 (read once;
// a name outside that list, or a set this CPU lacks, throws Error naming
// the variable). Other builds (the CUDA build, other architectures) have
// the baseline loop only.
#pragma once

// Whether this build has the AVX2 and AVX-512 instances: x86-64 host code
// of GCC or Clang, outside the CUDA build (nvcc compiles its registration
// list).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(SHARDCHECK_BUILT_WITH_CUDA) && !defined(__CUDACC__)
#define SHARDCHECK_CPU_ISA_DISPATCH 1
#else
#define SHARDCHECK_CPU_ISA_DISPATCH 0
#endif

#include <string>
#include <vector>

namespace shardcheck {

enum class CpuIsa { kBaseline, kAvx2, kAvx512 };

std::string CpuIsaName(CpuIsa isa);  // "baseline" | "avx2" | "avx512"

// Every set this build has a loop instance for and this CPU runs, baseline
// first.
std::vector<CpuIsa> SupportedCpuIsas();

// The set the fused loops use now: the widest supported one, or
// SHARDCHECK_CPU_ISA's; the first call decides (thread-safe).
CpuIsa ActiveCpuIsa();

// Makes the loops use `isa` from now on (tests and benchmarks comparing
// instances). Throws Error when `isa` is not supported. Not to be called
// while a kernel runs on another thread.
void SetActiveCpuIsa(CpuIsa isa);

}  // namespace shardcheck
