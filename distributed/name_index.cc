#include "distributed/name_index.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "spec/error.h"

namespace shardcheck {
namespace {

// How many names ahead a batch fetches slots: enough misses in flight to
// cover a memory latency, few enough that the fetched lines stay cached.
constexpr size_t kAhead = 16;

std::vector<uint32_t> HashesOf(const std::vector<std::string_view>& names) {
  std::vector<uint32_t> hashes(names.size());
  for (size_t i = 0; i < names.size(); ++i) hashes[i] = NameIndex::Hash(names[i]);
  return hashes;
}

// No table for no names; else the least power of two, at least 16, over
// twice `names`.
size_t TableSizeFor(size_t names) {
  if (names == 0) return 0;
  size_t n = 16;
  while (n < 2 * names) n *= 2;
  return n;
}

}  // namespace

NameIndex::NameIndex(size_t expected) : slots_(TableSizeFor(expected)) {}

NameIndex::NameIndex(NameIndex&& other) noexcept : slots_(std::move(other.slots_)), size_(other.size_) {
  other.slots_.clear();
  other.size_ = 0;
}

NameIndex& NameIndex::operator=(NameIndex&& other) noexcept {
  if (this == &other) return *this;
  slots_ = std::move(other.slots_);
  size_ = other.size_;
  other.slots_.clear();
  other.size_ = 0;
  return *this;
}

uint32_t NameIndex::Hash(std::string_view name) {
  const uint64_t h = std::hash<std::string_view>{}(name);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

size_t NameIndex::Probe(std::string_view name, uint32_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id_plus_one == 0) return i;
    if (s.hash == hash && std::string_view(s.data, s.size) == name) return i;
  }
}

bool NameIndex::Add(std::string_view name) { return Add(name, Hash(name)); }

bool NameIndex::Add(std::string_view name, uint32_t hash) {
  if (name.size() > UINT32_MAX) throw Error("a name of " + std::to_string(name.size()) + " bytes");
  if (2 * (size_ + 1) > slots_.size()) Rehash(slots_.empty() ? TableSizeFor(1) : slots_.size() * 2);
  Slot& s = slots_[Probe(name, hash)];
  if (s.id_plus_one != 0) return false;
  ++size_;
  s = {name.data(), static_cast<uint32_t>(name.size()), hash, static_cast<uint32_t>(size_)};
  return true;
}

int64_t NameIndex::Find(std::string_view name) const { return Find(name, Hash(name)); }

int64_t NameIndex::Find(std::string_view name, uint32_t hash) const {
  if (slots_.empty()) return -1;
  const Slot& s = slots_[Probe(name, hash)];
  return static_cast<int64_t>(s.id_plus_one) - 1;
}

void NameIndex::Prefetch(uint32_t hash, bool with_name) const {
  const Slot& s = slots_[hash & (slots_.size() - 1)];
  if (!with_name) {
    __builtin_prefetch(&s);
  } else if (s.data != nullptr) {
    __builtin_prefetch(s.data);
  }
}

size_t NameIndex::AddAll(const std::vector<std::string_view>& names) {
  if (2 * (size_ + names.size()) > slots_.size()) Rehash(TableSizeFor(size_ + names.size()));
  const std::vector<uint32_t> hashes = HashesOf(names);
  size_t already = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i + kAhead < names.size()) Prefetch(hashes[i + kAhead], false);
    if (!Add(names[i], hashes[i])) ++already;
  }
  return already;
}

std::vector<int64_t> NameIndex::FindAll(const std::vector<std::string_view>& names) const {
  if (slots_.empty()) return std::vector<int64_t>(names.size(), -1);
  const std::vector<uint32_t> hashes = HashesOf(names);
  std::vector<int64_t> ids(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    if (i + kAhead < names.size()) Prefetch(hashes[i + kAhead], false);
    if (i + kAhead / 2 < names.size()) Prefetch(hashes[i + kAhead / 2], true);
    ids[i] = static_cast<int64_t>(slots_[Probe(names[i], hashes[i])].id_plus_one) - 1;
  }
  return ids;
}

void NameIndex::Rehash(size_t slot_count) {
  std::vector<Slot> old(slot_count);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.id_plus_one == 0) continue;
    size_t i = s.hash & mask;
    while (slots_[i].id_plus_one != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

}  // namespace shardcheck
