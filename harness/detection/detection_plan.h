// The detection plan: for each silent-bug failpoint (spec/failpoint.h), the
// smallest subset of scenarios/ci found to catch it: one scenario file and
// a --filter expression, usually one cell (docs/detection.md). `shardcheck
// selftest` runs each failpoint on its subset, so the whole self-test stays
// short; the detection tests assert each subset still catches its bug.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "distributed/sharding_type.h"

namespace shardcheck {

// The cells of a scenario file a subset keeps, by dimension: a dimension
// left unset keeps every value. Built by naming the dimensions:
//   Cells().Optimizer("adam").Dp(2).Fp32().Sharding(ShardingType::kDpReshardable)
class Cells {
 public:
  Cells& Model(const char* model) { model_ = model; return *this; }
  Cells& Optimizer(const char* setup) { optimizer_ = setup; return *this; }
  Cells& Dp(int dp) { dp_ = dp; return *this; }
  Cells& ResumeDp(int dp) { resume_dp_ = dp; return *this; }
  Cells& Fp32() { dtype_ = "fp32"; return *this; }
  Cells& Sharding(ShardingType t) { sharding_ = t; return *this; }

  // The `run --filter` expression (docs/scenarios.md): the set dimensions
  // as key=value, in the order model, optimizer, dp, resume_dp, dtype,
  // sharding_type; "" keeps every cell.
  std::string Filter() const;

 private:
  const char* model_ = nullptr;
  const char* optimizer_ = nullptr;
  int dp_ = 0, resume_dp_ = 0;
  const char* dtype_ = nullptr;
  std::optional<ShardingType> sharding_;
};

struct DetectionSubset {
  const char* failpoint;
  const char* scenario;  // a file of scenarios/ci
  Cells cells;           // its cells that run
  const char* why;       // why this subset sees the bug
};

// One entry per silent failpoint, in AllFailpoints() order.
const std::vector<DetectionSubset>& DetectionPlan();

// The entry of `failpoint`, or nullptr.
const DetectionSubset* FindDetectionSubset(const std::string& failpoint);

}  // namespace shardcheck
