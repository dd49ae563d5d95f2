// The GPUs ctest gave a test through its resource allocation
// (`ctest --resource-spec-file`, tests with RESOURCE_GROUPS "gpus:1" or
// "N,gpus:1"): CTEST_RESOURCE_GROUP_COUNT, CTEST_RESOURCE_GROUP_<i> and
// CTEST_RESOURCE_GROUP_<i>_GPUS="id:<id>,slots:<n>[;id:...]".
#pragma once

#include <string>
#include <vector>

namespace shardcheck {

// The GPU ids of every resource group, in group order; empty when ctest
// allocated none. Throws Error naming the variable when one is malformed.
std::vector<std::string> CtestGpuIds();

// Makes the allocated GPUs the only visible ones (CUDA_VISIBLE_DEVICES, in
// group order, so group i is cuda:i) before CUDA starts; does nothing
// without an allocation. Call at the top of main.
void UseCtestGpus();

}  // namespace shardcheck
