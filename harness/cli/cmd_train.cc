// `shardcheck train`: one rank of a distributed oracle run (start it under
// `shardcheck launch`, torchrun, srun or mpirun; alone it is DP size 1).
#include <ATen/Parallel.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "distributed/rendezvous.h"
#include "harness/cell/dist_train.h"
#include "harness/cell/run_files.h"
#include "harness/cli/cli.h"
#include "harness/cli/cli_options.h"
#include "spec/device.h"
#include "spec/error.h"

namespace shardcheck {

namespace {

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

}  // namespace

void AddTrainCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "train",
      "One rank of a DistributedOptimizer run on oracle gradients (run it under `shardcheck "
      "launch --nproc N --`, torchrun, srun or mpirun). With --compare-reference every rank runs "
      "the reference beside it and compares its shard and the gathered params bytewise after "
      "every step. Rank 0 writes DIR/result.json, DIR/final.safetensors and DIR/config.json.");
  auto opts = std::make_shared<OracleCliOptions>();
  auto out = std::make_shared<std::string>();
  auto bucket_size = std::make_shared<int64_t>(0);
  auto compare = std::make_shared<bool>(false);
  auto backend = std::make_shared<std::string>("auto");
  auto timeout_s = std::make_shared<double>(120.0);
  auto threads = std::make_shared<int>(1);
  auto save_at = std::make_shared<int>(0);
  auto save_dir = std::make_shared<std::string>();
  auto sharding = std::make_shared<std::string>("dp_reshardable");
  auto load_dir = std::make_shared<std::string>();
  auto allow_missing = std::make_shared<bool>(false);
  auto ignore_unexpected = std::make_shared<bool>(false);
  auto override_schedule = std::make_shared<bool>(false);
  auto checkpoint_schedule = std::make_shared<bool>(false);
  opts->Register(cmd);
  cmd->add_option("--save-at", *save_at, "save a checkpoint after this step (0: never)");
  cmd->add_option("--save-dir", *save_dir, "checkpoint folder to create (must not exist)");
  cmd->add_option("--sharding-type", *sharding,
                  "dp_reshardable | fully_reshardable | dp_zero_gather_scatter | "
                  "fully_sharded_model_space")
      ->capture_default_str();
  cmd->add_option("--load", *load_dir,
                  "load this checkpoint first (at this run's DP size) and continue to --steps");
  cmd->add_flag("--allow-missing", *allow_missing,
                "loading: state tensors the checkpoint lacks start from zero (default: strict)");
  cmd->add_flag("--ignore-unexpected", *ignore_unexpected,
                "loading: skip checkpoint tensors this optimizer does not use (default: strict)");
  cmd->add_flag("--override-lr-schedule", *override_schedule,
                "loading: keep this run's lr schedule when the checkpoint's differs (Megatron's "
                "--override-opt_param-scheduler)");
  cmd->add_flag(
      "--use-checkpoint-lr-schedule", *checkpoint_schedule,
      "loading: continue with the checkpoint's lr schedule when it differs from this run's "
      "(Megatron's --use-checkpoint-opt_param-scheduler)");
  cmd->add_option("--out", *out, "output folder (rank 0 writes it)")->required();
  cmd->add_option("--bucket-size", *bucket_size, "bucket size in elements (0: one bucket)")
      ->capture_default_str();
  cmd->add_flag("--compare-reference", *compare,
                "run the reference beside it and compare bytewise after every step");
  cmd->add_option("--backend", *backend,
                  "gloo | nccl | auto (the device's: nccl on cuda, gloo on cpu)")
      ->capture_default_str();
  cmd->add_option("--timeout", *timeout_s, "collective timeout in seconds")->capture_default_str();
  cmd->add_option("--threads", *threads, "libtorch intra-op threads per rank")
      ->capture_default_str();
  cmd->callback([&action, opts, out, bucket_size, compare, backend, timeout_s, threads, save_at,
                 save_dir, sharding, load_dir, allow_missing, ignore_unexpected, override_schedule,
                 checkpoint_schedule] {
    action = [=]() {
      at::set_num_threads(*threads);
      TrainOptions t;
      t.run = opts->Resolve();
      t.bucket_size = *bucket_size;
      t.compare_reference = *compare;
      t.save_at = *save_at;
      t.save_dir = *save_dir;
      t.sharding_type = ParseShardingType(*sharding);
      if (t.save_at > 0 && t.save_dir.empty()) throw Error("--save-at needs --save-dir");
      if (t.save_at > t.run.steps)
        throw Error("--save-at " + std::to_string(t.save_at) + " is after the last step " +
                    std::to_string(t.run.steps));
      t.load_dir = *load_dir;
      t.load_options.allow_missing = *allow_missing;
      t.load_options.ignore_unexpected = *ignore_unexpected;
      if (*override_schedule && *checkpoint_schedule)
        throw Error(
            "--override-lr-schedule and --use-checkpoint-lr-schedule exclude each other: say which "
            "schedule wins");
      if ((*override_schedule || *checkpoint_schedule) && t.load_dir.empty())
        throw Error("--override-lr-schedule and --use-checkpoint-lr-schedule need --load");
      if (*override_schedule) t.load_options.lr_schedule = LoadOptions::LrScheduleChoice::kRun;
      if (*checkpoint_schedule)
        t.load_options.lr_schedule = LoadOptions::LrScheduleChoice::kCheckpoint;
      const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout_s * 1000));
      std::unique_ptr<Communicator> comm =
          ConnectFromEnvironment(BackendFor(t.run.device, *backend), timeout);
      const bool root = comm->rank() == 0;
      if (root) {
        std::filesystem::create_directories(*out);
        std::cout << "train " << t.run.setup.name << " on " << t.run.model.name << " ("
                  << DtypeName(t.run.dtype) << "), dp " << comm->size() << ", backend "
                  << comm->backend() << ", device " << t.run.device.str() << ", " << t.run.steps
                  << " steps\n";
      }
      TrainResult r = RunDistributed(t, *comm, root ? &std::cout : nullptr);
      if (root) {
        WriteJsonFile(*out + "/result.json", TrainResultJson(t, comm->size(), r));
        WriteFinalState(*out + "/final.safetensors", r.final_state);
        WriteJsonFile(*out + "/config.json", RunConfigJson(t.run, r.final_state.step));
        PrintMemory(r);
        if (r.first_mismatch)
          std::cout << "FAIL: first mismatch at step " << r.first_mismatch->step << " on rank "
                    << r.first_mismatch->rank << ": " << r.first_mismatch->detail << "\n";
        else if (r.compared)
          std::cout << "PASS: bitwise equal to the reference at every step\n";
        std::cout << "wrote " << *out << "/result.json, final.safetensors, config.json\n";
      }
      comm->Barrier();
      return r.ok ? 0 : 1;
    };
  });
}

}  // namespace shardcheck
