// Property tests (RapidCheck) of NameIndex (distributed/name_index.h), the
// flat table behind a safetensors header's duplicate check and a load's
// tensor index. Over generated names (few distinct ones, so repeats are
// common; empty and prefix-sharing names; enough adds to grow the table
// from any starting size), against std::unordered_map:
//   - Add refuses exactly the names already added, and gives the others
//     the ids 0, 1, ... in order;
//   - Find returns each added name's id, and -1 for names never added.
// A failure prints the shrunk case.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "distributed/name_index.h"

namespace shardcheck {
namespace {

// Names like a checkpoint's: a long shared prefix and a short varying tail.
rc::Gen<std::string> Names() {
  return rc::gen::map(rc::gen::pair(rc::gen::element<std::string>("", "model.layers.", "optimizer.state.exp_avg.model.layers."),
                                    rc::gen::inRange(0, 300)),
                      [](const std::pair<std::string, int>& p) {
                        return p.second == 0 ? p.first : p.first + std::to_string(p.second);
                      });
}

RC_GTEST_PROP(NameIndexProp, AgreesWithAHashMap, ()) {
  const std::vector<std::string> adds = *rc::gen::container<std::vector<std::string>>(Names());
  const std::vector<std::string> probes = *rc::gen::container<std::vector<std::string>>(Names());
  const size_t expected = *rc::gen::inRange<size_t>(0, adds.size() + 2);
  NameIndex index(expected);
  std::unordered_map<std::string, int64_t> reference;
  for (const std::string& name : adds) {
    const bool fresh = !reference.count(name);
    RC_ASSERT(index.Add(name) == fresh);
    if (fresh) reference.emplace(name, static_cast<int64_t>(reference.size()));
  }
  RC_ASSERT(index.size() == reference.size());
  for (const std::string& name : adds) RC_ASSERT(index.Find(name) == reference.at(name));
  for (const std::string& name : probes) {
    const auto it = reference.find(name);
    RC_ASSERT(index.Find(name) == (it == reference.end() ? -1 : it->second));
  }
}

}  // namespace
}  // namespace shardcheck
