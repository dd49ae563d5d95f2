#include "harness/launch/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "spec/error.h"

extern char** environ;

namespace shardcheck {

namespace fs = std::filesystem;

std::string SelfBinary() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find the shardcheck binary (/proc/self/exe): " + ec.message());
  return self.string();
}

namespace {

// This environment with `overrides` ("NAME=value") put in place of their names.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  auto name_of = [](const std::string& e) { return e.substr(0, e.find('=') + 1); };
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const auto& o : overrides) replaced = replaced || name_of(o) == name_of(*e);
    if (!replaced) env.push_back(*e);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

}  // namespace

int Spawn(const std::vector<std::string>& args, const SpawnOptions& options) {
  std::vector<std::string> overrides = options.env;
  if (!options.gpus.empty()) overrides.push_back("CUDA_VISIBLE_DEVICES=" + options.gpus);
  const std::vector<std::string> env = ChildEnvironment(overrides);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const int fd = ::open(options.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write " + options.log, ErrorKind::kEnvironment);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw Error("fork failed starting " + args.front(), ErrorKind::kEnvironment);
  }
  if (pid == 0) {
    // Only async-signal-safe calls until exec. The child dies with us
    // (SIGTERM, which the launcher passes on to its ranks), also when we
    // died before the prctl; it gets the signals a run blocks unblocked.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
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

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return "killed by signal " + std::to_string(WTERMSIG(status));
}

int ExitCodeOfWaitStatus(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

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

}  // namespace shardcheck
