// `shardcheck oracle`: the gradient oracle's values (docs/oracle.md) in a
// safetensors file, so a port of the oracle (systems/common/oracle.py, an
// adapter's own) can be checked byte for byte against this one.
#include <filesystem>
#include <iostream>

#include "distributed/safetensors.h"
#include "harness/cli/cli.h"
#include "harness/cell/output_target.h"
#include "harness/cli/cli_options.h"
#include "spec/error.h"
#include "testing/model_spec.h"
#include "testing/oracle.h"

namespace shardcheck {

namespace {

struct OracleDumpOptions {
  std::string model = "mixed-small";
  uint64_t seed = 1;
  int steps = 2;
  int dp = 1;
  int micro_batches = kDefaultMicroBatches;
  std::string out;
};

// p0.<name>, then grad.<step>.<rank>.<name> for every step, rank and param.
std::vector<std::pair<std::string, at::Tensor>> OracleTensors(const OracleDumpOptions& o,
                                                              const ModelSpec& m) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t pid = 0; pid < m.params.size(); ++pid)
    out.push_back(
        {"p0." + m.params[pid].name, InitialParam(o.seed, pid, m.params[pid].shape, at::kFloat)});
  const int per = o.micro_batches / o.dp;
  for (int step = 1; step <= o.steps; ++step)
    for (int rank = 0; rank < o.dp; ++rank)
      for (size_t pid = 0; pid < m.params.size(); ++pid)
        out.push_back(
            {"grad." + std::to_string(step) + "." + std::to_string(rank) + "." + m.params[pid].name,
             PartialGrad(o.seed, static_cast<uint64_t>(step), pid, m.params[pid].shape,
                         o.micro_batches, rank * per, (rank + 1) * per, m.zero_mask)});
  return out;
}

}  // namespace

void AddOracleCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "oracle",
      "Write the gradient oracle's values (docs/oracle.md) to a safetensors file: the initial "
      "params p0.<name> (fp32) and, for every step and DP rank, that rank's partial gradient "
      "grad.<step>.<rank>.<name> (its micro-batches summed in order, divided by M; their sum is "
      "the global gradient). For checking a port of the oracle byte for byte.");
  auto o = std::make_shared<OracleDumpOptions>();
  cmd->add_option("--model", o->model,
                  "an oracle model: gpt-tiny, mixed-small, shapes:<list>, or sparse-<one of those>")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "oracle seed")->capture_default_str()->check(SeedRange());
  cmd->add_option("--steps", o->steps, "steps 1..N")
      ->capture_default_str()
      ->check(AtLeast(1, 100000, "every step's gradients go into one file"));
  cmd->add_option("--dp", o->dp, "DP size (must divide --micro-batches)")
      ->capture_default_str()
      ->check(AtLeast(1, 32, "it divides --micro-batches"));
  cmd->add_option("--micro-batches", o->micro_batches, "M, 1..32")
      ->capture_default_str()
      ->check(IntIn(1, 32, "the oracle's sums stay exact up to 32"));
  auto force = std::make_shared<bool>(false);
  cmd->add_option("--out", o->out, "the safetensors file to write (must not exist)")->required();
  cmd->add_flag("--force", *force, "replace --out when it exists");
  cmd->callback([&action, o, force] {
    action = [o, force]() {
      CheckFileTarget(o->out, *force, "--out");
      if (o->micro_batches % o->dp != 0)
        throw Error("--dp " + std::to_string(o->dp) + " does not divide --micro-batches " +
                    std::to_string(o->micro_batches));
      const ModelSpec m = OracleModelByName(o->model);
      WriteSafetensors(o->out, OracleTensors(*o, m),
                       {{"format", "shardcheck-oracle/1"},
                        {"model", m.name},
                        {"seed", std::to_string(o->seed)},
                        {"steps", std::to_string(o->steps)},
                        {"dp", std::to_string(o->dp)},
                        {"micro_batches", std::to_string(o->micro_batches)},
                        {"zero_mask", m.zero_mask ? "true" : "false"}});
      std::cout << "oracle " << m.name << " seed " << o->seed << ", steps 1.." << o->steps
                << ", dp " << o->dp << ", M " << o->micro_batches << ": wrote " << o->out << "\n";
      return 0;
    };
  });
}

}  // namespace shardcheck
