"""Loading and validating a results directory (docs/results-schema.md).

`load_results(dir)` reads DIR/results.json and every DIR/<cell>/result.json,
checks the types and shapes the report relies on, and returns a `Results`.
Anything unreadable or malformed raises `InputError`, which names the file
and the key (e.g. ``cells[3].verdict``); make_report.py turns it into a
one-line message and exit code 2.

Nothing here knows an optimizer's state keys: the per-tensor groups come
from each cell's own "groups" list, and every diff group is checked against
that list in both directions. An external system's cell (config.system is
not "shardcheck") also compares its distributed runs with its own
single-device run, "diff_single_device", whose groups are params,
main_params when the system keeps them, and exactly the cell's
"system_state_keys" (the system may keep state no schema lists).

Verdicts: besides pass/fail/error/skipped, "xfail" (declared expected to
fail, and it failed or errored: the run still passes) and "xpass" (declared
so, but every check passed: the run fails). Such a cell must say what it
expected and got ("expected"). A skipped cell says why in "skipped".

The run's verdict (RUN_VERDICTS) may also be "nothing-checked" (no cell
that finished ran a check) or "interrupted" (SIGINT/SIGTERM stopped the run
before every cell finished; "interrupted_by" names the signal, counts.cells
counts the cells selected, counts.not_run those that did not finish, and
"cells" lists only the finished ones). Older results lack these (not
interrupted, not_run 0); headline.py reads them. A tolerance check may say
which figure decided it ("judged_by": figure, value, bound).
"""
import dataclasses
import json
import math
import os
from typing import Any, Dict, List, Optional

RESULTS_FORMAT = "shardcheck-results/1"
CELL_FORMAT = "shardcheck-cell-result/1"
VERDICTS = ("pass", "fail", "error", "skipped", "xfail", "xpass")
# results.json's own verdict: "fail" wins; "nothing-checked" when no cell that finished ran a check
# (all skipped); "interrupted" when a signal stopped the run before every cell finished. Older
# results say pass or fail only, or (before verdicts were required) nothing: headline.py derives it.
RUN_VERDICTS = ("pass", "fail", "nothing-checked", "interrupted")
# The cell verdicts that fail a run. A skipped cell does not, nor does an "xfail" (a cell
# declared expected to fail, for a known upstream bug, that failed or errored); an "xpass"
# (declared so, but every check passed) does, as pytest's strict mode: a fixed bug must show.
FAILED = ("fail", "error", "xpass")
# The verdicts of cells whose checks may have run (an error or skipped cell's did not).
RAN = ("pass", "fail", "xfail", "xpass")
# What an expected-failure cell got before its expectation applied ("expected.got").
EXPECTED_GOT = {"xfail": ("fail", "error"), "xpass": ("pass",)}
# The system under test of cells that name none (results written before systems existed).
DEFAULT_SYSTEM = "shardcheck"
# The kind of the one check of a cell whose system under test raised (no runs follow).
SYSTEM_RAISED = "system-raised"
# A check that could not apply (e.g. a loss check on an oracle model) may say "n/a".
CHECK_VERDICTS = ("pass", "fail", "n/a")
# Per-step series of diff.<group>: max_rel is |a - b| / max(|b|, rel_floor) where result.json
# gives "rel_floor"; max_ulp is taken between same-sign values only, and "sign_changes"
# (optional, like "rel_floor": older results lack both) counts the opposite-sign pairs.
DIFF_SERIES = ("max_abs", "max_rel", "max_ulp", "mismatches", "sign_changes")
# Optional per-step series of a run, aligned with its "steps" (null where they do not apply,
# e.g. lr at an after-load step). "lr" is the main child optimizer's scheduled learning rate.
STEP_SERIES = ("loss", "grad_norm", "lr")
# counts.<name> that older results lack (read as 0).
OPTIONAL_COUNTS = ("skipped", "xfailed", "xpassed")
# The figures a tolerance check's "judged_by" may name: the one that decided its verdict.
JUDGED_FIGURES = ("max_abs", "max_rel", "violations")


class InputError(Exception):
    """A results file that cannot be read or does not follow the schema."""

    def __init__(self, path: str, key: str, message: str):
        super().__init__(f"{path}: {key}: {message}")
        self.path, self.key, self.message = path, key, message


@dataclasses.dataclass
class Cell:
    """One matrix cell: its entry in results.json and its result.json (None
    when an "error" cell left no result.json behind)."""
    entry: Dict[str, Any]
    result: Optional[Dict[str, Any]]
    result_path: str

    @property
    def id(self) -> str:
        return self.entry["id"]

    @property
    def verdict(self) -> str:
        return self.entry["verdict"]

    @property
    def ran(self) -> bool:
        """Whether the cell's checks ran: it passed or failed, as declared or
        not (an xfail that errored, or left no result.json, did not run,
        like an error cell)."""
        got = ((self.result or {}).get("expected") or {}).get("got")
        return self.verdict in RAN and not (self.verdict == "xfail" and (self.result is None or got == "error"))

    @property
    def system(self) -> str:
        """The system under test: results.json's "system", else result.json's
        config.system, else DEFAULT_SYSTEM (older results name none)."""
        config = (self.result or {}).get("config") or {}
        return self.entry.get("system") or config.get("system") or DEFAULT_SYSTEM

    @property
    def external(self) -> bool:
        """Whether an external system (not shardcheck itself) was under test."""
        return self.system != DEFAULT_SYSTEM

    def get(self, key: str, default=None):
        return self.entry.get(key, default)


@dataclasses.dataclass
class Results:
    """A whole results directory: the aggregate and its cells in run order."""
    dir: str
    path: str
    aggregate: Dict[str, Any]
    cells: List[Cell]
    warnings: List[str]

    def cell(self, cell_id: str) -> Optional[Cell]:
        for c in self.cells:
            if c.id == cell_id:
                return c
        return None

    @property
    def interrupted_by(self) -> Optional[str]:
        """The signal that stopped an interrupted run ("SIGINT", "SIGTERM";
        "a signal" when results.json does not name it), or None."""
        if not self.aggregate.get("interrupted"):
            return None
        return self.aggregate.get("interrupted_by") or "a signal"

    @property
    def not_run(self) -> int:
        """Cells selected but not finished (counts.not_run; 0 in older results)."""
        return (self.aggregate.get("counts") or {}).get("not_run") or 0

    @property
    def verdict(self) -> str:
        """The run's verdict as the report shows it: results.json's, unless
        it is absent or "pass" (older results could not say that nothing was
        checked, nor that the run was interrupted): then run_verdict's. A
        PASS always means that some cell ran its checks."""
        said = self.aggregate.get("verdict")
        if said is None or said == "pass":
            return run_verdict(self.cells, bool(self.aggregate.get("interrupted")))
        return said


def run_verdict(cells: List[Cell], interrupted: bool = False) -> str:
    """The run's verdict from its cells: "fail" when one fails the run,
    else "interrupted" when a signal stopped the run, else
    "nothing-checked" when no cell ran its checks (all skipped), else
    "pass"."""
    if any(c.verdict in FAILED for c in cells):
        return "fail"
    if interrupted:
        return "interrupted"
    if not any(c.ran for c in cells):
        return "nothing-checked"
    return "pass"


def read_json(path: str) -> Any:
    """The parsed JSON of `path`; InputError if it is missing or not JSON."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(path, "(file)", f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise InputError(path, "(file)", f"not UTF-8: {e.reason} at byte {e.start}") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise InputError(path, "(json)", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except ValueError as e:
        raise InputError(path, "(json)", str(e)) from None


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


class Checker:
    """Type checks for one file; every failure names that file and the key."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, key: str, message: str):
        raise InputError(self.path, key, message)

    def obj(self, value, key: str) -> dict:
        if not isinstance(value, dict):
            self.fail(key, f"expected an object, got {_kind(value)}")
        return value

    def field(self, d: dict, name: str, where: str, kind: str, required=True, nullable=False):
        """d[name] checked against `kind` ("str" "int" "num" "bool" "list" "obj");
        None when absent and not required, or null and nullable."""
        key = f"{where}.{name}" if where else name
        if name not in d:
            if required:
                self.fail(key, "missing")
            return None
        value = d[name]
        if value is None:
            if nullable or not required:
                return None
            self.fail(key, f"expected {kind}, got null")
        if not _is(value, kind):
            self.fail(key, f"expected {kind}, got {_kind(value)}")
        return value

    def series(self, value, key: str, length: int, kind="num") -> list:
        """A per-step list of numbers (or nulls) of the given length."""
        if not isinstance(value, list):
            self.fail(key, f"expected a list, got {_kind(value)}")
        if len(value) != length:
            self.fail(key, f"has {len(value)} entries but steps has {length}")
        for i, v in enumerate(value):
            if v is not None and not _is(v, kind):
                self.fail(f"{key}[{i}]", f"expected {kind} or null, got {_kind(v)}")
        return value


def _is(value, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "num":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "list":
        return isinstance(value, list)
    if kind == "obj":
        return isinstance(value, dict)
    raise AssertionError(kind)


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number" if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, list):
        return "a list"
    return "an object"


def load_results(results_dir: str) -> Results:
    """Reads and validates RESULTS_DIR/results.json and each cell's result.json."""
    path = os.path.join(results_dir, "results.json")
    agg = read_json(path)
    ck = Checker(path)
    ck.obj(agg, "(top level)")
    fmt = ck.field(agg, "format", "", "str")
    if fmt != RESULTS_FORMAT:
        ck.fail("format", f"expected {RESULTS_FORMAT!r}, got {fmt!r}")
    _run_verdict(ck, agg)
    agg["interrupted"] = bool(ck.field(agg, "interrupted", "", "bool", required=False))
    ck.field(agg, "interrupted_by", "", "str", required=False)
    ck.field(agg, "started", "", "str", required=False)
    ck.field(agg, "wall_s", "", "num", required=False)
    env = ck.field(agg, "environment", "", "obj", required=False) or {}
    agg["environment"] = env
    scenarios = ck.field(agg, "scenarios", "", "list", required=False) or []
    for i, s in enumerate(scenarios):
        ck.obj(s, f"scenarios[{i}]")
        ck.field(s, "name", f"scenarios[{i}]", "str", required=False)
        ck.field(s, "file", f"scenarios[{i}]", "str", required=False)
    agg["scenarios"] = scenarios
    # The optimizer registry's setup names, in registry order: the matrix rows follow it.
    order = ck.field(agg, "optimizer_order", "", "list", required=False) or []
    for i, name in enumerate(order):
        if not isinstance(name, str):
            ck.fail(f"optimizer_order[{i}]", f"expected a string (an optimizer setup name), got {_kind(name)}")
    agg["optimizer_order"] = order
    counts = ck.field(agg, "counts", "", "obj", required=False)
    if counts is not None:
        for name in ("cells", "passed", "failed", "errored"):
            ck.field(counts, name, "counts", "int")
        for name in OPTIONAL_COUNTS:         # older results lack them: 0
            counts[name] = ck.field(counts, name, "counts", "int", required=False) or 0
        ck.field(counts, "not_run", "counts", "int", required=False)   # an interrupted run's: Results.not_run

    cells: List[Cell] = []
    seen = set()
    for i, entry in enumerate(ck.field(agg, "cells", "", "list")):
        where = f"cells[{i}]"
        ck.obj(entry, where)
        cid = ck.field(entry, "id", where, "str")
        if cid in seen:
            ck.fail(f"{where}.id", f"duplicate cell id {cid!r}")
        seen.add(cid)
        cdir = ck.field(entry, "dir", where, "str")
        if os.path.isabs(cdir) or ".." in cdir.replace("\\", "/").split("/"):
            ck.fail(f"{where}.dir", f"must be a folder inside the results directory, got {cdir!r}")
        for name in ("optimizer", "sharding_type"):
            ck.field(entry, name, where, "str")
        ck.field(entry, "dp", where, "int")
        for name in ("resume_dp", "save_at", "steps"):
            ck.field(entry, name, where, "int", required=False)
        for name in ("scenario", "dtype", "model", "system"):
            ck.field(entry, name, where, "str", required=False)
        ck.field(entry, "wall_s", where, "num", required=False)
        ck.field(entry, "skipped", where, "str", required=False)
        verdict = _verdict(ck, entry, where)
        entry["first_failure"] = _first_failure(ck, entry, where)
        result_path = os.path.join(results_dir, cdir, "result.json")
        if verdict in ("error", "skipped", "xfail") and not os.path.exists(result_path):
            result = None
        else:
            result = load_cell(result_path, cid)
        cells.append(Cell(entry, result, result_path))

    warnings = _consistency_warnings(agg, cells)
    return Results(results_dir, path, agg, cells, warnings)


def load_cell(path: str, expected_id: str) -> Dict[str, Any]:
    """Reads and validates one result.json; its "id" must be `expected_id`."""
    cell = read_json(path)
    ck = Checker(path)
    ck.obj(cell, "(top level)")
    fmt = ck.field(cell, "format", "", "str")
    if fmt != CELL_FORMAT:
        ck.fail("format", f"expected {CELL_FORMAT!r}, got {fmt!r}")
    cid = ck.field(cell, "id", "", "str")
    if cid != expected_id:
        ck.fail("id", f"is {cid!r} but results.json lists this folder as {expected_id!r}")
    verdict = _verdict(ck, cell, "")
    expected = _expected(ck, cell, verdict)
    # Neither an error nor a skipped cell ran: no runs, checks or series.
    is_error = verdict in ("error", "skipped") or (expected or {}).get("got") == "error"
    ck.field(cell, "error", "", "str", required=False)
    ck.field(cell, "skipped", "", "str", required=False)
    ck.field(cell, "wall_s", "", "num", required=False)
    ck.field(cell, "rel_floor", "", "num", required=False)
    cell["scenario"] = ck.field(cell, "scenario", "", "obj", required=False) or {}
    cell["environment"] = ck.field(cell, "environment", "", "obj", required=False) or {}
    _system_environment(ck, cell["environment"])
    cell["first_failure"] = _first_failure(ck, cell, "")

    config = ck.field(cell, "config", "", "obj", required=not is_error) or {}
    _config(ck, config)
    cell["config"] = config

    checks = ck.field(cell, "checks", "", "list", required=not is_error) or []
    for i, check in enumerate(checks):
        _check_check(ck, check, f"checks[{i}]")
    cell["checks"] = checks
    # A system under test that raised leaves one failed check and no runs, like an error.
    ran = not is_error and not system_raised(cell)

    schema = ck.field(cell, "schema", "", "obj", required=ran) or {}
    for kind, keys in schema.items():
        _names(ck, keys, f"schema.{kind}", "a list of state keys")
    cell["schema"] = schema
    groups = _names(ck, ck.field(cell, "groups", "", "list", required=ran) or [], "groups", "a list of groups")
    cell["groups"] = groups
    system_keys = ck.field(cell, "system_state_keys", "", "list", required=False)
    if system_keys is not None:
        _names(ck, system_keys, "system_state_keys", "a list of state keys")

    runs = ck.field(cell, "runs", "", "obj", required=ran) or {}
    for name, run in runs.items():
        _check_run(ck, run, f"runs.{name}", groups, system_keys)
    cell["runs"] = runs
    cell["adapter"] = _adapter(ck, cell)

    memory = ck.field(cell, "memory", "", "list", required=False) or []
    for i, rank in enumerate(memory):
        where = f"memory[{i}]"
        ck.obj(rank, where)
        ck.field(rank, "rank", where, "int")
        ck.field(rank, "owned_elements", where, "int", required=False)
        ck.field(rank, "total_bytes", where, "int", required=False)
        entries = ck.field(rank, "entries", where, "list", required=False) or []
        for j, e in enumerate(entries):
            ck.obj(e, f"{where}.entries[{j}]")
            ck.field(e, "child", f"{where}.entries[{j}]", "str", required=False)
            ck.field(e, "key", f"{where}.entries[{j}]", "str")
            ck.field(e, "elements", f"{where}.entries[{j}]", "int", required=False)
            ck.field(e, "bytes", f"{where}.entries[{j}]", "int", required=False)
        rank["entries"] = entries
    cell["memory"] = memory
    return cell


def system_raised(result: Optional[dict]) -> bool:
    """Whether the system under test raised: a failed check of kind "system-raised"."""
    return any(c.get("kind") == SYSTEM_RAISED and c.get("verdict") == "fail"
               for c in (result or {}).get("checks") or [])


def _names(ck: Checker, value, key: str, what: str) -> List[str]:
    """A list of distinct strings (schema keys, groups)."""
    if not isinstance(value, list):
        ck.fail(key, f"expected {what}, got {_kind(value)}")
    _strings(ck, value, key)
    if len(set(value)) != len(value):
        ck.fail(key, "lists a name twice")
    return value


def _expected(ck: Checker, cell: dict, verdict: str) -> Optional[dict]:
    """result.json's "expected" ({verdict, reason, failing_check, got}):
    required of an xfail or xpass cell, whose "got" must agree with its
    verdict. A fail or error cell may have it too: expected to fail, it
    failed another check first, or errored."""
    exp = ck.field(cell, "expected", "", "obj", required=verdict in EXPECTED_GOT)
    if exp is None:
        return None
    ck.field(exp, "verdict", "expected", "str")
    ck.field(exp, "reason", "expected", "str")
    ck.field(exp, "failing_check", "expected", "str", required=False)
    got = ck.field(exp, "got", "expected", "str")
    allowed = EXPECTED_GOT.get(verdict, ("pass", "fail", "error"))
    if got not in allowed:
        ck.fail("expected.got", f"expected {'/'.join(allowed)} for a cell whose verdict is {verdict!r}, got {got!r}")
    return exp


def _config(ck: Checker, config: dict):
    """The parts of "config" the report reads beyond showing them: the
    system under test and the expected-failure declaration."""
    ck.field(config, "system", "config", "str", required=False)
    expect = ck.field(config, "expect", "config", "obj", required=False)
    if expect is not None:
        ck.field(expect, "verdict", "config.expect", "str")
        ck.field(expect, "reason", "config.expect", "str")


def _system_environment(ck: Checker, env: dict):
    """environment.system of an external system's cell: its name and the
    versions its adapter reported (name -> version string)."""
    system = ck.field(env, "system", "environment", "obj", required=False)
    if system is None:
        return
    ck.field(system, "name", "environment.system", "str")
    versions = ck.field(system, "versions", "environment.system", "obj", required=False) or {}
    for name in versions:
        ck.field(versions, name, "environment.system.versions", "str")
    system["versions"] = versions


def _adapter(ck: Checker, cell: dict) -> List[dict]:
    """"adapter": how each run of an external system's adapter went."""
    runs = ck.field(cell, "adapter", "", "list", required=False) or []
    for i, a in enumerate(runs):
        where = f"adapter[{i}]"
        ck.obj(a, where)
        ck.field(a, "run", where, "str")
        ck.field(a, "exit_code", where, "int", required=False)
        ck.field(a, "log", where, "str", required=False)
        a["notes"] = _strings(ck, ck.field(a, "notes", where, "list", required=False) or [], f"{where}.notes")
        error = ck.field(a, "error", where, "obj", required=False)
        if error is not None:
            key = f"{where}.error"
            for name in ("type", "message", "phase", "where"):
                ck.field(error, name, key, "str", required=False)
            for name in ("step", "rank"):
                ck.field(error, name, key, "int", required=False)
            tb = error.get("traceback")
            if tb is not None and not isinstance(tb, str):
                error["traceback"] = "".join(_strings(ck, tb, f"{key}.traceback"))
    return runs


def _strings(ck: Checker, value, key: str) -> List[str]:
    """A list of strings (repeats allowed)."""
    if not isinstance(value, list):
        ck.fail(key, f"expected a list, got {_kind(value)}")
    for i, v in enumerate(value):
        if not isinstance(v, str):
            ck.fail(f"{key}[{i}]", f"expected a string, got {_kind(v)}")
    return value


def _check_run(ck: Checker, run, where: str, groups: List[str], system_keys: Optional[List[str]]):
    """One run: its per-step series, its "diff" (exactly the cell's groups)
    and, for an external system's distributed run, "diff_single_device"
    (params, main_params when the system keeps them, and exactly the cell's
    system_state_keys: the system's own state may hold keys that no schema
    lists, and none at all)."""
    ck.obj(run, where)
    ck.field(run, "dp", where, "int", required=False)
    ck.field(run, "save_at", where, "int", required=False)
    steps = ck.field(run, "steps", where, "list")
    ck.series(steps, f"{where}.steps", len(steps), kind="int")
    if any(s is None for s in steps):
        ck.fail(f"{where}.steps", "has a null step")
    n = len(steps)
    for name in STEP_SERIES:
        if run.get(name) is not None:
            ck.series(run[name], f"{where}.{name}", n)
    if run.get("after_load") is not None:
        ck.series(run["after_load"], f"{where}.after_load", n, kind="bool")
    diff = ck.field(run, "diff", where, "obj", required=False, nullable=True)
    if diff is not None:
        _check_diff(ck, diff, f"{where}.diff", n, groups, groups, "the cell's groups", "'groups'")
    single = ck.field(run, "diff_single_device", where, "obj", required=False, nullable=True)
    if single is not None:
        if system_keys is None:
            ck.fail(f"{where}.diff_single_device", "needs the cell's 'system_state_keys', which it lacks")
        required = list(dict.fromkeys(["params"] + system_keys))
        _check_diff(ck, single, f"{where}.diff_single_device", n, required, required + ["main_params"],
                    "params, main_params or the cell's system_state_keys", "'system_state_keys'")


def _check_diff(ck: Checker, diff: dict, where: str, n: int, required: List[str], allowed: List[str],
                what: str, listed: str):
    """A diff object: an entry per group of `required`, none outside
    `allowed`, each per-step series n long."""
    for group, series in diff.items():
        key = f"{where}.{group}"
        if group not in allowed:
            ck.fail(key, f"is not one of {what} {allowed}")
        ck.obj(series, key)
        ck.series(ck.field(series, "max_abs", key, "list"), f"{key}.max_abs", n)
        for name in DIFF_SERIES[1:]:
            if series.get(name) is not None:
                ck.series(series[name], f"{key}.{name}", n)
    for group in required:
        if group not in diff:
            ck.fail(where, f"has no group {group!r} (listed in {listed})")


def _check_check(ck: Checker, check, where: str):
    ck.obj(check, where)
    ck.field(check, "name", where, "str")
    ck.field(check, "kind", where, "str")
    if ck.field(check, "verdict", where, "str") not in CHECK_VERDICTS:
        ck.fail(f"{where}.verdict", f"expected one of {'/'.join(CHECK_VERDICTS)}, got {check['verdict']!r}")
    for name in ("on", "run", "against", "first_failing_tensor", "detail"):
        ck.field(check, name, where, "str", required=False)
    for name in ("atol", "rtol", "max_abs", "max_rel"):
        ck.field(check, name, where, "num", required=False)
    for name in ("max_ulp", "max_ulp_seen", "first_failing_step"):
        ck.field(check, name, where, "int", required=False)
    _judged_by(ck, check, where)


def _judged_by(ck: Checker, check: dict, where: str):
    """A check's "judged_by": null (bitwise checks, older results) or the
    figure that decided a tolerance check, with its value and bound."""
    judged = ck.field(check, "judged_by", where, "obj", required=False)
    if judged is None:
        return
    key = f"{where}.judged_by"
    figure = ck.field(judged, "figure", key, "str")
    if figure not in JUDGED_FIGURES:
        ck.fail(f"{key}.figure", f"expected one of {'/'.join(JUDGED_FIGURES)}, got {figure!r}")
    ck.field(judged, "value", key, "num")
    ck.field(judged, "bound", key, "num")


def _run_verdict(ck: Checker, agg: dict) -> Optional[str]:
    """results.json's "verdict", one of RUN_VERDICTS, or None when absent."""
    v = ck.field(agg, "verdict", "", "str", required=False)
    if v is not None and v not in RUN_VERDICTS:
        ck.fail("verdict", f"expected one of {'/'.join(RUN_VERDICTS)}, got {v!r}")
    agg["verdict"] = v
    return v


def _verdict(ck: Checker, d: dict, where: str) -> str:
    v = ck.field(d, "verdict", where, "str")
    if v not in VERDICTS:
        ck.fail(f"{where}.verdict" if where else "verdict", f"expected one of {'/'.join(VERDICTS)}, got {v!r}")
    return v


def _first_failure(ck: Checker, d: dict, where: str):
    ff = ck.field(d, "first_failure", where, "obj", required=False)
    if ff is None:
        return None
    key = f"{where}.first_failure" if where else "first_failure"
    for name in ("check", "tensor", "detail"):
        ck.field(ff, name, key, "str", required=False)
    ck.field(ff, "step", key, "int", required=False)
    return ff


def _consistency_warnings(agg: dict, cells: List[Cell]) -> List[str]:
    """Disagreements inside the results that the report shows but tolerates."""
    out = []
    tally = {v: sum(1 for c in cells if c.verdict == v) for v in VERDICTS}
    counts = agg.get("counts")
    if counts is not None:
        # An interrupted run counts the cells selected; its list holds the finished ones.
        not_run = counts.get("not_run") or 0
        said = (counts["cells"] - not_run, counts["passed"], counts["failed"], counts["errored"])
        seen = (len(cells), tally["pass"], tally["fail"], tally["error"])
        if said != seen:
            what = "cells/passed/failed/errored" if not not_run else "cells - not_run/passed/failed/errored"
            out.append(f"results.json counts ({what}) say %d/%d/%d/%d but the cells "
                       "list has %d/%d/%d/%d" % (said + seen))
        said = (counts["xfailed"], counts["xpassed"])
        seen = (tally["xfail"], tally["xpass"])
        if said != seen:
            out.append("results.json counts (xfailed/xpassed) say %d/%d but the cells list has %d/%d"
                       % (said + seen))
    overall = run_verdict(cells, agg["interrupted"])
    # Older results say "pass" where nothing was checked; an interrupted run that checked nothing
    # may say either.
    agree = {overall} | ({"pass"} if overall == "nothing-checked" else set()) \
        | ({"nothing-checked"} if overall == "interrupted" and not any(c.ran for c in cells) else set())
    if agg["verdict"] is not None and agg["verdict"] not in agree:
        out.append(f"results.json verdict is {agg['verdict']!r} but its cells make it {overall!r}")
    for c in cells:
        if c.result is not None and c.result["verdict"] != c.verdict:
            out.append(f"cell {c.id}: results.json says {c.verdict!r}, its result.json says "
                       f"{c.result['verdict']!r}")
        system = (c.result or {}).get("config", {}).get("system")
        if c.get("system") and system and system != c.get("system"):
            out.append(f"cell {c.id}: results.json says system {c.get('system')!r}, its result.json "
                       f"says {system!r}")
    return out


def counts_of(results: Results) -> Dict[str, int]:
    """cells/passed/failed/errored/skipped/xfailed/xpassed counted from the cells themselves."""
    def n(verdict):
        return sum(1 for c in results.cells if c.verdict == verdict)
    return {"cells": len(results.cells), "passed": n("pass"), "failed": n("fail"), "errored": n("error"),
            "skipped": n("skipped"), "xfailed": n("xfail"), "xpassed": n("xpass")}
