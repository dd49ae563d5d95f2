// Property tests (RapidCheck) of checkpoint resharding and of the chunked
// reads of a checkpoint (distributed/checkpoint.h, checkpoint_format.h;
// docs/checkpoint-format.md, "Chunks and the flattened global tensor" and
// "Reconstructing a param's main param and state").
//
// The reshard plan (which element range of which checkpoint tensor each
// owned piece reads) is not a function of its own: LoadCheckpoint builds it
// (Locate) and runs it, one ReadRange per owned piece and kind. So the
// plan is tested through SaveCheckpoint at dp a and LoadCheckpoint at dp b,
// ranks as threads over the in-process communicator, for generated setups
// (elementwise and Muon composites), 1-D and 2-D param lists, bucket sizes,
// sharding types and model dtypes. Every saved element carries a code of
// (param, element, kind), and the target starts as NaN:
//   - the plan's destinations, the pieces the dp-b ranks own, tile every
//     param exactly once (no element read twice, none left out);
//   - every owned element of every kind gets the code saved for exactly that
//     element, and the rebuilt model params are the whole saved params.
// The chunk property saves at dp a and checks that each tensor's chunks
// cover [0, numel) exactly once, in offset order, each at a byte range of
// its size inside its file, and that ReadRange of generated ranges (many
// straddling chunk edges) returns the bytes of the chunks read straight
// from the files in offset order. ReadRanges (the load's batched read)
// returns the same bytes for generated batches of ranges (overlapping ones
// included), and finds a flipped byte anywhere in a chunk it touches, also
// where no range needs that byte. A failure prints the shrunk case.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "distributed/checkpoint.h"
#include "distributed/checkpoint_format.h"
#include "distributed/communicator_local.h"
#include "distributed/distrib_optimizer.h"
#include "spec/config.h"
#include "spec/params.h"
#include "spec/error.h"
#include "testing/temp_dir.h"

namespace shardcheck {
namespace fs = std::filesystem;
namespace {

struct ReshardCase {
  std::string setup;
  std::vector<std::vector<int64_t>> shapes;  // registration order
  int64_t bucket_size = 0;
  int dp_save = 1, dp_load = 1;
  ShardingType type = ShardingType::kDpReshardable;
  bool bf16 = false;

  c10::ScalarType dtype() const { return bf16 ? at::kBFloat16 : at::kFloat; }
  std::vector<ParamInfo> Params() const {
    std::vector<ParamInfo> out;
    for (size_t i = 0; i < shapes.size(); ++i) out.push_back({"p" + std::to_string(i), shapes[i]});
    return out;
  }
  DistOptions Options() const {
    DistOptions o;
    o.bucket_size = bucket_size;
    return o;
  }
};

void showValue(const ReshardCase& c, std::ostream& os) {
  os << "setup " << c.setup << ", shapes [";
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    os << (i ? ", " : "") << "{";
    for (size_t d = 0; d < c.shapes[i].size(); ++d) os << (d ? "x" : "") << c.shapes[i][d];
    os << "}";
  }
  os << "], bucket_size " << c.bucket_size << ", " << ShardingTypeName(c.type) << ", dp "
     << c.dp_save << " -> " << c.dp_load << ", model dtype " << (c.bf16 ? "bf16" : "fp32");
}

rc::Gen<std::vector<int64_t>> GenShape() {
  return rc::gen::oneOf(
      rc::gen::map(rc::gen::inRange<int64_t>(1, 3000), [](int64_t n) { return std::vector{n}; }),
      rc::gen::map(rc::gen::inRange<int64_t>(1, 4), [](int64_t k) { return std::vector{k * 64}; }),
      rc::gen::map(
          rc::gen::pair(rc::gen::inRange<int64_t>(1, 41), rc::gen::inRange<int64_t>(1, 41)),
          [](const std::pair<int64_t, int64_t>& dims) {
            return std::vector{dims.first, dims.second};
          }));
}

rc::Gen<ReshardCase> GenReshardCase() {
  return rc::gen::exec([] {
    ReshardCase c;
    c.setup = *rc::gen::elementOf(OptimizerSetup::Names());
    const int count = *rc::gen::inRange(1, 7);
    c.shapes = *rc::gen::container<std::vector<std::vector<int64_t>>>(static_cast<size_t>(count),
                                                                      GenShape());
    c.bucket_size = *rc::gen::oneOf(rc::gen::just<int64_t>(0), rc::gen::inRange<int64_t>(1, 4000));
    c.dp_save = *rc::gen::inRange(1, 5);
    c.dp_load = *rc::gen::inRange(1, 5);
    c.type = *rc::gen::elementOf(AllShardingTypes());
    c.bf16 = *rc::gen::arbitrary<bool>();
    return c;
  });
}

// What element `begin + i` of `param` holds for `kind` (0: main param,
// k > 0: state key k - 1): distinct integers, exact in fp32 (< 2^24).
at::Tensor Code(int param, int64_t begin, int64_t n, int kind) {
  const double base = kind * double{1 << 20} + param * double{1 << 14} + 1;
  return at::arange(static_cast<double>(begin), static_cast<double>(begin + n), at::kFloat) + base;
}

void FillOwned(DistributedOptimizer& opt, bool with_nan) {
  for (OwnedPiece& p : opt.Owned()) {
    const int64_t n = p.param_range.size();
    const auto code = [&](int kind) {
      return with_nan ? at::full({n}, NAN, at::kFloat)
                      : Code(p.param, p.param_range.begin, n, kind);
    };
    p.main.copy_(code(0));
    for (size_t k = 0; k < p.state.size(); ++k) p.state[k].copy_(code(static_cast<int>(k) + 1));
  }
}

// "" when `got` holds `want`'s bits, else where they first differ.
std::string Mismatch(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  const at::Tensor g = got.contiguous().view({-1}), w = want.contiguous().view({-1});
  if (g.numel() != w.numel())
    return what + ": " + std::to_string(g.numel()) + " elements, not " + std::to_string(w.numel());
  const size_t es = g.element_size();
  const auto* a = static_cast<const unsigned char*>(g.data_ptr());
  const auto* b = static_cast<const unsigned char*>(w.data_ptr());
  for (int64_t i = 0; i < g.numel(); ++i)
    if (std::memcmp(a + i * es, b + i * es, es) != 0)
      return what + ": element " + std::to_string(i) + " is " +
             std::to_string(g[i].item<double>()) + ", saved " + std::to_string(w[i].item<double>());
  return "";
}

// Every owned element of every kind against the code saved for it, then
// every model param against its whole saved main param.
std::string CheckLoaded(DistributedOptimizer& opt) {
  const std::string rank = "rank " + std::to_string(opt.comm().rank());
  for (OwnedPiece& p : opt.Owned()) {
    const int64_t n = p.param_range.size();
    const std::string where = rank + ", param " + std::to_string(p.param) + " [" +
                              std::to_string(p.param_range.begin) + ", " +
                              std::to_string(p.param_range.end) + ")";
    std::string m = Mismatch(p.main, Code(p.param, p.param_range.begin, n, 0), where + " main");
    for (size_t k = 0; m.empty() && k < p.state.size(); ++k)
      m = Mismatch(p.state[k], Code(p.param, p.param_range.begin, n, static_cast<int>(k) + 1),
                   where + " state " + std::to_string(k));
    if (!m.empty()) return m;
  }
  for (size_t i = 0; i < opt.params().size(); ++i) {
    const at::Tensor want = Code(static_cast<int>(i), 0, opt.params()[i].Numel(), 0);
    const std::string m = Mismatch(opt.ModelParam(static_cast<int>(i)), want.to(opt.model_dtype()),
                                   rank + ", model param " + std::to_string(i));
    if (!m.empty()) return m;
  }
  return "";
}

// The plan's destinations over all ranks: every param tiled exactly once.
std::string CheckCoverage(const DistributedOptimizer& opt) {
  std::vector<std::vector<std::pair<Range, int>>> pieces(opt.params().size());
  for (int r = 0; r < opt.comm().size(); ++r)
    for (const OwnedPiece& p : opt.PiecesOf(r))
      pieces[static_cast<size_t>(p.param)].push_back({p.param_range, r});
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::sort(pieces[i].begin(), pieces[i].end(),
              [](const auto& a, const auto& b) { return a.first.begin < b.first.begin; });
    int64_t covered = 0;
    for (const auto& [range, r] : pieces[i]) {
      if (range.begin != covered || range.size() <= 0)
        return "param " + std::to_string(i) + ": rank " + std::to_string(r) + " owns [" +
               std::to_string(range.begin) + ", " + std::to_string(range.end) +
               "), covered so far " + std::to_string(covered);
      covered = range.end;
    }
    if (covered != opt.params()[i].Numel())
      return "param " + std::to_string(i) + ": owned up to " + std::to_string(covered) + " of " +
             std::to_string(opt.params()[i].Numel());
  }
  return "";
}

// Runs `body` on `dp` ranks as threads; "" when every rank returned, else
// the first line of the first rank's error (ATen appends a backtrace).
std::string RunRanks(int dp, const std::function<void(Communicator&)>& body) {
  const auto errors = RunLocalRanksInProcess(dp, std::chrono::seconds(60), body);
  for (size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      return "rank " + std::to_string(r) + ": " + what.substr(0, what.find('\n'));
    }
  }
  return "";
}

// Saves the coded state of `c` at dp_save into `dir`.
void SaveCoded(const ReshardCase& c, const std::string& dir) {
  const std::string failure = RunRanks(c.dp_save, [&](Communicator& comm) {
    DistributedOptimizer opt(OptimizerSetup::Defaults(c.setup), c.Params(), c.dtype(), comm,
                             c.Options());
    FillOwned(opt, false);
    SaveCheckpoint(opt, dir, c.type);
  });
  if (!failure.empty()) RC_FAIL("save at dp " + std::to_string(c.dp_save) + ": " + failure);
}

RC_GTEST_PROP(ReshardProp, LoadAtOtherDpReadsEveryTargetElementOnce, ()) {
  const ReshardCase c = *GenReshardCase();
  TempDir tmp("reshard_prop");
  SaveCoded(c, tmp.Sub("ckpt"));
  std::vector<std::string> checks(static_cast<size_t>(c.dp_load));
  const std::string failure = RunRanks(c.dp_load, [&](Communicator& comm) {
    DistributedOptimizer opt(OptimizerSetup::Defaults(c.setup), c.Params(), c.dtype(), comm,
                             c.Options());
    FillOwned(opt, true);
    LoadCheckpoint(opt, tmp.Sub("ckpt"));
    std::string& check = checks[static_cast<size_t>(comm.rank())];
    if (comm.rank() == 0) check = CheckCoverage(opt);
    if (check.empty()) check = CheckLoaded(opt);
  });
  if (!failure.empty()) RC_FAIL("load at dp " + std::to_string(c.dp_load) + ": " + failure);
  for (const std::string& check : checks)
    if (!check.empty()) RC_FAIL(check);
}

// The bytes of `key`'s chunks, read straight from the files in offset order.
std::string ChunkBytes(const std::string& dir, const TensorRecord& t) {
  std::string out;
  for (const ChunkRecord& ch : t.chunks) {
    std::ifstream in(fs::path(dir) / ch.file, std::ios::binary);
    std::string bytes(ch.byte_end - ch.byte_begin, '\0');
    in.seekg(static_cast<std::streamoff>(ch.byte_begin));
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    RC_ASSERT(static_cast<bool>(in));
    out += bytes;
  }
  return out;
}

// docs/checkpoint-format.md, "metadata.json": chunks sorted by offset, never
// overlapping, covering the tensor; byte ranges of numel × dtype size.
void CheckChunkRecords(const std::string& dir, const TensorRecord& t) {
  const int64_t es = static_cast<int64_t>(c10::elementSize(t.dtype));
  int64_t covered = 0;
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> bytes_in_file;
  for (const ChunkRecord& ch : t.chunks) {
    RC_LOG() << t.key << ": chunk [" << ch.offset << ", +" << ch.numel << ") in " << ch.file
             << " bytes [" << ch.byte_begin << ", " << ch.byte_end << ")\n";
    RC_ASSERT(ch.offset == covered);
    RC_ASSERT(ch.numel > 0);
    RC_ASSERT(ch.byte_end - ch.byte_begin == static_cast<uint64_t>(ch.numel * es));
    RC_ASSERT(ch.byte_end <= fs::file_size(fs::path(dir) / ch.file));
    bytes_in_file[ch.file].push_back({ch.byte_begin, ch.byte_end});
    covered += ch.numel;
  }
  RC_ASSERT(covered == t.Numel());
  for (auto& [file, ranges] : bytes_in_file) {
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i) RC_ASSERT(ranges[i].first >= ranges[i - 1].second);
  }
}

// An element range of a tensor of `numel` elements, often across a chunk edge.
std::pair<int64_t, int64_t> GenRange(const TensorRecord& t) {
  const int64_t numel = t.Numel();
  int64_t begin = *rc::gen::inRange<int64_t>(0, numel);
  if (t.chunks.size() > 1 && *rc::gen::arbitrary<bool>()) {
    const size_t edge = *rc::gen::inRange<size_t>(1, t.chunks.size());
    begin = std::max<int64_t>(0, t.chunks[edge].offset - *rc::gen::inRange<int64_t>(1, 100));
  }
  const int64_t n = *rc::gen::inRange<int64_t>(0, numel - begin + 1);
  return {begin, n};
}

RC_GTEST_PROP(CheckpointChunksProp, ChunksCoverEachTensorOnceAndReadRangeAssemblesThem, ()) {
  const ReshardCase c = *GenReshardCase();
  TempDir tmp("reshard_prop");
  const std::string dir = tmp.Sub("ckpt");
  SaveCoded(c, dir);
  CheckpointReader reader(dir);
  std::vector<const TensorRecord*> tensors;
  for (const TensorRecord& t : reader.metadata().tensors) {
    CheckChunkRecords(dir, t);
    tensors.push_back(&t);
  }
  RC_ASSERT(!tensors.empty());
  for (int read = 0; read < 6; ++read) {
    const TensorRecord& t = *tensors[*rc::gen::inRange<size_t>(0, tensors.size())];
    const auto [begin, n] = GenRange(t);
    RC_LOG() << "ReadRange(" << t.key << ", " << begin << ", " << n << ") of " << t.Numel()
             << " elements in " << t.chunks.size() << " chunk(s)\n";
    const std::string all = ChunkBytes(dir, t);
    const size_t es = c10::elementSize(t.dtype);
    const at::Tensor got = reader.ReadRange(t.key, begin, n).contiguous();
    RC_ASSERT(got.numel() == n);
    RC_ASSERT(std::memcmp(got.data_ptr(), all.data() + begin * es, n * es) == 0);
  }
}

RC_GTEST_PROP(CheckpointChunksProp, ReadRangesReturnsEachRangeAndVerifiesWholeChunks, ()) {
  const ReshardCase c = *GenReshardCase();
  TempDir tmp("reshard_prop");
  const std::string dir = tmp.Sub("ckpt");
  SaveCoded(c, dir);
  std::vector<const TensorRecord*> tensors;
  CheckpointReader index(dir);
  for (const TensorRecord& t : index.metadata().tensors) tensors.push_back(&t);
  RC_ASSERT(!tensors.empty());
  std::vector<CheckpointReader::Range> ranges;
  const int count = *rc::gen::inRange(1, 8);
  for (int i = 0; i < count; ++i) {
    const TensorRecord& t = *tensors[*rc::gen::inRange<size_t>(0, tensors.size())];
    const auto [begin, n] = GenRange(t);
    RC_LOG() << "range " << t.key << " [" << begin << ", +" << n << ") of " << t.Numel() << "\n";
    ranges.push_back({t.key, begin, n});
  }
  CheckpointReader reader(dir);  // fresh: nothing verified yet
  const std::vector<at::Tensor> got = reader.ReadRanges(ranges);
  RC_ASSERT(got.size() == ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    const TensorRecord& t = index.Record(ranges[i].key);
    const size_t es = c10::elementSize(t.dtype);
    RC_ASSERT(got[i].numel() == ranges[i].numel);
    RC_ASSERT(std::memcmp(got[i].data_ptr(), ChunkBytes(dir, t).data() + ranges[i].begin * es,
                          ranges[i].numel * es) == 0);
  }
  // One flipped byte in a chunk the first nonempty range touches.
  const auto touched = std::find_if(ranges.begin(), ranges.end(),
                                    [](const CheckpointReader::Range& r) { return r.numel > 0; });
  if (touched == ranges.end()) return;
  const TensorRecord& t = index.Record(touched->key);
  const ChunkSpan span = ChunksCovering(t, touched->begin, touched->numel, nullptr);
  const ChunkRecord& ch = t.chunks[*rc::gen::inRange(span.first, span.last)];
  const uint64_t at = *rc::gen::inRange<uint64_t>(ch.byte_begin, ch.byte_end);
  RC_LOG() << "flipped byte " << at << " of " << ch.file << "\n";
  {
    std::fstream f(fs::path(dir) / ch.file, std::ios::binary | std::ios::in | std::ios::out);
    f.seekg(static_cast<std::streamoff>(at));
    const char b = static_cast<char>(f.get() ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(b);
  }
  CheckpointReader corrupt(dir);
  try {
    corrupt.ReadRanges({*touched});
    RC_FAIL("a flipped byte passed ReadRanges");
  } catch (const Error& e) {
    RC_ASSERT(std::string(e.what()).find("checksum mismatch in " + ch.file) != std::string::npos);
  }
}

}  // namespace
}  // namespace shardcheck
