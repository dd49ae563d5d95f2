// Property tests (RapidCheck) of TensorTable (distributed/tensor_table.h),
// metadata.json's tensor index in memory, against std::map. Over generated
// keys (few distinct ones, so repeats are common; short keys kept inside
// the string object; long prefix-sharing ones; enough to fill several
// blocks of records), added in any order through Add and FindOrAdd:
//   - Add refuses exactly the keys already in; FindOrAdd returns the
//     record already there (its chunks kept) or a new one with its key;
//   - after SortByKey the records iterate in the map's order, and Find,
//     FindAll and At find every key's record and no other;
//   - a record stays where it was added, through later adds and the sort;
//   - a copy and a move find the same records (in their own storage);
//   - a table whose keys came out of order refuses iteration until sorted.
// A failure prints the shrunk case.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "distributed/tensor_table.h"

namespace shardcheck {
namespace {

rc::Gen<std::string> Keys() {
  return rc::gen::map(
      rc::gen::pair(rc::gen::element<std::string>("", "w.", "optimizer.state.exp_avg.decoder.layers."),
                    rc::gen::inRange(0, 1500)),
      [](const std::pair<std::string, int>& p) { return p.first + std::to_string(p.second); });
}

// Each key's record is tagged with a chunk whose offset is the order of
// its first add, so a lookup that lands on the wrong record shows.
using Reference = std::map<std::string, int64_t>;

ChunkRecord Tag(int64_t tag) {
  ChunkRecord c;
  c.offset = tag;
  c.numel = 1;
  return c;
}

// Adds `keys` to `table` and `reference`; `where` gets each record's
// address as it was added.
void AddAll(TensorTable& table, Reference& reference, const std::vector<std::string>& keys,
            const std::vector<bool>& through_find_or_add,
            std::map<std::string, const TensorRecord*>& where) {
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& key = keys[i];
    const bool fresh = !reference.count(key);
    const int64_t tag = static_cast<int64_t>(reference.size());
    if (through_find_or_add[i]) {
      TensorRecord& t = table.FindOrAdd(key);
      RC_ASSERT(t.key == key);
      RC_ASSERT(t.chunks.empty() == fresh);
      if (fresh) t.chunks.push_back(Tag(tag));
    } else {
      TensorRecord r;
      r.key = key;
      r.chunks.push_back(Tag(tag));
      RC_ASSERT(table.Add(std::move(r)) == fresh);
    }
    if (fresh) reference.emplace(key, tag);
    if (fresh) where[key] = table.Find(key);
  }
}

// `table` holds exactly `reference`, in its order, each key's lookups
// landing on its own record.
void CheckSame(const TensorTable& table, const Reference& reference,
               const std::vector<std::string>& probes) {
  RC_ASSERT(table.size() == reference.size());
  auto want = reference.begin();
  for (const TensorRecord& t : table) {
    RC_ASSERT(want != reference.end());
    RC_ASSERT(t.key == want->first);
    RC_ASSERT(t.chunks.size() == 1u);
    RC_ASSERT(t.chunks[0].offset == want->second);
    RC_ASSERT(table.Find(t.key) == &t);
    RC_ASSERT(&table.At(t.key) == &t);
    ++want;
  }
  std::vector<std::string_view> views(probes.begin(), probes.end());
  const std::vector<const TensorRecord*> found = table.FindAll(views);
  for (size_t i = 0; i < probes.size(); ++i) {
    const bool in = reference.count(probes[i]) > 0;
    RC_ASSERT(found[i] == table.Find(probes[i]));
    RC_ASSERT((found[i] != nullptr) == in);
    if (in) RC_ASSERT(found[i]->key == probes[i]);
    if (!in) RC_ASSERT_THROWS_AS(table.At(probes[i]), std::out_of_range);
  }
}

RC_GTEST_PROP(TensorTableProp, AgreesWithAMapInKeyOrder, ()) {
  const size_t count = *rc::gen::inRange<size_t>(0, 3000);  // up to three blocks of records
  const std::vector<std::string> keys = *rc::gen::container<std::vector<std::string>>(count, Keys());
  const std::vector<bool> how =
      *rc::gen::container<std::vector<bool>>(keys.size(), rc::gen::arbitrary<bool>());
  const std::vector<std::string> probes = *rc::gen::container<std::vector<std::string>>(Keys());
  TensorTable table;
  Reference reference;
  std::map<std::string, const TensorRecord*> where;
  AddAll(table, reference, keys, how, where);
  std::vector<std::string> added;  // distinct, in the order first added
  for (const std::string& k : keys)
    if (std::find(added.begin(), added.end(), k) == added.end()) added.push_back(k);
  if (std::is_sorted(added.begin(), added.end())) {
    CheckSame(table, reference, probes);  // in order as added: no sort needed
  } else {
    RC_ASSERT_THROWS_AS(table.begin(), std::logic_error);
    // Lookups need no order.
    for (const auto& [key, tag] : reference) RC_ASSERT(table.Find(key)->chunks.at(0).offset == tag);
  }
  table.SortByKey();
  CheckSame(table, reference, probes);
  for (const auto& [key, at] : where) RC_ASSERT(table.Find(key) == at);

  const TensorTable copy = table;
  CheckSame(copy, reference, probes);
  if (!reference.empty()) RC_ASSERT(copy.Find(reference.begin()->first) != table.Find(reference.begin()->first));
  TensorTable moved = std::move(table);
  CheckSame(moved, reference, probes);
  TensorTable assigned;
  assigned = moved;
  CheckSame(assigned, reference, probes);
}

}  // namespace
}  // namespace shardcheck
