#include <set>

#include "distributed/checkpoint_parts.h"
#include "distributed/sharding_format.h"
#include "spec/error.h"
#include "spec/failpoint.h"
#include "spec/schema.h"

namespace shardcheck {

std::set<std::string> ExpectedCheckpointKeys(const DistributedOptimizer& opt, ShardingType type) {
  std::set<std::string> keys;
  const auto& params = opt.params();
  const std::vector<PieceKind> kinds = ShardedKinds(opt);
  const bool layer_wise_state = !FailpointOn("layerwise_state_not_saved");
  for (const auto& [param, owner] : opt.layer_wise_owners()) {
    const std::string& name = params[static_cast<size_t>(param)].name;
    keys.insert(ModelSpaceKey("fp32_param", name));
    if (!layer_wise_state) continue;
    for (const std::string& k : StateNames(opt, opt.ChildOf(param)))
      keys.insert(ModelSpaceKey(k, name));
  }
  const ShardingFormat& format = FormatOf(type);
  format.AddKeys(opt, kinds, keys);
  if (format.StoresBufferSpace() && !opt.layout().buckets().empty()) {
    const std::string prefix = BufferPrefix(0, opt.model_dtype(), at::kFloat);
    keys.insert(prefix + ".per_bucket_numel");
    keys.insert(prefix + ".per_bucket_numel_unpadded");
  }
  return keys;
}

namespace {

std::string List(const std::vector<std::string>& v, size_t most = 3) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < most; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > most) s += " (+" + std::to_string(v.size() - most) + " more)";
  return s;
}

std::string SchemaText(const std::map<std::string, std::vector<std::string>>& schemas) {
  std::string s;
  for (const auto& [kind, keys] : schemas) {
    if (!s.empty()) s += "; ";
    s += kind + ": " + List(keys, 10);
  }
  return s;
}

// Optimizer and schema: state keys by name, over every child.
void CheckSchemas(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                  const std::string& dir, const LoadOptions& o) {
  std::map<std::string, std::vector<std::string>> mine;
  std::set<std::string> my_keys, their_keys;
  for (const auto& c : opt.children()) {
    mine[c.config.kind()] = c.schema.Names();
    for (const auto& k : c.schema.Names()) my_keys.insert(k);
  }
  for (const auto& [kind, keys] : m.schemas)
    for (const auto& k : keys) their_keys.insert(k);
  std::vector<std::string> missing, unexpected;
  for (const auto& k : my_keys)
    if (!their_keys.count(k)) missing.push_back(k);
  for (const auto& k : their_keys)
    if (!my_keys.count(k)) unexpected.push_back(k);
  if ((!missing.empty() && !o.allow_missing) || (!unexpected.empty() && !o.ignore_unexpected)) {
    std::string msg = "checkpoint " + dir + " holds optimizer '" + m.optimizer + "' (" +
                      SchemaText(m.schemas) + "); this run is '" + opt.setup().name + "' (" +
                      SchemaText(mine) + "):";
    if (!missing.empty()) msg += " missing state key " + List(missing, 10) + ";";
    if (!unexpected.empty()) msg += " unexpected state key " + List(unexpected, 10) + ";";
    throw Error(msg);
  }
  if (missing.empty() && unexpected.empty() && m.optimizer != opt.setup().name)
    throw Error("checkpoint " + dir + " holds optimizer '" + m.optimizer + "', this run is '" +
                opt.setup().name + "' (same state keys, different update)");
}

// The lr schedule and its peak: equal, or the options say which wins.
void CheckLrSchedule(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                     const std::string& dir, const LoadOptions& o) {
  const double run_max = opt.schedule_peak_lr();
  if (m.lr_schedule.SameShape(opt.lr_schedule()) && m.max_lr == run_max) return;
  if (o.lr_schedule != LoadOptions::LrScheduleChoice::kMustMatch) return;
  std::ostringstream msg;
  msg << "checkpoint " << dir << " was trained with lr " << m.max_lr << " ("
      << m.lr_schedule.Describe() << "); this run has lr " << run_max << " ("
      << opt.lr_schedule().Describe()
      << "): say which wins with --override-lr-schedule (this run's) or "
         "--use-checkpoint-lr-schedule";
  throw Error(msg.str());
}

// Params: names, shapes, count, model dtype.
void CheckParams(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                 const std::string& dir, const LoadOptions& o) {
  for (size_t i = 0; i < opt.params().size(); ++i) {
    const ParamInfo& p = opt.params()[i];
    const ParamInfo* q = m.FindParam(p.name);
    if (!q) throw Error("checkpoint " + dir + " has no param " + p.name);
    if (q->shape != p.shape)
      throw Error("checkpoint " + dir + ": param " + p.name + " has shape " + q->ShapeString() +
                  ", this run " + p.ShapeString());
  }
  if (m.params.size() != opt.params().size() && !o.ignore_unexpected)
    throw Error("checkpoint " + dir + " holds " + std::to_string(m.params.size()) +
                " params, this run " + std::to_string(opt.params().size()));
  if (m.model_dtype != opt.model_dtype())
    throw Error("checkpoint " + dir + " was saved from a " + DtypeName(m.model_dtype) +
                " model, this run is " + DtypeName(opt.model_dtype()));
}

// Groups by identifying keys, with the same members.
void CheckGroups(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                 const std::string& dir, const LoadOptions& o) {
  for (const GroupRecord& want : GroupRecords(opt.children(), opt.params())) {
    const GroupRecord* found = nullptr;
    for (const auto& r : m.groups)
      if (r.Id() == want.Id()) found = &r;
    if (!found) {
      if (o.allow_missing) continue;
      throw Error("checkpoint " + dir + " has no param group " + want.Id());
    }
    if (found->params != want.params)
      throw Error("checkpoint " + dir + ": param group " + want.Id() + " holds other params");
  }
}

// The layout constraints of the types that store buffer space.
void CheckLayout(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                 const std::string& dir) {
  if (!FormatOf(m.sharding_type).StoresBufferSpace()) return;
  const BufferLayout& l = opt.layout();
  const std::string t = ShardingTypeName(m.sharding_type);
  const std::vector<BucketRecord> none;
  const std::vector<BucketRecord>& theirs = m.buffers.empty() ? none : m.buffers[0].buckets;
  const std::string hint = " (bucket size " +
                           std::to_string(m.buffers.empty() ? 0 : m.buffers[0].bucket_size) +
                           " at save, " + std::to_string(l.bucket_size()) + " now); " + t +
                           " can change only the DP size";
  for (const Bucket& b : l.buckets()) {
    if (static_cast<size_t>(b.index) >= theirs.size()) break;
    const BucketRecord& r = theirs[static_cast<size_t>(b.index)];
    if (r.numel_unpadded != b.numel_unpadded)
      throw Error("layout mismatch: bucket " + std::to_string(b.index) + " has numel_unpadded " +
                  std::to_string(r.numel_unpadded) + " in checkpoint " + dir + ", " +
                  std::to_string(b.numel_unpadded) + " in this run" + hint);
    for (size_t j = 0; j < b.params.size(); ++j) {
      const PlacedParam& p = l.params()[static_cast<size_t>(b.params[j])];
      const std::string& name = opt.params()[static_cast<size_t>(p.param)].name;
      if (j >= r.params.size() || r.params[j].name != name ||
          r.params[j].offset != p.world.begin - b.world.begin)
        throw Error("layout mismatch: bucket " + std::to_string(b.index) + " of checkpoint " + dir +
                    " places params differently (" + name + ")" + hint);
    }
  }
  if (theirs.size() != l.buckets().size())
    throw Error("layout mismatch: checkpoint " + dir + " has " + std::to_string(theirs.size()) +
                " buckets, this run " + std::to_string(l.buckets().size()) + hint);
}

// The tensor keys: every expected one present (fully_reshardable accepts
// fp32_param for the main param), no unexpected ones, unless allowed.
void CheckTensorKeys(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                     const std::string& dir, const LoadOptions& o) {
  const std::set<std::string> expected = ExpectedCheckpointKeys(opt, m.sharding_type);
  std::vector<std::string> miss, extra;
  for (const auto& k : expected) {
    if (m.tensors.Find(k)) continue;
    const std::string alias = "optimizer.state.param.";
    if (k.rfind(alias, 0) == 0 &&
        m.tensors.Find("optimizer.state.fp32_param." + k.substr(alias.size())))
      continue;
    miss.push_back(k);
  }
  for (const TensorRecord& t : m.tensors) {
    const std::string& k = t.key;
    if (expected.count(k)) continue;
    const std::string alias = "optimizer.state.fp32_param.";
    if (k.rfind(alias, 0) == 0 && expected.count("optimizer.state.param." + k.substr(alias.size())))
      continue;
    extra.push_back(k);
  }
  // With allow_missing, missing state tensors are zero-filled; main params never are.
  std::vector<std::string> fatal_missing;
  for (const auto& k : miss) {
    const bool is_main = k.find(".param.") != std::string::npos ||
                         k.find(".fp32_param.") != std::string::npos ||
                         (k.size() > 6 && k.compare(k.size() - 6, 6, ".param") == 0) ||
                         k.find("per_bucket_numel") != std::string::npos;
    if (!o.allow_missing || is_main) fatal_missing.push_back(k);
  }
  if (!fatal_missing.empty() || (!extra.empty() && !o.ignore_unexpected)) {
    std::string msg = "checkpoint " + dir + " (" + ShardingTypeName(m.sharding_type) +
                      ") does not match this run:";
    if (!fatal_missing.empty()) msg += " missing tensor " + List(fatal_missing) + ";";
    if (!extra.empty() && !o.ignore_unexpected) msg += " unexpected tensor " + List(extra) + ";";
    throw Error(msg);
  }
}

}  // namespace

void ValidateCompatibility(const DistributedOptimizer& opt, const CheckpointMetadata& m,
                           const std::string& dir, const LoadOptions& o) {
  CheckSchemas(opt, m, dir, o);
  CheckParams(opt, m, dir, o);
  CheckGroups(opt, m, dir, o);
  CheckLayout(opt, m, dir);
  CheckTensorKeys(opt, m, dir, o);
  CheckLrSchedule(opt, m, dir, o);
}

}  // namespace shardcheck
