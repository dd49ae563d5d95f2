// The DistributedOptimizer against the reference for every branch case the
// registry generates (testing/branch_cases.h): for each named optimizer
// setup, each child's kind's cases applied to that child (a composite's
// whole-param main child and its elementwise scalar child in turn), 3 steps
// on 3 thread-ranks, fp32, bitwise. DistributedThreads runs the defaults
// only; this table holds every path a hyperparameter picks on the sharded
// side (Nesterov, Muon's scale modes and bf16 Newton–Schulz, ...) to the
// reference, and covers a new optimizer's flags without a line here. One
// test per setup loops over its cases (a failure names the case); a small
// model and the in-process communicator keep the whole table to seconds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/cell/dist_train.h"
#include "harness/cell/thread_ranks.h"
#include "testing/branch_cases.h"

namespace shardcheck {
namespace {

// Every role a setup's params can have, with a 7-element param, params
// that straddle ranks and buckets, and 2-D hidden weights for Muon.
ModelSpec TinyModel() {
  return ParseShapes(
      "emb=48x16:embedding,w1=32x16,b1=32,tiny=7,w2=16x32,norm=16,head=48x16:output");
}

// One setup with one branch case applied to one of its children.
struct SetupCase {
  std::string setup;
  bool scalar_child = false;  // the case's child: the composite's scalar one, else main
  std::string kind;           // that child's kind
  BranchCase branch;
};

// The cases of one setup: the main child's, then the scalar child's but
// `defaults` (the main child's `defaults` already runs both at defaults).
std::vector<SetupCase> SetupBranchCases(const std::string& name) {
  std::vector<SetupCase> out;
  const OptimizerSetup setup = OptimizerSetup::Defaults(name);
  for (const BranchCase& b : BranchCases(setup.main.kind()))
    out.push_back({name, false, setup.main.kind(), b});
  if (!setup.scalar) return out;
  for (const BranchCase& b : BranchCases(setup.scalar->kind()))
    if (!b.IsDefaults()) out.push_back({name, true, setup.scalar->kind(), b});
  return out;
}

TrainOptions Options(const SetupCase& c) {
  TrainOptions t;
  t.run.model = TinyModel();
  t.run.setup = OptimizerSetup::Defaults(c.setup);
  // Weight decay on in every child, as DistributedThreads runs it; the case
  // may replace it.
  t.run.setup.main.Set("weight_decay", 0.02);
  if (t.run.setup.scalar) t.run.setup.scalar->Set("weight_decay", 0.02);
  c.branch.ApplyTo(c.scalar_child ? *t.run.setup.scalar : t.run.setup.main);
  t.run.setup.Validate();
  t.run.steps = 3;
  t.run.seed = 91;
  t.run.dtype = at::kFloat;
  t.bucket_size = 600;
  t.compare_reference = true;
  return t;
}

// One case: 3 steps on 3 thread-ranks, every group bitwise every step.
void ExpectBitwiseEqualToReference(const SetupCase& c) {
  const ThreadRun run =
      RunTrainOnThreads(Options(c), 3, std::chrono::seconds(60), ThreadComm::kInProcess);
  for (const auto& e : run.errors) ADD_FAILURE() << e;
  const TrainResult& r = run.root;
  EXPECT_TRUE(r.ok) << (r.first_mismatch ? r.first_mismatch->tensor + " at step " +
                                               std::to_string(r.first_mismatch->step) + ": " +
                                               r.first_mismatch->detail
                                         : "");
  ASSERT_EQ(r.steps.size(), 3u);
  for (const auto& s : r.steps) {
    ASSERT_FALSE(s.groups.empty());
    for (const auto& g : s.groups) EXPECT_EQ(g.mismatches, 0) << g.group << " step " << s.step;
  }
}

// One test per named setup (one ctest test each: a process per case would
// cost more than the cases); a failure names the case.
class DistributedBranches : public testing::TestWithParam<std::string> {};

TEST_P(DistributedBranches, BitwiseEqualToReferenceEveryStep) {
  for (const SetupCase& c : SetupBranchCases(GetParam())) {
    SCOPED_TRACE("branch case " + c.setup + " " + c.kind + " " + c.branch.name);
    ExpectBitwiseEqualToReference(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, DistributedBranches, testing::ValuesIn(OptimizerSetup::Names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace shardcheck
