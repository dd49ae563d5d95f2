#include "harness/systems/run_snapshots.h"

#include <cstdio>
#include <filesystem>

#include "distributed/safetensors.h"
#include "spec/error.h"

namespace shardcheck {

const Snapshot* RunSnapshots::AtStep(int64_t step) const {
  for (const auto& s : snapshots)
    if (s.step == step && !s.after_load) return &s;
  return nullptr;
}

std::string SnapshotFileName(int64_t step, bool after_load) {
  char name[48];
  std::snprintf(name, sizeof(name), "%s_%04lld.safetensors", after_load ? "loaded" : "step",
                static_cast<long long>(step));
  return name;
}

namespace {

Snapshot ReadSnapshot(const std::string& run_dir, int64_t step, bool after_load) {
  Snapshot s;
  s.step = step;
  s.after_load = after_load;
  s.file = (std::filesystem::path(run_dir) / SnapshotFileName(step, after_load)).string();
  if (!std::filesystem::exists(s.file))
    throw Error(s.file + ": missing (the adapter wrote no snapshot of step " +
                std::to_string(step) + (after_load ? " after the load" : "") + ")");
  std::map<std::string, std::string> meta;
  s.tensors = ReadSafetensors(s.file, &meta);
  auto expect = [&](const std::string& key, const std::string& want) {
    const auto it = meta.find(key);
    if (it == meta.end() || it->second != want)
      throw Error(s.file + ": metadata " + key + " is '" + (it == meta.end() ? "" : it->second) +
                  "', expected '" + want + "'");
  };
  expect("format", "shardcheck-snapshot/1");
  expect("step", std::to_string(step));
  expect("after_load", after_load ? "true" : "false");
  return s;
}

}  // namespace

RunSnapshots ReadRunSnapshots(const std::string& run_dir, const std::string& run, int64_t first,
                              int64_t last, bool loaded) {
  RunSnapshots out;
  out.run = run;
  out.snapshots.push_back(ReadSnapshot(run_dir, first - 1, loaded));
  for (int64_t t = first; t <= last; ++t) out.snapshots.push_back(ReadSnapshot(run_dir, t, false));
  return out;
}

}  // namespace shardcheck
