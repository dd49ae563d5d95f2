#include "spec/hyperparams.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "spec/error.h"

namespace shardcheck {

namespace {

std::string Real(double v) {
  if (v == static_cast<double>(static_cast<long long>(v)) && std::fabs(v) < 1e15)
    return std::to_string(static_cast<long long>(v));
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  // The shortest text that reads back to the same double, for messages and help.
  for (int digits = 1; digits < 17; ++digits) {
    char shorter[40];
    std::snprintf(shorter, sizeof(shorter), "%.*g", digits, v);
    if (std::strtod(shorter, nullptr) == v) return shorter;
  }
  return buf;
}

double ParseReal(const std::string& text, const std::string& name) {
  size_t used = 0;
  double v = 0.0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !std::isfinite(v))
    throw Error(name + ": '" + text + "' is not a finite number");
  return v;
}

}  // namespace

std::string HyperTypeName(HyperType t) {
  switch (t) {
    case HyperType::kReal:
      return "number";
    case HyperType::kInt:
      return "integer";
    case HyperType::kBool:
      return "bool";
    case HyperType::kChoice:
      return "choice";
    case HyperType::kRealList:
      return "numbers";
  }
  return "?";
}

std::string HyperParamSpec::RangeText() const {
  switch (type) {
    case HyperType::kBool:
      return "true | false";
    case HyperType::kChoice: {
      std::string s;
      for (const auto& c : choices) s += (s.empty() ? "" : " | ") + c;
      return s;
    }
    case HyperType::kRealList:
      return "numbers separated by ',' or ';'";
    case HyperType::kReal:
    case HyperType::kInt:
      break;
  }
  const bool has_min = min > -kNoBound, has_max = max < kNoBound;
  if (has_min && has_max)
    return std::string(min_open ? "(" : "[") + Real(min) + ", " + Real(max) +
           (max_open ? ")" : "]");
  if (has_min) return std::string(min_open ? "> " : ">= ") + Real(min);
  if (has_max) return std::string(max_open ? "< " : "<= ") + Real(max);
  return "any " + HyperTypeName(type);
}

void HyperParamSpec::Check(const HyperValue& v, const std::string& who) const {
  auto bad = [&](const std::string& why) {
    throw Error(who + ": invalid " + name + ": " + HyperValueText(v) + " (" + why + ")");
  };
  switch (type) {
    case HyperType::kReal:
    case HyperType::kInt: {
      double x = 0.0;
      if (type == HyperType::kReal) {
        if (!std::holds_alternative<double>(v)) bad("expected a number");
        x = std::get<double>(v);
      } else {
        if (!std::holds_alternative<int64_t>(v)) bad("expected an integer");
        x = static_cast<double>(std::get<int64_t>(v));
      }
      if (!std::isfinite(x)) bad("expected a finite number");
      const bool low = min_open ? !(x > min) : !(x >= min);
      const bool high = max_open ? !(x < max) : !(x <= max);
      if (low || high) bad("expected " + RangeText());
      return;
    }
    case HyperType::kBool:
      if (!std::holds_alternative<bool>(v)) bad("expected true or false");
      return;
    case HyperType::kChoice: {
      if (!std::holds_alternative<std::string>(v)) bad("expected one of " + RangeText());
      for (const auto& c : choices)
        if (c == std::get<std::string>(v)) return;
      bad("expected " + RangeText());
      return;
    }
    case HyperType::kRealList:
      if (!std::holds_alternative<std::vector<double>>(v)) bad("expected a list of numbers");
      for (double x : std::get<std::vector<double>>(v))
        if (!std::isfinite(x)) bad("expected finite numbers");
      return;
  }
}

std::string HyperValueText(const HyperValue& v) {
  struct Visitor {
    std::string operator()(double x) const { return Real(x); }
    std::string operator()(int64_t x) const { return std::to_string(x); }
    std::string operator()(bool x) const { return x ? "true" : "false"; }
    std::string operator()(const std::string& x) const { return x; }
    std::string operator()(const std::vector<double>& xs) const {
      std::string s;
      for (size_t i = 0; i < xs.size(); ++i)
        s += (i == 0 ? "" : (i % 3 == 0 ? ";" : ",")) + Real(xs[i]);
      return s;
    }
  };
  return std::visit(Visitor{}, v);
}

HyperValue ParseHyperValue(const HyperParamSpec& spec, const std::string& text) {
  const std::string& name = spec.name;
  switch (spec.type) {
    case HyperType::kReal:
      return ParseReal(text, name);
    case HyperType::kInt: {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (text.empty() || used != text.size())
        throw Error(name + ": '" + text + "' is not an integer");
      return static_cast<int64_t>(v);
    }
    case HyperType::kBool:
      if (text == "true" || text == "1") return true;
      if (text == "false" || text == "0") return false;
      throw Error(name + ": '" + text + "' is not true or false");
    case HyperType::kChoice:
      for (const auto& c : spec.choices)
        if (c == text) return text;
      throw Error(name + ": '" + text + "' (expected " + spec.RangeText() + ")");
    case HyperType::kRealList: {
      std::vector<double> out;
      std::string item;
      std::stringstream s(text);
      while (std::getline(s, item, ',')) {
        std::stringstream t(item);
        std::string part;
        while (std::getline(t, part, ';')) {
          while (!part.empty() && part.front() == ' ') part.erase(part.begin());
          while (!part.empty() && part.back() == ' ') part.pop_back();
          if (!part.empty()) out.push_back(ParseReal(part, name));
        }
      }
      if (out.empty()) throw Error(name + ": '" + text + "' holds no numbers");
      return out;
    }
  }
  throw Error(name + ": unknown hyperparameter type");
}

nlohmann::ordered_json HyperValueJson(const HyperValue& v) {
  struct Visitor {
    nlohmann::ordered_json operator()(double x) const { return x; }
    nlohmann::ordered_json operator()(int64_t x) const { return x; }
    nlohmann::ordered_json operator()(bool x) const { return x; }
    nlohmann::ordered_json operator()(const std::string& x) const { return x; }
    nlohmann::ordered_json operator()(const std::vector<double>& xs) const { return xs; }
  };
  return std::visit(Visitor{}, v);
}

HyperParamSpec RealParam(const std::string& name, double default_value, double min, double max,
                         const std::string& help) {
  HyperParamSpec h;
  h.name = name;
  h.type = HyperType::kReal;
  h.default_value = default_value;
  h.min = min;
  h.max = max;
  h.help = help;
  return h;
}

HyperParamSpec IntParam(const std::string& name, int64_t default_value, int64_t min, int64_t max,
                        const std::string& help) {
  HyperParamSpec h = RealParam(name, 0.0, static_cast<double>(min), static_cast<double>(max), help);
  h.type = HyperType::kInt;
  h.default_value = default_value;
  return h;
}

HyperParamSpec BoolParam(const std::string& name, bool default_value, const std::string& help) {
  HyperParamSpec h;
  h.name = name;
  h.type = HyperType::kBool;
  h.default_value = default_value;
  h.help = help;
  return h;
}

HyperParamSpec ChoiceParam(const std::string& name, const std::string& default_value,
                           std::vector<std::string> choices, const std::string& help) {
  HyperParamSpec h;
  h.name = name;
  h.type = HyperType::kChoice;
  h.default_value = default_value;
  h.choices = std::move(choices);
  h.help = help;
  return h;
}

HyperParamSpec RealListParam(const std::string& name, std::vector<double> default_value,
                             const std::string& help) {
  HyperParamSpec h;
  h.name = name;
  h.type = HyperType::kRealList;
  h.default_value = std::move(default_value);
  h.help = help;
  return h;
}

HyperParamSpec LrParam(double default_lr) {
  HyperParamSpec h;
  h.name = "lr";
  h.default_value = default_lr;
  h.min = 0.0;
  h.per_group = true;
  h.help = "learning rate (the peak of the lr schedule)";
  return h;
}

HyperParamSpec WeightDecayParam(double default_wd) {
  HyperParamSpec h;
  h.name = "weight_decay";
  h.default_value = default_wd;
  h.min = 0.0;
  h.per_group = true;
  h.help = "weight decay (times the group's wd_mult: 0 for biases and 1-D params)";
  return h;
}

HyperParamSpec BetaParam(const std::string& name, double default_beta, const std::string& help) {
  HyperParamSpec h;
  h.name = name;
  h.default_value = default_beta;
  h.min = 0.0;
  h.max = 1.0;
  h.max_open = true;
  h.help = help;
  return h;
}

HyperParamSpec EpsParam(double default_eps) {
  HyperParamSpec h;
  h.name = "eps";
  h.default_value = default_eps;
  h.min = 0.0;
  h.min_open = true;
  h.help = "term added to the denominator";
  return h;
}

}  // namespace shardcheck
