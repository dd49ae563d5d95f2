#include "reference/config.h"

#include <cmath>

#include "reference/error.h"

namespace shardcheck {

std::string KindName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdam: return "adam";
    case OptimizerKind::kAdamW: return "adamw";
    case OptimizerKind::kLion: return "lion";
    case OptimizerKind::kMuon: return "muon";
  }
  return "?";
}

OptimizerKind ParseKind(const std::string& name) {
  for (auto k : {OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kLion,
                 OptimizerKind::kMuon}) {
    if (KindName(k) == name) return k;
  }
  throw Error("unknown optimizer kind '" + name + "' (expected adam, adamw, lion or muon)");
}

std::string MuonScaleName(MuonScale scale) {
  switch (scale) {
    case MuonScale::kSpectral: return "spectral";
    case MuonScale::kShape: return "shape";
    case MuonScale::kMoonlight: return "moonlight";
  }
  return "?";
}

MuonScale ParseMuonScale(const std::string& name) {
  for (auto s : {MuonScale::kSpectral, MuonScale::kShape, MuonScale::kMoonlight}) {
    if (MuonScaleName(s) == name) return s;
  }
  throw Error("unknown Muon scale mode '" + name + "' (expected spectral, shape or moonlight)");
}

OptimizerConfig OptimizerConfig::Defaults(OptimizerKind kind) {
  OptimizerConfig c;
  c.kind = kind;
  switch (kind) {
    case OptimizerKind::kAdam:
      break;
    case OptimizerKind::kAdamW:
      c.weight_decay = 0.01;
      break;
    case OptimizerKind::kLion:
      // Megatron-LM's Lion defaults.
      c.lr = 1e-4;
      c.beta1 = 0.95;
      c.beta2 = 0.98;
      break;
    case OptimizerKind::kMuon:
      c.lr = 1e-3;
      break;
  }
  return c;
}

NsCoefficients OptimizerConfig::CoefficientsAt(int i) const {
  if (ns_coefficients.empty()) return kDefaultNsCoefficients;
  if (ns_coefficients.size() == 1) return ns_coefficients[0];
  return ns_coefficients.at(static_cast<size_t>(i));
}

void OptimizerConfig::Validate() const {
  const std::string who = KindName(kind);
  auto bad = [&](const std::string& field, const std::string& why) {
    throw Error(who + ": invalid " + field + ": " + why);
  };
  if (!(lr >= 0.0) || !std::isfinite(lr)) bad("lr", "must be a finite number >= 0");
  if (!(weight_decay >= 0.0) || !std::isfinite(weight_decay))
    bad("weight_decay", "must be a finite number >= 0");
  if (kind == OptimizerKind::kMuon) {
    if (!(momentum >= 0.0 && momentum < 1.0)) bad("momentum", "must be in [0, 1)");
    if (ns_steps < 1 || ns_steps > 100) bad("ns_steps", "must be in [1, 100]");
    if (ns_coefficients.size() > 1 && ns_coefficients.size() != static_cast<size_t>(ns_steps))
      bad("ns_coefficients", "must hold one triple or ns_steps triples");
    if (!(extra_scale > 0.0)) bad("extra_scale", "must be > 0");
  } else {
    if (!(beta1 >= 0.0 && beta1 < 1.0)) bad("beta1", "must be in [0, 1)");
    if (!(beta2 >= 0.0 && beta2 < 1.0)) bad("beta2", "must be in [0, 1)");
    if (kind != OptimizerKind::kLion && !(eps > 0.0)) bad("eps", "must be > 0");
  }
}

const std::vector<std::string>& OptimizerSetup::Names() {
  static const std::vector<std::string> names = {"adam", "adamw", "lion", "muon_adam",
                                                 "muon_lion"};
  return names;
}

OptimizerSetup OptimizerSetup::Defaults(const std::string& name) {
  OptimizerSetup s;
  s.name = name;
  if (name == "adam" || name == "adamw" || name == "lion") {
    s.main = OptimizerConfig::Defaults(ParseKind(name));
  } else if (name == "muon_adam" || name == "muon_lion") {
    s.main = OptimizerConfig::Defaults(OptimizerKind::kMuon);
    // Muon's scalar "adam" is Megatron's Adam: decoupled weight decay.
    s.scalar = OptimizerConfig::Defaults(name == "muon_adam" ? OptimizerKind::kAdamW
                                                             : OptimizerKind::kLion);
    // Both children use the run's lr and weight decay unless set apart.
    s.scalar->lr = s.main.lr;
    s.scalar->weight_decay = s.main.weight_decay;
  } else {
    throw Error("unknown optimizer '" + name +
                "' (expected adam, adamw, lion, muon_adam or muon_lion)");
  }
  return s;
}

void OptimizerSetup::Validate() const {
  main.Validate();
  if (scalar) scalar->Validate();
  if (IsMuon() != (main.kind == OptimizerKind::kMuon))
    throw Error(name + ": Muon needs a scalar optimizer and only Muon takes one");
  if (scalar && scalar->kind != OptimizerKind::kAdamW && scalar->kind != OptimizerKind::kLion)
    throw Error(name + ": muon_scalar_optimizer must be adam or lion");
  if (!(max_grad_norm >= 0.0)) throw Error(name + ": max_grad_norm must be >= 0");
}

}  // namespace shardcheck
