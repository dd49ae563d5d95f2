#include "distributed/sealed_json.h"

#include <cctype>

#include "distributed/checkpoint_format.h"
#include "spec/error.h"

namespace shardcheck {

namespace {

std::string SealPrefix() { return std::string(",\n \"") + kSealMember + "\": \""; }
constexpr const char* kSealEnd = "\"\n}\n";
constexpr size_t kDigits = 16;

}  // namespace

std::string SealJson(std::string body) {
  if (body.size() < 2 || body.compare(body.size() - 2, 2, "\n}") != 0)
    throw Error("internal: sealed JSON body must end in \"\\n}\"");
  // In place: a metadata.json of 100k tensors is tens of megabytes.
  const std::string digits = Xxh3Hex(body.data(), body.size());
  body.resize(body.size() - 2);
  body += SealPrefix();
  body += digits;
  body += kSealEnd;
  return body;
}

SealState CheckSeal(const std::string& text, const std::string& path) {
  const std::string prefix = SealPrefix();
  const size_t tail = prefix.size() + kDigits + std::char_traits<char>::length(kSealEnd);
  if (text.size() < tail) return SealState::kAbsent;
  const size_t at = text.size() - tail;
  if (text.compare(at, prefix.size(), prefix) != 0 ||
      text.compare(text.size() - std::char_traits<char>::length(kSealEnd), std::string::npos,
                   kSealEnd) != 0)
    return SealState::kAbsent;
  const std::string stored = text.substr(at + prefix.size(), kDigits);
  // The body is text[0, at) followed by "\n}": hashed in two pieces, not copied.
  Xxh3Stream body;
  body.Update(text.data(), at);
  body.Update("\n}", 2);
  const std::string computed = body.Hex();
  if (stored != computed)
    throw Error(path + ": checksum mismatch (" + kSealMember + " " + stored +
                ", content hashes to " + computed + "): the file is corrupt");
  return SealState::kVerified;
}

}  // namespace shardcheck
