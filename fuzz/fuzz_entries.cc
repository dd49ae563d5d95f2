#include "fuzz/fuzz_entries.h"

#include <string>

#include "distributed/checkpoint_format.h"
#include "distributed/safetensors.h"
#include "distributed/sealed_json.h"
#include "harness/matrix/scenario.h"
#include "spec/device.h"
#include "spec/error.h"
#include "spec/hyperparams.h"
#include "spec/setup_request.h"
#include "testing/model_spec.h"

namespace shardcheck {

namespace {

std::string Text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Runs `parse`, accepting only shardcheck's own refusals.
template <typename F>
void Refusable(F&& parse) {
  try {
    parse();
  } catch (const Error&) {
  }
}

}  // namespace

void FuzzSafetensorsHeader(const uint8_t* data, size_t size) {
  if (size < 8) return;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  const size_t json = n <= size - 8 ? static_cast<size_t>(n) : size - 8;
  Refusable([&] { ParseSafetensorsHeader("fuzz.safetensors", Text(data + 8, json), size); });
}

void FuzzCheckpointMetadata(const uint8_t* data, size_t size) {
  if (size < 1) return;
  std::string text = Text(data + 1, size - 1);
  if (data[0] % 2 == 1) {
    if (text.size() < 2 || text.compare(text.size() - 2, 2, "\n}") != 0) return;
    text = SealJson(text);
  }
  Refusable([&] { ParseMetadataText(text, "fuzz/metadata.json"); });
}

void FuzzScenario(const uint8_t* data, size_t size) {
  Refusable([&] { ParseScenario(Text(data, size), "fuzz.yaml"); });
}

void FuzzCliValues(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const std::string text = Text(data + 2, size - 2);
  switch (data[0] % 4) {
    case 0:
      Refusable([&] { ParseShapes(text); });
      break;
    case 1: {
      const std::vector<DeclaredHyperParam> all = AllDeclaredHyperParams();
      if (all.empty()) return;
      const HyperParamSpec& spec = *all[data[1] % all.size()].spec;
      Refusable([&] { ParseHyperValue(spec, text); });
      break;
    }
    case 2:
      Refusable([&] { ParseShardingType(text); });
      break;
    case 3:
      Refusable([&] { ParseDeviceKind(text); });
      break;
  }
}

}  // namespace shardcheck
