// Checkpoint save and load of the DistributedOptimizer, for each sharding
// type, against a plain sequential write and read of the same bytes, on the
// GPT-shaped AdamW models of bench/scaling_model.h (12 bytes of fp32 main
// param and state per param: 1M, 16M (about 200 MB) and 80M (about 1 GB)
// params). Ranks are threads of this process over the in-process
// communicator (the collectives of a save or load are a few small
// messages; what is measured is the files). Every figure is rank 0's wall
// time of one call, GB/s over the checkpoint's file bytes:
//
//   checkpoint/plain/write/N        one file of 12N bytes, 64 MiB writes, fsync
//   checkpoint/plain/read_cold/N    the same file read back after
//                                   posix_fadvise(POSIX_FADV_DONTNEED)
//   checkpoint/plain/read_warm/N    read back from the page cache
//   checkpoint/<type>/save/N        SaveCheckpoint at dp 2 (its commit
//                                   protocol: fsync of every file, rename)
//   checkpoint/<type>/load_warm/N   LoadCheckpoint at dp 2 of a dp-2 save,
//                                   files in the page cache
//   checkpoint/<type>/load_cold/N   the same after POSIX_FADV_DONTNEED
//   checkpoint/<type>/load_reshard_cold/N   LoadCheckpoint at dp 2 of a dp-4
//                                   save (a DP change), cold; counters
//                                   same_dp_ms and over_same_dp: a cold
//                                   same-DP load timed beside it, in turns
//
// Every load is timed after an untimed load of the same checkpoint into the
// same optimizer (its staging memory touched once, its files read once).
//
// The files live under --scratch_dir (default out/bench/scratch), removed
// as each size's benchmarks end.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/scaling_model.h"
#include "bench/step_bench.h"
#include "bench/suites.h"
#include "distributed/checkpoint.h"
#include "distributed/communicator_local.h"
#include "distributed/distrib_optimizer.h"
#include "spec/config.h"
#include "spec/error.h"

namespace shardcheck::bench {
namespace {

namespace fs = std::filesystem;

// The optimizer whose state is saved: fp32 main param and two moments, the
// 12 bytes per param the sizes above are chosen for.
constexpr const char* kSetup = "adamw";
constexpr int kSaveDp = 2, kReshardFromDp = 4;
constexpr auto kTimeout = std::chrono::seconds(600);
constexpr size_t kChunk = size_t{64} << 20;

std::string& ScratchRoot() {
  static std::string root = "out/bench/scratch";
  return root;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

void OnLocalRanks(int dp, const std::function<void(Communicator&)>& body) {
  for (const std::exception_ptr& e : RunLocalRanksInProcess(dp, kTimeout, body))
    if (e) std::rethrow_exception(e);
}

// Drops the page cache's copy of `file` (written back first), so that the
// next read comes from the disk.
void DropCachedFile(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) throw Error("cannot open " + file + ": " + std::strerror(errno));
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// The same for every file under `dir`.
void DropCached(const std::string& dir) {
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) DropCachedFile(e.path().string());
}

int64_t BytesUnder(const std::string& dir) {
  int64_t bytes = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) bytes += static_cast<int64_t>(e.file_size());
  return bytes;
}

// The AdamW optimizer of one rank after one step on the scaling model.
std::unique_ptr<DistributedOptimizer> SteppedOptimizer(const ModelSpec& model,
                                                       const std::vector<at::Tensor>& params,
                                                       const std::vector<at::Tensor>& grads,
                                                       Communicator& comm) {
  auto opt = std::make_unique<DistributedOptimizer>(OptimizerSetup::Defaults(kSetup), model.params,
                                                    at::kFloat, comm);
  opt->SetParams(params);
  for (size_t i = 0; i < grads.size(); ++i) opt->Grad(static_cast<int>(i)).copy_(grads[i]);
  opt->Step();
  return opt;
}

// A folder made empty on construction and removed with its owner.
class ScratchFolder {
 public:
  explicit ScratchFolder(std::string path) : path_(std::move(path)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ScratchFolder(ScratchFolder&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  ScratchFolder& operator=(ScratchFolder&&) = delete;
  ~ScratchFolder() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Everything the benchmarks of one size share: the model, a scratch folder,
// the plain file and, per sharding type, a dp-2 and a dp-4 save (built on
// first use; one type's at a time).
struct SizeFixture {
  ModelSpec model;
  std::vector<at::Tensor> params, grads;
  ScratchFolder scratch;
  std::string root;
  std::string plain_file;
  ShardingType saved_type = ShardingType::kDpReshardable;
  bool saved = false;
  int saves = 0;
  int paired_loads = 0;  // resharded loads timed so far (their order alternates)

  explicit SizeFixture(int64_t n)
      : model(ScalingModel(n)),
        params(ScalingParams(model)),
        grads(ScalingGrads(model)),
        scratch(ScratchRoot() + "/checkpoint-" + std::to_string(n)),
        root(scratch.path()) {}

  std::string SavedDir(ShardingType t, int dp) const {
    return root + "/" + ShardingTypeName(t) + "-dp" + std::to_string(dp);
  }
  // Saves `t` at dp 2 and dp 4 unless done; removes the previous type's.
  void EnsureSaved(ShardingType t) {
    if (saved && saved_type == t) return;
    if (saved)
      for (int dp : {kSaveDp, kReshardFromDp}) fs::remove_all(SavedDir(saved_type, dp));
    saved = false;
    for (int dp : {kSaveDp, kReshardFromDp})
      OnLocalRanks(dp, [&](Communicator& comm) {
        SaveCheckpoint(*SteppedOptimizer(model, params, grads, comm), SavedDir(t, dp), t);
      });
    saved = true;
    saved_type = t;
  }
  std::string NewSaveDir() { return root + "/save-" + std::to_string(saves++); }
};

SizeFixture& Fixture(int64_t n) {
  return Reused<SizeFixture>("checkpoint/" + std::to_string(n), [&] { return SizeFixture(n); });
}

int64_t PlainBytes(int64_t n) { return 12 * n; }

void SetBytes(benchmark::State& state, int64_t bytes) {
  SetTrafficCounters(state, state.range(0), static_cast<double>(bytes));
}

void PlainWrite(benchmark::State& state) {
  SizeFixture& f = Fixture(state.range(0));
  const int64_t bytes = PlainBytes(state.range(0));
  std::vector<char> chunk(kChunk);
  for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<char>(i * 131 + 7);
  f.plain_file = f.root + "/plain.bin";
  for (auto _ : state) {
    fs::remove(f.plain_file);
    const auto start = std::chrono::steady_clock::now();
    const int fd = ::open(f.plain_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) throw Error("cannot create " + f.plain_file + ": " + std::strerror(errno));
    for (int64_t done = 0; done < bytes;) {
      const size_t want = static_cast<size_t>(std::min<int64_t>(bytes - done, kChunk));
      const ssize_t w = ::write(fd, chunk.data(), want);
      if (w <= 0) throw Error("cannot write " + f.plain_file + ": " + std::strerror(errno));
      done += w;
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0)
      throw Error("cannot fsync " + f.plain_file + ": " + std::strerror(errno));
    state.SetIterationTime(Seconds(start));
  }
  SetBytes(state, bytes);
}

void PlainRead(benchmark::State& state, bool cold) {
  SizeFixture& f = Fixture(state.range(0));
  if (f.plain_file.empty() || !fs::exists(f.plain_file)) {
    state.SkipWithError("checkpoint/plain/write did not run before (filter it in)");
    return;
  }
  std::vector<char> chunk(kChunk);
  int64_t bytes = 0;
  for (auto _ : state) {
    if (cold) DropCachedFile(f.plain_file);
    const auto start = std::chrono::steady_clock::now();
    const int fd = ::open(f.plain_file.c_str(), O_RDONLY);
    if (fd < 0) throw Error("cannot open " + f.plain_file + ": " + std::strerror(errno));
    bytes = 0;
    for (ssize_t r; (r = ::read(fd, chunk.data(), chunk.size())) > 0;) bytes += r;
    ::close(fd);
    state.SetIterationTime(Seconds(start));
  }
  SetBytes(state, bytes);
}

void Save(benchmark::State& state, ShardingType type) {
  SizeFixture& f = Fixture(state.range(0));
  int64_t bytes = 0;
  for (auto _ : state) {
    const std::string dir = f.NewSaveDir();
    double seconds = 0;
    OnLocalRanks(kSaveDp, [&](Communicator& comm) {
      auto opt = SteppedOptimizer(f.model, f.params, f.grads, comm);
      comm.Barrier();
      const auto start = std::chrono::steady_clock::now();
      SaveCheckpoint(*opt, dir, type);
      if (comm.rank() == 0) seconds = Seconds(start);
    });
    state.SetIterationTime(seconds);
    bytes = BytesUnder(dir);
    fs::remove_all(dir);
  }
  SetBytes(state, bytes);
}

enum class LoadKind { kWarm, kCold, kReshardCold };

// Rank 0's wall time of one LoadCheckpoint of `dir` into `opt`, after the
// files are dropped from the page cache when `cold`. Every rank calls it.
double TimedLoad(DistributedOptimizer& opt, const std::string& dir, bool cold, Communicator& comm) {
  if (comm.rank() == 0 && cold) DropCached(dir);
  comm.Barrier();
  const auto start = std::chrono::steady_clock::now();
  LoadCheckpoint(opt, dir);
  const double seconds = Seconds(start);
  comm.Barrier();
  return comm.rank() == 0 ? seconds : 0;
}

// A cold load of a dp-4 save and a cold load of the dp-2 save, in the same
// iteration and in turns (which goes first alternates), into one optimizer
// after an untimed load of each: the iteration's time is the resharded
// load's, and "over_same_dp" its ratio to the same-DP load beside it. A
// slow spell of the VM's storage (the first cold reads of files a process
// has read little yet run up to 2x the later ones) then falls on both.
void ReshardedLoad(benchmark::State& state, ShardingType type) {
  SizeFixture& f = Fixture(state.range(0));
  f.EnsureSaved(type);
  const std::string resharded = f.SavedDir(type, kReshardFromDp), same = f.SavedDir(type, kSaveDp);
  for (auto _ : state) {
    double reshard_s = 0, same_s = 0;
    const bool reshard_first = f.paired_loads++ % 2 == 0;
    OnLocalRanks(kSaveDp, [&](Communicator& comm) {
      DistributedOptimizer opt(OptimizerSetup::Defaults(kSetup), f.model.params, at::kFloat, comm);
      LoadCheckpoint(opt, same);
      LoadCheckpoint(opt, resharded);
      const auto cold_load = [&](const std::string& dir) { return TimedLoad(opt, dir, true, comm); };
      double r = 0, s = 0;
      if (reshard_first) {
        r = cold_load(resharded);
        s = cold_load(same);
      } else {
        s = cold_load(same);
        r = cold_load(resharded);
      }
      if (comm.rank() == 0) reshard_s = r, same_s = s;
    });
    state.SetIterationTime(reshard_s);
    state.counters["same_dp_ms"] = same_s * 1e3;
    state.counters["over_same_dp"] = reshard_s / same_s;
  }
  SetBytes(state, BytesUnder(resharded));
}

// kWarm and kCold: a load of the dp-2 save at dp 2, timed after an untimed
// load of the same files (for kWarm that brings them into the cache).
void Load(benchmark::State& state, ShardingType type, LoadKind kind) {
  if (kind == LoadKind::kReshardCold) return ReshardedLoad(state, type);
  SizeFixture& f = Fixture(state.range(0));
  f.EnsureSaved(type);
  const std::string dir = f.SavedDir(type, kSaveDp);
  for (auto _ : state) {
    double seconds = 0;
    OnLocalRanks(kSaveDp, [&](Communicator& comm) {
      DistributedOptimizer opt(OptimizerSetup::Defaults(kSetup), f.model.params, at::kFloat, comm);
      LoadCheckpoint(opt, dir);
      const double t = TimedLoad(opt, dir, kind == LoadKind::kCold, comm);
      if (comm.rank() == 0) seconds = t;
    });
    state.SetIterationTime(seconds);
  }
  SetBytes(state, BytesUnder(dir));
}

const std::vector<int64_t>& CheckpointSizes() {
  static const std::vector<int64_t> sizes = {int64_t{1} << 20, int64_t{16} << 20,
                                             int64_t{80} << 20};
  return sizes;
}

benchmark::internal::Benchmark* Timed(benchmark::internal::Benchmark* b, int64_t n) {
  return b->Arg(n)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

void SetCheckpointScratchDir(const std::string& dir) { ScratchRoot() = dir; }

void RegisterCheckpointBenchmarks() {
  for (int64_t n : CheckpointSizes()) {
    Timed(benchmark::RegisterBenchmark("checkpoint/plain/write", PlainWrite), n);
    Timed(benchmark::RegisterBenchmark("checkpoint/plain/read_cold", PlainRead, true), n);
    Timed(benchmark::RegisterBenchmark("checkpoint/plain/read_warm", PlainRead, false), n);
    for (ShardingType t : AllShardingTypes()) {
      const std::string at = "checkpoint/" + ShardingTypeName(t);
      Timed(benchmark::RegisterBenchmark((at + "/save").c_str(), Save, t), n);
      Timed(benchmark::RegisterBenchmark((at + "/load_warm").c_str(), Load, t, LoadKind::kWarm), n);
      Timed(benchmark::RegisterBenchmark((at + "/load_cold").c_str(), Load, t, LoadKind::kCold), n);
      Timed(benchmark::RegisterBenchmark((at + "/load_reshard_cold").c_str(), Load, t,
                                         LoadKind::kReshardCold),
            n);
    }
  }
}

}  // namespace shardcheck::bench
