// gpu_kernel_bandwidth: every elementwise kind's fused CUDA kernel against a
// device-to-device copy, in one process on one GPU (built by the cuda
// preset; run by ci/gpu-check).
//
// For each kind, on N fp32 elements (default 64M) with a bf16 model
// write-back: the kernel moves (2 + states) x 4 bytes read, (1 + states) x 4
// written and 2 written for the bf16 param; a cudaMemcpyAsync of B bytes
// moves 2B. Each figure is the median of --reps timed launches (CUDA
// events) after one warm-up. Prints one JSON object per line:
//   {"kind": "adamw", "numel": N, "kernel_ms": ..., "kernel_gbps": ...,
//    "copy_gbps": ..., "fraction_of_copy": ...}
// Usage: gpu_kernel_bandwidth [--numel N] [--reps R]
#include <ATen/ATen.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "spec/config.h"
#include "spec/registry.h"

namespace shardcheck {
namespace {

void Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "gpu_kernel_bandwidth: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(3);
}

// Median milliseconds of `reps` timed calls of `fn` after one warm-up.
template <class Fn>
double MedianMs(int reps, Fn fn) {
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  fn();
  Check(cudaDeviceSynchronize(), "warm-up");
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    Check(cudaEventRecord(start, nullptr), "cudaEventRecord");
    fn();
    Check(cudaEventRecord(stop, nullptr), "cudaEventRecord");
    Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    Check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int Main(int argc, char** argv) {
  int64_t n = int64_t{64} << 20;
  int reps = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--numel")) n = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  if (!at::hasCUDA() || at::getNumGPUs() == 0) {
    std::fprintf(stderr, "gpu_kernel_bandwidth: no CUDA device\n");
    return 3;
  }
  const at::TensorOptions f32 = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  for (const OptimizerEntry* e : Optimizers()) {
    if (e->spec.placement != Placement::kElementwise || !e->elementwise.run_cuda) continue;
    const int states = e->elementwise.state_count;
    at::Tensor p = at::randn({n}, f32), g = at::randn({n}, f32) * 1e-3;
    std::vector<at::Tensor> st;
    for (int k = 0; k < states; ++k) st.push_back(at::zeros({n}, f32));
    at::Tensor model = at::zeros({n}, f32.dtype(at::kBFloat16));
    OptimizerConfig c = OptimizerConfig::Defaults(e->spec.name);
    ScalarBlock scalars;
    e->elementwise.prepare({&c, 1, c.lr(), c.weight_decay()}, scalars);
    ElementwiseSpan span;
    span.numel = n;
    span.main = p.data_ptr<float>();
    span.grad = g.data_ptr<float>();
    for (int k = 0; k < states; ++k) span.state[k] = st[static_cast<size_t>(k)].data_ptr<float>();
    span.model_bf16 = reinterpret_cast<uint16_t*>(model.data_ptr<at::BFloat16>());
    const double kernel_ms =
        MedianMs(reps, [&] { e->elementwise.run_cuda(scalars, span, nullptr); });
    const double bytes = static_cast<double>(n) * ((2 + states) * 4 + (1 + states) * 4 + 2);
    // A copy that moves the same bytes: read B, write B.
    const size_t copy_bytes = static_cast<size_t>(bytes / 2);
    at::Tensor src = at::empty({static_cast<int64_t>(copy_bytes)}, f32.dtype(at::kByte));
    at::Tensor dst = at::empty_like(src);
    const double copy_ms = MedianMs(reps, [&] {
      Check(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), copy_bytes, cudaMemcpyDeviceToDevice,
                            nullptr),
            "cudaMemcpyAsync");
    });
    const double kernel_gbps = bytes / kernel_ms / 1e6,
                 copy_gbps = 2.0 * copy_bytes / copy_ms / 1e6;
    std::printf(
        "{\"kind\": \"%s\", \"numel\": %lld, \"kernel_ms\": %.4f, \"kernel_gbps\": %.1f, "
        "\"copy_ms\": %.4f, \"copy_gbps\": %.1f, \"fraction_of_copy\": %.3f}\n",
        e->spec.name.c_str(), static_cast<long long>(n), kernel_ms, kernel_gbps, copy_ms, copy_gbps,
        kernel_gbps / copy_gbps);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace shardcheck

int main(int argc, char** argv) { return shardcheck::Main(argc, argv); }
