// The launcher on /bin/sh commands: environment per rank, prefixed output,
// exit codes of failing and killed ranks, timeout, signal forwarding.
#include "harness/launch/launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "spec/error.h"

namespace shardcheck {
namespace {

// A temporary file that the launcher writes to and the test reads back.
class Capture {
 public:
  Capture() {
    char path[] = "/tmp/shardcheck_launcher_test_XXXXXX";
    fd_ = mkstemp(path);
    path_ = path;
  }
  ~Capture() {
    close(fd_);
    unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  const std::string& Path() const { return path_; }
  std::string Text() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  int fd_;
  std::string path_;
};

struct Result {
  int code;
  std::string out;
  std::string err;
  double seconds;
};

Result LaunchWith(LaunchOptions o) {
  Capture out;
  Capture err;
  o.out_fd = out.fd();
  o.err_fd = err.fd();
  const auto start = std::chrono::steady_clock::now();
  const int code = Launch(o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {code, out.Text(), err.Text(), s};
}

Result LaunchSh(int nproc, const std::string& script, double timeout_s = 0, double grace_s = 5) {
  LaunchOptions o;
  o.nproc = nproc;
  o.command = {"/bin/sh", "-c", script};
  o.timeout_s = timeout_s;
  o.grace_s = grace_s;
  return LaunchWith(o);
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Launcher, SetsTorchrunEnvironmentPerRank) {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const std::string saved = omp ? omp : "";
  unsetenv("OMP_NUM_THREADS");
  const Result r = LaunchSh(3,
                            "echo \"r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK lw=$LOCAL_WORLD_SIZE "
                            "a=$MASTER_ADDR o=$OMP_NUM_THREADS p=$MASTER_PORT\"");
  if (omp) setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  EXPECT_EQ(r.code, 0) << r.err;
  for (int k = 0; k < 3; ++k) {
    const std::string k_str = std::to_string(k);
    EXPECT_TRUE(Has(
        r.out, "[rank " + k_str + "] r=" + k_str + " w=3 l=" + k_str + " lw=3 a=127.0.0.1 o=1 p="))
        << r.out;
  }
  // One port for all ranks, and a real one.
  const size_t p = r.out.find("p=");
  const std::string port = r.out.substr(p + 2, r.out.find('\n', p) - p - 2);
  EXPECT_GT(std::atoi(port.c_str()), 0) << r.out;
  size_t count = 0;
  for (size_t at = 0; (at = r.out.find("p=" + port + "\n", at)) != std::string::npos; ++at) ++count;
  EXPECT_EQ(count, 3u) << r.out;
}

// Node 1 of 3 with 2 ranks each: global ranks 2 and 3, local 0 and 1,
// the given master, and output prefixed with the node.
TEST(Launcher, NodeOfSeveralGetsGlobalRanksAndItsPrefix) {
  LaunchOptions o;
  o.nproc = 2;
  o.nnodes = 3;
  o.node_rank = 1;
  o.master_addr = "10.1.2.3";
  o.port = 29555;
  // Local rank 1 fails only once local rank 0 has printed (a marker file),
  // so the launcher's stop cannot cut rank 0's line short.
  Capture marker;
  o.command = {"/bin/sh", "-c",
               "echo \"r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK lw=$LOCAL_WORLD_SIZE g=$GROUP_RANK "
               "gw=$GROUP_WORLD_SIZE a=$MASTER_ADDR p=$MASTER_PORT\"; "
               "if [ $LOCAL_RANK = 0 ]; then echo x >> \"$0\"; exit 0; fi; "
               "while [ ! -s \"$0\" ]; do sleep 0.01; done; exit 5",
               marker.Path()};
  const Result r = LaunchWith(o);
  EXPECT_TRUE(Has(r.out, "[node 1 rank 2] r=2 w=6 l=0 lw=2 g=1 gw=3 a=10.1.2.3 p=29555\n"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "[node 1 rank 3] r=3 w=6 l=1 lw=2 g=1 gw=3 a=10.1.2.3 p=29555\n"))
      << r.out;
  EXPECT_EQ(r.code, 5);
  EXPECT_TRUE(Has(r.err, "shardcheck launch: node 1 rank 3 exited with code 5")) << r.err;
}

TEST(Launcher, SeveralNodesNeedMasterAddrAndPortAndAValidNodeRank) {
  auto message = [](int nnodes, int node_rank, const std::string& addr, int port) {
    LaunchOptions o;
    o.nnodes = nnodes;
    o.node_rank = node_rank;
    o.master_addr = addr;
    o.port = port;
    o.command = {"/bin/true"};
    try {
      Launch(o);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_TRUE(Has(message(2, 0, "", 29500), "--nnodes 2 needs --master-addr"));
  EXPECT_TRUE(Has(message(2, 0, "10.0.0.1", 0), "--nnodes 2 needs --master-addr"));
  EXPECT_TRUE(Has(message(2, 2, "10.0.0.1", 29500), "--node-rank 2 is outside [0, --nnodes 2)"));
  EXPECT_TRUE(Has(message(0, 0, "10.0.0.1", 29500), "--nnodes must be at least 1"));
}

TEST(Launcher, KeepsOmpNumThreadsWhenSet) {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const std::string saved = omp ? omp : "";
  setenv("OMP_NUM_THREADS", "3", 1);
  const Result r = LaunchSh(1, "echo o=$OMP_NUM_THREADS");
  if (omp) {
    setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  } else {
    unsetenv("OMP_NUM_THREADS");
  }
  EXPECT_EQ(r.out, "[rank 0] o=3\n");
}

TEST(Launcher, PrefixesEveryLineOfStdoutAndStderr) {
  const Result r = LaunchSh(2, "printf 'one\\ntwo\\nno newline'; echo err-$RANK >&2");
  EXPECT_EQ(r.code, 0);
  for (int k = 0; k < 2; ++k) {
    const std::string pre = "[rank " + std::to_string(k) + "] ";
    // Lines of different ranks may interleave; a rank's own lines stay whole
    // and in order, and a last line without a newline gets one.
    const size_t one = r.out.find(pre + "one\n");
    const size_t two = r.out.find(pre + "two\n");
    EXPECT_TRUE(one != std::string::npos && two != std::string::npos && one < two) << r.out;
    EXPECT_TRUE(Has(r.out, pre + "no newline\n")) << r.out;
    EXPECT_TRUE(Has(r.err, pre + "err-" + std::to_string(k) + "\n")) << r.err;
  }
}

TEST(Launcher, FailingRankExitCodeIsPropagatedAndOthersStopped) {
  const Result r = LaunchSh(3, "if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 7; fi; sleep 30");
  EXPECT_EQ(r.code, 7) << r.err;
  EXPECT_TRUE(Has(r.err, "shardcheck launch: rank 1 exited with code 7; stopping the other ranks"))
      << r.err;
  // The ranks stopped after the cause: one line for the way they ended.
  EXPECT_TRUE(Has(r.err, "shardcheck launch: ranks 0,2 were killed by signal 15")) << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

// Ranks that end after the cause in different ways still take one line.
TEST(Launcher, RanksEndingAfterTheCauseInSeveralWaysTakeOneLine) {
  // Rank 1 fails only once rank 3 has set its trap (a file says so), so a
  // loaded machine cannot deliver the SIGTERM before the trap is there.
  const Result r = LaunchSh(4,
                            "f=/tmp/shardcheck_launcher_trap_$MASTER_PORT; "
                            "if [ \"$RANK\" = 1 ]; then while [ ! -e $f ]; do sleep 0.05; done; "
                            "rm -f $f; exit 7; fi; "
                            "if [ \"$RANK\" = 3 ]; then trap 'exit 5' TERM; touch $f; fi; "
                            "sleep 30 & wait");
  EXPECT_EQ(r.code, 7) << r.err;
  EXPECT_TRUE(Has(r.err,
                  "shardcheck launch: ranks 0,2-3 ended after it: 0,2 killed by signal 15 "
                  "(Terminated); 3 exited with code 5\n"))
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
}

// Every rank failing with the same error line: said once, last, naming the
// ranks (a launcher of 64 ranks prints 3 lines, not 75).
TEST(Launcher, OneErrorOfManyRanksIsSaidOnceAsTheLastLine) {
  const Result r = LaunchSh(4,
                            "echo \"step 1\"; echo \"shardcheck: error: DP size 4 does not "
                            "divide M\" >&2; sleep 0.3; exit 2");
  EXPECT_EQ(r.code, 2) << r.err;
  const std::string last = "[ranks 0-3] shardcheck: error: DP size 4 does not divide M\n";
  ASSERT_GE(r.err.size(), last.size()) << r.err;
  EXPECT_EQ(r.err.substr(r.err.size() - last.size()), last) << r.err;
  EXPECT_EQ(r.err.find("does not divide"), r.err.rfind("does not divide")) << r.err;
  EXPECT_TRUE(Has(r.out, "[rank 2] step 1\n")) << r.out;
}

// A line a rank writes in pieces, while another rank writes too, comes out
// whole behind one prefix.
TEST(Launcher, LinesWrittenInPiecesStayWhole) {
  const Result r = LaunchSh(3,
                            "for i in 1 2 3; do printf \"part-$RANK-\"; sleep 0.05; "
                            "printf \"end-$RANK\\n\"; done");
  EXPECT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    const std::string k(1, line.size() > 6 ? line[6] : '?');
    EXPECT_EQ(line, "[rank " + k + "] part-" + k + "-end-" + k) << r.out;
  }
  EXPECT_EQ(count, 9) << r.out;
}

// A rank whose collective failed (exit 3) because its peer died is not the
// cause: the peer killed a moment later is named, and its code is the job's.
TEST(Launcher, PeerKilledJustAfterACommunicationFailureIsNamedTheCause) {
  const Result r = LaunchSh(3,
                            "if [ \"$RANK\" = 0 ]; then exit 3; fi; "
                            "if [ \"$RANK\" = 1 ]; then sleep 0.2; kill -9 $$; fi; sleep 30");
  EXPECT_EQ(r.code, 128 + 9) << r.err;
  EXPECT_TRUE(Has(r.err,
                  "shardcheck launch: rank 1 was killed by signal 9 (Killed); stopping the "
                  "other ranks"))
      << r.err;
  EXPECT_TRUE(Has(r.err,
                  "shardcheck launch: ranks 0,2 ended after it: 0 exited with code 3; 2 killed "
                  "by signal 15 (Terminated)\n"))
      << r.err;
  EXPECT_LT(r.err.find("rank 1 was killed"), r.err.find("0 exited")) << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

// With no more direct cause in sight, a communication failure ends the job
// about a second later, with its own code.
TEST(Launcher, CommunicationFailureAloneIsNamedAfterTheWindow) {
  const Result r = LaunchSh(2, "if [ \"$RANK\" = 1 ]; then exit 3; fi; sleep 30");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_TRUE(Has(r.err, "rank 1 exited with code 3; stopping the other ranks")) << r.err;
  EXPECT_TRUE(Has(r.err, "rank 0 was killed by signal 15")) << r.err;
  EXPECT_GT(r.seconds, 0.9);
  EXPECT_LT(r.seconds, 10.0);
}

TEST(Launcher, KilledRankGives128PlusSignal) {
  const Result r = LaunchSh(3, "if [ \"$RANK\" = 2 ]; then kill -9 $$; fi; sleep 30");
  EXPECT_EQ(r.code, 128 + 9) << r.err;
  EXPECT_TRUE(Has(r.err, "rank 2 was killed by signal 9")) << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

TEST(Launcher, TimeoutStopsAllAndGives124) {
  const Result r = LaunchSh(2, "sleep 30", /*timeout_s=*/0.5);
  EXPECT_EQ(r.code, 124) << r.err;
  EXPECT_TRUE(Has(r.err, "shardcheck launch: timeout after 0.5 s; stopping all 2 ranks")) << r.err;
  EXPECT_LT(r.seconds, 5.0);
}

TEST(Launcher, RankIgnoringSigtermIsKilledAfterGrace) {
  const Result r = LaunchSh(2, "trap '' TERM; sleep 30", /*timeout_s=*/0.3, /*grace_s=*/0.5);
  EXPECT_EQ(r.code, 124) << r.err;
  EXPECT_TRUE(Has(r.err, "sending SIGKILL")) << r.err;
  EXPECT_LT(r.seconds, 5.0);
}

// A command that cannot run is bad input, said before any rank starts
// (never the shell's 127, which the exit-code contract does not have).
TEST(Launcher, CommandThatCannotRunIsAnInputError) {
  LaunchOptions o;
  o.nproc = 2;
  for (const std::string& program :
       {std::string("/nonexistent/shardcheck-no-such-program"), std::string("/tmp"),
        std::string("shardcheck-no-such-program-on-path")}) {
    o.command = {program};
    try {
      Launch(o);
      ADD_FAILURE() << program << " was launched";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInput);
      EXPECT_TRUE(Has(e.what(), "cannot run '" + program + "'")) << e.what();
    }
  }
}

TEST(Launcher, AllRanksSucceedingGivesZero) {
  const Result r = LaunchSh(4, "exit 0");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(Launcher, ForwardsSigtermToRanks) {
  // Launch installs its handler before it starts a rank, so once a rank has
  // written the marker the signal is Launch's to forward.
  Capture marker;
  std::thread sender([&marker] {
    while (marker.Text().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    kill(getpid(), SIGTERM);
  });
  const Result r = LaunchSh(2, "echo x >> " + marker.Path() + "; sleep 30");
  sender.join();
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.err;
  EXPECT_TRUE(Has(r.err, "received SIGTERM; passing it to the ranks")) << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

}  // namespace
}  // namespace shardcheck
