// Property tests (RapidCheck) of NameIndex (distributed/name_index.h), the
// flat table behind a safetensors header's duplicate check and a load's
// tensor index. Over generated names (few distinct ones, so repeats are
// common; empty and prefix-sharing names; enough adds to grow the table
// from any starting size), against std::unordered_map:
//   - Add refuses exactly the names already added, and gives the others
//     the ids 0, 1, ... in order;
//   - Find returns each added name's id, and -1 for names never added;
//   - the batches (AddAll in pieces of any size, FindAll) give the same
//     ids, refusals and answers as one Add or Find per name;
//   - a move carries every name over and leaves an empty index that finds
//     nothing and takes adds from id 0 again.
// A failure prints the shrunk case.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <string_view>
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

RC_GTEST_PROP(NameIndexProp, BatchesAgreeWithOneNameAtATime, ()) {
  const std::vector<std::string> adds = *rc::gen::container<std::vector<std::string>>(Names());
  const std::vector<std::string> probes = *rc::gen::container<std::vector<std::string>>(Names());
  const size_t expected = *rc::gen::inRange<size_t>(0, adds.size() + 2);
  NameIndex single(expected), batched(expected);
  size_t refused = 0;
  for (const std::string& name : adds) refused += single.Add(name) ? 0 : 1;
  size_t refused_in_batches = 0;
  for (size_t at = 0; at < adds.size();) {
    const size_t n = *rc::gen::inRange<size_t>(1, adds.size() - at + 1);
    refused_in_batches += batched.AddAll(std::vector<std::string_view>(adds.begin() + at, adds.begin() + at + n));
    at += n;
  }
  RC_ASSERT(refused_in_batches == refused);
  RC_ASSERT(batched.size() == single.size());
  std::vector<std::string_view> all(adds.begin(), adds.end());
  all.insert(all.end(), probes.begin(), probes.end());
  const std::vector<int64_t> found = batched.FindAll(all);
  RC_ASSERT(found.size() == all.size());
  for (size_t i = 0; i < all.size(); ++i) RC_ASSERT(found[i] == single.Find(all[i]));
}

RC_GTEST_PROP(NameIndexProp, AMoveLeavesAnEmptyUsableIndex, ()) {
  const std::vector<std::string> adds = *rc::gen::container<std::vector<std::string>>(Names());
  const std::vector<std::string> later = *rc::gen::container<std::vector<std::string>>(Names());
  NameIndex from(*rc::gen::inRange<size_t>(0, adds.size() + 2));
  std::unordered_map<std::string, int64_t> reference;
  for (const std::string& name : adds) {
    if (from.Add(name)) reference.emplace(name, static_cast<int64_t>(reference.size()));
  }
  NameIndex to;
  if (*rc::gen::arbitrary<bool>()) {
    to = std::move(from);
  } else {
    NameIndex constructed(std::move(from));
    to = std::move(constructed);
  }
  RC_ASSERT(to.size() == reference.size());
  for (const auto& [name, id] : reference) RC_ASSERT(to.Find(name) == id);
  RC_ASSERT(from.size() == 0u);  // NOLINT(bugprone-use-after-move): the contract under test
  std::vector<std::string_view> views(adds.begin(), adds.end());
  for (int64_t id : from.FindAll(views)) RC_ASSERT(id == -1);
  std::unordered_map<std::string, int64_t> again;
  for (const std::string& name : later) {
    const bool fresh = !again.count(name);
    RC_ASSERT(from.Add(name) == fresh);
    if (fresh) again.emplace(name, static_cast<int64_t>(again.size()));
  }
  for (const auto& [name, id] : again) RC_ASSERT(from.Find(name) == id);
}

}  // namespace
}  // namespace shardcheck
