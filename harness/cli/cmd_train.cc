// `shardcheck train`: one rank of a distributed oracle run (start it under
// `shardcheck launch`, torchrun, srun or mpirun; alone it is DP size 1).
#include <ATen/Parallel.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "distributed/checkpoint_format.h"
#include "distributed/rendezvous.h"
#include "harness/cell/dist_train.h"
#include "harness/cell/run_files.h"
#include "harness/cell/train_result_json.h"
#include "harness/cli/checkpoint_source.h"
#include "harness/cli/cli.h"
#include "harness/cli/cli_options.h"
#include "harness/cell/output_target.h"
#include "spec/device.h"
#include "spec/error.h"

namespace shardcheck {

namespace {

// Everything `train` takes besides the oracle-run options.
struct TrainFlags {
  OracleCliOptions run;
  std::string out;
  bool force = false;
  int64_t bucket_size = 0;
  bool compare = false;
  std::string backend = "auto";
  double timeout_s = 120.0;
  int threads = 1;
  int save_at = 0;
  std::string save_dir;
  std::string sharding = "dp_reshardable";
  bool sharding_given = false;
  std::string save_sharding;
  std::string load_dir;
  bool allow_missing = false;
  bool ignore_unexpected = false;
  bool strict_hparams = false;
  bool override_schedule = false;
  bool checkpoint_schedule = false;
};

void PrintMemory(const TrainResult& r) {
  if (r.memory.empty()) return;
  std::printf("per-rank optimizer memory (bytes):\n%6s", "rank");
  for (const auto& e : r.memory[0].entries) std::printf("  %22s", (e.child + "." + e.key).c_str());
  std::printf("  %12s  %14s  %s\n", "owned elems", "total bytes", "bytes/elem");
  for (size_t rank = 0; rank < r.memory.size(); ++rank) {
    const MemoryFigures& m = r.memory[rank];
    std::printf("%6zu", rank);
    for (const auto& e : m.entries) std::printf("  %22lld", static_cast<long long>(e.bytes));
    std::printf("  %12lld  %14lld  %.2f\n", static_cast<long long>(m.owned_elements),
                static_cast<long long>(m.total_bytes),
                m.owned_elements ? static_cast<double>(m.total_bytes) / m.owned_elements : 0.0);
  }
}

// The save: its step, folder (refused now if it exists, not after the
// steps) and sharding type. A load keeps the checkpoint's type unless
// --save-sharding-type names another; --sharding-type must then agree
// with the checkpoint.
void ResolveSave(const TrainFlags& f, const std::optional<CheckpointMetadata>& loaded,
                 TrainOptions& t) {
  if (!f.save_dir.empty() && f.save_at == 0)
    throw Error("--save-dir " + f.save_dir + " needs --save-at STEP (the step to save after)");
  if (f.save_at < 0) throw Error("--save-at must be >= 1, got " + std::to_string(f.save_at));
  if (f.save_at > 0 && f.save_dir.empty()) throw Error("--save-at needs --save-dir");
  if (f.save_at > t.run.steps)
    throw Error("--save-at " + std::to_string(f.save_at) + " is after the last step " +
                std::to_string(t.run.steps));
  if (!f.save_dir.empty() && std::filesystem::exists(f.save_dir))
    throw Error("--save-dir " + f.save_dir +
                " exists: checkpoints are never overwritten (give a new folder)");
  t.save_at = f.save_at;
  t.save_dir = f.save_dir;
  t.sharding_type = ParseShardingType(f.sharding);
  if (loaded) {
    const ShardingType saved = loaded->sharding_type;
    if (f.sharding_given && t.sharding_type != saved)
      throw Error("--sharding-type " + f.sharding + " differs from the checkpoint's " +
                  ShardingTypeName(saved) + " (" + t.load_dir +
                  "): a load reads the checkpoint's own type; to save in another one, give "
                  "--save-sharding-type");
    t.sharding_type = saved;
  }
  if (!f.save_sharding.empty()) t.sharding_type = ParseShardingType(f.save_sharding);
}

// The load: the folder (a parent of saves follows its `latest`), strictness
// and which lr schedule wins. Returns the checkpoint's metadata (none
// without --load).
std::optional<CheckpointMetadata> ResolveLoad(const TrainFlags& f, TrainOptions& t) {
  if (f.load_dir.empty()) {
    if (f.override_schedule || f.checkpoint_schedule || f.strict_hparams)
      throw Error(
          "--override-lr-schedule, --use-checkpoint-lr-schedule and --strict-hparams need --load");
    return std::nullopt;
  }
  t.load_dir = ResolveCheckpointDir(f.load_dir);
  t.load_options.allow_missing = f.allow_missing;
  t.load_options.ignore_unexpected = f.ignore_unexpected;
  t.load_options.strict_hparams = f.strict_hparams;
  if (f.override_schedule && f.checkpoint_schedule)
    throw Error(
        "--override-lr-schedule and --use-checkpoint-lr-schedule exclude each other: say which "
        "schedule wins");
  if (f.override_schedule) t.load_options.lr_schedule = LoadOptions::LrScheduleChoice::kRun;
  if (f.checkpoint_schedule)
    t.load_options.lr_schedule = LoadOptions::LrScheduleChoice::kCheckpoint;
  CheckpointMetadata loaded = CheckpointReader(t.load_dir).metadata();
  const int64_t at = loaded.step;
  if (at >= t.run.steps)
    throw Error("checkpoint " + t.load_dir + " is at step " + std::to_string(at) +
                " and --steps is " + std::to_string(t.run.steps) +
                ": nothing is left to run (give --steps > " + std::to_string(at) + ")");
  return loaded;
}

TrainOptions ResolveTrain(const TrainFlags& f) {
  TrainOptions t;
  // Every rank refuses an --out that holds output (only rank 0 writes it).
  CheckFolderTarget(f.out, f.force, "--out");
  t.run = f.run.Resolve();
  t.run.kernel_threads = f.threads;
  t.bucket_size = f.bucket_size;
  t.compare_reference = f.compare;
  const std::optional<CheckpointMetadata> loaded = ResolveLoad(f, t);
  ResolveSave(f, loaded, t);
  return t;
}

void PrintVerdict(const TrainResult& r, const std::string& out) {
  PrintMemory(r);
  if (r.first_mismatch)
    std::cout << "FAIL: first mismatch at step " << r.first_mismatch->step << " on rank "
              << r.first_mismatch->rank << ": " << r.first_mismatch->detail << "\n";
  else if (r.compared)
    std::cout << "PASS: bitwise equal to the reference at every step\n";
  std::cout << "wrote " << out << "/result.json, final.safetensors, config.json\n";
}

int Train(const TrainFlags& f) {
  at::set_num_threads(f.threads);
  const TrainOptions t = ResolveTrain(f);
  const int world = DistEnvFromEnvironment().world_size;
  if (t.run.micro_batches % world != 0)
    throw Error("DP size " + std::to_string(world) +
                " (the launcher's world size) does not divide "
                "--micro-batches " +
                std::to_string(t.run.micro_batches) +
                ": every rank takes the same number of micro-batches");
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  std::unique_ptr<Communicator> comm =
      ConnectFromEnvironment(BackendFor(t.run.device, f.backend), timeout);
  const bool root = comm->rank() == 0;
  std::optional<OutputFolder> out;
  if (root) {
    out.emplace(f.out, f.force);
    std::cout << "train " << t.run.setup.name << " on " << t.run.model.name << " ("
              << DtypeName(t.run.dtype) << "), dp " << comm->size() << ", backend "
              << comm->backend() << ", device " << t.run.device.str() << ", " << t.run.steps
              << " steps\n";
  }
  TrainResult r = RunDistributed(t, *comm, root ? &std::cout : nullptr);
  if (root) {
    const std::string& dir = out->Staging();
    WriteJsonFile(dir + "/result.json", TrainResultJson(t, comm->size(), r));
    WriteFinalState(dir + "/final.safetensors", r.final_state);
    WriteJsonFile(dir + "/config.json", RunConfigJson(t.run, r.final_state.step));
    out->Commit();
    PrintVerdict(r, f.out);
  }
  comm->Barrier();
  return r.ok ? 0 : 1;
}

void RegisterSaveAndLoad(CLI::App* cmd, TrainFlags& f) {
  cmd->add_option("--save-at", f.save_at, "save a checkpoint after this step (0: never)")
      ->check(IntIn(0, kMaxSteps, "steps of one run"));
  cmd->add_option("--save-dir", f.save_dir, "checkpoint folder to create (must not exist)");
  cmd->add_option_function<std::string>(
         "--sharding-type",
         [&f](const std::string& v) {
           f.sharding = v;
           f.sharding_given = true;
         },
         "dp_reshardable (default) | fully_reshardable | dp_zero_gather_scatter | "
         "fully_sharded_model_space; with --load it must be the checkpoint's")
      ->type_name("TYPE");
  cmd->add_option("--save-sharding-type", f.save_sharding,
                  "the type of this run's save when it differs from --sharding-type or, with "
                  "--load, from the loaded checkpoint's");
  cmd->add_option("--load", f.load_dir,
                  "load this checkpoint first (a folder of saves: its `latest`) at this run's DP "
                  "size and continue to --steps");
  cmd->add_flag("--allow-missing", f.allow_missing,
                "loading: state tensors the checkpoint lacks start from zero (default: strict)");
  cmd->add_flag("--ignore-unexpected", f.ignore_unexpected,
                "loading: skip checkpoint tensors this optimizer does not use (default: strict)");
  cmd->add_flag("--strict-hparams", f.strict_hparams,
                "loading: refuse a checkpoint saved with other hyperparameters (default: a warning "
                "per difference)");
  cmd->add_flag("--override-lr-schedule", f.override_schedule,
                "loading: keep this run's lr schedule when the checkpoint's differs (Megatron's "
                "--override-opt_param-scheduler)");
  cmd->add_flag(
      "--use-checkpoint-lr-schedule", f.checkpoint_schedule,
      "loading: continue with the checkpoint's lr schedule when it differs from this run's "
      "(Megatron's --use-checkpoint-opt_param-scheduler)");
}

}  // namespace

void AddTrainCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "train",
      "One rank of a DistributedOptimizer run on oracle gradients (run it under `shardcheck "
      "launch --nproc N --`, torchrun, srun or mpirun). With --compare-reference every rank runs "
      "the reference beside it and compares its shard and the gathered params bytewise after "
      "every step. Rank 0 writes DIR/result.json, DIR/final.safetensors and DIR/config.json.");
  auto f = std::make_shared<TrainFlags>();
  f->run.Register(cmd);
  RegisterSaveAndLoad(cmd, *f);
  cmd->add_option("--out", f->out,
                  "output folder to create (absent or empty; rank 0 writes it when the run ends)")
      ->required();
  cmd->add_flag("--force", f->force, "replace --out when it exists and is not empty");
  cmd->add_option("--bucket-size", f->bucket_size, "bucket size in elements (0: one bucket)")
      ->capture_default_str()
      ->check(IntIn(0, 1LL << 40, "elements of one bucket"));
  cmd->add_flag("--compare-reference", f->compare,
                "run the reference beside it and compare bytewise after every step");
  cmd->add_option("--backend", f->backend,
                  "gloo | nccl | auto (the device's: nccl on cuda, gloo on cpu)")
      ->capture_default_str();
  cmd->add_option("--timeout", f->timeout_s, "collective timeout in seconds")
      ->capture_default_str()
      ->check(RealIn(0, 604800, "at most a week", true));
  cmd->add_option("--threads", f->threads,
                  "threads per rank: the fused shard kernels split over them (the same bits for "
                  "any count), and libtorch's intra-op threads")
      ->capture_default_str()
      ->check(IntIn(1, 1024, "threads of one rank"));
  cmd->callback([&action, f] { action = [f]() { return Train(*f); }; });
}

}  // namespace shardcheck
