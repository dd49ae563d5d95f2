// What a command writes, and the one rule for writing it
// (docs/reliability.md, "Output is never overwritten"): a command refuses
// to write over output that exists. A folder it fills (train, reference,
// run --out) must be absent or empty; a file it writes (export --out,
// selftest's selftest.json) must be absent. `--force` replaces what is
// there. The refusal is an input error (exit 2) naming the flag and the
// path, given before any work starts.
#pragma once

#include <string>

namespace shardcheck {

// Refuses (Error, kInput) a non-empty folder or any other entry at `path`,
// unless `force`. `flag` names the option the path came from.
void CheckFolderTarget(const std::string& path, bool force, const std::string& flag);

// Refuses (Error, kInput) an existing entry at `path` unless `force`.
void CheckFileTarget(const std::string& path, bool force, const std::string& flag);

// Empties (with force) or creates the folder `path`, for commands that fill
// it as they go (`run`). Throws Error (kEnvironment) naming the path.
void PrepareFolderTarget(const std::string& path, bool force);

// The output folder of a command that writes it once, at its end (train,
// reference): checked and probed when constructed (a folder that cannot be
// created fails at once, with the path and the reason), filled in a
// staging folder PATH.tmp-<hex> beside it, and moved to PATH by Commit().
// A run that fails, is interrupted or is killed before Commit leaves no
// folder at PATH; a SIGKILL during the final writes can leave only the
// staging folder, which `shardcheck gc` removes.
class OutputFolder {
 public:
  OutputFolder(std::string path, bool force, std::string flag = "--out");
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  // The staging folder, created on the first call: write the files here.
  const std::string& Staging();
  // Replaces PATH (absent, empty, or anything with force) by the staging folder.
  void Commit();
  const std::string& path() const { return path_; }

 private:
  std::string path_, flag_, staging_;
  bool force_ = false, committed_ = false;
};

}  // namespace shardcheck
