// Helpers shared by the checkpoint tests: a small model that gives several
// buckets, params under 64 elements and params cut across ranks, and runs
// of it on thread-ranks.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "harness/cell/thread_ranks.h"

namespace shardcheck {
namespace testing_util {

// mixed-small (testing/model_spec.h): several buckets at bucket_size 1000,
// params under 64 elements, params cut across ranks.
inline ModelSpec CheckpointModel() { return MixedSmallSpec(); }

inline TrainOptions CheckpointRun(const std::string& setup, c10::ScalarType dtype, int steps) {
  TrainOptions t;
  t.run.model = CheckpointModel();
  t.run.setup = OptimizerSetup::Defaults(setup);
  t.run.setup.main.Set("weight_decay", 0.02);
  if (t.run.setup.scalar) t.run.setup.scalar->Set("weight_decay", 0.02);
  t.run.steps = steps;
  t.run.seed = 2024;
  t.run.dtype = dtype;
  t.bucket_size = 1000;
  t.compare_reference = true;
  return t;
}

// A run of `setup` (no reference) that saves at step 2 into `dir`.
inline ThreadRun SaveAtStep2(const std::string& setup, const std::string& dir, ShardingType type,
                             int dp = 2, c10::ScalarType dtype = at::kFloat,
                             int64_t bucket_size = 1000) {
  TrainOptions t = CheckpointRun(setup, dtype, 2);
  t.compare_reference = false;
  t.bucket_size = bucket_size;
  t.save_at = 2;
  t.save_dir = dir;
  t.sharding_type = type;
  return RunTrainOnThreads(t, dp);
}

// A fresh folder under the temp dir, removed by the destructor.
class TempDir {
 public:
  // A fresh folder (mkdtemp): never one a killed earlier run left behind.
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "shardcheck_ckpt_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Sub(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace testing_util
}  // namespace shardcheck
