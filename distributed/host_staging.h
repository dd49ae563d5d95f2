// Large host buffers that are written once right after they are allocated:
// a load's staged chunks, a save's shards, the in-process communicator's
// copies. One place decides how they are allocated. On the machines
// measured (docs/performance.md, "The checkpoint I/O changes of
// 2026-12-07"; `build/shardcheck_bench --benchmark_filter=^host_staging`)
// the first touch of fresh 4 KiB pages runs at about a tenth of memory
// bandwidth, and asking for transparent huge pages (MADV_HUGEPAGE) was
// faster on an idle machine but several times slower under memory
// pressure (the kernel compacts memory on the fault), so these are
// ordinary allocations.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace shardcheck {

// An uninitialised 1-D CPU tensor of `numel` elements.
at::Tensor EmptyHostStaging(int64_t numel, c10::ScalarType dtype);

// A contiguous CPU copy of `t` (any device), in t's shape.
at::Tensor HostStagingCopy(const at::Tensor& t);

}  // namespace shardcheck
