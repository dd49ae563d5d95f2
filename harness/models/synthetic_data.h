// Synthetic data for the tiny models (docs/models.md): the sequence-repeat
// task. Every batch is a pure function of (seed, step, micro-batch), drawn
// with SplitMix64 (harness/oracle.h), never from a global RNG.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace shardcheck {

// Targets that carry no loss (at::cross_entropy_loss's default ignore_index).
inline constexpr int64_t kIgnoreIndex = -100;

// Each sequence repeats a block of `period` random tokens: s[t] = a[t mod period]
// for t = 0..seq, a[j] uniform in [0, vocab). The model reads s[0..seq) and
// predicts s[1..seq]; only the targets s[t+1] with t+1 >= period are scored,
// since they equal s[t+1-period], which the model has already seen.
struct RepeatTask {
  int64_t batch = 4;  // sequences per micro-batch
  int64_t seq = 32;   // input length (the model's positions)
  int64_t vocab = 128;
  int64_t period = 8;  // length of the repeated block, 1 <= period <= seq

  // Scored targets per sequence: seq - period + 1.
  int64_t ScoredPerSequence() const { return seq - period + 1; }
};

struct TokenBatch {
  at::Tensor tokens;   // (batch, seq) int64, the model's input
  at::Tensor targets;  // (batch, seq) int64, the next token, or kIgnoreIndex where unscored
};

// Micro-batch `mb` of step `step`: a[b][j] = hi32(SplitMix64(key ^ (b*period + j)))
// * vocab >> 32, key = SplitMix64(SplitMix64(SplitMix64(seed ^ kDataDomain) ^ step) ^ mb).
// Throws Error on an invalid task.
TokenBatch RepeatTaskBatch(const RepeatTask& task, uint64_t seed, int64_t step, int mb);

}  // namespace shardcheck
