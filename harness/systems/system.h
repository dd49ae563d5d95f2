// The system under test of a scenario cell (docs/systems.md): shardcheck's
// own C++ DistributedOptimizer, or an external system driven through an
// adapter process per rank (PyTorch FSDP2 + DCP, megatron-core's
// DistributedOptimizer). A scenario names one as
// `system: <name>[@<version>][+<variant>]` (`torch-fsdp2`,
// `torch-fsdp2+fused`, `megatron-core@0.18.2`); the table behind these
// functions says what each system can run, so a combination it lacks is
// reported with the reason instead of being run.
#pragma once

#include <string>
#include <vector>

#include "distributed/checkpoint_format.h"
#include "spec/config.h"

namespace shardcheck {

enum class SystemKind { kShardcheck, kTorchFsdp2, kMegatronCore };

struct SystemSpec {
  SystemKind kind = SystemKind::kShardcheck;
  // The implementation the system's optimizer uses, where it has several
  // (torch.optim: "for-loop", "foreach", "fused"); "" for the system's only one.
  std::string variant;
  // The release, for a system pinned at several side by side (megatron-core:
  // "0.18.2", "0.19.2"); "" for a system with one pinned release.
  std::string version;

  bool External() const { return kind != SystemKind::kShardcheck; }
  // "shardcheck", "torch-fsdp2+fused", "megatron-core@0.19.2": as scenarios name it.
  std::string Name() const;
  // The name without version or variant ("torch-fsdp2", "megatron-core").
  std::string BaseName() const;
  // The short ctest label of the system's cells ("fsdp2"); "" for shardcheck.
  std::string Label() const;
  bool operator==(const SystemSpec& o) const {
    return kind == o.kind && variant == o.variant && version == o.version;
  }
};

// Parses a scenario's `system` value. A versioned system named without a
// version gets its newest pinned release. Throws Error naming the known
// systems and, for a bad variant or version, the system's own.
SystemSpec ParseSystem(const std::string& name);
// Every system name a scenario may give (bases, then each base's versions and variants).
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
// for the model params, the main params or the state tensors, measured for
// the ops the system's optimizer uses where they differ from
// docs/optimizers.md.
struct ExternalTolerance {
  double atol = 0.0;
  double rtol = 0.0;
};
enum class ToleranceOn { kParams, kMainParams, kState };
ExternalTolerance ExternalReferenceTolerance(const SystemSpec& system, const OptimizerSetup& setup,
                                             const std::string& dtype, ToleranceOn on);

// Why `system` cannot run `request` ("torch-fsdp2 has no lion: torch.optim
// has no Lion optimizer"), or "" when it can.
std::string SystemUnsupported(const SystemSpec& system, const SystemRequest& request);

}  // namespace shardcheck
