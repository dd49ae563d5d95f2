#include "harness/launch/launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "harness/launch/rank_errors.h"
#include "spec/error.h"

extern char** environ;

namespace shardcheck {
namespace {

using Clock = std::chrono::steady_clock;

// Signals arrive here as one byte each (self-pipe), so poll() wakes on them.
int g_signal_pipe_write = -1;

void OnSignal(int signo) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signo);
  if (g_signal_pipe_write >= 0) (void)!write(g_signal_pipe_write, &byte, 1);
  errno = saved;
}

// Installs OnSignal for SIGINT, SIGTERM and SIGCHLD and ignores SIGPIPE;
// the destructor restores what was there.
class SignalScope {
 public:
  explicit SignalScope(int write_fd) {
    g_signal_pipe_write = write_fd;
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (size_t i = 0; i < 3; ++i) sigaction(kHandled[i], &sa, &old_[i]);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &old_[3]);
  }
  ~SignalScope() {
    for (size_t i = 0; i < 3; ++i) sigaction(kHandled[i], &old_[i], nullptr);
    sigaction(SIGPIPE, &old_[3], nullptr);
    g_signal_pipe_write = -1;
  }

 private:
  static constexpr int kHandled[3] = {SIGINT, SIGTERM, SIGCHLD};
  struct sigaction old_[4];
};

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader went away: drop the output, keep running
    done += static_cast<size_t>(n);
  }
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(std::string("launch: socket() failed: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    throw Error("launch: cannot find a free port: " + why);
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::string Describe(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

// "60" or "0.5": seconds as a person writes them.
std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

int ExitCodeOf(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

// One output stream of one rank: its pipe and the partial line read so far.
struct Stream {
  int fd = -1;  // read end; -1 once closed
  int sink = -1;
  std::string pending;
  int rank = 0;                // the global rank it belongs to
  RankErrors* held = nullptr;  // stderr: where its error lines wait for the end
};

struct Rank {
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Stream out;
  Stream err;
};

// Copies complete lines (and, at EOF or past 64 KiB, the rest) with the
// prefix, each line whole in one write; error lines of stderr go to
// `held` instead, said once at the job's end.
void Forward(Stream& s, const std::string& prefix, bool eof) {
  size_t start = 0;
  std::string text;
  auto line = [&](const std::string& l) {
    if (s.held && RankErrors::IsErrorLine(l))
      s.held->Add(s.rank, l);
    else
      text += prefix + l + "\n";
  };
  for (size_t nl; (nl = s.pending.find('\n', start)) != std::string::npos; start = nl + 1)
    line(s.pending.substr(start, nl - start));
  s.pending.erase(0, start);
  if (!s.pending.empty() && (eof || s.pending.size() > (1u << 16))) {
    line(s.pending);
    s.pending.clear();
  }
  if (!text.empty()) WriteAll(s.sink, text);
}

// Reads what is available; closes the stream at EOF.
void Drain(Stream& s, const std::string& prefix) {
  char buf[65536];
  const ssize_t n = read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n > 0) {
    s.pending.append(buf, static_cast<size_t>(n));
    Forward(s, prefix, false);
    return;
  }
  Forward(s, prefix, true);
  close(s.fd);
  s.fd = -1;
}

int GlobalRank(const LaunchOptions& o, int local_rank) {
  return o.node_rank * o.nproc + local_rank;
}

// "[rank R] ", or "[node n rank R] " in a job of several nodes.
std::string RankName(const LaunchOptions& o, int local_rank) {
  const std::string rank = "rank " + std::to_string(GlobalRank(o, local_rank));
  return o.nnodes > 1 ? "node " + std::to_string(o.node_rank) + " " + rank : rank;
}

std::string Prefix(const LaunchOptions& o, int local_rank) {
  return "[" + RankName(o, local_rank) + "] ";
}

std::vector<std::string> RankEnvironment(const LaunchOptions& o, int local_rank, int port) {
  static const char* const kOwn[] = {
      "RANK=",       "WORLD_SIZE=",       "LOCAL_RANK=",  "LOCAL_WORLD_SIZE=",
      "GROUP_RANK=", "GROUP_WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT="};
  std::vector<std::string> env;
  bool has_omp = false;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var = *e;
    if (var.rfind("OMP_NUM_THREADS=", 0) == 0) has_omp = true;
    bool own = false;
    for (const char* k : kOwn) own = own || var.rfind(k, 0) == 0;
    if (!own) env.push_back(var);
  }
  env.push_back("RANK=" + std::to_string(GlobalRank(o, local_rank)));
  env.push_back("WORLD_SIZE=" + std::to_string(o.nnodes * o.nproc));
  env.push_back("LOCAL_RANK=" + std::to_string(local_rank));
  env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(o.nproc));
  env.push_back("GROUP_RANK=" + std::to_string(o.node_rank));
  env.push_back("GROUP_WORLD_SIZE=" + std::to_string(o.nnodes));
  env.push_back("MASTER_ADDR=" +
                (o.master_addr.empty() ? std::string("127.0.0.1") : o.master_addr));
  env.push_back("MASTER_PORT=" + std::to_string(port));
  if (!has_omp) env.push_back("OMP_NUM_THREADS=1");
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (auto& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// Starts rank `k`: its own process group, stdout/stderr into fresh pipes
// (its error lines held in `held`).
void Start(const LaunchOptions& o, int k, int port, Rank& rank, RankErrors* held) {
  int out[2];
  int err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    throw Error(std::string("launch: pipe() failed: ") + std::strerror(errno));
  }
  std::vector<std::string> env = RankEnvironment(o, k, port);
  std::vector<std::string> args = o.command;
  std::vector<char*> envp = Pointers(env);
  std::vector<char*> argv = Pointers(args);
  const pid_t launcher = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("launch: fork() failed: ") + std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec. A rank lives no
    // longer than its launcher: SIGKILL when the launcher dies (even by
    // SIGKILL, or before this prctl), so a killed job never goes on to
    // commit a save on its own, as torchrun's agent ensures.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(128 + SIGKILL);
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) sigaction(sig, &dfl, nullptr);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execvpe(argv[0], argv.data(), envp.data());
    const char* why = std::strerror(errno);
    const std::string msg = "shardcheck launch: cannot run '" + o.command[0] + "': ";
    (void)!write(2, msg.data(), msg.size());
    (void)!write(2, why, std::strlen(why));
    (void)!write(2, "\n", 1);
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so a signal sent right away reaches the group
  close(out[1]);
  close(err[1]);
  rank.pid = pid;
  rank.running = true;
  rank.out = Stream{out[0], o.out_fd, "", GlobalRank(o, k), nullptr};
  rank.err = Stream{err[0], o.err_fd, "", GlobalRank(o, k), held};
}

class Job {
 public:
  explicit Job(const LaunchOptions& o) : o_(o), ranks_(static_cast<size_t>(o.nproc)) {}

  int Run() {
    int sig_pipe[2];
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw Error(std::string("launch: pipe() failed: ") + std::strerror(errno));
    }
    SignalScope signals(sig_pipe[1]);
    const int port = o_.port != 0 ? o_.port : FreePort();
    const auto start = Clock::now();
    std::optional<Clock::time_point> deadline;
    if (o_.timeout_s > 0) deadline = start + ToDuration(o_.timeout_s);
    try {
      for (int k = 0; k < o_.nproc; ++k) Start(o_, k, port, ranks_[static_cast<size_t>(k)], &held_);
    } catch (...) {
      Stop(SIGKILL);
      Loop(sig_pipe[0], std::nullopt);
      close(sig_pipe[0]);
      close(sig_pipe[1]);
      throw;
    }
    Loop(sig_pipe[0], deadline);
    close(sig_pipe[0]);
    close(sig_pipe[1]);
    SayEnd();
    return result_.value_or(0);
  }

 private:
  static Clock::duration ToDuration(double seconds) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }

  void Say(const std::string& line) { WriteAll(o_.err_fd, "shardcheck launch: " + line + "\n"); }

  // Sends `sig` to the process group of every rank still running.
  void Stop(int sig) {
    for (auto& r : ranks_) {
      if (r.running) kill(-r.pid, sig);
    }
  }

  // First reason to end the job: remember its exit code, SIGTERM the rest.
  // Failed ranks not yet reported are described after the reason.
  void BeginStop(int code, int sig) {
    if (result_) return;
    result_ = code;
    Stop(sig);
    kill_at_ = Clock::now() + ToDuration(o_.grace_s);
    for (size_t k : failed_) NoteStopped(k);
    failed_.clear();
  }

  // A rank that exits with 3 (communication failed) or 124 (a collective
  // timed out) most often fails because a peer died: it is named as the
  // cause only if no peer shows a more direct one (a signal, another code)
  // within this window.
  static constexpr auto kCauseWindow = std::chrono::seconds(1);

  // How directly an exit status is the job's cause: a signal, then any other
  // failing code, then a timeout, then a failed collective.
  static int Directness(int status) {
    if (WIFSIGNALED(status)) return 3;
    const int code = WEXITSTATUS(status);
    return code == 3 ? 0 : code == 124 ? 1 : 2;
  }

  void Reap() {
    for (size_t k = 0; k < ranks_.size(); ++k) {
      Rank& r = ranks_[k];
      if (!r.running) continue;
      int status = 0;
      const pid_t got = waitpid(r.pid, &status, WNOHANG);
      if (got != r.pid) continue;
      r.running = false;
      r.status = status;
      last_exit_ = Clock::now();
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
      if (result_) {
        NoteStopped(k);
        continue;
      }
      failed_.push_back(k);
      if (!cause_deadline_) cause_deadline_ = Clock::now() + kCauseWindow;
    }
    if (!result_ && !failed_.empty()) NameCause();
  }

  // Names the most direct failure seen so far as the job's cause, stops the
  // others, and describes the rest; waits while the only failures are
  // indirect and the window is open.
  void NameCause() {
    size_t cause = failed_.front();
    for (size_t k : failed_)
      if (Directness(ranks_[k].status) > Directness(ranks_[cause].status)) cause = k;
    if (Directness(ranks_[cause].status) < 2 && Clock::now() < *cause_deadline_ && AnyRunning())
      return;
    Say(RankName(o_, static_cast<int>(cause)) + " " + Describe(ranks_[cause].status) +
        "; stopping the other ranks");
    failed_.erase(std::find(failed_.begin(), failed_.end(), cause));
    BeginStop(ExitCodeOf(ranks_[cause].status), SIGTERM);
  }

  // A rank that ended after the cause: said at the end, grouped by how.
  void NoteStopped(size_t k) {
    const std::string how = Describe(ranks_[k].status);
    for (auto& [h, who] : stopped_)
      if (h == how) {
        who.push_back(GlobalRank(o_, static_cast<int>(k)));
        return;
      }
    stopped_.push_back({how, {GlobalRank(o_, static_cast<int>(k))}});
  }

  // The job's last lines: how the other ranks ended (one line: "ranks 0,2 were
  // killed by signal 15 (Terminated)", or with several ways "ranks 0,2-4 ended
  // after it: 0,2-3 killed by signal 15 (Terminated); 4 exited with code 2"), then
  // the ranks' error lines, each once, naming the ranks that said it.
  void SayEnd() {
    if (!stopped_.empty()) Say(StoppedLine());
    stopped_.clear();
    if (!held_.empty()) WriteAll(o_.err_fd, held_.Render());
  }

  std::string StoppedLine() const {
    const std::string node =
        o_.nnodes > 1 ? "(node " + std::to_string(o_.node_rank) + ") " : std::string();
    if (stopped_.size() == 1) {
      const auto& [how, who] = stopped_.front();
      const bool one = who.size() == 1;
      // "was killed by ..." / "exited with ...": plural for several ranks.
      const std::string verb = !one && how.rfind("was ", 0) == 0 ? "were " + how.substr(4) : how;
      return std::string(one ? "rank " : "ranks ") + node + RankList(who) + " " + verb;
    }
    // The ways in the order of their lowest rank, whichever ended first.
    auto ways_by_rank = stopped_;
    for (auto& way : ways_by_rank) std::sort(way.second.begin(), way.second.end());
    std::sort(ways_by_rank.begin(), ways_by_rank.end(),
              [](const auto& a, const auto& b) { return a.second.front() < b.second.front(); });
    std::vector<int> all;
    std::string ways;
    for (const auto& [how, who] : ways_by_rank) {
      all.insert(all.end(), who.begin(), who.end());
      ways += (ways.empty() ? "" : "; ") + RankList(who) + " " +
              (how.rfind("was ", 0) == 0 ? how.substr(4) : how);
    }
    std::sort(all.begin(), all.end());
    return "ranks " + node + RankList(all) + " ended after it: " + ways;
  }

  bool AnyRunning() const {
    return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
  }

  void Loop(int sig_fd, std::optional<Clock::time_point> deadline) {
    for (;;) {
      Reap();
      const auto now = Clock::now();
      if (deadline && now >= *deadline && !result_ && AnyRunning()) {
        Say("timeout after " + Seconds(o_.timeout_s) + " s; stopping all " +
            std::to_string(o_.nproc) + " ranks" +
            (o_.nnodes > 1 ? " of node " + std::to_string(o_.node_rank) : ""));
        BeginStop(124, SIGTERM);
      }
      if (kill_at_ && now >= *kill_at_ && AnyRunning()) {
        Say("ranks still running after the " + Seconds(o_.grace_s) + " s grace; sending SIGKILL");
        Stop(SIGKILL);
        kill_at_.reset();
      }
      // After the last rank exits, its output may still be buffered in the
      // pipes (or held open by a process it left behind): read for at most 2 s.
      const bool draining = !AnyRunning();
      if (draining && Clock::now() - last_exit_ > std::chrono::seconds(2)) break;

      std::vector<pollfd> fds{{sig_fd, POLLIN, 0}};
      std::vector<std::pair<Stream*, size_t>> streams;
      for (size_t k = 0; k < ranks_.size(); ++k) {
        for (Stream* s : {&ranks_[k].out, &ranks_[k].err}) {
          if (s->fd < 0) continue;
          fds.push_back({s->fd, POLLIN, 0});
          streams.emplace_back(s, k);
        }
      }
      if (draining && streams.empty()) break;
      int wait_ms = 200;
      auto clamp_to = [&](std::optional<Clock::time_point> t) {
        if (!t) return;
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*t - Clock::now());
        wait_ms = std::max(0, std::min(wait_ms, static_cast<int>(ms.count()) + 1));
      };
      if (!result_) clamp_to(deadline);
      if (!result_) clamp_to(cause_deadline_);
      clamp_to(kill_at_);
      if (poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) {
        throw Error(std::string("launch: poll() failed: ") + std::strerror(errno));
      }
      if (fds[0].revents & POLLIN) ReadSignals(sig_fd);
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
          auto [s, k] = streams[i - 1];
          Drain(*s, Prefix(o_, static_cast<int>(k)));
        }
      }
    }
    for (size_t k = 0; k < ranks_.size(); ++k) {
      for (Stream* s : {&ranks_[k].out, &ranks_[k].err}) {
        if (s->fd < 0) continue;
        Forward(*s, Prefix(o_, static_cast<int>(k)), true);
        close(s->fd);
        s->fd = -1;
      }
    }
  }

  // SIGINT/SIGTERM to the launcher: pass it on to the ranks and end the job
  // with 128 + signal. SIGCHLD only wakes the loop (Reap does the work).
  void ReadSignals(int sig_fd) {
    unsigned char byte;
    while (read(sig_fd, &byte, 1) == 1) {
      const int sig = byte;
      if (sig != SIGINT && sig != SIGTERM) continue;
      Say(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
          "; passing it to the ranks");
      if (result_) {
        Stop(sig);
      } else {
        BeginStop(128 + sig, sig);
      }
    }
  }

  const LaunchOptions& o_;
  std::vector<Rank> ranks_;
  std::optional<int> result_;   // the job's exit code once a reason to stop is known
  std::vector<size_t> failed_;  // failed ranks not yet reported (cause not named yet)
  std::optional<Clock::time_point> cause_deadline_;
  std::optional<Clock::time_point> kill_at_;
  Clock::time_point last_exit_ = Clock::now();
  RankErrors held_;  // the ranks' error lines, said last
  // Ranks that failed after the cause was named, by how they ended.
  std::vector<std::pair<std::string, std::vector<int>>> stopped_;
};

}  // namespace

namespace {

// The rank command must be a program this host can run (found on PATH as
// execvp looks, or a path to an executable file): otherwise every rank
// would exit 127, a code the contract does not have.
void RequireRunnable(const std::string& program) {
  auto runnable = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    if (runnable(program)) return;
    struct stat st {};
    const std::string why = ::stat(program.c_str(), &st) != 0 ? std::strerror(errno)
                            : S_ISDIR(st.st_mode)              ? "it is a folder"
                                                               : "it is not executable";
    throw Error("launch: cannot run '" + program + "': " + why);
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    if (runnable((dir.empty() ? "." : dir) + "/" + program)) return;
    start = end + 1;
  }
  throw Error("launch: cannot run '" + program + "': no such program on PATH");
}

}  // namespace

int Launch(const LaunchOptions& options) {
  if (options.nproc < 1) throw Error("launch: --nproc must be at least 1");
  if (options.command.empty()) throw Error("launch: no command to run (give it after --)");
  if (options.timeout_s < 0) throw Error("launch: --timeout must be >= 0 seconds");
  if (options.port < 0 || options.port > 65535) throw Error("launch: --port must be in [0, 65535]");
  if (options.nnodes < 1) throw Error("launch: --nnodes must be at least 1");
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    throw Error("launch: --node-rank " + std::to_string(options.node_rank) +
                " is outside [0, --nnodes " + std::to_string(options.nnodes) + ")");
  }
  if (options.nnodes > 1 && (options.master_addr.empty() || options.port == 0)) {
    throw Error("launch: --nnodes " + std::to_string(options.nnodes) +
                " needs --master-addr (the host of node 0) and --master-port, the same on every "
                "node");
  }
  RequireRunnable(options.command.front());
  Job job(options);
  return job.Run();
}

}  // namespace shardcheck
