#!/usr/bin/python3
"""Mutation testing of shardcheck's own source (docs/detection.md, "Mutation
score"): how many small, plausible bugs the tests kill.

Mutants come from universalmutator's `mutate` (rule-based C/C++ mutations:
operators, constants, conditions, deleted statements), one per mutant file,
over the non-test sources of FOLDERS. A seeded sample of N is tried one at a
time in the default build (build/):

  1. the mutant replaces its source file;
  2. a .cc file's own object files are compiled first: a failing compile
     is `not-compiling`, and unchanged object code (ccache and the
     compiler erased the change) is `equivalent`, both without a link;
     a header goes straight to step 3;
  3. the build of every affected target (ccache keeps unchanged objects);
     a failing build is `not-compiling`; a header mutant that changed no
     object file is `equivalent`;
  4. the test labels run in order (fast first), each with
     --stop-on-failure and without the tests of the labels before it
     (they passed already) or of LEFT_OUT; the first failing test
     `killed` it; a mutant that outlives the time cap is `timed-out` (its
     tests are stopped, child processes included); one that passes every
     label `survived`;
  5. the original is put back (always, even on Ctrl-C, SIGTERM or SIGHUP).

Writes OUT/mutants.jsonl (one line per mutant: file, line, diff, outcome,
killer, label, seconds) and OUT/summary.md (score per folder, survivors).
The score is killed / (killed + survived + timed-out): not-compiling and
equivalent mutants are not bugs a test could catch.

Usage: ci/mutation [--sample N] [--seed S] [--labels a,b,...] [--cap SECONDS]
                   [--out DIR] [--folder F ...] [--resume]
       ci/mutation --sample N --seed S --untried [--out DIR]
       ci/mutation --retest ROWS [--equivalent SOURCE:LINE ...] [--out DIR] [--resume]

--resume keeps the mutants already in OUT/mutants.jsonl (same sample, same
seed) and tries the rest: a long run survives an interruption.

--untried writes the sample's mutants that OUT/mutants.jsonl has no row of
(an interrupted run's rest) to OUT/untried.jsonl as `untried` rows, and stops.

--retest ROWS tries again, on the current tree, the mutants an earlier run
(its mutants.jsonl, ROWS) did not kill: its survived and timed-out rows,
and `untried` rows (mutants of its sample it never reached).
Each is re-made from its row's diff: the changed line is found in today's
source by its text (the nearest match to the recorded line), so the tree may
have moved on since; a row whose line no longer exists is `gone`. Rows named
by --equivalent (triaged equivalent, docs/detection.md) are carried over as
`equivalent` without a run. The new rows name the old line (`retest_of`).
"""
import argparse
import dataclasses
import hashlib
import json
import os
import pathlib
import random
import re
import signal
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = ["kernels", "optimizers", "reference", "spec", "distributed", "harness/models"]
LABELS = ["smoke", "unit", "distributed", "checkpoint"]
# Labels whose tests no label runs here: the external systems' adapters
# (megatron-core, FSDP2 + DCP in Python; docs/systems.md) take half the
# checkpoint label's time and run none of the mutated C++ but the binary's
# plan and result files, which the shardcheck cells check too.
LEFT_OUT = ["systems"]
TEST_FILE = re.compile(r"(_test\.cc|_test_util\.h|\.cuh|_cuda\.cc|_nccl\.cc|_nccl\.h)$")
MUTATE = ROOT / ".venv-mutation" / "bin" / "mutate"
# ctest's reasons for a test that did not run at all: a missing executable
# or venv says nothing about the mutant.
NOT_RUN = ("Not Run", "Could not find executable")


class EnvironmentProblem(Exception):
    """A failure that is not the mutant's: the run stops (the original is
    put back) instead of counting it as a kill."""


@dataclasses.dataclass
class Mutant:
    source: str     # path of the mutated file, relative to the repository
    path: str       # the mutant file
    line: int       # the mutated line (1-based), 0 if unknown
    diff: str       # "- old / + new", one line each
    origin: str = ""  # --retest: SOURCE:LINE of the earlier run's row


def sources(folders: List[str]) -> List[pathlib.Path]:
    out = []
    for folder in folders:
        for p in sorted((ROOT / folder).glob("*")):
            if p.suffix in (".cc", ".h") and not TEST_FILE.search(p.name):
                out.append(p)
    return out


def generate(source: pathlib.Path, into: pathlib.Path) -> List[Mutant]:
    """universalmutator's mutants of one file (cached in `into`)."""
    into.mkdir(parents=True, exist_ok=True)
    if not any(into.iterdir()):
        subprocess.run([str(MUTATE), str(source), "--noCheck", "--mutantDir", str(into)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=into)
    original = source.read_text().split("\n")
    out = []
    for m in sorted(into.iterdir()):
        mutated = m.read_text(errors="replace").split("\n")
        line, diff = first_difference(original, mutated)
        out.append(Mutant(str(source.relative_to(ROOT)), str(m), line, diff))
    return out


def first_difference(a: List[str], b: List[str]):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i + 1, f"- {x.strip()} / + {y.strip()}"
    return (len(a) + 1, "+ " + b[len(a)].strip()) if len(b) > len(a) else (0, "")


def object_hashes(objects: Optional[List[pathlib.Path]] = None) -> Dict[str, str]:
    """sha1 of each object file (default: every one of build/)."""
    out = {}
    for o in objects if objects is not None else (ROOT / "build").rglob("*.o"):
        if o.exists():
            out[str(o)] = hashlib.sha1(o.read_bytes()).hexdigest()
    return out


def objects_of(source: str) -> List[pathlib.Path]:
    """The object files built from one .cc file (one per target that
    compiles it); none for a header."""
    if not source.endswith(".cc"):
        return []
    return sorted((ROOT / "build" / "CMakeFiles").glob(f"*.dir/{source}.o"))


def compile_objects(objects: List[pathlib.Path], log: pathlib.Path) -> bool:
    targets = [str(o.relative_to(ROOT / "build")) for o in objects]
    with open(log, "w") as f:
        return subprocess.run(["ninja", "-C", "build"] + targets, cwd=ROOT,
                              stdout=f, stderr=subprocess.STDOUT).returncode == 0


def build(log: pathlib.Path) -> bool:
    with open(log, "w") as f:
        return subprocess.run(["cmake", "--build", "build", "-j", str(os.cpu_count() or 2)],
                              cwd=ROOT, stdout=f, stderr=subprocess.STDOUT).returncode == 0


def run_labels(labels: List[str], cap: float, log: pathlib.Path):
    """(outcome, killer, label): the first failing test of the first label
    that fails, or survived / timed-out."""
    deadline = time.monotonic() + cap
    for i, label in enumerate(labels):
        left = deadline - time.monotonic()
        if left <= 0:
            return "timed-out", None, label
        skip = "|".join(labels[:i] + LEFT_OUT)
        cmd = ["ctest", "--preset", "default", "-L", f"^{label}$", "-LE", f"^({skip})$",
               "-j", str(os.cpu_count() or 2), "--stop-on-failure", "--timeout", "300"]
        returncode, stdout = run_group(cmd, left)
        with open(log, "a") as f:
            f.write(stdout)
        if returncode is None:
            return "timed-out", None, label
        if returncode != 0:
            failed = re.findall(r"\d+ - (\S+) \(([^)]*)\)", stdout)
            unrunnable = [name for name, why in failed if why in NOT_RUN]
            if unrunnable:
                raise EnvironmentProblem(f"test {unrunnable[0]} could not run ({log}): the tree's "
                                         "setup is incomplete, not a kill")
            return "killed", (failed[0][0] if failed else "?"), label
    return "survived", None, None


def run_group(cmd: List[str], timeout: float):
    """(returncode, output) of cmd in a process group of its own; returncode
    None when it outlived `timeout` (then the whole group is killed: a
    mutant's hung test binary must not keep eating the cores)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        stdout, _ = proc.communicate(timeout=timeout)
        return proc.returncode, stdout
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, _ = proc.communicate()
        return None, stdout


def try_mutant(m: Mutant, labels: List[str], cap: float, out: pathlib.Path, before: Dict[str, str]):
    source = ROOT / m.source
    backup = out / "original"
    shutil.copy2(source, backup)
    start = time.monotonic()
    try:
        shutil.copy(m.path, source)
        log = out / "last.log"
        result = build_mutant(m, log, before)
        if result is None:
            outcome, killer, label = run_labels(labels, cap, log)
            result = {"outcome": outcome, "killer": killer, "label": label}
        return result
    finally:
        shutil.copy2(backup, source)
        os.utime(source)
        print(f"  {m.source}:{m.line} {m.diff[:90]} ({time.monotonic() - start:.0f} s)", flush=True)


def build_mutant(m: Mutant, log: pathlib.Path, before: Dict[str, str]) -> Optional[dict]:
    """not-compiling / equivalent as a result, or None when the mutant
    built into different code (then its tests decide)."""
    objects = objects_of(m.source)
    if objects:
        if not compile_objects(objects, log):
            return {"outcome": "not-compiling"}
        if object_hashes(objects) == {k: before[k] for k in map(str, objects) if k in before}:
            return {"outcome": "equivalent", "why": "same object code as the original"}
    if not build(log):
        return {"outcome": "not-compiling"}
    if not objects and object_hashes() == before:
        return {"outcome": "equivalent", "why": "same object code as the original"}
    return None


def retest_sample(rows_path: pathlib.Path, equivalent: List[str], into: pathlib.Path):
    """(mutants to try, rows decided without a run) for --retest: the
    survived, timed-out and untried rows of an earlier run, re-made on
    today's tree."""
    rows = [json.loads(line) for line in rows_path.read_text().splitlines() if line.strip()]
    into.mkdir(parents=True, exist_ok=True)
    sample: List[Mutant] = []
    decided: List[dict] = []
    for r in rows:
        if r["outcome"] not in ("survived", "timed-out", "untried"):
            continue
        where = f"{r['source']}:{r['line']}"
        carried = dict(source=r["source"], line=r["line"], diff=r["diff"], mutant="retest:" + where,
                       retest_of=where)
        if where in equivalent:
            decided.append(dict(carried, outcome="equivalent", why="triaged equivalent (docs/detection.md)"))
            continue
        m = remake(r, into / f"{len(sample) + len(decided):03d}")
        if m is None:
            decided.append(dict(carried, outcome="gone", why="the changed line is not in today's source"))
        else:
            sample.append(m)
    return sample, decided


def remake(row: dict, into: pathlib.Path) -> Optional[Mutant]:
    """The row's one-line change applied to today's source (written into
    the folder `into`), or None when the old line's text is no longer there."""
    match = re.fullmatch(r"- (.*) / \+ (.*)", row["diff"])
    if not match:
        return None
    old, new = match.groups()
    source = ROOT / row["source"]
    lines = source.read_text().split("\n")
    hits = [i for i, text in enumerate(lines) if text.strip() == old]
    if not hits:
        return None
    i = min(hits, key=lambda h: abs(h + 1 - row["line"]))
    indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + new
    into.mkdir(parents=True, exist_ok=True)
    path = into / source.name
    path.write_text("\n".join(lines))
    return Mutant(row["source"], str(path), i + 1, row["diff"], f"{row['source']}:{row['line']}")


def write_untried(sample: List[Mutant], out: pathlib.Path) -> int:
    """--untried: the sample's mutants that OUT/mutants.jsonl has no row of,
    as `untried` rows in OUT/untried.jsonl (for --retest on a later tree)."""
    done = {r["mutant"] for r in earlier_rows(out / "mutants.jsonl", {m.path for m in sample})}
    rows = [dict(source=m.source, line=m.line, diff=m.diff, mutant=m.path, outcome="untried")
            for m in sample if m.path not in done]
    (out / "untried.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"ci/mutation: {len(rows)} of the sample's {len(sample)} mutants untried: {out / 'untried.jsonl'}")
    return 0


def earlier_rows(path: pathlib.Path, wanted: set) -> List[dict]:
    """The rows of an interrupted run of the same sample (--resume): those
    whose `mutant` is in `wanted`."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("mutant") in wanted]


def tally(rows: List[dict]) -> str:
    counts: Dict[str, int] = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def summarize(rows: List[dict], out: pathlib.Path, command: str, seconds: float):
    by_folder: Dict[str, Dict[str, int]] = {}
    for r in rows:
        folder = str(pathlib.Path(r["source"]).parent)
        counts = by_folder.setdefault(folder, {})
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    lines = ["# Mutation score", "", f"`{command}`: {len(rows)} mutants in {seconds / 60:.0f} min.", "",
             "| folder | killed | survived | timed out | not compiling | equivalent | score |",
             "|---|---|---|---|---|---|---|"]
    total: Dict[str, int] = {}
    for folder, c in sorted(by_folder.items()):
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
        lines.append(score_row(folder, c))
    lines.append(score_row("**all**", total))
    lines += ["", "## Survivors", ""]
    for r in rows:
        if r["outcome"] in ("survived", "timed-out"):
            lines.append(f"- `{r['source']}:{r['line']}` {r['outcome']}: `{r['diff']}`")
    gone = [r for r in rows if r["outcome"] == "gone"]
    if gone:
        lines += ["", "## Gone (--retest: the changed line is no longer in the source)", ""]
        lines += [f"- `{r['retest_of']}`: `{r['diff']}`" for r in gone]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:len(by_folder) + 7]))


def score_row(name: str, c: Dict[str, int]) -> str:
    judged = c.get("killed", 0) + c.get("survived", 0) + c.get("timed-out", 0)
    score = f"{100 * c.get('killed', 0) / judged:.0f}%" if judged else "—"
    return (f"| {name} | {c.get('killed', 0)} | {c.get('survived', 0)} | {c.get('timed-out', 0)} | "
            f"{c.get('not-compiling', 0)} | {c.get('equivalent', 0)} | {score} |")


def exit_on_signal(signum, _frame):
    """SIGTERM and SIGHUP end the run as Ctrl-C does: as an exception, so the
    mutant's `finally` puts the original file back first."""
    raise SystemExit(128 + signum)


def main() -> int:
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, exit_on_signal)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=200, help="mutants to try (default 200)")
    ap.add_argument("--seed", type=int, default=1, help="the sample's seed (default 1)")
    ap.add_argument("--labels", default=",".join(LABELS), help="ctest labels in order (default %(default)s)")
    ap.add_argument("--cap", type=float, default=1200, help="test seconds per mutant (default 1200)")
    ap.add_argument("--out", default="out/mutation", help="output folder (default out/mutation)")
    ap.add_argument("--folder", action="append", help="source folders (default: %s)" % " ".join(FOLDERS))
    ap.add_argument("--resume", action="store_true", help="keep the mutants already in OUT/mutants.jsonl")
    ap.add_argument("--untried", action="store_true",
                    help="write the sample's mutants OUT/mutants.jsonl lacks to OUT/untried.jsonl, and stop")
    ap.add_argument("--retest", metavar="ROWS", help="try an earlier run's survivors on today's tree")
    ap.add_argument("--equivalent", action="append", default=[], metavar="SOURCE:LINE",
                    help="with --retest: a row triaged equivalent, carried over without a run")
    args = ap.parse_args()
    if args.sample < 1:
        ap.error("--sample must be >= 1")
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.retest:
        rows_path = pathlib.Path(args.retest)
        if not rows_path.is_file():
            print(f"ci/mutation: --retest {rows_path}: no such file", file=sys.stderr)
            return 2
        sample, decided = retest_sample(rows_path, args.equivalent, out / "retest")
        print(f"ci/mutation: retesting {len(sample)} mutants of {rows_path} "
              f"({len(decided)} decided without a run), labels {args.labels}", flush=True)
    else:
        if not MUTATE.exists():
            print(f"ci/mutation: {MUTATE} is missing (run ci/mutation, which installs it)", file=sys.stderr)
            return 2
        pool: List[Mutant] = []
        for s in sources(args.folder or FOLDERS):
            pool += generate(s, out / "mutants" / str(s.relative_to(ROOT)).replace("/", "__"))
        sample = random.Random(args.seed).sample(pool, min(args.sample, len(pool)))
        decided = []
        print(f"ci/mutation: {len(sample)} of {len(pool)} mutants, labels {args.labels}", flush=True)
        if args.untried:
            return write_untried(sample, out)
    if not build(out / "baseline.log"):
        print("ci/mutation: the unmutated tree does not build (see baseline.log)", file=sys.stderr)
        return 2
    before = object_hashes()
    wanted = {m.path for m in sample} | {r["mutant"] for r in decided}
    rows = earlier_rows(out / "mutants.jsonl", wanted) if args.resume else []
    done = {r["mutant"] for r in rows}
    start = time.monotonic() - sum(r.get("seconds", 0) for r in rows)
    with open(out / "mutants.jsonl", "a" if args.resume else "w") as jl:
        for r in decided:
            if r["mutant"] not in done:
                rows.append(r)
                jl.write(json.dumps(r) + "\n")
        for i, m in enumerate(sample, 1):
            if m.path in done:
                continue
            print(f"[{i}/{len(sample)}] {tally(rows)}", flush=True)
            r = dict(source=m.source, line=m.line, diff=m.diff, mutant=m.path)
            if m.origin:
                r["retest_of"] = m.origin
            t0 = time.monotonic()
            try:
                r.update(try_mutant(m, args.labels.split(","), args.cap, out, before))
            except EnvironmentProblem as e:
                print(f"ci/mutation: {e}; --resume goes on from here", file=sys.stderr)
                return 2
            r["seconds"] = round(time.monotonic() - t0, 1)
            rows.append(r)
            jl.write(json.dumps(r) + "\n")
            jl.flush()
    build(out / "restore.log")
    summarize(rows, out, "ci/mutation " + " ".join(sys.argv[1:]), time.monotonic() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
