// An elementwise kind's fused CPU kernel split over threads. Every element's
// update depends on that element alone, so any split gives the same bits as
// one call: the threads only change who computes which range.
//
// The split is the caller's explicit choice (`threads`, shardcheck's
// --threads per rank), never ATen's global thread count: the launcher sets
// OMP_NUM_THREADS=1 and `run` calls at::set_num_threads(1), and both stay so.
#pragma once

#include <cstdint>
#include <functional>

#include "spec/kernel_interface.h"

namespace shardcheck {

// Elements each extra thread must get at least: below it the span runs on
// fewer threads (starting a thread costs about as much as updating this
// many elements). Chunk bounds are multiples of kChunkAlign elements, so
// every chunk but the last starts and ends on a 256-byte boundary of the
// fp32 arrays.
constexpr int64_t kMinElementsPerThread = int64_t{1} << 16;
constexpr int64_t kChunkAlign = 64;

// The first `count` elements of `span` starting at `begin`, as a span.
ElementwiseSpan SubSpan(const ElementwiseSpan& span, int64_t begin, int64_t count);

// How many threads RunElementwiseThreads uses for `numel` elements.
int ThreadsFor(int64_t numel, int threads, int64_t min_per_thread = kMinElementsPerThread);

// Calls fn(begin, count) once for each of ThreadsFor(numel, threads,
// min_per_thread) contiguous chunks covering [0, numel): the calling thread
// runs the first, one std::thread each of the others; returns when all are
// done. `fn` must not throw.
void ForEachChunk(int64_t numel, int threads, int64_t min_per_thread,
                  const std::function<void(int64_t begin, int64_t count)>& fn);

// kernel.run_cpu over `span`, split into ThreadsFor(numel, threads)
// contiguous chunks: the calling thread runs the first, one std::thread
// each of the others. threads <= 1 is a plain call. `min_per_thread`
// replaces kMinElementsPerThread (tests split tiny spans with 1).
void RunElementwiseThreads(const ElementwiseKernel& kernel, const ScalarBlock& scalars,
                           const ElementwiseSpan& span, int threads,
                           int64_t min_per_thread = kMinElementsPerThread);

}  // namespace shardcheck
