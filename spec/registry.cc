#include "spec/registry.h"

#include <algorithm>
#include <deque>

#include "spec/config.h"
#include "spec/error.h"

namespace shardcheck {

namespace {

struct Store {
  std::deque<OptimizerEntry> entries;  // stable addresses
  std::vector<const OptimizerEntry*> ordered;
};

Store& RawStore() {
  static Store store;
  return store;
}

// The store with the built-in kinds registered: once, by the first reader,
// whichever thread it is on (a function-local static is initialized once,
// and other threads wait for it).
Store& LoadedStore() {
  static const bool loaded = [] {
    RegisterBuiltinOptimizers();
    return true;
  }();
  (void)loaded;
  return RawStore();
}

void CheckEntry(const OptimizerEntry& e) {
  const OptimizerSpec& spec = e.spec;
  const std::string who = "optimizer registry entry '" + spec.name + "'";
  if (spec.name.empty()) throw Error("optimizer registry: an entry has no name");
  for (const char* required : {"lr", "weight_decay"})
    if (!spec.FindHyperParam(required))
      throw Error(who + " does not declare the hyperparameter " + required);
  for (const auto& h : spec.hyperparams) h.Check(h.default_value, who + " (default)");
  const int keys = static_cast<int>(spec.schema.keys.size());
  if (keys > kMaxStateKeys)
    throw Error(who + " has more than " + std::to_string(kMaxStateKeys) + " state keys");
  switch (spec.placement) {
    case Placement::kElementwise:
      if (!e.elementwise) throw Error(who + " is elementwise but has no fused shard kernel");
      if (e.elementwise.state_count != keys)
        throw Error(who + ": its kernel updates " + std::to_string(e.elementwise.state_count) +
                    " state tensors, its schema has " + std::to_string(keys));
      for (const auto& k : spec.schema.keys)
        if (k.dtype != c10::kFloat)
          throw Error(who + ": the fused kernel needs fp32 state, " + k.name + " is not");
      break;
    case Placement::kWholeParam:
      if (!e.whole_param) throw Error(who + " is whole-param but has no whole-param kernel");
      if (spec.default_scalar.empty())
        throw Error(who + " is whole-param but names no default scalar optimizer");
      break;
  }
}

}  // namespace

const std::vector<const OptimizerEntry*>& Optimizers() { return LoadedStore().ordered; }

const OptimizerEntry* TryFindOptimizer(const std::string& kind) {
  for (const OptimizerEntry* e : Optimizers())
    if (e->spec.name == kind) return e;
  return nullptr;
}

std::string OptimizerKindList() {
  std::string s;
  for (const OptimizerEntry* e : Optimizers()) s += (s.empty() ? "" : ", ") + e->spec.name;
  return s;
}

const OptimizerEntry& FindOptimizer(const std::string& kind) {
  if (const OptimizerEntry* e = TryFindOptimizer(kind)) return *e;
  throw Error("unknown optimizer kind '" + kind + "' (expected " + OptimizerKindList() + ")");
}

void RegisterOptimizer(OptimizerEntry entry) {
  CheckEntry(entry);
  Store& s = RawStore();
  for (const OptimizerEntry& e : s.entries)
    if (e.spec.name == entry.spec.name)
      throw Error("optimizer registry: '" + entry.spec.name + "' is registered twice");
  s.entries.push_back(std::move(entry));
  const OptimizerEntry* added = &s.entries.back();
  if (added->spec.test_only) {
    s.ordered.push_back(added);
    return;
  }
  // Built-in kinds sorted by name, ahead of test-only ones.
  auto at = std::find_if(s.ordered.begin(), s.ordered.end(), [&](const OptimizerEntry* e) {
    return e->spec.test_only || e->spec.name > added->spec.name;
  });
  s.ordered.insert(at, added);
}

}  // namespace shardcheck
