// Command-line options shared by the subcommands that run an oracle model
// (`reference`, and `train` under the launcher): model, optimizer and its
// hyperparameters, dtype, steps, seed, micro-batches.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "harness/oracle_run.h"

namespace shardcheck {

struct OracleCliOptions {
  std::string optimizer;
  std::string model = "gpt-tiny";
  std::string shapes;
  int steps = 10;
  uint64_t seed = 1234;
  std::string dtype = "fp32";
  int micro_batches = kDefaultMicroBatches;
  std::optional<double> lr, weight_decay, beta1, beta2, eps;
  std::optional<double> momentum, extra_scale;
  std::optional<int> ns_steps;
  std::optional<std::string> ns_coefficients, scale_mode;
  bool nesterov = false;
  bool ns_bf16 = false;
  std::optional<double> scalar_lr, scalar_weight_decay;
  double max_grad_norm = 0.0;

  // Registers every option on `app`. `optimizer_required`: --optimizer must be given.
  void Register(CLI::App* app, bool optimizer_required = true);
  // Resolves defaults and overrides into a validated run. Throws Error.
  OracleRunOptions Resolve() const;
};

// Parses "a,b,c" or "a,b,c;a,b,c;..." into coefficient triples. Throws Error.
std::vector<NsCoefficients> ParseNsCoefficients(const std::string& text);

}  // namespace shardcheck
