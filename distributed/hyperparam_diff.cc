#include "distributed/hyperparam_diff.h"

#include <algorithm>
#include <set>

namespace shardcheck {

namespace {

// Child members that are not hyperparameters, and the lr (the schedule's).
bool Compared(const std::string& key) {
  static const std::set<std::string> skipped = {"kind", "schema", "role", "lr"};
  return !skipped.count(key);
}

std::string Text(const nlohmann::json* v) { return v ? v->dump() : "(absent)"; }

void DiffChild(const nlohmann::json& saved, const nlohmann::json& run,
               std::vector<std::string>& out) {
  const std::string kind = run.value("kind", "?");
  std::vector<std::string> keys;
  for (auto it = run.begin(); it != run.end(); ++it) keys.push_back(it.key());
  for (auto it = saved.begin(); it != saved.end(); ++it)
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) keys.push_back(it.key());
  for (const std::string& k : keys) {
    if (!Compared(k)) continue;
    const nlohmann::json* a = saved.contains(k) ? &saved.at(k) : nullptr;
    const nlohmann::json* b = run.contains(k) ? &run.at(k) : nullptr;
    if (a && b && *a == *b) continue;
    out.push_back(kind + "." + k + ": checkpoint " + Text(a) + ", this run " + Text(b));
  }
}

}  // namespace

std::vector<std::string> HyperparamDifferences(const nlohmann::json& checkpoint,
                                               const nlohmann::json& run) {
  std::vector<std::string> out;
  if (checkpoint.contains("max_grad_norm") && run.contains("max_grad_norm") &&
      checkpoint.at("max_grad_norm") != run.at("max_grad_norm"))
    out.push_back("max_grad_norm: checkpoint " + checkpoint.at("max_grad_norm").dump() +
                  ", this run " + run.at("max_grad_norm").dump());
  if (!checkpoint.contains("children") || !run.contains("children")) return out;
  const auto& saved = checkpoint.at("children");
  const auto& mine = run.at("children");
  for (size_t i = 0; i < std::min(saved.size(), mine.size()); ++i)
    if (saved[i].value("kind", "") == mine[i].value("kind", "")) DiffChild(saved[i], mine[i], out);
  return out;
}

}  // namespace shardcheck
