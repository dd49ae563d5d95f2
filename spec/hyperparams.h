// Hyperparameters as the optimizer registry declares them: a name, a type,
// a default, a valid range or set of choices, whether it may differ per
// param group, and a line of help. CLI flags, scenario keys, config.json and
// checkpoint metadata are all derived from these declarations.
//
// Values are held by name in a HyperValues map; every value has the type its
// declaration gives. Text forms (CLI flags and scenario keys) are parsed by
// ParseHyperValue, which names the hyperparameter and the expected form on
// error.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace shardcheck {

enum class HyperType {
  kReal,      // a finite double
  kInt,       // an int64
  kBool,      // true / false
  kChoice,    // one of a fixed list of words
  kRealList,  // numbers separated by ',' or ';' (e.g. Newton–Schulz coefficient triples)
};

std::string HyperTypeName(HyperType t);

// An interval end that is not there.
inline constexpr double kNoBound = 1e300;

using HyperValue = std::variant<double, int64_t, bool, std::string, std::vector<double>>;

// The declaration of one hyperparameter of one optimizer kind.
struct HyperParamSpec {
  std::string name;  // snake_case: scenario key; CLI flag --name-with-dashes
  HyperType type = HyperType::kReal;
  HyperValue default_value = 0.0;
  // kReal / kInt: the valid interval; `min_open` / `max_open` exclude the bound.
  double min = -kNoBound, max = kNoBound;
  bool min_open = false, max_open = false;
  std::vector<std::string> choices;  // kChoice
  bool per_group = false;            // may differ between param groups
  std::string help;

  // "[0, 1)", "> 0", "spectral | shape | moonlight", "true | false".
  std::string RangeText() const;
  // Throws Error "<who>: invalid <name>: <value> (expected <range>)".
  void Check(const HyperValue& v, const std::string& who) const;
};

using HyperValues = std::map<std::string, HyperValue>;

// The text of `v` as a CLI flag or scenario key would give it (round-trips
// through ParseHyperValue; reals with 17 significant digits).
std::string HyperValueText(const HyperValue& v);
// Parses `text` as `spec` declares it. Throws Error naming spec.name.
HyperValue ParseHyperValue(const HyperParamSpec& spec, const std::string& text);
// JSON of a value: number, bool, string or array of numbers.
nlohmann::ordered_json HyperValueJson(const HyperValue& v);

// Declarations of each type (ranges closed unless set open afterwards).
HyperParamSpec RealParam(const std::string& name, double default_value, double min, double max,
                         const std::string& help);
HyperParamSpec IntParam(const std::string& name, int64_t default_value, int64_t min, int64_t max,
                        const std::string& help);
HyperParamSpec BoolParam(const std::string& name, bool default_value, const std::string& help);
HyperParamSpec ChoiceParam(const std::string& name, const std::string& default_value,
                           std::vector<std::string> choices, const std::string& help);
HyperParamSpec RealListParam(const std::string& name, std::vector<double> default_value,
                             const std::string& help);

// Declarations shared by many optimizers, so that their names and ranges
// stay the same everywhere.
HyperParamSpec LrParam(double default_lr);
HyperParamSpec WeightDecayParam(double default_wd);
// A decay rate in [0, 1), e.g. beta1.
HyperParamSpec BetaParam(const std::string& name, double default_beta, const std::string& help);
HyperParamSpec EpsParam(double default_eps);

}  // namespace shardcheck
