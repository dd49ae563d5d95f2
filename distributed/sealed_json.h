// JSON text that carries its own checksum as its last member, so one
// flipped bit anywhere in a checkpoint's metadata.json (a digit of a
// hyperparameter included) is found before anything is read from it.
//
// A sealed text is an object serialized as `body` (ending in "\n}"), with
// that final "\n}" replaced by
//     ,\n "<member>": "<16 hex digits>"\n}\n
// where the digits are XXH3-64 of `body`'s bytes (docs/checkpoint-format.md).
// It stays ordinary JSON: any reader may ignore the member.
#pragma once

#include <string>

namespace shardcheck {

inline constexpr const char* kSealMember = "metadata_xxh3";

// `body`: a JSON object as nlohmann's dump(1) writes it (ends in "\n}");
// sealed in place (pass a temporary to avoid a copy).
std::string SealJson(std::string body);

// What Unseal found.
enum class SealState { kAbsent, kVerified };

// Checks `text`'s seal. Returns kAbsent when the text does not end in a seal
// member (older files; the caller decides whether that is allowed) and
// kVerified when it does and the checksum matches. Throws Error naming
// `path` when the checksum does not match.
SealState CheckSeal(const std::string& text, const std::string& path);

}  // namespace shardcheck
