#include "testing/oracle.h"

#include <cmath>

namespace shardcheck {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t OracleKey(uint64_t seed, uint64_t step, uint64_t mb, uint64_t pid) {
  return SplitMix64(SplitMix64(SplitMix64(SplitMix64(seed) ^ step) ^ mb) ^ pid);
}

int32_t OracleDraw(uint64_t key, uint64_t e) {
  return static_cast<int32_t>((SplitMix64(key ^ e) >> 40) & 0x7FFF) - 16384;
}

namespace {
constexpr float kTwoPowMinus24 = 5.9604644775390625e-08f;  // 2^-24
constexpr float kTwoPowMinus15 = 3.0517578125e-05f;        // 2^-15

// OracleMasked with the mask key key(seed, step, 0xFFFFFFFE, pid) given.
bool MaskedByKey(uint64_t mask_key, uint64_t e) { return (SplitMix64(mask_key ^ e) >> 61) == 0; }

// Sets the `n` gradient elements at `d` that the zero mask of (seed, step,
// pid) selects to +0: what a sum of masked micro-batches, divided by M, gives.
void ZeroMasked(uint64_t seed, uint64_t step, uint64_t pid, float* d, int64_t n) {
  const uint64_t mask_key = OracleKey(seed, step, kMaskMicroBatch, pid);
  for (int64_t e = 0; e < n; ++e)
    if (MaskedByKey(mask_key, static_cast<uint64_t>(e))) d[e] = 0.0f;
}
}  // namespace

bool OracleMasked(uint64_t seed, uint64_t step, uint64_t pid, uint64_t e) {
  return MaskedByKey(OracleKey(seed, step, kMaskMicroBatch, pid), e);
}

at::Tensor OracleMask(uint64_t seed, uint64_t step, uint64_t pid, at::IntArrayRef shape) {
  at::Tensor out = at::empty(shape, at::kBool);
  bool* d = out.data_ptr<bool>();
  const uint64_t mask_key = OracleKey(seed, step, kMaskMicroBatch, pid);
  const int64_t n = out.numel();
  for (int64_t e = 0; e < n; ++e) d[e] = MaskedByKey(mask_key, static_cast<uint64_t>(e));
  return out;
}

at::Tensor MicroBatchGrad(uint64_t seed, uint64_t step, uint64_t mb, uint64_t pid,
                          at::IntArrayRef shape, int micro_batches, bool zero_mask) {
  at::Tensor out = at::empty(shape, at::kFloat);
  float* d = out.data_ptr<float>();
  const uint64_t key = OracleKey(seed, step, mb, pid);
  const int64_t n = out.numel();
  for (int64_t e = 0; e < n; ++e)
    d[e] = static_cast<float>(OracleDraw(key, static_cast<uint64_t>(e)) * micro_batches) *
           kTwoPowMinus24;
  if (zero_mask) ZeroMasked(seed, step, pid, d, n);
  return out;
}

at::Tensor InitialParam(uint64_t seed, uint64_t pid, at::IntArrayRef shape, c10::ScalarType dtype) {
  at::Tensor out = at::empty(shape, at::kFloat);
  float* d = out.data_ptr<float>();
  const uint64_t key = OracleKey(seed, 0, kInitMicroBatch, pid);
  const int64_t n = out.numel();
  for (int64_t e = 0; e < n; ++e)
    d[e] = static_cast<float>(OracleDraw(key, static_cast<uint64_t>(e))) * kTwoPowMinus15;
  return dtype == at::kFloat ? out : out.to(dtype);
}

at::Tensor PartialGrad(uint64_t seed, uint64_t step, uint64_t pid, at::IntArrayRef shape,
                       int micro_batches, int mb_begin, int mb_end, bool zero_mask) {
  at::Tensor sum = at::zeros(shape, at::kFloat);
  float* s = sum.data_ptr<float>();
  const int64_t n = sum.numel();
  for (int mb = mb_begin; mb < mb_end; ++mb) {
    const uint64_t key = OracleKey(seed, step, static_cast<uint64_t>(mb), pid);
    for (int64_t e = 0; e < n; ++e)
      s[e] += static_cast<float>(OracleDraw(key, static_cast<uint64_t>(e)) * micro_batches) *
              kTwoPowMinus24;
  }
  const float m = static_cast<float>(micro_batches);
  for (int64_t e = 0; e < n; ++e) s[e] = s[e] / m;
  // Masked elements sum +0s: +0 (also for an empty range, like the rest).
  if (zero_mask) ZeroMasked(seed, step, pid, s, n);
  return sum;
}

at::Tensor GlobalGrad(uint64_t seed, uint64_t step, uint64_t pid, at::IntArrayRef shape,
                      int micro_batches, bool zero_mask) {
  return PartialGrad(seed, step, pid, shape, micro_batches, 0, micro_batches, zero_mask);
}

}  // namespace shardcheck
