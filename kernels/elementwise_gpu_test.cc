// Every elementwise kind's CUDA launch against its CPU loop, bitwise, on the
// same inputs: params, every state tensor and the bf16 model write-back,
// over several steps (label `gpu`). Where shardcheck is built without CUDA,
// or the machine has no CUDA device, each test reports skipped with the
// reason. SHARDCHECK_GPU_TEST_NUMEL sets the size (default 1M + 3, a size
// that leaves a partial block).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "spec/config.h"
#include "spec/registry.h"
#include "testing/oracle.h"

#ifdef SHARDCHECK_BUILT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace shardcheck {
namespace {

#ifdef SHARDCHECK_BUILT_WITH_CUDA
int64_t Numel() {
  const char* env = std::getenv("SHARDCHECK_GPU_TEST_NUMEL");
  return env ? std::atoll(env) : (int64_t{1} << 20) + 3;
}

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}
#endif

class CudaKernel : public testing::TestWithParam<std::string> {};

TEST_P(CudaKernel, BitwiseEqualToTheCpuLoop) {
#ifndef SHARDCHECK_BUILT_WITH_CUDA
  GTEST_SKIP() << "shardcheck was built without CUDA (the default build): build the cuda preset "
                  "(ci/setup-cuda)";
#else
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device on this machine";
  const OptimizerEntry& entry = FindOptimizer(GetParam());
  ASSERT_NE(entry.elementwise.run_cuda, nullptr) << GetParam() << " has no CUDA launch";
  OptimizerConfig c = OptimizerConfig::Defaults(GetParam());
  c.Set("weight_decay", 0.05);
  const int64_t n = Numel();
  const size_t keys = entry.spec.schema.keys.size();
  at::Tensor p = InitialParam(17, 0, {n}, at::kFloat);
  at::Tensor dp = p.cuda();
  std::vector<at::Tensor> st(keys), dst(keys);
  for (size_t k = 0; k < keys; ++k) {
    st[k] = at::zeros({n});
    dst[k] = at::zeros({n}, at::kCUDA);
  }
  at::Tensor model = at::zeros({n}, at::kBFloat16),
             dmodel = at::zeros({n}, at::TensorOptions(at::kCUDA).dtype(at::kBFloat16));
  for (int64_t t = 1; t <= 4; ++t) {
    const at::Tensor g = GlobalGrad(17, static_cast<uint64_t>(t), 0, {n}, 24);
    const at::Tensor dg = g.cuda();
    ScalarBlock scalars;
    entry.elementwise.prepare({&c, t, c.lr() * 0.75, c.weight_decay()}, scalars);
    ElementwiseSpan cpu, gpu;
    cpu.numel = gpu.numel = n;
    cpu.main = p.data_ptr<float>();
    gpu.main = dp.data_ptr<float>();
    cpu.grad = g.data_ptr<float>();
    gpu.grad = dg.data_ptr<float>();
    for (size_t k = 0; k < keys; ++k) {
      cpu.state[k] = st[k].data_ptr<float>();
      gpu.state[k] = dst[k].data_ptr<float>();
    }
    cpu.model_bf16 = reinterpret_cast<uint16_t*>(model.data_ptr<at::BFloat16>());
    gpu.model_bf16 = reinterpret_cast<uint16_t*>(dmodel.data_ptr<at::BFloat16>());
    entry.elementwise.run_cpu(scalars, cpu);
    entry.elementwise.run_cuda(scalars, gpu, at::cuda::getCurrentCUDAStream().stream());
    ASSERT_TRUE(SameBytes(dp, p)) << GetParam() << ": params differ at step " << t;
    for (size_t k = 0; k < keys; ++k)
      ASSERT_TRUE(SameBytes(dst[k], st[k]))
          << GetParam() << ": " << entry.spec.schema.keys[k].name << " step " << t;
    ASSERT_TRUE(SameBytes(dmodel, model)) << GetParam() << ": bf16 write-back at step " << t;
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Registry, CudaKernel,
                         testing::ValuesIn(OptimizerSetup::ElementwiseNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace shardcheck
