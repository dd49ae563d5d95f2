// `shardcheck ckpt-diff`: two checkpoints (any sharding types, any DP sizes)
// or final.safetensors files compared in model space, byte for byte.
#include <iostream>
#include <optional>
#include <sstream>

#include "harness/cell/compare.h"
#include "harness/cli/checkpoint_source.h"
#include "harness/cli/cli.h"
#include "harness/cli/cli_options.h"

namespace shardcheck {

namespace {

std::string StepText(const std::optional<int64_t>& step) {
  return step ? std::to_string(*step) : std::string("(none)");
}

std::string GroupText(const GroupRecord& g) {
  std::ostringstream s;
  s.precision(17);
  s << g.Id() << " lr " << g.lr << " weight_decay " << g.weight_decay << " params";
  for (const auto& p : g.params) s << " " << p;
  return s.str();
}

// Prints `names` (at most `most`) under `label`; returns how many there were.
size_t PrintList(const char* label, const std::vector<std::string>& lines, int most) {
  for (size_t i = 0; i < lines.size(); ++i) {
    if (static_cast<int>(i) >= most) {
      std::cout << "           ... (+" << lines.size() - i << " more)\n";
      break;
    }
    std::cout << (i == 0 ? label : "          ") << " " << lines[i] << "\n";
  }
  return lines.size();
}

// Prints the comparison; returns true when A and B are identical.
bool Diff(const ModelSpaceSource& a, const ModelSpaceSource& b, int max_report) {
  std::cout << "A          " << a.Describe() << "\n";
  std::cout << "B          " << b.Describe() << "\n";
  bool same = true;
  const bool step_same = a.step && b.step && *a.step == *b.step;
  same &= step_same;
  std::cout << "step       " << StepText(a.step) << " vs " << StepText(b.step) << ": "
            << (step_same ? "equal" : "DIFFER") << "\n";
  const bool opt_same = !a.optimizer.empty() && a.optimizer == b.optimizer;
  same &= opt_same;
  std::cout << "optimizer  " << (a.optimizer.empty() ? "(none)" : a.optimizer) << " vs "
            << (b.optimizer.empty() ? "(none)" : b.optimizer) << ": "
            << (opt_same ? "equal" : "DIFFER") << "\n";
  if (a.checkpoint && b.checkpoint) {
    // Both record param groups: compare them too (a final.safetensors does not hold them).
    std::vector<std::string> ga, gb;
    for (const auto& g : a.state.groups) ga.push_back(GroupText(g));
    for (const auto& g : b.state.groups) gb.push_back(GroupText(g));
    const bool groups_same = ga == gb;
    same &= groups_same;
    std::cout << "groups     " << ga.size() << " vs " << gb.size() << ": "
              << (groups_same ? "equal" : "DIFFER") << "\n";
  }
  std::vector<std::string> only_a, only_b, differ;
  size_t both = 0, identical = 0;
  for (const auto& [key, ta] : a.state.tensors) {
    auto it = b.state.tensors.find(key);
    if (it == b.state.tensors.end()) {
      only_a.push_back(key);
      continue;
    }
    ++both;
    const TensorDiff d = CompareBitwise(key, ta, it->second);
    if (d.Equal())
      ++identical;
    else
      differ.push_back(d.Summary());
  }
  for (const auto& [key, tb] : b.state.tensors)
    if (!a.state.tensors.count(key)) only_b.push_back(key);
  same &= differ.empty() && only_a.empty() && only_b.empty();
  std::cout << "tensors    " << both << " in both: " << identical << " identical, " << differ.size()
            << " differ; " << only_a.size() << " only in A, " << only_b.size() << " only in B\n";
  PrintList("differ    ", differ, max_report);
  PrintList("only in A ", only_a, max_report);
  PrintList("only in B ", only_b, max_report);
  std::cout << (same ? "IDENTICAL" : "DIFFERENT") << "\n";
  return same;
}

}  // namespace

void AddCkptDiffCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "ckpt-diff",
      "Compare two checkpoints in model space, byte for byte: every fp32 main param, model param "
      "and state tensor, the step, the optimizer (and the param groups when both are "
      "checkpoints). Works across sharding types and DP sizes; either side may also be a "
      "final.safetensors file (of `shardcheck reference` or `shardcheck export`). Every chunk "
      "checksum is verified. Exit 0 identical, 1 different, 2 error.");
  auto a = std::make_shared<std::string>();
  auto b = std::make_shared<std::string>();
  auto max_report = std::make_shared<int>(10);
  cmd->add_option("a", *a, "checkpoint folder or .safetensors file")->required();
  cmd->add_option("b", *b, "checkpoint folder or .safetensors file")->required();
  cmd->add_option("--max-report", *max_report,
                  "differing tensors to print (each with its first differing elements)")
      ->capture_default_str()
      ->check(AtLeast(0, 1 << 30));
  cmd->callback([&action, a, b, max_report] {
    action = [=]() {
      const ModelSpaceSource sa = ReadModelSpaceSource(*a);
      const ModelSpaceSource sb = ReadModelSpaceSource(*b);
      return Diff(sa, sb, *max_report) ? 0 : 1;
    };
  });
}

}  // namespace shardcheck
