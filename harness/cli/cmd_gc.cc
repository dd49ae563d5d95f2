// `shardcheck gc DIR`: removes the folders interrupted saves left in a
// folder of saves (distributed/stale_saves.h); committed checkpoints are
// never touched.
#include <cstdio>

#include "distributed/stale_saves.h"
#include "harness/cli/cli.h"
#include "harness/cli/numeric_flags.h"
#include "spec/error.h"

namespace shardcheck {

void AddGcCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "gc",
      "Remove the \"<name>.tmp-<id>\" folders that interrupted saves left in DIR (the folder "
      "holding the checkpoints and `latest`). Committed checkpoints and every other entry are "
      "never touched; folders younger than --min-age may be saves still running and are kept.");
  auto dir = std::make_shared<std::string>();
  auto min_age = std::make_shared<double>(600.0);
  auto dry_run = std::make_shared<bool>(false);
  cmd->add_option("dir", *dir, "folder of saves")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--min-age", *min_age, "keep stale folders younger than this, in seconds")
      ->capture_default_str()
      ->check(RealIn(0, 3.2e9, "about a century"));
  cmd->add_flag("--dry-run", *dry_run, "list what would be removed, remove nothing");
  cmd->callback([&action, dir, min_age, dry_run] {
    action = [=]() {
      const std::vector<StaleSave> found = FindStaleSaves(*dir);
      std::vector<StaleSave> gone;
      if (!*dry_run) gone = RemoveStaleSaves(*dir, *min_age);
      for (const StaleSave& s : found) {
        const bool old = s.age_s >= *min_age;
        std::printf("%s %s (%.1f MB, %.0f s old)\n",
                    *dry_run ? (old ? "would remove" : "would keep (young)")
                             : (old ? "removed" : "kept (young)"),
                    s.path.c_str(), static_cast<double>(s.bytes) / 1e6, s.age_s);
      }
      std::printf("%zu stale save folder(s) in %s, %zu removed\n", found.size(), dir->c_str(),
                  gone.size());
      return 0;
    };
  });
}

}  // namespace shardcheck
