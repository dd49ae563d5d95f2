// Command-line options shared by the subcommands that run an oracle model
// (`reference`, `update-norms`, and `train` under the launcher): model,
// optimizer, its hyperparameters, lr schedule, dtype, steps, seed,
// micro-batches. The hyperparameter flags are generated from the optimizer
// registry: --<name> for every declared hyperparameter, --scalar-<name> for
// those of elementwise kinds (a composite's scalar optimizer).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "harness/cell/oracle_run.h"
#include "harness/cli/numeric_flags.h"
#include "spec/setup_request.h"

namespace shardcheck {

struct OracleCliOptions {
  std::string model = "gpt-tiny";
  std::string shapes;
  int steps = 10;
  uint64_t seed = 1234;
  std::string dtype = "fp32";
  int micro_batches = kDefaultMicroBatches;
  std::string device = "cpu";  // cpu | cuda | auto (cuda:LOCAL_RANK)
  // The optimizer as asked for: name, scalar optimizer, hyperparameters,
  // clipping, lr schedule (SetupRequest says where each goes).
  SetupRequest setup;

  // Registers every option on `app`. `optimizer_required`: --optimizer must
  // be given. The object must outlive parsing (flags write into it).
  void Register(CLI::App* app, bool optimizer_required = true);
  // Resolves defaults and overrides into a validated run; the device is
  // this process's (cuda:LOCAL_RANK under a launcher). Throws Error.
  OracleRunOptions Resolve() const;
};

}  // namespace shardcheck
