#include "testing/rank_inputs.h"

#include "testing/oracle.h"

namespace shardcheck {

uint64_t RankDraw(uint64_t seed, int rank, int64_t i) {
  return SplitMix64(SplitMix64(SplitMix64(seed) ^ static_cast<uint64_t>(rank)) ^
                    static_cast<uint64_t>(i));
}

at::Tensor RankValues(uint64_t seed, int rank, int64_t n, at::ScalarType dtype) {
  const int64_t half = dtype == at::kBFloat16 ? 8 : 64;
  at::Tensor t = at::empty({n}, at::kLong);
  auto* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    p[i] = static_cast<int64_t>((RankDraw(seed, rank, i) >> 40) % static_cast<uint64_t>(2 * half)) -
           half;
  return t.to(dtype);
}

at::Tensor RankBits(uint64_t seed, int rank, int64_t n, at::ScalarType dtype) {
  const int64_t item = static_cast<int64_t>(c10::elementSize(dtype));
  at::Tensor t = at::empty({n * item}, at::kByte);
  auto* p = t.data_ptr<uint8_t>();
  for (int64_t i = 0; i < n * item; ++i) p[i] = static_cast<uint8_t>(RankDraw(seed, rank, i) >> 56);
  return t.view(dtype);
}

}  // namespace shardcheck
