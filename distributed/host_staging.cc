#include "distributed/host_staging.h"

namespace shardcheck {

at::Tensor EmptyHostStaging(int64_t numel, c10::ScalarType dtype) {
  return at::empty({numel}, at::TensorOptions().dtype(dtype));
}

at::Tensor HostStagingCopy(const at::Tensor& t) {
  at::Tensor out = EmptyHostStaging(t.numel(), t.scalar_type());
  out.copy_(t.reshape({-1}));
  return out.view(t.sizes());
}

}  // namespace shardcheck
