"""The three questions a reviewer asks of a shardcheck run, answered once for
the top of the HTML report and the top lines of the Markdown summary.

1. Did anything fail, and where first? The first cell that fails the run
   (load.FAILED: fail, error or xpass) in the report's order (run order),
   where it first broke (summary.first_failure: step, tensor, check), and
   how many other cells failed, errored or passed unexpectedly. An expected
   failure (xfail) is not a failure here. A run in which nothing failed
   but no cell ran its checks (all skipped) says that nothing was checked,
   never that it passed; an interrupted run says how many cells finished.
2. What changed against the baseline? compare.baseline_changes: new
   failures, fixed cells, shifted loss curves, performance changes. None
   without a baseline.
3. What was not covered? Skipped cells with their reasons, expected
   failures (xfail: a known bug keeps them from judging the code) with
   theirs, the cells an interrupted run did not finish, the checks that
   said "n/a" (by name, with the number of cells), and the tensor groups
   that no check covers (summary.group_coverage).
"""
import dataclasses
from typing import Dict, List, Optional, Tuple

import summary
from compare import BaselineChanges
from load import FAILED, Cell, Results


@dataclasses.dataclass
class FirstFailure:
    cell: Cell
    where: dict             # summary.first_failure: check, step, tensor, detail (each may be None)
    others: int             # other cells that fail the run (failing, errored, xpass)


@dataclasses.dataclass
class NotCovered:
    skipped: List[Tuple[Cell, str]]         # skipped cells and their reasons, in run order
    expected: List[Tuple[Cell, summary.Expectation]]  # xfail cells and why, in run order
    not_run: int                            # cells an interrupted run did not finish
    interrupted_by: Optional[str]           # the signal that stopped it ("SIGINT"), or None
    na_checks: Dict[str, int]               # check name -> cells where it said "n/a"
    na_cells: int                           # cells with at least one "n/a" check
    unchecked: Dict[str, int]               # group -> cells where no check covers it
    unchecked_cells: List[Tuple[Cell, str]]  # cells with such a group, with the first one's reason

    @property
    def na_total(self) -> int:
        """"n/a" verdicts over all cells."""
        return sum(self.na_checks.values())

    @property
    def nothing(self) -> bool:
        """Every cell ran, none failed as expected, no check said "n/a" and every group was checked."""
        return not (self.skipped or self.expected or self.not_run or self.na_checks or self.unchecked)

    def expected_reasons(self) -> Dict[str, int]:
        """Reason -> the xfail cells that give it, most first."""
        counts: Dict[str, int] = {}
        for _, exp in self.expected:
            counts[exp.reason] = counts.get(exp.reason, 0) + 1
        return most_first(counts)


@dataclasses.dataclass
class Answers:
    cells: int                              # cells listed (those that finished)
    passed: int
    skipped: int
    xfailed: int                            # expected failures: they do not fail the run
    ran: int                                # cells whose checks ran (none: nothing was checked)
    not_run: int                            # cells an interrupted run did not finish
    interrupted_by: Optional[str]           # the signal that stopped the run, or None
    first_failure: Optional[FirstFailure]   # None when no cell fails the run
    baseline: Optional[BaselineChanges]     # None without a baseline
    not_covered: NotCovered


def first_failure(results: Results) -> Optional[FirstFailure]:
    """The first cell that fails the run (fail, error, xpass) in run order, or None."""
    bad = [c for c in results.cells if c.verdict in FAILED]
    if not bad:
        return None
    return FirstFailure(bad[0], summary.first_failure(bad[0]) or {}, len(bad) - 1)


def ran(cell: Cell) -> bool:
    """Whether the cell's checks ran (load.Cell.ran)."""
    return cell.ran


def not_covered(results: Results) -> NotCovered:
    """What the run left unjudged (see the module docstring)."""
    skipped = [(c, summary.skip_reason(c)) for c in results.cells if c.verdict == "skipped"]
    expected = [(c, summary.expectation(c)) for c in results.cells if c.verdict == "xfail"]
    na_checks: Dict[str, int] = {}
    na_cells = 0
    unchecked: Dict[str, int] = {}
    unchecked_cells = []
    for cell in (c for c in results.cells if ran(c)):
        names = sorted({c["name"] for c in (cell.result or {}).get("checks", []) if c["verdict"] == "n/a"})
        na_cells += bool(names)
        for name in names:
            na_checks[name] = na_checks.get(name, 0) + 1
        groups = [g for g, checks in summary.group_coverage(cell.result).items() if not checks]
        for group in groups:
            unchecked[group] = unchecked.get(group, 0) + 1
        if groups:
            unchecked_cells.append((cell, summary.unchecked_reason(cell.result, groups[0])))
    return NotCovered(skipped, expected, results.not_run, results.interrupted_by, most_first(na_checks), na_cells,
                      most_first(unchecked), unchecked_cells)


def most_first(counts: Dict[str, int]) -> Dict[str, int]:
    """`counts` ordered by count, largest first (ties keep their order)."""
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def answer(results: Results, baseline: Optional[BaselineChanges] = None) -> Answers:
    """The three answers for `results` (baseline: compare.baseline_changes, or None)."""
    def n(verdict):
        return sum(1 for c in results.cells if c.verdict == verdict)
    return Answers(len(results.cells), n("pass"), n("skipped"), n("xfail"),
                   sum(1 for c in results.cells if c.ran), results.not_run, results.interrupted_by,
                   first_failure(results), baseline, not_covered(results))
