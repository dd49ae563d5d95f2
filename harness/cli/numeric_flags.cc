#include "harness/cli/numeric_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace shardcheck {

namespace {

std::string Because(const std::string& why) { return why.empty() ? "" : " (" + why + ")"; }

// Whether `text` is all of one integer; `out` gets it (clamped to the
// long long range when it overflows: `overflow` says so).
bool ParseInt(const std::string& text, long long& out, bool& overflow) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(text.c_str(), &end, 10);
  overflow = errno == ERANGE;
  return end == text.c_str() + text.size();
}

bool ParseReal(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && !std::isnan(out);
}

}  // namespace

std::string Readable(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

CLI::Validator IntIn(long long lo, long long hi, const std::string& why) {
  return CLI::Validator(
      [lo, hi, why](std::string& text) -> std::string {
        long long v = 0;
        bool overflow = false;
        if (!ParseInt(text, v, overflow)) return "'" + text + "' is not an integer";
        if (!overflow && v >= lo && v <= hi) return "";
        return "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" +
               Because(why) + ", got " + text;
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator AtLeast(long long min, long long hi, const std::string& why) {
  return CLI::Validator(
      [min, hi, why](std::string& text) -> std::string {
        long long v = 0;
        bool overflow = false;
        if (!ParseInt(text, v, overflow)) return "'" + text + "' is not an integer";
        if (!overflow && v < min) return "must be at least " + std::to_string(min) + ", got " + text;
        if (overflow || v > hi)
          return "must be at most " + std::to_string(hi) + Because(why) + ", got " + text;
        return "";
      },
      "INT>=" + std::to_string(min));
}

CLI::Validator SeedRange() { return IntIn(0, 9223372036854775807LL, "a seed"); }

CLI::Validator RealIn(double lo, double hi, const std::string& why, bool open_lo) {
  const std::string range =
      (open_lo ? "(" : "[") + Readable(lo) + ", " + Readable(hi) + "]";
  return CLI::Validator(
      [lo, hi, why, open_lo, range](std::string& text) -> std::string {
        double v = 0;
        if (!ParseReal(text, v)) return "'" + text + "' is not a number";
        const bool low_ok = open_lo ? v > lo : v >= lo;
        if (low_ok && v <= hi) return "";
        return "must be in " + range + Because(why) + ", got " + text;
      },
      "NUMBER in " + range);
}

}  // namespace shardcheck
