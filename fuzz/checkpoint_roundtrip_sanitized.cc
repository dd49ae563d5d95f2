// The checkpoint code under ASan and UBSan (built by fuzz/CMakeLists.txt,
// run by ci/fuzz): for every sharding type, a DistributedOptimizer of two
// ranks (threads) takes two steps of Muon + AdamW on mixed-small and saves;
// three ranks load it, take nothing and save again; the two checkpoints'
// model-space states must be byte-identical. The save, load, resharding and
// read paths (distributed/) are instrumented; the optimizer's kernels come
// from the default build's libraries.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "distributed/checkpoint.h"
#include "distributed/communicator_local.h"
#include "spec/error.h"
#include "testing/model_spec.h"
#include "testing/oracle.h"

namespace shardcheck {
namespace {

namespace fs = std::filesystem;

void Rethrow(const std::vector<std::exception_ptr>& errors) {
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void SaveAfterTwoSteps(const ModelSpec& model, const std::string& dir, ShardingType type) {
  Rethrow(RunRanksInProcess(2, std::chrono::seconds(60), [&](Communicator& comm) {
    DistributedOptimizer opt(OptimizerSetup::Defaults("muon_adam"), model.params, at::kBFloat16,
                             comm, {/*bucket_size=*/1000});
    std::vector<at::Tensor> init;
    for (size_t i = 0; i < model.params.size(); ++i)
      init.push_back(GlobalGrad(7, 0, i, model.params[i].shape, 1).to(at::kBFloat16));
    opt.SetParams(init);
    for (uint64_t step = 1; step <= 2; ++step) {
      opt.ZeroGrad();
      for (size_t i = 0; i < model.params.size(); ++i)
        opt.Grad(static_cast<int>(i)).copy_(GlobalGrad(7, step, i, model.params[i].shape, 24));
      opt.Step();
    }
    SaveCheckpoint(opt, dir, type);
  }));
}

void ReshardToThree(const ModelSpec& model, const std::string& from, const std::string& to,
                    ShardingType type) {
  Rethrow(RunRanksInProcess(3, std::chrono::seconds(60), [&](Communicator& comm) {
    DistributedOptimizer opt(OptimizerSetup::Defaults("muon_adam"), model.params, at::kBFloat16,
                             comm, {/*bucket_size=*/1000});
    LoadCheckpoint(opt, from);
    SaveCheckpoint(opt, to, type);
  }));
}

bool SameBytes(const StateDict& a, const StateDict& b) {
  if (a.step != b.step || a.tensors.size() != b.tensors.size()) return false;
  for (const auto& [key, t] : a.tensors) {
    auto it = b.tensors.find(key);
    if (it == b.tensors.end() || t.scalar_type() != it->second.scalar_type() ||
        t.sizes() != it->second.sizes() ||
        !at::equal(t.contiguous().view(at::kByte), it->second.contiguous().view(at::kByte)))
      return false;
  }
  return true;
}

}  // namespace
}  // namespace shardcheck

int main() {
  using namespace shardcheck;
  const fs::path root =
      fs::temp_directory_path() / ("shardcheck_sanitized_" + std::to_string(::getpid()));
  const ModelSpec model = MixedSmallSpec();
  int failed = 0;
  for (ShardingType type : AllShardingTypes()) {
    const std::string name = ShardingTypeName(type);
    const std::string a = (root / name / "dp2").string(), b = (root / name / "dp3").string();
    try {
      SaveAfterTwoSteps(model, a, type);
      ReshardToThree(model, a, b, type);
      CheckpointReader ra(a), rb(b);
      const bool same = SameBytes(ReadModelSpace(ra), ReadModelSpace(rb));
      std::printf("%-26s dp 2 -> 3: %s\n", name.c_str(), same ? "byte-identical" : "DIFFERENT");
      failed += same ? 0 : 1;
    } catch (const std::exception& e) {
      std::printf("%-26s error: %s\n", name.c_str(), e.what());
      ++failed;
    }
  }
  fs::remove_all(root);
  std::printf("sanitized round trip: %d of 4 sharding types byte-identical after dp 2 -> 3\n",
              4 - failed);
  return failed ? 1 : 0;
}
