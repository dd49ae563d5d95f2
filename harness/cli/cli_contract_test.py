#!/usr/bin/python3
"""ctest cli.contract: what a new user runs into, and the exit-code contract
(docs/reliability.md, "Exit codes"): 0 ok, 1 a check failed, 2 bad input,
3 environment or communication, 124 timeout, 128+n a signal.

Each case runs the real binary and asserts the exit code, the one error
line (and what it names), and that a failed command left no output folder.

Usage: cli_contract_test.py SHARDCHECK SOURCE_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

BIN, SRC = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="shardcheck_cli_contract_")
FAILURES = []
CASES = 0
SMALL = ["--optimizer", "adamw", "--shapes", "a=8x4,b=5"]


def run(args, timeout=120, env=None):
    t0 = time.time()
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout, p.stderr, time.time() - t0


def case(name, args, code, says=(), absent=None, within=None, env=None):
    """Runs `args`; checks the exit code, that stderr's error line holds
    every string of `says`, that `absent` does not exist afterwards, and
    the wall time."""
    global CASES
    CASES += 1
    rc, out, err, took = run(args, env=env)
    problems = []
    if rc != code:
        problems.append(f"exit {rc}, expected {code}")
    text = out + err
    for s in says:
        if s not in text:
            problems.append(f"output lacks {s!r}")
    # One line (the launcher adds a line per rank it stops: its own contract).
    # Under the asan preset the sanitizer's allocator says it refused a huge
    # allocation on a line of its own ("==PID==WARNING: AddressSanitizer
    # failed to allocate ..."): that line is the sanitizer's, not shardcheck's.
    lines = [l for l in err.strip().splitlines()
             if not re.match(r"==\d+==WARNING: AddressSanitizer failed to allocate", l)]
    if (code == 2 and rc == 2 and args[0] != "launch" and "shardcheck: error:" in err
            and len(lines) != 1):
        problems.append(f"{len(lines)} lines on stderr, expected one")
    if absent and os.path.exists(absent):
        problems.append(f"{absent} was left behind")
    if within is not None and took > within:
        problems.append(f"took {took:.1f} s, expected under {within} s")
    if problems:
        FAILURES.append(f"{name}: {'; '.join(problems)}\n    $ shardcheck {' '.join(args)}\n"
                        f"    stdout: {out.strip()[-300:]}\n    stderr: {err.strip()[-300:]}")
    return out


def w(*parts):
    return os.path.join(WORK, *parts)


def main():
    global CASES
    # A checkpoint at step 2 of 4 in a folder of saves (saves/step2, saves/latest).
    rc, out, err, _ = run(["train"] + SMALL + ["--steps", "4", "--save-at", "2", "--save-dir",
                                               w("saves", "step2"), "--out", w("first")])
    assert rc == 0, err
    assert out.index("step 2/4") < out.index("saved step 2"), "log order: " + out

    # Saving.
    case("save-dir without save-at", ["train"] + SMALL + ["--save-dir", w("s1"), "--out", w("o1")],
         2, ["--save-dir", "needs --save-at"], absent=w("o1"))
    case("save-dir exists: refused before the first step",
         ["train"] + SMALL + ["--steps", "400", "--save-at", "400", "--save-dir", w("saves", "step2"),
                              "--out", w("o2")],
         2, [w("saves", "step2"), "exists"], absent=w("o2"), within=10)
    # Loading.
    case("load with nothing left to run",
         ["train"] + SMALL + ["--steps", "2", "--load", w("saves", "step2"), "--out", w("o3")],
         2, ["is at step 2", "--steps is 2", "nothing is left to run"], absent=w("o3"))
    case("sharding type on load differs",
         ["train"] + SMALL + ["--steps", "4", "--load", w("saves", "step2"), "--sharding-type",
                              "fully_reshardable", "--out", w("o4")],
         2, ["fully_reshardable", "dp_reshardable", "--save-sharding-type"], absent=w("o4"))
    case("load of a folder of saves follows latest",
         ["train"] + SMALL + ["--steps", "4", "--load", w("saves"), "--compare-reference",
                              "--save-at", "3", "--save-dir", w("saves2", "step3"),
                              "--save-sharding-type", "fully_reshardable", "--out", w("o5")],
         0, ["loaded", "PASS"])
    # A hyperparameter that differs from the checkpoint's is a warning, on stderr only.
    CASES += 1
    rc, out, err, _ = run(["train"] + SMALL + ["--steps", "4", "--load", w("saves"), "--weight-decay", "0.5",
                                               "--out", w("o5b")])
    if not (rc == 0 and "shardcheck: warning: hyperparameter differs" in err
            and "warning" not in out):
        FAILURES.append(f"the hyperparameter warning goes to stderr: exit {rc}\n"
                        f"    stdout: {out.strip()[-300:]}\n    stderr: {err.strip()[-300:]}")
    out = case("the next save takes --save-sharding-type",
               ["inspect", w("saves2", "step3"), "--json", "--no-verify"], 0)
    if out and json.loads(out)["sharding_type"] != "fully_reshardable":
        FAILURES.append("--save-sharding-type was not used for the save")

    # Arguments.
    case("empty --shapes", ["reference", "--optimizer", "adamw", "--shapes", "", "--out", w("o6")],
         2, ["--shapes", "is empty"], absent=w("o6"))
    case("--steps 0 (reference)", ["reference", "--optimizer", "adamw", "--steps", "0", "--out",
                                   w("o7")], 2, ["--steps", "at least 1"], absent=w("o7"))
    case("--steps 0 (train)", ["train", "--optimizer", "adamw", "--steps", "0", "--out", w("o8")],
         2, ["--steps", "at least 1"], absent=w("o8"))
    case("--threads 0", ["reference"] + SMALL + ["--threads", "0", "--out", w("o9")], 2,
         ["--threads: must be in [1, 1024]", "got 0"], absent=w("o9"))
    case("--threads 100000: a range with its reason", ["train"] + SMALL + ["--threads", "100000",
                                                                        "--out", w("o9b")], 2,
         ["--threads: must be in [1, 1024] (threads of one rank), got 100000"], absent=w("o9b"),
         within=10)
    case("--seed -1 is refused, not wrapped", ["reference"] + SMALL + ["--seed", "-1", "--out",
                                                                      w("o9c")], 2,
         ["--seed: must be in [0, 9223372036854775807]", "got -1"], absent=w("o9c"))
    case("readable bounds (gc --min-age -5)", ["gc", WORK, "--min-age", "-5"], 2,
         ["--min-age: must be in [0, 3.2e+09]"])
    case("readable bounds (run --timeout 0)", ["run", os.path.join(SRC, "scenarios/default.yaml"),
                                                "--timeout", "0", "--out", w("o9d")], 2,
         ["--timeout: must be in (0, 604800]"], absent=w("o9d"))
    case("a mistyped flag names the nearest", ["train", "--optimzer", "adam", "--out", w("o9e")],
         2, ["unknown flag '--optimzer'", "did you mean --optimizer?"], absent=w("o9e"))
    case("a mistyped flag before its value", ["train"] + SMALL + ["--stesp", "5", "--out", w("o9f")],
         2, ["unknown flag '--stesp'", "did you mean --steps?"], absent=w("o9f"))
    case("--backend nccl without CUDA is bad input", ["train"] + SMALL + ["--backend", "nccl",
                                                                         "--out", w("o9g")], 2,
         ["--backend nccl", "no usable CUDA GPU", "--backend gloo"], absent=w("o9g"))
    case("--jobs 0", ["run", os.path.join(SRC, "scenarios/default.yaml"), "--jobs", "0", "--out",
                      w("o10")], 2, ["--jobs", "must be at least 1, got 0"], absent=w("o10"))
    case("--max-report -1", ["ckpt-diff", w("saves", "step2"), w("saves", "step2"),
                             "--max-report", "-1"], 2, ["--max-report", "must be at least 0, got -1"])
    case("launch --nproc 0", ["launch", "--nproc", "0", "--", "true"], 2,
         ["--nproc", "must be at least 1, got 0"])
    case("--dtype BF16 is bf16", ["reference"] + SMALL + ["--dtype", "BF16", "--out", w("o11")], 0,
         ["(bf16)"])
    case("--dtype fp16 names what --dtype takes",
         ["reference"] + SMALL + ["--dtype", "fp16", "--out", w("o12")], 2,
         ["--dtype 'fp16': expected fp32 or bf16"], absent=w("o12"))
    case("a bare unknown subcommand", ["trian"], 2,
         ["unknown subcommand 'trian'", "did you mean train?"])
    case("launch of a program that does not exist: 2, never 127",
         ["launch", "--nproc", "2", "--", "/nonexistent/prog"], 2,
         ["cannot run '/nonexistent/prog'", "No such file or directory"])
    case("launch of a name not on PATH", ["launch", "--nproc", "1", "--", "no-such-prog-xyz"], 2,
         ["cannot run 'no-such-prog-xyz'", "PATH"])
    out = case("dp does not divide M, before any rank connects",
               ["launch", "--nproc", "5", "--timeout", "60", "--", BIN, "train"] + SMALL +
               ["--out", w("o13")], 2, ["DP size 5", "does not divide --micro-batches 24"],
               absent=w("o13"), within=30)
    rc, _, err, _ = run(["launch", "--nproc", "5", "--timeout", "60", "--", BIN, "train"] + SMALL +
                        ["--out", w("o13")])
    lines = err.strip().splitlines()
    if err.count("does not divide") != 1 or "does not divide" not in lines[-1] or len(lines) > 3:
        FAILURES.append("launch: the ranks' one input error should be said once, as the last "
                        f"line, in at most 3 lines:\n{err}")
    case("a timeout: the launcher exits 124", ["launch", "--nproc", "1", "--timeout", "1", "--",
                                                "sleep", "30"], 124, ["timeout after 1 s"],
         within=15)

    # Exit codes of library failures.
    case("--out under /proc: environment (3), no raw library text",
         ["reference"] + SMALL + ["--out", "/proc/shardcheck-no/x"], 3,
         ["/proc/shardcheck-no", "(cannot create directories)"])
    case("an allocation that cannot be served: bad input (2), output folder removed",
         ["reference", "--optimizer", "adamw", "--shapes", "w=99999999x99999999", "--out",
          w("o14")], 2, ["cannot allocate memory", "--shapes"], absent=w("o14"))
    case("a killed rank: the launcher exits 128+9 and names it",
         ["launch", "--nproc", "2", "--timeout", "60", "--", BIN, "comm-selftest", "--timeout",
          "20", "--die-rank", "1", "--die-after-ms", "300"], 137,
         ["rank 1 was killed by signal 9"])
    case("ckpt-diff of two different states: a check failed (1)",
         ["ckpt-diff", w("saves", "step2"), w("saves2", "step3")], 1, ["differ"])
    case("inspect of a file says what it is", ["inspect", w("first", "final.safetensors")], 2,
         ["is a file, not a checkpoint folder", "ckpt-diff"])
    case("list of a folder says to give its files", ["list", os.path.join(SRC, "scenarios")], 2,
         ["is a folder", "scenarios/*.yaml"])
    os.makedirs(w("badlatest"))
    with open(w("badlatest", "latest"), "w") as f:
        f.write("nope\n")
    case("a latest that names nothing says so", ["inspect", w("badlatest")], 2,
         ["latest names 'nope'", "does not exist"])
    case("no peer at the rendezvous: environment (3)",
         ["train"] + SMALL + ["--timeout", "2", "--out", w("o16")], 3,
         ["rendezvous on rank 1 of 2", "127.0.0.1:9"], absent=w("o16"),
         env={"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "9"})
    case("an unknown SHARDCHECK_CPU_ISA: bad input (2), named, before any work",
         ["optimizers"], 2, ["SHARDCHECK_CPU_ISA=sse9", "baseline, avx2, avx512"],
         env={"SHARDCHECK_CPU_ISA": "sse9"})
    case("SHARDCHECK_CPU_ISA=baseline is taken",
         ["optimizers"], 0, ["adamw"], env={"SHARDCHECK_CPU_ISA": "baseline"})
    case("run: an errored cell and no failed one exits 3",
         ["run", os.path.join(SRC, "scenarios/multi_gpu.yaml"), "--filter",
          "optimizer=adamw,dp=1,resume_dp=1,dtype=fp32,sharding_type=dp_reshardable", "--gpus", "1",
          "--quiet", "--out", w("o15")], 3, ["1 errored"])

    # Stale folders of interrupted saves.
    stale = w("saves", "step9.tmp-1a2b3c")
    os.makedirs(stale)
    with open(os.path.join(stale, "rank_0.safetensors"), "wb") as f:
        f.write(b"\0" * 1000)
    case("inspect lists stale saves", ["inspect", w("saves"), "--no-verify"], 0,
         ["stale saves", "step9.tmp-1a2b3c", "shardcheck gc"])
    case("gc keeps young stale saves", ["gc", w("saves")], 0, ["kept (young)", "0 removed"])
    case("gc removes stale saves, never a checkpoint", ["gc", w("saves"), "--min-age", "0"], 0,
         ["removed " + stale, "1 removed"], absent=stale)
    case("the checkpoint survives gc", ["inspect", w("saves")], 0, ["step             2"])

    # The dry mode: planned checkpoints of a shapes file, and inspect of the
    # planned metadata.json alone.
    shapes = w("shapes.txt")
    with open(shapes, "w") as f:
        f.write("# two params\nemb=1000x64:embedding\n64x64\n")
    case("dry plans every sharding type", ["dry", "--shapes", shapes, "--dp", "16",
                                           "--write-metadata", w("dry")], 0,
         ["dp_reshardable", "fully_sharded_model_space", "load at 12", "peak memory"])
    case("inspect --metadata-only reads a planned metadata.json",
         ["inspect", "--metadata-only", w("dry", "dp_reshardable")], 0,
         ["dp_reshardable", "not verified", "rank_00015.safetensors"])
    case("dry refuses a whole-param setup, naming it",
         ["dry", "--shapes", shapes, "--optimizer", "muon"], 2, ["muon", "whole-param"])
    case("dry: an unknown preset lists the presets", ["dry", "--preset", "gpt-5"], 2,
         ["gpt-5", "gpt-175b, deepseek-v3-moe"])
    case("dry: --layers needs a preset", ["dry", "--shapes", shapes, "--layers", "2"], 2,
         ["--layers"])

    shutil.rmtree(WORK, ignore_errors=True)
    for f in FAILURES:
        print("FAIL:", f)
    print(f"{CASES - len(FAILURES)} passed, {len(FAILURES)} failed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
