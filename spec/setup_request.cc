#include "spec/setup_request.h"

#include "spec/error.h"
#include "spec/registry.h"

namespace shardcheck {

namespace {

bool Shared(const std::string& name) { return name == "lr" || name == "weight_decay"; }

std::string Takes(const OptimizerConfig& c) { return c.kind() + " takes: " + c.DeclaredNames(); }

void ApplyHyper(OptimizerSetup& s, const std::string& name, const std::string& text) {
  if (Shared(name)) {
    s.main.SetText(name, text);
    if (s.scalar) s.scalar->SetText(name, text);
    return;
  }
  if (s.main.Declares(name)) return s.main.SetText(name, text);
  if (s.scalar && s.scalar->Declares(name)) return s.scalar->SetText(name, text);
  std::string takes = Takes(s.main);
  if (s.scalar) takes += "; " + Takes(*s.scalar);
  throw Error("optimizer " + s.name + " has no hyperparameter '" + name + "' (" + takes + ")");
}

void ApplyScalarHyper(OptimizerSetup& s, const std::string& name, const std::string& text) {
  if (!s.scalar)
    throw Error("scalar_" + name + ": optimizer " + s.name +
                " has no scalar optimizer (only composites of a whole-param kind have one)");
  if (!s.scalar->Declares(name))
    throw Error("optimizer " + s.name + ": its scalar optimizer has no hyperparameter '" + name +
                "' (" + Takes(*s.scalar) + ")");
  s.scalar->SetText(name, text);
}

}  // namespace

OptimizerSetup SetupRequest::Resolve() const {
  OptimizerSetup s;
  if (scalar_optimizer.empty()) {
    s = OptimizerSetup::Defaults(name);
  } else {
    const OptimizerEntry* e = TryFindOptimizer(name);
    if (!e || e->spec.placement != Placement::kWholeParam) {
      // "muon_adam" with --scalar-optimizer lion: the name already chose one.
      const OptimizerSetup named = OptimizerSetup::Defaults(name);
      if (!named.IsComposite())
        throw Error("scalar optimizer " + scalar_optimizer + ": optimizer " + name +
                    " takes none (only whole-param kinds do)");
      if (named.scalar->kind() !=
          OptimizerSetup::Composite(named.main.kind(), scalar_optimizer).scalar->kind())
        throw Error("scalar optimizer " + scalar_optimizer + " conflicts with optimizer " + name +
                    "; give the whole-param kind alone (" + named.main.kind() + ") with it");
      s = named;
    } else {
      s = OptimizerSetup::Composite(name, scalar_optimizer);
    }
  }
  for (const auto& [k, v] : hyper) ApplyHyper(s, k, v);
  for (const auto& [k, v] : scalar_hyper) ApplyScalarHyper(s, k, v);
  if (max_grad_norm) s.max_grad_norm = *max_grad_norm;
  if (lr_decay_style) s.lr_schedule.style = ParseLrDecayStyle(*lr_decay_style);
  if (lr_warmup_steps) s.lr_schedule.warmup_steps = *lr_warmup_steps;
  if (lr_decay_steps) s.lr_schedule.decay_steps = *lr_decay_steps;
  if (min_lr) s.lr_schedule.min_lr = *min_lr;
  s.Validate();
  return s;
}

std::vector<DeclaredHyperParam> AllDeclaredHyperParams() {
  std::vector<DeclaredHyperParam> out;
  for (const OptimizerEntry* e : Optimizers()) {
    for (const HyperParamSpec& h : e->spec.hyperparams) {
      DeclaredHyperParam* found = nullptr;
      for (auto& d : out)
        if (d.spec->name == h.name) found = &d;
      if (!found) {
        out.push_back({&h, {}, false});
        found = &out.back();
      }
      found->kinds.push_back(e->spec.name);
      found->elementwise = found->elementwise || e->spec.placement == Placement::kElementwise;
    }
  }
  return out;
}

}  // namespace shardcheck
