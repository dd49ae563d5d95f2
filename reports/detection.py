"""The detection self-test for the "Detection power" section:
RESULTS_DIR/selftest.json, written by `shardcheck selftest --out DIR`
(docs/detection.md).

Each silent-bug failpoint is switched on alone and run on its scenario
subset. It is *caught* when a named check of the matrix failed in that run
(bitwise, tolerance, loss continuity, strict-load or routing); a crash or an
exception does not count ("error"), and a failpoint never reached
("not_reached") counts as escaped. The clean runs of the same subsets must
pass, or a catch would mean nothing.

`load_detection(dir)` returns None when there is no selftest.json, so the
report says nothing about detection. A selftest.json that is unreadable or
does not follow the format raises load.InputError (file and key), as results.json
and the benchmark files do. Disagreements inside the file (its summary
against its failpoint list) and a commit other than results.json's are
warnings.
"""
import dataclasses
import os
from typing import Any, Dict, List, Optional

from load import Checker, _kind, read_json

SELFTEST_FORMAT = "shardcheck-selftest/1"
SELFTEST_FILE = "selftest.json"
CLEAN_VERDICTS = ("pass", "fail")
# A failpoint's verdict: caught by a named check; reached but no check failed;
# never reached; or its run broke (a crash or an exception only).
VERDICTS = ("caught", "escaped", "not_reached", "error")
# What the report says of each verdict in its "caught" column.
VERDICT_LABEL = {"caught": "yes", "escaped": "no: escaped", "not_reached": "no: not reached (escaped)",
                 "error": "no: the run broke"}
# The same, as a short note after an escaped failpoint's name ("escaped" needs none).
VERDICT_NOTE = {"escaped": "", "not_reached": "not reached", "error": "run broke"}


@dataclasses.dataclass
class Failpoint:
    """One failpoint's run, as selftest.json's failpoints[] entry gives it."""
    name: str
    bug: str
    where: Optional[str]
    scenario: Optional[str]         # the scenario file(s) of its subset, space-separated
    filter: Optional[str]           # the subset's cell filter ("" or None: every cell of the files)
    cells: Optional[int]            # cells in the run
    reached: bool
    verdict: str                    # one of VERDICTS
    checks: List[str]               # distinct names of the checks that failed, any cell
    caught_by: List[Dict[str, Any]]  # cell, check, step, tensor, detail of each failed check
    first_failure: Optional[Dict[str, Any]]   # cell, check, step, tensor; None when not caught
    time_to_first_failure_s: Optional[float]
    wall_s: Optional[float]
    error: Optional[str]
    why: Optional[str] = None       # why its subset was chosen (default subsets only)

    @property
    def caught(self) -> bool:
        return self.verdict == "caught"

    @property
    def label(self) -> str:
        """The "caught" column's text: "yes", or "no: " and why."""
        return VERDICT_LABEL[self.verdict]

    @property
    def caught_cells(self) -> List[str]:
        """The distinct cells where a check failed, in run order."""
        return list(dict.fromkeys(c["cell"] for c in self.caught_by))

    @property
    def first_detail(self) -> Optional[str]:
        """The detail of the check behind the first failure, if it has one."""
        ff = self.first_failure or {}
        for c in self.caught_by:
            if c["cell"] == ff.get("cell") and c["check"] == ff.get("check"):
                return c.get("detail")
        return None


@dataclasses.dataclass
class Detection:
    """A whole selftest.json: the clean runs, the summary and every failpoint."""
    path: str
    environment: Dict[str, Any]
    wall_s: Optional[float]
    clean_verdict: str              # "pass" | "fail"
    clean_cells: int
    clean_failed: List[str]         # failing clean cells (or a run that broke, with its last log line)
    tried: int
    caught: int
    escaped: List[str]              # the names of the failpoints not caught, as the summary lists them
    failpoints: List[Failpoint]
    warnings: List[str]

    @property
    def clean_passed(self) -> bool:
        return self.clean_verdict == "pass"

    @property
    def all_caught(self) -> bool:
        """Every failpoint tried was caught and the clean runs passed."""
        return self.clean_passed and self.caught == self.tried and not self.escaped

    def verdict_of(self, name: str) -> Optional[str]:
        """The verdict of the failpoint `name` in the list, or None when it is not listed."""
        for f in self.failpoints:
            if f.name == name:
                return f.verdict
        return None

    def escaped_notes(self) -> List[tuple]:
        """(name, note) of each escaped failpoint: the note says "not reached" or
        "run broke" when that is why, else is ""."""
        return [(name, VERDICT_NOTE.get(self.verdict_of(name) or "escaped", "")) for name in self.escaped]


def load_detection(results_dir: str, results_commit: Optional[str] = None) -> Optional[Detection]:
    """RESULTS_DIR/selftest.json read and checked, or None when there is none.
    `results_commit` (results.json's environment.commit) is compared with the
    file's: a different commit is a warning."""
    path = os.path.join(results_dir, SELFTEST_FILE)
    if not os.path.exists(path):
        return None
    doc = read_json(path)
    ck = Checker(path)
    ck.obj(doc, "(top level)")
    fmt = ck.field(doc, "format", "", "str")
    if fmt != SELFTEST_FORMAT:
        ck.fail("format", f"expected {SELFTEST_FORMAT!r}, got {fmt!r}")
    env = ck.field(doc, "environment", "", "obj", required=False) or {}
    wall = ck.field(doc, "wall_s", "", "num", required=False)
    clean = ck.field(doc, "clean", "", "obj")
    clean_verdict = ck.field(clean, "verdict", "clean", "str")
    if clean_verdict not in CLEAN_VERDICTS:
        ck.fail("clean.verdict", f"expected one of {'/'.join(CLEAN_VERDICTS)}, got {clean_verdict!r}")
    clean_cells = ck.field(clean, "cells", "clean", "int")
    clean_failed = _strings(ck, ck.field(clean, "failed_cells", "clean", "list", required=False) or [],
                            "clean.failed_cells")
    summary = ck.field(doc, "summary", "", "obj")
    tried = ck.field(summary, "tried", "summary", "int")
    caught = ck.field(summary, "caught", "summary", "int")
    escaped = _strings(ck, ck.field(summary, "escaped", "summary", "list"), "summary.escaped")
    failpoints = [_failpoint(ck, f, f"failpoints[{i}]")
                  for i, f in enumerate(ck.field(doc, "failpoints", "", "list"))]
    detection = Detection(path, env, wall, clean_verdict, clean_cells, clean_failed, tried, caught,
                          escaped, failpoints, [])
    detection.warnings = _consistency_warnings(detection, results_commit)
    return detection


def _strings(ck: Checker, values: list, key: str) -> List[str]:
    """`values`, each checked to be a string."""
    for i, v in enumerate(values):
        if not isinstance(v, str):
            ck.fail(f"{key}[{i}]", f"expected a string, got {_kind(v)}")
    return values


def _failpoint(ck: Checker, f, where: str) -> Failpoint:
    """One failpoints[] entry, checked."""
    ck.obj(f, where)
    name = ck.field(f, "name", where, "str")
    verdict = ck.field(f, "verdict", where, "str")
    if verdict not in VERDICTS:
        ck.fail(f"{where}.verdict", f"expected one of {'/'.join(VERDICTS)}, got {verdict!r}")
    checks = _strings(ck, ck.field(f, "checks", where, "list"), f"{where}.checks")
    caught_by = ck.field(f, "caught_by", where, "list", required=False) or []
    for i, c in enumerate(caught_by):
        _catch(ck, c, f"{where}.caught_by[{i}]", with_detail=True)
    first = ck.field(f, "first_failure", where, "obj", required=False, nullable=True)
    if first is not None:
        _catch(ck, first, f"{where}.first_failure", with_detail=False)
    if verdict == "caught" and not checks:
        ck.fail(f"{where}.checks", "is empty but the verdict is 'caught'")
    return Failpoint(name, ck.field(f, "bug", where, "str"),
                     ck.field(f, "where", where, "str", required=False),
                     ck.field(f, "scenario", where, "str", required=False),
                     ck.field(f, "filter", where, "str", required=False),
                     ck.field(f, "cells", where, "int", required=False),
                     bool(ck.field(f, "reached", where, "bool")), verdict, checks, caught_by, first,
                     ck.field(f, "time_to_first_failure_s", where, "num", required=False),
                     ck.field(f, "wall_s", where, "num", required=False),
                     ck.field(f, "error", where, "str", required=False),
                     ck.field(f, "why", where, "str", required=False))


def _catch(ck: Checker, c, where: str, with_detail: bool):
    """A caught_by[] entry or a first_failure: cell and check, step and tensor (each may be null)."""
    ck.obj(c, where)
    ck.field(c, "cell", where, "str")
    ck.field(c, "check", where, "str")
    ck.field(c, "step", where, "int", required=False)
    ck.field(c, "tensor", where, "str", required=False)
    if with_detail:
        ck.field(c, "detail", where, "str", required=False)


def _consistency_warnings(d: Detection, results_commit: Optional[str]) -> List[str]:
    """Disagreements the section shows but tolerates."""
    out = []
    listed_caught = sum(1 for f in d.failpoints if f.caught)
    if (d.tried, d.caught) != (len(d.failpoints), listed_caught):
        out.append(f"{SELFTEST_FILE} summary says {d.caught} of {d.tried} failpoints caught but its "
                   f"failpoints list has {listed_caught} of {len(d.failpoints)}")
    missed = [f.name for f in d.failpoints if not f.caught]
    if sorted(d.escaped) != sorted(missed):
        out.append(f"{SELFTEST_FILE} summary lists as escaped {', '.join(d.escaped) or 'none'} but its "
                   f"failpoints list has {', '.join(missed) or 'none'} not caught")
    commit = d.environment.get("commit")
    if results_commit and commit and commit != results_commit:
        out.append(f"{SELFTEST_FILE} comes from commit {commit} but results.json from {results_commit}")
    return out

