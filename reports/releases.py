"""Releases compared: the cells of one external system pinned at several releases, side by side.

A cell's system is named "<base>[@<version>][+<variant>]", as scenarios
name it and harness/systems/system.cc (ParseSystem) reads it:
"megatron-core@0.18.2", "megatron-core@0.19.2+fused", "torch-fsdp2+fused",
"shardcheck". Its id is that name, ".", then the rest of the cell
("<optimizer>.dp_reshardable.dp2-to-dp3@4.fp32.oracle-mixed-small").

Contract of compare_releases(cells) -> List[ReleaseTable]:
- one table per system base that appears at two or more versions among
  `cells`, bases in order of first appearance; [] when there is none (a
  system named without a version, e.g. "torch-fsdp2" or "shardcheck", is
  never compared);
- a table's `versions` are every version of its base in the run, sorted as
  versions (version_key: 0.9.1 < 0.18.2 < 0.19.2, 1.0rc1 < 1.0 < 1.0.post1);
- a row pairs the cells whose id is the same once the "@<version>" is
  removed: the key is (variant, rest of the id after "<system>."), so a
  variant ("+fused") is never paired with the plain system. Rows come in
  order of first appearance (run order);
- `row.outcomes` has one entry per table version, None where that release
  has no such cell (shown "—");
- `row.change` (classify): ONE_RELEASE when one release alone has the cell;
  SAME when every present release has the same verdict and the same first
  failure check; else, comparing the oldest present release with the
  newest, FIXED when the oldest broke (fail, error, xfail) and the newest
  passed (pass, or xpass: every check passed, though it was declared
  expected to fail), REGRESSED for the reverse, CHANGED otherwise (another
  failing check, an error instead of a fail, a skipped cell...);
- `table.counts()` counts rows by change, in CHANGES order.

Nothing here reads result.json beyond what summary.first_failure,
summary.skip_reason and summary.expectation read.
"""
import dataclasses
import re
from typing import Dict, List, Optional, Sequence, Tuple

import summary
from load import Cell

SAME, FIXED, REGRESSED, CHANGED, ONE_RELEASE = "same", "fixed", "regressed", "changed", "one release"
# The order in which the counts line names them: what needs a look first.
CHANGES = (REGRESSED, FIXED, CHANGED, SAME, ONE_RELEASE)
# Verdicts where the system did what the checks ask (an xpass passed every check),
# and those where it broke (an xfail broke as declared). Skipped is neither.
PASSED = ("pass", "xpass")
BROKE = ("fail", "error", "xfail")
# How much of a first failure's detail (or a skip reason) a row shows.
DETAIL_CHARS = 100


@dataclasses.dataclass(frozen=True)
class SystemName:
    """A system name split: "megatron-core@0.19.2+fused" -> base, version, variant."""
    base: str
    version: Optional[str]      # None when the name pins none
    variant: Optional[str]      # None without one


def split_system(name: str) -> SystemName:
    """`name` split as ParseSystem does: the variant follows the first "+",
    the version the first "@" before it."""
    head, plus, variant = name.partition("+")
    base, at, version = head.partition("@")
    return SystemName(base, version if at else None, variant if plus else None)


_PRE = {"dev": 0, "a": 1, "alpha": 1, "b": 2, "beta": 2, "c": 3, "rc": 3, "pre": 3, "preview": 3}


def version_key(version: str) -> Tuple:
    """A sort key ordering versions as versions: the numbers compare as
    numbers (0.9.1 < 0.18.2 < 0.19.2 < 0.19.10), a pre-release tag (dev, a,
    b, rc) sorts before its release and "post" after it (1.0rc1 < 1.0 <
    1.0.post1 < 1.0.1). Other words sort as pre-release tags, by name; the
    string itself breaks ties ("0.18" and "0.18.0")."""
    parts = []
    for token in re.findall(r"\d+|[A-Za-z]+", version):
        if token.isdigit():
            parts.append((3, int(token), ""))
        elif token.lower() == "post":
            parts.append((2, 0, ""))
        else:
            parts.append((0, _PRE.get(token.lower(), 4), token.lower()))
    return tuple(parts) + ((1, 0, ""), version)


@dataclasses.dataclass
class Outcome:
    """One release's cell of a row: its verdict, its first failure's check
    and detail (cut at DETAIL_CHARS; a skipped cell's reason instead) and,
    for a cell declared expected to fail, the reason's docs/findings.md
    reference (or the start of its text)."""
    cell: Cell
    verdict: str
    check: Optional[str]
    detail: str
    expected: Optional[str]

    @property
    def text(self) -> str:
        """"check: detail", or whichever of the two there is; "" for a pass."""
        return ": ".join(p for p in (self.check, self.detail) if p)


def _short(text: Optional[str], limit: int = DETAIL_CHARS) -> str:
    s = " ".join((text or "").split())
    return s if len(s) <= limit else s[:limit - 1] + "…"


def outcome(cell: Cell) -> Outcome:
    """What one release's cell shows: see Outcome."""
    check, detail = None, ""
    if cell.verdict == "skipped":
        detail = _short(summary.skip_reason(cell))
    elif cell.verdict != "pass":
        ff = summary.first_failure(cell) or {}
        check, detail = ff.get("check"), _short(ff.get("detail"))
    exp = summary.expectation(cell)
    expected = (exp.ref or _short(exp.reason, 60)) if exp else None
    return Outcome(cell, cell.verdict, check, detail, expected)


def classify(outcomes: Sequence[Optional[Outcome]]) -> str:
    """The change of a row whose outcomes are ordered oldest release first
    (None where a release lacks the cell): see the module docstring."""
    present = [o for o in outcomes if o is not None]
    if len(present) < 2:
        return ONE_RELEASE
    if len({(o.verdict, o.check) for o in present}) == 1:
        return SAME
    old, new = present[0].verdict, present[-1].verdict
    if old in BROKE and new in PASSED:
        return FIXED
    if old in PASSED and new in BROKE:
        return REGRESSED
    return CHANGED


@dataclasses.dataclass
class Row:
    """The cells of one pairing key across the releases of a base."""
    variant: Optional[str]
    rest: str                           # the id after "<system>."
    first: Cell                         # the first cell of the row, for its configuration
    outcomes: List[Optional[Outcome]]   # one per table version
    change: str = ""

    def get(self, key: str):
        """The configuration the releases' cells share (optimizer, dtype...)."""
        return self.first.get(key)

    @property
    def plan(self) -> str:
        """"dp2", or "dp2→dp3" with a resume plan."""
        return summary.resume_label(self.first)

    def only_in(self, versions: Sequence[str]) -> Optional[str]:
        """The one version that has the cell, for a ONE_RELEASE row; else None."""
        present = [v for v, o in zip(versions, self.outcomes) if o is not None]
        return present[0] if len(present) == 1 else None


@dataclasses.dataclass
class ReleaseTable:
    """One system base at several versions: its rows, in run order."""
    base: str
    versions: List[str]                 # sorted with version_key
    rows: List[Row]

    def counts(self) -> Dict[str, int]:
        """Change -> rows, every change of CHANGES but ONE_RELEASE, which only when nonzero."""
        out = {c: sum(1 for r in self.rows if r.change == c) for c in CHANGES}
        if not out[ONE_RELEASE]:
            del out[ONE_RELEASE]
        return out

    def count_parts(self) -> List[Tuple[str, int, str]]:
        """(change, rows, text) for each count of counts(): "1 regressed",
        "2 in one release only"."""
        return [(c, n, f"{n} in one release only" if c == ONE_RELEASE else f"{n} {c}")
                for c, n in self.counts().items()]

    def counts_text(self) -> str:
        """"4 cells compared: 1 regressed, 0 fixed, 0 changed, 3 same" (and
        ", 2 in one release only" when there are such rows)."""
        noun = "cell" if len(self.rows) == 1 else "cells"
        return f"{len(self.rows)} {noun} compared: " + ", ".join(text for _, _, text in self.count_parts())

    def change_label(self, row: "Row") -> str:
        """The change column: the change, or "only in 0.19.2" for a row of one release."""
        return f"only in {row.only_in(self.versions)}" if row.change == ONE_RELEASE else row.change

    def plan(self, row: "Row") -> str:
        """The row's DP plan, "dp2→dp3", with " @4" (the save step) when the
        rows differ in it."""
        save = row.get("save_at")
        return row.plan + (f" @{save}" if save is not None and self.varies("save_at") else "")

    def varies(self, key: str) -> bool:
        """Whether the rows differ in `key` ("variant", "model", "save_at"):
        the table then shows it, so that no two rows look alike."""
        if key == "variant":
            return any(r.variant for r in self.rows)
        return len({r.get(key) for r in self.rows}) > 1


def pair_key(cell: Cell) -> Optional[Tuple[str, Optional[str], str]]:
    """(base, variant, rest of the id after "<system>.") for a cell whose
    system names a version; None for one that names none. An id that does
    not start with its system's name is taken whole as the rest."""
    name = split_system(cell.system)
    if not name.version:
        return None
    prefix = cell.system + "."
    rest = cell.id[len(prefix):] if cell.id.startswith(prefix) else cell.id
    return name.base, name.variant, rest


def compare_releases(cells: Sequence[Cell]) -> List[ReleaseTable]:
    """The release tables of `cells`: see the module docstring."""
    versions: Dict[str, List[str]] = {}
    rows: Dict[str, Dict[Tuple[Optional[str], str], Dict[str, Cell]]] = {}
    for c in cells:
        key = pair_key(c)
        if key is None:
            continue
        base, variant, rest = key
        version = split_system(c.system).version
        if version not in versions.setdefault(base, []):
            versions[base].append(version)
        rows.setdefault(base, {}).setdefault((variant, rest), {})[version] = c
    tables = []
    for base, seen in versions.items():
        if len(seen) < 2:
            continue
        ordered = sorted(seen, key=version_key)
        table_rows = []
        for (variant, rest), by_version in rows[base].items():
            outcomes = [outcome(by_version[v]) if v in by_version else None for v in ordered]
            first = next(iter(by_version.values()))
            table_rows.append(Row(variant, rest, first, outcomes, classify(outcomes)))
        tables.append(ReleaseTable(base, ordered, table_rows))
    return tables
