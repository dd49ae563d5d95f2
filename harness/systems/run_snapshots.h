// What an adapter's run wrote (docs/systems.md, "What a run writes"): one
// snapshot of the whole model-space state per step in shardcheck's layout
// (param.<name>, main_param.<name> for bf16 models, state.<key>.<name> under
// the system's own state keys), read back for the checks.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardcheck {

struct Snapshot {
  int64_t step = 0;         // the updates taken (0: the initial state)
  bool after_load = false;  // right after loading the checkpoint of `step`
  std::string file;
  std::map<std::string, at::Tensor> tensors;
};

struct RunSnapshots {
  std::string run;                  // single_device | uninterrupted | resumed
  std::vector<Snapshot> snapshots;  // in run order: the load (if any), then each step

  // The snapshot after step `step` (not the after-load one), or null.
  const Snapshot* AtStep(int64_t step) const;
};

// step_<KKKK>.safetensors and loaded_<KKKK>.safetensors of RUN_DIR.
std::string SnapshotFileName(int64_t step, bool after_load);

// Reads the snapshots a run of steps [first, last] must have written into
// `run_dir`: loaded_<first-1> when it loaded a checkpoint, else
// step_<first-1>, then step_<first> .. step_<last>. Throws Error naming the
// file that is missing or malformed (format, step or after_load metadata
// that do not match the name).
RunSnapshots ReadRunSnapshots(const std::string& run_dir, const std::string& run, int64_t first,
                              int64_t last, bool loaded);

}  // namespace shardcheck
