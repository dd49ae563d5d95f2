#include "harness/systems/system.h"

#include <algorithm>

#include "spec/error.h"

namespace shardcheck {

namespace {

// One system's entry: what it is called and what it can run.
struct SystemInfo {
  SystemKind kind;
  const char* name;
  const char* label;                  // ctest label of its cells
  std::vector<std::string> variants;  // besides the default implementation
  // Registry kinds it runs (empty: every kind, composites included), and why not others.
  std::vector<std::string> kinds;
  const char* kinds_why;
  bool dcp;          // its checkpoints are DCP, not Megatron's sharding types
  bool fp32_only;    // no bf16 model params
  bool oracle_only;  // runs the oracle's models only (an adapter makes no C++ model)
  bool cpu_only;     // the adapter runs on the CPU over Gloo
};

const std::vector<SystemInfo>& Systems() {
  static const std::vector<SystemInfo> systems = {
      {SystemKind::kShardcheck, "shardcheck", "", {}, {}, "", false, false, false, false},
      {SystemKind::kTorchFsdp2,
       "torch-fsdp2",
       "fsdp2",
       {"foreach", "fused"},
       {"adam", "adamw", "sgd"},
       "torch.optim has no such optimizer (torch-fsdp2 runs adam, adamw and sgd)",
       true,
       true,
       true,
       true},
  };
  return systems;
}

const SystemInfo& Info(SystemKind kind) {
  for (const auto& s : Systems())
    if (s.kind == kind) return s;
  throw Error("unknown system kind");
}

}  // namespace

std::string SystemSpec::BaseName() const { return Info(kind).name; }

std::string SystemSpec::Name() const {
  return variant.empty() ? BaseName() : BaseName() + "+" + variant;
}

std::string SystemSpec::Label() const { return Info(kind).label; }

std::vector<std::string> SystemNames() {
  std::vector<std::string> names;
  for (const auto& s : Systems()) names.push_back(s.name);
  for (const auto& s : Systems())
    for (const auto& v : s.variants) names.push_back(std::string(s.name) + "+" + v);
  return names;
}

SystemSpec ParseSystem(const std::string& text) {
  const size_t plus = text.find('+');
  const std::string base = text.substr(0, plus);
  for (const auto& s : Systems()) {
    if (base != s.name) continue;
    SystemSpec spec{s.kind, plus == std::string::npos ? "" : text.substr(plus + 1)};
    if (plus != std::string::npos &&
        std::find(s.variants.begin(), s.variants.end(), spec.variant) == s.variants.end()) {
      std::string list;
      for (const auto& v : s.variants) list += (list.empty() ? "" : ", ") + base + "+" + v;
      throw Error("unknown variant '" + spec.variant + "' of system " + base +
                  (list.empty() ? " (it has none)" : " (expected " + list + ")"));
    }
    return spec;
  }
  std::string list;
  for (const auto& n : SystemNames()) list += (list.empty() ? "" : ", ") + n;
  throw Error("unknown system '" + text + "' (expected " + list + ")");
}

ExternalTolerance ExternalReferenceTolerance(const SystemSpec&, const OptimizerSetup&, bool state) {
  // torch.optim's Adam, AdamW and SGD on oracle:mixed-small, 12 steps, every
  // implementation (docs/systems.md, "Against the reference"): params at
  // most 1.6e-5 relative (5.96e-8 absolute on |p| <= 0.51); state needs an
  // absolute 2.5e-10 beside a relative 1e-4 (lerp and addcmul round
  // otherwise, and exp_avg cancels near 0), nothing beside a relative 1e-3.
  // A lost moment or a wrong bias correction moves params by about lr
  // (1e-3 relative): far outside either bound.
  return state ? ExternalTolerance{1e-9, 1e-3} : ExternalTolerance{1e-7, 1e-4};
}

std::string SystemUnsupported(const SystemSpec& system, const SystemRequest& r) {
  const SystemInfo& s = Info(system.kind);
  const std::string name = system.Name();
  if (!s.dcp && r.dcp) return name + " has no sharding type dcp: it saves Megatron's four types";
  if (s.dcp && !r.dcp)
    return name + " has no sharding type " + ShardingTypeName(r.sharding_type) +
           ": it checkpoints through DCP (sharding_type: dcp)";
  if (!s.kinds.empty() && r.setup) {
    if (r.setup->IsComposite())
      return name + " runs one optimizer per param, not the composite " + r.setup->name;
    const std::string kind = r.setup->main.kind();
    if (std::find(s.kinds.begin(), s.kinds.end(), kind) == s.kinds.end())
      return name + " has no " + kind + ": " + s.kinds_why;
  }
  if (s.fp32_only && r.dtype != "fp32")
    return name +
           " runs fp32 models only (FSDP2's bf16 is a compute cast of fp32 params, not "
           "a model dtype)";
  if (s.oracle_only && r.real_model)
    return name +
           " runs the oracle's models only: its adapter makes its gradients from "
           "docs/oracle.md, not from shardcheck's C++ tiny models";
  if (s.oracle_only && r.setup && r.setup->max_grad_norm > 0)
    return name + "'s adapter does not clip gradients (max_grad_norm)";
  if (s.dcp && r.bucket_change) return name + " has no buckets to change on resume";
  if (s.cpu_only && r.gpu) return name + "'s adapter runs on the CPU over Gloo only";
  return "";
}

}  // namespace shardcheck
