// State schemas: which tensor state an optimizer keeps, with its dtype.
//
// Nothing in shardcheck names a state key on its own: layout, checkpoints,
// comparisons and reports iterate the schema of the optimizer that owns the
// params, as its registry entry declares it (spec/registry.h). Every
// optimizer also keeps one int64 step counter, which is not a per-param
// tensor and so is not in the schema.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

namespace shardcheck {

struct StateKey {
  std::string name;
  c10::ScalarType dtype = c10::kFloat;
  bool operator==(const StateKey& o) const { return name == o.name && dtype == o.dtype; }
};

struct StateSchema {
  std::vector<StateKey> keys;  // in a fixed order; every key is per param, shaped as the param

  bool Has(const std::string& key) const;
  std::vector<std::string> Names() const;
  // "exp_avg:fp32, exp_avg_sq:fp32".
  std::string ToString() const;
  bool operator==(const StateSchema& o) const { return keys == o.keys; }
};

// "fp32", "bf16", "int64" … for messages and metadata.
std::string DtypeName(c10::ScalarType dtype);
// Throws Error on a name DtypeName does not produce.
c10::ScalarType ParseDtype(const std::string& name);

}  // namespace shardcheck
