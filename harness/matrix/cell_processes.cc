#include "harness/matrix/cell_processes.h"

#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "distributed/rendezvous.h"
#include "distributed/safetensors.h"
#include "harness/cell/run_files.h"
#include "harness/cell/train_result_json.h"
#include "harness/launch/spawn.h"
#include "spec/device.h"
#include "spec/error.h"

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

std::string Seconds(std::chrono::milliseconds ms) {
  return std::to_string(static_cast<double>(ms.count()) / 1000.0);
}

}  // namespace

ThreadRun RunCellPhaseAsProcesses(const Cell& cell, CellPhase phase, const std::string& cell_dir,
                                  const RankProcesses& how) {
  const std::string name = CellPhaseName(phase);
  const std::string self = SelfBinary();
  const fs::path dir(cell_dir);
  const std::string log = (dir / (name + ".log")).string();
  const std::vector<std::string> args = {self,        "launch",
                                         "--nproc",   std::to_string(PhaseDp(cell, phase)),
                                         "--",        self,
                                         "cell-rank", cell.file,
                                         "--cell",    cell.id,
                                         "--phase",   name,
                                         "--dir",     cell_dir,
                                         "--device",  how.device,
                                         "--timeout", Seconds(how.timeout)};
  const int status = Spawn(args, {log, how.gpus, {}});
  ThreadRun out;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    out.errors.push_back("the " + std::to_string(PhaseDp(cell, phase)) + " rank processes " +
                         DescribeWaitStatus(status) + " (" + log + "): " + LastErrorLine(log));
    return out;
  }
  std::ifstream in(dir / (name + ".result.json"));
  if (!in) {
    out.errors.push_back("the ranks wrote no " + (dir / (name + ".result.json")).string());
    return out;
  }
  out.root = TrainResultFromJson(nlohmann::ordered_json::parse(in));
  out.root.final_state.tensors = ReadSafetensors((dir / (name + ".final.safetensors")).string());
  out.root.final_state.step = out.root.steps.empty() ? 0 : out.root.steps.back().step;
  return out;
}

void RunCellRank(const std::string& file, const std::string& cell_id, CellPhase phase,
                 const std::string& cell_dir, const std::string& device,
                 std::chrono::milliseconds timeout) {
  const Scenario scenario = LoadScenario(file);
  const Cell* cell = nullptr;
  for (const Cell& c : scenario.cells)
    if (c.id == cell_id) cell = &c;
  if (!cell) throw Error(file + " has no cell '" + cell_id + "'");
  const auto source = MakeGradSource(cell->model, cell->seed);
  OracleRunOptions run = CellRunOptions(*cell, *source);
  const DistEnv env = DistEnvFromEnvironment();
  run.device = ResolveDevice(ParseDeviceKind(device), env.local_rank);
  TrainOptions t = CellPhaseOptions(*cell, phase, cell_dir, run);
  t.source = source.get();
  const std::unique_ptr<Communicator> comm = Connect(env, BackendFor(run.device, "auto"), timeout);
  if (comm->size() != PhaseDp(*cell, phase))
    throw Error("cell " + cell_id + " " + CellPhaseName(phase) + " runs at dp " +
                std::to_string(PhaseDp(*cell, phase)) + ", but the launcher started " +
                std::to_string(comm->size()) + " ranks");
  const TrainResult r = RunDistributed(t, *comm, nullptr);
  if (comm->rank() == 0) {
    const fs::path dir(cell_dir);
    const std::string name = CellPhaseName(phase);
    WriteFinalState((dir / (name + ".final.safetensors")).string(), r.final_state);
    WriteJsonFile((dir / (name + ".result.json")).string(), TrainResultJson(t, comm->size(), r));
  }
  comm->Barrier();
}

}  // namespace shardcheck
