#include "spec/lr_schedule.h"

#include <cmath>
#include <sstream>

#include "spec/error.h"
#include "spec/json_numbers.h"

namespace shardcheck {

namespace {
constexpr double kPi = 3.14159265358979323846;
}  // namespace

std::string LrDecayStyleName(LrDecayStyle s) {
  switch (s) {
    case LrDecayStyle::kConstant:
      return "constant";
    case LrDecayStyle::kLinear:
      return "linear";
    case LrDecayStyle::kCosine:
      return "cosine";
  }
  return "?";
}

LrDecayStyle ParseLrDecayStyle(const std::string& name) {
  for (auto s : {LrDecayStyle::kConstant, LrDecayStyle::kLinear, LrDecayStyle::kCosine})
    if (LrDecayStyleName(s) == name) return s;
  throw Error("unknown lr decay style '" + name + "' (expected constant, linear or cosine)");
}

double LrSchedule::LrAt(int64_t t, double run_lr) const {
  const double max_lr = Peak(run_lr);
  const double td = static_cast<double>(t);
  if (warmup_steps > 0 && t <= warmup_steps) return max_lr * td / static_cast<double>(warmup_steps);
  if (style == LrDecayStyle::kConstant) return max_lr;
  if (t <= warmup_steps + decay_steps) {
    const double q = static_cast<double>(t - warmup_steps) / static_cast<double>(decay_steps);
    if (style == LrDecayStyle::kCosine)
      return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + std::cos(kPi * q));
    return max_lr - (max_lr - min_lr) * q;
  }
  return min_lr;
}

double LrSchedule::Factor(int64_t t, double run_lr) const {
  const double max_lr = Peak(run_lr);
  if (IsConstant() || max_lr == 0.0) return 1.0;
  return LrAt(t, run_lr) / max_lr;
}

bool LrSchedule::IsConstant() const {
  return style == LrDecayStyle::kConstant && warmup_steps == 0;
}

void LrSchedule::Validate(double run_lr) const {
  const double max_lr = Peak(run_lr);
  if (!(peak_lr >= 0.0) || !std::isfinite(peak_lr))
    throw Error("lr schedule: the peak lr must be a finite number >= 0");
  if (warmup_steps < 0) throw Error("lr schedule: warmup steps must be >= 0");
  if (decay_steps < 0) throw Error("lr schedule: decay steps must be >= 0");
  if (!(min_lr >= 0.0) || !std::isfinite(min_lr))
    throw Error("lr schedule: min_lr must be a finite number >= 0");
  if (style == LrDecayStyle::kConstant && decay_steps > 0)
    throw Error("lr schedule: decay steps need a decay style (linear or cosine), not constant");
  if (style == LrDecayStyle::kConstant && min_lr != 0.0)
    throw Error("lr schedule: min_lr needs a decay style (linear or cosine), not constant");
  if (min_lr > max_lr) {
    std::ostringstream s;
    s << "lr schedule: min_lr " << min_lr << " exceeds the lr " << max_lr;
    throw Error(s.str());
  }
}

std::string LrSchedule::Describe() const {
  std::ostringstream s;
  s << LrDecayStyleName(style);
  if (warmup_steps > 0) s << ", warmup " << warmup_steps;
  if (style != LrDecayStyle::kConstant) s << ", decay " << decay_steps << ", min_lr " << min_lr;
  if (peak_lr > 0.0) s << ", peak " << peak_lr;
  return s.str();
}

bool LrSchedule::SameShape(const LrSchedule& o) const {
  return style == o.style && warmup_steps == o.warmup_steps && decay_steps == o.decay_steps &&
         min_lr == o.min_lr;
}

bool LrSchedule::operator==(const LrSchedule& o) const {
  return SameShape(o) && peak_lr == o.peak_lr;
}

nlohmann::ordered_json LrScheduleJson(const LrSchedule& s) {
  nlohmann::ordered_json j = {{"style", LrDecayStyleName(s.style)},
                              {"warmup_steps", s.warmup_steps},
                              {"decay_steps", s.decay_steps},
                              {"min_lr", s.min_lr}};
  if (s.peak_lr > 0.0) j["peak_lr"] = s.peak_lr;
  return j;
}

LrSchedule LrScheduleFromJson(const nlohmann::json& j) {
  LrSchedule s;
  std::string key;
  try {
    key = "style";
    s.style = ParseLrDecayStyle(j.at(key).get<std::string>());
    key = "warmup_steps";
    s.warmup_steps = JsonInteger<int64_t>(j.at(key));
    key = "decay_steps";
    s.decay_steps = JsonInteger<int64_t>(j.at(key));
    key = "min_lr";
    s.min_lr = j.at(key).get<double>();
    key = "peak_lr";
    if (j.contains(key)) s.peak_lr = j.at(key).get<double>();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("lr schedule: missing or malformed key '" + key + "': " + e.what());
  }
  return s;
}

}  // namespace shardcheck
