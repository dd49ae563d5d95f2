#include "distributed/tensor_table.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace shardcheck {

int64_t TensorRecord::Numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

TensorTable::TensorTable(const TensorTable& other) { *this = other; }

TensorTable& TensorTable::operator=(const TensorTable& other) {
  if (this == &other) return *this;
  TensorTable copy;
  for (size_t id = 0; id < other.order_.size(); ++id) {
    const TensorRecord& t = other.Record(id);
    copy.Append(t, NameIndex::Hash(t.key));  // the same ids: order_ carries over
  }
  copy.order_ = other.order_;
  copy.ordered_ = other.ordered_;
  return *this = std::move(copy);
}

// The records stay in their blocks, so the index moves along.
TensorTable::TensorTable(TensorTable&& other) noexcept { *this = std::move(other); }

TensorTable& TensorTable::operator=(TensorTable&& other) noexcept {
  if (this == &other) return *this;
  blocks_ = std::move(other.blocks_);
  order_ = std::move(other.order_);
  by_key_ = std::move(other.by_key_);
  ordered_ = other.ordered_;
  other.blocks_.clear();
  other.order_.clear();
  other.ordered_ = true;
  return *this;
}

const TensorRecord* TensorTable::Find(std::string_view key) const {
  const int64_t id = by_key_.Find(key);
  return id < 0 ? nullptr : &Record(static_cast<size_t>(id));
}

TensorRecord* TensorTable::Find(std::string_view key) {
  const int64_t id = by_key_.Find(key);
  return id < 0 ? nullptr : &Record(static_cast<size_t>(id));
}

std::vector<const TensorRecord*> TensorTable::FindAll(
    const std::vector<std::string_view>& keys) const {
  const std::vector<int64_t> ids = by_key_.FindAll(keys);
  std::vector<const TensorRecord*> found(ids.size(), nullptr);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) continue;
    found[i] = &Record(static_cast<size_t>(ids[i]));
    __builtin_prefetch(found[i]);  // the caller reads each record next
  }
  return found;
}

const TensorRecord& TensorTable::At(std::string_view key) const {
  const TensorRecord* t = Find(key);
  if (!t) throw std::out_of_range("no tensor " + std::string(key));
  return *t;
}

TensorRecord& TensorTable::At(std::string_view key) {
  TensorRecord* t = Find(key);
  if (!t) throw std::out_of_range("no tensor " + std::string(key));
  return *t;
}

bool TensorTable::Add(TensorRecord record) {
  const uint32_t hash = NameIndex::Hash(record.key);
  if (by_key_.Find(record.key, hash) >= 0) return false;
  Append(std::move(record), hash);
  return true;
}

TensorRecord& TensorTable::FindOrAdd(std::string_view key) {
  const uint32_t hash = NameIndex::Hash(key);
  const int64_t id = by_key_.Find(key, hash);
  if (id >= 0) return Record(static_cast<size_t>(id));
  TensorRecord record;
  record.key = std::string(key);
  return Append(std::move(record), hash);
}

TensorRecord& TensorTable::Append(TensorRecord record, uint32_t hash) {
  if (order_.size() >= UINT32_MAX) throw std::length_error("over 2^32 tensors");
  const size_t id = order_.size();
  if (ordered_ && id > 0 && !(Record(order_.back()).key < record.key)) ordered_ = false;
  if (id % kBlock == 0) blocks_.push_back(std::make_unique<TensorRecord[]>(kBlock));
  TensorRecord& t = Record(id);
  t = std::move(record);
  by_key_.Add(t.key, hash);  // its id: the adds so far
  order_.push_back(static_cast<uint32_t>(id));
  return t;
}

void TensorTable::SortByKey() {
  if (ordered_) return;
  // Sorted beside their keys' views: a comparison reads the two keys'
  // bytes and nothing else (not the records, which lie all over memory).
  std::vector<std::pair<std::string_view, uint32_t>> by_key;
  by_key.reserve(order_.size());
  for (const uint32_t id : order_) by_key.emplace_back(Record(id).key, id);
  std::sort(by_key.begin(), by_key.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < by_key.size(); ++i) order_[i] = by_key[i].second;
  ordered_ = true;
}

void TensorTable::CheckOrdered() const {
  if (!ordered_) throw std::logic_error("TensorTable iterated before SortByKey");
}

TensorTable::const_iterator TensorTable::begin() const {
  CheckOrdered();
  return const_iterator(this, 0);
}

TensorTable::const_iterator TensorTable::end() const { return const_iterator(this, order_.size()); }

TensorTable::iterator TensorTable::begin() {
  CheckOrdered();
  return iterator(this, 0);
}

TensorTable::iterator TensorTable::end() { return iterator(this, order_.size()); }

}  // namespace shardcheck
