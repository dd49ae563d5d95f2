#include "distributed/distrib_optimizer.h"

#include <algorithm>
#include <cmath>

#include "distributed/layer_wise.h"
#include "distributed/shard_update.h"
#include "reference/error.h"

namespace shardcheck {

DistributedOptimizer::DistributedOptimizer(const OptimizerSetup& setup,
                                           const std::vector<ParamInfo>& params,
                                           c10::ScalarType model_dtype, Communicator& comm,
                                           DistOptions opts)
    : setup_(setup), params_(params), model_dtype_(model_dtype), comm_(comm) {
  setup_.Validate();
  if (model_dtype_ != at::kFloat && model_dtype_ != at::kBFloat16)
    throw Error("distributed optimizer: model dtype must be fp32 or bf16");
  children_ = RouteParams(setup_, params_);
  child_of_.assign(params_.size(), 0);
  for (size_t c = 0; c < children_.size(); ++c)
    for (int i : children_[c].params) child_of_[static_cast<size_t>(i)] = static_cast<int>(c);
  sharded_child_ = setup_.IsMuon() ? 1 : 0;
  const int dp = comm_.size(), rank = comm_.rank();

  // The sharded buffer: params of the elementwise child, registration order.
  std::vector<BufferParamSpec> specs;
  for (int i : children_[static_cast<size_t>(sharded_child_)].params)
    specs.push_back({i, params_[static_cast<size_t>(i)].Numel()});
  layout_ = BufferLayout::Build(specs, dp, opts.bucket_size);
  grad_buffer_ = at::zeros({layout_.numel()}, at::kFloat);
  param_buffer_ = at::zeros({layout_.numel()}, at::TensorOptions().dtype(model_dtype_));
  for (const Bucket& b : layout_.buckets())
    grad_shards_.push_back(at::zeros({b.ShardSize(dp)}, at::kFloat));
  int64_t owned = 0;
  for (const OwnedSlice& s : layout_.SlicesOf(rank)) {
    slices_.push_back({s, owned, params_[static_cast<size_t>(s.param)].DefaultWdMult()});
    owned += s.gbuf_world.size();
  }
  main_ = at::zeros({owned}, at::kFloat);
  for (const StateKey& k : children_[static_cast<size_t>(sharded_child_)].schema.keys)
    state_.push_back(at::zeros({owned}, at::TensorOptions().dtype(k.dtype)));

  // Layer-wise Muon params: whole matrices, LPT-assigned to ranks.
  if (setup_.IsMuon()) {
    std::vector<std::vector<int64_t>> shapes;
    for (int i : children_[0].params) {
      if (params_[static_cast<size_t>(i)].shape.size() != 2)
        throw Error("distributed optimizer: Muon got a non-2-D param " +
                    params_[static_cast<size_t>(i)].name);
      shapes.push_back(params_[static_cast<size_t>(i)].shape);
    }
    const std::vector<int> owner = AssignLayerWise(shapes, dp);
    const StateSchema& schema = children_[0].schema;
    int64_t offset = 0;
    for (size_t j = 0; j < children_[0].params.size(); ++j) {
      const int i = children_[0].params[j];
      const ParamInfo& p = params_[static_cast<size_t>(i)];
      LayerWiseParam lw;
      lw.param = i;
      lw.owner = owner[j];
      lw.offset = offset;
      lw.model = at::zeros(p.shape, at::TensorOptions().dtype(model_dtype_));
      if (lw.owner == rank) {
        lw.main = at::zeros(p.shape, at::kFloat);
        lw.momentum = at::zeros(p.shape, at::TensorOptions().dtype(schema.keys.at(0).dtype));
      }
      offset += p.Numel();
      lw_owner_.push_back({i, lw.owner});
      lw_.push_back(std::move(lw));
    }
    lw_grad_ = at::zeros({offset}, at::kFloat);
  }
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
    param_buffer_.narrow(0, p.world.begin, p.numel).copy_(full[static_cast<size_t>(p.param)].reshape({-1}));
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
  // 1. Reduce the gradients: reduce-scatter per bucket, all-reduce for Muon.
  for (const Bucket& b : layout_.buckets()) {
    at::Tensor& shard = grad_shards_[static_cast<size_t>(b.index)];
    comm_.ReduceScatterSum(grad_buffer_.narrow(0, b.world.begin, b.world.size()), shard);
  }
  if (lw_grad_.defined() && lw_grad_.numel() > 0) comm_.AllReduce(lw_grad_, ReduceOp::kSum);

  // 2. Global grad norm in fp64 over what this rank owns; all-reduced.
  double sumsq = 0.0;
  for (const Slice& s : slices_) {
    const at::Tensor g = grad_shards_[static_cast<size_t>(s.where.bucket)].narrow(
        0, s.where.gbuf_local.begin, s.where.gbuf_local.size());
    sumsq += g.to(at::kDouble).square().sum().item<double>();
  }
  for (const LayerWiseParam& lw : lw_) {
    if (lw.owner != comm_.rank()) continue;
    sumsq += lw_grad_.narrow(0, lw.offset, lw.model.numel()).to(at::kDouble).square().sum().item<double>();
  }
  at::Tensor total = at::full({1}, sumsq, at::kDouble);
  comm_.AllReduce(total, ReduceOp::kSum);
  last_grad_norm_ = std::sqrt(total.item<double>());
  const float clip = ClipCoefficient(setup_.max_grad_norm, last_grad_norm_);

  // 3-5. Inner updates, main -> model copies, all-gathers.
  StepSharded(clip);
  if (!lw_.empty()) StepLayerWise(clip);
}

void DistributedOptimizer::StepSharded(float clip) {
  const OptimizerConfig& c = children_[static_cast<size_t>(sharded_child_)].config;
  for (const Slice& s : slices_) {
    const int64_t n = s.where.gbuf_world.size();
    at::Tensor g = grad_shards_[static_cast<size_t>(s.where.bucket)].narrow(0, s.where.gbuf_local.begin, n);
    if (clip != 1.0f) g.mul_(clip);
    float* p = main_.data_ptr<float>() + s.offset;
    const float* gp = g.data_ptr<float>();
    switch (c.kind) {
      case OptimizerKind::kAdam:
      case OptimizerKind::kAdamW:
        AdamShardUpdate(PrepareAdam(c, s.wd_mult, step_), p, gp,
                        state_[0].data_ptr<float>() + s.offset,
                        state_[1].data_ptr<float>() + s.offset, n);
        break;
      case OptimizerKind::kLion:
        LionShardUpdate(PrepareLion(c, s.wd_mult), p, gp, state_[0].data_ptr<float>() + s.offset, n);
        break;
      case OptimizerKind::kMuon:
        throw Error("distributed optimizer: Muon cannot run sharded elementwise");
    }
  }
  GatherSharded();
}

void DistributedOptimizer::GatherSharded() {
  // The model param is the main param rounded to the model dtype.
  for (const Slice& s : slices_) {
    const int64_t n = s.where.gbuf_world.size();
    param_buffer_.narrow(0, s.where.gbuf_world.begin, n).copy_(main_.narrow(0, s.offset, n));
  }
  for (const Bucket& b : layout_.buckets()) {
    const Range shard = layout_.ShardRange(b.index, comm_.rank());
    const at::Tensor mine = param_buffer_.narrow(0, shard.begin, shard.size()).clone();
    at::Tensor whole = param_buffer_.narrow(0, b.world.begin, b.world.size());
    comm_.AllGather(mine, whole);
  }
}

void DistributedOptimizer::StepLayerWise(float clip) {
  const OptimizerConfig& c = children_[0].config;
  for (LayerWiseParam& lw : lw_) {
    if (lw.owner != comm_.rank()) continue;
    at::Tensor g = lw_grad_.narrow(0, lw.offset, lw.model.numel()).view(lw.model.sizes());
    if (clip != 1.0f) g.mul_(clip);
    LayerWiseMuonUpdate(c, params_[static_cast<size_t>(lw.param)].DefaultWdMult(), lw.main, g,
                        lw.momentum);
  }
  GatherLayerWise();
}

void DistributedOptimizer::RebuildModelParams() {
  GatherSharded();
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
  at::Tensor mine = at::zeros({seg}, at::TensorOptions().dtype(model_dtype_));
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
  std::vector<OwnedPiece> out;
  for (const Slice& s : slices_) {
    OwnedPiece p;
    p.param = s.where.param;
    p.child = sharded_child_;
    p.param_range = s.where.param_range;
    p.bucket = s.where.bucket;
    p.in_bucket = s.where.gbuf_world_in_bucket;
    p.local = s.where.gbuf_local;
    const int64_t n = s.where.gbuf_world.size();
    p.main = main_.narrow(0, s.offset, n);
    for (auto& t : state_) p.state.push_back(t.narrow(0, s.offset, n));
    out.push_back(std::move(p));
  }
  for (LayerWiseParam& lw : lw_) {
    if (lw.owner != comm_.rank()) continue;
    OwnedPiece p;
    p.param = lw.param;
    p.child = 0;
    p.param_range = {0, lw.model.numel()};
    p.main = lw.main.view({-1});
    p.state.push_back(lw.momentum.view({-1}));
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<OwnedPiece> DistributedOptimizer::PiecesOf(int rank) const {
  std::vector<OwnedPiece> out;
  for (const OwnedSlice& s : layout_.SlicesOf(rank)) {
    OwnedPiece p;
    p.param = s.param;
    p.child = sharded_child_;
    p.param_range = s.param_range;
    p.bucket = s.bucket;
    p.in_bucket = s.gbuf_world_in_bucket;
    p.local = s.gbuf_local;
    out.push_back(std::move(p));
  }
  for (const LayerWiseParam& lw : lw_) {
    if (lw.owner != rank) continue;
    OwnedPiece p;
    p.param = lw.param;
    p.child = 0;
    p.param_range = {0, lw.model.numel()};
    out.push_back(std::move(p));
  }
  return out;
}

MemoryFigures DistributedOptimizer::Memory() const {
  MemoryFigures m;
  auto add = [&](const std::string& child, const std::string& key, int64_t elements, int64_t bytes) {
    m.entries.push_back({child, key, elements, bytes});
    m.total_bytes += bytes;
  };
  const ChildOptimizer& sharded = children_[static_cast<size_t>(sharded_child_)];
  const std::string sk = KindName(sharded.config.kind);
  add(sk, "main_param", main_.numel(), main_.numel() * 4);
  for (size_t k = 0; k < sharded.schema.keys.size(); ++k)
    add(sk, sharded.schema.keys[k].name, state_[k].numel(), state_[k].numel() * state_[k].element_size());
  m.owned_elements = main_.numel();
  if (setup_.IsMuon()) {
    int64_t elements = 0, state_bytes = 0;
    for (const LayerWiseParam& lw : lw_) {
      if (!lw.main.defined()) continue;
      elements += lw.main.numel();
      state_bytes += lw.momentum.numel() * lw.momentum.element_size();
    }
    add("muon", "main_param", elements, elements * 4);
    add("muon", children_[0].schema.keys.at(0).name, elements, state_bytes);
    m.owned_elements += elements;
  }
  return m;
}

}  // namespace shardcheck
