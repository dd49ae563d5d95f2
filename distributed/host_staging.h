// Large host buffers that are written once right after they are allocated:
// a load's staged chunks, a save's shards, the in-process communicator's
// copies. On the machines measured (docs/performance.md, "Checkpoint save
// and load") the first touch of freshly mapped 4 KiB pages runs at about a
// tenth of memory bandwidth; asking for transparent huge pages cuts the
// page faults 512-fold.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace shardcheck {

// An uninitialised CPU tensor of `numel` elements (1-D), with
// MADV_HUGEPAGE asked for on the 2 MiB-aligned part of a buffer of at
// least 4 MiB (advisory: where the kernel's transparent huge pages are
// off, an ordinary buffer).
at::Tensor EmptyHostStaging(int64_t numel, c10::ScalarType dtype);

// A contiguous CPU copy of `t` (any device) in such a buffer, in t's shape.
at::Tensor HostStagingCopy(const at::Tensor& t);

}  // namespace shardcheck
