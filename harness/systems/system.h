// The system under test of a scenario cell (docs/systems.md): shardcheck's
// own C++ DistributedOptimizer, or an external system driven through an
// adapter process per rank (PyTorch FSDP2 + DCP today). A scenario names
// one as `system: <name>[+<variant>]` (`torch-fsdp2`, `torch-fsdp2+fused`);
// the table behind these functions says what each system can run, so a
// combination it lacks is reported with the reason instead of being run.
#pragma once

#include <string>
#include <vector>

#include "distributed/checkpoint_format.h"
#include "spec/config.h"

namespace shardcheck {

enum class SystemKind { kShardcheck, kTorchFsdp2 };

struct SystemSpec {
  SystemKind kind = SystemKind::kShardcheck;
  // The implementation the system's optimizer uses, where it has several
  // (torch.optim: "for-loop", "foreach", "fused"); "" for the system's only one.
  std::string variant;

  bool External() const { return kind != SystemKind::kShardcheck; }
  // "shardcheck", "torch-fsdp2", "torch-fsdp2+fused": as scenarios name it.
  std::string Name() const;
  // The name without the variant ("torch-fsdp2").
  std::string BaseName() const;
  // The short ctest label of the system's cells ("fsdp2"); "" for shardcheck.
  std::string Label() const;
  bool operator==(const SystemSpec& o) const { return kind == o.kind && variant == o.variant; }
};

// Parses a scenario's `system` value. Throws Error naming the known systems
// and, for a bad variant, the system's variants.
SystemSpec ParseSystem(const std::string& name);
// Every system name a scenario may give (bases, then each base's variants).
std::vector<std::string> SystemNames();

// A cell's sharding-type axis: Megatron's four types, or `dcp` (the
// checkpoint of torch.distributed.checkpoint, an external system's own).
inline constexpr const char* kDcpShardingName = "dcp";

// What a cell asks of its system, for SystemUnsupported.
struct SystemRequest {
  const OptimizerSetup* setup = nullptr;
  bool dcp = false;  // sharding type dcp (else `sharding_type`)
  ShardingType sharding_type = ShardingType::kDpReshardable;
  std::string dtype;           // fp32 | bf16
  bool real_model = false;     // gpt-tiny / moe-tiny rather than an oracle model
  bool bucket_change = false;  // the resume plan changes the bucket size
  bool gpu = false;            // the cell would run on GPUs (NCCL)
};

// The bound on an external system's distance from shardcheck's reference
// (docs/systems.md, "Against the reference"): |a - b| <= atol + rtol * |b|
// for params (`state` false) or state tensors, measured for the ops the
// system's optimizer uses where they differ from docs/optimizers.md.
struct ExternalTolerance {
  double atol = 0.0;
  double rtol = 0.0;
};
ExternalTolerance ExternalReferenceTolerance(const SystemSpec& system, const OptimizerSetup& setup,
                                             bool state);

// Why `system` cannot run `request` ("torch-fsdp2 has no lion: torch.optim
// has no Lion optimizer"), or "" when it can.
std::string SystemUnsupported(const SystemSpec& system, const SystemRequest& request);

}  // namespace shardcheck
