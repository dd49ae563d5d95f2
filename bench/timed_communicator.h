// A Communicator that forwards every collective to another and adds up the
// wall time spent in each kind: what the DistributedOptimizer-step
// benchmark splits a step's time by (reduce-scatter, all-gather,
// all-reduce; the rest of the step is the update). Same contract as the
// communicator it wraps; one thread at a time.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace shardcheck::bench {

class TimedCommunicator : public Communicator {
 public:
  // Seconds spent in each kind of collective since the last Reset().
  struct Seconds {
    double reduce_scatter = 0, all_gather = 0, all_reduce = 0, other = 0;
    double Total() const { return reduce_scatter + all_gather + all_reduce + other; }
  };

  explicit TimedCommunicator(Communicator& inner) : inner_(inner) {}

  const Seconds& seconds() const { return seconds_; }
  void Reset() { seconds_ = {}; }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return inner_.backend(); }
  void ReduceScatterSum(const at::Tensor& input, at::Tensor& output) override {
    Timed(seconds_.reduce_scatter, [&] { inner_.ReduceScatterSum(input, output); });
  }
  void AllGather(const at::Tensor& input, at::Tensor& output) override {
    Timed(seconds_.all_gather, [&] { inner_.AllGather(input, output); });
  }
  void AllReduce(at::Tensor& tensor, ReduceOp op) override {
    Timed(seconds_.all_reduce, [&] { inner_.AllReduce(tensor, op); });
  }
  void Broadcast(at::Tensor& tensor, int root) override {
    Timed(seconds_.other, [&] { inner_.Broadcast(tensor, root); });
  }
  void Barrier() override {
    Timed(seconds_.other, [&] { inner_.Barrier(); });
  }
  std::vector<at::Tensor> Gather(const at::Tensor& tensor, int root) override {
    std::vector<at::Tensor> out;
    Timed(seconds_.other, [&] { out = inner_.Gather(tensor, root); });
    return out;
  }

 private:
  template <class F>
  void Timed(double& into, F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    into += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  Communicator& inner_;
  Seconds seconds_;
};

}  // namespace shardcheck::bench
