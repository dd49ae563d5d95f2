// Property tests (RapidCheck) of the thread split of the fused CPU loops
// (kernels/parallel_elementwise.h): over generated element counts, thread
// counts and per-thread minimums,
//   - ForEachChunk's chunks cover [0, numel) exactly once, in order: no gap,
//     no overlap, the remainder never dropped, every inner bound on a
//     kChunkAlign (64-element) boundary, at most ThreadsFor(...) chunks;
//   - RunElementwiseThreads with T threads gives the same bits (main param,
//     every state key, the bf16 or fp32 write-back) as one call of the
//     kind's kernel, for every elementwise kind of the registry.
// The element counts lean on the split's edges: small counts, counts whose
// quotient by the thread count is a multiple of 64 (where a split that
// rounds its chunk size up to 64 and forgets the rest would drop the
// remainder), and large counts. A failure prints the shrunk case.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/parallel_elementwise.h"
#include "spec/config.h"
#include "spec/registry.h"

namespace shardcheck {
namespace {

// A split: ForEachChunk(numel, threads, min_per_thread, ...).
struct SplitCase {
  int64_t numel = 0;
  int threads = 1;
  int64_t min_per_thread = 1;
};

void showValue(const SplitCase& c, std::ostream& os) {
  os << "numel " << c.numel << ", threads " << c.threads << ", min_per_thread " << c.min_per_thread
     << " (numel / threads " << c.numel / std::max(1, c.threads) << ")";
}

// Element counts for `threads` threads: any count below `max_small`, a
// count whose quotient by `threads` is a multiple of kChunkAlign (plus a
// remainder below `threads`), or any count below `max_large`.
rc::Gen<int64_t> GenNumel(int threads, int64_t max_small, int64_t max_large) {
  const int64_t t = std::max(1, threads);
  return rc::gen::oneOf(
      rc::gen::inRange<int64_t>(0, max_small),
      rc::gen::map(rc::gen::pair(rc::gen::inRange<int64_t>(1, 64), rc::gen::inRange<int64_t>(0, t)),
                   [t](const std::pair<int64_t, int64_t>& q) {
                     return t * kChunkAlign * q.first + q.second;
                   }),
      rc::gen::inRange<int64_t>(0, max_large));
}

rc::Gen<SplitCase> GenSplitCase() {
  return rc::gen::exec([] {
    SplitCase c;
    c.threads = *rc::gen::inRange(0, 65);
    // Mostly 1: tiny spans are split too, so chunk edges fall inside them.
    c.min_per_thread = *rc::gen::weightedElement<int64_t>(
        {{6, 1}, {1, 64}, {1, 1000}, {1, kMinElementsPerThread}});
    c.numel = *GenNumel(c.threads, 100000, int64_t{1} << 30);
    return c;
  });
}

// The chunks ForEachChunk hands out, sorted by their start.
std::vector<std::pair<int64_t, int64_t>> Chunks(const SplitCase& c) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  ForEachChunk(c.numel, c.threads, c.min_per_thread, [&](int64_t begin, int64_t count) {
    const std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(begin, count);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

RC_GTEST_PROP(ThreadSplitProp, ChunksCoverEveryElementOnceInOrder, ()) {
  const SplitCase c = *GenSplitCase();
  const int used = ThreadsFor(c.numel, c.threads, c.min_per_thread);
  RC_ASSERT(used >= 1);
  RC_ASSERT(used <= std::max(1, c.threads));
  // Each extra thread gets at least min_per_thread elements on average.
  if (used > 1) RC_ASSERT(used * c.min_per_thread <= c.numel);
  const auto chunks = Chunks(c);
  RC_ASSERT(!chunks.empty());
  RC_ASSERT(chunks.size() <= static_cast<size_t>(used));
  int64_t covered = 0;  // [0, covered) is covered once so far
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto [begin, count] = chunks[i];
    RC_LOG() << "chunk " << i << ": [" << begin << ", " << begin + count << ")\n";
    RC_ASSERT(begin == covered);  // no gap, no overlap
    if (chunks.size() > 1) RC_ASSERT(count > 0);
    if (i + 1 < chunks.size()) RC_ASSERT((begin + count) % kChunkAlign == 0);
    covered += count;
  }
  RC_ASSERT(covered == c.numel);  // the remainder is never dropped
}

// Index of the first element whose bytes differ (elements of `size`
// bytes), or -1.
int64_t FirstDifference(const void* a, const void* b, int64_t n, size_t size) {
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(x + i * size, y + i * size, size) != 0) return i;
  return -1;
}

// One kernel's buffers: main param, grad, state keys, write-backs.
struct Buffers {
  std::vector<float> main, grad, model_fp32;
  std::vector<std::vector<float>> state;
  std::vector<uint16_t> model_bf16;

  Buffers(int64_t n, int keys, uint32_t seed) : main(n), grad(n), model_fp32(n), model_bf16(n) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& x : main) x = u(rng);
    for (float& x : grad) x = u(rng);
    state.assign(static_cast<size_t>(keys), std::vector<float>(static_cast<size_t>(n), 0.0f));
  }

  // `write_back`: 0 none, 1 fp32, 2 bf16.
  ElementwiseSpan Span(int write_back) {
    ElementwiseSpan s;
    s.numel = static_cast<int64_t>(main.size());
    s.main = main.data();
    s.grad = grad.data();
    for (size_t k = 0; k < state.size(); ++k) s.state[k] = state[k].data();
    if (write_back == 1) s.model_fp32 = model_fp32.data();
    if (write_back == 2) s.model_bf16 = model_bf16.data();
    return s;
  }
};

struct KernelCase {
  std::string kind;
  SplitCase split;
  int write_back = 0;  // 0 none, 1 fp32, 2 bf16
  int steps = 1;
  uint32_t seed = 0;
};

void showValue(const KernelCase& c, std::ostream& os) {
  os << "kind " << c.kind << ", ";
  showValue(c.split, os);
  os << ", write_back "
     << (c.write_back == 0   ? "none"
         : c.write_back == 1 ? "fp32"
                             : "bf16")
     << ", steps " << c.steps << ", seed " << c.seed;
}

rc::Gen<KernelCase> GenKernelCase() {
  return rc::gen::exec([] {
    KernelCase c;
    c.kind = *rc::gen::elementOf(ElementwiseKinds());
    c.split.threads = *rc::gen::inRange(1, 9);
    c.split.min_per_thread = 1;
    c.split.numel = *GenNumel(c.split.threads, 3000, 200000);
    c.write_back = *rc::gen::inRange(0, 3);
    c.steps = *rc::gen::inRange(1, 3);
    c.seed = *rc::gen::arbitrary<uint32_t>();
    return c;
  });
}

RC_GTEST_PROP(ThreadSplitProp, FusedKernelWithThreadsBitwiseEqualsOneThread, ()) {
  const KernelCase c = *GenKernelCase();
  const OptimizerEntry& entry = FindOptimizer(c.kind);
  OptimizerConfig config = OptimizerConfig::Defaults(c.kind);
  config.Set("weight_decay", 0.05);
  const int keys = entry.elementwise.state_count;
  const int64_t n = c.split.numel;
  Buffers one(n, keys, c.seed), split(n, keys, c.seed);
  for (int t = 1; t <= c.steps; ++t) {
    ScalarBlock scalars;
    entry.elementwise.prepare({&config, t, config.lr(), config.weight_decay()}, scalars);
    entry.elementwise.run_cpu(scalars, one.Span(c.write_back));
    RunElementwiseThreads(entry.elementwise, scalars, split.Span(c.write_back), c.split.threads,
                          c.split.min_per_thread);
  }
  RC_ASSERT(FirstDifference(split.main.data(), one.main.data(), n, sizeof(float)) == -1);
  for (int k = 0; k < keys; ++k) {
    RC_LOG() << "state key " << k << "\n";
    RC_ASSERT(FirstDifference(split.state[k].data(), one.state[k].data(), n, sizeof(float)) == -1);
  }
  RC_ASSERT(FirstDifference(split.model_fp32.data(), one.model_fp32.data(), n, sizeof(float)) ==
            -1);
  RC_ASSERT(FirstDifference(split.model_bf16.data(), one.model_bf16.data(), n, sizeof(uint16_t)) ==
            -1);
}

}  // namespace
}  // namespace shardcheck
