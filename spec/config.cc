#include "spec/config.h"

#include "spec/error.h"
#include "spec/registry.h"

namespace shardcheck {

namespace {

const char* TypeWord(const HyperValue& v) {
  switch (v.index()) {
    case 0:
      return "a number";
    case 1:
      return "an integer";
    case 2:
      return "a bool";
    case 3:
      return "a word";
    default:
      return "a list of numbers";
  }
}

}  // namespace

OptimizerConfig OptimizerConfig::Defaults(const std::string& kind) {
  OptimizerConfig c;
  c.spec_ = &FindOptimizer(kind).spec;
  for (const auto& h : c.spec_->hyperparams) c.values_[h.name] = h.default_value;
  return c;
}

const std::string& OptimizerConfig::kind() const { return spec().name; }

const OptimizerSpec& OptimizerConfig::spec() const {
  if (!spec_) throw Error("optimizer config has no kind");
  return *spec_;
}

std::string OptimizerConfig::DeclaredNames() const {
  std::string s;
  for (const auto& n : spec().HyperParamNames()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

bool OptimizerConfig::Declares(const std::string& name) const {
  return spec().FindHyperParam(name) != nullptr;
}

const HyperValue& OptimizerConfig::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end())
    throw Error(kind() + " has no hyperparameter '" + name + "' (" + kind() +
                " takes: " + DeclaredNames() + ")");
  return it->second;
}

template <typename T>
static const T& Typed(const HyperValue& v, const std::string& kind, const std::string& name,
                      const char* want) {
  if (const T* x = std::get_if<T>(&v)) return *x;
  throw Error(kind + ": hyperparameter '" + name + "' is " + TypeWord(v) + ", not " + want);
}

double OptimizerConfig::Real(const std::string& name) const {
  return Typed<double>(Get(name), kind(), name, "a number");
}
int64_t OptimizerConfig::Int(const std::string& name) const {
  return Typed<int64_t>(Get(name), kind(), name, "an integer");
}
bool OptimizerConfig::Flag(const std::string& name) const {
  return Typed<bool>(Get(name), kind(), name, "a bool");
}
const std::string& OptimizerConfig::Choice(const std::string& name) const {
  return Typed<std::string>(Get(name), kind(), name, "a word");
}
const std::vector<double>& OptimizerConfig::Reals(const std::string& name) const {
  return Typed<std::vector<double>>(Get(name), kind(), name, "a list of numbers");
}

void OptimizerConfig::Set(const std::string& name, const HyperValue& value) {
  Get(name);  // throws for an undeclared name
  values_[name] = value;
}

void OptimizerConfig::SetText(const std::string& name, const std::string& text) {
  const HyperParamSpec* h = spec().FindHyperParam(name);
  if (!h) Get(name);  // throws with the declared names
  values_[name] = ParseHyperValue(*h, text);
}

void OptimizerConfig::Validate() const {
  const OptimizerSpec& s = spec();
  for (const auto& h : s.hyperparams) h.Check(Get(h.name), s.name);
  if (values_.size() != s.hyperparams.size())
    throw Error(s.name + ": the config holds values the kind does not declare");
  if (s.validate) s.validate(*this);
}

std::vector<const OptimizerConfig*> OptimizerSetup::Children() const {
  std::vector<const OptimizerConfig*> out = {&main};
  if (scalar) out.push_back(&*scalar);
  return out;
}

bool OptimizerSetup::AnySignBased() const {
  for (const OptimizerConfig* c : Children())
    if (c->spec().sign_based) return true;
  return false;
}

const OptimizerConfig* OptimizerSetup::NeedsMatrix() const {
  for (const OptimizerConfig* c : Children())
    if (c->spec().needs_2d) return c;
  return nullptr;
}

void OptimizerSetup::Validate() const {
  for (const OptimizerConfig* c : Children()) c->Validate();
  const bool whole = main.spec().placement == Placement::kWholeParam;
  if (whole != IsComposite())
    throw Error(name + ": a whole-param optimizer needs a scalar optimizer, and only it takes one");
  if (scalar && scalar->spec().placement != Placement::kElementwise)
    throw Error(name + ": the scalar optimizer " + scalar->kind() + " must be elementwise");
  if (scalar && scalar->kind() == main.kind())
    throw Error(name + ": the two children must be of different kinds");
  if (!(max_grad_norm >= 0.0)) throw Error(name + ": max_grad_norm must be >= 0");
  lr_schedule.Validate(main.lr());
}

OptimizerSetup OptimizerSetup::Composite(const std::string& main_kind,
                                         const std::string& scalar_name) {
  const OptimizerEntry& m = FindOptimizer(main_kind);
  if (m.spec.placement != Placement::kWholeParam)
    throw Error("optimizer '" + main_kind + "' is elementwise: it takes no scalar optimizer");
  const OptimizerEntry* s = TryFindOptimizer(scalar_name);
  if (!s || s->spec.placement != Placement::kElementwise) {
    std::string valid;
    for (const auto& n : ElementwiseNames()) valid += (valid.empty() ? "" : ", ") + n;
    throw Error("unknown scalar optimizer '" + scalar_name +
                "' (expected an elementwise kind: " + valid + ")");
  }
  OptimizerSetup setup;
  setup.name = main_kind + "_" + scalar_name;
  setup.main = OptimizerConfig::Defaults(main_kind);
  setup.scalar =
      OptimizerConfig::Defaults(s->spec.as_scalar.empty() ? scalar_name : s->spec.as_scalar);
  // Both children use the run's lr and weight decay unless set apart.
  setup.scalar->Set("lr", setup.main.lr());
  setup.scalar->Set("weight_decay", setup.main.weight_decay());
  return setup;
}

OptimizerSetup OptimizerSetup::Defaults(const std::string& name) {
  if (const OptimizerEntry* e = TryFindOptimizer(name)) {
    if (e->spec.placement == Placement::kWholeParam) return Composite(name, e->spec.default_scalar);
    OptimizerSetup s;
    s.name = name;
    s.main = OptimizerConfig::Defaults(name);
    return s;
  }
  // "<whole-param kind>_<scalar optimizer>".
  for (const OptimizerEntry* e : Optimizers()) {
    const std::string prefix = e->spec.name + "_";
    if (e->spec.placement == Placement::kWholeParam && name.rfind(prefix, 0) == 0)
      return Composite(e->spec.name, name.substr(prefix.size()));
  }
  std::string valid;
  for (const auto& n : Names()) valid += (valid.empty() ? "" : ", ") + n;
  throw Error("unknown optimizer '" + name + "' (expected " + valid +
              ", or a whole-param kind with --scalar-optimizer)");
}

std::vector<std::string> OptimizerSetup::Names() {
  std::vector<std::string> names = ElementwiseNames();
  for (const OptimizerEntry* e : Optimizers())
    if (e->spec.placement == Placement::kWholeParam)
      for (const auto& s : e->spec.named_scalars) names.push_back(e->spec.name + "_" + s);
  return names;
}

std::vector<std::string> OptimizerSetup::ElementwiseNames() {
  std::vector<std::string> names;
  for (const OptimizerEntry* e : Optimizers())
    if (e->spec.placement == Placement::kElementwise) names.push_back(e->spec.name);
  return names;
}

}  // namespace shardcheck
