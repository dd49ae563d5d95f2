#include "harness/launch/comm_selftest.h"

#include "testing/oracle.h"
#include "testing/rank_inputs.h"

namespace shardcheck {
namespace {

class Checker {
 public:
  Checker(Communicator& comm, uint64_t seed, int local_rank)
      : comm_(comm),
        seed_(seed),
        device_(comm.backend() == "nccl" ? at::Device(at::kCUDA, static_cast<int8_t>(local_rank))
                                         : at::Device(at::kCPU)) {}

  CollectiveCheckReport Run() {
    const int world = comm_.size();
    const int me = comm_.rank();
    for (int64_t n : {int64_t{1}, int64_t{1037}, int64_t{65536}}) {
      for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kLong, at::kBFloat16}) {
        const uint64_t s = Seed(n, dt, 1);
        at::Tensor out = at::empty({n}, OnDevice(dt));
        comm_.ReduceScatterSum(RankValues(s, me, world * n, dt).to(device_), out);
        at::Tensor sum = at::zeros({world * n}, at::kDouble);
        for (int r = 0; r < world; ++r) sum += RankValues(s, r, world * n, dt).to(at::kDouble);
        Compare(out, sum.narrow(0, me * n, n).to(dt), "reduce_scatter", dt, n);

        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
          at::Tensor t = RankValues(s + 1, me, n, dt).to(device_);
          comm_.AllReduce(t, op);
          at::Tensor expected = RankValues(s + 1, 0, n, dt).to(at::kDouble);
          for (int r = 1; r < world; ++r) {
            at::Tensor v = RankValues(s + 1, r, n, dt).to(at::kDouble);
            expected = op == ReduceOp::kSum ? expected + v : at::maximum(expected, v);
          }
          Compare(t, expected.to(dt), op == ReduceOp::kSum ? "all_reduce sum" : "all_reduce max",
                  dt, n);
        }
      }
      for (at::ScalarType dt : {at::kFloat, at::kLong, at::kBFloat16, at::kByte}) {
        const uint64_t s = Seed(n, dt, 2);
        at::Tensor out = at::empty({world * n}, OnDevice(dt));
        comm_.AllGather(RankBits(s, me, n, dt).to(device_), out);
        std::vector<at::Tensor> parts;
        for (int r = 0; r < world; ++r) parts.push_back(RankBits(s, r, n, dt));
        Compare(out, at::cat(parts), "all_gather", dt, n);
      }
      for (int root = 0; root < world; ++root) {
        for (at::ScalarType dt : {at::kBFloat16, at::kLong}) {
          const uint64_t s = Seed(n, dt, 3 + static_cast<uint64_t>(root));
          at::Tensor t = RankBits(s, me, n, dt).to(device_);
          comm_.Broadcast(t, root);
          Compare(t, RankBits(s, root, n, dt), "broadcast from " + std::to_string(root), dt, n);

          std::vector<at::Tensor> got = comm_.Gather(RankBits(s + 1, me, n, dt).to(device_), root);
          const std::string what = "gather to " + std::to_string(root);
          if (me != root) {
            Count(got.empty() ? 0 : 1, what + " (non-root received tensors)", dt, n);
            continue;
          }
          if (static_cast<int>(got.size()) != world) {
            Count(n * world, what + " (wrong tensor count)", dt, n);
            continue;
          }
          for (int r = 0; r < world; ++r) {
            Compare(got[static_cast<size_t>(r)], RankBits(s + 1, r, n, dt),
                    what + " from " + std::to_string(r), dt, n);
          }
        }
      }
    }
    comm_.Barrier();
    ++report_.checks;
    return report_;
  }

 private:
  uint64_t Seed(int64_t n, at::ScalarType dt, uint64_t op) const {
    return SplitMix64(seed_ ^ (static_cast<uint64_t>(n) << 20) ^ (static_cast<uint64_t>(dt) << 8) ^
                      op);
  }

  at::TensorOptions OnDevice(at::ScalarType dt) const {
    return at::TensorOptions().dtype(dt).device(device_);
  }

  // Counts elements whose bytes differ (so NaN payloads and -0 count too).
  void Compare(const at::Tensor& actual, const at::Tensor& expected, const std::string& what,
               at::ScalarType dt, int64_t n) {
    at::Tensor a = actual.cpu().contiguous().reshape({-1});
    at::Tensor e = expected.contiguous().reshape({-1});
    int64_t wrong = e.numel();
    if (a.scalar_type() == e.scalar_type() && a.numel() == e.numel()) {
      const int64_t item = static_cast<int64_t>(e.element_size());
      wrong = at::ne(a.view(at::kByte), e.view(at::kByte))
                  .view({e.numel(), item})
                  .any(1)
                  .sum()
                  .item<int64_t>();
    }
    Count(wrong, what, dt, n);
  }

  void Count(int64_t wrong, const std::string& what, at::ScalarType dt, int64_t n) {
    ++report_.checks;
    if (wrong == 0) return;
    report_.wrong_elements += wrong;
    report_.failures.push_back(what + " " + c10::toString(dt) + " n=" + std::to_string(n) + ": " +
                               std::to_string(wrong) + " wrong elements");
  }

  Communicator& comm_;
  uint64_t seed_;
  at::Device device_;
  CollectiveCheckReport report_;
};

}  // namespace

CollectiveCheckReport CheckCollectives(Communicator& comm, uint64_t seed, int local_rank) {
  return Checker(comm, seed, local_rank).Run();
}

}  // namespace shardcheck
