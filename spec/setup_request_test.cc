// Setup requests: where each hyperparameter of a CLI flag or scenario key
// goes, and the errors that name what would have been valid.
#include "spec/setup_request.h"

#include <gtest/gtest.h>

#include "spec/error.h"

namespace shardcheck {
namespace {

std::string ErrorOf(const SetupRequest& r) {
  try {
    r.Resolve();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SetupRequest, SharedAndRoutedHyperparameters) {
  SetupRequest r;
  r.name = "muon_lion";
  r.hyper = {{"lr", "0.02"}, {"weight_decay", "0.1"}, {"momentum", "0.9"}, {"beta1", "0.5"}};
  r.scalar_hyper = {{"lr", "0.003"}};
  const OptimizerSetup s = r.Resolve();
  EXPECT_EQ(s.main.lr(), 0.02);
  EXPECT_EQ(s.scalar->lr(), 0.003);          // --scalar-lr sets it apart
  EXPECT_EQ(s.scalar->weight_decay(), 0.1);  // shared
  EXPECT_EQ(s.main.Real("momentum"), 0.9);   // the main child declares it
  EXPECT_EQ(s.scalar->Real("beta1"), 0.5);   // only the scalar child declares it
}

TEST(SetupRequest, ScalarOptimizerMakesTheComposite) {
  SetupRequest r;
  r.name = "muon";
  r.scalar_optimizer = "lion";
  EXPECT_EQ(r.Resolve().name, "muon_lion");
  r.name = "muon_adam";
  EXPECT_NE(ErrorOf(r).find("conflicts with optimizer muon_adam"), std::string::npos) << ErrorOf(r);
  r.name = "adam";
  EXPECT_NE(ErrorOf(r).find("takes none"), std::string::npos) << ErrorOf(r);
  r.name = "muon";
  r.scalar_optimizer = "muon";
  EXPECT_NE(ErrorOf(r).find("unknown scalar optimizer 'muon'"), std::string::npos) << ErrorOf(r);
}

TEST(SetupRequest, UndeclaredHyperparameterNamesTheValidOnes) {
  SetupRequest r;
  r.name = "lion";
  r.hyper = {{"eps", "1e-8"}};
  EXPECT_EQ(
      ErrorOf(r),
      "optimizer lion has no hyperparameter 'eps' (lion takes: lr, weight_decay, beta1, beta2)");
  r.name = "adam";
  r.hyper = {};
  r.scalar_hyper = {{"lr", "0.1"}};
  EXPECT_NE(ErrorOf(r).find("has no scalar optimizer"), std::string::npos);
}

TEST(SetupRequest, ScheduleKeys) {
  SetupRequest r;
  r.name = "adamw";
  r.lr_decay_style = "cosine";
  r.lr_warmup_steps = 2;
  r.lr_decay_steps = 6;
  r.min_lr = 1e-5;
  const OptimizerSetup s = r.Resolve();
  EXPECT_EQ(s.lr_schedule.style, LrDecayStyle::kCosine);
  EXPECT_EQ(s.lr_schedule.warmup_steps, 2);
  r.lr_decay_style = "constant";
  EXPECT_NE(ErrorOf(r).find("decay steps need a decay style"), std::string::npos) << ErrorOf(r);
}

}  // namespace
}  // namespace shardcheck
