// Names to small integer ids in O(1), in one flat table: the checkpoint
// engine's lookups by tensor name (a safetensors header's duplicate check,
// a load's tensor index) at tens of thousands of names sharing long
// prefixes, where a node per name (std::unordered_map) or a tree
// (std::map) costs a cache miss per step once the names outgrow the caches
// (docs/performance.md, "How each cost grows").
//
// The index keeps string_views: the names' bytes must outlive it
// unchanged. Open addressing with linear probing; each slot holds the
// name, 32 bits of its hash and its id, so a probe compares bytes only when
// the hashes agree. Names up to 4 GiB. Grows by doubling past a load of 1/2.
// An index made empty (default, or `expected` 0) or moved from holds no
// table until its first add, so making and moving one never allocates.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace shardcheck {

class NameIndex {
 public:
  NameIndex() noexcept = default;
  // `expected`: how many names will be added (sizes the table once).
  explicit NameIndex(size_t expected);
  NameIndex(const NameIndex&) = default;
  NameIndex& operator=(const NameIndex&) = default;
  // The moved-from index is empty.
  NameIndex(NameIndex&& other) noexcept;
  NameIndex& operator=(NameIndex&& other) noexcept;

  // Adds `name` with the next id (0, 1, ... in the order of the adds) and
  // returns true; returns false and adds nothing when `name` is already in.
  bool Add(std::string_view name);

  // The id of `name`, or -1 when it was never added.
  int64_t Find(std::string_view name) const;

  // Add of each of `names` in order (the same ids); returns how many were
  // already in. Find of each of `names` in order (the same ids). Both
  // hash every name first and fetch each name's slot ahead of its probe,
  // so the cache misses of a batch overlap instead of adding up: at tens
  // of thousands of names a table outgrows the caches and a miss costs
  // more than the probe itself.
  size_t AddAll(const std::vector<std::string_view>& names);
  std::vector<int64_t> FindAll(const std::vector<std::string_view>& names) const;

  // The same with the name's hash given (Hash): a caller that looks a name
  // up and, when absent, adds its own copy of the bytes hashes it once.
  static uint32_t Hash(std::string_view name);
  int64_t Find(std::string_view name, uint32_t hash) const;
  bool Add(std::string_view name, uint32_t hash);

  size_t size() const { return size_; }

 private:
  // The name beside its hash and id: a probe that finds its slot reads
  // the name's bytes next, with no second table between.
  struct Slot {
    const char* data = nullptr;
    uint32_t size = 0;
    uint32_t hash = 0;
    uint32_t id_plus_one = 0;  // 0: empty
  };
  // The slot holding `name`, or the empty slot where it would go.
  size_t Probe(std::string_view name, uint32_t hash) const;
  // Asks for the cache lines probing `hash` reads first: its slot and,
  // once that slot is loaded (`with_name`), the bytes of the name in it.
  void Prefetch(uint32_t hash, bool with_name) const;
  void Rehash(size_t slot_count);  // a power of two, over twice size_

  std::vector<Slot> slots_;  // a power of two, or none while empty
  size_t size_ = 0;
};

}  // namespace shardcheck
