// Property tests (RapidCheck) of the chunked checkpoint writes
// (distributed/file_util.h, distributed/safetensors.h): a rank file is
// written as a list of byte runs straight from the tensors' memory
// (WriteFileAtomic's runs, each cut into write() calls, and cut once more
// where the `midway` failpoint hook must see exactly half the bytes), and
// WriteSafetensorsParts lays a tensor given in parts (a shard with its
// padding gaps) out as one run after the other. Over generated run sizes
// (empty runs included) and tensors in parts of several dtypes:
//   - the file holds every run's bytes exactly once, in order;
//   - `midway` runs exactly once (for a non-empty write), when the
//     temporary file holds exactly the first half of the bytes;
//   - the observer (where a save checksums) sees every byte once, in file
//     order, in blocks inside their own run's memory, and per tensor the
//     bytes of its parts in order;
//   - ReadOnlyFile::ReadAt reads any range back and shows it to its
//     observer block by block, and says so when the file ends first;
//   - the safetensors header's data_offsets put the tensors back to back in
//     the order given, from 0 to the end of the file (docs/checkpoint-format.md,
//     "Rank files: safetensors"), and each tensor reads back as its parts
//     concatenated in order.
// A failure prints the shrunk case.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "distributed/file_util.h"
#include "distributed/safetensors.h"
#include "spec/error.h"
#include "testing/temp_dir.h"

namespace shardcheck {
namespace fs = std::filesystem;
namespace {

// The content of every file in `dir` but `except` (the temporary file a
// write in progress leaves beside its destination).
std::vector<std::string> OtherFiles(const fs::path& dir, const fs::path& except) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path() != except) out.push_back(ReadFile(e.path().string()));
  return out;
}

// Run sizes: empty runs, small ones, and ones of a few pages.
rc::Gen<std::vector<size_t>> GenRunSizes() {
  return rc::gen::container<std::vector<size_t>>(
      rc::gen::oneOf(rc::gen::just<size_t>(0), rc::gen::inRange<size_t>(1, 64),
                     rc::gen::inRange<size_t>(1, 20000)));
}

// Byte i of run r: a hash of (r, i, salt), so that a run written twice, out
// of order or shifted shows.
char RunByte(size_t r, size_t i, uint32_t salt) {
  uint32_t x =
      static_cast<uint32_t>(r + 1) * 2654435761u ^ static_cast<uint32_t>(i) * 40503u ^ salt;
  x ^= x >> 15;
  x *= 2246822519u;
  return static_cast<char>(x >> 24);
}

RC_GTEST_PROP(WriteChunkingProp, FileHoldsEveryRunOnceInOrderAndMidwaySeesHalf, ()) {
  const std::vector<size_t> sizes = *GenRunSizes();
  const uint32_t salt = *rc::gen::arbitrary<uint32_t>();
  std::vector<std::string> runs;
  std::string all;
  for (size_t r = 0; r < sizes.size(); ++r) {
    std::string run(sizes[r], '\0');
    for (size_t i = 0; i < run.size(); ++i) run[i] = RunByte(r, i, salt);
    all += run;
    runs.push_back(std::move(run));
  }
  std::vector<ByteRun> byte_runs;
  for (const std::string& run : runs) byte_runs.push_back({run.data(), run.size()});
  TempDir tmp("chunking_prop");
  const fs::path target = tmp.path() / "file.bin";
  int midway_calls = 0;
  std::vector<std::string> at_midway;
  std::string observed;
  size_t last_run = 0;
  WriteFileAtomic(
      target.string(), byte_runs,
      [&] {
        ++midway_calls;
        at_midway = OtherFiles(tmp.path(), target);
      },
      [&](size_t run, const void* data, size_t size) {
        RC_ASSERT(run < runs.size());
        RC_ASSERT(run >= last_run);
        const char* p = static_cast<const char*>(data);
        RC_ASSERT(p >= runs[run].data());
        RC_ASSERT(p + size <= runs[run].data() + runs[run].size());
        RC_ASSERT(size <= kWriteBlockBytes);
        last_run = run;
        observed.append(p, size);
      });
  RC_ASSERT(ReadFile(target.string()) == all);
  RC_ASSERT(observed == all);
  RC_ASSERT(midway_calls == (all.empty() ? 0 : 1));
  if (midway_calls == 1) {
    RC_ASSERT(at_midway.size() == 1u);  // the temporary file alone
    RC_ASSERT(at_midway[0].size() == all.size() / 2);
    RC_ASSERT(at_midway[0] == all.substr(0, all.size() / 2));
  }
  RC_ASSERT(OtherFiles(tmp.path(), target).empty());  // the temporary is gone
}

// One tensor to write in parts: its dtype and each part's element count.
struct PartsCase {
  c10::ScalarType dtype = at::kFloat;
  std::vector<int64_t> part_numels;
};

void showValue(const PartsCase& c, std::ostream& os) {
  os << SafetensorsDtype(c.dtype) << " parts [";
  for (size_t i = 0; i < c.part_numels.size(); ++i) os << (i ? ", " : "") << c.part_numels[i];
  os << "]";
}

rc::Gen<PartsCase> GenPartsCase() {
  return rc::gen::exec([] {
    PartsCase c;
    c.dtype = *rc::gen::element(at::kFloat, at::kBFloat16, at::kLong, at::kByte);
    const int parts = *rc::gen::inRange(1, 5);
    c.part_numels = *rc::gen::container<std::vector<int64_t>>(
        static_cast<size_t>(parts),
        rc::gen::oneOf(rc::gen::just<int64_t>(0), rc::gen::inRange<int64_t>(1, 700)));
    return c;
  });
}

RC_GTEST_PROP(WriteChunkingProp, SafetensorsPartsBackToBackInOrder, ()) {
  const std::vector<PartsCase> cases =
      *rc::gen::nonEmpty(rc::gen::container<std::vector<PartsCase>>(GenPartsCase()));
  std::vector<SafetensorsParts> tensors;
  int64_t next_value = 1;  // every element distinct (mod the dtype's range)
  for (size_t i = 0; i < cases.size(); ++i) {
    SafetensorsParts t{"t" + std::to_string(i), {0}, {}};
    for (int64_t n : cases[i].part_numels) {
      t.parts.push_back(at::arange(next_value, next_value + n, at::kLong).to(cases[i].dtype));
      next_value += n;
      t.shape[0] += n;
    }
    tensors.push_back(std::move(t));
  }
  TempDir tmp("chunking_prop");
  const std::string path = (tmp.path() / "rank.safetensors").string();
  std::vector<std::string> observed(tensors.size());
  const uint64_t header = WriteSafetensorsParts(
      path, tensors, {{"format", "test"}}, {}, [&](size_t t, const void* data, size_t size) {
        RC_ASSERT(t < observed.size());
        observed[t].append(static_cast<const char*>(data), size);
      });
  const SafetensorsFile f = ReadSafetensorsHeader(path);
  RC_ASSERT(f.header_size == header);
  RC_ASSERT(f.entries.size() == tensors.size());
  // The reader lists entries by data offset; empty tensors share theirs, so
  // look each tensor up by name and walk them in the order written.
  std::map<std::string, SafetensorsEntry> entries;
  for (const SafetensorsEntry& e : f.entries) entries[e.name] = e;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    RC_ASSERT(entries.count(tensors[i].name) == 1u);
    const SafetensorsEntry& e = entries.at(tensors[i].name);
    RC_LOG() << e.name << ": data_offsets [" << e.begin << ", " << e.end << ")\n";
    RC_ASSERT(e.begin == offset);
    RC_ASSERT(e.end - e.begin ==
              static_cast<uint64_t>(tensors[i].shape[0]) * c10::elementSize(cases[i].dtype));
    offset = e.end;
  }
  RC_ASSERT(f.DataOffset() + offset == fs::file_size(path));
  const auto read = ReadSafetensors(path);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor want = at::cat(tensors[i].parts);
    RC_ASSERT(read.at(tensors[i].name).equal(want));
    RC_ASSERT(observed[i] == std::string(static_cast<const char*>(want.data_ptr()), want.nbytes()));
  }
}

RC_GTEST_PROP(WriteChunkingProp, ReadAtReadsAnyRangeAndShowsItOnce, ()) {
  const size_t size = *rc::gen::inRange<size_t>(0, 30000);
  const uint32_t salt = *rc::gen::arbitrary<uint32_t>();
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = RunByte(0, i, salt);
  TempDir tmp("chunking_prop");
  const std::string path = (tmp.path() / "file.bin").string();
  WriteFileAtomic(path, bytes);
  const size_t offset = *rc::gen::inRange<size_t>(0, size + 1);
  const size_t want = *rc::gen::inRange<size_t>(0, size - offset + 100);
  std::string got(want, '\0'), observed;
  const ReadOnlyFile file(path);
  const bool whole = file.ReadAt(offset, want, got.data(), [&](size_t, const void* p, size_t n) {
    RC_ASSERT(static_cast<const char*>(p) >= got.data());
    RC_ASSERT(static_cast<const char*>(p) + n <= got.data() + got.size());
    observed.append(static_cast<const char*>(p), n);
  });
  const bool fits = offset + want <= size;
  RC_ASSERT(whole == fits);
  if (fits) {
    RC_ASSERT(got == bytes.substr(offset, want));
    RC_ASSERT(observed == got);
  }
}

// Writes and reads larger than a block: cut into blocks of at most
// kWriteBlockBytes, every byte observed once.
TEST(WriteChunking, LargeRunsAreObservedInBlocksOnWriteAndRead) {
  const size_t big = 2 * kWriteBlockBytes + 12345;
  std::string a(big, '\0'), b(kWriteBlockBytes / 3, '\0');
  for (size_t i = 0; i < a.size(); ++i) a[i] = RunByte(0, i, 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = RunByte(1, i, 7);
  TempDir tmp("chunking");
  const std::string path = (tmp.path() / "big.bin").string();
  std::string observed;
  size_t blocks = 0;
  const auto observe = [&](size_t, const void* p, size_t n) {
    EXPECT_LE(n, kWriteBlockBytes);
    observed.append(static_cast<const char*>(p), n);
    ++blocks;
  };
  WriteFileAtomic(path, {{a.data(), a.size()}, {b.data(), b.size()}}, {}, observe);
  EXPECT_EQ(ReadFile(path), a + b);
  EXPECT_TRUE(observed == a + b);
  EXPECT_EQ(blocks, 4u);  // a in three blocks, b in one
  observed.clear();
  blocks = 0;
  std::string back(big, '\0');
  EXPECT_TRUE(ReadOnlyFile(path).ReadAt(0, big, back.data(), observe));
  EXPECT_TRUE(back == a);
  EXPECT_TRUE(observed == a);
  EXPECT_EQ(blocks, 3u);
  EXPECT_FALSE(ReadOnlyFile(path).ReadAt(big, b.size() + 1, back.data()));
  EXPECT_THROW(ReadOnlyFile((tmp.path() / "absent").string()), Error);
}

}  // namespace
}  // namespace shardcheck
