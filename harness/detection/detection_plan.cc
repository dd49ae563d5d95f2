#include "harness/detection/detection_plan.h"

namespace shardcheck {

std::string Cells::Filter() const {
  std::string out;
  auto add = [&](const std::string& key, const std::string& value) {
    out += (out.empty() ? "" : ",") + key + "=" + value;
  };
  if (model_) add("model", model_);
  if (optimizer_) add("optimizer", optimizer_);
  if (dp_) add("dp", std::to_string(dp_));
  if (resume_dp_) add("resume_dp", std::to_string(resume_dp_));
  if (dtype_) add("dtype", dtype_);
  if (sharding_) add("sharding_type", sharding_->name());
  return out;
}

namespace {

constexpr const char* kRoundTrip = "oracle_roundtrip.yaml";

// One same-DP round trip of `setup` at dp 1 or 2, fp32 (bf16 rounding would
// hide nothing, but fp32 keeps the failure messages about the bug itself).
Cells RoundTrip(const char* setup, int dp,
                ShardingType type = ShardingType::kDpReshardable) {
  return Cells().Optimizer(setup).Dp(dp).Fp32().Sharding(type);
}

}  // namespace

const std::vector<DetectionSubset>& DetectionPlan() {
  static const std::vector<DetectionSubset> plan = {
      {"grad_scale_applied_twice", kRoundTrip,
       RoundTrip("sgd", 2),
       "SGD's step is linear in the gradient (Adam and Lion are nearly scale-invariant)"},
      {"grad_divided_by_dp_not_microbatches", kRoundTrip,
       RoundTrip("sgd", 2),
       "SGD's step is linear in the gradient; dp 2 differs from M = 24"},
      {"data_from_dp_rank_not_global_microbatch", "tiny_models.yaml",
       Cells().Model("gpt-tiny").Optimizer("adam").ResumeDp(2),
       "a real model at dp 2: rank 1 trains on rank 0's data"},
      {"scalar_params_routed_to_muon", kRoundTrip, RoundTrip("muon_adam", 1),
       "the routing check; the reference shares RouteParams and cannot see it"},
      {"shard_range_off_by_one", kRoundTrip, RoundTrip("adam", 2), "dp 2 cuts a param at the shard boundary"},
      {"skip_straddling_param", kRoundTrip, RoundTrip("adam", 2), "dp 2 cuts a param at the shard boundary"},
      {"lion_updated_moment_in_sign", kRoundTrip,
       RoundTrip("lion", 1),
       "from step 2 on, the two moments differ in sign somewhere"},
      {"lion_sign_zero_is_one", "sparse_grads.yaml", Cells().Optimizer("lion"),
       "the zero-mask oracle: one gradient in eight is exactly 0, so sign(0) is taken"},
      {"allgather_skips_last_bucket", kRoundTrip, RoundTrip("adam", 2),
       "dp 2: rank 1's part of the last bucket never reaches rank 0"},
      {"two_moment_state_keys", kRoundTrip, RoundTrip("ademamix", 1),
       "AdEMAMix has a third state, which the two names drop"},
      {"schema_from_top_level_optimizer", kRoundTrip, RoundTrip("muon_adam", 1),
       "Muon's schema has one key; the scalar Adam loses exp_avg_sq"},
      {"third_state_key_dropped", kRoundTrip, RoundTrip("ademamix", 1),
       "AdEMAMix's schema record lacks exp_avg_sq: the strict load refuses it"},
      {"state_dtype_bf16_on_save", kRoundTrip, RoundTrip("adam", 1), "fp32 state does not survive bf16"},
      {"layerwise_state_not_saved", kRoundTrip, RoundTrip("muon_adam", 1),
       "Muon's momentum comes back as zeros"},
      {"bucket_offsets_use_padded_sizes", kRoundTrip,
       RoundTrip("adam", 2, ShardingType::kDpZeroGatherScatter),
       "bucket_size 1000 gives many buckets, each with end padding"},
      {"drop_step_on_save", kRoundTrip, RoundTrip("adam", 1), "the resumed run restarts at step 1"},
      {"ignore_param_start_padding", kRoundTrip, RoundTrip("adam", 1),
       "mixed-small's params are not multiples of 64 elements"},
      {"reshard_rank_order_reversed", "oracle_reshard.yaml",
       Cells().Optimizer("adam").Dp(1).ResumeDp(2).Sharding(ShardingType::kDpReshardable),
       "a load at a new DP size of 2 (at dp 1 the mirror is the rank itself)"},
      {"wrong_dp_rank_in_dp_zero_scatter", kRoundTrip,
       RoundTrip("adam", 2, ShardingType::kDpZeroGatherScatter),
       "dp 2: each rank reads the other's shard"},
      {"step_off_by_one_on_load", kRoundTrip, RoundTrip("adam", 1), "Adam's bias correction uses the step"},
      {"lr_schedule_restarts_on_load", "lr_schedule.yaml", Cells().Optimizer("adam").ResumeDp(3),
       "a save in the cosine decay: the restarted schedule warms up again"},
      {"skip_post_load_param_sync", kRoundTrip, RoundTrip("adam", 1),
       "the model params after the load are the initial ones"},
  };
  return plan;
}

const DetectionSubset* FindDetectionSubset(const std::string& failpoint) {
  for (const DetectionSubset& d : DetectionPlan())
    if (failpoint == d.failpoint) return &d;
  return nullptr;
}

}  // namespace shardcheck
