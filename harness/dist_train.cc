#include "harness/dist_train.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <ostream>

#include "distributed/model_space.h"
#include "harness/compare.h"
#include "harness/run_files.h"
#include "reference/error.h"

namespace shardcheck {

std::vector<std::string> ComparisonGroups(const std::vector<ChildOptimizer>& children) {
  std::vector<std::string> groups = {"params", "main_params"};
  for (const auto& c : children)
    for (const auto& k : c.schema.keys)
      if (std::find(groups.begin(), groups.end(), k.name) == groups.end()) groups.push_back(k.name);
  return groups;
}

namespace {

// Fixed-size byte record of a tensor name, for gathering strings.
constexpr int64_t kNameBytes = 512;

at::Tensor EncodeName(const std::string& s) {
  at::Tensor t = at::zeros({kNameBytes}, at::kByte);
  std::memcpy(t.data_ptr(), s.data(), std::min<size_t>(s.size(), kNameBytes - 1));
  return t;
}

std::string DecodeName(const at::Tensor& t) {
  const char* p = static_cast<const char*>(t.data_ptr());
  return std::string(p, strnlen(p, kNameBytes));
}

struct LocalCompare {
  std::vector<int64_t> mismatches;
  std::vector<double> max_abs;
  std::string first_tensor, first_detail;

  void Add(size_t group, const TensorDiff& d) {
    if (d.Equal()) return;
    mismatches[group] += d.shape_or_dtype_differs ? 1 : d.mismatches;
    max_abs[group] = std::max(max_abs[group], d.max_abs);
    if (first_tensor.empty()) {
      first_tensor = d.name;
      first_detail = d.Summary();
    }
  }
};

LocalCompare CompareWithReference(DistributedOptimizer& opt, const ReferenceOptimizer& ref,
                                  const std::vector<std::string>& groups) {
  LocalCompare lc;
  lc.mismatches.assign(groups.size(), 0);
  lc.max_abs.assign(groups.size(), 0.0);
  auto group_of = [&](const std::string& g) {
    return static_cast<size_t>(std::find(groups.begin(), groups.end(), g) - groups.begin());
  };
  const auto& params = opt.params();
  // Every gathered model param.
  for (size_t i = 0; i < params.size(); ++i)
    lc.Add(0, CompareBitwise(ParamKey(params[i].name), opt.ModelParam(static_cast<int>(i)),
                             ref.model_params()[i]));
  // This rank's shard: main params and every state key of the owner's schema.
  for (const OwnedPiece& p : opt.Owned()) {
    const ParamInfo& info = params[static_cast<size_t>(p.param)];
    const Range r = p.param_range;
    auto slice = [&](const at::Tensor& full) { return full.reshape({-1}).narrow(0, r.begin, r.size()); };
    const std::string suffix = info.name + "[" + std::to_string(r.begin) + ":" + std::to_string(r.end) + "]";
    lc.Add(1, CompareBitwise(MainParamKey(suffix), p.main, slice(ref.main_params()[static_cast<size_t>(p.param)])));
    const StateSchema& schema = opt.children()[static_cast<size_t>(p.child)].schema;
    for (size_t k = 0; k < schema.keys.size(); ++k) {
      const std::string& key = schema.keys[k].name;
      lc.Add(group_of(key), CompareBitwise(StateTensorKey(key, suffix), p.state[k],
                                           slice(ref.State(p.param, key))));
    }
  }
  return lc;
}

}  // namespace

TrainResult RunDistributedOracle(const TrainOptions& opts, Communicator& comm, std::ostream* log) {
  const OracleRunOptions& run = opts.run;
  run.Validate();
  const int dp = comm.size(), rank = comm.rank();
  const int M = run.micro_batches;
  if (M % dp != 0)
    throw Error("DP size " + std::to_string(dp) + " does not divide the micro-batch count M = " +
                std::to_string(M));
  const std::vector<ParamInfo>& params = run.model.params;
  DistributedOptimizer opt(run.setup, params, run.dtype, comm, {opts.bucket_size});
  const std::vector<at::Tensor> initial = InitialParams(run.model, run.seed, run.dtype);
  opt.SetParams(initial);
  std::optional<ReferenceOptimizer> ref;
  if (opts.compare_reference) ref.emplace(run.setup, params, initial);
  const std::vector<std::string> groups = ComparisonGroups(opt.children());

  TrainResult result;
  result.compared = opts.compare_reference;
  if (!opts.load_dir.empty()) {
    LoadCheckpoint(opt, opts.load_dir, opts.load_options);
    result.resumed_from = opt.step();
    if (log && rank == 0)
      *log << "loaded " << opts.load_dir << " at step " << opt.step() << " (dp " << dp << ")\n";
    // The uninterrupted reference up to the loaded step.
    if (ref)
      for (int64_t s = 1; s <= opt.step(); ++s)
        ref->Step(GlobalGrads(run.model, run.seed, static_cast<uint64_t>(s), M));
  }
  // Record one step's comparison (all-reduced) in `rec`.
  auto compare = [&](StepRecord& rec) {
    LocalCompare lc = CompareWithReference(opt, *ref, groups);
    const int64_t n = static_cast<int64_t>(groups.size());
    at::Tensor counts = at::from_blob(lc.mismatches.data(), {n}, at::kLong).clone();
    at::Tensor maxes = at::from_blob(lc.max_abs.data(), {n}, at::kDouble).clone();
    comm.AllReduce(counts, ReduceOp::kSum);
    comm.AllReduce(maxes, ReduceOp::kMax);
    int64_t total = 0;
    for (int64_t g = 0; g < n; ++g) {
      rec.groups.push_back({groups[static_cast<size_t>(g)], counts[g].item<int64_t>(), maxes[g].item<double>()});
      total += counts[g].item<int64_t>();
    }
    if (total > 0 && !result.first_mismatch) {
      // Rank 0 learns which rank saw a mismatch first and its tensor.
      std::vector<at::Tensor> names = comm.Gather(EncodeName(lc.first_tensor), 0);
      std::vector<at::Tensor> details = comm.Gather(EncodeName(lc.first_detail), 0);
      FirstMismatch fm;
      fm.step = rec.step;
      if (rank == 0) {
        for (int r = 0; r < dp; ++r) {
          const std::string name = DecodeName(names[static_cast<size_t>(r)]);
          if (name.empty()) continue;
          fm.rank = r;
          fm.tensor = name;
          fm.detail = DecodeName(details[static_cast<size_t>(r)]);
          break;
        }
      }
      result.first_mismatch = fm;
      result.ok = false;
    }
  };
  if (ref && result.resumed_from > 0) {
    // Right after the load, before any step: every tensor against the reference.
    StepRecord rec;
    rec.step = result.resumed_from;
    rec.grad_norm = 0.0;
    rec.after_load = true;
    compare(rec);
    if (log && rank == 0)
      *log << "after load: " << (result.ok ? "bitwise equal to the reference" : "MISMATCH") << "\n";
    result.steps.push_back(std::move(rec));
  }
  const int mb_begin = rank * M / dp, mb_end = (rank + 1) * M / dp;
  for (int s = static_cast<int>(opt.step()) + 1; s <= run.steps; ++s) {
    const uint64_t step = static_cast<uint64_t>(s);
    opt.ZeroGrad();
    for (size_t i = 0; i < params.size(); ++i)
      opt.Grad(static_cast<int>(i))
          .copy_(PartialGrad(run.seed, step, i, params[i].shape, M, mb_begin, mb_end));
    opt.Step();
    if (opts.after_step) opts.after_step(opt, s);
    StepRecord rec;
    rec.step = s;
    rec.grad_norm = opt.last_grad_norm();
    if (ref) {
      ref->Step(GlobalGrads(run.model, run.seed, step, M));
      compare(rec);
    }
    if (opts.save_at == s) {
      SaveCheckpoint(opt, opts.save_dir, opts.sharding_type);
      if (log && rank == 0)
        *log << "saved step " << s << " to " << opts.save_dir << " ("
             << ShardingTypeName(opts.sharding_type) << ")\n";
    }
    if (log && rank == 0) {
      *log << "step " << s << "/" << run.steps << "  grad_norm " << rec.grad_norm;
      if (ref) {
        int64_t total = 0;
        for (const auto& g : rec.groups) total += g.mismatches;
        *log << "  " << (total == 0 ? "bitwise equal to the reference" : "MISMATCH") << " ("
             << total << " elements differ)";
      }
      *log << "\n" << std::flush;
    }
    result.steps.push_back(std::move(rec));
  }
  // Memory figures of every rank, gathered to rank 0.
  const MemoryFigures mine = opt.Memory();
  std::vector<int64_t> flat;
  for (const auto& e : mine.entries) {
    flat.push_back(e.elements);
    flat.push_back(e.bytes);
  }
  flat.push_back(mine.owned_elements);
  flat.push_back(mine.total_bytes);
  std::vector<at::Tensor> all =
      comm.Gather(at::from_blob(flat.data(), {static_cast<int64_t>(flat.size())}, at::kLong).clone(), 0);
  if (rank == 0) {
    for (const at::Tensor& t : all) {
      MemoryFigures m = mine;
      for (size_t e = 0; e < m.entries.size(); ++e) {
        m.entries[e].elements = t[static_cast<int64_t>(2 * e)].item<int64_t>();
        m.entries[e].bytes = t[static_cast<int64_t>(2 * e + 1)].item<int64_t>();
      }
      m.owned_elements = t[static_cast<int64_t>(2 * m.entries.size())].item<int64_t>();
      m.total_bytes = t[static_cast<int64_t>(2 * m.entries.size() + 1)].item<int64_t>();
      result.memory.push_back(m);
    }
  }
  result.final_state = GatherModelSpace(opt, 0);
  result.layout = LayoutJson(opt);
  return result;
}

nlohmann::ordered_json LayoutJson(const DistributedOptimizer& opt) {
  const BufferLayout& l = opt.layout();
  nlohmann::ordered_json j;
  j["dp"] = l.dp();
  j["bucket_size"] = l.bucket_size();
  j["numel"] = l.numel();
  j["buckets"] = nlohmann::ordered_json::array();
  for (const Bucket& b : l.buckets())
    j["buckets"].push_back({{"begin", b.world.begin},
                            {"end", b.world.end},
                            {"numel_unpadded", b.numel_unpadded},
                            {"shard", b.ShardSize(l.dp())},
                            {"params", b.params.size()}});
  std::map<int, int> ranks_per_param;
  for (int r = 0; r < l.dp(); ++r)
    for (const OwnedSlice& s : l.SlicesOf(r)) ++ranks_per_param[s.param];
  int straddling = 0;
  for (const auto& [p, n] : ranks_per_param) straddling += n > 1;
  j["straddling_params"] = straddling;
  int64_t smallest = -1;
  for (const PlacedParam& p : l.params()) smallest = smallest < 0 ? p.numel : std::min(smallest, p.numel);
  j["smallest_param_numel"] = smallest;
  j["layer_wise_owners"] = nlohmann::ordered_json::object();
  for (const auto& [param, owner] : opt.layer_wise_owners())
    j["layer_wise_owners"][opt.params()[static_cast<size_t>(param)].name] = owner;
  return j;
}

nlohmann::ordered_json TrainResultJson(const TrainOptions& opts, int dp, const TrainResult& r) {
  nlohmann::ordered_json j;
  j["format"] = "shardcheck-train-result/1";
  j["config"] = RunConfigJson(opts.run, r.steps.empty() ? 0 : r.steps.back().step);
  j["config"]["dp"] = dp;
  j["config"]["bucket_size"] = opts.bucket_size;
  j["compared_with_reference"] = r.compared;
  j["resumed_from"] = r.resumed_from;
  if (!opts.load_dir.empty()) j["loaded_from"] = opts.load_dir;
  if (opts.save_at > 0)
    j["saved"] = {{"step", opts.save_at}, {"dir", opts.save_dir},
                  {"sharding_type", ShardingTypeName(opts.sharding_type)}};
  j["verdict"] = !r.compared ? "not_compared" : (r.ok ? "pass" : "fail");
  j["steps"] = nlohmann::ordered_json::array();
  for (const auto& s : r.steps) {
    nlohmann::ordered_json js;
    js["step"] = s.step;
    js["grad_norm"] = s.grad_norm;
    if (s.after_load) js["after_load"] = true;
    for (const auto& g : s.groups)
      js["groups"][g.group] = {{"mismatches", g.mismatches}, {"max_abs_diff", g.max_abs}};
    j["steps"].push_back(js);
  }
  if (r.first_mismatch) {
    j["first_mismatch"] = {{"step", r.first_mismatch->step},
                           {"rank", r.first_mismatch->rank},
                           {"tensor", r.first_mismatch->tensor},
                           {"detail", r.first_mismatch->detail}};
  } else {
    j["first_mismatch"] = nullptr;
  }
  j["layout"] = r.layout;
  j["memory"] = nlohmann::ordered_json::array();
  for (size_t rank = 0; rank < r.memory.size(); ++rank) {
    nlohmann::ordered_json m;
    m["rank"] = rank;
    m["owned_elements"] = r.memory[rank].owned_elements;
    m["total_bytes"] = r.memory[rank].total_bytes;
    for (const auto& e : r.memory[rank].entries)
      m["entries"].push_back({{"child", e.child}, {"key", e.key}, {"elements", e.elements}, {"bytes", e.bytes}});
    j["memory"].push_back(m);
  }
  return j;
}

}  // namespace shardcheck
