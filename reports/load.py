"""Loading and validating a results directory (docs/results-schema.md).

`load_results(dir)` reads DIR/results.json and every DIR/<cell>/result.json,
checks the types and shapes the report relies on, and returns a `Results`.
Anything unreadable or malformed raises `InputError`, which names the file
and the key (e.g. ``cells[3].verdict``); make_report.py turns it into a
one-line message and exit code 2.

Nothing here knows an optimizer's state keys: the per-tensor groups come
from each cell's own "groups" list, and every diff group is checked against
that list in both directions.
"""
import dataclasses
import json
import math
import os
from typing import Any, Dict, List, Optional

RESULTS_FORMAT = "shardcheck-results/1"
CELL_FORMAT = "shardcheck-cell-result/1"
VERDICTS = ("pass", "fail", "error", "skipped")
# The cell verdicts that fail a run (a skipped cell does not).
FAILED = ("fail", "error")
# A check that could not apply (e.g. a loss check on an oracle model) may say "n/a".
CHECK_VERDICTS = ("pass", "fail", "n/a")
# Per-step series of diff.<group>: max_rel is |a - b| / max(|b|, rel_floor) where result.json
# gives "rel_floor"; max_ulp is taken between same-sign values only, and "sign_changes"
# (optional, like "rel_floor": older results lack both) counts the opposite-sign pairs.
DIFF_SERIES = ("max_abs", "max_rel", "max_ulp", "mismatches", "sign_changes")
# Optional per-step series of a run, aligned with its "steps" (null where they do not apply,
# e.g. lr at an after-load step). "lr" is the main child optimizer's scheduled learning rate.
STEP_SERIES = ("loss", "grad_norm", "lr")


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
    _verdict(ck, agg, "")
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
    for name in ("cells", "passed", "failed", "errored"):
        if counts is not None:
            ck.field(counts, name, "counts", "int")

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
        for name in ("scenario", "dtype", "model"):
            ck.field(entry, name, where, "str", required=False)
        ck.field(entry, "wall_s", where, "num", required=False)
        verdict = _verdict(ck, entry, where)
        entry["first_failure"] = _first_failure(ck, entry, where)
        result_path = os.path.join(results_dir, cdir, "result.json")
        if verdict in ("error", "skipped") and not os.path.exists(result_path):
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
    is_error = verdict in ("error", "skipped")  # neither ran: no runs, checks or series
    ck.field(cell, "error", "", "str", required=False)
    ck.field(cell, "wall_s", "", "num", required=False)
    ck.field(cell, "rel_floor", "", "num", required=False)
    cell["scenario"] = ck.field(cell, "scenario", "", "obj", required=False) or {}
    cell["environment"] = ck.field(cell, "environment", "", "obj", required=False) or {}
    cell["first_failure"] = _first_failure(ck, cell, "")

    config = ck.field(cell, "config", "", "obj", required=not is_error) or {}
    cell["config"] = config
    schema = ck.field(cell, "schema", "", "obj", required=not is_error) or {}
    for kind, keys in schema.items():
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            ck.fail(f"schema.{kind}", f"expected a list of state keys, got {_kind(keys)}")
    cell["schema"] = schema
    groups = ck.field(cell, "groups", "", "list", required=not is_error) or []
    for i, g in enumerate(groups):
        if not isinstance(g, str):
            ck.fail(f"groups[{i}]", f"expected a string, got {_kind(g)}")
    if len(set(groups)) != len(groups):
        ck.fail("groups", "lists a group twice")
    cell["groups"] = groups

    runs = ck.field(cell, "runs", "", "obj", required=not is_error) or {}
    for name, run in runs.items():
        _check_run(ck, run, f"runs.{name}", groups)
    cell["runs"] = runs

    checks = ck.field(cell, "checks", "", "list", required=not is_error) or []
    for i, check in enumerate(checks):
        _check_check(ck, check, f"checks[{i}]")
    cell["checks"] = checks

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


def _check_run(ck: Checker, run, where: str, groups: List[str]):
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
    if diff is None:
        return
    for group, series in diff.items():
        key = f"{where}.diff.{group}"
        if group not in groups:
            ck.fail(key, f"is not one of the cell's groups {groups}")
        ck.obj(series, key)
        ck.series(ck.field(series, "max_abs", key, "list"), f"{key}.max_abs", n)
        for name in DIFF_SERIES[1:]:
            if series.get(name) is not None:
                ck.series(series[name], f"{key}.{name}", n)
    for group in groups:
        if group not in diff:
            ck.fail(f"{where}.diff", f"has no group {group!r} (listed in 'groups')")


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
        said = (counts["cells"], counts["passed"], counts["failed"], counts["errored"])
        seen = (len(cells), tally["pass"], tally["fail"], tally["error"])
        if said != seen:
            out.append("results.json counts (cells/passed/failed/errored) say %d/%d/%d/%d but the cells "
                       "list has %d/%d/%d/%d" % (said + seen))
    overall = "pass" if all(c.verdict in ("pass", "skipped") for c in cells) else "fail"
    if agg["verdict"] != overall:
        out.append(f"results.json verdict is {agg['verdict']!r} but its cells make it {overall!r}")
    for c in cells:
        if c.result is not None and c.result["verdict"] != c.verdict:
            out.append(f"cell {c.id}: results.json says {c.verdict!r}, its result.json says "
                       f"{c.result['verdict']!r}")
    return out


def counts_of(results: Results) -> Dict[str, int]:
    """cells/passed/failed/errored counted from the cells themselves."""
    return {"cells": len(results.cells),
            "passed": sum(1 for c in results.cells if c.verdict == "pass"),
            "failed": sum(1 for c in results.cells if c.verdict == "fail"),
            "errored": sum(1 for c in results.cells if c.verdict == "error"),
            "skipped": sum(1 for c in results.cells if c.verdict == "skipped")}
