// LR schedules across checkpoints: a run resumed at a step in the warm-up,
// in the decay or past it, at the same or another DP size, follows the same
// per-step lr and ends bitwise where the uninterrupted run ends; a schedule
// that differs from the checkpoint's is refused unless the run says which
// wins; an older (version 1) checkpoint is read as a constant schedule.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "distributed/file_util.h"
#include "harness/cell/checkpoint_test_util.h"

namespace shardcheck {
namespace {

using testing_util::CheckpointRun;
using testing_util::TempDir;

constexpr int kSteps = 13;

// Warm-up 3, cosine decay over 6 more steps to 1/10 of the lr, then flat.
LrSchedule WarmupCosine(double lr) {
  LrSchedule s;
  s.style = LrDecayStyle::kCosine;
  s.warmup_steps = 3;
  s.decay_steps = 6;
  s.min_lr = lr / 10;
  return s;
}

TrainOptions ScheduledRun(const std::string& setup, int steps, const LrSchedule& schedule) {
  TrainOptions t = CheckpointRun(setup, at::kBFloat16, steps);
  t.run.setup.lr_schedule = schedule;
  return t;
}

std::vector<std::string> Failures(const ThreadRun& run) {
  std::vector<std::string> out = run.errors;
  if (run.root.first_mismatch)
    out.push_back("step " + std::to_string(run.root.first_mismatch->step) + ": " +
                  run.root.first_mismatch->detail);
  return out;
}

struct ResumeCase {
  std::string setup;
  int save_at;  // 2: in the warm-up; 6: in the decay; 11: past it
  int save_dp, load_dp;
};

std::string CaseName(const ResumeCase& c) {
  return c.setup + "_save" + std::to_string(c.save_at) + "_dp" + std::to_string(c.save_dp) +
         "_to_dp" + std::to_string(c.load_dp);
}

void PrintTo(const ResumeCase& c, std::ostream* os) { *os << CaseName(c); }

class ScheduledResume : public testing::TestWithParam<ResumeCase> {};

TEST_P(ScheduledResume, SameLrEveryStepAndBitwiseFinalState) {
  const ResumeCase& c = GetParam();
  TempDir tmp;
  const double lr = OptimizerSetup::Defaults(c.setup).main.lr();
  TrainOptions full = ScheduledRun(c.setup, kSteps, WarmupCosine(lr));
  full.save_at = c.save_at;
  full.save_dir = tmp.Sub("ckpt");
  const ThreadRun uninterrupted = RunTrainOnThreads(full, c.save_dp);
  ASSERT_TRUE(Failures(uninterrupted).empty()) << Failures(uninterrupted).front();

  TrainOptions resume = ScheduledRun(c.setup, kSteps, WarmupCosine(lr));
  resume.load_dir = full.save_dir;
  const ThreadRun resumed = RunTrainOnThreads(resume, c.load_dp);
  ASSERT_TRUE(Failures(resumed).empty()) << Failures(resumed).front();
  EXPECT_EQ(resumed.root.resumed_from, c.save_at);

  // The per-step lr of the resumed run is the uninterrupted run's, and the schedule's.
  std::map<int64_t, double> lr_at;
  for (const StepRecord& s : uninterrupted.root.steps) lr_at[s.step] = s.lr;
  int compared = 0;
  for (const StepRecord& s : resumed.root.steps) {
    if (s.after_load) continue;
    ASSERT_TRUE(lr_at.count(s.step));
    EXPECT_EQ(s.lr, lr_at[s.step]) << "step " << s.step;
    EXPECT_EQ(s.lr, lr * WarmupCosine(lr).Factor(s.step, lr)) << "step " << s.step;
    ++compared;
  }
  EXPECT_EQ(compared, kSteps - c.save_at);
  // The run really had a schedule: warm-up, decay and floor give many values.
  std::set<double> distinct;
  for (const auto& [step, value] : lr_at) distinct.insert(value);
  EXPECT_GE(distinct.size(), 8u);
  // Final state, every tensor, bitwise.
  const auto& a = uninterrupted.root.final_state.tensors;
  const auto& b = resumed.root.final_state.tensors;
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, t] : a) {
    ASSERT_TRUE(b.count(key)) << key;
    EXPECT_TRUE(at::equal(t.view(at::kByte), b.at(key).view(at::kByte))) << key;
  }
}

std::vector<ResumeCase> ResumeCases() {
  std::vector<ResumeCase> out;
  for (const std::string setup : {"adamw", "muon_lion"})
    for (int save_at : {2, 6, 11})
      for (auto [a, b] : {std::pair<int, int>{2, 2}, {2, 3}}) out.push_back({setup, save_at, a, b});
  return out;
}

INSTANTIATE_TEST_SUITE_P(WarmupDecayAndPast, ScheduledResume, testing::ValuesIn(ResumeCases()),
                         [](const auto& info) { return CaseName(info.param); });

// Saves a 4-step adamw run with `schedule` into `dir`; returns the run.
ThreadRun SaveWith(const LrSchedule& schedule, const std::string& dir, int steps = 4) {
  TrainOptions t = ScheduledRun("adamw", steps, schedule);
  t.save_at = 4;
  t.save_dir = dir;
  return RunTrainOnThreads(t, 2);
}

ThreadRun LoadWith(const LrSchedule& schedule, const std::string& dir,
                   LoadOptions::LrScheduleChoice choice,
                   const ReferenceTrajectory* reference = nullptr) {
  TrainOptions t = ScheduledRun("adamw", 8, schedule);
  t.load_dir = dir;
  t.load_options.lr_schedule = choice;
  if (reference) t.reference = reference;
  return RunTrainOnThreads(t, 2);
}

TEST(LrScheduleOnLoad, DifferentScheduleIsRefusedNamingBoth) {
  TempDir tmp;
  const double lr = OptimizerSetup::Defaults("adamw").main.lr();
  ASSERT_TRUE(SaveWith(WarmupCosine(lr), tmp.Sub("c")).errors.empty());
  LrSchedule linear = WarmupCosine(lr);
  linear.style = LrDecayStyle::kLinear;
  const ThreadRun run = LoadWith(linear, tmp.Sub("c"), LoadOptions::LrScheduleChoice::kMustMatch);
  ASSERT_EQ(run.errors.size(), 2u) << "some rank loaded a checkpoint with another schedule";
  const std::string& e = run.errors.front();
  for (const char* w : {"cosine, warmup 3", "linear, warmup 3", "--override-lr-schedule",
                        "--use-checkpoint-lr-schedule"})
    EXPECT_NE(e.find(w), std::string::npos) << "'" << w << "' not in: " << e;
}

TEST(LrScheduleOnLoad, DifferentPeakLrIsRefused) {
  TempDir tmp;
  ASSERT_TRUE(SaveWith(LrSchedule{}, tmp.Sub("c")).errors.empty());
  TrainOptions t = ScheduledRun("adamw", 8, LrSchedule{});
  t.run.setup.main.Set("lr", 5e-3);
  t.load_dir = tmp.Sub("c");
  const ThreadRun run = RunTrainOnThreads(t, 2);
  ASSERT_EQ(run.errors.size(), 2u);
  EXPECT_NE(run.errors.front().find("lr 0.005"), std::string::npos) << run.errors.front();
}

TEST(LrScheduleOnLoad, OverrideKeepsThisRunsSchedule) {
  TempDir tmp;
  const double lr = OptimizerSetup::Defaults("adamw").main.lr();
  ASSERT_TRUE(SaveWith(WarmupCosine(lr), tmp.Sub("c")).errors.empty());
  LrSchedule linear = WarmupCosine(lr);
  linear.style = LrDecayStyle::kLinear;
  TrainOptions t = ScheduledRun("adamw", 8, linear);
  t.compare_reference = false;
  t.load_dir = tmp.Sub("c");
  t.load_options.lr_schedule = LoadOptions::LrScheduleChoice::kRun;
  const ThreadRun run = RunTrainOnThreads(t, 2);
  ASSERT_TRUE(run.errors.empty()) << run.errors.front();
  ASSERT_EQ(run.root.steps.size(), 4u);
  for (const StepRecord& s : run.root.steps) EXPECT_EQ(s.lr, linear.LrAt(s.step, lr)) << s.step;
}

TEST(LrScheduleOnLoad, UseCheckpointContinuesTheSavedScheduleBitwise) {
  TempDir tmp;
  const double lr = OptimizerSetup::Defaults("adamw").main.lr();
  // The uninterrupted cosine run of 8 steps is the reference of the resumed run.
  TrainOptions whole = ScheduledRun("adamw", 8, WarmupCosine(lr));
  whole.save_at = 4;
  whole.save_dir = tmp.Sub("c");
  const ThreadRun uninterrupted = RunTrainOnThreads(whole, 2);
  ASSERT_TRUE(Failures(uninterrupted).empty());
  // Resumed asking for a linear schedule and a doubled lr, but the checkpoint's wins.
  TrainOptions t = ScheduledRun("adamw", 8, LrSchedule{});
  t.run.setup.main.Set("lr", 2 * lr);
  t.load_dir = whole.save_dir;
  t.load_options.lr_schedule = LoadOptions::LrScheduleChoice::kCheckpoint;
  t.compare_reference = false;
  const ThreadRun run = RunTrainOnThreads(t, 2);
  ASSERT_TRUE(run.errors.empty()) << run.errors.front();
  std::map<int64_t, double> lr_at;
  for (const StepRecord& s : uninterrupted.root.steps) lr_at[s.step] = s.lr;
  for (const StepRecord& s : run.root.steps)
    EXPECT_EQ(s.lr, 2 * lr_at[s.step]) << "step " << s.step;
}

TEST(LrScheduleOnLoad, UseCheckpointWithTheSameLrEndsWhereTheUninterruptedRunEnds) {
  TempDir tmp;
  const double lr = OptimizerSetup::Defaults("adamw").main.lr();
  TrainOptions whole = ScheduledRun("adamw", 8, WarmupCosine(lr));
  whole.save_at = 4;
  whole.save_dir = tmp.Sub("c");
  const ThreadRun uninterrupted = RunTrainOnThreads(whole, 2);
  ASSERT_TRUE(Failures(uninterrupted).empty());
  // The run asks for constant lr; it continues with the checkpoint's cosine
  // schedule and compares bitwise with its reference (rebuilt for that schedule).
  const ThreadRun run =
      LoadWith(LrSchedule{}, whole.save_dir, LoadOptions::LrScheduleChoice::kCheckpoint);
  ASSERT_TRUE(Failures(run).empty()) << Failures(run).front();
  for (const auto& [key, t] : uninterrupted.root.final_state.tensors)
    EXPECT_TRUE(at::equal(t.view(at::kByte), run.root.final_state.tensors.at(key).view(at::kByte)))
        << key;
}

// A version 1 checkpoint (no lr_schedule) reads as constant at its first
// child's lr: a constant run loads it, a scheduled run is refused.
TEST(LrScheduleOnLoad, VersionOneCheckpointIsAConstantSchedule) {
  TempDir tmp;
  ASSERT_TRUE(SaveWith(LrSchedule{}, tmp.Sub("c")).errors.empty());
  const std::string meta_path = tmp.Sub("c") + "/metadata.json";
  nlohmann::json meta = nlohmann::json::parse(ReadFile(meta_path));
  meta.erase("lr_schedule");
  meta["format_version"] = 1;
  WriteFileAtomic(meta_path, meta.dump(1));
  EXPECT_TRUE(
      Failures(LoadWith(LrSchedule{}, tmp.Sub("c"), LoadOptions::LrScheduleChoice::kMustMatch))
          .empty());
  const double lr = OptimizerSetup::Defaults("adamw").main.lr();
  const ThreadRun refused =
      LoadWith(WarmupCosine(lr), tmp.Sub("c"), LoadOptions::LrScheduleChoice::kMustMatch);
  ASSERT_EQ(refused.errors.size(), 2u);
  EXPECT_NE(refused.errors.front().find("(constant)"), std::string::npos) << refused.errors.front();
}

}  // namespace
}  // namespace shardcheck
