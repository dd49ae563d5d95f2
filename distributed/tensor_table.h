// metadata.json's tensor index in memory (docs/checkpoint-format.md): each
// tensor's record with its chunks, in one array in key order, and a flat
// name table (distributed/name_index.h) from key to record. A load looks
// up the tensor of every piece it owns and a save adds a chunk per rank per
// tensor: at tens of thousands of tensors with long shared key prefixes a
// tree (std::map) costs a string comparison and a cache miss per level of
// every lookup, and a load had to build a hash index over it first; here
// the index is the table's own, kept as the records are added
// (docs/performance.md, "How each cost grows").
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "distributed/name_index.h"

namespace shardcheck {

// One contiguous run of a tensor's row-major flattening stored in one file.
struct ChunkRecord {
  int64_t offset = 0;  // first element, in the flattened global tensor
  int64_t numel = 0;
  std::string file;                       // relative to the checkpoint folder
  std::string name;                       // tensor name inside the file
  uint64_t byte_begin = 0, byte_end = 0;  // absolute byte range in the file
  std::string xxh3;                       // 16 hex digits of XXH3-64 over those bytes
};

struct TensorRecord {
  std::string key;
  c10::ScalarType dtype = c10::kFloat;
  std::vector<int64_t> shape;       // global shape
  std::vector<ChunkRecord> chunks;  // sorted by offset, disjoint
  int64_t Numel() const;
};

// Tensor records by key. Records are added in any order; the table
// iterates in key order whenever each key came after the one before, and
// otherwise after SortByKey(). Iterating a table that is out of order is a
// programming error (std::logic_error), so no caller sees an order that
// depends on how the records arrived.
//
// A record stays where it was added (blocks of records, never moved), so
// references and pointers to records stay valid as records are added and
// sorted, and the index, which points at the keys' bytes, is built once
// per record: sorting orders a list of positions, not the records. A
// record's key must not change through a mutable reference.
class TensorTable {
  template <typename Table, typename Rec>
  class Iter;

 public:
  using iterator = Iter<TensorTable, TensorRecord>;
  using const_iterator = Iter<const TensorTable, const TensorRecord>;

  TensorTable() = default;
  TensorTable(const TensorTable& other);
  TensorTable& operator=(const TensorTable& other);
  TensorTable(TensorTable&& other) noexcept;
  TensorTable& operator=(TensorTable&& other) noexcept;

  size_t size() const { return order_.size(); }
  bool empty() const { return order_.empty(); }

  // The record of `key`, or null.
  const TensorRecord* Find(std::string_view key) const;
  TensorRecord* Find(std::string_view key);
  // Find of each of `keys`, in order, the lookups' cache misses overlapped
  // (NameIndex::FindAll): a load resolves all its pieces' keys at once.
  std::vector<const TensorRecord*> FindAll(const std::vector<std::string_view>& keys) const;
  // The record of `key`; throws std::out_of_range naming it when absent.
  const TensorRecord& At(std::string_view key) const;
  TensorRecord& At(std::string_view key);

  // Adds `record` and returns true, or returns false and adds nothing when
  // its key is already in.
  bool Add(TensorRecord record);
  // The record of `key`, added (key set, the rest empty) when absent.
  TensorRecord& FindOrAdd(std::string_view key);
  // Puts the iteration in key order (a no-op when it is).
  void SortByKey();

  // Iteration in key order; begin() throws std::logic_error when out of order.
  const_iterator begin() const;
  const_iterator end() const;
  iterator begin();
  iterator end();

 private:
  static constexpr size_t kBlock = 1024;  // records per block

  const TensorRecord& Record(size_t id) const { return blocks_[id / kBlock][id % kBlock]; }
  TensorRecord& Record(size_t id) { return blocks_[id / kBlock][id % kBlock]; }
  // Adds `record` (its key absent, `hash` its key's NameIndex::Hash).
  TensorRecord& Append(TensorRecord record, uint32_t hash);
  void CheckOrdered() const;

  std::vector<std::unique_ptr<TensorRecord[]>> blocks_;  // record `id` at [id / kBlock][id % kBlock]
  std::vector<uint32_t> order_;  // the ids, in key order once ordered_
  NameIndex by_key_;             // key -> id
  bool ordered_ = true;          // order_ in strictly increasing key order
};

// A forward iterator over the records in key order.
// (`Rec`, not `Record`: inside the table's scope the member function
// Record would hide a template parameter of that name.)
template <typename Table, typename Rec>
class TensorTable::Iter {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = TensorRecord;
  using difference_type = std::ptrdiff_t;
  using pointer = Rec*;
  using reference = Rec&;

  Iter(Table* table, size_t pos) : table_(table), pos_(pos) {}
  Rec& operator*() const { return table_->Record(table_->order_[pos_]); }
  Rec* operator->() const { return &**this; }
  Iter& operator++() {
    ++pos_;
    return *this;
  }
  bool operator==(const Iter& o) const { return pos_ == o.pos_ && table_ == o.table_; }
  bool operator!=(const Iter& o) const { return !(*this == o); }

 private:
  Table* table_;
  size_t pos_;
};

}  // namespace shardcheck
