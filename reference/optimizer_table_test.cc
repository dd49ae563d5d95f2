// Data-driven tests over every optimizer setup, PyTorch OptimizerInfo style:
// one table of cases feeds every property test, named like `lion/bf16`.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "harness/cell/oracle_run.h"
#include "reference/optimizer.h"
#include "spec/error.h"

namespace shardcheck {
namespace {

// Every named setup of the registry (test-only kinds included) in fp32 and
// bf16: a new optimizer gets every test below without a line here.
struct Param {
  std::string setup;
  c10::ScalarType dtype;
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << p.setup << "/" << (p.dtype == at::kFloat ? "fp32" : "bf16");
}

std::string Name(const testing::TestParamInfo<Param>& info) {
  return info.param.setup + "_" + (info.param.dtype == at::kFloat ? "fp32" : "bf16");
}

// The state keys of a setup's children, as their registry entries declare them.
std::set<std::string> DeclaredKeys(const std::string& setup) {
  std::set<std::string> keys;
  // Named: a temporary setup would die before the loop reads its children.
  const OptimizerSetup defaults = OptimizerSetup::Defaults(setup);
  for (const OptimizerConfig* c : defaults.Children())
    for (const auto& k : c->schema().Names()) keys.insert(k);
  return keys;
}

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(),
                     a.numel() * a.element_size()) == 0;
}

void ExpectSameState(const StateDict& a, const StateDict& b) {
  EXPECT_EQ(a.step, b.step);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [k, t] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(k)) << k;
    EXPECT_TRUE(SameBytes(t, b.tensors.at(k))) << k;
  }
}

// A small model with every kind of param: embedding, output, 2-D hidden
// weights (tall and wide), biases, a 3-D param and a tiny one.
ModelSpec SmallModel() {
  return ParseShapes(
      "emb=48x16:embedding,w1=40x16,b1=40,w2=16x40,b2=16,norm=16,conv=2x3x4,"
      "head=48x16:output");
}

OracleRunOptions MakeRun(const Param& p, int steps) {
  OracleRunOptions o;
  o.model = SmallModel();
  o.setup = OptimizerSetup::Defaults(p.setup);
  o.setup.main.Set("weight_decay", 0.05);
  if (o.setup.scalar) o.setup.scalar->Set("weight_decay", 0.05);
  o.steps = steps;
  o.seed = 42;
  o.dtype = p.dtype;
  return o;
}

class OptimizerTable : public testing::TestWithParam<Param> {};

TEST_P(OptimizerTable, StateDictKeysComeFromTheSchema) {
  ReferenceOptimizer opt = RunReferenceOnOracle(MakeRun(GetParam(), 1));
  std::set<std::string> keys_seen;
  for (const auto& [k, t] : opt.GetStateDict().tensors) {
    const StateDictKey key = ParseStateDictKey(k);
    if (key.role == StateDictKey::Role::kState) keys_seen.insert(key.state_key);
  }
  EXPECT_EQ(keys_seen, DeclaredKeys(GetParam().setup));
  // Every param has exactly its owner's keys.
  for (size_t i = 0; i < opt.params().size(); ++i) {
    for (const auto& k : opt.SchemaOf(static_cast<int>(i)).keys) {
      EXPECT_EQ(opt.State(static_cast<int>(i), k.name).sizes().vec(), opt.params()[i].shape);
    }
  }
}

TEST_P(OptimizerTable, StepCounterCountsFromOne) {
  ReferenceOptimizer opt = RunReferenceOnOracle(MakeRun(GetParam(), 0));
  EXPECT_EQ(opt.step(), 0);
  opt.Step(GlobalGrads(SmallModel(), 42, 1, 24));
  EXPECT_EQ(opt.step(), 1);
  EXPECT_EQ(opt.GetStateDict().step, 1);
}

TEST_P(OptimizerTable, RerunIsBitwiseIdentical) {
  ExpectSameState(RunReferenceOnOracle(MakeRun(GetParam(), 4)).GetStateDict(),
                  RunReferenceOnOracle(MakeRun(GetParam(), 4)).GetStateDict());
}

// Every fp32 main param moves. (A bf16 model param need not: a small step,
// e.g. SGD's lr * g on the oracle's gradients, is below its resolution.)
TEST_P(OptimizerTable, ParamsMoveAndStayFinite) {
  OracleRunOptions o = MakeRun(GetParam(), 3);
  ReferenceOptimizer opt = RunReferenceOnOracle(o);
  std::vector<at::Tensor> init = InitialParams(o.model, o.seed, o.dtype);
  for (size_t i = 0; i < init.size(); ++i) {
    EXPECT_TRUE(opt.main_params()[i].isfinite().all().item<bool>()) << o.model.params[i].name;
    EXPECT_FALSE(SameBytes(opt.main_params()[i], init[i].to(at::kFloat))) << o.model.params[i].name;
  }
}

TEST_P(OptimizerTable, StateDictRoundTripContinuesBitwise) {
  OracleRunOptions o = MakeRun(GetParam(), 3);
  ReferenceOptimizer first = RunReferenceOnOracle(o);
  const StateDict saved = first.GetStateDict();
  for (uint64_t s = 4; s <= 6; ++s) first.Step(GlobalGrads(o.model, o.seed, s, 24));

  // A fresh optimizer from other initial values, loaded, continued.
  ReferenceOptimizer second(o.setup, o.model.params, InitialParams(o.model, 7, o.dtype));
  second.LoadStateDict(saved);
  ExpectSameState(second.GetStateDict(), saved);
  for (uint64_t s = 4; s <= 6; ++s) second.Step(GlobalGrads(o.model, o.seed, s, 24));
  ExpectSameState(second.GetStateDict(), first.GetStateDict());
}

// Strict loading against every other named setup: the error names the
// missing and unexpected state keys, or, with the same keys, both setups;
// nothing changes.
TEST_P(OptimizerTable, LoadingAnyOtherOptimizersStateFailsNamingWhatDiffers) {
  OracleRunOptions o = MakeRun(GetParam(), 1);
  ReferenceOptimizer mine = RunReferenceOnOracle(o);
  const StateDict before = mine.GetStateDict();
  const std::set<std::string> my_keys = DeclaredKeys(GetParam().setup);
  for (const std::string& other : OptimizerSetup::Names()) {
    if (other == GetParam().setup) continue;
    OracleRunOptions theirs_run = o;
    theirs_run.setup = OptimizerSetup::Defaults(other);
    const StateDict theirs = RunReferenceOnOracle(theirs_run).GetStateDict();
    std::vector<std::string> words;
    for (const auto& k : DeclaredKeys(other))
      if (!my_keys.count(k)) words = {"unexpected", "'" + k + "'"};
    for (const auto& k : my_keys)
      if (!DeclaredKeys(other).count(k)) words = {"missing", "'" + k + "'"};
    // Same keys everywhere (adam and adamw): the message names both setups.
    // Same key names on other params (routing differs): the param names differ.
    try {
      mine.LoadStateDict(theirs);
      ADD_FAILURE() << GetParam().setup << " loaded a " << other << " state dict";
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (words.empty() && msg.find("missing") == std::string::npos &&
          msg.find("unexpected") == std::string::npos)
        words = {other, GetParam().setup};
      for (const auto& w : words)
        EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
    }
    ExpectSameState(mine.GetStateDict(), before);
  }
}

// The message counts the tensors of each missing state key and names the
// first three in key order, then "...": a long key list stays one line but
// still says which params lost their state.
TEST(OptimizerTableMessages, MissingStateKeyIsCountedAndItsFirstTensorsNamed) {
  OracleRunOptions o = MakeRun({"adam", at::kFloat}, 1);
  ReferenceOptimizer opt = RunReferenceOnOracle(o);
  StateDict partial = opt.GetStateDict();
  std::vector<std::string> dropped;
  for (auto it = partial.tensors.begin(); it != partial.tensors.end();) {
    if (it->first.rfind(StateTensorKey("exp_avg", ""), 0) == 0) {
      dropped.push_back(it->first);
      it = partial.tensors.erase(it);
    } else {
      ++it;
    }
  }
  ASSERT_GE(dropped.size(), 4u);
  const std::string expected = "state key 'exp_avg' (" + std::to_string(dropped.size()) +
                               " tensors: " + dropped[0] + ", " + dropped[1] + ", " + dropped[2] +
                               ", ...)";
  try {
    opt.LoadStateDict(partial);
    FAIL() << "a state dict without exp_avg loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
        << "'" << expected << "' not in: " << e.what();
  }
}

TEST_P(OptimizerTable, FailedLoadChangesNothing) {
  OracleRunOptions o = MakeRun(GetParam(), 2);
  ReferenceOptimizer opt = RunReferenceOnOracle(o);
  const StateDict before = opt.GetStateDict();
  StateDict bad = before;
  // Corrupt the last tensor's shape: everything before it in key order is valid.
  auto last = std::prev(bad.tensors.end());
  last->second = at::zeros({3}, last->second.options());
  bad.step = 99;
  EXPECT_THROW(opt.LoadStateDict(bad), Error);
  ExpectSameState(opt.GetStateDict(), before);
  bad = before;
  bad.tensors.begin()->second = bad.tensors.begin()->second.to(at::kDouble);
  EXPECT_THROW(opt.LoadStateDict(bad), Error);
  ExpectSameState(opt.GetStateDict(), before);
}

TEST_P(OptimizerTable, ModelParamIsMainParamRounded) {
  ReferenceOptimizer opt = RunReferenceOnOracle(MakeRun(GetParam(), 3));
  for (size_t i = 0; i < opt.params().size(); ++i) {
    EXPECT_EQ(opt.main_params()[i].scalar_type(), at::kFloat);
    EXPECT_EQ(opt.model_params()[i].scalar_type(), GetParam().dtype);
    EXPECT_TRUE(SameBytes(opt.model_params()[i], opt.main_params()[i].to(GetParam().dtype)));
  }
}

TEST_P(OptimizerTable, ZeroLearningRateLeavesParamsUnchanged) {
  OracleRunOptions o = MakeRun(GetParam(), 3);
  o.setup.main.Set("lr", 0.0);
  if (o.setup.scalar) o.setup.scalar->Set("lr", 0.0);
  ReferenceOptimizer opt = RunReferenceOnOracle(o);
  std::vector<at::Tensor> init = InitialParams(o.model, o.seed, o.dtype);
  for (size_t i = 0; i < init.size(); ++i) EXPECT_TRUE(SameBytes(opt.model_params()[i], init[i]));
  // State still moved.
  const StateSchema& s = opt.SchemaOf(0);
  EXPECT_GT(opt.State(0, s.keys[0].name).abs().max().item<float>(), 0.0f);
}

TEST_P(OptimizerTable, ClippingEqualsPrescaledGradients) {
  OracleRunOptions o = MakeRun(GetParam(), 0);
  o.setup.max_grad_norm = 0.01;
  ReferenceOptimizer clipped = RunReferenceOnOracle(o);
  OracleRunOptions plain = o;
  plain.setup.max_grad_norm = 0.0;
  ReferenceOptimizer manual = RunReferenceOnOracle(plain);
  for (uint64_t s = 1; s <= 2; ++s) {
    std::vector<at::Tensor> g = GlobalGrads(o.model, o.seed, s, 24);
    clipped.Step(g);
    const double norm = GlobalGradNorm(g);
    const float coef = static_cast<float>(0.01 / (norm + 1e-6));
    ASSERT_LT(coef, 1.0f);
    for (auto& t : g) t = t * coef;
    manual.Step(g);
    EXPECT_EQ(clipped.last_grad_norm(), norm);
  }
  ExpectSameState(clipped.GetStateDict(), manual.GetStateDict());
}

// A norm below max_norm changes nothing: the run is bitwise the unclipped one
// (a coefficient above 1 would scale the gradients up).
TEST_P(OptimizerTable, ClippingBelowTheBoundChangesNothing) {
  OracleRunOptions o = MakeRun(GetParam(), 0);
  OracleRunOptions plain = o;
  plain.setup.max_grad_norm = 0.0;
  ReferenceOptimizer unclipped = RunReferenceOnOracle(plain);
  o.setup.max_grad_norm = 1e6;
  ReferenceOptimizer clipped = RunReferenceOnOracle(o);
  for (uint64_t s = 1; s <= 2; ++s) {
    const std::vector<at::Tensor> g = GlobalGrads(o.model, o.seed, s, 24);
    clipped.Step(g);
    unclipped.Step(g);
    ASSERT_LT(clipped.last_grad_norm(), 1e6);
  }
  ExpectSameState(clipped.GetStateDict(), unclipped.GetStateDict());
}

std::vector<Param> AllParams() {
  std::vector<Param> out;
  for (const auto& name : OptimizerSetup::Names())
    for (auto dt : {at::kFloat, at::kBFloat16}) out.push_back({name, dt});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Setups, OptimizerTable, testing::ValuesIn(AllParams()), Name);

}  // namespace
}  // namespace shardcheck
