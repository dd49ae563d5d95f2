// The one communication interface of shardcheck's distributed side.
//
// Backends: Gloo through libtorch's c10d (CPU tensors; what CI runs) and
// NCCL through its C API (GPU nodes: tensors on the rank's device move
// directly, host tensors are staged through it). Every collective is
// blocking, has a timeout (default 120 s), and on a dead or stuck peer
// throws shardcheck::Error naming the op, this rank and the peer when known
// — it never hangs. A Communicator is used by one thread at a time.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace shardcheck {

enum class ReduceOp { kSum, kMax };

inline constexpr std::chrono::milliseconds kDefaultCollectiveTimeout{120000};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "gloo" or "nccl".
  virtual std::string backend() const = 0;

  // output (n) = sum over ranks of input[rank*n, (rank+1)*n); input is
  // (size*n,) contiguous, output (n,) contiguous, same dtype. Any dtype the
  // backend can add (fp32, fp64, int64 …).
  virtual void ReduceScatterSum(const at::Tensor& input, at::Tensor& output) = 0;
  // output (size*n,) = concatenation of every rank's input (n,); any dtype
  // (moved as bytes).
  virtual void AllGather(const at::Tensor& input, at::Tensor& output) = 0;
  // In place, every rank ends with the reduction.
  virtual void AllReduce(at::Tensor& tensor, ReduceOp op) = 0;
  // In place; every rank ends with root's tensor. Any dtype.
  virtual void Broadcast(at::Tensor& tensor, int root) = 0;
  virtual void Barrier() = 0;
  // Root receives every rank's tensor (same shape and dtype on all ranks),
  // in rank order; other ranks receive an empty vector. Any dtype.
  virtual std::vector<at::Tensor> Gather(const at::Tensor& tensor, int root) = 0;
};

}  // namespace shardcheck
