// Muon: the reference update against its definition rebuilt from its
// parts, and the routing of Muon + scalar optimizer.
#include <gtest/gtest.h>

#include "harness/cell/oracle_run.h"
#include "kernels/newton_schulz.h"
#include "reference/optimizer.h"
#include "reference/registry.h"
#include "testing/model_spec.h"

namespace shardcheck {
namespace {

// p = p*decay; m = mu*m + (1-mu)*g; u = nesterov ? mu*m + (1-mu)*g : m;
// p = p - float(lr*scale) * NS(u), rebuilt here from its parts.
class MuonUpdateModes : public testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(MuonUpdateModes, MatchesDefinitionFromParts) {
  at::manual_seed(9);
  OptimizerConfig c = OptimizerConfig::Defaults("muon");
  c.Set("scale_mode", std::string(std::get<0>(GetParam())));
  c.Set("nesterov", std::get<1>(GetParam()));
  c.Set("weight_decay", 0.1);
  c.Set("lr", 0.02);
  at::Tensor p = at::randn({32, 48}), m = at::randn({32, 48}), g = at::randn({32, 48});
  const at::Tensor p0 = p.clone(), m0 = m.clone();
  std::vector<at::Tensor> state = {m};
  ReferenceStep(c, 1.0, 1, 1.0, p, g, state);
  const double momentum = c.Real("momentum");
  const float mu = static_cast<float>(momentum), omu = static_cast<float>(1 - momentum);
  const at::Tensor m1 = m0 * mu + g * omu;
  const at::Tensor u = c.Flag("nesterov") ? m1 * mu + g * omu : m1;
  const double scale =
      MatrixScaleFactor(ParseMatrixScale(c.Choice("scale_mode")), c.Real("extra_scale"), 32, 48);
  const float step = static_cast<float>(c.lr() * scale);
  const at::Tensor want =
      p0 * static_cast<float>(1 - c.lr() * c.weight_decay()) - NewtonSchulz(u, {}) * step;
  EXPECT_TRUE(at::equal(state[0], m1));
  EXPECT_TRUE(at::equal(p, want));
}

INSTANTIATE_TEST_SUITE_P(Modes, MuonUpdateModes,
                         testing::Combine(testing::Values("spectral", "shape", "moonlight"),
                                          testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) ? "_nesterov" : "_plain");
                         });

// Megatron's _is_muon_excluded on gpt-tiny.
TEST(MuonRouting, GptTinyTable) {
  const ModelSpec m = GptTinySpec();
  const std::vector<ChildOptimizer> children =
      RouteParams(OptimizerSetup::Defaults("muon_adam"), m.params);
  ASSERT_EQ(children.size(), 2u);
  for (size_t i = 0; i < m.params.size(); ++i) {
    const ParamInfo& p = m.params[i];
    const bool to_muon = std::find(children[0].params.begin(), children[0].params.end(),
                                   static_cast<int>(i)) != children[0].params.end();
    const bool hidden_weight = p.name.find("linear_") != std::string::npos && p.name.size() > 7 &&
                               p.name.substr(p.name.size() - 7) == ".weight";
    EXPECT_EQ(to_muon, hidden_weight) << p.name;
  }
  EXPECT_EQ(children[0].params.size(), 8u);  // qkv, proj, fc1, fc2 of 2 layers
  EXPECT_EQ(children[1].params.size(), m.params.size() - 8);
}

TEST(MuonRouting, RolesAndDimensionality) {
  EXPECT_TRUE(GoesToScalarOptimizer({"emb", {16, 8}, ParamRole::kEmbedding}));
  EXPECT_TRUE(GoesToScalarOptimizer({"head", {16, 8}, ParamRole::kOutput}));
  EXPECT_TRUE(GoesToScalarOptimizer({"x.bias", {16}, ParamRole::kOther}));
  EXPECT_TRUE(GoesToScalarOptimizer({"norm.weight", {16}, ParamRole::kOther}));
  EXPECT_TRUE(GoesToScalarOptimizer({"conv", {2, 3, 4}, ParamRole::kOther}));
  EXPECT_FALSE(GoesToScalarOptimizer({"fc.weight", {16, 8}, ParamRole::kOther}));
}

// Muon + Lion: the scalar params hold exactly Lion's one key, the matrices
// exactly momentum_buffer; nothing holds exp_avg_sq.
TEST(MuonRouting, MuonLionStateKeys) {
  OracleRunOptions o;
  o.model = GptTinySpec();
  o.setup = OptimizerSetup::Defaults("muon_lion");
  o.steps = 1;
  ReferenceOptimizer opt = RunReferenceOnOracle(o);
  ASSERT_EQ(opt.children().size(), 2u);
  EXPECT_EQ(opt.children()[1].schema.Names(), std::vector<std::string>{"exp_avg"});
  EXPECT_EQ(opt.children()[0].schema.Names(), std::vector<std::string>{"momentum_buffer"});
  for (const auto& [k, t] : opt.GetStateDict().tensors) {
    EXPECT_EQ(k.find("exp_avg_sq"), std::string::npos) << k;
  }
  for (size_t i = 0; i < o.model.params.size(); ++i) {
    const bool muon = !GoesToScalarOptimizer(o.model.params[i]);
    EXPECT_EQ(opt.SchemaOf(static_cast<int>(i)).Names(),
              std::vector<std::string>{muon ? "momentum_buffer" : "exp_avg"})
        << o.model.params[i].name;
  }
}

TEST(MuonRouting, OneStepCounterForBothChildren) {
  OracleRunOptions o;
  o.model = GptTinySpec();
  o.setup = OptimizerSetup::Defaults("muon_adam");
  o.steps = 3;
  ReferenceOptimizer opt = RunReferenceOnOracle(o);
  EXPECT_EQ(opt.step(), 3);
  EXPECT_EQ(opt.GetStateDict().step, 3);
}

}  // namespace
}  // namespace shardcheck
