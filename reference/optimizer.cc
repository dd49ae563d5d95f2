#include "reference/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "reference/registry.h"
#include "spec/device.h"
#include "spec/error.h"

namespace shardcheck {

double GlobalGradNorm(const std::vector<at::Tensor>& grads) {
  double sumsq = 0.0;
  for (const auto& g : grads) sumsq += g.to(at::kDouble).square().sum().item<double>();
  return std::sqrt(sumsq);
}

ReferenceOptimizer::ReferenceOptimizer(OptimizerSetup setup, std::vector<ParamInfo> params,
                                       const std::vector<at::Tensor>& initial, at::Device device)
    : setup_(std::move(setup)), params_(std::move(params)), device_(device) {
  setup_.Validate();
  if (initial.size() != params_.size())
    throw Error("reference optimizer: " + std::to_string(initial.size()) + " initial tensors for " +
                std::to_string(params_.size()) + " params");
  if (params_.empty()) throw Error("reference optimizer: the model has no params");
  model_dtype_ = initial[0].scalar_type();
  if (model_dtype_ != at::kFloat && model_dtype_ != at::kBFloat16)
    throw Error("reference optimizer: model dtype must be fp32 or bf16, got " +
                DtypeName(model_dtype_));
  children_ = RouteParams(setup_, params_);
  groups_ = BuildGroups(children_, params_);
  child_of_.assign(params_.size(), 0);
  for (size_t c = 0; c < children_.size(); ++c)
    for (int i : children_[c].params) child_of_[static_cast<size_t>(i)] = static_cast<int>(c);
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamInfo& p = params_[i];
    const at::Tensor& t = initial[i];
    if (t.sizes().vec() != p.shape)
      throw Error("reference optimizer: initial tensor of " + p.name + " has the wrong shape");
    if (t.scalar_type() != model_dtype_)
      throw Error("reference optimizer: params mix dtypes (" + p.name + " is " +
                  DtypeName(t.scalar_type()) + ")");
    const OptimizerSpec& owner =
        children_[static_cast<size_t>(ChildOf(static_cast<int>(i)))].config.spec();
    if (owner.needs_2d && p.shape.size() != 2)
      throw Error("reference optimizer: " + owner.name + " got a non-2-D param " + p.name);
    wd_mult_.push_back(p.DefaultWdMult());
    model_.push_back(t.to(device_, /*non_blocking=*/false, /*copy=*/true));
    main_.push_back(model_.back().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true));
    std::vector<at::Tensor> st;
    for (const StateKey& k : SchemaOf(static_cast<int>(i)).keys)
      st.push_back(at::zeros(p.shape, at::TensorOptions().dtype(k.dtype).device(device_)));
    state_.push_back(std::move(st));
  }
}

const at::Tensor& ReferenceOptimizer::State(int i, const std::string& key) const {
  const StateSchema& schema = SchemaOf(i);
  for (size_t k = 0; k < schema.keys.size(); ++k)
    if (schema.keys[k].name == key) return state_[static_cast<size_t>(i)][k];
  throw Error("param " + params_[static_cast<size_t>(i)].name + " has no state key '" + key +
              "' (its optimizer keeps: " + schema.ToString() + ")");
}

void ReferenceOptimizer::Step(const std::vector<at::Tensor>& grads_in) {
  if (grads_in.size() != params_.size())
    throw Error("reference optimizer: " + std::to_string(grads_in.size()) + " grads for " +
                std::to_string(params_.size()) + " params");
  std::vector<at::Tensor> grads;
  for (size_t i = 0; i < grads_in.size(); ++i) {
    if (grads_in[i].scalar_type() != at::kFloat || grads_in[i].sizes().vec() != params_[i].shape)
      throw Error("reference optimizer: grad of " + params_[i].name +
                  " must be fp32 in model shape");
    grads.push_back(grads_in[i].to(device_));
  }
  // Clip with the fp64 global norm.
  last_grad_norm_ = GlobalGradNorm(grads);
  const float coef = ClipCoefficient(setup_.max_grad_norm, last_grad_norm_);
  if (coef != 1.0f)
    for (auto& g : grads) g = g * coef;

  ++step_;
  // One schedule factor for every child and group.
  const double factor = setup_.lr_schedule.Factor(step_, setup_.main.lr());  // same for every child
  last_lr_ = setup_.main.lr() * factor;
  for (size_t i = 0; i < params_.size(); ++i) {
    const ChildOptimizer& child = children_[static_cast<size_t>(child_of_[i])];
    const OptimizerConfig& c = child.config;
    const StepContext ctx{&c, step_, c.lr() * factor, c.weight_decay() * wd_mult_[i]};
    StateRefs state(child.schema, state_[i]);
    FindReferenceUpdate(c.kind())(ctx, main_[i], grads[i], state);
    // The model param is the main param rounded to the model dtype (RNE).
    model_[i] = main_[i].to(model_dtype_);
  }
}

StateDict ReferenceOptimizer::GetStateDict() const {
  StateDict sd;
  sd.optimizer = setup_.name;
  sd.step = step_;
  sd.groups = GroupRecords(children_, params_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& n = params_[i].name;
    sd.tensors[ParamKey(n)] = HostCopy(model_[i]);
    if (model_dtype_ != at::kFloat) sd.tensors[MainParamKey(n)] = HostCopy(main_[i]);
    const StateSchema& schema = SchemaOf(static_cast<int>(i));
    for (size_t k = 0; k < schema.keys.size(); ++k)
      sd.tensors[StateTensorKey(schema.keys[k].name, n)] = HostCopy(state_[i][k]);
  }
  return sd;
}

namespace {

// "exp_avg_sq (3 tensors: state.exp_avg_sq.a, state.exp_avg_sq.b, ...)" per
// state key, or the tensor names themselves for params.
std::string DescribeKeys(const std::vector<std::string>& keys) {
  std::map<std::string, std::vector<std::string>> by_kind;
  for (const auto& k : keys) {
    StateDictKey parsed;
    try {
      parsed = ParseStateDictKey(k);
    } catch (const Error&) {
      by_kind["other"].push_back(k);
      continue;
    }
    switch (parsed.role) {
      case StateDictKey::Role::kParam:
        by_kind["param"].push_back(k);
        break;
      case StateDictKey::Role::kMainParam:
        by_kind["main_param"].push_back(k);
        break;
      case StateDictKey::Role::kState:
        by_kind["state key '" + parsed.state_key + "'"].push_back(k);
        break;
    }
  }
  std::string out;
  for (const auto& [kind, names] : by_kind) {
    if (!out.empty()) out += "; ";
    out += kind + " (" + std::to_string(names.size()) + " tensors: ";
    for (size_t i = 0; i < names.size() && i < 3; ++i) out += (i ? ", " : "") + names[i];
    if (names.size() > 3) out += ", ...";
    out += ")";
  }
  return out;
}

}  // namespace

void ReferenceOptimizer::LoadStateDict(const StateDict& sd) {
  const StateDict mine = GetStateDict();
  // Key sets first: they say most about what went wrong.
  std::vector<std::string> missing, unexpected;
  for (const auto& [k, t] : mine.tensors)
    if (!sd.tensors.count(k)) missing.push_back(k);
  for (const auto& [k, t] : sd.tensors)
    if (!mine.tensors.count(k)) unexpected.push_back(k);
  if (!missing.empty() || !unexpected.empty()) {
    std::string msg = "state dict of optimizer '" + sd.optimizer + "' does not fit optimizer '" +
                      setup_.name + "':";
    if (!missing.empty()) msg += " missing " + DescribeKeys(missing) + ".";
    if (!unexpected.empty()) msg += " unexpected " + DescribeKeys(unexpected) + ".";
    throw Error(msg);
  }
  if (sd.optimizer != setup_.name)
    throw Error("state dict is of optimizer '" + sd.optimizer + "', this optimizer is '" +
                setup_.name + "'");
  if (sd.step < 0) throw Error("state dict has a negative step " + std::to_string(sd.step));
  for (const auto& [k, t] : mine.tensors) {
    const at::Tensor& in = sd.tensors.at(k);
    if (in.sizes() != t.sizes())
      throw Error("state dict tensor " + k + " has shape " + c10::str(in.sizes()) + ", expected " +
                  c10::str(t.sizes()));
    if (in.scalar_type() != t.scalar_type())
      throw Error("state dict tensor " + k + " has dtype " + DtypeName(in.scalar_type()) +
                  ", expected " + DtypeName(t.scalar_type()));
  }
  // Groups are matched by their identifying keys, not by position.
  std::map<std::string, const GroupRecord*> theirs;
  for (const auto& g : sd.groups) theirs[g.Id()] = &g;
  if (theirs.size() != mine.groups.size())
    throw Error("state dict has " + std::to_string(sd.groups.size()) + " param groups, expected " +
                std::to_string(mine.groups.size()));
  for (const auto& g : mine.groups) {
    auto it = theirs.find(g.Id());
    if (it == theirs.end()) throw Error("state dict lacks param group " + g.Id());
    if (it->second->params != g.params)
      throw Error("param group " + g.Id() + " holds other params in the state dict");
  }
  // Everything checked: now change state.
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& n = params_[i].name;
    auto on_device = [&](const at::Tensor& t) { return t.to(device_, false, /*copy=*/true); };
    model_[i] = on_device(sd.tensors.at(ParamKey(n)));
    main_[i] =
        model_dtype_ == at::kFloat ? model_[i].clone() : on_device(sd.tensors.at(MainParamKey(n)));
    const StateSchema& schema = SchemaOf(static_cast<int>(i));
    for (size_t k = 0; k < schema.keys.size(); ++k)
      state_[i][k] = on_device(sd.tensors.at(StateTensorKey(schema.keys[k].name, n)));
  }
  step_ = sd.step;
}

}  // namespace shardcheck
