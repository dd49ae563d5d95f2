"""Comparison of a results directory with a baseline one (--baseline).

Cells are matched by id. A cell is flagged when its verdict changed, when
it exists on one side only, when the largest max-abs difference of any
(run, group) series grew (strictly; a group absent from the baseline cell
is reported as new, not as grown), or when a loss or grad-norm curve
shifted.

Loss shift: for each run that has a loss on both sides, over the steps
both sides have a loss at, max |current − baseline| / max(|baseline|,
LOSS_SCALE_FLOOR) — the largest loss change relative to the baseline
curve's scale. It is flagged above LOSS_SHIFT_RTOL, 2%: above the loss
checks' tolerances against the reference (rtol 1e-3 fp32, 1e-2 bf16), so
a flag means that training moved, not rounding.

Grad-norm shift: the same figure on the runs' grad norms (the global norm
before clipping, which Megatron users watch beside the loss), flagged
above GRAD_NORM_SHIFT_RTOL, 5%: the default grad-norm checks allow 1% of
drift against the reference, and a norm moves more than the loss when
training changes.

Performance: the summed wall time of the cells that have one on both sides,
and the real time of each Google Benchmark present in both (same file and
name), are flagged when they change by more than PERF_CHANGE_TOL (±25%):
one run per side gives no noise estimate, so only large changes count.

baseline_changes() gathers what the top of the report says: new failures,
fixed cells, shifted loss and grad-norm curves and performance changes.
"""
import dataclasses
from typing import List, Optional, Sequence, Tuple

from bench import Benchmark
from load import FAILED, Cell, Results
from summary import overall_max_abs

LOSS_SHIFT_RTOL = 0.02
GRAD_NORM_SHIFT_RTOL = 0.05
LOSS_SCALE_FLOOR = 1e-12
PERF_CHANGE_TOL = 0.25


@dataclasses.dataclass
class LossShift:
    """How far one run's loss (or grad-norm) curve moved from the baseline's."""
    run: str
    step: int               # where |current − baseline| is largest
    max_delta: float        # that largest |current − baseline|
    scale: float            # max |baseline value| over the compared steps (at least LOSS_SCALE_FLOOR)
    series: str = "loss"    # "loss" or "grad_norm"

    @property
    def rel(self) -> float:
        return self.max_delta / self.scale


@dataclasses.dataclass
class CellComparison:
    id: str
    current: Optional[Cell]
    baseline: Optional[Cell]
    flags: List[str]                                        # short, for people
    series: List[Tuple[str, Optional[float], Optional[float]]]  # (run/group, baseline, current)
    grew: List[str]                                         # run/group keys whose max grew
    loss_shifts: List[LossShift] = dataclasses.field(default_factory=list)  # beyond LOSS_SHIFT_RTOL
    norm_shifts: List[LossShift] = dataclasses.field(default_factory=list)  # beyond GRAD_NORM_SHIFT_RTOL

    @property
    def status(self) -> str:
        """regressed / fixed / changed / missing / new / grew / loss shifted /
        grad norm shifted / same."""
        if self.current is None:
            return "missing"
        if self.baseline is None:
            return "new"
        b, c = self.baseline.verdict, self.current.verdict
        if b != c:
            return "regressed" if b == "pass" else ("fixed" if c == "pass" else "changed")
        if self.grew:
            return "grew"
        if self.loss_shifts:
            return "loss shifted"
        return "grad norm shifted" if self.norm_shifts else "same"


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
    shifts = shifted_losses(current.result, baseline.result)
    if shifts:
        flags.append(f"loss shifted beyond {LOSS_SHIFT_RTOL:.0%}: " + ", ".join(
            f"{s.run} {s.rel:.1%} at step {s.step}" for s in shifts))
    norm_shifts = shifted_series(current.result, baseline.result, "grad_norm", GRAD_NORM_SHIFT_RTOL)
    if norm_shifts:
        flags.append(f"grad norm shifted beyond {GRAD_NORM_SHIFT_RTOL:.0%}: " + ", ".join(
            f"{s.run} {s.rel:.1%} at step {s.step}" for s in norm_shifts))
    return CellComparison(cell_id, current, baseline, flags, series, grew, shifts, norm_shifts)


def series_shift(run: str, current: dict, baseline: dict, key: str = "loss") -> Optional[LossShift]:
    """The shift of one run's `key` series, "loss" or "grad_norm" (see the
    module docstring), or None when the two sides share no step with a value."""
    before = {s: v for s, v in zip(baseline["steps"], baseline.get(key) or []) if v is not None}
    pairs = [(s, v, before[s]) for s, v in zip(current["steps"], current.get(key) or [])
             if v is not None and s in before]
    if not pairs:
        return None
    step, now, then = max(pairs, key=lambda p: abs(p[1] - p[2]))
    scale = max(max(abs(p[2]) for p in pairs), LOSS_SCALE_FLOOR)
    return LossShift(run, step, abs(now - then), scale, key)


def loss_shift(run: str, current: dict, baseline: dict) -> Optional[LossShift]:
    """The shift of one run's loss, or None when the two sides share no step with a loss."""
    return series_shift(run, current, baseline, "loss")


def shifted_series(current: Optional[dict], baseline: Optional[dict], key: str,
                   rtol: float) -> List[LossShift]:
    """The runs (matched by name) whose `key` series shifted by more than rtol."""
    if not current or not baseline:
        return []
    out = []
    for name, run in current["runs"].items():
        other = baseline["runs"].get(name)
        shift = series_shift(name, run, other, key) if other else None
        if shift is not None and shift.rel > rtol:
            out.append(shift)
    return out


def shifted_losses(current: Optional[dict], baseline: Optional[dict]) -> List[LossShift]:
    """The runs (matched by name) whose loss shifted by more than LOSS_SHIFT_RTOL."""
    return shifted_series(current, baseline, "loss", LOSS_SHIFT_RTOL)


@dataclasses.dataclass
class PerfChange:
    """A time on both sides: the cells' summed wall time (s) or a benchmark's real time (ns)."""
    name: str
    before: float
    after: float

    @property
    def rel(self) -> float:
        """after / before − 1."""
        return self.after / self.before - 1.0

    @property
    def beyond(self) -> bool:
        return abs(self.rel) > PERF_CHANGE_TOL


def cell_wall(cell: Cell) -> Optional[float]:
    """The cell's wall time: results.json's, else result.json's."""
    wall = cell.get("wall_s")
    return wall if wall is not None else (cell.result or {}).get("wall_s")


def wall_change(comparisons: List[CellComparison]) -> Optional[PerfChange]:
    """The summed wall time of the cells with a wall time on both sides, or None for none."""
    pairs = [(cell_wall(c.baseline), cell_wall(c.current)) for c in comparisons if c.current and c.baseline]
    pairs = [(b, a) for b, a in pairs if b is not None and a is not None]
    before = sum(b for b, _ in pairs)
    if not pairs or before <= 0:
        return None
    return PerfChange(f"wall time of {len(pairs)} cells", before, sum(a for _, a in pairs))


def bench_changes(current: Sequence[Benchmark], baseline: Sequence[Benchmark]) -> List[PerfChange]:
    """The benchmarks (same file and name on both sides) whose real time
    changed by more than PERF_CHANGE_TOL."""
    before = {(b.file, b.name): b.real_ns for b in baseline if b.real_ns}
    out = []
    for b in current:
        then = before.get((b.file, b.name))
        if then and b.real_ns:
            change = PerfChange(b.name, then, b.real_ns)
            if change.beyond:
                out.append(change)
    return out


@dataclasses.dataclass
class BaselineChanges:
    """What changed against the baseline, as the top of the report says it."""
    new_failures: List[CellComparison]   # failing or errored now; not in the baseline (absent or another verdict)
    fixed: List[CellComparison]          # passing now; failing or errored in the baseline
    loss_shifted: List[CellComparison]   # a loss curve moved beyond LOSS_SHIFT_RTOL
    wall: Optional[PerfChange]           # summed wall time of the cells on both sides
    bench: List[PerfChange]              # benchmarks beyond PERF_CHANGE_TOL
    other_flagged: List[CellComparison]  # flagged for anything else (max |Δ| grew, a cell on one side only)
    norm_shifted: List[CellComparison] = dataclasses.field(default_factory=list)  # grad norm beyond GRAD_NORM_SHIFT_RTOL


def baseline_changes(comparisons: List[CellComparison], current_bench: Sequence[Benchmark] = (),
                     baseline_bench: Sequence[Benchmark] = ()) -> BaselineChanges:
    """The changes of compare()'s comparisons, and of the benchmarks when both sides have them."""
    new = [c for c in comparisons if c.current and c.current.verdict in FAILED
           and not (c.baseline and c.baseline.verdict in FAILED)]
    fixed = [c for c in comparisons if c.current and c.current.verdict == "pass"
             and c.baseline and c.baseline.verdict in FAILED]
    shifted = [c for c in comparisons if c.loss_shifts]
    norm_shifted = [c for c in comparisons if c.norm_shifts]
    named = {id(c) for c in new + fixed + shifted + norm_shifted}
    return BaselineChanges(new, fixed, shifted, wall_change(comparisons),
                           bench_changes(current_bench, baseline_bench),
                           [c for c in comparisons if c.flags and id(c) not in named], norm_shifted)
