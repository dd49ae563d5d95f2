#include "spec/device.h"

#include "spec/error.h"

namespace shardcheck {

DeviceKind ParseDeviceKind(const std::string& text, const std::string& flag) {
  if (text == "cpu") return DeviceKind::kCpu;
  if (text == "cuda") return DeviceKind::kCuda;
  if (text == "auto") return DeviceKind::kAuto;
  throw Error(flag + " '" + text + "': expected cpu, cuda or auto");
}

std::string DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kCuda:
      return "cuda";
    case DeviceKind::kAuto:
      return "auto";
  }
  return "?";
}

bool CudaUsable() { return at::hasCUDA() && at::getNumGPUs() > 0; }

int CudaIndexFor(int local_rank) { return at::hasCUDA() && at::getNumGPUs() == 1 ? 0 : local_rank; }

at::Device ResolveDevice(DeviceKind kind, int local_rank) {
  if (kind == DeviceKind::kCpu || (kind == DeviceKind::kAuto && !CudaUsable()))
    return at::Device(at::kCPU);
#ifndef SHARDCHECK_BUILT_WITH_CUDA
  throw Error(
      "--device cuda: this shardcheck has no CUDA (the default build is CPU only; build the cuda "
      "preset with ci/setup-cuda, docs/gpu.md)");
#endif
  if (!at::hasCUDA())
    throw Error("--device cuda: no CUDA driver or device is visible on this machine");
  const int visible = static_cast<int>(at::getNumGPUs());
  if (visible == 0) throw Error("--device cuda: no CUDA device is visible on this machine");
  const int index = CudaIndexFor(local_rank);
  if (index < 0 || index >= visible)
    throw Error("--device cuda: local rank " + std::to_string(local_rank) +
                " needs cuda:" + std::to_string(local_rank) + ", but " + std::to_string(visible) +
                " device(s) are visible (one GPU per rank: NCCL refuses two ranks on one GPU)");
  // Newton-Schulz's fp32 matmuls must be fp32 on cuBLAS too: TF32 would
  // round their inputs to 10 mantissa bits.
  at::globalContext().setAllowTF32CuBLAS(false);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
}

std::string BackendFor(const at::Device& device, const std::string& backend) {
  if (backend == "nccl" && !CudaUsable())
    throw Error(
        "--backend nccl: this build or machine has no usable CUDA GPU, and NCCL runs between "
        "GPUs (use --backend gloo on the CPU)");
  if (backend == "nccl" && !device.is_cuda())
    throw Error("--backend nccl needs --device cuda: NCCL moves CUDA tensors, and this run's are "
                "on the CPU (use --backend gloo)");
  if (backend != "auto") return backend;
  return device.is_cuda() ? "nccl" : "gloo";
}

}  // namespace shardcheck
