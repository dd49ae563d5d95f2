// HyperparamDifferences: one line per differing hyperparameter, in either
// direction, max_grad_norm first; the lr, the kind, the schema and the
// role are never compared; children are matched by position and kind.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distributed/hyperparam_diff.h"
#include "spec/config.h"
#include "spec/config_json.h"

namespace shardcheck {
namespace {

nlohmann::json SetupWithClip(const std::string& name, double max_grad_norm) {
  OptimizerSetup s = OptimizerSetup::Defaults(name);
  s.max_grad_norm = max_grad_norm;
  return SetupJson(s);
}

TEST(HyperparamDifferences, EqualSetupsHaveNone) {
  EXPECT_TRUE(HyperparamDifferences(SetupWithClip("adamw", 1.0), SetupWithClip("adamw", 1.0)).empty());
}

TEST(HyperparamDifferences, MaxGradNormIsNamedInEitherDirection) {
  EXPECT_EQ(HyperparamDifferences(SetupWithClip("adamw", 0.5), SetupWithClip("adamw", 1.0)),
            std::vector<std::string>{"max_grad_norm: checkpoint 0.5, this run 1.0"});
  EXPECT_EQ(HyperparamDifferences(SetupWithClip("adamw", 1.0), SetupWithClip("adamw", 0.5)),
            std::vector<std::string>{"max_grad_norm: checkpoint 1.0, this run 0.5"});
}

TEST(HyperparamDifferences, ChildHyperparametersButNotTheLr) {
  OptimizerSetup saved = OptimizerSetup::Defaults("adamw"), run = saved;
  run.main.Set("beta2", 0.95);
  run.main.Set("lr", saved.main.lr() * 2);
  EXPECT_EQ(HyperparamDifferences(SetupJson(saved), SetupJson(run)),
            std::vector<std::string>{"adamw.beta2: checkpoint 0.999, this run 0.95"});
}

TEST(HyperparamDifferences, ChildrenOfAnotherKindAreLeftToTheSchemaCheck) {
  EXPECT_TRUE(HyperparamDifferences(SetupWithClip("adamw", 1.0), SetupWithClip("lion", 1.0)).empty());
}

}  // namespace
}  // namespace shardcheck
