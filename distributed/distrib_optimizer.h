// The DistributedOptimizer (Megatron-LM semantics, docs/distributed.md):
// flat fp32 grad buffer and model-dtype param buffer in the Megatron layout,
// per-bucket DP shards, reduce-scatter / all-gather, fp32 main params and
// optimizer state only for this rank's shard, allocated from the inner
// optimizer's state schema and updated by its registered fused kernel. For
// composite setups (Muon + scalar) the whole-param child's params (2-D hidden
// weights) go to a layer-wise optimizer instead (whole matrices per rank,
// every key of that child's schema) and the rest to the sharded scalar
// optimizer; both share one step counter and the lr schedule.
//
// One instance per rank; not thread-safe. Tensors it hands out (Grad,
// ModelParam, Owned) live on DistOptions::device; SetParams takes any.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/layout.h"
#include "spec/config.h"
#include "spec/kernel_interface.h"
#include "spec/lr_schedule.h"
#include "spec/params.h"
#include "spec/routing.h"

namespace shardcheck {

struct DistOptions {
  int64_t bucket_size = 0;  // elements; 0: one bucket per buffer
  // Where every buffer, shard and state tensor lives. On a CUDA device the
  // shard updates are the registry's CUDA launches (on the legacy default
  // stream, ordered with ATen's and the communicator's work), and the
  // communicator must move device tensors (NCCL, or the in-process double).
  at::Device device = at::kCPU;
  // CPU shard updates: the fused kernel split over this many threads
  // (kernels/parallel_elementwise.h; the same bits for any count).
  int threads = 1;
};

// Bytes this rank holds for main params and each state key.
struct MemoryFigures {
  struct Entry {
    std::string child;  // the child's kind
    std::string key;    // "main_param" or a state key of that child's schema
    int64_t elements = 0;
    int64_t bytes = 0;
  };
  std::vector<Entry> entries;
  int64_t owned_elements = 0;  // main-param elements this rank owns (all children)
  int64_t total_bytes = 0;
};

// A contiguous piece of one param that this rank owns: `main` and each
// `state[k]` are 1-D views (param_range.size(),) into this rank's storage;
// state follows the owning child's schema order.
struct OwnedPiece {
  int param = 0;
  int child = 0;
  Range param_range;  // offsets within the flattened param
  int bucket = -1;    // sharded pieces: bucket index; -1 for layer-wise params
  Range in_bucket;    // sharded pieces: gbuf_world_in_bucket
  Range local;        // sharded pieces: gbuf_local (in this rank's shard of the bucket)
  at::Tensor main;
  std::vector<at::Tensor> state;
};

// The pieces of the buffer params that `rank` owns in `layout`, without
// tensors (child 0), in buffer order. Needs no optimizer: the dry mode plans
// with it at any DP size.
std::vector<OwnedPiece> BufferPiecesOf(const BufferLayout& layout, int rank);

class DistributedOptimizer {
 public:
  // Throws Error on an invalid setup, or a whole-param kind that needs 2-D
  // params getting another.
  DistributedOptimizer(const OptimizerSetup& setup, const std::vector<ParamInfo>& params,
                       c10::ScalarType model_dtype, Communicator& comm, DistOptions opts = {});

  // Sets every model param (full tensors, model dtype, identical on every
  // rank) and derives this rank's fp32 main params from them. State is
  // left as it is (zeros after construction).
  void SetParams(const std::vector<at::Tensor>& full);

  // fp32 view (model shape) into this rank's local, unreduced gradient
  // buffer for param i: write the rank's already-scaled gradient here.
  at::Tensor Grad(int i);
  void ZeroGrad();

  // Sets the step counter (after a checkpoint load).
  void SetStep(int64_t step) { step_ = step; }
  // The lr schedule every child follows: the setup's, or a checkpoint's
  // (with its peak) when a load says the checkpoint's schedule wins.
  const LrSchedule& lr_schedule() const { return lr_schedule_; }
  void SetLrSchedule(const LrSchedule& s) { lr_schedule_ = s; }
  // Makes the schedule start again after `step`: step s then takes the
  // factor of step s - `step`. Only the silent bug lr_schedule_restarts_on_load
  // calls it (docs/detection.md); a correct load never does.
  void RestartLrScheduleAt(int64_t step) { schedule_origin_ = step; }
  // The peak lr the schedule's factor is taken against.
  double schedule_peak_lr() const { return lr_schedule_.Peak(setup_.main.lr()); }
  // Re-derives every model param from the fp32 main params: the owned
  // slices are rounded to the model dtype, then every bucket and the
  // layer-wise params are all-gathered. Collective. A load must end with it
  // (Megatron-LM PR #6920 lost this step for layer-wise Muon).
  void RebuildModelParams();
  // Index of the child whose params are sharded in the buffer, and of the
  // whole-param child (-1 without one).
  int sharded_child() const { return sharded_child_; }
  int layer_wise_child() const { return layer_wise_child_; }

  // One step: reduce-scatter (SUM) / all-reduce the grads, fp64 global norm
  // and optional clipping, the inner updates of this rank's shards, main ->
  // model copy, all-gather of the params. Collective: every rank calls it.
  void Step();

  // Model param i (model dtype, model shape), a view into the param buffer.
  at::Tensor ModelParam(int i) const;
  int64_t step() const { return step_; }
  double last_grad_norm() const { return last_grad_norm_; }
  // The main child's lr at the last step (its lr times the schedule factor).
  double last_lr() const { return last_lr_; }
  const std::vector<ChildOptimizer>& children() const { return children_; }
  const std::vector<ParamInfo>& params() const { return params_; }
  int ChildOf(int i) const { return child_of_[static_cast<size_t>(i)]; }
  // The buffer layout of the sharded (elementwise) child.
  const BufferLayout& layout() const { return layout_; }
  // Owner rank of each layer-wise param (model index -> rank); empty without
  // a whole-param child.
  const std::vector<std::pair<int, int>>& layer_wise_owners() const { return lw_owner_; }

  // Everything this rank owns, sharded pieces first (buffer order), then
  // whole layer-wise params.
  std::vector<OwnedPiece> Owned();
  // Where the pieces of any rank lie, in the order Owned() gives on that
  // rank (main/state tensors left undefined). Known on every rank.
  std::vector<OwnedPiece> PiecesOf(int rank) const;
  c10::ScalarType model_dtype() const { return model_dtype_; }
  at::Device device() const { return device_; }
  const OptimizerSetup& setup() const { return setup_; }
  Communicator& comm() const { return comm_; }
  MemoryFigures Memory() const;

 private:
  struct LayerWiseParam {
    int param = 0;
    int owner = 0;
    int64_t offset = 0;  // in lw_grad_
    at::Tensor model;    // model shape, model dtype (every rank)
    at::Tensor main;     // fp32, model shape (owner only)
    std::vector<at::Tensor>
        state;  // the whole-param child's schema order, model shape (owner only)
  };
  struct Slice {
    OwnedSlice where;
    int64_t offset = 0;  // into main_ / state_
    double wd_mult = 1.0;
  };

  void BuildSharded(const DistOptions& opts);
  void BuildLayerWise();
  void ReduceGrads();
  double GradNorm();  // fp64 global norm over every rank's owned grads (collective)
  void StepSharded(float clip, double lr_factor);  // fused kernel; writes the model params too
  void StepLayerWise(float clip, double lr_factor);
  // The kernel's CPU loop, or its CUDA launch on this optimizer's device.
  void Run(const ElementwiseKernel& kernel, const ScalarBlock& scalars,
           const ElementwiseSpan& span) const;
  at::TensorOptions On(c10::ScalarType dtype) const {
    return at::TensorOptions().dtype(dtype).device(device_);
  }
  void CopyMainToModel();  // owned slices: main -> model dtype, into the param buffer
  void GatherBuckets();    // all-gather every bucket of the param buffer
  void GatherLayerWise();  // main -> model for owned matrices, all-gather them

  OptimizerSetup setup_;
  std::vector<ParamInfo> params_;
  c10::ScalarType model_dtype_;
  at::Device device_;
  int threads_ = 1;  // DistOptions::threads
  Communicator& comm_;
  std::vector<ChildOptimizer> children_;
  std::vector<int> child_of_;
  int sharded_child_ = 0;      // index of the elementwise child
  int layer_wise_child_ = -1;  // index of the whole-param child, -1 without one
  LrSchedule lr_schedule_;
  int64_t schedule_origin_ = 0;  // RestartLrScheduleAt
  BufferLayout layout_;
  at::Tensor grad_buffer_;               // (layout.numel,) fp32, this rank's local grads
  at::Tensor param_buffer_;              // (layout.numel,) model dtype, all params of the buffer
  std::vector<at::Tensor> grad_shards_;  // per bucket (shard,) fp32: reduced grads
  std::vector<Slice> slices_;            // owned slices, buffer order
  at::Tensor main_;                      // (owned,) fp32 main params of the owned slices
  std::vector<at::Tensor> state_;        // per schema key (owned,), the sharded child's schema
  std::vector<LayerWiseParam> lw_;
  std::vector<std::pair<int, int>> lw_owner_;
  at::Tensor lw_grad_;  // (sum of layer-wise numel,) fp32
  int64_t step_ = 0;
  double last_grad_norm_ = 0.0;
  double last_lr_ = 0.0;
};

}  // namespace shardcheck
