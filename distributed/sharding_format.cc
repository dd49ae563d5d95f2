#include "distributed/sharding_format.h"

#include <algorithm>

#include "distributed/checkpoint_format.h"
#include "distributed/checkpoint_parts.h"
#include "distributed/host_staging.h"
#include "spec/error.h"
#include "spec/failpoint.h"

namespace shardcheck {

// Generated from distributed/sharding/*.cc (cmake/registry.cmake).
void RegisterBuiltinShardingFormats();

namespace {

struct Registry {
  std::vector<std::unique_ptr<ShardingFormat>> formats;
  std::vector<ShardingType> types;
};

Registry& Raw() {
  static Registry* r = new Registry;
  return *r;
}

// The registry, with the built-in formats registered on first use.
Registry& Formats() {
  static const bool builtins = [] {
    RegisterBuiltinShardingFormats();
    return true;
  }();
  (void)builtins;
  return Raw();
}

// Piece p's tensor of `kind` as a save writes it, where it lives (device
// memory on a GPU run).
at::Tensor RawPieceData(const OwnedPiece& p, const PieceKind& kind) {
  return kind.IsMain() ? p.main : SavedState(kind.Of(p));
}

}  // namespace

void RegisterShardingFormat(std::unique_ptr<ShardingFormat> format) {
  Registry& r = Raw();
  for (const ShardingType t : r.types)
    if (t == format->type())
      throw Error(std::string("sharding type ") + t.name() + " is registered twice");
  r.types.push_back(format->type());
  r.formats.push_back(std::move(format));
}

const ShardingFormat& FormatOf(ShardingType type) {
  for (const auto& f : Formats().formats)
    if (f->type() == type) return *f;
  return FormatOf(ParseShardingType(type.name()));  // throws: not registered
}

std::string ShardingTypeName(ShardingType t) { return t.name(); }

const std::vector<ShardingType>& AllShardingTypes() { return Formats().types; }

ShardingType ParseShardingType(const std::string& name) {
  std::string names;
  for (const ShardingType t : AllShardingTypes()) {
    if (name == t.name()) return t;
    names += std::string(names.empty() ? "" : ", ") + t.name();
  }
  throw Error("unknown sharding type '" + name + "' (expected one of " + names + ")");
}

std::vector<PieceKind> PieceKinds(const std::vector<std::string>& state_names) {
  std::vector<PieceKind> kinds = {{"param", -1}};
  for (size_t k = 0; k < state_names.size(); ++k)
    kinds.push_back({state_names[k], static_cast<int>(k)});
  return kinds;
}

ShardPlace PlaceOf(const DistributedOptimizer& opt) {
  return {opt.layout(), opt.params(), opt.model_dtype(), opt.comm().rank(), opt.comm().size()};
}

std::vector<int64_t> BucketPrefix(const BufferLayout& layout) {
  std::vector<int64_t> prefix;
  int64_t acc = 0;
  for (const Bucket& b : layout.buckets()) {
    prefix.push_back(acc);
    acc += b.numel_unpadded;
  }
  return prefix;
}

int64_t PendingChunk::Numel() const {
  int64_t n = 0;
  for (const at::Tensor& p : parts) n += p.numel();
  return n;
}

at::Tensor SaveView::PieceData(const OwnedPiece& p, const PieceKind& kind) const {
  return OnHost(RawPieceData(p, kind));
}

std::vector<at::Tensor> SaveView::ShardParts(const Bucket& b, const PieceKind& kind,
                                             int64_t n) const {
  std::vector<const OwnedPiece*> in_bucket;
  for (const OwnedPiece& p : owned)
    if (p.bucket == b.index) in_bucket.push_back(&p);
  std::sort(in_bucket.begin(), in_bucket.end(), [](const OwnedPiece* x, const OwnedPiece* y) {
    return x->local.begin < y->local.begin;
  });
  std::vector<at::Tensor> parts;
  int64_t at = 0;
  for (const OwnedPiece* p : in_bucket) {
    if (p->local.begin > at) parts.push_back(at::zeros({p->local.begin - at}, at::kFloat));
    parts.push_back(PieceData(*p, kind));
    at = p->local.end;
  }
  if (at < n) parts.push_back(at::zeros({n - at}, at::kFloat));
  return parts;
}

at::Tensor SaveView::Shard(const Bucket& b, const PieceKind& kind) const {
  at::Tensor buf = EmptyHostStaging(b.ShardSize(opt.comm().size()), at::kFloat).zero_();
  for (const OwnedPiece& p : owned)
    if (p.bucket == b.index)
      buf.narrow(0, p.local.begin, p.local.size()).copy_(RawPieceData(p, kind));
  return buf;
}

namespace {

// Where piece p would start in its bucket if each of the bucket's params
// began right after the previous one (no 64-element alignment).
int64_t PackedBegin(const BufferLayout& l, const Bucket& b, const OwnedPiece& p) {
  int64_t packed = 0;
  for (int pi : b.params) {
    const PlacedParam& q = l.params()[static_cast<size_t>(pi)];
    if (q.param == p.param) break;
    packed += q.numel;
  }
  return packed + p.param_range.begin;
}

}  // namespace

int64_t InBucketBegin(const ShardPlace& s, const OwnedPiece& p, int read_rank) {
  const BufferLayout& l = s.layout;
  const Bucket& b = l.buckets()[static_cast<size_t>(p.bucket)];
  const int dp = s.dp, rank = s.rank;
  int64_t begin = p.in_bucket.begin;
  if (FailpointOn("ignore_param_start_padding")) begin = PackedBegin(l, b, p);
  const int64_t moved = begin + (read_rank - rank) * b.ShardSize(dp);
  if (moved >= 0 && moved + p.param_range.size() <= b.numel_unpadded) begin = moved;
  return begin;
}

ConcatenatedPieces::ConcatenatedPieces(std::vector<at::Tensor> pieces)
    : pieces_(std::move(pieces)), starts_{0} {
  if (pieces_.empty()) throw Error("ConcatenatedPieces: no pieces");
  for (const at::Tensor& p : pieces_) starts_.push_back(starts_.back() + p.numel());
}

std::vector<at::Tensor> ConcatenatedPieces::Slice(int64_t begin, int64_t numel) const {
  if (begin < 0 || numel < 0 || begin + numel > Numel())
    throw Error("slice [" + std::to_string(begin) + ", " + std::to_string(begin + numel) +
                ") leaves the gathered run of " + std::to_string(Numel()) + " elements");
  if (numel == 0) return {pieces_[0].narrow(0, 0, 0)};
  // The last piece that starts at or before `begin`.
  size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end() - 1, begin) -
                                 starts_.begin()) - 1;
  std::vector<at::Tensor> out;
  for (int64_t at = begin, end = begin + numel; at < end; ++i) {
    const int64_t lo = at - starts_[i], hi = std::min(end, starts_[i + 1]) - starts_[i];
    if (hi > lo) out.push_back(pieces_[i].narrow(0, lo, hi - lo));
    at = starts_[i] + hi;
  }
  return out;
}

std::vector<const TensorRecord*> FindRanges(const TensorTable& tensors,
                                            std::vector<TensorRange>& ranges) {
  std::vector<std::string_view> keys;
  keys.reserve(ranges.size());
  for (const TensorRange& r : ranges) keys.push_back(r.key);
  std::vector<const TensorRecord*> found = tensors.FindAll(keys);
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (found[i] || ranges[i].or_key.empty()) continue;
    found[i] = tensors.Find(ranges[i].or_key);
    if (found[i]) ranges[i].key = ranges[i].or_key;
  }
  // The caller reads each record's chunks next: ask for them all now, so
  // those misses overlap too.
  for (const TensorRecord* t : found)
    if (t && !t->chunks.empty()) __builtin_prefetch(t->chunks.data());
  return found;
}

}  // namespace shardcheck
