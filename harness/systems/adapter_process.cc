#include "harness/systems/adapter_process.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "harness/launch/spawn.h"
#include "spec/error.h"

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

// systems/<dir>/adapter.py of each external system.
std::string AdapterFolder(SystemKind kind) {
  switch (kind) {
    case SystemKind::kTorchFsdp2:
      return "torch_fsdp2";
    case SystemKind::kMegatronCore:
      return "megatron_core";
    case SystemKind::kShardcheck:
      break;
  }
  throw Error("shardcheck's own system has no adapter");
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string FormatStep(const nlohmann::json& step) {
  return step.is_number_integer() ? " at step " + std::to_string(step.get<int64_t>()) : "";
}

AdapterRank ReadRankFile(const fs::path& path, int rank) {
  AdapterRank r;
  r.rank = rank;
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    r.status = "adapter_error";
    r.error = {{"type", "ReportError"},
               {"message", path.string() + " is not the JSON of an adapter rank report"},
               {"phase", "adapter"}};
    return r;
  }
  r.status = j.value("status", "adapter_error");
  r.exit_code = j.value("exit_code", 0);
  r.error = j.contains("error") ? j["error"] : nlohmann::json(nullptr);
  r.versions = j.contains("versions") ? j["versions"] : nlohmann::json::object();
  if (j.contains("notes") && j["notes"].is_array())
    for (const auto& n : j["notes"])
      if (n.is_string()) r.notes.push_back(n.get<std::string>());
  return r;
}

}  // namespace

AdapterCommand FindAdapter(const SystemSpec& system) {
  std::string root = Env("SHARDCHECK_SYSTEMS_ROOT");
  if (root.empty()) root = fs::path(SelfBinary()).parent_path().parent_path().string();
  AdapterCommand a;
  a.script = (fs::path(root) / "systems" / AdapterFolder(system.kind) / "adapter.py").string();
  a.python = Env("SHARDCHECK_SYSTEMS_PYTHON");
  if (a.python.empty()) a.python = (fs::path(root) / ".venv-torch" / "bin" / "python").string();
  if (!fs::exists(a.script))
    throw Error("the " + system.BaseName() + " adapter " + a.script +
                    " is missing (set SHARDCHECK_SYSTEMS_ROOT to the shardcheck checkout)",
                ErrorKind::kEnvironment);
  if (!fs::exists(a.python))
    throw Error(system.BaseName() + " needs the systems' Python " + a.python +
                    ", which is not there: run ci/setup-systems (or set SHARDCHECK_SYSTEMS_PYTHON)",
                ErrorKind::kEnvironment);
  return a;
}

bool AdapterRun::SystemFailed() const {
  const AdapterRank* c = Culprit();
  return exit_code == 1 && c && c->status == "system_failed";
}

const AdapterRank* AdapterRun::Culprit() const {
  for (const auto& r : ranks)
    if (r.status == "system_failed") return &r;
  for (const auto& r : ranks)
    if (r.status != "ok") return &r;
  return nullptr;
}

std::string AdapterRun::Failure() const {
  if (Ok()) return "";
  const AdapterRank* c = Culprit();
  if (!c || !c->error.is_object())
    return run + " run: the adapter's ranks exited with code " + std::to_string(exit_code) +
           " and reported nothing (" + log + "): " + LastErrorLine(log);
  const nlohmann::json& e = c->error;
  std::string line = run + " run, rank " + std::to_string(c->rank) + ", " +
                     e.value("phase", std::string("?")) +
                     FormatStep(e.contains("step") ? e["step"] : nlohmann::json(nullptr)) + ": " +
                     e.value("type", std::string("?")) + ": " + e.value("message", std::string());
  const std::string where = e.value("where", std::string());
  if (!where.empty()) line += " (" + where + ")";
  return line;
}

AdapterRun RunAdapter(const AdapterCommand& adapter, const std::string& plan_path,
                      const std::string& run, int dp, double timeout_s) {
  const fs::path dir = fs::path(plan_path).parent_path();
  AdapterRun out;
  out.run = run;
  out.log = (dir / (run + ".log")).string();
  const std::string self = SelfBinary();
  const std::vector<std::string> args = {self,
                                         "launch",
                                         "--nproc",
                                         std::to_string(dp),
                                         "--timeout",
                                         std::to_string(timeout_s),
                                         "--",
                                         adapter.python,
                                         adapter.script,
                                         "--plan",
                                         plan_path,
                                         "--run",
                                         run};
  // Byte-code caches stay out of the checkout; adapters start cold anyway.
  const int status = Spawn(args, {out.log, "", {"PYTHONDONTWRITEBYTECODE=1"}});
  out.exit_code = ExitCodeOfWaitStatus(status);
  for (int r = 0; r < dp; ++r) {
    const fs::path file = dir / run / ("rank_" + std::to_string(r) + ".json");
    if (fs::exists(file)) out.ranks.push_back(ReadRankFile(file, r));
  }
  return out;
}

}  // namespace shardcheck
