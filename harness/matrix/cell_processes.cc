#include "harness/matrix/cell_processes.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "distributed/rendezvous.h"
#include "distributed/safetensors.h"
#include "harness/cell/run_files.h"
#include "spec/device.h"
#include "spec/error.h"

extern char** environ;

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

std::string SelfBinary() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find the shardcheck binary (/proc/self/exe): " + ec.message());
  return self.string();
}

std::string Seconds(std::chrono::milliseconds ms) {
  return std::to_string(static_cast<double>(ms.count()) / 1000.0);
}

// Runs argv with `gpus` as CUDA_VISIBLE_DEVICES (when set), stdout and
// stderr into `log`; returns its wait status.
int Spawn(const std::vector<std::string>& args, const std::string& gpus, const std::string& log) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (gpus.empty() || std::string(*e).rfind("CUDA_VISIBLE_DEVICES=", 0) != 0) env.push_back(*e);
  if (!gpus.empty()) env.push_back("CUDA_VISIBLE_DEVICES=" + gpus);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write " + log);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw Error("fork failed starting the ranks of a cell");
  }
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// The last line of `log` that says "error", else its last line.
std::string LastErrorLine(const std::string& log) {
  std::ifstream in(log);
  std::string line, last, error;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.find("error") != std::string::npos) error = line;
  }
  return error.empty() ? last : error;
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
  const int status = Spawn(args, how.gpus, log);
  ThreadRun out;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    out.errors.push_back("the " + std::to_string(PhaseDp(cell, phase)) + " rank processes " +
                         (WIFEXITED(status)
                              ? "exited with code " + std::to_string(WEXITSTATUS(status))
                              : "were killed by signal " + std::to_string(WTERMSIG(status))) +
                         " (" + log + "): " + LastErrorLine(log));
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
