// The NCCL backend (compiled only with SHARDCHECK_HAVE_NCCL; see
// cmake/nccl.cmake). Host code only: the CUDA runtime API and NCCL's C API.
// Tensors on this rank's device move directly; host tensors (the harness's
// verdicts, names and checkpoint gathers) are staged through the device
// and copied back.
// The communicator is non-blocking (ncclConfig_t::blocking = 0) so that
// connecting and every collective can be bounded by a timeout: we poll
// ncclCommGetAsyncError and cudaStreamQuery, and ncclCommAbort on expiry.
#include "distributed/communicator_nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "distributed/communicator_error.h"
#include "spec/error.h"

namespace shardcheck {
namespace {

using Clock = std::chrono::steady_clock;

std::string CudaText(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

// NCCL's type for a reduction over `t`; false when NCCL cannot add it.
bool ReduceType(at::ScalarType t, ncclDataType_t* out) {
  switch (t) {
    case at::kFloat:
      *out = ncclFloat32;
      return true;
    case at::kDouble:
      *out = ncclFloat64;
      return true;
    case at::kHalf:
      *out = ncclFloat16;
      return true;
    case at::kBFloat16:
      *out = ncclBfloat16;
      return true;
    case at::kLong:
      *out = ncclInt64;
      return true;
    case at::kInt:
      *out = ncclInt32;
      return true;
    case at::kByte:
      *out = ncclUint8;
      return true;
    case at::kChar:
      *out = ncclInt8;
      return true;
    default:
      return false;
  }
}

int64_t NumBytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

void CopyBack(const at::Tensor& dense, at::Tensor& t) {
  if (!dense.is_same(t)) t.copy_(dense);
}

// Communicators made by this process, so that each gets its own store key
// (every rank makes its communicators in the same order).
std::atomic<int> communicators_made{0};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank, int size, int local_rank,
                   std::chrono::milliseconds timeout)
      : store_(std::move(store)), failure_(rank, size, timeout), device_(local_rank) {
    if (size < 1 || rank < 0 || rank >= size) {
      throw Error("nccl: rank " + std::to_string(rank) + " is outside a world of size " +
                  std::to_string(size));
    }
    try {
      Connect(rank, size, timeout);
    } catch (...) {
      Release();
      throw;
    }
  }

  ~NcclCommunicator() override { Release(); }

  int rank() const override { return failure_.rank(); }
  int size() const override { return failure_.size(); }
  std::string backend() const override { return "nccl"; }

  void ReduceScatterSum(const at::Tensor& input, at::Tensor& output) override {
    const int64_t n = output.numel();
    failure_.Check("reduce_scatter", input.numel() == n * size() && input.dtype() == output.dtype(),
                   "input has " + std::to_string(input.numel()) + " elements, expected size x " +
                       "output = " + std::to_string(n * size()) + " of the same dtype");
    ncclDataType_t type;
    failure_.Check("reduce_scatter", ReduceType(input.scalar_type(), &type),
                   std::string("NCCL cannot add ") + c10::toString(input.scalar_type()));
    if (n == 0) return;
    at::Tensor in = Dense(input);
    at::Tensor out = Dense(output);
    Run("reduce_scatter", [&] {
      return ncclReduceScatter(in.data_ptr(), out.data_ptr(), static_cast<size_t>(n), type, ncclSum,
                               comm_, stream_);
    });
    CopyBack(out, output);
  }

  void AllGather(const at::Tensor& input, at::Tensor& output) override {
    failure_.Check("all_gather",
                   output.numel() == input.numel() * size() && input.dtype() == output.dtype(),
                   "output has " + std::to_string(output.numel()) + " elements, expected size x " +
                       "input = " + std::to_string(input.numel() * size()) + " of the same dtype");
    if (input.numel() == 0) return;
    at::Tensor in = Dense(input);
    at::Tensor out = Dense(output);
    // Any dtype moves as bytes (ncclUint8): exact.
    Run("all_gather", [&] {
      return ncclAllGather(in.data_ptr(), out.data_ptr(), static_cast<size_t>(NumBytes(in)),
                           ncclUint8, comm_, stream_);
    });
    CopyBack(out, output);
  }

  void AllReduce(at::Tensor& tensor, ReduceOp op) override {
    ncclDataType_t type;
    failure_.Check("all_reduce", ReduceType(tensor.scalar_type(), &type),
                   std::string("NCCL cannot reduce ") + c10::toString(tensor.scalar_type()));
    if (tensor.numel() == 0) return;
    at::Tensor dense = Dense(tensor);
    Run("all_reduce", [&] {
      return ncclAllReduce(dense.data_ptr(), dense.data_ptr(), static_cast<size_t>(dense.numel()),
                           type, op == ReduceOp::kMax ? ncclMax : ncclSum, comm_, stream_);
    });
    CopyBack(dense, tensor);
  }

  void Broadcast(at::Tensor& tensor, int root) override {
    CheckRoot("broadcast", root);
    if (tensor.numel() == 0) return;
    at::Tensor dense = Dense(tensor);
    Run("broadcast", [&] {
      return ncclBroadcast(dense.data_ptr(), dense.data_ptr(), static_cast<size_t>(NumBytes(dense)),
                           ncclUint8, root, comm_, stream_);
    });
    CopyBack(dense, tensor);
  }

  void Barrier() override {
    // Emulation: NCCL has no barrier; a 1-element all-reduce completes on
    // no rank before every rank has joined it.
    Run("barrier",
        [&] { return ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, stream_); });
  }

  std::vector<at::Tensor> Gather(const at::Tensor& tensor, int root) override {
    CheckRoot("gather", root);
    // Emulation: NCCL has no gather; all-gather the bytes and keep them on
    // root only (exact: bytes are moved, never converted; costs size x the
    // memory and traffic of a true gather on non-root ranks).
    const int64_t n = tensor.numel();
    at::Tensor flat = at::empty({n * size()}, tensor.options());
    AllGather(tensor.reshape({-1}), flat);
    std::vector<at::Tensor> result;
    if (rank() != root) return result;
    for (int r = 0; r < size(); ++r)
      result.push_back(flat.narrow(0, r * n, n).view(tensor.sizes()));
    return result;
  }

 private:
  void Connect(int rank, int size, std::chrono::milliseconds timeout) {
    CudaOrThrow("connect", cudaSetDevice(device_));
    CudaOrThrow("connect", cudaStreamCreate(&stream_));  // blocking: orders with stream 0
    CudaOrThrow("connect", cudaMalloc(&scratch_, sizeof(int32_t)));
    CudaOrThrow("connect", cudaMemset(scratch_, 0, sizeof(int32_t)));

    const std::string key = "shardcheck/nccl_unique_id/" + std::to_string(communicators_made++);
    ncclUniqueId id;
    store_->setTimeout(timeout);
    try {
      if (rank == 0) {
        NcclOrThrow("connect", ncclGetUniqueId(&id));
        const auto* p = reinterpret_cast<const uint8_t*>(&id);
        store_->set(key, std::vector<uint8_t>(p, p + sizeof(id)));
      } else {
        const std::vector<uint8_t> bytes = store_->get(key);
        failure_.Check("connect", bytes.size() == sizeof(id),
                       "the NCCL unique id in the store has " + std::to_string(bytes.size()) +
                           " bytes, expected " + std::to_string(sizeof(id)));
        std::memcpy(&id, bytes.data(), sizeof(id));
      }
    } catch (const c10::Error& e) {
      failure_.Throw("connect", std::string("store: ") + e.what_without_backtrace());
    }

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t started = ncclCommInitRankConfig(&comm_, size, id, rank, &config);
    if (started != ncclSuccess && started != ncclInProgress) Fail("connect", NcclText(started));
    Wait("connect", /*query_stream=*/false);
  }

  // Frees what Connect made: finalizes the NCCL communicator (aborts it
  // instead when finalizing does not end within the timeout); never throws.
  void Release() noexcept {
    if (comm_ != nullptr) {
      ncclResult_t state = ncclCommFinalize(comm_);
      const auto deadline = Clock::now() + failure_.timeout();
      while ((state == ncclInProgress || state == ncclSuccess) && Clock::now() < deadline) {
        if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess || state != ncclInProgress) break;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (state == ncclSuccess) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
      comm_ = nullptr;
    }
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    scratch_ = nullptr;
    stream_ = nullptr;
  }

  std::string NcclText(ncclResult_t r) const {
    std::string text = ncclGetErrorString(r);
    const char* last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
    if (last != nullptr && *last != '\0') text += std::string(": ") + last;
    return text;
  }

  void CudaOrThrow(const char* op, cudaError_t e) {
    if (e != cudaSuccess) {
      failure_.Throw(op, "device " + std::to_string(device_) + ": " + CudaText(e));
    }
  }
  void NcclOrThrow(const char* op, ncclResult_t r) {
    if (r != ncclSuccess) failure_.Throw(op, NcclText(r));
  }

  // t itself when it is a contiguous tensor on this communicator's device
  // (the optimizer's buffers: no copy); else a contiguous copy there (host
  // tensors: the harness's small messages, staged through the device).
  at::Tensor Dense(const at::Tensor& t) const {
    const at::Device here(at::kCUDA, static_cast<c10::DeviceIndex>(device_));
    if (t.device() == here) return t.is_contiguous() ? t : t.contiguous();
    return t.to(here, /*non_blocking=*/false, /*copy=*/true).contiguous();
  }
  void CheckRoot(const char* op, int root) const {
    failure_.Check(op, root >= 0 && root < size(),
                   "root " + std::to_string(root) + " is not a rank");
  }

  // Aborts the NCCL communicator (so no rank stays blocked on this one) and
  // throws the op's Error.
  [[noreturn]] void Fail(const char* op, const std::string& reason) {
    if (comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    failure_.Throw(op, reason);
  }

  template <typename Enqueue>
  void Run(const char* op, Enqueue enqueue) {
    failure_.CheckUsable(op);
    const ncclResult_t r = enqueue();
    if (r != ncclSuccess && r != ncclInProgress) Fail(op, NcclText(r));
    Wait(op, /*query_stream=*/true);
  }

  // Polls until NCCL has finished the call (and, for a collective, the
  // stream has run it), NCCL reports an error, or the timeout expires.
  void Wait(const char* op, bool query_stream) {
    const auto deadline = Clock::now() + failure_.timeout();
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t polled = ncclCommGetAsyncError(comm_, &state);
      if (polled != ncclSuccess) Fail(op, NcclText(polled));
      if (state != ncclSuccess && state != ncclInProgress) Fail(op, NcclText(state));
      if (state == ncclSuccess) {
        if (!query_stream) return;
        const cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) Fail(op, CudaText(q));
      }
      if (Clock::now() > deadline) {
        Fail(op, "timed out after " + std::to_string(failure_.timeout().count()) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  CollectiveFailure failure_;
  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;  // (1,) int32 on device_, the barrier's all-reduce
};

}  // namespace

std::unique_ptr<Communicator> MakeNcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                   int size, int local_rank,
                                                   std::chrono::milliseconds timeout) {
  return std::make_unique<NcclCommunicator>(std::move(store), rank, size, local_rank, timeout);
}

bool NcclAvailable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace shardcheck
