#include "distributed/tensor_index_text.h"

#include <cstdint>
#include <string_view>

#include "distributed/json_text.h"
#include "distributed/safetensors.h"

namespace shardcheck {
namespace {

// Writes JSON values the way nlohmann's serializer does with indent 1.
class IndentedWriter {
 public:
  explicit IndentedWriter(std::string& out) : out_(out) {}

  void Indent(int level) { out_.append(static_cast<size_t>(level), ' '); }

  void String(std::string_view s) { AppendJsonString(out_, s); }

  template <typename Int>
  void Number(Int v) {
    AppendJsonInteger(out_, v);
  }

  // `"key": ` at `level`.
  void Key(int level, std::string_view key) {
    Indent(level);
    String(key);
    out_ += ": ";
  }

  // Opens a non-empty array or object whose members sit at `level` + 1;
  // Close ends it at `level`.
  void Open(char bracket) {
    out_ += bracket;
    out_ += '\n';
  }
  void Close(int level, char bracket) {
    out_ += '\n';
    Indent(level);
    out_ += bracket;
  }
  void Separator() { out_ += ",\n"; }

  template <typename Int>
  void NumberArray(int level, const Int* v, size_t n) {
    if (n == 0) {
      out_ += "[]";
      return;
    }
    Open('[');
    for (size_t i = 0; i < n; ++i) {
      if (i) Separator();
      Indent(level + 1);
      Number(v[i]);
    }
    Close(level, ']');
  }

 private:
  std::string& out_;
};

void AppendChunk(IndentedWriter& w, int level, const ChunkRecord& c) {
  const int in = level + 1;
  const uint64_t range[2] = {c.byte_begin, c.byte_end};
  w.Open('{');
  w.Key(in, "offset"), w.Number(c.offset), w.Separator();
  w.Key(in, "numel"), w.Number(c.numel), w.Separator();
  w.Key(in, "file"), w.String(c.file), w.Separator();
  w.Key(in, "name"), w.String(c.name), w.Separator();
  w.Key(in, "byte_range"), w.NumberArray(in, range, 2), w.Separator();
  w.Key(in, "xxh3"), w.String(c.xxh3);
  w.Close(level, '}');
}

void AppendTensor(IndentedWriter& w, int level, const TensorRecord& t) {
  w.Open('{');
  w.Key(level + 1, "dtype");
  w.String(SafetensorsDtype(t.dtype));
  w.Separator();
  w.Key(level + 1, "shape");
  w.NumberArray(level + 1, t.shape.data(), t.shape.size());
  w.Separator();
  w.Key(level + 1, "chunks");
  if (t.chunks.empty()) {
    w.NumberArray<int64_t>(level + 1, nullptr, 0);
  } else {
    w.Open('[');
    for (size_t i = 0; i < t.chunks.size(); ++i) {
      if (i) w.Separator();
      w.Indent(level + 2);
      AppendChunk(w, level + 2, t.chunks[i]);
    }
    w.Close(level + 1, ']');
  }
  w.Close(level, '}');
}

}  // namespace

void AppendTensorIndexText(const TensorTable& tensors, int level,
                           std::string& out) {
  IndentedWriter w(out);
  if (tensors.empty()) {
    out += "{}";
    return;
  }
  w.Open('{');
  bool first = true;
  for (const TensorRecord& t : tensors) {
    if (!first) w.Separator();
    first = false;
    w.Key(level + 1, t.key);
    AppendTensor(w, level + 1, t);
  }
  w.Close(level, '}');
}

size_t TensorIndexTextBound(const TensorTable& tensors, int level) {
  // Per line at most: the indentation, a quoted key of up to 12 bytes,
  // ": ", a number of up to 20 digits, ",\n". A chunk takes 11 lines (its
  // six fields, byte_range's two numbers and brackets), a tensor 6 lines
  // and one per dimension.
  const size_t line = static_cast<size_t>(level) + 6 + 14 + 2 + 21 + 2;
  size_t n = 8;
  for (const TensorRecord& t : tensors) {
    n += t.key.size() + line * (6 + t.shape.size());
    for (const ChunkRecord& c : t.chunks) n += c.file.size() + c.name.size() + c.xxh3.size() + 11 * line;
  }
  return n;
}

}  // namespace shardcheck
