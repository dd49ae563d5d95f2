// Helpers shared by the kernel tests (header-only; tests only).
#pragma once

#include <ATen/ATen.h>

#include <cstring>
#include <string>
#include <vector>

#include "spec/registry.h"

namespace shardcheck {

// Same shape, dtype and bytes: bitwise equality of every element.
inline bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0;
}

// The registry's elementwise kinds, in registry order.
inline std::vector<std::string> ElementwiseKinds() {
  std::vector<std::string> out;
  for (const OptimizerEntry* e : Optimizers())
    if (e->spec.placement == Placement::kElementwise) out.push_back(e->spec.name);
  return out;
}

}  // namespace shardcheck
