#include "harness/cell/dist_train.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <ostream>
#include <sstream>

#include "distributed/gather_strings.h"
#include "distributed/model_space.h"
#include "harness/cell/compare.h"
#include "harness/cell/run_files.h"
#include "harness/cell/train_result_json.h"
#include "spec/error.h"
#include "spec/failpoint.h"

namespace shardcheck {

bool IsStrictLoadRefusal(const std::string& message) {
  return message.find(kStrictLoadRefused) != std::string::npos;
}

std::vector<std::string> ComparisonGroups(const std::vector<ChildOptimizer>& children) {
  std::vector<std::string> groups = {"params", "main_params"};
  for (const auto& c : children)
    for (const auto& k : c.schema.keys)
      if (std::find(groups.begin(), groups.end(), k.name) == groups.end()) groups.push_back(k.name);
  return groups;
}

namespace {

struct LocalCompare {
  std::vector<int64_t> mismatches, violations, sign_changes, max_ulp;
  std::vector<double> max_abs, max_rel;
  std::string first_tensor, first_detail;

  explicit LocalCompare(size_t n)
      : mismatches(n, 0),
        violations(n, 0),
        sign_changes(n, 0),
        max_ulp(n, 0),
        max_abs(n, 0.0),
        max_rel(n, 0.0) {}

  void Add(size_t group, const TensorDiff& bits, const TensorDiff* tol) {
    if (tol) {
      violations[group] += tol->shape_or_dtype_differs ? 1 : tol->mismatches;
      // The tolerance comparison measures every difference.
      max_abs[group] = std::max(max_abs[group], tol->max_abs);
      max_rel[group] = std::max(max_rel[group], tol->max_rel);
      max_ulp[group] = std::max(max_ulp[group], tol->max_ulp);
      sign_changes[group] += tol->sign_changes;
    }
    if (bits.Equal()) return;
    mismatches[group] += bits.shape_or_dtype_differs ? 1 : bits.mismatches;
    max_abs[group] = std::max(max_abs[group], bits.max_abs);
    max_rel[group] = std::max(max_rel[group], bits.max_rel);
    max_ulp[group] = std::max(max_ulp[group], bits.max_ulp);
    if (!tol) sign_changes[group] += bits.sign_changes;
    if (first_tensor.empty()) {
      first_tensor = bits.name;
      first_detail = bits.Summary();
    }
  }
};

// The silent bugs of gradient scaling (docs/detection.md). A source's rank
// gradient is already its micro-batch sum divided by M; these scale it
// again, as a training loop that gets the convention wrong would.
void MisscaleRankGrads(std::vector<at::Tensor>& grads, int rank, int dp, int m) {
  if (FailpointOn("grad_scale_applied_twice", rank))
    for (at::Tensor& g : grads) g = g / static_cast<float>(m);
  if (FailpointOn("grad_divided_by_dp_not_microbatches", rank))
    for (at::Tensor& g : grads) g = g * static_cast<float>(m) / static_cast<float>(dp);
}

const at::Tensor& SnapshotTensor(const StateDict& sd, const std::string& key) {
  auto it = sd.tensors.find(key);
  if (it == sd.tensors.end()) throw Error("reference snapshot lacks " + key);
  return it->second;
}

LocalCompare CompareWithReference(DistributedOptimizer& opt, const StateDict& ref,
                                  const std::vector<std::string>& groups, const TrainOptions& o) {
  LocalCompare lc(groups.size());
  const bool tolerance = o.compare_atol > 0.0 || o.compare_rtol > 0.0;
  auto add = [&](size_t g, const std::string& name, const at::Tensor& a, const at::Tensor& b) {
    const TensorDiff bits = CompareBitwise(name, a, b, RelFloor(o.compare_atol));
    if (!tolerance) return lc.Add(g, bits, nullptr);
    const TensorDiff tol = CompareTolerance(name, a, b, o.compare_rtol, o.compare_atol);
    lc.Add(g, bits, &tol);
  };
  auto group_of = [&](const std::string& g) {
    return static_cast<size_t>(std::find(groups.begin(), groups.end(), g) - groups.begin());
  };
  const auto& params = opt.params();
  // Every gathered model param.
  for (size_t i = 0; i < params.size(); ++i)
    add(0, ParamKey(params[i].name), opt.ModelParam(static_cast<int>(i)),
        SnapshotTensor(ref, ParamKey(params[i].name)));
  // This rank's shard: main params and every state key of the owner's schema.
  const bool fp32 = opt.model_dtype() == at::kFloat;
  for (const OwnedPiece& p : opt.Owned()) {
    const ParamInfo& info = params[static_cast<size_t>(p.param)];
    const Range r = p.param_range;
    auto slice = [&](const at::Tensor& full) {
      return full.reshape({-1}).narrow(0, r.begin, r.size());
    };
    const std::string suffix =
        info.name + "[" + std::to_string(r.begin) + ":" + std::to_string(r.end) + "]";
    const at::Tensor& main =
        SnapshotTensor(ref, fp32 ? ParamKey(info.name) : MainParamKey(info.name));
    add(1, MainParamKey(suffix), p.main, slice(main));
    const StateSchema& schema = opt.children()[static_cast<size_t>(p.child)].schema;
    for (size_t k = 0; k < schema.keys.size(); ++k) {
      const std::string& key = schema.keys[k].name;
      add(group_of(key), StateTensorKey(key, suffix), p.state[k],
          slice(SnapshotTensor(ref, StateTensorKey(key, info.name))));
    }
  }
  return lc;
}

// One rank's run: the steps of RunDistributed as named methods.
class DistributedRun {
 public:
  DistributedRun(const TrainOptions& opts, Communicator& comm, std::ostream* log)
      : opts_(opts), comm_(comm), log_(comm.rank() == 0 ? log : nullptr) {}

  TrainResult Run() {
    Prepare();
    if (!opts_.load_dir.empty()) Load();
    for (int s = static_cast<int>(opt_->step()) + 1; s <= opts_.run.steps; ++s) TrainStep(s);
    SumGridCounts();
    GatherMemory();
    result_.final_state = GatherModelSpace(*opt_, 0);
    result_.layout = LayoutJson(*opt_);
    return std::move(result_);
  }

 private:
  // The gradient source, the optimizer at its initial params, the reference.
  void Prepare() {
    const OracleRunOptions& run = opts_.run;
    run.Validate();
    const int dp = comm_.size(), m = run.micro_batches;
    if (m % dp != 0)
      throw Error("DP size " + std::to_string(dp) +
                  " does not divide the micro-batch count M = " + std::to_string(m));
    source_ = opts_.source;
    if (!source_) {
      own_source_ = MakeOracleSource(run.model, run.seed);
      source_ = own_source_.get();
    }
    opt_ = std::make_unique<DistributedOptimizer>(
        run.setup, source_->spec().params, run.dtype, comm_,
        DistOptions{opts_.bucket_size, run.device, run.kernel_threads});
    opt_->SetParams(source_->InitialParams(run.dtype));
    if (opts_.compare_reference) {
      ref_ = opts_.reference;
      if (!ref_) {
        own_reference_ = RunReferenceTrajectory(*source_, run.setup, run.dtype, run.steps, m,
                                                run.device, run.grad_reduction);
        ref_ = &own_reference_;
      }
      if (ref_->steps() < run.steps)
        throw Error("the reference trajectory covers " + std::to_string(ref_->steps()) +
                    " steps, the run needs " + std::to_string(run.steps));
    }
    groups_ = ComparisonGroups(opt_->children());
    result_.compared = opts_.compare_reference;
  }

  // Loads the checkpoint, then compares every tensor with the reference
  // before any step.
  void Load() {
    std::vector<std::string> warnings;
    try {
      warnings = LoadCheckpoint(*opt_, opts_.load_dir, opts_.load_options);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInput) throw;
      throw Error(kStrictLoadRefused + std::string(e.what()), e.kind());
    }
    for (const std::string& w : warnings)
      if (log_)
        std::cerr << "shardcheck: warning: hyperparameter differs from the checkpoint's: " << w
                  << "\n";
    result_.resumed_from = opt_->step();
    if (ref_ == &own_reference_ && opt_->lr_schedule() != opts_.run.setup.lr_schedule) {
      // The run continues with the checkpoint's schedule: so does its reference.
      OptimizerSetup adopted = opts_.run.setup;
      adopted.lr_schedule = opt_->lr_schedule();
      own_reference_ = RunReferenceTrajectory(*source_, adopted, opts_.run.dtype, opts_.run.steps,
                                              opts_.run.micro_batches, opts_.run.device,
                                              opts_.run.grad_reduction);
    }
    if (log_)
      *log_ << "loaded " << opts_.load_dir << " at step " << opt_->step() << " (dp " << comm_.size()
            << ")\n";
    if (!ref_) return;
    StepRecord rec;
    rec.step = result_.resumed_from;
    rec.after_load = true;
    rec.loss = std::numeric_limits<double>::quiet_NaN();
    Compare(rec);
    if (log_)
      *log_ << "after load: " << (result_.ok ? "bitwise equal to the reference" : "MISMATCH")
            << "\n";
    result_.steps.push_back(std::move(rec));
  }

  // One step: this rank's gradients, the optimizer step, the comparison, a
  // save when asked.
  void TrainStep(int s) {
    const int dp = comm_.size(), rank = comm_.rank(), m = opts_.run.micro_batches;
    const std::vector<ParamInfo>& params = source_->spec().params;
    std::vector<at::Tensor> model_params(params.size()), grads;
    for (size_t i = 0; i < params.size(); ++i)
      model_params[i] = opt_->ModelParam(static_cast<int>(i)).cpu();  // sources compute on the host
    const double local_loss = RankGrads(model_params, s, grads);
    MisscaleRankGrads(grads, rank, dp, m);
    opt_->ZeroGrad();
    for (size_t i = 0; i < params.size(); ++i) opt_->Grad(static_cast<int>(i)).copy_(grads[i]);
    at::Tensor loss = at::full({1}, local_loss, at::kDouble);
    if (source_->has_loss()) comm_.AllReduce(loss, ReduceOp::kSum);
    opt_->Step();
    if (opts_.after_step) opts_.after_step(*opt_, s);
    StepRecord rec;
    rec.step = s;
    rec.grad_norm = opt_->last_grad_norm();
    rec.lr = opt_->last_lr();
    rec.loss =
        source_->has_loss() ? loss.item<double>() / m : std::numeric_limits<double>::quiet_NaN();
    if (ref_) {
      Compare(rec);
      CompareGradNorm(rec);
    }
    LogStep(rec);
    if (opts_.save_at == s) {
      SaveCheckpoint(*opt_, opts_.save_dir, opts_.sharding_type);
      if (log_)
        *log_ << "saved step " << s << " to " << opts_.save_dir << " ("
              << ShardingTypeName(opts_.sharding_type) << ")\n";
    }
    result_.steps.push_back(std::move(rec));
  }

  // This rank's contribution to step `s`'s gradient, and its loss sum. fp32
  // reduction: its micro-batches' sum over M, reduced by the optimizer's
  // reduce-scatter. Exact reduction: the global gradient on rank 0 and
  // zeros elsewhere, which the reduce-scatter adds exactly (x + 0 = x).
  double RankGrads(const std::vector<at::Tensor>& model_params, int s,
                   std::vector<at::Tensor>& grads) {
    const int dp = comm_.size(), rank = comm_.rank(), m = opts_.run.micro_batches;
    const int begin = rank * m / dp, end = (rank + 1) * m / dp;
    if (opts_.run.grad_reduction == GradReduction::kFp32)
      return source_->RankGrads(model_params, s, begin, end, m, grads);
    ExactGrads exact =
        ExactReduceGrads(*source_, model_params, s, begin, end, m, [&](at::Tensor& t, bool max) {
          comm_.AllReduce(t, max ? ReduceOp::kMax : ReduceOp::kSum);
        });
    result_.grad_below_unit += exact.below_unit;
    result_.grad_nonzero += exact.nonzero;
    grads = std::move(exact.grads);
    if (rank != 0)
      for (at::Tensor& g : grads) g.zero_();
    return exact.loss;
  }

  void LogStep(const StepRecord& rec) const {
    if (!log_) return;
    *log_ << "step " << rec.step << "/" << opts_.run.steps << "  lr " << rec.lr << "  grad_norm "
          << rec.grad_norm;
    if (source_->has_loss()) *log_ << "  loss " << rec.loss;
    if (ref_) {
      int64_t total = 0;
      for (const auto& g : rec.groups) total += g.mismatches;
      *log_ << "  "
            << (total == 0 ? "bitwise equal to the reference" : "differs from the reference")
            << " (" << total << " elements differ)";
    }
    *log_ << "\n" << std::flush;
  }

  // This step's comparison with the reference, all-reduced into `rec`; the
  // first mismatch's rank and tensor go to rank 0.
  void Compare(StepRecord& rec) {
    LocalCompare lc =
        CompareWithReference(*opt_, ref_->snapshots[static_cast<size_t>(rec.step)], groups_, opts_);
    const int64_t n = static_cast<int64_t>(groups_.size());
    std::vector<int64_t> counts_v = lc.mismatches;
    counts_v.insert(counts_v.end(), lc.violations.begin(), lc.violations.end());
    counts_v.insert(counts_v.end(), lc.sign_changes.begin(), lc.sign_changes.end());
    at::Tensor counts = at::tensor(counts_v, at::kLong);
    std::vector<double> max_v = lc.max_abs;
    max_v.insert(max_v.end(), lc.max_rel.begin(), lc.max_rel.end());
    for (int64_t u : lc.max_ulp) max_v.push_back(static_cast<double>(u));
    at::Tensor maxes = at::tensor(max_v, at::kDouble);
    comm_.AllReduce(counts, ReduceOp::kSum);
    comm_.AllReduce(maxes, ReduceOp::kMax);
    int64_t total = 0;
    for (int64_t g = 0; g < n; ++g) {
      GroupStep gs;
      gs.group = groups_[static_cast<size_t>(g)];
      gs.mismatches = counts[g].item<int64_t>();
      gs.tol_violations = counts[n + g].item<int64_t>();
      gs.sign_changes = counts[2 * n + g].item<int64_t>();
      gs.max_abs = maxes[g].item<double>();
      gs.max_rel = maxes[n + g].item<double>();
      gs.max_ulp = static_cast<int64_t>(maxes[2 * n + g].item<double>());
      total += gs.mismatches;
      rec.groups.push_back(gs);
    }
    if (total > 0 && !result_.first_mismatch) RecordFirstMismatch(rec.step, lc);
  }

  // The step's grad norm against the reference's and the independent fp64
  // norm of the global gradients. Oracle gradients make the fp64 sum exact
  // in any order (docs/optimizers.md, "Gradient clipping"), so there all
  // three must be bitwise equal; real models' are recorded and judged by
  // the scenario's grad_norm checks. Every rank holds the same all-reduced
  // norm, so every rank reaches the same verdict without a collective.
  void CompareGradNorm(StepRecord& rec) {
    const size_t i = static_cast<size_t>(rec.step - 1);
    rec.reference_grad_norm = ref_->grad_norm.at(i);
    rec.gradient_norm = ref_->gradient_norm.at(i);
    if (source_->has_loss() || result_.first_mismatch) return;
    if (SameBits(rec.grad_norm, rec.reference_grad_norm) &&
        SameBits(rec.grad_norm, rec.gradient_norm))
      return;
    std::ostringstream d;
    d << std::setprecision(17) << "grad norm " << rec.grad_norm << " vs the reference's "
      << rec.reference_grad_norm << " and the fp64 norm of the oracle's gradients "
      << rec.gradient_norm;
    result_.first_mismatch = FirstMismatch{rec.step, comm_.rank(), "grad_norm", d.str()};
    result_.ok = false;
  }

  static bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

  void RecordFirstMismatch(int64_t step, const LocalCompare& lc) {
    const std::vector<std::string> names = GatherStrings(comm_, lc.first_tensor, 0);
    const std::vector<std::string> details = GatherStrings(comm_, lc.first_detail, 0);
    FirstMismatch fm;
    fm.step = step;
    if (comm_.rank() == 0) {
      for (int r = 0; r < comm_.size(); ++r) {
        const std::string& name = names[static_cast<size_t>(r)];
        if (name.empty()) continue;
        fm.rank = r;
        fm.tensor = name;
        fm.detail = details[static_cast<size_t>(r)];
        break;
      }
    }
    result_.first_mismatch = fm;
    result_.ok = false;
  }

  // The exact reduction's counts of every rank, summed.
  void SumGridCounts() {
    if (opts_.run.grad_reduction != GradReduction::kExact) return;
    at::Tensor counts = at::tensor({result_.grad_below_unit, result_.grad_nonzero}, at::kLong);
    comm_.AllReduce(counts, ReduceOp::kSum);
    result_.grad_below_unit = counts[0].item<int64_t>();
    result_.grad_nonzero = counts[1].item<int64_t>();
  }

  // Memory figures of every rank, gathered to rank 0.
  void GatherMemory() {
    const MemoryFigures mine = opt_->Memory();
    std::vector<int64_t> flat;
    for (const auto& e : mine.entries) {
      flat.push_back(e.elements);
      flat.push_back(e.bytes);
    }
    flat.push_back(mine.owned_elements);
    flat.push_back(mine.total_bytes);
    std::vector<at::Tensor> all = comm_.Gather(
        at::from_blob(flat.data(), {static_cast<int64_t>(flat.size())}, at::kLong).clone(), 0);
    if (comm_.rank() != 0) return;
    for (const at::Tensor& t : all) {
      MemoryFigures m = mine;
      for (size_t e = 0; e < m.entries.size(); ++e) {
        m.entries[e].elements = t[static_cast<int64_t>(2 * e)].item<int64_t>();
        m.entries[e].bytes = t[static_cast<int64_t>(2 * e + 1)].item<int64_t>();
      }
      m.owned_elements = t[static_cast<int64_t>(2 * m.entries.size())].item<int64_t>();
      m.total_bytes = t[static_cast<int64_t>(2 * m.entries.size() + 1)].item<int64_t>();
      result_.memory.push_back(m);
    }
  }

  const TrainOptions& opts_;
  Communicator& comm_;
  std::ostream* log_;  // rank 0 only
  std::unique_ptr<GradSource> own_source_;
  const GradSource* source_ = nullptr;
  std::unique_ptr<DistributedOptimizer> opt_;
  ReferenceTrajectory own_reference_;
  const ReferenceTrajectory* ref_ = nullptr;
  std::vector<std::string> groups_;
  TrainResult result_;
};

}  // namespace

TrainResult RunDistributed(const TrainOptions& opts, Communicator& comm, std::ostream* log) {
  return DistributedRun(opts, comm, log).Run();
}

}  // namespace shardcheck
