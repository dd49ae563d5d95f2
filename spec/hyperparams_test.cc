// Hyperparameter declarations: text forms parse and print back, ranges are
// enforced with a message naming the hyperparameter.
#include "spec/hyperparams.h"

#include <gtest/gtest.h>

#include "spec/error.h"

namespace shardcheck {
namespace {

TEST(HyperParams, TextRoundTripsForEveryType) {
  const HyperParamSpec beta = BetaParam("beta1", 0.9, "");
  EXPECT_EQ(std::get<double>(ParseHyperValue(beta, "0.95")), 0.95);
  EXPECT_EQ(HyperValueText(ParseHyperValue(beta, "1e-3")), "0.001");
  EXPECT_EQ(HyperValueText(0.1 + 0.2), "0.30000000000000004");  // exact, not rounded for show
  const HyperParamSpec steps = IntParam("ns_steps", 5, 1, 100, "");
  EXPECT_EQ(std::get<int64_t>(ParseHyperValue(steps, "7")), 7);
  EXPECT_THROW(ParseHyperValue(steps, "7.5"), Error);
  const HyperParamSpec flag = BoolParam("nesterov", false, "");
  EXPECT_TRUE(std::get<bool>(ParseHyperValue(flag, "true")));
  EXPECT_THROW(ParseHyperValue(flag, "yes please"), Error);
  const HyperParamSpec choice = ChoiceParam("scale_mode", "spectral", {"spectral", "shape"}, "");
  EXPECT_EQ(std::get<std::string>(ParseHyperValue(choice, "shape")), "shape");
  try {
    ParseHyperValue(choice, "square");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("spectral | shape"), std::string::npos) << e.what();
  }
  const HyperParamSpec list = RealListParam("ns_coefficients", {}, "");
  const auto v = std::get<std::vector<double>>(ParseHyperValue(list, "1,2,3;4,5,6"));
  EXPECT_EQ(v, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(HyperValueText(v), "1,2,3;4,5,6");
}

TEST(HyperParams, RangesAreCheckedWithTheirText) {
  const HyperParamSpec beta = BetaParam("beta2", 0.999, "");
  EXPECT_EQ(beta.RangeText(), "[0, 1)");
  EXPECT_NO_THROW(beta.Check(0.0, "adam"));
  EXPECT_THROW(beta.Check(1.0, "adam"), Error);
  EXPECT_THROW(beta.Check(-0.1, "adam"), Error);
  const HyperParamSpec eps = EpsParam(1e-8);
  EXPECT_EQ(eps.RangeText(), "> 0");
  try {
    eps.Check(0.0, "adam");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "adam: invalid eps: 0 (expected > 0)");
  }
  EXPECT_THROW(LrParam(1e-3).Check(std::string("fast"), "adam"), Error);  // wrong type
}

}  // namespace
}  // namespace shardcheck
