"""Comparison of a results directory with a baseline one (--baseline).

Cells are matched by id. A cell is flagged when its verdict changed, when
it exists on one side only, or when the largest max-abs difference of any
(run, group) series grew (strictly; a group absent from the baseline cell
is reported as new, not as grown).
"""
import dataclasses
from typing import List, Optional, Tuple

from load import Cell, Results
from summary import overall_max_abs


@dataclasses.dataclass
class CellComparison:
    id: str
    current: Optional[Cell]
    baseline: Optional[Cell]
    flags: List[str]                                        # short, for people
    series: List[Tuple[str, Optional[float], Optional[float]]]  # (run/group, baseline, current)
    grew: List[str]                                         # run/group keys whose max grew

    @property
    def status(self) -> str:
        """regressed / fixed / changed / missing / new / grew / same."""
        if self.current is None:
            return "missing"
        if self.baseline is None:
            return "new"
        b, c = self.baseline.verdict, self.current.verdict
        if b != c:
            return "regressed" if b == "pass" else ("fixed" if c == "pass" else "changed")
        return "grew" if self.grew else "same"


def compare(current: Results, baseline: Results) -> List[CellComparison]:
    """One comparison per cell id: current cells in run order, then the
    baseline's cells that the current results lack."""
    out = []
    for cell in current.cells:
        out.append(compare_cell(cell.id, cell, baseline.cell(cell.id)))
    ids = {c.id for c in current.cells}
    for cell in baseline.cells:
        if cell.id not in ids:
            out.append(compare_cell(cell.id, None, cell))
    return out


def compare_cell(cell_id: str, current: Optional[Cell], baseline: Optional[Cell]) -> CellComparison:
    if current is None:
        return CellComparison(cell_id, None, baseline, ["missing in these results (only in the baseline)"], [], [])
    if baseline is None:
        return CellComparison(cell_id, current, None, ["new: not in the baseline"], [], [])
    flags = []
    if baseline.verdict != current.verdict:
        flags.append(f"verdict changed: {baseline.verdict} → {current.verdict}")
    before = overall_max_abs(baseline.result)
    after = overall_max_abs(current.result)
    series, grew = [], []
    for key in list(after) + [k for k in before if k not in after]:
        b, a = before.get(key), after.get(key)
        series.append((key, b, a))
        if a is not None and b is not None and a > b:
            grew.append(key)
    if grew:
        flags.append("max |Δ| grew: " + ", ".join(
            f"{k} {before[k]:.3g} → {after[k]:.3g}" for k in grew))
    only_after = [k for k in after if k not in before]
    if only_after and baseline.result is not None:
        flags.append("series not in the baseline: " + ", ".join(only_after))
    return CellComparison(cell_id, current, baseline, flags, series, grew)
