// The detection plan: for each silent-bug failpoint (spec/failpoint.h), the
// smallest subset of scenarios/ci found to catch it: one scenario file and
// a --filter expression, usually one cell (docs/detection.md). `shardcheck
// selftest` runs each failpoint on its subset, so the whole self-test stays
// short; the detection tests assert each subset still catches its bug.
#pragma once

#include <string>
#include <vector>

namespace shardcheck {

struct DetectionSubset {
  const char* failpoint;
  const char* scenario;  // a file of scenarios/ci
  const char* filter;    // a `run --filter` expression; "" takes every cell
  const char* why;       // why this subset sees the bug
};

// One entry per silent failpoint, in AllFailpoints() order.
const std::vector<DetectionSubset>& DetectionPlan();

// The entry of `failpoint`, or nullptr.
const DetectionSubset* FindDetectionSubset(const std::string& failpoint);

}  // namespace shardcheck
