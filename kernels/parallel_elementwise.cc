#include "kernels/parallel_elementwise.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace shardcheck {

ElementwiseSpan SubSpan(const ElementwiseSpan& span, int64_t begin, int64_t count) {
  ElementwiseSpan s = span;
  s.numel = count;
  s.main = span.main + begin;
  s.grad = span.grad + begin;
  for (float*& st : s.state)
    if (st) st += begin;
  if (span.model_bf16) s.model_bf16 = span.model_bf16 + begin;
  if (span.model_fp32) s.model_fp32 = span.model_fp32 + begin;
  return s;
}

int ThreadsFor(int64_t numel, int threads, int64_t min_per_thread) {
  if (threads <= 1) return 1;
  const int64_t useful = std::max<int64_t>(1, numel / std::max<int64_t>(1, min_per_thread));
  return static_cast<int>(std::min<int64_t>(threads, useful));
}

void ForEachChunk(int64_t numel, int threads, int64_t min_per_thread,
                  const std::function<void(int64_t begin, int64_t count)>& fn) {
  const int n = ThreadsFor(numel, threads, min_per_thread);
  if (n == 1) return fn(0, numel);
  // Equal chunks rounded up to kChunkAlign; the last takes the rest.
  const int64_t per = (numel / n + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(n - 1));
  for (int t = 1; t < n; ++t) {
    const int64_t begin = std::min(numel, per * t);
    const int64_t end = t + 1 == n ? numel : std::min(numel, per * (t + 1));
    if (end <= begin) break;
    workers.emplace_back([&fn, begin, end] { fn(begin, end - begin); });
  }
  fn(0, std::min(per, numel));
  for (std::thread& w : workers) w.join();
}

void RunElementwiseThreads(const ElementwiseKernel& kernel, const ScalarBlock& scalars,
                           const ElementwiseSpan& span, int threads, int64_t min_per_thread) {
  if (ThreadsFor(span.numel, threads, min_per_thread) == 1) return kernel.run_cpu(scalars, span);
  ForEachChunk(span.numel, threads, min_per_thread, [&](int64_t begin, int64_t count) {
    kernel.run_cpu(scalars, SubSpan(span, begin, count));
  });
}

}  // namespace shardcheck
