#include "distributed/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "distributed/checkpoint_format.h"
#include "distributed/file_util.h"
#include "spec/error.h"

namespace shardcheck {
namespace {

class Safetensors : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("shardcheck_st_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) { return (dir_ / name).string(); }

  std::string WriteSample() {
    const std::string p = Path("a.safetensors");
    WriteSafetensors(p,
                     {{"w", at::arange(12, at::kFloat).reshape({3, 4})},
                      {"b", at::arange(5, at::kFloat).to(at::kBFloat16)},
                      {"step", at::tensor({7}, at::kLong)}},
                     {{"format", "test"}});
    return p;
  }

  std::filesystem::path dir_;
};

TEST_F(Safetensors, RoundTripKeepsBytesDtypesAndMetadata) {
  const std::string p = WriteSample();
  std::map<std::string, std::string> meta;
  auto t = ReadSafetensors(p, &meta);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_TRUE(at::equal(t["w"], at::arange(12, at::kFloat).reshape({3, 4})));
  EXPECT_EQ(t["b"].scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(t["b"], at::arange(5, at::kFloat).to(at::kBFloat16)));
  EXPECT_EQ(t["step"].item<int64_t>(), 7);
  EXPECT_EQ(meta.at("format"), "test");
}

TEST_F(Safetensors, HeaderIsPaddedToEightBytes) {
  const SafetensorsFile f = ReadSafetensorsHeader(WriteSample());
  EXPECT_EQ(f.header_size % 8, 0u);
  EXPECT_EQ(f.DataOffset() % 8, 0u);
}

TEST_F(Safetensors, TruncatedFileNamesTheFileAndTensor) {
  const std::string p = WriteSample();
  std::filesystem::resize_file(p, std::filesystem::file_size(p) - 4);
  try {
    ReadSafetensors(p);
    FAIL() << "read a truncated file";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  }
}

TEST_F(Safetensors, GarbageHeaderIsAnError) {
  const std::string p = Path("bad.safetensors");
  std::string bytes(8, '\0');
  bytes[0] = 4;
  bytes += "{{{{";
  WriteFileAtomic(p, bytes);
  EXPECT_THROW(ReadSafetensors(p), Error);
  WriteFileAtomic(p, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8));
  EXPECT_THROW(ReadSafetensors(p), Error);
  WriteFileAtomic(p, "abc");
  EXPECT_THROW(ReadSafetensors(p), Error);
}

TEST_F(Safetensors, TrailingBytesAreAnError) {
  const std::string p = WriteSample();
  std::ofstream(p, std::ios::app | std::ios::binary) << "junk";
  EXPECT_THROW(ReadSafetensorsHeader(p), Error);
}

TEST_F(Safetensors, DuplicateNamesAreRefusedAndNothingIsWritten) {
  const std::string p = Path("dup.safetensors");
  EXPECT_THROW(WriteSafetensors(p, {{"x", at::zeros({2})}, {"x", at::zeros({2})}}), Error);
  EXPECT_FALSE(std::filesystem::exists(p));
}

TEST_F(Safetensors, AtomicWriteLeavesNoTemporaryBehind) {
  WriteSample();
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

// A tensor written in parts gives the same file, byte for byte, as the
// assembled tensor, and the midway hook still runs once.
TEST_F(Safetensors, PartsWriteTheSameBytesAsTheAssembledTensor) {
  const at::Tensor whole = at::arange(100, at::kFloat);
  const std::string a = Path("whole.safetensors"), b = Path("parts.safetensors");
  WriteSafetensors(a, {{"x", whole}, {"n", at::tensor({3}, at::kLong)}}, {{"format", "t"}});
  int midway_calls = 0;
  WriteSafetensorsParts(
      b,
      {{"x",
        {100},
        {whole.narrow(0, 0, 7), at::arange(7, 64, at::kFloat), whole.narrow(0, 64, 36)}},
       {"n", {1}, {at::tensor({3}, at::kLong)}}},
      {{"format", "t"}}, [&] { ++midway_calls; });
  EXPECT_EQ(ReadFile(a), ReadFile(b));
  EXPECT_EQ(midway_calls, 1);
}

// The checksum a save records for a chunk written in parts.
TEST_F(Safetensors, Xxh3OfPartsIsXxh3OfTheirConcatenation) {
  const at::Tensor whole = at::arange(1000, at::kFloat);
  const std::vector<at::Tensor> parts = {whole.narrow(0, 0, 1), whole.narrow(0, 1, 500),
                                         whole.narrow(0, 501, 499)};
  EXPECT_EQ(Xxh3Hex(parts), Xxh3Hex(whole.data_ptr(), 4000));
  EXPECT_NE(Xxh3Hex({whole.narrow(0, 0, 999)}), Xxh3Hex(whole.data_ptr(), 4000));
}

TEST_F(Safetensors, PartsOfMixedDtypesOrAWrongCountAreRefused) {
  const std::string p = Path("bad.safetensors");
  EXPECT_THROW(WriteSafetensorsParts(p, {{"x", {4}, {at::zeros({2}), at::zeros({2}, at::kLong)}}}),
               Error);
  try {
    WriteSafetensorsParts(p, {{"x", {5}, {at::zeros({2}), at::zeros({2})}}});
    FAIL() << "a shape of 5 over 4 elements was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor x has 4 elements in its parts, 5 in its shape"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(p));
}

}  // namespace
}  // namespace shardcheck

namespace shardcheck {
namespace {

// The header LayOutSafetensors writes as text is the compact dump of the
// JSON object the format defines, entry by entry in the order given.
TEST(SafetensorsLayoutText, HeaderIsTheCompactDumpOfTheDefinedObject) {
  const std::vector<SafetensorsSpec> specs = {
      {"w", at::kFloat, {4, 3}},
      {"scalar", at::kLong, {}},
      {"empty", at::kBFloat16, {0, 7}},
      {"q\"uote\\ tab\t \xc3\xa9", at::kHalf, {5}},
  };
  const std::map<std::string, std::string> tags = {{"format", "x"}, {"rank", "3"}};
  const SafetensorsLayout layout = LayOutSafetensors("f.safetensors", specs, tags);
  nlohmann::ordered_json expected = nlohmann::ordered_json::object();
  expected["__metadata__"] = tags;
  uint64_t offset = 0;
  for (const SafetensorsSpec& s : specs) {
    int64_t numel = 1;
    for (int64_t d : s.shape) numel *= d;
    const uint64_t bytes = static_cast<uint64_t>(numel) * c10::elementSize(s.dtype);
    expected[s.name] = {{"dtype", SafetensorsDtype(s.dtype)},
                        {"shape", s.shape},
                        {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = expected.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  EXPECT_EQ(layout.json, text);
  EXPECT_EQ(layout.entries.size(), specs.size());
}

}  // namespace
}  // namespace shardcheck
