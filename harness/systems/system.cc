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
  // Releases installed side by side, oldest first; the last is the default.
  std::vector<std::string> versions;
  // Registry kinds it runs alone (empty: every kind, composites included),
  // the scalar kinds it chains with muon (empty: no composites), and why
  // not others.
  std::vector<std::string> kinds;
  std::vector<std::string> muon_scalars;
  const char* kinds_why;
  bool dcp;          // its checkpoints are DCP, not Megatron's sharding types
  bool fp32_only;    // no bf16 model params
  bool oracle_only;  // runs the oracle's models only (an adapter makes no C++ model)
  bool cpu_only;     // the adapter runs on the CPU over Gloo
};

SystemInfo Shardcheck() {
  return {SystemKind::kShardcheck, "shardcheck", "", {}, {}, {}, {}, "", false, false, false,
          false};
}

SystemInfo TorchFsdp2() {
  SystemInfo s = Shardcheck();
  s.kind = SystemKind::kTorchFsdp2;
  s.name = "torch-fsdp2";
  s.label = "fsdp2";
  s.variants = {"foreach", "fused"};
  s.kinds = {"adam", "adamw", "sgd"};
  s.kinds_why = "torch.optim has no such optimizer (torch-fsdp2 runs adam, adamw and sgd)";
  s.dcp = s.fp32_only = s.oracle_only = s.cpu_only = true;
  return s;
}

SystemInfo MegatronCore() {
  SystemInfo s = Shardcheck();
  s.kind = SystemKind::kMegatronCore;
  s.name = "megatron-core";
  s.label = "megatron";
  s.versions = {"0.18.2", "0.19.2"};
  s.kinds = {"adam", "adamw", "lion"};
  s.muon_scalars = {"adamw", "lion"};
  s.kinds_why =
      "its adapter drives adam, adamw and lion, and muon with adam or lion for the scalar "
      "params (docs/systems.md, \"megatron-core\")";
  s.oracle_only = s.cpu_only = true;
  return s;
}

const std::vector<SystemInfo>& Systems() {
  static const std::vector<SystemInfo> systems = {Shardcheck(), TorchFsdp2(), MegatronCore()};
  return systems;
}

const SystemInfo& Info(SystemKind kind) {
  for (const auto& s : Systems())
    if (s.kind == kind) return s;
  throw Error("unknown system kind");
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string JoinWith(const std::string& prefix, const std::vector<std::string>& v) {
  std::string list;
  for (const auto& x : v) list += (list.empty() ? "" : ", ") + prefix + x;
  return list;
}

// Why system `s` (named `name`) cannot run `setup`, or "".
std::string SetupUnsupported(const SystemInfo& s, const std::string& name,
                             const OptimizerSetup& setup) {
  if (s.kinds.empty()) return "";
  if (setup.IsComposite()) {
    if (s.muon_scalars.empty())
      return name + " runs one optimizer per param, not the composite " + setup.name;
    if (setup.main.kind() != "muon" || !Contains(s.muon_scalars, setup.scalar->kind()))
      return name + " has no " + setup.name + ": " + s.kinds_why;
    return "";
  }
  if (!Contains(s.kinds, setup.main.kind()))
    return name + " has no " + setup.main.kind() + ": " + s.kinds_why;
  return "";
}

}  // namespace

std::string SystemSpec::BaseName() const { return Info(kind).name; }

std::string SystemSpec::Name() const {
  return BaseName() + (version.empty() ? "" : "@" + version) +
         (variant.empty() ? "" : "+" + variant);
}

std::string SystemSpec::Label() const { return Info(kind).label; }

std::vector<std::string> SystemNames() {
  std::vector<std::string> names;
  for (const auto& s : Systems()) names.push_back(s.name);
  for (const auto& s : Systems()) {
    for (const auto& v : s.versions) names.push_back(std::string(s.name) + "@" + v);
    for (const auto& v : s.variants) names.push_back(std::string(s.name) + "+" + v);
  }
  return names;
}

SystemSpec ParseSystem(const std::string& text) {
  const size_t plus = text.find('+');
  const std::string head = text.substr(0, plus);
  const size_t at = head.find('@');
  const std::string base = head.substr(0, at);
  for (const auto& s : Systems()) {
    if (base != s.name) continue;
    SystemSpec spec{s.kind, plus == std::string::npos ? "" : text.substr(plus + 1), ""};
    if (plus != std::string::npos && !Contains(s.variants, spec.variant))
      throw Error("unknown variant '" + spec.variant + "' of system " + base +
                  (s.variants.empty() ? " (it has none)"
                                      : " (expected " + JoinWith(base + "+", s.variants) + ")"));
    if (at != std::string::npos) {
      spec.version = head.substr(at + 1);
      if (!Contains(s.versions, spec.version))
        throw Error("system " + base + " has no pinned release '" + spec.version + "'" +
                    (s.versions.empty()
                         ? " (it is pinned at one, named without a version)"
                         : " (expected " + JoinWith(base + "@", s.versions) +
                               "; systems/versions.txt pins them)"));
    } else if (!s.versions.empty()) {
      spec.version = s.versions.back();
    }
    return spec;
  }
  std::string list;
  for (const auto& n : SystemNames()) list += (list.empty() ? "" : ", ") + n;
  throw Error("unknown system '" + text + "' (expected " + list + ")");
}

ExternalTolerance ExternalReferenceTolerance(const SystemSpec& system, const OptimizerSetup& setup,
                                             const std::string& dtype, ToleranceOn on) {
  if (system.kind == SystemKind::kMegatronCore && setup.IsComposite()) {
    // megatron-core's Muon (emerging-optimizers 0.3.0, the layer-wise
    // DistributedOptimizer) on oracle:mixed-small in bf16, 12 steps, with the
    // coefficients of the plan (docs/systems.md, "Against the reference"):
    // fp32 main params of the Muon-managed weights part by at most 2.4e-4
    // (its Newton-Schulz is not docs/optimizers.md's op sequence), the bf16
    // params by 2 ULP (4e-3 at |p| < 0.5), the state within 1e-9 + 1e-3 |b|.
    // A scalar optimizer stepping the wrong rule (Adam for Lion) parts the
    // main params by 9e-3 and exp_avg by 5x: far outside.
    if (on == ToleranceOn::kState) return {1e-9, 1e-3};
    if (on == ToleranceOn::kMainParams) return {1e-3, 1e-4};
    return {2e-3, dtype == "bf16" ? 1.0 / 64 : 1e-4};
  }
  // torch.optim's Adam, AdamW and SGD on oracle:mixed-small, 12 steps, every
  // implementation (docs/systems.md, "Against the reference"): params at
  // most 1.6e-5 relative (5.96e-8 absolute on |p| <= 0.51); state needs an
  // absolute 2.5e-10 beside a relative 1e-4 (lerp and addcmul round
  // otherwise, and exp_avg cancels near 0), nothing beside a relative 1e-3.
  // A lost moment or a wrong bias correction moves params by about lr
  // (1e-3 relative): far outside either bound.
  return on == ToleranceOn::kState ? ExternalTolerance{1e-9, 1e-3} : ExternalTolerance{1e-7, 1e-4};
}

std::string SystemUnsupported(const SystemSpec& system, const SystemRequest& r) {
  const SystemInfo& s = Info(system.kind);
  const std::string name = system.Name();
  if (!s.dcp && r.dcp) return name + " has no sharding type dcp: it saves Megatron's four types";
  if (s.dcp && !r.dcp)
    return name + " has no sharding type " + ShardingTypeName(r.sharding_type) +
           ": it checkpoints through DCP (sharding_type: dcp)";
  if (r.setup) {
    const std::string why = SetupUnsupported(s, name, *r.setup);
    if (!why.empty()) return why;
    if (system.kind == SystemKind::kMegatronCore && r.setup->IsComposite() && r.dtype != "bf16")
      return name +
             " runs muon through its layer-wise DistributedOptimizer, which needs a bf16 "
             "model (its OptimizerConfig rejects fp32)";
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
  if (s.oracle_only && r.bucket_change)
    return name + "'s adapter keeps the system's own bucket layout on resume";
  if (s.cpu_only && r.gpu) return name + "'s adapter runs on the CPU over Gloo only";
  return "";
}

}  // namespace shardcheck
