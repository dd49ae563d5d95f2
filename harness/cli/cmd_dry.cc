// `shardcheck dry`: the checkpoint engine's layout, save plan, metadata and
// resharded-load plan for a real-scale param list, without tensor data
// (distributed/dry_checkpoint.h; docs/performance.md "Cost at scale").
// Prints, per sharding type, the time of each step, the metadata's size,
// the files and chunks, and the process's peak memory; --json prints one
// object for bench/scale.py.
#include <sys/resource.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <climits>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "distributed/dry_checkpoint.h"
#include "distributed/file_util.h"
#include "distributed/sharding_format.h"
#include "harness/cli/cli.h"
#include "harness/cli/numeric_flags.h"
#include "harness/scale/scale_presets.h"
#include "spec/error.h"
#include "spec/schema.h"

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

struct DryArgs {
  std::string preset = "gpt-175b";
  std::string shapes;
  int layers = 0;
  int dp = 4096;
  int reshard_to = -1;  // -1: 3/4 of dp; 0: none
  std::string sharding = "all";
  std::string optimizer = "adamw";
  std::string model_dtype = "bf16";
  long long bucket_size = -1;  // -1: Megatron's default for dp
  bool json = false;
  std::string write_metadata;
  int repeat = 1;
};

// Megatron-LM's default bucket size: max(40M, 1M x dp) elements.
int64_t MegatronBucketSize(int dp) { return std::max<int64_t>(40000000, 1000000LL * dp); }

// Resident and peak resident memory of this process, in bytes.
uint64_t CurrentRss() {
  std::ifstream in("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}
uint64_t PeakRss() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;
}

// Every size's repeats alike: all memory from the heap, and none given
// back, so a repeat reuses the pages of the one before whatever its size
// (each step's time is the fastest repeat: the engine's work without the
// first touch of its pages). glibc otherwise serves blocks over an
// adaptive threshold (up to 32 MB) with fresh mappings and trims the heap
// as it goes: a small model's texts and records then reuse warm pages
// while a large model's fault in anew on every repeat, and a slope over
// the sizes reads that difference as growth (docs/performance.md, "How
// each cost grows").
void KeepHeapWarm() {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

uint64_t Max(const std::vector<uint64_t>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
uint64_t Sum(const std::vector<uint64_t>& v) {
  uint64_t s = 0;
  for (uint64_t x : v) s += x;
  return s;
}

nlohmann::ordered_json TypeResult(const DryModel& model, ShardingType type, const DryArgs& a,
                                  int reshard_to) {
  std::fprintf(stderr, "dry: %s at dp %d ...\n", type.name(), a.dp);
  DrySave save = PlanDrySave(model, type, a.dp);
  for (int i = 1; i < a.repeat; ++i) {  // each time the fastest of the repeats
    const DrySave again = PlanDrySave(model, type, a.dp);
    save.layout_seconds = std::min(save.layout_seconds, again.layout_seconds);
    save.plan_seconds = std::min(save.plan_seconds, again.plan_seconds);
    save.metadata_seconds = std::min(save.metadata_seconds, again.metadata_seconds);
  }
  nlohmann::ordered_json r = {{"type", type.name()},
                              {"layout_s", save.layout_seconds},
                              {"plan_s", save.plan_seconds},
                              {"metadata_s", save.metadata_seconds},
                              {"metadata_bytes", save.metadata_bytes},
                              {"record_bytes_max", Max(save.record_bytes)},
                              {"record_bytes_total", Sum(save.record_bytes)},
                              {"header_bytes_max", Max(save.header_bytes)},
                              {"header_bytes_total", Sum(save.header_bytes)},
                              {"files", save.files},
                              {"chunks", save.chunks}};
  if (!a.write_metadata.empty()) {
    const fs::path dir = fs::path(a.write_metadata) / type.name();
    fs::create_directories(dir);
    WriteFileAtomic((dir / "metadata.json").string(), MetadataFileText(save.metadata));
  }
  if (reshard_to > 0) {
    std::fprintf(stderr, "dry: %s load plan at dp %d ...\n", type.name(), reshard_to);
    // As a load does: on metadata.json read back (its bytes, parsed), not
    // on the saver's copy in memory.
    const CheckpointMetadata read =
        ParseMetadataText(MetadataFileText(save.metadata), std::string(type.name()) + "/metadata.json");
    DryLoad load = PlanDryLoad(model, read, reshard_to);
    for (int i = 1; i < a.repeat; ++i) {
      const DryLoad again = PlanDryLoad(model, read, reshard_to);
      load.seconds = std::min(load.seconds, again.seconds);
      load.max_rank_seconds = std::min(load.max_rank_seconds, again.max_rank_seconds);
    }
    r["reshard_plan_s"] = load.seconds;
    r["reshard_max_rank_s"] = load.max_rank_seconds;
    r["reshard_pieces"] = load.pieces;
    r["reshard_chunk_reads"] = load.chunk_reads;
  }
  return r;
}

void PrintTable(const nlohmann::ordered_json& j) {
  std::printf("model       %s: %lld tensors, %.1fB elements; %s, %s\n",
              j["model"].get<std::string>().c_str(), j["tensors"].get<long long>(),
              j["elements"].get<double>() / 1e9, j["optimizer"].get<std::string>().c_str(),
              j["model_dtype"].get<std::string>().c_str());
  std::printf("dp          %d, load at %d; bucket size %lld (%lld buckets)\n", j["dp"].get<int>(),
              j["reshard_to"].get<int>(), j["bucket_size"].get<long long>(),
              j["buckets"].get<long long>());
  std::printf("%-26s %9s %9s %10s %15s %12s %12s %7s %9s %10s\n", "type", "layout s", "plan s",
              "metadata s", "metadata.json", "rank rec max", "headers", "files", "chunks",
              "reshard s");
  for (const auto& r : j["types"]) {
    char reshard[32] = "-";
    if (r.contains("reshard_plan_s"))
      std::snprintf(reshard, sizeof reshard, "%.3f", r["reshard_plan_s"].get<double>());
    std::printf("%-26s %9.3f %9.3f %10.3f %12.2f MB %9.3f MB %9.2f MB %7lld %9lld %10s\n",
                r["type"].get<std::string>().c_str(), r["layout_s"].get<double>(),
                r["plan_s"].get<double>(), r["metadata_s"].get<double>(),
                r["metadata_bytes"].get<double>() / 1e6, r["record_bytes_max"].get<double>() / 1e6,
                r["header_bytes_total"].get<double>() / 1e6, r["files"].get<long long>(),
                r["chunks"].get<long long>(), reshard);
  }
  std::printf("peak memory %.1f MB (%.1f MB above the start)\n",
              j["peak_rss_bytes"].get<double>() / 1e6,
              (j["peak_rss_bytes"].get<double>() - j["start_rss_bytes"].get<double>()) / 1e6);
}

int RunDry(const DryArgs& a) {
  KeepHeapWarm();
  const uint64_t start_rss = CurrentRss();
  DryModel model;
  model.params = a.shapes.empty() ? ScalePresetParams(a.preset, a.layers) : ReadShapesFile(a.shapes);
  model.setup = OptimizerSetup::Defaults(a.optimizer);
  model.model_dtype = ParseDtype(a.model_dtype);
  model.bucket_size = a.bucket_size >= 0 ? a.bucket_size : MegatronBucketSize(a.dp);
  const std::vector<std::string> states = model.StateNames();  // refuses composites early
  const int reshard_to = a.reshard_to >= 0 ? a.reshard_to : a.dp * 3 / 4;
  std::vector<ShardingType> types;
  if (a.sharding == "all") types = AllShardingTypes();
  else types.push_back(ParseShardingType(a.sharding));

  int64_t elements = 0;
  std::vector<BufferParamSpec> specs;
  for (size_t i = 0; i < model.params.size(); ++i) {
    elements += model.params[i].Numel();
    specs.push_back({static_cast<int>(i), model.params[i].Numel()});
  }
  nlohmann::ordered_json j = {
      {"model", a.shapes.empty() ? a.preset : "shapes:" + a.shapes},
      {"tensors", model.params.size()},
      {"elements", elements},
      {"optimizer", a.optimizer},
      {"states", states},
      {"model_dtype", DtypeName(model.model_dtype)},
      {"dp", a.dp},
      {"reshard_to", reshard_to},
      {"bucket_size", model.bucket_size},
      {"buckets", BufferLayout::Build(specs, 1, model.bucket_size).buckets().size()},
      {"types", nlohmann::ordered_json::array()}};
  for (const ShardingType t : types) j["types"].push_back(TypeResult(model, t, a, reshard_to));
  j["start_rss_bytes"] = start_rss;
  j["peak_rss_bytes"] = PeakRss();
  if (a.json) std::cout << j.dump(1) << "\n";
  else PrintTable(j);
  std::fflush(stdout);
  return 0;
}

}  // namespace

void AddDryCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "dry",
      "Plan checkpoints of a real-scale model without tensor data (docs/performance.md, \"Cost at "
      "scale\"): for each sharding type, the buffer layout at --dp, what every rank's save writes "
      "(chunks, safetensors headers), the metadata.json rank 0 commits, and the reads a load at "
      "--reshard-to plans, with the time of each step, the sizes, the files and the peak memory.");
  auto a = std::make_shared<DryArgs>();
  auto* preset = cmd->add_option("--preset", a->preset, "model: " + ScalePresetNames())
                     ->capture_default_str();
  auto* shapes =
      cmd->add_option("--shapes", a->shapes,
                      "a shapes file instead of a preset: one param per line, [name=]NxM[:role]")
          ->check(CLI::ExistingFile)
          ->excludes(preset);
  cmd->add_option("--layers", a->layers, "layers of the preset (0: its own)")
      ->check(IntIn(0, 10000))
      ->excludes(shapes);
  cmd->add_option("--dp", a->dp, "DP size of the save")->capture_default_str()->check(IntIn(1, 1 << 20));
  cmd->add_option("--reshard-to", a->reshard_to, "DP size of the load to plan (default 3/4 of --dp; 0: none)")
      ->check(IntIn(0, 1 << 20));
  cmd->add_option("--sharding", a->sharding, "a sharding type, or all")->capture_default_str();
  cmd->add_option("--optimizer", a->optimizer, "an elementwise setup (its states are planned)")
      ->capture_default_str();
  cmd->add_option("--model-dtype", a->model_dtype, "fp32 or bf16")->capture_default_str();
  cmd->add_option("--bucket-size", a->bucket_size,
                  "bucket size in elements (0: one bucket; default Megatron's max(40M, 1M x dp))")
      ->check(IntIn(0, 1LL << 50));
  cmd->add_option("--repeat", a->repeat,
                  "plan each save and load this many times; each step's time is the fastest")
      ->capture_default_str()
      ->check(IntIn(1, 100));
  cmd->add_flag("--json", a->json, "print one JSON object instead of the table");
  cmd->add_option("--write-metadata", a->write_metadata,
                  "also write each type's planned metadata.json to DIR/<type>/ (for inspect "
                  "--metadata-only)");
  cmd->callback([&action, a] { action = [a] { return RunDry(*a); }; });
}

}  // namespace shardcheck
