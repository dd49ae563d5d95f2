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

std::string SealJson(const std::string& body) {
  if (body.size() < 2 || body.compare(body.size() - 2, 2, "\n}") != 0)
    throw Error("internal: sealed JSON body must end in \"\\n}\"");
  return body.substr(0, body.size() - 2) + SealPrefix() + Xxh3Hex(body.data(), body.size()) +
         kSealEnd;
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
  const std::string body = text.substr(0, at) + "\n}";
  const std::string computed = Xxh3Hex(body.data(), body.size());
  if (stored != computed)
    throw Error(path + ": checksum mismatch (" + kSealMember + " " + stored +
                ", content hashes to " + computed + "): the file is corrupt");
  return SealState::kVerified;
}

}  // namespace shardcheck
