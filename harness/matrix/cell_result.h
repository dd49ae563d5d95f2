// The result.json of one cell (docs/results-schema.md) as every kind of
// cell starts it, and its verdict against an expected failure.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "harness/matrix/scenario.h"

namespace shardcheck {

// The environment block of results: commit, libtorch version, backend, host.
nlohmann::ordered_json EnvironmentJson(const std::string& backend);

// The fields every cell result starts with: format, id, scenario, config,
// environment, `verdict`, no error and no first failure yet.
nlohmann::ordered_json CellResultHead(const Cell& cell, const std::string& verdict);

// docs/scenarios.md, "Expected failures": turns the verdict of a cell
// expected to fail into xfail (it failed the expected check) or xpass (it
// passed, which fails the run); an error stays an error. Nothing for a cell
// with no expectation.
void ApplyExpectation(const Cell& cell, nlohmann::ordered_json& result);

// The result.json of a cell that is not run: verdict "skipped", the reason
// in `skipped`.
nlohmann::ordered_json SkippedCell(const Cell& cell, const std::string& reason);

}  // namespace shardcheck
