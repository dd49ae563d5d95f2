// Generates the branch cases of testing/branch_cases.h from the registry's
// hyperparameter declarations (the rules are stated there).
#include "testing/branch_cases.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "spec/error.h"
#include "spec/registry.h"

namespace shardcheck {

namespace {

constexpr double kListFactor = 0.99;

bool Valid(const HyperParamSpec& spec, const HyperValue& v) {
  try {
    spec.Check(v, "branch cases");
    return true;
  } catch (const Error&) {
    return false;
  }
}

// One valid number other than the default (rules in the header).
double OtherReal(const HyperParamSpec& spec, const std::string& who) {
  const double d = std::get<double>(spec.default_value);
  const double step = 0.1 * std::max(1.0, std::fabs(d));
  std::vector<double> candidates = {0.5 * d, d + step, d - step};
  if (spec.min > -kNoBound && spec.max < kNoBound) candidates.push_back(0.5 * (spec.min + spec.max));
  for (double x : candidates)
    if (x != d && Valid(spec, x)) return x;
  throw Error(who + ": branch cases: no valid value of " + spec.name + " other than its default (" +
              spec.RangeText() + ")");
}

int64_t OtherInt(const HyperParamSpec& spec, const std::string& who) {
  const int64_t d = std::get<int64_t>(spec.default_value);
  for (int64_t x : {d + 1, d - 1})
    if (Valid(spec, x)) return x;
  throw Error(who + ": branch cases: no valid value of " + spec.name + " other than its default (" +
              spec.RangeText() + ")");
}

BranchCase Case(const HyperParamSpec& spec, const std::string& suffix, HyperValue value) {
  return {spec.name + "_" + suffix, spec.name, std::move(value)};
}

}  // namespace

void BranchCase::ApplyTo(OptimizerConfig& config) const {
  if (!IsDefaults()) config.Set(param, value);
}

std::vector<BranchCase> BranchCasesOf(const HyperParamSpec& spec, const std::string& who) {
  std::vector<BranchCase> out;
  switch (spec.type) {
    case HyperType::kBool: {
      const bool flipped = !std::get<bool>(spec.default_value);
      out.push_back(Case(spec, flipped ? "true" : "false", flipped));
      break;
    }
    case HyperType::kChoice:
      for (const std::string& c : spec.choices)
        if (c != std::get<std::string>(spec.default_value)) out.push_back(Case(spec, c, c));
      break;
    case HyperType::kReal: {
      const double x = OtherReal(spec, who);
      out.push_back(Case(spec, HyperValueText(x), x));
      break;
    }
    case HyperType::kInt: {
      const int64_t x = OtherInt(spec, who);
      out.push_back(Case(spec, HyperValueText(x), x));
      break;
    }
    case HyperType::kRealList: {
      std::vector<double> xs = std::get<std::vector<double>>(spec.default_value);
      for (double& x : xs) x *= kListFactor;
      out.push_back(Case(spec, "x" + HyperValueText(kListFactor), xs));
      break;
    }
  }
  if (out.empty())
    throw Error(who + ": branch cases: hyperparameter " + spec.name + " of type " +
                HyperTypeName(spec.type) + " has no generated case");
  for (const BranchCase& c : out) spec.Check(c.value, who + " branch case " + c.name);
  return out;
}

std::vector<BranchCase> BranchCasesForSpec(const OptimizerSpec& spec) {
  std::vector<BranchCase> out = {{"defaults", "", HyperValue()}};
  for (const HyperParamSpec& h : spec.hyperparams)
    for (BranchCase& c : BranchCasesOf(h, spec.name)) out.push_back(std::move(c));
  return out;
}

std::vector<BranchCase> BranchCases(const std::string& kind) {
  const std::vector<BranchCase> cases = BranchCasesForSpec(FindOptimizer(kind).spec);
  for (const BranchCase& c : cases) {
    OptimizerConfig config = OptimizerConfig::Defaults(kind);
    c.ApplyTo(config);
    try {
      config.Validate();
    } catch (const Error& e) {
      throw Error(kind + ": branch case " + c.name + " is invalid: " + e.what());
    }
  }
  return cases;
}

std::string GtestSafeName(const std::string& name) {
  std::string out;
  for (char ch : name) {
    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')
      out += ch;
    else if (ch == '.')
      out += 'p';
    else if (ch == '-')
      out += 'm';
    else if (ch == '+')
      out += 'P';
    else
      out += '_';
  }
  return out;
}

}  // namespace shardcheck
