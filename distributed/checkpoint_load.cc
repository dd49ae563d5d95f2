// Loading a checkpoint into a DistributedOptimizer, and reading its whole
// model-space state offline (distributed/checkpoint.h). Where the bytes of
// the buffer's params lie is the sharding type's (distributed/sharding/);
// layer-wise params are whole, in model space, under "fp32_param" for the
// main param.
#include <map>

#include "distributed/checkpoint_parts.h"
#include "distributed/hyperparam_diff.h"
#include "distributed/sharding_format.h"
#include "spec/config_json.h"
#include "spec/error.h"
#include "spec/failpoint.h"

namespace shardcheck {

namespace {

// (destination view, staged data): what a load copies once every rank has
// read and checked everything.
using LoadPlan = std::vector<std::pair<at::Tensor, at::Tensor>>;

// The hyperparameters that differ from the checkpoint's, as warnings; an
// Error instead under --strict-hparams.
std::vector<std::string> HyperparamWarnings(const DistributedOptimizer& opt,
                                            const CheckpointMetadata& m, const std::string& dir,
                                            const LoadOptions& options) {
  std::vector<std::string> warnings =
      HyperparamDifferences(m.optimizer_config, SetupJson(opt.setup()));
  if (options.strict_hparams && !warnings.empty()) {
    std::string all;
    for (const auto& w : warnings) all += (all.empty() ? "" : "; ") + w;
    throw Error("checkpoint " + dir +
                " was saved with other hyperparameters (--strict-hparams): " + all);
  }
  return warnings;
}

// Where `kind` ("param": the main param) of this rank's piece p lies.
TensorRange Locate(const LoadView& v, const ShardingFormat& format, const OwnedPiece& p,
                   const std::string& kind) {
  if (p.bucket >= 0) return format.Locate(v, p, kind);
  const std::string& name = v.place.params[static_cast<size_t>(p.param)].name;
  return {ModelSpaceKey(kind == "param" ? "fp32_param" : kind, name), p.param_range.begin};
}

// Reads every piece this rank owns, main param and states: staged, not
// yet copied. A state key the checkpoint lacks (allowed by the checks
// before) stages zeros.
LoadPlan ReadOwnedPieces(DistributedOptimizer& opt, CheckpointReader& reader,
                         const std::string& dir) {
  const ShardingFormat& format = FormatOf(reader.metadata().sharding_type);
  const std::vector<int64_t> prefix = BucketPrefix(opt.layout());
  const ShardPlace place = PlaceOf(opt);
  const LoadView view{place, reader.metadata(), prefix};
  std::vector<at::Tensor> dsts;  // each piece and kind, where[i] its bytes
  std::vector<int64_t> sizes;    // its elements
  std::vector<TensorRange> where;
  for (OwnedPiece& p : opt.Owned()) {
    for (const PieceKind& kind : PieceKinds(StateNames(opt, p.child))) {
      dsts.push_back(kind.Of(p));
      sizes.push_back(p.param_range.size());
      where.push_back(Locate(view, format, p, kind.name));
    }
  }
  const std::vector<const TensorRecord*> records = FindRanges(reader.metadata().tensors, where);
  LoadPlan plan;
  std::vector<CheckpointReader::Range> ranges;
  std::vector<size_t> read_into;  // ranges[i] stages plan[read_into[i]]
  for (size_t i = 0; i < where.size(); ++i) {
    const at::Tensor& dst = dsts[i];
    if (!records[i]) {
      plan.push_back({dst, at::zeros_like(dst)});
      continue;
    }
    if (records[i]->dtype != dst.scalar_type())
      throw Error("checkpoint " + dir + ": tensor " + where[i].key + " has dtype " +
                  DtypeName(records[i]->dtype) + ", expected " + DtypeName(dst.scalar_type()));
    read_into.push_back(plan.size());
    plan.push_back({dst, at::Tensor()});
    ranges.push_back({where[i].key, where[i].begin, sizes[i]});
  }
  // One pass over the files: each chunk read once, only the bytes needed staged.
  std::vector<at::Tensor> staged = reader.ReadRanges(ranges);
  for (size_t i = 0; i < staged.size(); ++i) plan[read_into[i]].second = std::move(staged[i]);
  return plan;
}

}  // namespace

std::vector<std::string> LoadCheckpoint(DistributedOptimizer& opt, const std::string& dir,
                                        const LoadOptions& options) {
  Communicator& comm = opt.comm();
  std::vector<std::string> warnings;
  LoadPlan plan;
  int64_t step = 0;
  LrSchedule schedule;
  Agree(comm, "loading checkpoint " + dir, [&] {
    CheckpointReader reader(dir);
    ValidateCompatibility(opt, reader.metadata(), dir, options);
    warnings = HyperparamWarnings(opt, reader.metadata(), dir, options);
    Failpoint("load.before_read", comm.rank());
    plan = ReadOwnedPieces(opt, reader, dir);
    step = reader.metadata().step;
    schedule = reader.metadata().lr_schedule;
    schedule.peak_lr = reader.metadata().max_lr;
  });
  for (auto& [dst, data] : plan) dst.copy_(data);
  opt.SetStep(FailpointOn("step_off_by_one_on_load") ? step - 1 : step);
  if (options.lr_schedule == LoadOptions::LrScheduleChoice::kCheckpoint) opt.SetLrSchedule(schedule);
  if (FailpointOn("lr_schedule_restarts_on_load")) opt.RestartLrScheduleAt(opt.step());
  if (!FailpointOn("skip_post_load_param_sync")) opt.RebuildModelParams();
  return warnings;
}

namespace {

// Where each buffer param of the checkpoint lies: bucket, offset in the
// bucket, and the unpadded sizes of the buckets before.
struct BufferPlace {
  int bucket = 0;
  int64_t offset = 0;
  int64_t bucket_prefix = 0;
};

std::map<std::string, BufferPlace> BufferPlacements(const CheckpointMetadata& m) {
  std::map<std::string, BufferPlace> placed;
  if (m.buffers.empty()) return placed;
  int64_t acc = 0;
  const std::vector<BucketRecord>& buckets = m.buffers[0].buckets;
  for (size_t b = 0; b < buckets.size(); ++b) {
    for (const auto& member : buckets[b].params)
      placed[member.name] = {static_cast<int>(b), member.offset, acc};
    acc += buckets[b].numel_unpadded;
  }
  return placed;
}

// `kind` ("param": the main param) of param p, whole, in its shape.
at::Tensor ReadParamKind(CheckpointReader& reader, const std::map<std::string, BufferPlace>& placed,
                         const ParamInfo& p, const std::string& kind) {
  const CheckpointMetadata& m = reader.metadata();
  auto where = placed.find(p.name);
  TensorRange range;
  if (m.layer_wise_owner.count(p.name) || where == placed.end()) {
    range = {ModelSpaceKey(kind == "param" ? "fp32_param" : kind, p.name), 0, true,
             kind == "param" ? ModelSpaceKey("param", p.name) : ""};
  } else {
    const BufferPlace& place = where->second;
    range = FormatOf(m.sharding_type)
                .LocateParam({m, p.name, place.bucket, place.offset, place.bucket_prefix}, kind);
  }
  if (!range.or_key.empty() && !reader.Has(range.key)) range.key = range.or_key;
  if (range.whole) return reader.ReadFull(range.key);
  return reader.ReadRange(range.key, range.begin, p.Numel()).view(p.shape);
}

}  // namespace

StateDict ReadModelSpace(CheckpointReader& reader) {
  const CheckpointMetadata& m = reader.metadata();
  StateDict sd;
  sd.optimizer = m.optimizer;
  sd.step = m.step;
  sd.groups = m.groups;
  const std::map<std::string, BufferPlace> placed = BufferPlacements(m);
  for (size_t i = 0; i < m.params.size(); ++i) {
    const ParamInfo& p = m.params[i];
    auto schema = m.schemas.find(m.param_child[i]);
    if (schema == m.schemas.end())
      throw Error(reader.dir() + ": param " + p.name + " names optimizer " + m.param_child[i] +
                  " without a schema");
    const at::Tensor main = ReadParamKind(reader, placed, p, "param");
    sd.tensors[ParamKey(p.name)] = main.to(m.model_dtype);
    if (m.model_dtype != at::kFloat) sd.tensors[MainParamKey(p.name)] = main;
    for (const auto& key : schema->second)
      sd.tensors[StateTensorKey(key, p.name)] = ReadParamKind(reader, placed, p, key);
  }
  return sd;
}

}  // namespace shardcheck
