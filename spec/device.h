// Where a run's tensors live: `--device cpu|cuda|auto` of `reference`,
// `train` and `run`. As with torchrun, a rank uses cuda:LOCAL_RANK and
// CUDA_VISIBLE_DEVICES is left to the user. Checkpoints are always written
// from host copies, and comparisons copy to the host.
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace shardcheck {

enum class DeviceKind { kCpu, kCuda, kAuto };

// "cpu", "cuda" or "auto"; throws Error naming `flag` and the accepted values.
DeviceKind ParseDeviceKind(const std::string& text, const std::string& flag = "--device");
std::string DeviceKindName(DeviceKind kind);

// Whether this shardcheck was built with CUDA and sees at least one device.
bool CudaUsable();

// The CUDA device index of the rank with local rank `local_rank`: the rank
// itself (torchrun's convention), or 0 when exactly one device is visible
// (a scheduler that binds one GPU per task, e.g. srun --gpus-per-task 1).
int CudaIndexFor(int local_rank);

// The device of a rank with local rank `local_rank`: cpu, or
// cuda:CudaIndexFor(local_rank) (kAuto: cuda when CudaUsable(), else cpu). Throws Error when cuda
// is asked for and is not usable (built without CUDA, or no device visible), or when local_rank is
// not a visible device (NCCL refuses two ranks on one GPU, so each rank needs its own). Resolving a
// CUDA device turns cuBLAS's TF32 off for the process (fp32 matmuls stay fp32).
at::Device ResolveDevice(DeviceKind kind, int local_rank = 0);

// A host copy of `t`, wherever it lives (always a copy, also of a CPU
// tensor): checkpoints, state dicts and final states are written from host
// memory.
inline at::Tensor HostCopy(const at::Tensor& t) {
  return t.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
}

// The communicator backend that goes with a device: "nccl" for CUDA, "gloo"
// for the CPU; an explicit `backend` other than "auto" is kept. "nccl"
// without a usable GPU, or with a CPU device, is an input error (Error).
std::string BackendFor(const at::Device& device, const std::string& backend);

}  // namespace shardcheck
