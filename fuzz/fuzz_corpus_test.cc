// ctest fuzz.corpus: every checked-in input of every fuzz target (the seed
// corpora fuzz/corpus/<target>/ and the inputs that once crashed,
// fuzz/regressions/<target>/) through the same entry points as the fuzz
// targets, in the normal build. A crash, a sanitizer report (asan preset)
// or an exception other than shardcheck's Error fails it.
//
// Usage: fuzz_corpus_test FUZZ_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "fuzz/fuzz_entries.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FUZZ_DIR\n", argv[0]);
    return 2;
  }
  using Entry = void (*)(const uint8_t*, size_t);
  const std::map<std::string, Entry> targets = {
      {"safetensors_header", shardcheck::FuzzSafetensorsHeader},
      {"checkpoint_metadata", shardcheck::FuzzCheckpointMetadata},
      {"scenario", shardcheck::FuzzScenario},
      {"cli_values", shardcheck::FuzzCliValues}};
  int total = 0;
  for (const auto& [name, entry] : targets) {
    int n = 0;
    for (const char* kind : {"corpus", "regressions"}) {
      const fs::path dir = fs::path(argv[1]) / kind / name;
      if (!fs::is_directory(dir)) continue;
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file()) files.push_back(e.path());
      for (const fs::path& f : files) {
        std::ifstream in(f, std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
        entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
        ++n;
      }
    }
    if (n == 0) {
      std::fprintf(stderr, "fuzz.corpus: no inputs for target %s under %s\n", name.c_str(),
                   argv[1]);
      return 1;
    }
    std::printf("%-20s %4d inputs ok\n", name.c_str(), n);
    total += n;
  }
  std::printf("fuzz.corpus: %d inputs of 4 targets parsed or refused cleanly\n", total);
  return 0;
}
