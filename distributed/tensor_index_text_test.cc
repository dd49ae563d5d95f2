// AppendTensorIndexText against nlohmann's dump(1) of the same index, and
// MetadataFileText against the sealed dump of ToJson: the same bytes.
#include "distributed/tensor_index_text.h"

#include <gtest/gtest.h>

#include <cstdint>

#include <nlohmann/json.hpp>

#include "distributed/sealed_json.h"

namespace shardcheck {
namespace {

ChunkRecord Chunk(int64_t offset, int64_t numel, const std::string& file, const std::string& name,
                  uint64_t begin, uint64_t end, const std::string& xxh3) {
  ChunkRecord c;
  c.offset = offset;
  c.numel = numel;
  c.file = file;
  c.name = name;
  c.byte_begin = begin;
  c.byte_end = end;
  c.xxh3 = xxh3;
  return c;
}

// The index as ToJson writes it, dumped at `level` inside objects nested
// that deep: what AppendTensorIndexText must reproduce.
std::string NlohmannText(const TensorTable& tensors, int level) {
  CheckpointMetadata m;
  m.tensors = tensors;
  nlohmann::ordered_json v = m.ToJson()["tensors"];
  for (int i = 0; i < level; ++i) v = nlohmann::ordered_json{{"x", v}};
  std::string text = v.dump(1);
  // Strip the `level` wrapping objects' own lines: "{\n" + level spaces + "\"x\": " ... "\n" + "}".
  for (int i = 0; i < level; ++i) {
    const size_t open = text.find("\"x\": ");
    text = text.substr(open + 5, text.rfind('\n') - open - 5);
  }
  return text;
}

void Put(TensorTable& t, const std::string& key, TensorRecord r) {
  r.key = key;
  ASSERT_TRUE(t.Add(std::move(r))) << key;
}

// Three tensors, added out of key order; `with_escapes` adds one whose
// names need escaping.
TensorTable Index(bool with_escapes = true) {
  TensorTable t;
  TensorRecord a;
  a.dtype = at::kFloat;
  a.shape = {4, 3};
  a.chunks = {Chunk(0, 6, "rank_00000.safetensors", "a/0", 0, 24, "0123456789abcdef"),
              Chunk(6, 6, "rank_00001.safetensors", "a/1", 24, 48, "fedcba9876543210")};
  Put(t, "decoder.layers.0.weight/exp_avg", a);
  TensorRecord empty;  // a scalar with no chunk
  empty.dtype = at::kLong;
  Put(t, "bucket_sizes", empty);
  if (with_escapes) {
    TensorRecord odd;  // names that need escaping, UTF-8, DEL
    odd.dtype = at::kBFloat16;
    odd.shape = {0};
    odd.chunks = {Chunk(-1, 0, "q\"uote\\back", "tab\tnl\ncr\r\x01\x1f", 18446744073709551615ull, 0,
                        "\xc3\xa9\x7f")};
    Put(t, "w\xc3\xa9ight \"quoted\"", odd);
  }
  t.SortByKey();
  return t;
}

TEST(TensorIndexText, SameBytesAsNlohmannAtEveryLevel) {
  for (int level : {0, 1, 3}) {
    std::string out;
    AppendTensorIndexText(Index(), level, out);
    EXPECT_EQ(out, NlohmannText(Index(), level)) << "level " << level;
  }
}

TEST(TensorIndexText, AnEmptyIndexIsAnEmptyObject) {
  std::string out = "x";
  AppendTensorIndexText({}, 1, out);
  EXPECT_EQ(out, "x{}");
  EXPECT_EQ(out.substr(1), NlohmannText({}, 1));
}

TEST(TensorIndexText, InvalidUtf8IsRefusedAsDumpRefusesIt) {
  TensorTable t = Index();
  Put(t, "bad\xff", TensorRecord{});
  t.SortByKey();
  std::string out;
  EXPECT_THROW(AppendTensorIndexText(t, 1, out), nlohmann::json::type_error);
}

// The reservation is a bound for names without escapes, numbers of any
// width included (a shortfall would not be wrong, only slow: the text
// doubling and copying itself at scale).
TEST(TensorIndexText, BoundCoversATextWithoutEscapes) {
  TensorTable t = Index(/*with_escapes=*/false);
  TensorRecord wide;
  wide.shape = {INT64_MIN, INT64_MAX, 1};
  for (int i = 0; i < 3; ++i)
    wide.chunks.push_back(Chunk(INT64_MIN, INT64_MAX, "r", "n", UINT64_MAX, UINT64_MAX, "0123456789abcdef"));
  Put(t, "w", wide);
  t.SortByKey();
  for (int level : {0, 1, 3}) {
    std::string out;
    AppendTensorIndexText(t, level, out);
    EXPECT_LE(out.size(), TensorIndexTextBound(t, level)) << "level " << level;
  }
}

TEST(TensorIndexText, MetadataFileTextIsTheSealedDumpOfToJson) {
  CheckpointMetadata m;
  m.optimizer = "adam";
  m.optimizer_config = nlohmann::ordered_json::object();
  m.files["rank_00000.safetensors"] = FileRecord{48, 8, "00000000000000aa"};
  for (const TensorTable& idx : {TensorTable{}, Index()}) {
    m.tensors = idx;
    EXPECT_EQ(MetadataFileText(m), SealJson(m.ToJson().dump(1)));
  }
}

}  // namespace
}  // namespace shardcheck
