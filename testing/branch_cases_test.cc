// The branch-case generator (testing/branch_cases.h) against the registry:
// every hyperparameter of every registered kind gets the values its type
// requires (both bools, every choice, a number other than the default), so
// a hyperparameter added later that the generator cannot cover fails here
// by name instead of going untested by the fused-kernel and sharded tables
// that run the cases (kernels/elementwise_branches_test.cc,
// harness/cell/dist_branches_test.cc). Also: the generator's rules on
// made-up declarations, and that an unknown type throws.
#include "testing/branch_cases.h"

#include <gtest/gtest.h>

#include <set>

#include "spec/error.h"
#include "spec/registry.h"

namespace shardcheck {
namespace {

// Every value a case (or the defaults case) gives `h`, as text.
std::set<std::string> ValuesGiven(const std::vector<BranchCase>& cases, const HyperParamSpec& h) {
  std::set<std::string> out;
  for (const BranchCase& c : cases)
    out.insert(HyperValueText(c.IsDefaults() ? h.default_value : c.value));
  for (const BranchCase& c : cases)
    if (c.param == h.name) out.insert(HyperValueText(c.value));
  return out;
}

// What `h` must take over the cases, as text; for numbers, lists: "other".
std::set<std::string> Required(const HyperParamSpec& h) {
  switch (h.type) {
    case HyperType::kBool:
      return {"true", "false"};
    case HyperType::kChoice:
      return std::set<std::string>(h.choices.begin(), h.choices.end());
    case HyperType::kReal:
    case HyperType::kInt:
    case HyperType::kRealList:
      return {HyperValueText(h.default_value), "other"};
  }
  ADD_FAILURE() << h.name << ": type " << static_cast<int>(h.type) << " has no coverage rule";
  return {};
}

TEST(BranchCases, EveryRegistryHyperparameterTakesEveryRequiredValue) {
  for (const OptimizerEntry* e : Optimizers()) {
    const std::string& kind = e->spec.name;
    std::vector<BranchCase> cases;
    ASSERT_NO_THROW(cases = BranchCases(kind)) << kind;
    for (const HyperParamSpec& h : e->spec.hyperparams) {
      std::set<std::string> given = ValuesGiven(cases, h);
      std::set<std::string> need = Required(h);
      if (need.erase("other")) {
        const size_t others = given.size() - given.count(HyperValueText(h.default_value));
        EXPECT_GE(others, 1u) << kind << "." << h.name << ": no case sets a non-default value";
      }
      for (const std::string& v : need)
        EXPECT_TRUE(given.count(v)) << kind << "." << h.name << ": no case sets " << v;
    }
  }
}

TEST(BranchCases, EachCaseChangesOneDeclaredHyperparameterToAValidValue) {
  for (const OptimizerEntry* e : Optimizers()) {
    const std::string& kind = e->spec.name;
    const std::vector<BranchCase> cases = BranchCases(kind);
    ASSERT_FALSE(cases.empty());
    EXPECT_EQ(cases.front().name, "defaults") << kind;
    EXPECT_TRUE(cases.front().IsDefaults()) << kind;
    std::set<std::string> names;
    for (const BranchCase& c : cases) {
      EXPECT_TRUE(names.insert(GtestSafeName(c.name)).second) << kind << ": duplicate " << c.name;
      if (c.IsDefaults()) continue;
      const HyperParamSpec* h = e->spec.FindHyperParam(c.param);
      ASSERT_NE(h, nullptr) << kind << ": " << c.name << " sets an undeclared " << c.param;
      EXPECT_NO_THROW(h->Check(c.value, kind)) << c.name;
      EXPECT_NE(HyperValueText(c.value), HyperValueText(h->default_value)) << kind << " " << c.name;
      EXPECT_EQ(c.name.rfind(c.param + "_", 0), 0u) << c.name;
      OptimizerConfig config = OptimizerConfig::Defaults(kind);
      c.ApplyTo(config);
      EXPECT_NO_THROW(config.Validate()) << kind << " " << c.name;
    }
  }
}

TEST(BranchCases, NumbersFollowTheDeclaredRule) {
  auto only = [](const HyperParamSpec& h) {
    const std::vector<BranchCase> cs = BranchCasesOf(h, "test");
    EXPECT_EQ(cs.size(), 1u) << h.name;
    return cs.front();
  };
  EXPECT_EQ(only(BetaParam("beta1", 0.9, "")).name, "beta1_0.45");
  EXPECT_EQ(only(WeightDecayParam(0.0)).name, "weight_decay_0.1");  // 0.5 x 0 is the default
  HyperParamSpec open = RealParam("x", 0.0, -1.0, 0.0, "");  // (-1, 0]: up is out of range
  open.min_open = true;
  EXPECT_EQ(only(open).name, "x_-0.1");
  EXPECT_EQ(GtestSafeName(only(open).name), "x_m0p1");
  HyperParamSpec narrow = RealParam("r", 1.0, 0.95, 1.0, "");  // (0.95, 1]: the midpoint
  narrow.min_open = true;
  EXPECT_EQ(only(narrow).name, "r_0.975");
  EXPECT_EQ(only(IntParam("n", 5, 1, 100, "")).name, "n_6");
  EXPECT_EQ(only(IntParam("n", 100, 1, 100, "")).name, "n_99");
  EXPECT_EQ(only(BoolParam("b", true, "")).name, "b_false");
  const BranchCase list = only(RealListParam("c", {1.0, -2.0}, ""));
  EXPECT_EQ(list.name, "c_x0.99");
  EXPECT_EQ(std::get<std::vector<double>>(list.value), (std::vector<double>{0.99, -1.98}));
  const std::vector<BranchCase> choices =
      BranchCasesOf(ChoiceParam("m", "b", {"a", "b", "c"}, ""), "test");
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices[0].name, "m_a");
  EXPECT_EQ(choices[1].name, "m_c");
}

TEST(BranchCases, ThrowsWhenAHyperparameterCannotBeCovered) {
  HyperParamSpec unknown = RealParam("mystery", 1.0, 0.0, 2.0, "");
  unknown.type = static_cast<HyperType>(42);  // a type added later without a rule
  EXPECT_THROW(BranchCasesOf(unknown, "test"), Error);
  OptimizerSpec spec;
  spec.name = "test";
  spec.hyperparams = {LrParam(1e-3), unknown};
  EXPECT_THROW(BranchCasesForSpec(spec), Error);
  EXPECT_THROW(BranchCasesOf(RealParam("pinned", 1.0, 1.0, 1.0, ""), "test"), Error);
  EXPECT_THROW(BranchCasesOf(IntParam("pinned", 3, 3, 3, ""), "test"), Error);
  EXPECT_THROW(BranchCasesOf(ChoiceParam("one", "a", {"a"}, ""), "test"), Error);
}

}  // namespace
}  // namespace shardcheck
