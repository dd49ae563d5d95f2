// The optimizer registry: every entry is complete and consistent, the
// named setups derive from it, and a bad entry is refused with its name.
#include "spec/registry.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "spec/config.h"
#include "spec/config_json.h"
#include "spec/error.h"

namespace shardcheck {
namespace {

// Regression: the built-in kinds were registered lazily without a lock, so
// rank threads that read the registry first could see it half-filled
// ("unknown optimizer 'adam'"). Under ctest this test is its process's first
// reader.
TEST(Registry, FirstReadFromManyThreadsSeesEveryBuiltInKind) {
  std::vector<std::vector<std::string>> seen(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&seen, i] { seen[i] = OptimizerSetup::ElementwiseNames(); });
  for (auto& t : threads) t.join();
  for (const auto& names : seen) {
    EXPECT_EQ(names, seen[0]);
    EXPECT_GE(names.size(), 3u);
  }
}

TEST(Registry, EveryKindDeclaresLrWeightDecayAndAKernelForItsPlacement) {
  ASSERT_FALSE(Optimizers().empty());
  std::set<std::string> names;
  for (const OptimizerEntry* e : Optimizers()) {
    const OptimizerSpec& s = e->spec;
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_NE(s.FindHyperParam("lr"), nullptr) << s.name;
    EXPECT_NE(s.FindHyperParam("weight_decay"), nullptr) << s.name;
    EXPECT_FALSE(s.schema.keys.empty()) << s.name;
    EXPECT_FALSE(s.title.empty()) << s.name;
    if (s.placement == Placement::kElementwise) {
      EXPECT_TRUE(static_cast<bool>(e->elementwise)) << s.name;
      EXPECT_EQ(e->elementwise.state_count, static_cast<int>(s.schema.keys.size())) << s.name;
    } else {
      EXPECT_NE(e->whole_param, nullptr) << s.name;
      EXPECT_TRUE(TryFindOptimizer(s.default_scalar))
          << s.name << " names an unknown scalar " << s.default_scalar;
    }
    // Defaults validate.
    EXPECT_NO_THROW(OptimizerConfig::Defaults(s.name).Validate()) << s.name;
  }
}

TEST(Registry, NamedSetupsAreElementwiseKindsThenComposites) {
  const std::vector<std::string> names = OptimizerSetup::Names();
  const std::vector<std::string> elementwise = OptimizerSetup::ElementwiseNames();
  ASSERT_GE(names.size(), elementwise.size());
  for (size_t i = 0; i < elementwise.size(); ++i) EXPECT_EQ(names[i], elementwise[i]);
  for (const auto& n : names) {
    const OptimizerSetup s = OptimizerSetup::Defaults(n);
    EXPECT_EQ(s.name, n);
    EXPECT_NO_THROW(s.Validate()) << n;
    if (s.IsComposite()) {
      EXPECT_EQ(s.main.spec().placement, Placement::kWholeParam) << n;
      EXPECT_EQ(s.scalar->spec().placement, Placement::kElementwise) << n;
      // Both children start with the run's lr and weight decay.
      EXPECT_EQ(s.scalar->lr(), s.main.lr()) << n;
      EXPECT_EQ(s.scalar->weight_decay(), s.main.weight_decay()) << n;
    }
  }
}

// Each way a setup can be ill-formed is refused with a message that names
// the setup and what is wrong with it.
TEST(Registry, IllFormedSetupsAreRefusedNamingTheSetupAndTheRule) {
  auto expect_refused = [](const OptimizerSetup& s, const std::string& words) {
    try {
      s.Validate();
      ADD_FAILURE() << s.name << " validated";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(s.name + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(words), std::string::npos) << "'" << words << "' not in: " << msg;
    }
  };
  OptimizerSetup whole_alone = OptimizerSetup::Defaults("muon_adam");
  whole_alone.name = "muon_alone";
  whole_alone.scalar.reset();
  expect_refused(whole_alone, "needs a scalar optimizer");

  OptimizerSetup elementwise_with_scalar = OptimizerSetup::Defaults("adamw");
  elementwise_with_scalar.scalar = OptimizerConfig::Defaults("lion");
  expect_refused(elementwise_with_scalar, "only it takes one");

  OptimizerSetup whole_as_scalar = OptimizerSetup::Defaults("muon_adam");
  whole_as_scalar.scalar = whole_as_scalar.main;
  expect_refused(whole_as_scalar, "must be elementwise");

  OptimizerSetup negative_norm = OptimizerSetup::Defaults("lion");
  negative_norm.max_grad_norm = -1.0;
  expect_refused(negative_norm, "max_grad_norm must be >= 0");
}

TEST(Registry, UnknownKindErrorListsTheKinds) {
  try {
    FindOptimizer("adagrad");
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unknown optimizer kind 'adagrad'"), std::string::npos) << msg;
    for (const OptimizerEntry* o : Optimizers())
      EXPECT_NE(msg.find(o->spec.name), std::string::npos) << msg;
  }
}

TEST(Registry, RefusesADuplicateOrAnIncompleteEntry) {
  const OptimizerEntry& adam = FindOptimizer("adam");
  EXPECT_THROW(RegisterOptimizer(adam), Error);  // duplicate name
  OptimizerEntry no_kernel{adam.spec, {}, nullptr};
  no_kernel.spec.name = "adam_without_kernel";
  EXPECT_THROW(RegisterOptimizer(no_kernel), Error);
  OptimizerEntry wrong_count = adam;
  wrong_count.spec.name = "adam_three_keys";
  wrong_count.spec.schema.keys.push_back({"extra", c10::kFloat});
  EXPECT_THROW(RegisterOptimizer(wrong_count), Error);
  OptimizerEntry bad_default = adam;
  bad_default.spec.name = "adam_bad_default";
  bad_default.spec.hyperparams[2].default_value = 1.5;  // beta1 outside [0, 1)
  EXPECT_THROW(RegisterOptimizer(bad_default), Error);
  EXPECT_EQ(TryFindOptimizer("adam_without_kernel"), nullptr);
  EXPECT_EQ(TryFindOptimizer("adam_three_keys"), nullptr);
}

TEST(Registry, SetupNamesParseIntoTheirChildren) {
  for (const OptimizerEntry* e : Optimizers()) {
    if (e->spec.placement != Placement::kWholeParam) continue;
    // The kind alone is its composite with the default scalar optimizer.
    const OptimizerSetup alone = OptimizerSetup::Defaults(e->spec.name);
    EXPECT_EQ(alone.name, e->spec.name + "_" + e->spec.default_scalar);
    for (const std::string& scalar : OptimizerSetup::ElementwiseNames()) {
      const OptimizerSetup s = OptimizerSetup::Defaults(e->spec.name + "_" + scalar);
      ASSERT_TRUE(s.scalar);
      const OptimizerSpec& ss = FindOptimizer(scalar).spec;
      EXPECT_EQ(s.scalar->kind(), ss.as_scalar.empty() ? scalar : ss.as_scalar);
    }
  }
  EXPECT_THROW(OptimizerSetup::Defaults("adam_lion"), Error);
}

TEST(Registry, ConfigNamesTheDeclaredHyperparameters) {
  OptimizerConfig c = OptimizerConfig::Defaults("lion");
  try {
    c.Set("eps", 1e-8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "lion has no hyperparameter 'eps' (lion takes: lr, weight_decay, beta1, beta2)");
  }
  EXPECT_THROW(c.Real("eps"), Error);
  EXPECT_THROW(c.Flag("lr"), Error);  // wrong type
  c.Set("beta1", 1.0);
  EXPECT_THROW(c.Validate(), Error);
}

}  // namespace
}  // namespace shardcheck

namespace shardcheck {
namespace {

// `shardcheck optimizers --json` (RegistryJson): every registered kind's
// traits as its spec declares them (docs/optimizers.md, "traits"), the
// optional ones present exactly when set, and the spec's placement, schema
// and hyperparameters by name.
TEST(RegistryJsonTraits, EveryKindCarriesEveryTraitOfItsSpec) {
  const nlohmann::ordered_json j = RegistryJson();
  ASSERT_EQ(j.at("kinds").size(), Optimizers().size());
  bool saw_named_scalars = false;
  for (size_t i = 0; i < Optimizers().size(); ++i) {
    const OptimizerSpec& s = Optimizers()[i]->spec;
    const nlohmann::ordered_json& k = j.at("kinds").at(i);
    SCOPED_TRACE(s.name);
    EXPECT_EQ(k.at("name"), s.name);
    const nlohmann::ordered_json& t = k.at("traits");
    EXPECT_EQ(t.at("sign_based").get<bool>(), s.sign_based);
    EXPECT_EQ(t.at("needs_2d").get<bool>(), s.needs_2d);
    EXPECT_EQ(t.contains("as_scalar"), !s.as_scalar.empty());
    if (!s.as_scalar.empty()) {
      EXPECT_EQ(t.at("as_scalar"), s.as_scalar);
    }
    EXPECT_EQ(t.contains("default_scalar"), !s.default_scalar.empty());
    if (!s.default_scalar.empty()) {
      EXPECT_EQ(t.at("default_scalar"), s.default_scalar);
    }
    EXPECT_EQ(t.contains("named_scalars"), !s.named_scalars.empty());
    if (!s.named_scalars.empty()) {
      EXPECT_EQ(t.at("named_scalars").get<std::vector<std::string>>(), s.named_scalars);
      saw_named_scalars = true;
    }
    ASSERT_EQ(k.at("hyperparams").size(), s.hyperparams.size());
    for (size_t h = 0; h < s.hyperparams.size(); ++h)
      EXPECT_EQ(k.at("hyperparams").at(h).at("name"), s.hyperparams[h].name);
  }
  EXPECT_TRUE(saw_named_scalars) << "no kind lists named scalar optimizers (muon does)";
}

}  // namespace
}  // namespace shardcheck
