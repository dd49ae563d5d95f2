#include "distributed/name_index.h"

#include <cstdint>
#include <functional>
#include <string>

#include "spec/error.h"

namespace shardcheck {
namespace {

uint32_t HashOf(std::string_view name) {
  const uint64_t h = std::hash<std::string_view>{}(name);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

size_t TableSizeFor(size_t names) {
  size_t n = 16;
  while (n < 2 * names) n *= 2;
  return n;
}

}  // namespace

NameIndex::NameIndex(size_t expected) : slots_(TableSizeFor(expected)) {}

size_t NameIndex::Probe(std::string_view name, uint32_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id_plus_one == 0) return i;
    if (s.hash == hash && std::string_view(s.data, s.size) == name) return i;
  }
}

bool NameIndex::Add(std::string_view name) {
  if (name.size() > UINT32_MAX) throw Error("a name of " + std::to_string(name.size()) + " bytes");
  if (2 * (size_ + 1) > slots_.size()) Grow();
  const uint32_t hash = HashOf(name);
  Slot& s = slots_[Probe(name, hash)];
  if (s.id_plus_one != 0) return false;
  ++size_;
  s = {name.data(), static_cast<uint32_t>(name.size()), hash, static_cast<uint32_t>(size_)};
  return true;
}

int64_t NameIndex::Find(std::string_view name) const {
  const Slot& s = slots_[Probe(name, HashOf(name))];
  return static_cast<int64_t>(s.id_plus_one) - 1;
}

void NameIndex::Grow() {
  std::vector<Slot> old(slots_.size() * 2);
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
