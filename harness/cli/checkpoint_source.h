// What the checkpoint tools (`inspect`, `ckpt-diff`, `export`) read: a
// checkpoint folder (docs/checkpoint-format.md), or one safetensors file in
// the layout of `shardcheck reference`'s final.safetensors. Both end up as
// the whole model-space state: "param.<n>" in the model dtype,
// "main_param.<n>" for non-fp32 models, "state.<key>.<n>".
#pragma once

#include <optional>
#include <string>

#include "distributed/checkpoint_format.h"
#include "spec/state_dict.h"

namespace shardcheck {

// `path` when it holds metadata.json; else, when it holds a `latest` file
// (the parent folder of saves), the folder that file names; else `path`
// unchanged (the reader then reports what is wrong with it).
std::string ResolveCheckpointDir(const std::string& path);

struct ModelSpaceSource {
  std::string path;                              // as given
  std::string resolved;                          // the folder or file actually read
  std::optional<CheckpointMetadata> checkpoint;  // set for checkpoint folders
  std::optional<int64_t> step;                   // absent: a file without "step" metadata
  std::string optimizer;                         // empty when unknown
  StateDict state;

  // "checkpoint /x (dp_reshardable, dp 3, step 3, muon_lion, bf16)" or
  // "safetensors /x.safetensors (step 3, muon_lion)".
  std::string Describe() const;
};

// Reads `path`: a folder through CheckpointReader, verifying every chunk's
// checksum (VerifyAll) before assembling the model space with
// ReadModelSpace; a file with ReadSafetensors, step and optimizer from its
// "__metadata__". Throws Error naming the path (and the rank file and
// tensor on a checksum mismatch); a checkpoint's rank file given on its own
// is refused with a hint to pass the folder.
ModelSpaceSource ReadModelSpaceSource(const std::string& path);

}  // namespace shardcheck
