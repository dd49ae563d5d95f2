// The optimizer registry: one entry per optimizer kind, holding its spec
// (name, state schema, hyperparameters, placement, traits) and its fused
// kernel (elementwise or whole-param). The built-in entries are the headers
// of optimizers/, registered through a list that CMake generates from that
// folder; tests may register test-only kinds before they use the registry.
// The reference updates have a registry of their own in reference/.
//
// Registration is not thread-safe: it happens at start-up, before any
// thread reads. Reads are safe from any thread afterwards. Entries live
// for the whole process, so pointers and references to them stay valid.
#pragma once

#include <string>
#include <vector>

#include "spec/kernel_interface.h"
#include "spec/optimizer_spec.h"

namespace shardcheck {

struct OptimizerEntry {
  OptimizerSpec spec;
  ElementwiseKernel elementwise;           // placement elementwise
  WholeParamKernel whole_param = nullptr;  // placement whole-param
};

// Every registered kind: built-in kinds sorted by name, then test-only
// kinds in registration order.
const std::vector<const OptimizerEntry*>& Optimizers();
// Throws Error "unknown optimizer kind 'x' (expected adam, adamw, ...)".
const OptimizerEntry& FindOptimizer(const std::string& kind);
const OptimizerEntry* TryFindOptimizer(const std::string& kind);
// The registered kinds' names, comma-separated, for messages.
std::string OptimizerKindList();

// Adds a kind. Throws Error on a duplicate name, a schema whose key count
// does not match the kernel, a missing kernel for the placement, or
// hyperparameter defaults outside their ranges.
void RegisterOptimizer(OptimizerEntry entry);

// Defined in the list CMake generates from optimizers/*.h: registers every
// built-in kind. Called once, by the first use of the registry.
void RegisterBuiltinOptimizers();

}  // namespace shardcheck

// Opens the registration function of one optimizers/ header:
//   SHARDCHECK_REGISTER_OPTIMIZERS(adam) { RegisterOptimizer(...); }
// The generated list includes the header and calls RegisterOptimizersOf_adam().
#define SHARDCHECK_REGISTER_OPTIMIZERS(file) inline void RegisterOptimizersOf_##file()
