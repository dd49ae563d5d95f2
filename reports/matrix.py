"""The matrix view: rows [system ·] optimizer · sharding type, columns DP size / resume plan.

Rows of shardcheck's own cells come first, labelled "optimizer · sharding
type" as they always were; an external system's cells (Cell.external, e.g.
"torch-fsdp2") follow, system by system in order of appearance, labelled
"system · optimizer · sharding type". Within a system, rows follow
results.json's "optimizer_order" (the optimizer registry's order, written by
the runner); optimizer labels not in it (custom setups), or every label
when an older results.json lacks it, follow in order of appearance. No
optimizer is named here.

Cells that share a row and a column (they differ in dtype, model, save step,
scenario...) share one slot; each gets a short "chip" label made of the
dimensions that vary inside its slot (empty when it is alone there), and
the slot takes the worst verdict of its cells (SEVERITY: a failure is never
hidden behind a skipped cell, nor an xpass behind an expected failure).
"""
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from load import DEFAULT_SYSTEM, Cell

# Preferred order of the sharding types; types not listed follow in order of appearance.
SHARDING_ORDER = ("dp_reshardable", "fully_reshardable", "dp_zero_gather_scatter",
                  "fully_sharded_model_space")
# Dimensions that tell apart cells of one slot, with how a chip shows them.
CHIP_DIMS = (("dtype", "{}"), ("model", "{}"), ("save_at", "save@{}"), ("steps", "{} steps"),
             ("scenario", "{}"))
# Worst first: fail > xpass > error > xfail > skipped > pass. An xpass fails the run
# (a fixed upstream bug must show) but, unlike a fail, nothing in the code under test broke;
# an xfail is a known bug, above skipped as its cell did run and did break.
SEVERITY = {"pass": 0, "skipped": 1, "xfail": 2, "error": 3, "xpass": 4, "fail": 5}
SYMBOL = {"pass": "✅", "fail": "❌", "error": "⚠️", "skipped": "⏭️", "xfail": "🟡", "xpass": "❗"}
# What the legend says of each verdict.
VERDICT_LABEL = {"xfail": "xfail (expected failure)", "xpass": "xpass (expected to fail, passed)"}

Row = Tuple[str, str, str]          # (system, optimizer, sharding type)
Column = Tuple[int, object]


@dataclasses.dataclass
class Matrix:
    rows: List[Row]
    columns: List[Column]
    slots: Dict[Tuple[Row, Column], List[Cell]]
    chips: Dict[str, str]           # cell id -> chip label ("" when alone in its slot)

    def column_label(self, col: Column) -> str:
        dp, rdp = col
        return f"dp{dp}" if rdp is None else f"dp{dp}→dp{rdp}"

    def row_label(self, row: Row) -> str:
        """"optimizer · sharding type"; "system · optimizer · sharding type" for an external system."""
        system, optimizer, sharding = row
        head = "" if system == DEFAULT_SYSTEM else f"{system} · "
        return f"{head}{optimizer} · {sharding}"

    @property
    def head_label(self) -> str:
        """The rows' heading: names the system when some row is an external system's."""
        external = any(row[0] != DEFAULT_SYSTEM for row in self.rows)
        return ("system · " if external else "") + "optimizer · sharding type"

    def slot(self, row: Row, col: Column) -> List[Cell]:
        return self.slots.get((row, col), [])


def worst(cells: List[Cell]) -> str:
    """The most severe verdict of `cells` (SEVERITY; an unknown one counts as a fail); "" for none."""
    if not cells:
        return ""
    return max((c.verdict for c in cells), key=lambda v: SEVERITY.get(v, SEVERITY["fail"]))


def row_of(cell: Cell) -> Row:
    """The matrix row of a cell."""
    return (cell.system, cell.get("optimizer"), cell.get("sharding_type"))


def _ordered(values, preferred) -> list:
    """`values` with those in `preferred` first, in its order, then the rest as they come."""
    preferred = list(dict.fromkeys(preferred))
    known = [v for v in preferred if v in values]
    return known + [v for v in values if v not in preferred]


def build(cells: List[Cell], optimizer_order: Optional[Sequence[str]] = None) -> Matrix:
    """The matrix of `cells` (run order kept inside each slot). Rows follow
    `optimizer_order` (results.json's "optimizer_order"); other optimizer
    labels, or all of them without it, follow in order of appearance."""
    systems = _ordered(list(dict.fromkeys(c.system for c in cells)), (DEFAULT_SYSTEM,))
    optimizers = _ordered(list(dict.fromkeys(c.get("optimizer") for c in cells)), optimizer_order or ())
    shardings = _ordered(list(dict.fromkeys(c.get("sharding_type") for c in cells)), SHARDING_ORDER)
    present = {row_of(c) for c in cells}
    rows = [(y, o, s) for y in systems for o in optimizers for s in shardings if (y, o, s) in present]
    columns = sorted({(c.get("dp"), c.get("resume_dp")) for c in cells},
                     key=lambda col: (col[0], col[1] is not None, col[1] or 0))
    slots: Dict[Tuple[Row, Column], List[Cell]] = {}
    for c in cells:
        slots.setdefault((row_of(c), (c.get("dp"), c.get("resume_dp"))), []).append(c)
    return Matrix(rows, columns, slots, _chips(slots))


def _chips(slots) -> Dict[str, str]:
    """A label per cell made of the dimensions that vary inside its slot."""
    chips = {}
    for members in slots.values():
        varying = [(dim, fmt) for dim, fmt in CHIP_DIMS if len({c.get(dim) for c in members}) > 1]
        used: Dict[str, int] = {}
        for c in members:
            label = " ".join(fmt.format(c.get(dim)) for dim, fmt in varying if c.get(dim) is not None)
            used[label] = used.get(label, 0) + 1
            if len(members) > 1 and (used[label] > 1 or not label):
                label = f"{label} #{used[label]}".strip()
            chips[c.id] = label
    return chips
