// The lr schedule against its definition (docs/optimizers.md, "LR
// schedule"): warm-up, cosine and linear decay, the floor, and the factor
// each group's lr is multiplied by.
#include "spec/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "spec/error.h"

namespace shardcheck {
namespace {

LrSchedule Make(LrDecayStyle style, int64_t w, int64_t d, double min_lr) {
  LrSchedule s;
  s.style = style;
  s.warmup_steps = w;
  s.decay_steps = d;
  s.min_lr = min_lr;
  return s;
}

TEST(LrSchedule, ConstantIsExactlyOne) {
  const LrSchedule s;
  for (int64_t t = 1; t < 100; ++t) EXPECT_EQ(s.Factor(t, 3e-4), 1.0);
  EXPECT_TRUE(s.IsConstant());
}

TEST(LrSchedule, WarmupIsLinearThenHolds) {
  const LrSchedule s = Make(LrDecayStyle::kConstant, 4, 0, 0.0);
  EXPECT_EQ(s.LrAt(1, 2.0), 0.5);
  EXPECT_EQ(s.LrAt(2, 2.0), 1.0);
  EXPECT_EQ(s.LrAt(4, 2.0), 2.0);
  EXPECT_EQ(s.LrAt(5, 2.0), 2.0);
  EXPECT_EQ(s.Factor(4, 2.0), 1.0);
  EXPECT_FALSE(s.IsConstant());
}

TEST(LrSchedule, CosineAndLinearDecayToTheFloor) {
  const double max = 1e-3, floor = 1e-5;
  const LrSchedule cos = Make(LrDecayStyle::kCosine, 2, 8, floor);
  const LrSchedule lin = Make(LrDecayStyle::kLinear, 2, 8, floor);
  // Written out as docs/optimizers.md gives them, in double.
  for (int64_t t = 3; t <= 10; ++t) {
    const double q = static_cast<double>(t - 2) / 8.0;
    EXPECT_EQ(cos.LrAt(t, max),
              floor + (max - floor) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * q)))
        << t;
    EXPECT_EQ(lin.LrAt(t, max), max - (max - floor) * q) << t;
  }
  EXPECT_EQ(cos.LrAt(10, max), floor);
  EXPECT_NEAR(lin.LrAt(10, max), floor, 1e-15);  // max - (max - floor) rounds in double
  EXPECT_EQ(cos.LrAt(11, max), floor);
  EXPECT_EQ(lin.LrAt(50, max), floor);
  EXPECT_EQ(cos.Factor(50, max), floor / max);
}

TEST(LrSchedule, PeakOverridesTheRunsLr) {
  LrSchedule s = Make(LrDecayStyle::kLinear, 0, 10, 0.0);
  s.peak_lr = 2.0;
  EXPECT_EQ(s.LrAt(5, 1.0), 1.0);  // half way from 2 to 0
  EXPECT_EQ(s.Factor(5, 1.0), 0.5);
}

TEST(LrSchedule, ValidationNamesTheField) {
  EXPECT_THROW(Make(LrDecayStyle::kConstant, -1, 0, 0.0).Validate(1e-3), Error);
  EXPECT_THROW(Make(LrDecayStyle::kConstant, 0, 5, 0.0).Validate(1e-3),
               Error);  // decay needs a style
  EXPECT_THROW(Make(LrDecayStyle::kCosine, 0, 5, 1e-2).Validate(1e-3),
               Error);  // floor above the peak
  EXPECT_NO_THROW(Make(LrDecayStyle::kCosine, 0, 5, 1e-4).Validate(1e-3));
  EXPECT_THROW(ParseLrDecayStyle("exponential"), Error);
}

TEST(LrSchedule, JsonRoundTrip) {
  LrSchedule s = Make(LrDecayStyle::kCosine, 3, 7, 1e-6);
  EXPECT_EQ(LrScheduleFromJson(nlohmann::json::parse(LrScheduleJson(s).dump())), s);
  s.peak_lr = 0.5;
  EXPECT_EQ(LrScheduleFromJson(nlohmann::json::parse(LrScheduleJson(s).dump())), s);
  EXPECT_THROW(LrScheduleFromJson(nlohmann::json::parse("{\"style\": \"cosine\"}")), Error);
}

// Equality is field by field: SameShape compares warm-up, decay style,
// decay steps and min_lr; == also the peak; != is its negation.
TEST(LrSchedule, EqualityComparesEveryField) {
  const LrSchedule base = Make(LrDecayStyle::kCosine, 2, 8, 1e-5);
  EXPECT_TRUE(base == base);
  EXPECT_FALSE(base != base);
  EXPECT_TRUE(base.SameShape(base));
  std::vector<LrSchedule> others(5, base);
  others[0].style = LrDecayStyle::kLinear;
  others[1].warmup_steps = 3;
  others[2].decay_steps = 9;
  others[3].min_lr = 2e-5;
  others[4].peak_lr = 1e-3;
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_FALSE(base == others[i]) << i;
    EXPECT_TRUE(base != others[i]) << i;
    EXPECT_EQ(base.SameShape(others[i]), i == 4) << i;  // the peak is not the shape
  }
}

}  // namespace
}  // namespace shardcheck
