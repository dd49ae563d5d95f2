// The optimizers on a GPU (label `gpu`):
//  - the reference on CUDA tensors is bitwise equal to the reference on the
//    CPU for every elementwise kind (fp32 and bf16 models, weight decay and
//    clipping on): every op is the same IEEE op on both devices;
//  - the sharded DistributedOptimizer on CUDA tensors (ranks as threads on
//    one GPU, the in-process double of NCCL) is bitwise equal to the GPU
//    reference for every setup, Muon's Newton-Schulz on cuBLAS included,
//    at dp 1, 2 and 3;
//  - Muon on the GPU against Muon on the CPU: different matmul kernels, so a
//    tolerance, measured and printed ("[ figures ]" lines).
// Each test reports skipped with the reason where shardcheck is built
// without CUDA or the machine has no CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>

#include "harness/cell/oracle_run.h"
#include "harness/cell/thread_ranks.h"
#include "spec/device.h"
#include "spec/registry.h"

namespace shardcheck {
namespace {

#ifdef SHARDCHECK_BUILT_WITH_CUDA
#define SKIP_WITHOUT_CUDA() \
  if (!CudaUsable()) GTEST_SKIP() << "no CUDA device on this machine"
#else
#define SKIP_WITHOUT_CUDA()                                                                \
  GTEST_SKIP() << "shardcheck was built without CUDA (the default build): build the cuda " \
                  "preset (ci/setup-cuda)"
#endif

// Every named setup whose kinds this build can launch on CUDA (the
// test-only kinds register a CPU loop alone); every setup where CUDA is
// absent, so that each reports skipped.
std::vector<std::string> CudaSetups() {
  std::vector<std::string> out;
  for (const std::string& name : OptimizerSetup::Names()) {
    bool launchable = true;
    // Named: a temporary setup would die before the loop reads its children.
    const OptimizerSetup defaults = OptimizerSetup::Defaults(name);
    for (const OptimizerConfig* c : defaults.Children()) {
      const OptimizerEntry& e = FindOptimizer(c->kind());
      if (e.spec.placement == Placement::kElementwise && e.elementwise.run_cuda == nullptr)
        launchable = false;
    }
    if (launchable || !at::hasCUDA()) out.push_back(name);
  }
  return out;
}

// Model with biases, norms, a 7-element param, 2-D hidden weights,
// embedding and output.
ModelSpec GpuModel() {
  return ParseShapes(
      "emb=96x32:embedding,qkv=96x32,qkv_b=96,proj=32x32,tiny=7,fc1=128x32,"
      "fc1_b=128,fc2=32x128,norm=32,head=96x32:output");
}

OracleRunOptions GpuRun(const std::string& setup, c10::ScalarType dtype, at::Device device) {
  OracleRunOptions o;
  o.model = GpuModel();
  o.setup = OptimizerSetup::Defaults(setup);
  o.setup.main.Set("weight_decay", 0.05);
  if (o.setup.scalar) o.setup.scalar->Set("weight_decay", 0.05);
  o.setup.max_grad_norm = 0.5;  // the oracle's norms are about 1: clipping is on
  o.steps = 5;
  o.seed = 91;
  o.dtype = dtype;
  o.device = device;
  return o;
}

// Names of the tensors whose bytes differ between two host state dicts.
std::vector<std::string> Differing(const StateDict& a, const StateDict& b) {
  std::vector<std::string> out;
  for (const auto& [key, t] : a.tensors) {
    auto it = b.tensors.find(key);
    const at::Tensor x = t.contiguous();
    if (it == b.tensors.end() || it->second.sizes() != x.sizes() ||
        it->second.scalar_type() != x.scalar_type()) {
      out.push_back(key + " (missing or other shape/dtype)");
      continue;
    }
    const at::Tensor y = it->second.contiguous();
    if (std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) != 0)
      out.push_back(key);
  }
  return out;
}

class ReferenceOnCuda : public testing::TestWithParam<std::tuple<std::string, c10::ScalarType>> {};

TEST_P(ReferenceOnCuda, BitwiseEqualToTheCpuReference) {
  SKIP_WITHOUT_CUDA();
  const auto [kind, dtype] = GetParam();
  const StateDict cpu = RunReferenceOnOracle(GpuRun(kind, dtype, at::kCPU)).GetStateDict();
  const ReferenceOptimizer gpu_opt =
      RunReferenceOnOracle(GpuRun(kind, dtype, ResolveDevice(DeviceKind::kCuda, 0)));
  ASSERT_TRUE(gpu_opt.main_params()[0].is_cuda());
  const std::vector<std::string> bad = Differing(gpu_opt.GetStateDict(), cpu);
  EXPECT_TRUE(bad.empty()) << bad.size() << " tensors differ, first " << bad.front();
}

INSTANTIATE_TEST_SUITE_P(Registry, ReferenceOnCuda,
                         testing::Combine(testing::ValuesIn(OptimizerSetup::ElementwiseNames()),
                                          testing::Values(at::kFloat, at::kBFloat16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) == at::kFloat ? "_fp32" : "_bf16");
                         });

class ShardedOnCuda : public testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ShardedOnCuda, BitwiseEqualToTheGpuReferenceEveryStep) {
  SKIP_WITHOUT_CUDA();
  const auto [setup, dp] = GetParam();
  TrainOptions t;
  t.run = GpuRun(setup, at::kBFloat16, ResolveDevice(DeviceKind::kCuda, 0));
  t.bucket_size = 1500;
  t.compare_reference = true;
  const ThreadRun run = RunTrainOnThreads(t, dp, std::chrono::seconds(120));
  for (const auto& e : run.errors) ADD_FAILURE() << e;
  ASSERT_EQ(run.root.steps.size(), 5u);
  EXPECT_TRUE(run.root.ok) << (run.root.first_mismatch ? run.root.first_mismatch->detail : "");
  for (const auto& s : run.root.steps)
    for (const auto& g : s.groups) EXPECT_EQ(g.mismatches, 0) << g.group << " step " << s.step;
}

INSTANTIATE_TEST_SUITE_P(Setups, ShardedOnCuda,
                         testing::Combine(testing::ValuesIn(CudaSetups()),
                                          testing::Values(1, 2, 3)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_dp" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Muon: cuBLAS and the CPU's GEMM add in other orders, so the GPU run is
// compared with the CPU one within a tolerance. The bound is on the fp32
// main params after 5 steps, relative to the largest |param|; the figure
// is printed for docs/gpu.md.
TEST(MuonOnCuda, WithinToleranceOfTheCpuReference) {
  SKIP_WITHOUT_CUDA();
  for (const std::string& setup : OptimizerSetup::Names()) {
    if (!OptimizerSetup::Defaults(setup).NeedsMatrix()) continue;
    const StateDict cpu = RunReferenceOnOracle(GpuRun(setup, at::kFloat, at::kCPU)).GetStateDict();
    const StateDict gpu =
        RunReferenceOnOracle(GpuRun(setup, at::kFloat, ResolveDevice(DeviceKind::kCuda, 0)))
            .GetStateDict();
    double max_abs = 0.0, max_ref = 0.0;
    for (const auto& [key, t] : cpu.tensors) {
      if (key.rfind("param.", 0) != 0) continue;
      const at::Tensor a = t.to(at::kDouble), b = gpu.tensors.at(key).to(at::kDouble);
      max_abs = std::max(max_abs, (a - b).abs().max().item<double>());
      max_ref = std::max(max_ref, a.abs().max().item<double>());
    }
    const double rel = max_abs / max_ref;
    std::cout << "[ figures ] " << setup << " GPU vs CPU after 5 steps: params max |diff| "
              << max_abs << ", relative to max |param| " << rel << "\n";
    EXPECT_LT(rel, 1e-5) << setup;
  }
}

}  // namespace
}  // namespace shardcheck
