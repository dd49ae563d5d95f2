"""The matrix view: rows optimizer × sharding type, columns DP size / resume plan.

Rows follow results.json's "optimizer_order" (the optimizer registry's
order, written by the runner); optimizer labels not in it (custom setups),
or every label when an older results.json lacks it, follow in order of
appearance. No optimizer is named here.

Cells that share a row and a column (they differ in dtype, model, save step,
scenario...) share one slot; each gets a short "chip" label made of the
dimensions that vary inside its slot (empty when it is alone there), and
the slot takes the worst verdict of its cells (a failure is never hidden
behind a skipped cell).
"""
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from load import Cell

# Preferred order of the sharding types; types not listed follow in order of appearance.
SHARDING_ORDER = ("dp_reshardable", "fully_reshardable", "dp_zero_gather_scatter",
                  "fully_sharded_model_space")
# Dimensions that tell apart cells of one slot, with how a chip shows them.
CHIP_DIMS = (("dtype", "{}"), ("model", "{}"), ("save_at", "save@{}"), ("steps", "{} steps"),
             ("scenario", "{}"))
SEVERITY = {"pass": 0, "skipped": 1, "error": 2, "fail": 3}
SYMBOL = {"pass": "✅", "fail": "❌", "error": "⚠️", "skipped": "⏭️"}

Row = Tuple[str, str]
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
        return f"{row[0]} · {row[1]}"

    def slot(self, row: Row, col: Column) -> List[Cell]:
        return self.slots.get((row, col), [])


def worst(cells: List[Cell]) -> str:
    """The most severe verdict of `cells` (fail > error > skipped > pass); "" for none."""
    if not cells:
        return ""
    return max((c.verdict for c in cells), key=lambda v: SEVERITY.get(v, 3))


def _ordered(values, preferred) -> list:
    """`values` with those in `preferred` first, in its order, then the rest as they come."""
    preferred = list(dict.fromkeys(preferred))
    known = [v for v in preferred if v in values]
    return known + [v for v in values if v not in preferred]


def build(cells: List[Cell], optimizer_order: Optional[Sequence[str]] = None) -> Matrix:
    """The matrix of `cells` (run order kept inside each slot). Rows follow
    `optimizer_order` (results.json's "optimizer_order"); other optimizer
    labels, or all of them without it, follow in order of appearance."""
    optimizers = _ordered(list(dict.fromkeys(c.get("optimizer") for c in cells)), optimizer_order or ())
    shardings = _ordered(list(dict.fromkeys(c.get("sharding_type") for c in cells)), SHARDING_ORDER)
    present = {(c.get("optimizer"), c.get("sharding_type")) for c in cells}
    rows = [(o, s) for o in optimizers for s in shardings if (o, s) in present]
    columns = sorted({(c.get("dp"), c.get("resume_dp")) for c in cells},
                     key=lambda col: (col[0], col[1] is not None, col[1] or 0))
    slots: Dict[Tuple[Row, Column], List[Cell]] = {}
    for c in cells:
        row = (c.get("optimizer"), c.get("sharding_type"))
        slots.setdefault((row, (c.get("dp"), c.get("resume_dp"))), []).append(c)
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
