// The YAML access of the scenario reader (harness/matrix/scenario*.cc):
// typed reads of nodes whose errors are one line "file:line:column: what
// was expected" (a ScenarioError). Internal to the scenario files.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness/matrix/scenario.h"

namespace shardcheck {
namespace scenario_detail {

// The most steps of a cell (docs/scenarios.md, "Keys"): a cell is a test,
// not a training run.
constexpr int kMaxSteps = 100000;

inline std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// YAML access with file:line:column errors.
class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  [[noreturn]] void Fail(const YAML::Node& at, const std::string& what) const {
    const YAML::Mark m = at.Mark();
    std::ostringstream s;
    // A node the file does not hold (an empty document) has no place: blame its start.
    const int line = m.is_null() ? 0 : m.line, column = m.is_null() ? 0 : m.column;
    s << file_ << ":" << (line + 1) << ":" << (column + 1) << ": " << what;
    throw ScenarioError(s.str());
  }

  // Map keys of `node`, checked against `allowed`, no duplicates.
  void CheckKeys(const YAML::Node& node, const std::vector<std::string>& allowed,
                 const std::string& what) const {
    if (!node.IsMap()) Fail(node, what + ": expected a mapping");
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) Fail(it->first, what + ": keys must be plain words");
      const std::string key = it->first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        Fail(it->first,
             "unknown key '" + key + "' in " + what + " (expected one of: " + Join(allowed) + ")");
      if (!seen.insert(key).second) Fail(it->first, "duplicate key '" + key + "' in " + what);
      if (it->second.IsNull()) Fail(it->first, key + ": no value");
    }
  }

  template <typename T>
  T As(const YAML::Node& node, const std::string& key, const char* type) const {
    if (!node.IsScalar()) Fail(node, key + ": expected " + type);
    try {
      return node.as<T>();
    } catch (const YAML::Exception&) {
      const std::string& v = node.Scalar();
      const size_t digits = v.find_first_not_of("+-") == 1 ? 1 : 0;
      if (!v.empty() && v.size() > digits &&
          v.find_first_not_of("0123456789", digits) == std::string::npos)
        Fail(node, key + ": " + v + " is out of range");
      Fail(node, key + ": expected " + type + ", got '" + v + "'");
    }
  }
  int Int(const YAML::Node& n, const std::string& key) const {
    return As<int>(n, key, "an integer");
  }
  int64_t Int64(const YAML::Node& n, const std::string& key) const {
    return As<int64_t>(n, key, "an integer");
  }
  double Number(const YAML::Node& n, const std::string& key) const {
    if (n.IsScalar()) {
      errno = 0;
      char* end = nullptr;
      const double parsed = std::strtod(n.Scalar().c_str(), &end);
      if (end != n.Scalar().c_str() && *end == '\0' && (errno == ERANGE || !std::isfinite(parsed)))
        Fail(n, key + ": '" + n.Scalar() + "' is not a finite number");
    }
    const double v = As<double>(n, key, "a number");
    if (!std::isfinite(v)) Fail(n, key + ": expected a finite number");
    return v;
  }
  std::string Str(const YAML::Node& n, const std::string& key) const {
    std::string v = As<std::string>(n, key, "a string");
    if (v.find('\n') != std::string::npos)
      Fail(n, key + ": the value runs over a line break (a closing quote missing?)");
    return v;
  }

  // What `read` returns; an Error it throws becomes one at node `at`,
  // `prefix` before its message (a ScenarioError, already placed, passes).
  template <typename F>
  auto At(const YAML::Node& at, F read, const std::string& prefix = "") const
      -> decltype(read()) {
    try {
      return read();
    } catch (const ScenarioError&) {
      throw;
    } catch (const Error& e) {
      Fail(at, prefix + e.what());
    }
  }

  // A scalar or a list of scalars, as a list of nodes.
  std::vector<YAML::Node> Items(const YAML::Node& n, const std::string& key) const {
    std::vector<YAML::Node> out;
    if (n.IsSequence()) {
      for (const auto& x : n) out.push_back(x);
      if (out.empty()) Fail(n, key + ": empty list");
    } else if (n.IsScalar() || n.IsMap()) {
      out.push_back(n);
    } else {
      Fail(n, key + ": expected a value or a list");
    }
    return out;
  }

 private:
  std::string file_;
};

}  // namespace scenario_detail
}  // namespace shardcheck
