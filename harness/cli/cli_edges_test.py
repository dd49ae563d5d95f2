#!/usr/bin/python3
"""ctest cli.edges: the edges of a run (docs/reliability.md, "Output is
never overwritten", "Interrupted runs", "A run that checked nothing").

- A run in which no cell ran is no pass: exit 3, verdict nothing-checked,
  and every skipped cell carries its reason.
- No writer replaces output: train, reference and run refuse a non-empty
  --out, export an existing file, selftest an existing selftest.json;
  --force replaces it (and leaves no stale cell folder behind).
- SIGINT or SIGTERM during `run` writes results.json of the finished cells
  with `interrupted: true` and exits 128 + the signal.
- A `train` stopped by SIGINT, SIGTERM or SIGKILL leaves no --out folder.
- `kill -9` of the launcher during a save: its ranks die with it and never
  commit the save.
- The same cell twice in one run (a file given twice) is refused.

Usage: cli_edges_test.py SHARDCHECK SOURCE_DIR
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

BIN, SRC = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="shardcheck_cli_edges_")
FAILURES = []
CHECKS = 0
SMALL = ["--optimizer", "adamw", "--shapes", "a=8x4,b=5"]
ROUNDTRIP = os.path.join(SRC, "scenarios/ci/oracle_roundtrip.yaml")


def w(*parts):
    return os.path.join(WORK, *parts)


def check(name, ok, detail=""):
    global CHECKS
    CHECKS += 1
    if not ok:
        FAILURES.append(f"{name}: {detail}")


def run(args, timeout=300, env=None):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout, p.stderr


def first_cells(n):
    """The ids of the first n cells of the roundtrip scenario."""
    rc, out, err = run(["list", ROUNDTRIP])
    assert rc == 0, err
    return [line.split()[0] for line in out.splitlines() if "[" in line][:n]


def nothing_checked():
    """`run --device cuda` where no CUDA GPU is usable: every cell skipped."""
    rc, out, err = run(["run", ROUNDTRIP, "--device", "cuda", "--filter", "dp=2", "--out",
                        w("cuda")])
    check("device cuda without a GPU exits 3", rc == 3, f"exit {rc}\n{out}\n{err}")
    check("the error line says nothing was checked", "nothing was checked" in err, err)
    check("the first line counts the skips", out.splitlines()[0].startswith("running ")
          and "skipped)" in out.splitlines()[0], out[:300])
    with open(w("cuda", "results.json")) as f:
        agg = json.load(f)
    check("results.json verdict is nothing-checked", agg["verdict"] == "nothing-checked",
          agg["verdict"])
    reasons = [c["skipped"] for c in agg["cells"]]
    check("every skipped cell has its reason", reasons and all(
        r and "CUDA" in r for r in reasons), str(reasons))


def writers_refuse_output():
    os.makedirs(w("full"))
    with open(w("full", "keep.txt"), "w") as f:
        f.write("mine")
    for cmd in (["train"] + SMALL, ["reference"] + SMALL):
        rc, _, err = run(cmd + ["--steps", "2", "--out", w("full")])
        check(f"{cmd[0]} refuses a non-empty --out", rc == 2 and "--force" in err
              and "not empty" in err, f"exit {rc}: {err}")
        check(f"{cmd[0]} left the folder alone", os.listdir(w("full")) == ["keep.txt"],
              str(os.listdir(w("full"))))
    rc, _, err = run(["reference"] + SMALL + ["--steps", "2", "--out", w("full"), "--force"])
    check("reference --force replaces --out", rc == 0 and sorted(os.listdir(w("full"))) ==
          ["config.json", "final.safetensors"], f"exit {rc}: {err} {os.listdir(w('full'))}")
    os.makedirs(w("empty"))
    rc, _, err = run(["reference"] + SMALL + ["--steps", "2", "--out", w("empty")])
    check("an empty --out folder is taken", rc == 0, err)

    target = w("full", "final.safetensors")
    before = os.path.getmtime(target)
    rc, _, err = run(["export", w("nope"), "--out", target])
    check("export of a missing checkpoint keeps the file", os.path.getmtime(target) == before, err)
    rc, _, err = run(["train"] + SMALL + ["--steps", "2", "--save-at", "2", "--save-dir",
                                          w("ck", "step2"), "--out", w("tr")])
    check("a save to export", rc == 0, err)
    rc, _, err = run(["export", w("ck", "step2"), "--out", target])
    check("export refuses an existing file", rc == 2 and "--force" in err, f"exit {rc}: {err}")
    check("export left the file alone", os.path.getmtime(target) == before, "it was rewritten")
    rc, _, err = run(["export", w("ck", "step2"), "--out", target, "--force"])
    check("export --force replaces it", rc == 0, err)

    os.makedirs(w("st"))
    with open(w("st", "selftest.json"), "w") as f:
        f.write("{}")
    rc, _, err = run(["selftest", "--failpoint", "grad_scale_applied_twice", "--out", w("st")])
    check("selftest refuses an existing selftest.json", rc == 2 and "selftest.json" in err,
          f"exit {rc}: {err}")

    cells = first_cells(2)
    rc, _, err = run(["run", ROUNDTRIP, "--filter", "id=" + cells[0], "--quiet", "--out", w("r")])
    check("a first run", rc == 0, err)
    rc, _, err = run(["run", ROUNDTRIP, "--filter", "id=" + cells[1], "--quiet", "--out", w("r")])
    check("run refuses a non-empty --out", rc == 2 and "--force" in err, f"exit {rc}: {err}")
    rc, _, err = run(["run", ROUNDTRIP, "--filter", "id=" + cells[1], "--quiet", "--force",
                      "--out", w("r")])
    check("run --force replaces it", rc == 0, err)
    check("no stale cell folder after --force", not os.path.exists(w("r", cells[0])),
          str(os.listdir(w("r"))))


def duplicate_cells():
    rc, _, err = run(["run", ROUNDTRIP, ROUNDTRIP, "--out", w("dup")])
    check("the same file twice is refused", rc == 2 and "given twice" in err
          and "unique" in err, f"exit {rc}: {err}")
    check("nothing ran", not os.path.exists(w("dup", "results.json")), "results.json written")


def wait_for(path, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def interrupted_run():
    for sig in (signal.SIGINT, signal.SIGTERM):
        out = w(f"int_{sig.name}")
        p = subprocess.Popen([BIN, "run", ROUNDTRIP, "--quiet", "--out", out],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Wait for two finished cells, then interrupt.
        deadline = time.time() + 120
        while time.time() < deadline:
            done = [d for d in os.listdir(out) if os.path.exists(os.path.join(out, d, "result.json"))] \
                if os.path.isdir(out) else []
            if len(done) >= 2:
                break
            time.sleep(0.1)
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
        check(f"{sig.name}: run exits 128+{int(sig)}", p.returncode == 128 + int(sig),
              f"exit {p.returncode}: {err}")
        try:
            with open(os.path.join(out, "results.json")) as f:
                agg = json.load(f)
        except OSError as e:
            check(f"{sig.name}: results.json written", False, str(e))
            continue
        check(f"{sig.name}: interrupted: true", agg.get("interrupted") is True
              and agg.get("interrupted_by") == sig.name, json.dumps(agg)[:300])
        check(f"{sig.name}: the finished cells are listed", len(agg["cells"]) >= 2
              and agg["counts"]["not_run"] == agg["counts"]["cells"] - len(agg["cells"]) > 0,
              json.dumps(agg["counts"]))
        check(f"{sig.name}: the error line says so", "interrupted by " + sig.name in err, err)
        on_disk = {d for d in os.listdir(out) if os.path.exists(os.path.join(out, d, "result.json"))}
        listed = {c.get("id") for c in agg["cells"]}
        check(f"{sig.name}: every cell with a result.json is listed", on_disk <= listed,
              f"on disk, not listed: {sorted(on_disk - listed)}")


def stopped_train():
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        out = w(f"train_{sig.name}")
        p = subprocess.Popen([BIN, "train"] + SMALL + ["--steps", "100000000", "--out", out],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        p.stdout.readline()  # "train ... steps": the run has started
        time.sleep(0.5)
        p.send_signal(sig)
        p.communicate(timeout=60)
        left = [e for e in os.listdir(WORK) if e.startswith(f"train_{sig.name}")]
        check(f"train stopped by {sig.name} leaves no --out", not left, str(left))


def killed_launcher():
    """kill -9 of the launcher while its ranks stall in a save."""
    ck = w("kl", "step2")
    p = subprocess.Popen([BIN, "launch", "--nproc", "2", "--timeout", "120", "--", BIN, "train"]
                         + SMALL + ["--steps", "2", "--save-at", "2", "--save-dir", ck, "--out",
                                    w("kl_out")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, SHARDCHECK_FAILPOINTS="save.before_rename=stall@0"),
                         start_new_session=True)
    parent = os.path.dirname(ck)
    deadline = time.time() + 60
    while time.time() < deadline and not (
            os.path.isdir(parent) and [e for e in os.listdir(parent) if ".tmp-" in e]):
        time.sleep(0.05)
    check("the save began", os.path.isdir(parent), "no save folder within 60 s")
    time.sleep(1.0)
    ranks = [int(x) for x in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True,
                                            text=True).stdout.split()]
    check("the launcher has its 2 ranks", len(ranks) == 2, str(ranks))
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    time.sleep(2.0)
    alive = [r for r in ranks if os.path.exists(f"/proc/{r}") and
             open(f"/proc/{r}/stat").read().split()[2] != "Z"]
    check("the ranks died with their launcher", not alive, f"still running: {alive}")
    check("the save was not committed", not os.path.exists(ck), os.listdir(parent))


def main():
    nothing_checked()
    writers_refuse_output()
    duplicate_cells()
    stopped_train()
    killed_launcher()
    interrupted_run()
    for f in FAILURES:
        print("FAIL:", f)
    print(f"{CHECKS - len(FAILURES)} passed, {len(FAILURES)} failed")
    if not FAILURES:
        subprocess.run(["rm", "-rf", WORK])
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
