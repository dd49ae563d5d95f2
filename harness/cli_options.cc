#include "harness/cli_options.h"

#include <sstream>

#include "reference/error.h"
#include "reference/schema.h"

namespace shardcheck {

void OracleCliOptions::Register(CLI::App* app, bool optimizer_required) {
  auto* opt = app->add_option("--optimizer", optimizer,
                              "adam | adamw | lion | muon_adam | muon_lion (Muon with an Adam "
                              "or Lion scalar optimizer)");
  if (optimizer_required) opt->required();
  app->add_option("--model", model, "oracle model: gpt-tiny")->capture_default_str();
  app->add_option("--shapes", shapes,
                  "instead of --model: params as [name=]NxM[:embedding|output|other],...")
      ->excludes(app->get_option("--model"));
  app->add_option("--steps", steps, "optimizer steps")->capture_default_str();
  app->add_option("--seed", seed, "oracle seed")->capture_default_str();
  app->add_option("--dtype", dtype, "model param dtype: fp32 | bf16 (main params are fp32)")
      ->capture_default_str();
  app->add_option("--micro-batches", micro_batches,
                  "global micro-batches M per step (1..32; DP size must divide it)")
      ->capture_default_str();
  app->add_option("--lr", lr, "learning rate (muon_*: both children unless --scalar-lr)");
  app->add_option("--weight-decay", weight_decay,
                  "weight decay (muon_*: both children unless --scalar-weight-decay)");
  app->add_option("--beta1", beta1, "Adam/Lion beta1 (muon_*: of the scalar optimizer)");
  app->add_option("--beta2", beta2, "Adam/Lion beta2 (muon_*: of the scalar optimizer)");
  app->add_option("--eps", eps, "Adam epsilon");
  app->add_option("--momentum", momentum, "Muon momentum (default 0.95)");
  app->add_flag("--nesterov", nesterov, "Muon: Nesterov momentum");
  app->add_option("--ns-steps", ns_steps, "Muon: Newton-Schulz iterations (default 5)");
  app->add_option("--ns-coefficients", ns_coefficients,
                  "Muon: 'a,b,c' for every iteration or 'a,b,c;a,b,c;...' one per iteration");
  app->add_flag("--ns-bf16", ns_bf16, "Muon: Newton-Schulz matmuls in bf16");
  app->add_option("--scale-mode", scale_mode, "Muon: spectral (default) | shape | moonlight");
  app->add_option("--extra-scale", extra_scale, "Muon: extra factor of the spectral scale");
  app->add_option("--scalar-lr", scalar_lr, "muon_*: learning rate of the scalar optimizer");
  app->add_option("--scalar-weight-decay", scalar_weight_decay,
                  "muon_*: weight decay of the scalar optimizer");
  app->add_option("--max-grad-norm", max_grad_norm, "clip the global grad norm (0: off)")
      ->capture_default_str();
}

std::vector<NsCoefficients> ParseNsCoefficients(const std::string& text) {
  std::vector<NsCoefficients> out;
  std::stringstream triples(text);
  std::string triple;
  while (std::getline(triples, triple, ';')) {
    std::stringstream vals(triple);
    std::string v;
    NsCoefficients k{};
    int n = 0;
    while (std::getline(vals, v, ',')) {
      if (n == 3) throw Error("--ns-coefficients: '" + triple + "' has more than three numbers");
      try {
        size_t used = 0;
        k[static_cast<size_t>(n)] = std::stod(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
      } catch (const std::exception&) {
        throw Error("--ns-coefficients: '" + v + "' is not a number");
      }
      ++n;
    }
    if (n != 3) throw Error("--ns-coefficients: '" + triple + "' does not hold three numbers");
    out.push_back(k);
  }
  if (out.empty()) throw Error("--ns-coefficients: empty");
  return out;
}

OracleRunOptions OracleCliOptions::Resolve() const {
  OracleRunOptions o;
  o.model = shapes.empty() ? ModelByName(model) : ParseShapes(shapes);
  o.setup = OptimizerSetup::Defaults(optimizer);
  o.steps = steps;
  o.seed = seed;
  o.dtype = ParseDtype(dtype);
  o.micro_batches = micro_batches;
  OptimizerSetup& s = o.setup;
  // Adam/Lion hyperparameters go to the only child, or to Muon's scalar child.
  OptimizerConfig& elementwise = s.IsMuon() ? *s.scalar : s.main;
  if (lr) {
    s.main.lr = *lr;
    if (s.scalar) s.scalar->lr = *lr;
  }
  if (weight_decay) {
    s.main.weight_decay = *weight_decay;
    if (s.scalar) s.scalar->weight_decay = *weight_decay;
  }
  if (beta1) elementwise.beta1 = *beta1;
  if (beta2) elementwise.beta2 = *beta2;
  if (eps) elementwise.eps = *eps;
  const bool muon_option = momentum || extra_scale || ns_steps || ns_coefficients || scale_mode ||
                           nesterov || ns_bf16 || scalar_lr || scalar_weight_decay;
  if (muon_option && !s.IsMuon())
    throw Error("Muon options (--momentum, --nesterov, --ns-*, --scale-mode, --extra-scale, "
                "--scalar-*) need --optimizer muon_adam or muon_lion");
  if (momentum) s.main.momentum = *momentum;
  s.main.nesterov = nesterov;
  if (ns_steps) s.main.ns_steps = *ns_steps;
  if (ns_coefficients) s.main.ns_coefficients = ParseNsCoefficients(*ns_coefficients);
  if (scale_mode) s.main.scale = ParseMuonScale(*scale_mode);
  if (extra_scale) s.main.extra_scale = *extra_scale;
  s.main.ns_bf16 = ns_bf16;
  if (scalar_lr) s.scalar->lr = *scalar_lr;
  if (scalar_weight_decay) s.scalar->weight_decay = *scalar_weight_decay;
  s.max_grad_norm = max_grad_norm;
  o.Validate();
  return o;
}

}  // namespace shardcheck
