// Folders that interrupted saves leave behind. A save writes into
// "<dir>.tmp-<hex id>/" beside its target and renames it to <dir> only when
// complete (distributed/checkpoint.h), so such a folder is never a committed
// checkpoint: `inspect` lists them and `shardcheck gc` removes them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardcheck {

struct StaleSave {
  std::string path;
  int64_t bytes = 0;   // the files inside, summed
  double age_s = 0.0;  // since the folder last changed
};

// The "<name>.tmp-<hex>" folders directly in `parent`, sorted by name;
// empty when `parent` is not a folder.
std::vector<StaleSave> FindStaleSaves(const std::string& parent);

// Removes the stale saves of `parent` at least `min_age_s` old (a younger
// one may be a save still running) and returns them; committed checkpoints
// and every other entry are never touched. Throws Error naming the folder
// that could not be removed.
std::vector<StaleSave> RemoveStaleSaves(const std::string& parent, double min_age_s);

}  // namespace shardcheck
