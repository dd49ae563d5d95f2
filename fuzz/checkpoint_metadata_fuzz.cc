// libFuzzer target: FuzzCheckpointMetadata (fuzz/fuzz_entries.h). Built and run by ci/fuzz.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  shardcheck::FuzzCheckpointMetadata(data, size);
  return 0;
}
