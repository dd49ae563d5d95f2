// `shardcheck reference`: the reference optimizer on oracle gradients.
#include <ATen/Parallel.h>

#include <filesystem>
#include <iostream>

#include "harness/cell/run_files.h"
#include "harness/cli/cli.h"
#include "harness/cli/cli_options.h"
#include "harness/cell/output_target.h"

namespace shardcheck {

void AddReferenceCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "reference",
      "Run the single-device reference optimizer on oracle gradients and write "
      "DIR/final.safetensors (param.<name>, main_param.<name> for bf16, state.<key>.<name>) "
      "and DIR/config.json (resolved hyperparameters, schema, step, model).");
  auto opts = std::make_shared<OracleCliOptions>();
  auto out = std::make_shared<std::string>();
  auto threads = std::make_shared<int>(1);
  auto force = std::make_shared<bool>(false);
  opts->Register(cmd);
  cmd->add_option("--out", *out,
                  "output folder to create (absent or empty; written when the run ends)")
      ->required();
  cmd->add_flag("--force", *force, "replace --out when it exists and is not empty");
  cmd->add_option("--threads", *threads, "libtorch intra-op threads")
      ->capture_default_str()
      ->check(IntIn(1, 1024, "threads of one process"));
  cmd->callback([&action, opts, out, threads, force] {
    action = [opts, out, threads, force]() {
      at::set_num_threads(*threads);
      const OracleRunOptions run = opts->Resolve();
      OutputFolder dir(*out, *force);
      ReferenceOptimizer opt = RunReferenceOnOracle(run);
      WriteFinalState(dir.Staging() + "/final.safetensors", opt.GetStateDict());
      WriteJsonFile(dir.Staging() + "/config.json", RunConfigJson(run, opt.step()));
      dir.Commit();
      std::cout << "reference " << run.setup.name << " on " << run.model.name << " ("
                << DtypeName(run.dtype) << ") on " << run.device.str() << ", " << opt.step()
                << " steps: wrote " << *out << "/final.safetensors and " << *out
                << "/config.json\n";
      return 0;
    };
  });
}

}  // namespace shardcheck
