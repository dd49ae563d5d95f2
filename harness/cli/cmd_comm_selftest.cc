// `shardcheck comm-selftest`: connects from the environment (run it under
// `shardcheck launch`, torchrun, srun or mpirun), checks every collective
// against its definition and prints one verdict line per rank. Every rank
// reaches the same verdict (the wrong-element count is all-reduced) and
// exits 1 on any mismatch anywhere. --die-rank makes one rank SIGKILL
// itself mid-run, to test that the others and the launcher end, not hang.
#include <signal.h>

#include <chrono>
#include <climits>
#include <iostream>
#include <thread>

#include "distributed/rendezvous.h"
#include "harness/cli/cli.h"
#include "harness/cli/numeric_flags.h"
#include "harness/launch/comm_selftest.h"

namespace shardcheck {
namespace {

struct SelftestOptions {
  std::string backend = "gloo";
  double timeout_s = kDefaultCollectiveTimeout.count() / 1000.0;
  uint64_t seed = 1234;
  int iterations = 1;
  int die_rank = -1;
  int die_after_ms = 300;
};

int RunSelftest(const SelftestOptions& o, bool iterations_given) {
  const DistEnv env = DistEnvFromEnvironment();
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  std::unique_ptr<Communicator> comm = Connect(env, o.backend, timeout);
  if (env.rank == o.die_rank) {
    const int ms = o.die_after_ms;
    std::thread([ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      raise(SIGKILL);
    }).detach();
  }
  // With a rank set to die, keep running until it has (the others then fail).
  const int iterations = (o.die_rank >= 0 && !iterations_given) ? INT_MAX : o.iterations;
  CollectiveCheckReport total;
  for (int i = 0; i < iterations; ++i) {
    CollectiveCheckReport r =
        CheckCollectives(*comm, o.seed + static_cast<uint64_t>(i), env.local_rank);
    total.checks += r.checks;
    total.wrong_elements += r.wrong_elements;
    total.failures.insert(total.failures.end(), r.failures.begin(), r.failures.end());
  }
  at::Tensor wrong = at::scalar_tensor(total.wrong_elements, at::kLong);
  if (comm->backend() == "nccl")
    wrong = wrong.to(at::Device(at::kCUDA, static_cast<int8_t>(env.local_rank)));
  comm->AllReduce(wrong, ReduceOp::kSum);
  const int64_t wrong_everywhere = wrong.cpu().item<int64_t>();
  for (size_t i = 0; i < total.failures.size() && i < 10; ++i) {
    std::cout << "comm-selftest: mismatch: " << total.failures[i] << "\n";
  }
  std::cout << "comm-selftest: " << comm->backend() << ", rank " << env.rank << " of "
            << env.world_size << " (" << env.source << "): " << total.checks << " checks, "
            << total.wrong_elements << " wrong elements here, " << wrong_everywhere
            << " on all ranks: " << (wrong_everywhere == 0 ? "PASS" : "FAIL") << std::endl;
  return wrong_everywhere == 0 ? 0 : 1;
}

}  // namespace

void AddCommSelftestCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "comm-selftest",
      "Check every collective of the communicator against its definition (run under a launcher: "
      "shardcheck launch --nproc N -- shardcheck comm-selftest). Exits 1 on any mismatch.");
  cmd->group("");  // a tool for testing shardcheck itself: not listed in --help
  auto o = std::make_shared<SelftestOptions>();
  cmd->add_option("--backend", o->backend, "gloo | nccl | auto")
      ->capture_default_str()
      ->check(CLI::IsMember({"gloo", "nccl", "auto"}));
  cmd->add_option("--timeout", o->timeout_s, "collective and rendezvous timeout, seconds")
      ->capture_default_str()
      ->check(RealIn(0, 604800, "at most a week", true));
  cmd->add_option("--seed", o->seed, "input seed")->capture_default_str()->check(SeedRange());
  auto* iterations = cmd->add_option("--iterations", o->iterations, "rounds of checks")
                         ->capture_default_str()
                         ->check(IntIn(1, 1000000, "rounds of one self-test"));
  cmd->add_option("--die-rank", o->die_rank,
                  "this rank SIGKILLs itself --die-after-ms after connecting; the others run "
                  "rounds until they fail")
      ->check(IntIn(0, 1 << 20, "a rank"));
  cmd->add_option("--die-after-ms", o->die_after_ms, "see --die-rank")
      ->capture_default_str()
      ->check(IntIn(0, 3600000, "at most an hour"));
  cmd->callback([&action, o, iterations] {
    const bool iterations_given = iterations->count() > 0;
    action = [o, iterations_given] { return RunSelftest(*o, iterations_given); };
  });
}

}  // namespace shardcheck
