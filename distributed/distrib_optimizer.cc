#include "distributed/distrib_optimizer.h"

#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <cmath>

#include "kernels/parallel_elementwise.h"
#include "spec/error.h"
#include "spec/failpoint.h"
#include "spec/registry.h"

namespace shardcheck {

namespace {

int ChildWithPlacement(const std::vector<ChildOptimizer>& children, Placement p) {
  for (size_t c = 0; c < children.size(); ++c)
    if (children[c].config.spec().placement == p) return static_cast<int>(c);
  return -1;
}

}  // namespace

DistributedOptimizer::DistributedOptimizer(const OptimizerSetup& setup,
                                           const std::vector<ParamInfo>& params,
                                           c10::ScalarType model_dtype, Communicator& comm,
                                           DistOptions opts)
    : setup_(setup),
      params_(params),
      model_dtype_(model_dtype),
      device_(opts.device),
      threads_(opts.threads),
      comm_(comm) {
  setup_.Validate();
  if (model_dtype_ != at::kFloat && model_dtype_ != at::kBFloat16)
    throw Error("distributed optimizer: model dtype must be fp32 or bf16");
  lr_schedule_ = setup_.lr_schedule;
  children_ = RouteParams(setup_, params_);
  child_of_.assign(params_.size(), 0);
  for (size_t c = 0; c < children_.size(); ++c)
    for (int i : children_[c].params) child_of_[static_cast<size_t>(i)] = static_cast<int>(c);
  sharded_child_ = ChildWithPlacement(children_, Placement::kElementwise);
  layer_wise_child_ = ChildWithPlacement(children_, Placement::kWholeParam);
  if (sharded_child_ < 0)
    throw Error("distributed optimizer: setup " + setup_.name + " has no elementwise child");
  BuildSharded(opts);
  if (layer_wise_child_ >= 0) BuildLayerWise();
}

void DistributedOptimizer::BuildSharded(const DistOptions& opts) {
  const int dp = comm_.size(), rank = comm_.rank();
  // The sharded buffer: params of the elementwise child, registration order.
  std::vector<BufferParamSpec> specs;
  for (int i : children_[static_cast<size_t>(sharded_child_)].params)
    specs.push_back({i, params_[static_cast<size_t>(i)].Numel()});
  layout_ = BufferLayout::Build(specs, dp, opts.bucket_size);
  grad_buffer_ = at::zeros({layout_.numel()}, On(at::kFloat));
  param_buffer_ = at::zeros({layout_.numel()}, On(model_dtype_));
  for (const Bucket& b : layout_.buckets())
    grad_shards_.push_back(at::zeros({b.ShardSize(dp)}, On(at::kFloat)));
  int64_t owned = 0;
  for (const OwnedSlice& s : layout_.SlicesOf(rank)) {
    slices_.push_back({s, owned, params_[static_cast<size_t>(s.param)].DefaultWdMult()});
    owned += s.gbuf_world.size();
  }
  main_ = at::zeros({owned}, On(at::kFloat));
  for (const StateKey& k : children_[static_cast<size_t>(sharded_child_)].schema.keys)
    state_.push_back(at::zeros({owned}, On(k.dtype)));
}

void DistributedOptimizer::BuildLayerWise() {
  // Whole params, LPT-assigned to ranks on the Newton–Schulz cost.
  const ChildOptimizer& child = children_[static_cast<size_t>(layer_wise_child_)];
  const OptimizerSpec& spec = child.config.spec();
  std::vector<std::vector<int64_t>> shapes;
  for (int i : child.params) {
    const ParamInfo& p = params_[static_cast<size_t>(i)];
    if (spec.needs_2d && p.shape.size() != 2)
      throw Error("distributed optimizer: " + spec.name + " got a non-2-D param " + p.name);
    // The cost model wants a matrix: a 1-D param counts as a row.
    shapes.push_back(p.shape.size() == 2 ? p.shape : std::vector<int64_t>{1, p.Numel()});
  }
  const std::vector<int> owner = AssignLayerWise(shapes, comm_.size());
  int64_t offset = 0;
  for (size_t j = 0; j < child.params.size(); ++j) {
    const int i = child.params[j];
    const ParamInfo& p = params_[static_cast<size_t>(i)];
    LayerWiseParam lw;
    lw.param = i;
    lw.owner = owner[j];
    lw.offset = offset;
    lw.model = at::zeros(p.shape, On(model_dtype_));
    if (lw.owner == comm_.rank()) {
      lw.main = at::zeros(p.shape, On(at::kFloat));
      for (const StateKey& k : child.schema.keys)
        lw.state.push_back(at::zeros(p.shape, On(k.dtype)));
    }
    offset += p.Numel();
    lw_owner_.push_back({i, lw.owner});
    lw_.push_back(std::move(lw));
  }
  lw_grad_ = at::zeros({offset}, On(at::kFloat));
}

void DistributedOptimizer::SetParams(const std::vector<at::Tensor>& full) {
  if (full.size() != params_.size())
    throw Error("distributed optimizer: " + std::to_string(full.size()) + " tensors for " +
                std::to_string(params_.size()) + " params");
  for (size_t i = 0; i < params_.size(); ++i) {
    if (full[i].sizes().vec() != params_[i].shape || full[i].scalar_type() != model_dtype_)
      throw Error("distributed optimizer: param " + params_[i].name +
                  " has the wrong shape or dtype");
  }
  for (const PlacedParam& p : layout_.params())
    param_buffer_.narrow(0, p.world.begin, p.numel)
        .copy_(full[static_cast<size_t>(p.param)].reshape({-1}));
  for (const Slice& s : slices_) {
    const at::Tensor src = full[static_cast<size_t>(s.where.param)].reshape({-1});
    main_.narrow(0, s.offset, s.where.param_range.size())
        .copy_(src.narrow(0, s.where.param_range.begin, s.where.param_range.size()).to(at::kFloat));
  }
  for (LayerWiseParam& lw : lw_) {
    lw.model.copy_(full[static_cast<size_t>(lw.param)]);
    if (lw.main.defined()) lw.main = lw.model.to(at::kFloat).clone();
  }
}

at::Tensor DistributedOptimizer::Grad(int i) {
  const ParamInfo& p = params_.at(static_cast<size_t>(i));
  if (ChildOf(i) != sharded_child_) {
    for (const LayerWiseParam& lw : lw_)
      if (lw.param == i) return lw_grad_.narrow(0, lw.offset, p.Numel()).view(p.shape);
  }
  const PlacedParam* placed = layout_.Find(i);
  if (!placed) throw Error("distributed optimizer: no buffer holds param " + p.name);
  return grad_buffer_.narrow(0, placed->world.begin, placed->numel).view(p.shape);
}

void DistributedOptimizer::ZeroGrad() {
  grad_buffer_.zero_();
  if (lw_grad_.defined()) lw_grad_.zero_();
}

at::Tensor DistributedOptimizer::ModelParam(int i) const {
  const ParamInfo& p = params_.at(static_cast<size_t>(i));
  if (ChildOf(i) != sharded_child_) {
    for (const LayerWiseParam& lw : lw_)
      if (lw.param == i) return lw.model;
  }
  const PlacedParam* placed = layout_.Find(i);
  if (!placed) throw Error("distributed optimizer: no buffer holds param " + p.name);
  return param_buffer_.narrow(0, placed->world.begin, placed->numel).view(p.shape);
}

void DistributedOptimizer::Step() {
  ++step_;
  // 1. Reduce the gradients: reduce-scatter per bucket, all-reduce layer-wise.
  ReduceGrads();
  Failpoint("step.before_update", comm_.rank());
  // 2. Global grad norm in fp64 over what each rank owns; clip coefficient.
  last_grad_norm_ = GradNorm();
  const float clip = ClipCoefficient(setup_.max_grad_norm, last_grad_norm_);
  // 3-5. Inner updates with this step's lr, main -> model, all-gathers.
  const double factor = lr_schedule_.Factor(step_ - schedule_origin_, setup_.main.lr());
  last_lr_ = setup_.main.lr() * factor;
  StepSharded(clip, factor);
  GatherBuckets();
  if (!lw_.empty()) StepLayerWise(clip, factor);
}

void DistributedOptimizer::ReduceGrads() {
  for (const Bucket& b : layout_.buckets()) {
    at::Tensor& shard = grad_shards_[static_cast<size_t>(b.index)];
    comm_.ReduceScatterSum(grad_buffer_.narrow(0, b.world.begin, b.world.size()), shard);
  }
  if (lw_grad_.defined() && lw_grad_.numel() > 0) comm_.AllReduce(lw_grad_, ReduceOp::kSum);
}

double DistributedOptimizer::GradNorm() {
  double sumsq = 0.0;
  for (const Slice& s : slices_) {
    const at::Tensor g = grad_shards_[static_cast<size_t>(s.where.bucket)].narrow(
        0, s.where.gbuf_local.begin, s.where.gbuf_local.size());
    sumsq += g.to(at::kDouble).square().sum().item<double>();
  }
  for (const LayerWiseParam& lw : lw_) {
    if (lw.owner != comm_.rank()) continue;
    sumsq += lw_grad_.narrow(0, lw.offset, lw.model.numel())
                 .to(at::kDouble)
                 .square()
                 .sum()
                 .item<double>();
  }
  at::Tensor total = at::full({1}, sumsq, On(at::kDouble));
  comm_.AllReduce(total, ReduceOp::kSum);
  return std::sqrt(total.item<double>());
}

void DistributedOptimizer::StepSharded(float clip, double lr_factor) {
  const OptimizerConfig& c = children_[static_cast<size_t>(sharded_child_)].config;
  const ElementwiseKernel& kernel = FindOptimizer(c.kind()).elementwise;
  const bool bf16 = model_dtype_ == at::kBFloat16;
  ScalarBlock scalars;
  double prepared_wd_mult = -1.0;
  // Silent bugs (docs/detection.md): shard-range arithmetic gone wrong.
  const bool off_by_one = FailpointOn("shard_range_off_by_one", comm_.rank());
  const bool skip_straddling = FailpointOn("skip_straddling_param", comm_.rank());
  for (const Slice& s : slices_) {
    if (skip_straddling && s.where.param_range.begin > 0) continue;
    int64_t n = s.where.gbuf_world.size();
    if (off_by_one &&
        s.where.gbuf_local.end ==
            layout_.buckets()[static_cast<size_t>(s.where.bucket)].ShardSize(comm_.size()))
      n -= 1;
    if (n == 0) continue;
    at::Tensor g =
        grad_shards_[static_cast<size_t>(s.where.bucket)].narrow(0, s.where.gbuf_local.begin, n);
    if (clip != 1.0f) g.mul_(clip);
    if (s.wd_mult != prepared_wd_mult) {  // the scalars of this slice's param group
      kernel.prepare({&c, step_, c.lr() * lr_factor, c.weight_decay() * s.wd_mult}, scalars);
      prepared_wd_mult = s.wd_mult;
    }
    ElementwiseSpan span;
    span.numel = n;
    span.main = main_.data_ptr<float>() + s.offset;
    span.grad = g.data_ptr<float>();
    for (size_t k = 0; k < state_.size(); ++k)
      span.state[k] = state_[k].data_ptr<float>() + s.offset;
    // The updated param goes straight into the param buffer, rounded to the model dtype.
    if (bf16)
      span.model_bf16 = reinterpret_cast<uint16_t*>(param_buffer_.data_ptr<at::BFloat16>()) +
                        s.where.gbuf_world.begin;
    else
      span.model_fp32 = param_buffer_.data_ptr<float>() + s.where.gbuf_world.begin;
    Run(kernel, scalars, span);
  }
}

void DistributedOptimizer::Run(const ElementwiseKernel& kernel, const ScalarBlock& scalars,
                               const ElementwiseSpan& span) const {
  if (!device_.is_cuda()) return RunElementwiseThreads(kernel, scalars, span, threads_);
  if (kernel.run_cuda == nullptr)
    throw Error(
        "distributed optimizer: " + children_[static_cast<size_t>(sharded_child_)].config.kind() +
        " has no CUDA kernel in this build (build the cuda preset, docs/gpu.md)");
  const c10::DeviceGuard on_device(device_);  // the launch goes to the current device
  kernel.run_cuda(scalars, span, /*stream=*/nullptr);
}

void DistributedOptimizer::CopyMainToModel() {
  // The model param is the main param rounded to the model dtype.
  for (const Slice& s : slices_) {
    const int64_t n = s.where.gbuf_world.size();
    param_buffer_.narrow(0, s.where.gbuf_world.begin, n).copy_(main_.narrow(0, s.offset, n));
  }
}

void DistributedOptimizer::GatherBuckets() {
  // The silent bug allgather_skips_last_bucket (docs/detection.md).
  const size_t gathered =
      layout_.buckets().size() - (FailpointOn("allgather_skips_last_bucket", comm_.rank()) ? 1 : 0);
  for (size_t i = 0; i < gathered; ++i) {
    const Bucket& b = layout_.buckets()[i];
    const Range shard = layout_.ShardRange(b.index, comm_.rank());
    const at::Tensor mine = param_buffer_.narrow(0, shard.begin, shard.size()).clone();
    at::Tensor whole = param_buffer_.narrow(0, b.world.begin, b.world.size());
    comm_.AllGather(mine, whole);
  }
}

void DistributedOptimizer::StepLayerWise(float clip, double lr_factor) {
  const OptimizerConfig& c = children_[static_cast<size_t>(layer_wise_child_)].config;
  const WholeParamKernel kernel = FindOptimizer(c.kind()).whole_param;
  for (LayerWiseParam& lw : lw_) {
    if (lw.owner != comm_.rank()) continue;
    at::Tensor g = lw_grad_.narrow(0, lw.offset, lw.model.numel()).view(lw.model.sizes());
    if (clip != 1.0f) g.mul_(clip);
    const double wd_mult = params_[static_cast<size_t>(lw.param)].DefaultWdMult();
    kernel({&c, step_, c.lr() * lr_factor, c.weight_decay() * wd_mult}, lw.main, g, lw.state);
  }
  GatherLayerWise();
}

void DistributedOptimizer::RebuildModelParams() {
  CopyMainToModel();
  GatherBuckets();
  if (!lw_.empty()) GatherLayerWise();
}

void DistributedOptimizer::GatherLayerWise() {
  for (LayerWiseParam& lw : lw_)
    if (lw.owner == comm_.rank()) lw.model.copy_(lw.main);
  // Pack each rank's owned params into equal-sized segments, all-gather, unpack.
  const int dp = comm_.size();
  std::vector<int64_t> load(static_cast<size_t>(dp), 0);
  for (const LayerWiseParam& lw : lw_) load[static_cast<size_t>(lw.owner)] += lw.model.numel();
  const int64_t seg = *std::max_element(load.begin(), load.end());
  if (seg == 0) return;
  at::Tensor mine = at::zeros({seg}, On(model_dtype_));
  int64_t at_off = 0;
  for (const LayerWiseParam& lw : lw_) {
    if (lw.owner != comm_.rank()) continue;
    mine.narrow(0, at_off, lw.model.numel()).copy_(lw.model.reshape({-1}));
    at_off += lw.model.numel();
  }
  at::Tensor all = at::empty({seg * dp}, mine.options());
  comm_.AllGather(mine, all);
  std::vector<int64_t> cursor(static_cast<size_t>(dp), 0);
  for (LayerWiseParam& lw : lw_) {
    const int64_t base = lw.owner * seg + cursor[static_cast<size_t>(lw.owner)];
    lw.model.copy_(all.narrow(0, base, lw.model.numel()).view(lw.model.sizes()));
    cursor[static_cast<size_t>(lw.owner)] += lw.model.numel();
  }
}

std::vector<OwnedPiece> DistributedOptimizer::Owned() {
  std::vector<OwnedPiece> out = PiecesOf(comm_.rank());
  size_t next = 0;
  for (const Slice& s : slices_) {
    OwnedPiece& p = out[next++];
    const int64_t n = s.where.gbuf_world.size();
    p.main = main_.narrow(0, s.offset, n);
    for (auto& t : state_) p.state.push_back(t.narrow(0, s.offset, n));
  }
  for (LayerWiseParam& lw : lw_) {
    if (lw.owner != comm_.rank()) continue;
    OwnedPiece& p = out[next++];
    p.main = lw.main.view({-1});
    for (auto& t : lw.state) p.state.push_back(t.view({-1}));
  }
  return out;
}

std::vector<OwnedPiece> BufferPiecesOf(const BufferLayout& layout, int rank) {
  std::vector<OwnedPiece> out;
  for (const OwnedSlice& s : layout.SlicesOf(rank)) {
    OwnedPiece p;
    p.param = s.param;
    p.param_range = s.param_range;
    p.bucket = s.bucket;
    p.in_bucket = s.gbuf_world_in_bucket;
    p.local = s.gbuf_local;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<OwnedPiece> DistributedOptimizer::PiecesOf(int rank) const {
  std::vector<OwnedPiece> out = BufferPiecesOf(layout_, rank);
  for (OwnedPiece& p : out) p.child = sharded_child_;
  for (const LayerWiseParam& lw : lw_) {
    if (lw.owner != rank) continue;
    OwnedPiece p;
    p.param = lw.param;
    p.child = layer_wise_child_;
    p.param_range = {0, lw.model.numel()};
    out.push_back(std::move(p));
  }
  return out;
}

MemoryFigures DistributedOptimizer::Memory() const {
  MemoryFigures m;
  auto add = [&](const std::string& child, const std::string& key, int64_t elements,
                 int64_t bytes) {
    m.entries.push_back({child, key, elements, bytes});
    m.total_bytes += bytes;
  };
  const ChildOptimizer& sharded = children_[static_cast<size_t>(sharded_child_)];
  const std::string sk = sharded.config.kind();
  add(sk, "main_param", main_.numel(), main_.numel() * 4);
  for (size_t k = 0; k < sharded.schema.keys.size(); ++k)
    add(sk, sharded.schema.keys[k].name, state_[k].numel(),
        state_[k].numel() * state_[k].element_size());
  m.owned_elements = main_.numel();
  if (layer_wise_child_ >= 0) {
    const ChildOptimizer& child = children_[static_cast<size_t>(layer_wise_child_)];
    const std::string kind = child.config.kind();
    int64_t elements = 0;
    std::vector<int64_t> state_bytes(child.schema.keys.size(), 0);
    for (const LayerWiseParam& lw : lw_) {
      if (!lw.main.defined()) continue;
      elements += lw.main.numel();
      for (size_t k = 0; k < lw.state.size(); ++k)
        state_bytes[k] += lw.state[k].numel() * lw.state[k].element_size();
    }
    add(kind, "main_param", elements, elements * 4);
    for (size_t k = 0; k < child.schema.keys.size(); ++k)
      add(kind, child.schema.keys[k].name, elements, state_bytes[k]);
    m.owned_elements += elements;
  }
  return m;
}

}  // namespace shardcheck
