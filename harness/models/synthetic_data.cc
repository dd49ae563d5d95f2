#include "harness/models/synthetic_data.h"

#include <string>

#include "spec/error.h"
#include "testing/oracle.h"

namespace shardcheck {

namespace {
// Separates the data stream from the oracle's and the init's streams.
constexpr uint64_t kDataDomain = 0xDA7A5EEDDA7A5EEDull;
}  // namespace

TokenBatch RepeatTaskBatch(const RepeatTask& task, uint64_t seed, int64_t step, int mb) {
  if (task.batch < 1 || task.seq < 1 || task.vocab < 1 || task.vocab > (int64_t{1} << 31) ||
      task.period < 1 || task.period > task.seq)
    throw Error("invalid repeat task: batch " + std::to_string(task.batch) + ", seq " +
                std::to_string(task.seq) + ", vocab " + std::to_string(task.vocab) + ", period " +
                std::to_string(task.period));
  const uint64_t key =
      SplitMix64(SplitMix64(SplitMix64(seed ^ kDataDomain) ^ static_cast<uint64_t>(step)) ^
                 static_cast<uint64_t>(static_cast<uint32_t>(mb)));
  TokenBatch out;
  out.tokens = at::empty({task.batch, task.seq}, at::kLong);
  out.targets = at::empty({task.batch, task.seq}, at::kLong);
  int64_t* tok = out.tokens.data_ptr<int64_t>();
  int64_t* tgt = out.targets.data_ptr<int64_t>();
  const uint64_t vocab = static_cast<uint64_t>(task.vocab);
  for (int64_t b = 0; b < task.batch; ++b) {
    auto symbol = [&](int64_t t) {
      const uint64_t j = static_cast<uint64_t>(b * task.period + t % task.period);
      return static_cast<int64_t>(((SplitMix64(key ^ j) >> 32) * vocab) >> 32);
    };
    for (int64_t t = 0; t < task.seq; ++t) {
      tok[b * task.seq + t] = symbol(t);
      tgt[b * task.seq + t] = t + 1 >= task.period ? symbol(t + 1) : kIgnoreIndex;
    }
  }
  return out;
}

}  // namespace shardcheck
