// `shardcheck optimizers`: the optimizer registry, as a table for people,
// as JSON for tools (--json), or as the list of named setups (--names) that
// CMake reads to build the ctest matrices.
#include <cstdio>
#include <iostream>

#include "distributed/file_util.h"
#include "harness/cell/output_target.h"
#include "harness/cli/cli.h"
#include "spec/config_json.h"

namespace shardcheck {

namespace {

void PrintKinds() {
  std::printf("Optimizer kinds\n");
  for (const OptimizerEntry* e : Optimizers()) {
    const OptimizerSpec& s = e->spec;
    std::printf("\n  %s  (%s)  %s\n", s.name.c_str(), PlacementName(s.placement).c_str(),
                s.title.c_str());
    std::printf("    state:   %s\n", s.schema.ToString().c_str());
    std::printf("    source:  %s\n", s.source.c_str());
    for (const HyperParamSpec& h : s.hyperparams) {
      std::string flag = "--" + h.name;
      for (char& c : flag)
        if (c == '_') c = '-';
      std::printf("    %-18s default %-20s %-24s %s\n", flag.c_str(),
                  HyperValueText(h.default_value).c_str(), h.RangeText().c_str(), h.help.c_str());
    }
    if (s.sign_based)
      std::printf("    trait:   sign-based (real-model params compared on the loss only)\n");
    if (!s.as_scalar.empty())
      std::printf("    trait:   as a scalar optimizer it means %s\n", s.as_scalar.c_str());
    if (!s.default_scalar.empty())
      std::printf(
          "    trait:   takes a scalar optimizer for the params it does not take (default %s)\n",
          s.default_scalar.c_str());
  }
}

void PrintSetups() {
  std::printf("\nNamed setups\n");
  for (const auto& name : OptimizerSetup::Names()) {
    const OptimizerSetup s = OptimizerSetup::Defaults(name);
    std::string children;
    for (const OptimizerConfig* c : s.Children())
      children += (children.empty() ? "" : " + ") + c->kind() + " (" + c->schema().ToString() + ")";
    std::printf("  %-12s %s\n", name.c_str(), children.c_str());
  }
}

}  // namespace

void AddOptimizersCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "optimizers",
      "Print the optimizer registry: every kind with its state schema, hyperparameters (defaults, "
      "ranges), placement and traits, and the named setups (docs/optimizers.md).");
  auto json = std::make_shared<bool>(false);
  auto names = std::make_shared<bool>(false);
  auto out = std::make_shared<std::string>();
  cmd->add_flag("--json", *json, "the registry as JSON");
  cmd->add_flag("--names", *names, "the named setups, one per line")->excludes("--json");
  auto force = std::make_shared<bool>(false);
  cmd->add_option("--out", *out,
                  "write to this file (atomically; it must not exist) instead of stdout");
  cmd->add_flag("--force", *force, "replace --out when it exists");
  cmd->callback([&action, json, names, out, force] {
    action = [=]() {
      if (!out->empty()) CheckFileTarget(*out, *force, "--out");
      std::string text;
      if (*json) {
        text = RegistryJson().dump(2) + "\n";
      } else if (*names) {
        for (const auto& n : OptimizerSetup::Names()) text += n + "\n";
      } else {
        PrintKinds();
        PrintSetups();
        return 0;
      }
      if (out->empty())
        std::cout << text;
      else
        WriteFileAtomic(*out, text);
      return 0;
    };
  });
}

}  // namespace shardcheck
