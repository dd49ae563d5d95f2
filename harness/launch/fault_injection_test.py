#!/usr/bin/python3
"""Faults injected into real `shardcheck launch -- shardcheck train` runs
through named failpoints (SHARDCHECK_FAILPOINTS, docs/reliability.md).

Usage: fault_injection_test.py SHARDCHECK GROUP [--jobs N]

GROUP:
  crash_during_save  SIGKILL of a saving rank, and separately of rank 0, at each
                     save phase, for every sharding type: the previous
                     checkpoint verifies and `latest` names it; an interrupted
                     save is never committed and, loaded by path, is refused as
                     incomplete; one killed after its rename is complete; the
                     same command run again succeeds.
  dead_ranks         rank 1 crashes, segfaults, exits, stalls or fails during a
                     step, a save and a load: every rank ends within the
                     collective timeout, the launcher names the rank and the
                     cause, nothing half-written is committed.
  disk_full          a save into a full tmpfs (mounted by the test: root only;
                     exit 77, skipped with the reason, where mounting is
                     refused): a one-line error naming the file and exit code
                     3, nothing committed or left behind, the previous
                     checkpoint intact; with space again the same command
                     succeeds.
  interrupts         SIGINT and SIGTERM to the launcher in the middle of a save:
                     nothing half-written is committed and the same command run
                     again succeeds.

In every case no process of the run is left behind: each launcher starts in
its own session and the test looks for that session in /proc afterwards
(ctest runs other tests beside this one). Prints one line per case and a
summary; exit 1 if any case failed.
"""
import concurrent.futures
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SHARDCHECK = ""
TYPES = ["dp_reshardable", "fully_reshardable", "dp_zero_gather_scatter",
         "fully_sharded_model_space"]
# Types whose files every rank writes (the others gather to rank 0).
EVERY_RANK_WRITES = {"dp_reshardable", "fully_sharded_model_space"}
COLLECTIVE_TIMEOUT = 6
LAUNCH_TIMEOUT = 90  # the launcher's own limit: reaching it means something hung
TRAIN = ["--optimizer", "adamw", "--model", "mixed-small", "--micro-batches", "4",
         "--bucket-size", "1000"]


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def session_members(sid):
    """PIDs whose session id is `sid`."""
    pids = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # fields after the name: state ppid pgrp session
            pids.append(int(stat.split("/")[2]))
    return pids


def launch(workdir, args, failpoints="", signal_when=None):
    """Runs `shardcheck launch --nproc 2 -- shardcheck train ARGS` in its own
    session; returns (exit code, output, seconds). `signal_when` is
    (predicate, signal): the signal goes to the launcher once predicate()."""
    env = dict(os.environ)
    env.pop("SHARDCHECK_FAILPOINTS", None)
    if failpoints:
        env["SHARDCHECK_FAILPOINTS"] = failpoints
    cmd = [SHARDCHECK, "launch", "--nproc", "2", "--timeout", str(LAUNCH_TIMEOUT), "--",
           SHARDCHECK, "train", *TRAIN, "--timeout", str(COLLECTIVE_TIMEOUT), *args]
    start = time.monotonic()
    p = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    if signal_when:
        predicate, sig = signal_when
        while p.poll() is None and not predicate():
            time.sleep(0.02)
        if p.poll() is None:
            p.send_signal(sig)
    out = p.communicate(timeout=LAUNCH_TIMEOUT + 30)[0].decode(errors="replace")
    seconds = time.monotonic() - start
    deadline = time.monotonic() + 5
    while session_members(p.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = session_members(p.pid)
    if left:
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        raise Failed(f"processes left behind: {left}\n{out}")
    return p.returncode, out, seconds


def run_cli(*args):
    p = subprocess.run([SHARDCHECK, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def latest(ckpts):
    with open(os.path.join(ckpts, "latest")) as f:
        return f.read().strip()


def check_previous_intact(ckpts):
    check(latest(ckpts) == "step2", f"latest names {latest(ckpts)}, not step2")
    rc, out = run_cli("inspect", ckpts)
    check(rc == 0 and "step             2" in out, f"step2 no longer verifies: {out}")


def check_tmp_refused(ckpts):
    for tmp in glob.glob(os.path.join(ckpts, "step4.tmp-*")):
        rc, out = run_cli("inspect", tmp)
        check(rc == 2 and "incomplete save" in out, f"{tmp} not refused as incomplete: {out}")


def save_args(sharding_type):
    return ["--load", "ckpts", "--steps", "4", "--save-at", "4", "--save-dir", "ckpts/step4",
            "--sharding-type", sharding_type, "--out", "out4"]


def setup(base, sharding_type):
    """A folder holding ckpts/step2 of `sharding_type` and its latest."""
    work = os.path.join(base, "setup-" + sharding_type)
    if not os.path.isdir(work):
        os.makedirs(work)
        rc, out, _ = launch(work, ["--steps", "2", "--save-at", "2", "--save-dir", "ckpts/step2",
                                   "--sharding-type", sharding_type, "--out", "out2"])
        check(rc == 0, f"setup run failed:\n{out}")
    return work


def fresh_copy(base, sharding_type, name):
    work = os.path.join(base, name)
    shutil.copytree(setup(base, sharding_type), work)
    shutil.rmtree(os.path.join(work, "out2"))
    return work


def crash_case(base, sharding_type, phase, rank):
    work = fresh_copy(base, sharding_type, f"crash-{sharding_type}-{phase}-{rank}")
    ckpts = os.path.join(work, "ckpts")
    rc, out, _ = launch(work, save_args(sharding_type), f"{phase}=crash@{rank}")
    check(rc == 128 + 9, f"launcher exit {rc}, expected 137\n{out}")
    check(f"rank {rank} was killed by signal 9" in out, f"launcher does not name rank {rank}\n{out}")
    check_previous_intact(ckpts)
    check_tmp_refused(ckpts)
    if phase == "save.before_latest":
        rc, out = run_cli("inspect", os.path.join(ckpts, "step4"))
        check(rc == 0 and "step             4" in out, f"step4 is not complete: {out}")
        return
    check(not os.path.exists(os.path.join(ckpts, "step4")), "step4 was committed")
    rc, out, _ = launch(work, save_args(sharding_type))
    check(rc == 0 and latest(ckpts) == "step4", f"the same command again failed ({rc}):\n{out}")


def crash_during_save(base):
    cases = []
    for t in TYPES:
        for phase in ["save.rank_file_partial", "save.after_rank_file"]:
            for rank in ([0, 1] if t in EVERY_RANK_WRITES else [0]):
                cases.append((f"crash {t} {phase} rank {rank}", crash_case, (base, t, phase, rank)))
        for phase in ["save.before_metadata", "save.before_rename", "save.before_latest"]:
            cases.append((f"crash {t} {phase} rank 0", crash_case, (base, t, phase, 0)))
    return cases


# action -> (launcher exit code, what the launcher says of rank 1)
ACTIONS = {
    "crash": (137, "rank 1 was killed by signal 9"),
    "segv": (139, "rank 1 was killed by signal 11"),
    "exit": (1, "rank 1 exited with code 1"),
    # Every rank fails at once (the others: "... failed on rank 1"), so the
    # launcher may see either first; the rank's own error names the cause.
    "error": (3, "[rank 1] shardcheck: error: failpoint {place}"),
    "stall": (124, "rank 0 exited with code 124"),
}


def dead_rank_case(base, place, action):
    work = fresh_copy(base, "dp_reshardable", f"dead-{place}-{action}")
    ckpts = os.path.join(work, "ckpts")
    rc, out, seconds = launch(work, save_args("dp_reshardable"), f"{place}={action}@1")
    want_rc, words = ACTIONS[action]
    words = words.format(place=place)
    check(rc == want_rc, f"launcher exit {rc}, expected {want_rc}\n{out}")
    check(words in out, f"the output does not say '{words}'\n{out}")
    if action == "stall":
        check(f"timed out waiting {COLLECTIVE_TIMEOUT}000ms" in out.lower(),
              f"no rank names the collective timeout\n{out}")
    check(seconds < COLLECTIVE_TIMEOUT + 20,
          f"took {seconds:.0f} s with a {COLLECTIVE_TIMEOUT} s collective timeout")
    check(not os.path.exists(os.path.join(ckpts, "step4")), "step4 was committed")
    check_previous_intact(ckpts)


def dead_ranks(base):
    return [(f"{action} in {place} on rank 1", dead_rank_case, (base, place, action))
            for place in ["step.before_update", "save.after_rank_file", "load.before_read"]
            for action in ACTIONS]


def interrupt_case(base, sig):
    work = fresh_copy(base, "dp_reshardable", f"interrupt-{sig.name}")
    ckpts = os.path.join(work, "ckpts")
    # Rank 0 stalls with metadata.json written and the rename not done: the
    # save is certainly in progress when the signal arrives.
    in_save = lambda: glob.glob(os.path.join(ckpts, "step4.tmp-*", "metadata.json"))
    rc, out, _ = launch(work, save_args("dp_reshardable"), "save.before_rename=stall@0",
                        (in_save, sig))
    check(rc == 128 + sig, f"launcher exit {rc}, expected {128 + sig}\n{out}")
    check(f"received {sig.name}" in out, f"launcher does not say it received {sig.name}\n{out}")
    check(not os.path.exists(os.path.join(ckpts, "step4")), "step4 was committed")
    check_previous_intact(ckpts)
    check_tmp_refused(ckpts)
    rc, out, _ = launch(work, save_args("dp_reshardable"))
    check(rc == 0 and latest(ckpts) == "step4", f"the same command again failed ({rc}):\n{out}")


def interrupts(base):
    return [(f"{sig.name} to the launcher during a save", interrupt_case, (base, sig))
            for sig in [signal.SIGINT, signal.SIGTERM]]


class Skip(Exception):
    pass


def fill(folder, leave):
    """Fills the file system of `folder` up to `leave` bytes."""
    path = os.path.join(folder, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    os.truncate(path, max(0, os.path.getsize(path) - leave))
    return path


def disk_full_case(base):
    mnt = os.path.join(base, "tmpfs")
    os.makedirs(mnt)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt],
                           capture_output=True, text=True)
    if mount.returncode != 0:
        raise Skip(f"cannot mount a tmpfs ({mount.stderr.strip() or 'not root?'})")
    try:
        work = os.path.join(mnt, "work")
        shutil.copytree(setup(base, "dp_reshardable"), work)
        ckpts = os.path.join(work, "ckpts")
        filler = fill(mnt, 4096)
        rc, out, _ = launch(work, save_args("dp_reshardable"))
        check(rc == 3, f"launcher exit {rc}, expected 3 (environment)\n{out}")
        errors = [l for l in out.splitlines() if "shardcheck: error:" in l]
        check(any("No space left on device" in l and ckpts in l for l in errors),
              f"no error line names the file and the full disk\n{out}")
        check(not os.path.exists(os.path.join(ckpts, "step4")), "step4 was committed")
        check(not glob.glob(os.path.join(ckpts, "step4.tmp-*")), "a .tmp- folder was left behind")
        os.remove(filler)
        check_previous_intact(ckpts)
        rc, out, _ = launch(work, save_args("dp_reshardable"))
        check(rc == 0 and latest(ckpts) == "step4", f"the same command again failed ({rc}):\n{out}")
    finally:
        subprocess.run(["umount", "-l", mnt], capture_output=True)


def disk_full(base):
    return [("save into a full disk", disk_full_case, (base,))]


def run_case(case):
    name, fn, args = case
    start = time.monotonic()
    try:
        fn(*args)
        return name, None, time.monotonic() - start
    except Failed as e:
        return name, str(e), time.monotonic() - start
    except Skip as e:
        return name, Skip(str(e)), time.monotonic() - start
    except Exception as e:  # a bug of the test itself is a failure too
        return name, f"{type(e).__name__}: {e}", time.monotonic() - start


def main():
    global SHARDCHECK
    SHARDCHECK = os.path.abspath(sys.argv[1])
    group = sys.argv[2]
    jobs = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 2
    groups = {"crash_during_save": crash_during_save, "dead_ranks": dead_ranks,
              "disk_full": disk_full, "interrupts": interrupts}
    base = tempfile.mkdtemp(prefix="shardcheck_faults_")
    try:
        cases = groups[group](base)
        for t in {"dp_reshardable"} | ({*TYPES} if group == "crash_during_save" else set()):
            setup(base, t)  # before the pool: cases of one type share it
        failed = skipped = 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for name, err, seconds in pool.map(run_case, cases):
                if isinstance(err, Skip):
                    skipped += 1
                    print(f"SKIP  {name}: {err}")
                elif err:
                    failed += 1
                    print(f"FAIL  {name} ({seconds:.1f} s): {err}")
                else:
                    print(f"ok    {name} ({seconds:.1f} s)")
        print(f"{group}: {len(cases) - failed - skipped} of {len(cases)} fault cases survived"
              + (f", {skipped} skipped" if skipped else ""))
        return 1 if failed else 77 if skipped == len(cases) else 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
