#include "harness/cli/cli_options.h"

#include <cctype>
#include <cmath>

#include "distributed/rendezvous.h"
#include "spec/device.h"
#include "spec/error.h"
#include "spec/registry.h"
#include "spec/schema.h"

namespace shardcheck {

namespace {

std::string Flag(const std::string& name) {
  std::string f = "--" + name;
  for (char& c : f)
    if (c == '_') c = '-';
  return f;
}

std::string Join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// One generated flag per declared hyperparameter, writing "name -> text" into `into`.
void AddHyperFlag(CLI::App* app, const DeclaredHyperParam& d, const std::string& prefix,
                  std::vector<std::pair<std::string, std::string>>& into,
                  const std::string& group) {
  const HyperParamSpec& h = *d.spec;
  const std::string name = h.name;
  const std::string help = h.help + "; " + h.RangeText() + "; of " + Join(d.kinds);
  if (h.type == HyperType::kBool) {
    auto set = [&into, name](int64_t) { into.push_back({name, "true"}); };
    app->add_flag_function(Flag(prefix + name), set, help)->group(group);
    return;
  }
  const char* type = h.type == HyperType::kInt        ? "INT"
                     : h.type == HyperType::kChoice   ? "WORD"
                     : h.type == HyperType::kRealList ? "NUMBERS"
                                                      : "NUMBER";
  auto set = [&into, name](const std::string& v) { into.push_back({name, v}); };
  app->add_option_function<std::string>(Flag(prefix + name), set, help)
      ->type_name(type)
      ->group(group);
}

}  // namespace

void OracleCliOptions::Register(CLI::App* app, bool optimizer_required) {
  auto* opt = app->add_option(
      "--optimizer", setup.name,
      Join(OptimizerSetup::Names(), " | ") +
          ", or a whole-param kind with --scalar-optimizer (`shardcheck optimizers` lists them)");
  if (optimizer_required) opt->required();
  app->add_option("--scalar-optimizer", setup.scalar_optimizer,
                  "the scalar optimizer of a whole-param kind (any elementwise kind: " +
                      Join(OptimizerSetup::ElementwiseNames()) + ")");
  app->add_option("--model", model, "oracle model: gpt-tiny or mixed-small")->capture_default_str();
  app->add_option("--shapes", shapes,
                  "instead of --model: params as [name=]NxM[:embedding|output|other],...")
      ->excludes(app->get_option("--model"))
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return s.empty() ? "is empty: give [name=]NxM,... or use --model" : "";
          },
          "SHAPES"));
  app->add_option("--steps", steps, "optimizer steps")
      ->capture_default_str()
      ->check(AtLeast(1, kMaxSteps, "steps of one run"));
  app->add_option("--seed", seed, "oracle seed")->capture_default_str()->check(SeedRange());
  app->add_option("--dtype", dtype, "model param dtype: fp32 | bf16 (main params are fp32)")
      ->capture_default_str();
  app->add_option("--device", device,
                  "where the optimizer's tensors live: cpu | cuda (cuda:LOCAL_RANK) | auto (cuda "
                  "when a GPU is visible); checkpoints and comparisons go through host copies")
      ->capture_default_str();
  app->add_option("--micro-batches", micro_batches,
                  "global micro-batches M per step (1..32; DP size must divide it)")
      ->capture_default_str()
      ->check(IntIn(1, 32, "the oracle's sums stay exact up to 32"));
  app->add_option_function<double>(
      "--max-grad-norm", [this](double v) { setup.max_grad_norm = v; },
      "clip the global grad norm (0: off)")
      ->check(RealIn(0, HUGE_VAL));
  const std::string schedule = "LR schedule (every child and group follows it)";
  app->add_option_function<int64_t>(
         "--lr-warmup-steps", [this](int64_t v) { setup.lr_warmup_steps = v; },
         "linear warm-up over this many updates (default 0)")
      ->check(IntIn(0, kMaxSteps, "steps of one run"))
      ->group(schedule);
  app->add_option_function<int64_t>(
         "--lr-decay-steps", [this](int64_t v) { setup.lr_decay_steps = v; },
         "decay over this many updates after the warm-up (Megatron's "
         "lr_decay_iters counts the warm-up too; this does not)")
      ->check(IntIn(0, kMaxSteps, "steps of one run"))
      ->group(schedule);
  app->add_option_function<std::string>(
         "--lr-decay-style", [this](const std::string& v) { setup.lr_decay_style = v; },
         "constant (default) | linear | cosine")
      ->group(schedule);
  app->add_option_function<double>(
         "--min-lr", [this](double v) { setup.min_lr = v; },
         "the lr after the decay (linear and cosine)")
      ->check(RealIn(0, HUGE_VAL))
      ->group(schedule);
  // Hyperparameters, from the registry.
  const std::vector<DeclaredHyperParam> declared = AllDeclaredHyperParams();
  for (const auto& d : declared)
    AddHyperFlag(app, d, "", setup.hyper,
                 "Hyperparameters (lr and weight decay: every child; others: the first child that "
                 "declares them)");
  for (DeclaredHyperParam d : declared) {
    if (!d.elementwise) continue;
    // Only elementwise kinds can be a scalar optimizer.
    std::vector<std::string> kinds;
    for (const auto& k : d.kinds)
      if (FindOptimizer(k).spec.placement == Placement::kElementwise) kinds.push_back(k);
    d.kinds = kinds;
    AddHyperFlag(app, d, "scalar_", setup.scalar_hyper,
                 "The scalar optimizer of a whole-param kind (muon_*)");
  }
}

OracleRunOptions OracleCliOptions::Resolve() const {
  OracleRunOptions o;
  o.model = shapes.empty() ? ModelByName(model) : ParseShapes(shapes);
  o.setup = setup.Resolve();
  o.steps = steps;
  o.seed = seed;
  std::string lower = dtype;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower != "fp32" && lower != "bf16")
    throw Error("--dtype '" + dtype + "': expected fp32 or bf16 (the model params' dtype)");
  o.dtype = ParseDtype(lower);
  o.micro_batches = micro_batches;
  o.device = ResolveDevice(ParseDeviceKind(device), DistEnvFromEnvironment().local_rank);
  o.Validate();
  return o;
}

}  // namespace shardcheck
