#include "reference/registry.h"

#include <map>

#include "spec/config.h"
#include "spec/error.h"

namespace shardcheck {

namespace {

struct Store {
  std::map<std::string, ReferenceUpdate> updates;
};

Store& RawStore() {
  static Store store;
  return store;
}

}  // namespace

StateRefs::StateRefs(const StateSchema& schema, std::vector<at::Tensor>& tensors)
    : schema_(schema), tensors_(tensors) {
  if (tensors_.size() != schema_.keys.size())
    throw Error("state of " + std::to_string(tensors_.size()) + " tensors for the schema " +
                schema_.ToString());
}

at::Tensor& StateRefs::operator[](const std::string& key) {
  for (size_t k = 0; k < schema_.keys.size(); ++k)
    if (schema_.keys[k].name == key) return tensors_[k];
  throw Error("no state key '" + key + "' in the schema " + schema_.ToString());
}

ReferenceUpdate FindReferenceUpdate(const std::string& kind) {
  // The built-in updates, registered once by the first lookup on any thread.
  static const bool loaded = [] {
    RegisterBuiltinReferenceUpdates();
    return true;
  }();
  (void)loaded;
  Store& s = RawStore();
  auto it = s.updates.find(kind);
  if (it == s.updates.end()) throw Error("optimizer kind '" + kind + "' has no reference update");
  return it->second;
}

void RegisterReferenceUpdate(const std::string& kind, ReferenceUpdate update) {
  if (!RawStore().updates.emplace(kind, update).second)
    throw Error("reference update of '" + kind + "' registered twice");
}

void ReferenceStep(const OptimizerConfig& config, double wd_mult, int64_t t, double lr_factor,
                   at::Tensor& p, const at::Tensor& g, std::vector<at::Tensor>& state) {
  const StepContext ctx{&config, t, config.lr() * lr_factor, config.weight_decay() * wd_mult};
  StateRefs refs(config.schema(), state);
  FindReferenceUpdate(config.kind())(ctx, p, g, refs);
}

}  // namespace shardcheck
