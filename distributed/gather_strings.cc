#include "distributed/gather_strings.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace shardcheck {

std::vector<std::string> GatherStrings(Communicator& comm, const std::string& s, int root) {
  at::Tensor len = at::full({1}, static_cast<int64_t>(s.size()), at::kLong);
  comm.AllReduce(len, ReduceOp::kMax);
  // An 8-byte length, then the bytes, in a buffer of the longest size.
  const int64_t n = std::max<int64_t>(len.item<int64_t>(), 1) + 8;
  at::Tensor buf = at::zeros({n}, at::kByte);
  const int64_t size = static_cast<int64_t>(s.size());
  std::memcpy(buf.data_ptr(), &size, 8);
  std::memcpy(static_cast<char*>(buf.data_ptr()) + 8, s.data(), s.size());
  std::vector<std::string> out;
  for (const at::Tensor& t : comm.Gather(buf, root)) {
    int64_t k = 0;
    std::memcpy(&k, t.data_ptr(), 8);
    out.emplace_back(static_cast<const char*>(t.data_ptr()) + 8, static_cast<size_t>(k));
  }
  return out;
}

}  // namespace shardcheck
