// Scenario files: expansion of the matrix, filters, and one test per kind
// of malformed scenario, each asserting the one-line file:line:column error.
#include "harness/matrix/scenario.h"

#include "harness/matrix/check_coverage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace shardcheck {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("shardcheck_scn_" + std::to_string(::getpid()) + "_" + name + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

const char* kGood = R"(name: good
model: oracle:mixed-small
dtype: [fp32, bf16]
optimizer: [adam, {name: lion, weight_decay: 0.1}]
sharding_type: [dp_reshardable, fully_reshardable]
dp: [1, 2, 3]
resume:
  - {save_at: 4, dp: same}
  - {save_at: 4, dp: 2}
steps: 8
bucket_size: 1000
exclude:
  - {optimizer: lion, dp: 3}
include:
  - {optimizer: muon_lion, sharding_type: fully_sharded_model_space, dp: 4, resume: {save_at: 2, dp: 1}}
)";

TEST(Scenario, ExpandsCrossProductWithExcludeAndInclude) {
  const Scenario sc = LoadScenario(Write("good", kGood));
  // 2 dtypes x 2 optimizers x 2 types x (dp 1: 2 plans, dp 2: 1 — `same` and
  // `2` are one cell —, dp 3: 2) = 40, minus lion at dp 3 (2 x 2 x 2 = 8),
  // plus one include.
  EXPECT_EQ(sc.cells.size(), 40u - 8u + 1u);
  const Cell& last = sc.cells.back();
  EXPECT_EQ(last.optimizer.label, "muon_lion");
  EXPECT_EQ(last.dp, 4);
  ASSERT_TRUE(last.resume);
  EXPECT_EQ(last.resume->dp, 1);
  for (const Cell& c : sc.cells) {
    EXPECT_FALSE(c.optimizer.label == "lion" && c.dp == 3) << c.id;
    ASSERT_FALSE(c.checks.empty());  // oracle defaults: bitwise params, main params, state
    EXPECT_EQ(c.checks[0].kind, CheckKind::kBitwise);
  }
  for (const Cell& c : sc.cells) {
    if (c.optimizer.label == "lion") {
      EXPECT_EQ(c.optimizer.setup.main.weight_decay(), 0.1);
    }
  }
}

TEST(Scenario, LabelsAndFilter) {
  const Scenario sc = LoadScenario(Write("good2", kGood));
  const Cell* c = nullptr;
  for (const Cell& x : sc.cells)
    if (x.optimizer.label == "adam" && x.dp == 3 && x.resume && x.resume->dp == 2 &&
        x.dtype == "bf16" && x.sharding_type == ShardingType::kFullyReshardable)
      c = &x;
  ASSERT_NE(c, nullptr);
  const auto labels = c->Labels();
  for (const char* l : {"checkpoint", "adam", "fully_reshardable", "dp3", "dp2", "bf16"})
    EXPECT_NE(std::find(labels.begin(), labels.end(), l), labels.end()) << l;
  EXPECT_TRUE(MatchesFilter(*c, "optimizer=adam,dp=3,resume_dp=2"));
  EXPECT_FALSE(MatchesFilter(*c, "optimizer=lion"));
  EXPECT_TRUE(MatchesFilter(*c, "id=" + c->id));
  EXPECT_TRUE(MatchesFilter(*c, "fully_reshardable"));
}

TEST(Scenario, SparseOracleModels) {
  const Scenario sc = LoadScenario(
      Write("sparse",
            "name: sparse\nmodel: ['oracle:sparse-mixed-small', 'oracle:sparse-gpt-tiny', "
            "'oracle:sparse-shapes:w=64x32,b=32,e=16x8:embedding']\n"
            "optimizer: [lion, muon_lion]\nsharding_type: dp_reshardable\ndp: 2\n"));
  ASSERT_EQ(sc.cells.size(), 6u);
  std::set<std::string> ids;
  for (const Cell& c : sc.cells) {
    EXPECT_EQ(c.model.rfind("oracle:sparse-", 0), 0u) << c.model;
    EXPECT_FALSE(c.RealModel());
    EXPECT_NE(c.id.find("oracle-sparse-"), std::string::npos) << c.id;
    EXPECT_TRUE(ids.insert(c.id).second) << c.id;
  }
}

// `optimizer: all` expands to every named setup of the registry, with the
// hyperparameters every setup declares; `all_elementwise` to the elementwise kinds.
TEST(Scenario, OptimizerAllExpandsFromTheRegistry) {
  const Scenario sc = LoadScenario(Write("all",
                                         "name: all\nmodel: oracle:mixed-small\n"
                                         "optimizer: {name: all, weight_decay: 0.03}\n"
                                         "sharding_type: dp_reshardable\ndp: 2\n"));
  std::vector<std::string> labels;
  for (const Cell& c : sc.cells) {
    labels.push_back(c.optimizer.label);
    for (const OptimizerConfig* child : c.optimizer.setup.Children())
      EXPECT_EQ(child->weight_decay(), 0.03) << c.id;
  }
  EXPECT_EQ(labels, OptimizerSetup::Names());
  const Scenario ew = LoadScenario(Write("all_ew",
                                         "name: ew\nmodel: oracle:mixed-small\n"
                                         "optimizer: all_elementwise\n"
                                         "sharding_type: dp_reshardable\ndp: 2\n"));
  labels.clear();
  for (const Cell& c : ew.cells) {
    labels.push_back(c.optimizer.label);
    EXPECT_FALSE(c.optimizer.setup.IsComposite()) << c.id;
  }
  EXPECT_EQ(labels, OptimizerSetup::ElementwiseNames());
}

// Every hyperparameter key the registry declares is a scenario key; a
// composite takes scalar_<name> for its scalar optimizer and a scalar_optimizer.
TEST(Scenario, HyperparametersByNameAndScalarOptimizer) {
  const Scenario sc = LoadScenario(
      Write("hyper",
            "name: h\nmodel: oracle:mixed-small\n"
            "optimizer:\n"
            "  - {name: muon, scalar_optimizer: lion, momentum: 0.9, scalar_beta1: 0.5,"
            " nesterov: true, ns_coefficients: [3.0, -4.0, 2.0]}\n"
            "sharding_type: dp_reshardable\ndp: 2\n"));
  ASSERT_EQ(sc.cells.size(), 1u);
  const OptimizerSetup& s = sc.cells[0].optimizer.setup;
  EXPECT_EQ(s.name, "muon_lion");
  ASSERT_TRUE(s.scalar);
  EXPECT_EQ(s.main.Real("momentum"), 0.9);
  EXPECT_TRUE(s.main.Flag("nesterov"));
  EXPECT_EQ(s.main.Reals("ns_coefficients"), (std::vector<double>{3.0, -4.0, 2.0}));
  EXPECT_EQ(s.scalar->Real("beta1"), 0.5);
  EXPECT_EQ(s.scalar->kind(), "lion");
}

// The lr-schedule keys depend on each other (decay steps need a style):
// they are checked together, in any order.
TEST(Scenario, ScheduleKeysInAnyOrder) {
  const Scenario sc = LoadScenario(Write("sched",
                                         "name: s\nmodel: oracle:mixed-small\n"
                                         "optimizer: {name: adamw, lr_decay_steps: 6, min_lr: 1e-5,"
                                         " lr_decay_style: cosine, lr_warmup_steps: 3}\n"
                                         "sharding_type: dp_reshardable\ndp: 2\n"));
  ASSERT_EQ(sc.cells.size(), 1u);
  const LrSchedule& s = sc.cells[0].optimizer.setup.lr_schedule;
  EXPECT_EQ(s.style, LrDecayStyle::kCosine);
  EXPECT_EQ(s.warmup_steps, 3);
  EXPECT_EQ(s.decay_steps, 6);
  EXPECT_EQ(s.min_lr, 1e-5);
}

struct Bad {
  const char* desc;
  std::string text;
  int line, column;
  const char* words;
};

class MalformedScenario : public testing::TestWithParam<Bad> {};

TEST_P(MalformedScenario, OneLineErrorWithFileLineColumn) {
  const Bad& b = GetParam();
  const std::string path = Write(b.desc, b.text);
  try {
    LoadScenario(path);
    FAIL() << "accepted: " << b.desc;
  } catch (const ScenarioError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    const std::string where =
        path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": ";
    EXPECT_EQ(msg.rfind(where, 0), 0u) << "expected to start with " << where << "\n got: " << msg;
    EXPECT_NE(msg.find(b.words), std::string::npos) << "expected '" << b.words << "' in: " << msg;
  }
}

const std::string kHead = "name: x\nmodel: oracle:mixed-small\n";

INSTANTIATE_TEST_SUITE_P(
    Mistakes, MalformedScenario,
    testing::Values(
        Bad{"unknown_key",
            kHead + "optimizer: adam\nsharding_type: dp_reshardable\ndp: 2\ndps: 3\n", 6, 1,
            "unknown key 'dps'"},
        Bad{"wrong_type",
            kHead + "optimizer: adam\nsharding_type: dp_reshardable\ndp: 2\nsteps: ten\n", 6, 8,
            "steps: expected an integer"},
        Bad{"dp_not_dividing_m",
            kHead + "optimizer: adam\nsharding_type: dp_reshardable\ndp: [2, 5]\n", 5, 9,
            "dp 5 does not divide micro_batches 24"},
        Bad{"type_forbids_plan",
            kHead + "optimizer: adam\nsharding_type: dp_reshardable\ndp: 2\nresume:\n  - {save_at: "
                    "4, dp: 3, bucket_size: 500}\n",
            7, 5, "cannot change the bucket size"},
        Bad{"muon_without_matrix",
            "name: x\nmodel: oracle:shapes:a=32,b=16\noptimizer: [adam, muon_lion]\nsharding_type: "
            "dp_reshardable\ndp: 2\n",
            3, 19, "needs a 2-D hidden weight"},
        Bad{"muon_without_matrix_sparse",
            "name: x\nmodel: oracle:sparse-shapes:a=32,b=16\noptimizer: [adam, muon_lion]\n"
            "sharding_type: dp_reshardable\ndp: 2\n",
            3, 19, "needs a 2-D hidden weight"},
        Bad{"unknown_sparse_oracle_model",
            "name: x\nmodel: oracle:sparse-gpt-huge\noptimizer: adam\nsharding_type: "
            "dp_reshardable\ndp: 2\n",
            2, 8, "unknown oracle model 'sparse-gpt-huge'"},
        Bad{"unknown_optimizer",
            kHead + "optimizer: [adam, adagrad]\nsharding_type: dp_reshardable\ndp: 2\n", 3, 19,
            "unknown optimizer 'adagrad'"},
        Bad{"unknown_sharding_type", kHead + "optimizer: adam\nsharding_type: [zero3]\ndp: 2\n", 4,
            17, "unknown sharding type 'zero3'"},
        Bad{"save_after_last_step",
            kHead + "optimizer: adam\nsharding_type: dp_reshardable\ndp: 2\nsteps: 5\nresume: "
                    "[{save_at: 5, dp: 1}]\n",
            7, 20, "save_at 5 must be in [1, steps - 1]"},
        Bad{"loss_check_on_oracle",
            kHead + "optimizer: adam\nsharding_type: dp_reshardable\ndp: 2\nchecks:\n  - {kind: "
                    "tolerance, on: loss, rtol: 0.1}\n",
            7, 5, "a loss check needs a real model"},
        Bad{"negative_tolerance",
            kHead + "optimizer: adam\nsharding_type: dp_reshardable\ndp: 2\nchecks:\n  - {kind: "
                    "tolerance, on: params, rtol: -1}\n",
            7, 5, "atol and rtol must be >= 0"},
        Bad{"unknown_check_kind",
            kHead + "optimizer: adam\nsharding_type: dp_reshardable\ndp: 2\nchecks:\n  - {kind: "
                    "close, on: params}\n",
            7, 12, "check kind 'close'"},
        Bad{"unknown_model",
            "name: x\nmodel: gpt-huge\noptimizer: adam\nsharding_type: dp_reshardable\ndp: 2\n", 2,
            8, "unknown model 'gpt-huge'"},
        Bad{"duplicate_key",
            kHead + "optimizer: adam\nsharding_type: dp_reshardable\ndp: 2\ndp: 3\n", 6, 1,
            "duplicate key 'dp'"},
        Bad{"yaml_syntax", kHead + "optimizer: [adam\nsharding_type: dp_reshardable\n", 4, 14,
            "YAML syntax"},
        Bad{"missing_key", "name: x\nmodel: oracle:mixed-small\noptimizer: adam\ndp: 2\n", 1, 1,
            "missing key 'sharding_type'"},
        Bad{"bad_optimizer_field",
            kHead + "optimizer: [{name: adam, betas: 0.9}]\nsharding_type: dp_reshardable\ndp: 2\n",
            3, 26, "optimizer adam has no hyperparameter 'betas' (adam takes: lr, weight_decay"},
        Bad{"hyperparameter_the_optimizer_lacks",
            kHead + "optimizer: [{name: lion, eps: 1e-8}]\nsharding_type: dp_reshardable\ndp: 2\n",
            3, 26,
            "optimizer lion has no hyperparameter 'eps' (lion takes: lr, weight_decay, beta1, "
            "beta2)"},
        Bad{"hyperparameter_out_of_range",
            kHead + "optimizer: [{name: adam, beta1: 1.5}]\nsharding_type: dp_reshardable\ndp: 2\n",
            3, 26, "invalid beta1: 1.5"},
        Bad{"all_with_a_key_some_lack",
            kHead + "optimizer: {name: all, eps: 1e-6}\nsharding_type: dp_reshardable\ndp: 2\n", 3,
            24, "has no hyperparameter 'eps'"},
        Bad{"schedule_keys_that_do_not_fit",
            kHead + "optimizer: [{name: adam, lr_decay_steps: 5}]\nsharding_type: "
                    "dp_reshardable\ndp: 2\n",
            3, 13, "optimizer adam: lr schedule: decay steps need a decay style"},
        Bad{"label_on_all",
            kHead + "optimizer: {name: all, label: x}\nsharding_type: dp_reshardable\ndp: 2\n", 3,
            31, "a label needs a single optimizer"},
        Bad{"scalar_key_without_scalar",
            kHead +
                "optimizer: {name: adam, scalar_lr: 0.1}\nsharding_type: dp_reshardable\ndp: 2\n",
            3, 25, "has no scalar optimizer"}),
    [](const auto& info) { return std::string(info.param.desc); });

}  // namespace
}  // namespace shardcheck

namespace shardcheck {
namespace {

const char* kSystems = R"(name: systems
system: [shardcheck, torch-fsdp2, torch-fsdp2+fused]
model: oracle:mixed-small
optimizer: [adamw, lion]
sharding_type: [dp_reshardable, dcp]
dp: 2
resume:
  - none
  - {save_at: 4, dp: 3}
steps: 8
xfail:
  - {system: torch-fsdp2+fused, resume_dp: 3, failing_check: bitwise-state-vs-single_device,
     reason: "docs/findings.md#torch-fused-adam-cpu-shard-length"}
)";

const Cell& Find(const Scenario& sc, const std::string& id) {
  for (const Cell& c : sc.cells)
    if (c.id == id) return c;
  throw Error("no cell " + id);
}

TEST(ScenarioSystems, CrossesTheSystemAxisAndSaysWhatASystemLacks) {
  const Scenario sc = LoadScenario(Write("systems", kSystems));
  EXPECT_EQ(sc.cells.size(), 3u * 2u * 2u * 2u);
  const Cell& native = Find(sc, "adamw.dp_reshardable.dp2-to-dp3@4.fp32.oracle-mixed-small");
  EXPECT_FALSE(native.system.External());
  EXPECT_EQ(native.unsupported, "");
  EXPECT_EQ(Find(sc, "adamw.dcp.dp2.fp32.oracle-mixed-small").unsupported,
            "shardcheck has no sharding type dcp: it saves Megatron's four types");
  const Cell& fsdp = Find(sc, "torch-fsdp2.adamw.dcp.dp2-to-dp3@4.fp32.oracle-mixed-small");
  EXPECT_TRUE(fsdp.dcp);
  EXPECT_EQ(fsdp.ShardingName(), "dcp");
  EXPECT_EQ(fsdp.unsupported, "");
  EXPECT_EQ(CellDimension(fsdp, "system"), "torch-fsdp2");
  EXPECT_NE(Find(sc, "torch-fsdp2.lion.dcp.dp2.fp32.oracle-mixed-small")
                .unsupported.find("torch-fsdp2 has no lion"),
            std::string::npos);
  EXPECT_NE(Find(sc, "torch-fsdp2.adamw.dp_reshardable.dp2.fp32.oracle-mixed-small")
                .unsupported.find("checkpoints through DCP"),
            std::string::npos);
  // External cells: bitwise against the system's own single device and the
  // uninterrupted run, a tolerance against the reference.
  std::vector<std::string> names;
  for (const CheckSpec& c : fsdp.checks) names.push_back(c.Name());
  EXPECT_EQ(names, (std::vector<std::string>{
                       "bitwise-params-vs-single_device", "bitwise-state-vs-single_device",
                       "bitwise-params-vs-uninterrupted", "bitwise-state-vs-uninterrupted",
                       "tolerance-params", "tolerance-state"}));
  const auto labels = fsdp.Labels();
  for (const char* l : {"checkpoint", "systems", "fsdp2", "dcp", "dp3"})
    EXPECT_NE(std::find(labels.begin(), labels.end(), l), labels.end()) << l;
  const auto no_save = Find(sc, "torch-fsdp2.adamw.dcp.dp2.fp32.oracle-mixed-small").Labels();
  EXPECT_EQ(std::find(no_save.begin(), no_save.end(), "checkpoint"), no_save.end());
}

TEST(ScenarioSystems, XfailEntriesMarkTheCellsTheyMatch) {
  const Scenario sc = LoadScenario(Write("systems_xfail", kSystems));
  int marked = 0;
  for (const Cell& c : sc.cells) {
    const bool want = c.system.Name() == "torch-fsdp2+fused" && c.ResumeDp() == 3 && c.resume;
    EXPECT_EQ(c.expect_fail.has_value(), want) << c.id;
    if (!c.expect_fail) continue;
    ++marked;
    EXPECT_EQ(c.expect_fail->reason, "docs/findings.md#torch-fused-adam-cpu-shard-length");
    EXPECT_EQ(c.expect_fail->check, "bitwise-state-vs-single_device");
  }
  EXPECT_EQ(marked, 4);
}

TEST(ScenarioSystems, IncludeEntriesTakeSystemAndExpectation) {
  const Scenario sc = LoadScenario(Write("systems_include", R"(name: inc
model: oracle:mixed-small
optimizer: adamw
sharding_type: dcp
system: torch-fsdp2
dp: 2
include:
  - {system: torch-fsdp2+foreach, dp: 3, expect: fail, reason: "see docs/findings.md#torch-fsdp2-fused-sgd-dtensor"}
)"));
  ASSERT_EQ(sc.cells.size(), 2u);
  EXPECT_FALSE(sc.cells[0].expect_fail);
  EXPECT_EQ(sc.cells[1].system.Name(), "torch-fsdp2+foreach");
  ASSERT_TRUE(sc.cells[1].expect_fail);
  EXPECT_EQ(sc.cells[1].expect_fail->check, "");
}

TEST(ScenarioSystems, VersionedSystemsNameTheirReleaseAndWhatTheyLack) {
  const Scenario sc = LoadScenario(Write("systems_megatron", R"(name: meg
system: [megatron-core, megatron-core@0.18.2]
model: oracle:mixed-small
optimizer: [adamw, muon_lion, sgd]
sharding_type: [fully_reshardable, dcp]
dtype: [fp32, bf16]
dp: 2
resume: {save_at: 4, dp: 3}
steps: 8
)"));
  // megatron-core alone is its newest pinned release, named in full.
  const Cell& newest =
      Find(sc, "megatron-core@0.19.2.adamw.fully_reshardable.dp2-to-dp3@4.fp32.oracle-mixed-small");
  EXPECT_EQ(newest.system.version, "0.19.2");
  EXPECT_EQ(newest.unsupported, "");
  EXPECT_EQ(CellDimension(newest, "system"), "megatron-core@0.19.2");
  const Cell& old =
      Find(sc, "megatron-core@0.18.2.muon_lion.fully_reshardable.dp2-to-dp3@4.bf16.oracle-mixed-small");
  EXPECT_EQ(old.unsupported, "");
  EXPECT_FALSE(old.system == newest.system);
  const auto labels = old.Labels();
  for (const char* l : {"checkpoint", "systems", "megatron", "muon_lion", "dp3"})
    EXPECT_NE(std::find(labels.begin(), labels.end(), l), labels.end()) << l;
  // bf16 main params are checked too; Muon against the reference within its own bound.
  std::vector<std::string> names;
  for (const CheckSpec& c : old.checks) names.push_back(c.Name());
  EXPECT_NE(std::find(names.begin(), names.end(), "bitwise-main_params-vs-uninterrupted"),
            names.end());
  EXPECT_NE(Find(sc, "megatron-core@0.19.2.muon_lion.fully_reshardable.dp2-to-dp3@4.fp32."
                     "oracle-mixed-small")
                .unsupported.find("needs a bf16 model"),
            std::string::npos);
  EXPECT_NE(Find(sc, "megatron-core@0.19.2.sgd.fully_reshardable.dp2-to-dp3@4.fp32.oracle-mixed-small")
                .unsupported.find("its adapter drives adam, adamw and lion"),
            std::string::npos);
  EXPECT_NE(Find(sc, "megatron-core@0.18.2.adamw.dcp.dp2-to-dp3@4.fp32.oracle-mixed-small")
                .unsupported.find("has no sharding type dcp"),
            std::string::npos);
}

// The groups a cell's checks leave unchecked: every state key of the setup
// by name (Lion's one moment, Muon's momentum_buffer), main params only for
// bf16, and a bitwise check on a real model with fp32 sums only where the
// resume keeps the DP size.
TEST(CheckCoverage, NamesEveryGroupNoApplicableCheckCovers) {
  auto cells = [](const std::string& extra) {
    return ParseScenario("name: c\nmodel: gpt-tiny\ndtype: bf16\noptimizer: muon_lion\n"
                         "sharding_type: dp_reshardable\ndp: 2\nsteps: 4\nmicro_batches: 4\n"
                         "resume: [{save_at: 2, dp: same}, {save_at: 2, dp: 4}]\n" + extra,
                         "c.yaml")
        .cells;
  };
  const auto only_params = cells("checks: [{kind: bitwise, on: params}]\n");
  ASSERT_EQ(only_params.size(), 2u);
  EXPECT_EQ(UncheckedGroups(only_params[0]),
            (std::vector<std::string>{"main_params", "momentum_buffer", "exp_avg"}));
  EXPECT_EQ(UncheckedGroups(only_params[1]),
            (std::vector<std::string>{"params", "main_params", "momentum_buffer", "exp_avg"}));
  EXPECT_NE(UncheckedWarning(only_params[1]).find("c.yaml:1: cell " + only_params[1].id +
                                                  " leaves params, main_params"),
            std::string::npos);
  const auto exact = cells(
      "grad_reduction: exact\nchecks: [{kind: bitwise, on: params}, {kind: bitwise, on: "
      "main_params}, {kind: bitwise, on: state}]\n");
  for (const Cell& c : exact) EXPECT_TRUE(UncheckedGroups(c).empty()) << c.id;
  const auto said = cells("checks: [{kind: tolerance, on: loss, rtol: 0.02}]\nunchecked: why\n");
  EXPECT_EQ(UncheckedGroups(said[0]).size(), 4u);
  EXPECT_EQ(UncheckedWarning(said[0]), "");
  const auto adam = ParseScenario(
                        "name: a\nmodel: oracle:mixed-small\noptimizer: adam\n"
                        "sharding_type: dp_reshardable\ndp: 2\nchecks: [{kind: bitwise, on: "
                        "params}]\n",
                        "a.yaml")
                        .cells;
  EXPECT_EQ(UncheckedGroups(adam[0]), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
}

// Every own-system cell checks the grad norm by default: bitwise on the
// oracle (against the reference and the independent fp64 norm of the
// gradients), within 1e-12 with the exact reduction, within the measured
// drift with fp32 sums; external systems report none.
TEST(DefaultChecks, JudgeTheGradNormOfEveryCell) {
  auto names = [](const std::string& model, const std::string& extra) {
    const auto cells = ParseScenario("name: g\nmodel: " + model +
                                         "\noptimizer: adam\nsharding_type: dp_reshardable\n"
                                         "dp: 2\nmicro_batches: 4\n" + extra,
                                     "g.yaml")
                           .cells;
    std::map<std::string, double> out;  // check name -> rtol
    for (const CheckSpec& c : cells.at(0).checks)
      if (c.on == CheckOn::kGradNorm) out[c.Name()] = c.rtol;
    return out;
  };
  EXPECT_EQ(names("oracle:mixed-small", ""),
            (std::map<std::string, double>{{"bitwise-grad_norm", 0.0},
                                           {"bitwise-grad_norm-vs-gradients", 0.0}}));
  EXPECT_EQ(names("gpt-tiny", "grad_reduction: exact\n"),
            (std::map<std::string, double>{{"tolerance-grad_norm", 1e-12},
                                           {"tolerance-grad_norm-vs-gradients", 1e-12}}));
  EXPECT_EQ(names("gpt-tiny", "dtype: bf16\n"),
            (std::map<std::string, double>{{"tolerance-grad_norm", 0.1},
                                           {"tolerance-grad_norm-vs-gradients", 0.1}}));
  EXPECT_EQ(names("gpt-tiny", "dtype: fp32\n"),
            (std::map<std::string, double>{{"tolerance-grad_norm", 0.02},
                                           {"tolerance-grad_norm-vs-gradients", 0.02}}));
}

// `against: gradients` belongs to grad_norm checks, and a grad_norm check is
// against the reference or the gradients only.
TEST(DefaultChecks, GradNormAgainstRules) {
  auto error = [](const std::string& check) {
    try {
      ParseScenario("name: g\nmodel: oracle:mixed-small\noptimizer: adam\n"
                    "sharding_type: dp_reshardable\ndp: 2\nchecks: [" + check + "]\n",
                    "g.yaml");
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error("{kind: bitwise, on: params, against: gradients}")
                .find("against: gradients goes with on: grad_norm"),
            std::string::npos);
  EXPECT_NE(error("{kind: bitwise, on: grad_norm, against: uninterrupted}")
                .find("a grad_norm check is against reference or gradients"),
            std::string::npos);
  EXPECT_EQ(error("{kind: tolerance, on: grad_norm, against: gradients, rtol: 1.0e-9}"),
            "accepted");
  EXPECT_NE(error("{kind: loss_fall, on: grad_norm, min_fall: 0.5}").find("goes with on: loss"),
            std::string::npos);
}

}  // namespace
}  // namespace shardcheck
