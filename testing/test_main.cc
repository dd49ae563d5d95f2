// The main of every shardcheck test binary: registers the test-only
// optimizer kinds (so every registry-driven test table covers them), then
// runs gtest. `--shardcheck-list-setups=FILE` writes the named setups this
// binary's tables run, one per line, and exits: CMake groups the big
// registry-driven tables into one ctest test per setup with it. Under
// `ctest --resource-spec-file`, the GPUs ctest allocated become the visible
// ones (testing/ctest_resources.h).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "spec/config.h"
#include "testing/ctest_resources.h"
#include "testing/test_only_optimizers.h"

int main(int argc, char** argv) {
  shardcheck::UseCtestGpus();
  shardcheck::RegisterTestOnlyOptimizers();
  const char* kList = "--shardcheck-list-setups=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], kList, std::strlen(kList)) != 0) continue;
    std::ofstream out(argv[i] + std::strlen(kList));
    for (const auto& name : shardcheck::OptimizerSetup::Names()) out << name << "\n";
    return out ? 0 : 1;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
