// Optimizer configurations: one registered kind with its hyperparameter
// values (OptimizerConfig), and what a run optimizes with (OptimizerSetup):
// one elementwise kind, or a whole-param kind (Muon) chained with an
// elementwise scalar optimizer for the params it does not take.
//
// One OptimizerSetup feeds the reference and the distributed side alike, so
// the two cannot drift. Hyperparameters are looked up by the names the
// registry declares; asking for an undeclared one is an error that lists
// the declared ones.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "spec/hyperparams.h"
#include "spec/lr_schedule.h"
#include "spec/optimizer_spec.h"

namespace shardcheck {

// One child optimizer's kind and hyperparameter values. Copyable; the spec
// it points to lives in the registry for the whole process.
class OptimizerConfig {
 public:
  OptimizerConfig() = default;  // no kind yet: every accessor throws
  // The defaults of a registered kind. Throws Error listing the kinds.
  static OptimizerConfig Defaults(const std::string& kind);

  bool has_kind() const { return spec_ != nullptr; }
  const std::string& kind() const;
  const OptimizerSpec& spec() const;
  const StateSchema& schema() const { return spec().schema; }

  // Typed values of declared hyperparameters; throw Error when `name` is not
  // declared (naming the declared ones) or has another type.
  double Real(const std::string& name) const;
  int64_t Int(const std::string& name) const;
  bool Flag(const std::string& name) const;
  const std::string& Choice(const std::string& name) const;
  const std::vector<double>& Reals(const std::string& name) const;
  double lr() const { return Real("lr"); }
  double weight_decay() const { return Real("weight_decay"); }

  bool Declares(const std::string& name) const;
  // Sets a declared hyperparameter (type and range are checked by Validate).
  // Throws Error "<kind> has no hyperparameter '<name>' (<kind> takes: ...)".
  void Set(const std::string& name, const HyperValue& value);
  // Parses `text` as the declaration says, then sets it.
  void SetText(const std::string& name, const std::string& text);
  const HyperValues& values() const { return values_; }

  // Throws Error naming the first invalid hyperparameter.
  void Validate() const;
  // "lr, weight_decay, beta1, ..." of this kind.
  std::string DeclaredNames() const;

 private:
  const HyperValue& Get(const std::string& name) const;

  const OptimizerSpec* spec_ = nullptr;
  HyperValues values_;
};

// What a run optimizes with.
struct OptimizerSetup {
  std::string name;                       // "adamw", "muon_lion", "muon_sgd"
  OptimizerConfig main;                   // the only child, or the whole-param child
  std::optional<OptimizerConfig> scalar;  // the elementwise child of a composite
  double max_grad_norm = 0.0;             // 0: no clipping
  LrSchedule lr_schedule;                 // shared by every child and group

  bool IsComposite() const { return scalar.has_value(); }
  // The children in order: main, then the scalar optimizer of a composite.
  std::vector<const OptimizerConfig*> Children() const;
  // True if some child's kind has the sign_based trait.
  bool AnySignBased() const;
  // The kind that needs 2-D params, if a child has the needs_2d trait.
  const OptimizerConfig* NeedsMatrix() const;
  void Validate() const;

  // The default setup of `name`: an elementwise kind ("lion"), a
  // whole-param kind with its default scalar optimizer ("muon", which is
  // "muon_adam"), or "<whole-param kind>_<scalar optimizer>" ("muon_lion").
  // Throws Error listing the named setups.
  static OptimizerSetup Defaults(const std::string& name);
  // A whole-param kind chained with a scalar optimizer named as
  // --scalar-optimizer takes it (an elementwise kind; "adam" means adamw, the
  // registry's as_scalar trait). Both children start with the main child's
  // lr and weight decay.
  static OptimizerSetup Composite(const std::string& main_kind, const std::string& scalar_name);
  // The named setups, in registry order: every elementwise kind, then each
  // whole-param kind's named composites (muon_adam, muon_lion).
  static std::vector<std::string> Names();
  // The elementwise kinds alone (what `optimizer: all_elementwise` expands to).
  static std::vector<std::string> ElementwiseNames();
};

}  // namespace shardcheck
