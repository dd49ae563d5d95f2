#include "distributed/host_staging.h"

#include <sys/mman.h>

namespace shardcheck {

at::Tensor EmptyHostStaging(int64_t numel, c10::ScalarType dtype) {
  at::Tensor t = at::empty({numel}, at::TensorOptions().dtype(dtype));
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (t.nbytes() < 2 * kHuge) return t;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(t.data_ptr());
  const uintptr_t end = begin + static_cast<uintptr_t>(t.nbytes());
  const uintptr_t lo = (begin + kHuge - 1) & ~(kHuge - 1), hi = end & ~(kHuge - 1);
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);  // advisory
  return t;
}

at::Tensor HostStagingCopy(const at::Tensor& t) {
  at::Tensor out = EmptyHostStaging(t.numel(), t.scalar_type());
  out.copy_(t.reshape({-1}));
  return out.view(t.sizes());
}

}  // namespace shardcheck
