#include "distributed/communicator_gloo.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "distributed/communicator_error.h"
#include "spec/error.h"

namespace shardcheck {
namespace {

// The bytes of a contiguous tensor as a 1-D uint8 view (shares storage).
at::Tensor Bytes(const at::Tensor& contiguous) { return contiguous.reshape({-1}).view(at::kByte); }

// `t` itself when contiguous, else a contiguous copy; CopyBack undoes it.
at::Tensor Dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
void CopyBack(const at::Tensor& dense, at::Tensor& t) {
  if (!dense.is_same(t)) t.copy_(dense);
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                   std::chrono::milliseconds timeout, const std::string& bind_host)
      : store_(std::move(store)), failure_(rank, size, timeout) {
    if (size < 1 || rank < 0 || rank >= size) {
      throw Error("gloo: rank " + std::to_string(rank) + " is outside a world of size " +
                  std::to_string(size));
    }
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (ifname != nullptr && *ifname != '\0') {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else if (!bind_host.empty()) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(bind_host));
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    try {
      pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, rank, size, options);
    } catch (const c10::Error& e) {
      failure_.Throw("connect", e.what_without_backtrace());
    } catch (const std::exception& e) {
      failure_.Throw("connect", e.what());
    }
  }

  int rank() const override { return failure_.rank(); }
  int size() const override { return failure_.size(); }
  std::string backend() const override { return "gloo"; }

  void ReduceScatterSum(const at::Tensor& input, at::Tensor& output) override {
    const int64_t n = output.numel();
    failure_.Check("reduce_scatter", input.numel() == n * size() && input.dtype() == output.dtype(),
                   "input has " + std::to_string(input.numel()) + " " +
                       std::string(input.dtype().name()) + " elements, expected size x output = " +
                       std::to_string(n * size()) + " " + std::string(output.dtype().name()));
    if (n == 0) return;
    // Emulation: Gloo 1.13 has no reduce_scatter, so all-reduce (SUM) the
    // whole input and keep this rank's slice. Exact: Gloo's ring all-reduce
    // leaves the same bytes on every rank, so each slice is one well-defined
    // sum over ranks, the same on every rank that reads it (cost: size x the
    // traffic). bf16 is summed in fp32 and rounded once (see AllReduce).
    at::Tensor whole =
        input.scalar_type() == at::kBFloat16 ? input.to(at::kFloat) : input.contiguous().clone();
    RunAllReduce("reduce_scatter", whole, c10d::ReduceOp::SUM);
    output.copy_(whole.reshape({-1}).narrow(0, rank() * n, n).view(output.sizes()));
  }

  void AllGather(const at::Tensor& input, at::Tensor& output) override {
    const int64_t n = input.numel();
    failure_.Check("all_gather", output.numel() == n * size() && input.dtype() == output.dtype(),
                   "output has " + std::to_string(output.numel()) + " " +
                       std::string(output.dtype().name()) + " elements, expected size x input = " +
                       std::to_string(n * size()) + " " + std::string(input.dtype().name()));
    if (n == 0) return;
    // Emulation: Gloo 1.13 has no _allgather_base and no bf16, so gather the
    // bytes (uint8 views) with the list-form allgather into per-rank slices
    // of the output. Exact: bytes are moved, never converted.
    at::Tensor dense_out = Dense(output);
    at::Tensor out_bytes = Bytes(dense_out);
    const int64_t nb = out_bytes.numel() / size();
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size(); ++r) outputs[0].push_back(out_bytes.narrow(0, r * nb, nb));
    std::vector<at::Tensor> inputs{Bytes(Dense(input))};
    Run("all_gather", [&] { return pg_->allgather(outputs, inputs); });
    CopyBack(dense_out, output);
  }

  void AllReduce(at::Tensor& tensor, ReduceOp op) override {
    if (tensor.numel() == 0) return;
    const auto c10d_op = op == ReduceOp::kMax ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
    if (tensor.scalar_type() == at::kBFloat16) {
      // Emulation: Gloo 1.13 rejects bf16, so reduce in fp32 and round once
      // to bf16 (RNE). MAX is exact; SUM is the fp32 sum rounded once — at
      // least as accurate as a bf16 sum, and the same bytes on every rank.
      at::Tensor wide = tensor.to(at::kFloat);
      RunAllReduce("all_reduce", wide, c10d_op);
      tensor.copy_(wide);
      return;
    }
    at::Tensor dense = Dense(tensor);
    RunAllReduce("all_reduce", dense, c10d_op);
    CopyBack(dense, tensor);
  }

  void Broadcast(at::Tensor& tensor, int root) override {
    CheckRoot("broadcast", root);
    if (tensor.numel() == 0) return;
    // Emulation: any dtype (bf16 included) is broadcast as its bytes; exact.
    at::Tensor dense = Dense(tensor);
    std::vector<at::Tensor> bytes{Bytes(dense)};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    Run("broadcast", [&] { return pg_->broadcast(bytes, opts); });
    CopyBack(dense, tensor);
  }

  void Barrier() override {
    Run("barrier", [&] { return pg_->barrier(); });
  }

  std::vector<at::Tensor> Gather(const at::Tensor& tensor, int root) override {
    CheckRoot("gather", root);
    std::vector<at::Tensor> result;
    if (rank() == root) {
      for (int r = 0; r < size(); ++r)
        result.push_back(at::empty(tensor.sizes(), tensor.options()));
    }
    if (tensor.numel() == 0) return result;
    // Emulation: any dtype is gathered as its bytes (uint8 views); exact.
    std::vector<at::Tensor> inputs{Bytes(Dense(tensor))};
    std::vector<std::vector<at::Tensor>> outputs;
    if (rank() == root) {
      outputs.emplace_back();
      for (auto& t : result) outputs[0].push_back(Bytes(t));
    }
    c10d::GatherOptions opts;
    opts.rootRank = root;
    Run("gather", [&] { return pg_->gather(outputs, inputs, opts); });
    return result;
  }

 private:
  void CheckRoot(const char* op, int root) {
    failure_.Check(op, root >= 0 && root < size(),
                   "root " + std::to_string(root) + " is not a rank");
  }

  void RunAllReduce(const char* op, at::Tensor& dense, c10d::ReduceOp reduce) {
    std::vector<at::Tensor> tensors{dense};
    c10d::AllreduceOptions opts;
    opts.reduceOp = reduce;
    Run(op, [&] { return pg_->allreduce(tensors, opts); });
  }

  // Starts one Gloo op and waits for it. Gloo's own per-transfer timeout
  // normally ends a stuck op first (with its own message); the wait adds a
  // grace so that a stuck op cannot outlive timeout + grace.
  template <typename Start>
  void Run(const char* op, Start start) {
    failure_.CheckUsable(op);
    try {
      c10::intrusive_ptr<c10d::Work> work = start();
      work->wait(failure_.timeout() + failure_.grace());
    } catch (const c10::Error& e) {
      failure_.Throw(op, e.what_without_backtrace());
    } catch (const std::exception& e) {
      failure_.Throw(op, e.what());
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  CollectiveFailure failure_;
};

}  // namespace

std::unique_ptr<Communicator> MakeGlooCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                   int size, std::chrono::milliseconds timeout,
                                                   const std::string& bind_host) {
  return std::make_unique<GlooCommunicator>(std::move(store), rank, size, timeout, bind_host);
}

std::vector<std::exception_ptr> RunGlooRanksInProcess(
    int size, std::chrono::milliseconds timeout, const std::function<void(Communicator&)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(timeout);  // once, before the ranks share it
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  // Every rank finishes connecting (or fails to) before any body runs: a
  // body that throws at once would otherwise tear down its communicator
  // while a peer is still connecting, and that peer would fail instead of
  // reaching the collective under test.
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm;
      try {
        comm = MakeGlooCommunicator(store, r, size, timeout);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
      {
        std::unique_lock<std::mutex> lock(mu);
        ++arrived;
        cv.notify_all();
        cv.wait(lock, [&] { return arrived == size; });
      }
      if (!comm) return;
      try {
        body(*comm);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace shardcheck
