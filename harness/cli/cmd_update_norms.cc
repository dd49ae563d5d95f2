// `shardcheck update-norms`: per-step update norms of every optimizer
// setup on one oracle model, as a fixed-width table.
#include <ATen/Parallel.h>

#include <cstdio>
#include <iostream>

#include "harness/cli/cli.h"
#include "harness/cli/cli_options.h"

namespace shardcheck {

void AddUpdateNormsCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "update-norms",
      "Run every named optimizer setup of the registry (or --optimizer) with its defaults on "
      "oracle gradients and print ||p_t - p_(t-1)|| of the fp32 main params per step.");
  auto opts = std::make_shared<OracleCliOptions>();
  opts->Register(cmd, /*optimizer_required=*/false);
  cmd->callback([&action, opts] {
    action = [opts]() {
      at::set_num_threads(1);
      std::vector<std::string> names = OptimizerSetup::Names();
      if (!opts->setup.name.empty()) names = {opts->setup.name};
      std::vector<std::vector<double>> norms;
      std::string model_name;
      for (const auto& name : names) {
        OracleCliOptions o = *opts;
        o.setup.name = name;
        const OracleRunOptions run = o.Resolve();
        model_name = run.model.name + " (" + std::to_string(run.model.Numel()) + " elements, " +
                     DtypeName(run.dtype) + ")";
        std::vector<double> col;
        RunReferenceOnOracle(run, [&](const ReferenceOptimizer&, double n) { col.push_back(n); });
        norms.push_back(col);
      }
      std::cout << "Update norms ||p_t - p_(t-1)|| of the reference optimizers on " << model_name
                << ", oracle gradients, seed " << opts->seed << "\n";
      std::printf("%6s", "step");
      for (const auto& n : names) std::printf("  %12s", n.c_str());
      std::printf("\n");
      for (int s = 0; s < opts->steps; ++s) {
        std::printf("%6d", s + 1);
        for (const auto& col : norms) std::printf("  %12.6e", col[static_cast<size_t>(s)]);
        std::printf("\n");
      }
      return 0;
    };
  });
}

}  // namespace shardcheck
