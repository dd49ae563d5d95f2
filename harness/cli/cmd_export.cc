// `shardcheck export`: a checkpoint's whole model-space state as one
// safetensors file in the layout of `shardcheck reference`'s final.safetensors.
#include <filesystem>
#include <iostream>

#include "harness/cell/run_files.h"
#include "harness/cli/checkpoint_source.h"
#include "harness/cli/cli.h"
#include "harness/cell/output_target.h"
#include "spec/error.h"

namespace shardcheck {

void AddExportCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "export",
      "Write a checkpoint's full model-space state (any sharding type, any DP size at save) as "
      "one safetensors file in the layout of `shardcheck reference`'s final.safetensors: "
      "param.<name> in the model dtype, main_param.<name> for bf16 models, state.<key>.<name>, "
      "with the step and optimizer in its metadata. Every chunk checksum is verified first.");
  auto dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  cmd->add_option("dir", *dir, "checkpoint folder")->required();
  auto force = std::make_shared<bool>(false);
  cmd->add_option("--out", *out, "safetensors file to write (must not exist; written atomically)")
      ->required();
  cmd->add_flag("--force", *force, "replace --out when it exists");
  cmd->callback([&action, dir, out, force] {
    action = [=]() {
      CheckFileTarget(*out, *force, "--out");
      if (!std::filesystem::is_directory(*dir)) throw Error(*dir + " is not a checkpoint folder");
      const ModelSpaceSource s = ReadModelSpaceSource(*dir);
      const std::filesystem::path parent = std::filesystem::path(*out).parent_path();
      if (!parent.empty()) std::filesystem::create_directories(parent);
      WriteFinalState(*out, s.state);
      std::cout << "exported " << s.Describe() << ": " << s.state.tensors.size() << " tensors to "
                << *out << "\n";
      return 0;
    };
  });
}

}  // namespace shardcheck
