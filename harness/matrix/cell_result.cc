#include "harness/matrix/cell_result.h"

#include <torch/csrc/api/include/torch/version.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "harness/matrix/result_json.h"

namespace shardcheck {

namespace {

std::string Shell(const char* cmd) {
  std::string out;
  if (FILE* f = ::popen(cmd, "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof(buf), f)) out += buf;
    ::pclose(f);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace

nlohmann::ordered_json EnvironmentJson(const std::string& backend) {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  // SHARDCHECK_COMMIT names the commit when the binary runs outside its
  // checkout (ci/pr-report builds from exported trees).
  const char* given = std::getenv("SHARDCHECK_COMMIT");
  std::string commit = given && *given ? given : Shell("git rev-parse --short HEAD 2>/dev/null");
  if (commit.empty()) commit = "unknown";
  return {
      {"commit", commit},
      {"libtorch", std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) +
                       "." + std::to_string(TORCH_VERSION_PATCH)},
      {"backend", backend},
      {"host", host},
      {"shardcheck", "0.1"}};
}

nlohmann::ordered_json CellResultHead(const Cell& cell, const std::string& verdict) {
  nlohmann::ordered_json j;
  j["format"] = "shardcheck-cell-result/1";
  j["id"] = cell.id;
  j["scenario"] = {{"name", cell.scenario}, {"file", cell.file}, {"line", cell.line}};
  j["config"] = CellConfigJson(cell);
  j["environment"] = EnvironmentJson(cell.backend);
  j["verdict"] = verdict;
  j["error"] = nullptr;
  j["first_failure"] = nullptr;
  return j;
}

// docs/scenarios.md, "Expected failures": a cell expected to fail that
// failed a check (the expected one, when `failing_check` names it) is an
// xfail; one that passed is an xpass, which fails the run (a fixed upstream
// bug must show, so its expectation is dropped). An error stays an error:
// a broken environment is never the bug that was expected.
void ApplyExpectation(const Cell& cell, nlohmann::ordered_json& j) {
  if (!cell.expect_fail) return;
  const ExpectedFailure& e = *cell.expect_fail;
  const std::string got = j["verdict"];
  j["expected"] = {
      {"verdict", "fail"},
      {"reason", e.reason},
      {"failing_check", e.check.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.check)},
      {"got", got}};
  if (got == "fail") {
    const std::string failed = j["first_failure"].value("check", std::string());
    if (e.check.empty() || failed == e.check) {
      j["verdict"] = "xfail";
    } else {
      j["first_failure"]["detail"] =
          "expected " + e.check + " to fail (" + e.reason + "), but " + failed +
          " failed first: " + j["first_failure"].value("detail", std::string());
    }
  } else if (got == "pass") {
    j["verdict"] = "xpass";
    j["first_failure"] = {{"check", "expected-failure"},
                          {"step", nullptr},
                          {"tensor", nullptr},
                          {"detail", "expected to fail (" + e.reason +
                                         "), but every check passed: if the bug is fixed, "
                                         "drop the expectation"}};
  }
}

nlohmann::ordered_json SkippedCell(const Cell& cell, const std::string& reason) {
  nlohmann::ordered_json j = CellResultHead(cell, "skipped");
  j["skipped"] = reason;
  j["wall_s"] = 0.0;
  return j;
}

}  // namespace shardcheck
