// Saving and loading a DistributedOptimizer's state in one of the four
// sharding types (docs/checkpoint-format.md). Both are collective: every
// rank of the optimizer's communicator calls them.
#pragma once

#include <string>
#include <vector>

#include "distributed/checkpoint_format.h"
#include "distributed/distrib_optimizer.h"

namespace shardcheck {

// Writes the optimizer's state (fp32 main params and every state key of
// each child's schema, step, groups, layout fingerprint) to `dir` with the
// commit protocol: ranks write into "<dir>.tmp-<id>/" and fsync, rank 0
// writes metadata.json last, renames the folder to `dir`, fsyncs the
// parent, then updates "<parent>/latest" atomically. Refuses (Error, on
// every rank, nothing written) when `dir` exists. On any rank's failure
// every rank throws and no `dir` appears.
void SaveCheckpoint(DistributedOptimizer& opt, const std::string& dir, ShardingType type);

// How a load treats tensors that the checkpoint and this optimizer do not
// share (Megatron's StrictHandling, reduced to its useful cases).
struct LoadOptions {
  // Missing state tensors start from zero instead of failing (main params
  // are never optional).
  bool allow_missing = false;
  // Tensors this optimizer does not use are skipped instead of failing.
  bool ignore_unexpected = false;
  // When the checkpoint's lr schedule (or peak lr) differs from the run's:
  // fail (default), keep the run's (Megatron's override_opt_param_scheduler),
  // or adopt the checkpoint's (use_checkpoint_opt_param_scheduler).
  enum class LrScheduleChoice { kMustMatch, kRun, kCheckpoint };
  LrScheduleChoice lr_schedule = LrScheduleChoice::kMustMatch;
  // Hyperparameters (other than the lr) that differ from the checkpoint's
  // fail the load instead of being returned as warnings.
  bool strict_hparams = false;
};

// Loads `dir` into `opt` at this run's DP size. Validates everything first
// (format version, sharding type, optimizer and schema, lr schedule, param
// names and shapes, model dtype, param groups, layout constraints of the type, file
// presence and size, checksums of every chunk read) and changes no state
// unless every rank succeeded; then sets the step and re-derives the model
// params from the loaded main params on every rank. Throws Error naming the
// key, file and rank. Returns warnings: the hyperparameters that differ
// from the checkpoint's ("adam.beta2: checkpoint 0.999, this run 0.95"),
// which fail the load instead under options.strict_hparams.
std::vector<std::string> LoadCheckpoint(DistributedOptimizer& opt, const std::string& dir,
                                        const LoadOptions& options = {});

// The tensor keys `opt` reads from a checkpoint of `type` (all ranks').
std::set<std::string> ExpectedCheckpointKeys(const DistributedOptimizer& opt, ShardingType type);

// The whole model-space state of a checkpoint, read on one process: the
// layout of `shardcheck reference`'s final.safetensors ("param.<n>" in the
// model dtype, "main_param.<n>" for non-fp32 models, "state.<k>.<n>").
StateDict ReadModelSpace(CheckpointReader& reader);

}  // namespace shardcheck
