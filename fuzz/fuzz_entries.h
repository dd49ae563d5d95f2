// The inputs the fuzz targets feed to shardcheck's parsers, one function
// per target. Each takes arbitrary bytes and returns normally when the
// parser accepted them or refused them with shardcheck's Error (or
// ScenarioError); anything else (a crash, a sanitizer report, another
// exception escaping) is a bug. The libFuzzer mains (fuzz/*_fuzz.cc, built
// by ci/fuzz with clang) and the regression test over the checked-in
// corpora (fuzz/fuzz_corpus_test.cc, ctest) call the same functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shardcheck {

// A safetensors file: 8-byte length N, N bytes of header JSON, data.
void FuzzSafetensorsHeader(const uint8_t* data, size_t size);

// A checkpoint's metadata.json. The first byte chooses: even, the text as
// it is (the checksum seal catches almost every change); odd, the rest is
// sealed first as a writer would seal it, so the fields behind the seal
// are explored too.
void FuzzCheckpointMetadata(const uint8_t* data, size_t size);

// A scenario file.
void FuzzScenario(const uint8_t* data, size_t size);

// The command line's value parsers. The first byte chooses the parser
// (--shapes, a hyperparameter of the registry chosen by the second byte,
// --sharding-type, --device); the rest is the text.
void FuzzCliValues(const uint8_t* data, size_t size);

}  // namespace shardcheck
