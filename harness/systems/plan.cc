#include "harness/systems/plan.h"

#include "spec/config_json.h"
#include "spec/routing.h"

namespace shardcheck {

namespace {

nlohmann::ordered_json ParamsJson(const ModelSpec& model, const std::string& dtype) {
  nlohmann::ordered_json params = nlohmann::ordered_json::array();
  for (size_t i = 0; i < model.params.size(); ++i) {
    const ParamInfo& p = model.params[i];
    params.push_back({{"pid", i},
                      {"name", p.name},
                      {"shape", p.shape},
                      {"dtype", dtype},
                      {"role", RoleName(p.role)},
                      {"wd_mult", p.DefaultWdMult()}});
  }
  return params;
}

nlohmann::ordered_json OptimizerJson(const PlanInputs& in) {
  nlohmann::ordered_json j;
  j["setup"] = SetupJson(in.setup);
  j["groups"] = nlohmann::ordered_json::array();
  for (const GroupRecord& g : GroupRecords(RouteParams(in.setup, in.model.params), in.model.params))
    j["groups"].push_back({{"optimizer", g.optimizer},
                           {"wd_mult", g.wd_mult},
                           {"lr", g.lr},
                           {"weight_decay", g.weight_decay},
                           {"params", g.params}});
  // Every group of every child uses its lr times the schedule's factor of the step.
  j["lr_factor"] = nlohmann::ordered_json::array();
  for (int t = 1; t <= in.steps; ++t)
    j["lr_factor"].push_back(in.setup.lr_schedule.Factor(t, in.setup.main.lr()));
  return j;
}

nlohmann::ordered_json RunJson(const PlanRun& r) {
  nlohmann::ordered_json j = {
      {"name", r.name}, {"dp", r.dp}, {"first_step", r.first_step}, {"last_step", r.last_step}};
  if (r.save_at > 0) {
    j["save_at"] = r.save_at;
    j["save_dir"] = "ckpt";
  }
  if (r.load) {
    j["load_dir"] = "ckpt";
    j["load_step"] = r.first_step - 1;
  }
  return j;
}

}  // namespace

nlohmann::ordered_json PlanJson(const PlanInputs& in) {
  nlohmann::ordered_json j;
  j["format"] = kPlanFormat;
  j["cell"] = in.cell;
  j["system"] = {{"name", in.system.BaseName()},
                 {"variant", in.system.variant},
                 {"version", in.system.version}};
  j["model"] = {
      {"name", in.model.name}, {"dtype", in.dtype}, {"params", ParamsJson(in.model, in.dtype)}};
  j["oracle"] = {
      {"seed", in.seed}, {"micro_batches", in.micro_batches}, {"zero_mask", in.model.zero_mask}};
  j["optimizer"] = OptimizerJson(in);
  j["sharding_type"] = in.sharding_type;
  j["steps"] = in.steps;
  j["timeout_s"] = in.timeout_s;
  j["runs"] = nlohmann::ordered_json::array();
  for (const PlanRun& r : in.runs) j["runs"].push_back(RunJson(r));
  j["inject"] = in.inject;
  return j;
}

}  // namespace shardcheck
