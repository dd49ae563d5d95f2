// In-memory state dict of a reference optimizer.
//
// Tensor keys: "param.<name>" (model params, model dtype), "main_param.<name>"
// (fp32 main params; only when the model dtype is not fp32), and
// "state.<key>.<name>" for every key of the schema of the child optimizer
// that owns <name>. The step counter and param groups travel beside them.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardcheck {

// A param group as a checkpoint records it: identified by (optimizer, wd_mult),
// never by position.
struct GroupRecord {
  std::string optimizer;  // the child's kind, e.g. "lion"
  double wd_mult = 1.0;
  double lr = 0.0;
  double weight_decay = 0.0;
  std::vector<std::string> params;  // names, in registration order

  std::string Id() const;  // "lion/wd_mult=0"
};

struct StateDict {
  std::string optimizer;  // setup name, e.g. "muon_lion"
  int64_t step = 0;
  std::vector<GroupRecord> groups;
  std::map<std::string, at::Tensor> tensors;
};

// What a state-dict tensor key names. State keys hold no '.'; param names may.
struct StateDictKey {
  enum class Role { kParam, kMainParam, kState };
  Role role = Role::kParam;
  std::string state_key;  // kState only
  std::string param;      // the param's name
};
// Parses "param.<n>", "main_param.<n>" or "state.<key>.<n>". Throws Error on others.
StateDictKey ParseStateDictKey(const std::string& key);

inline std::string ParamKey(const std::string& name) { return "param." + name; }
inline std::string MainParamKey(const std::string& name) { return "main_param." + name; }
inline std::string StateTensorKey(const std::string& key, const std::string& name) {
  return "state." + key + "." + name;
}

}  // namespace shardcheck
