"""The checkpoint engine's cost at Megatron scale for the performance
section: the JSON file of bench/scale.py (make_report.py's --scale FILE, by
default RESULTS_DIR/scale/scale.json when it exists).

`shardcheck dry` runs the checkpoint engine's layout, save plan, metadata
and resharded-load plan for a real-scale param list with no tensor data.
bench/scale.py runs it over sweeps (by dp, by tensor count), fits per
sharding type and quantity the slope of log(quantity) against log(x) by
least squares, and adds a headline of full-size runs:

  {"command", "machine", "quantities": [...], "limit": 1.1,
   "sweeps": {name: {"x": name, "points": [{"x": number, "result": DRY}],
                     "slopes": {type: {quantity: slope or null}}}},
   "headline": [DRY, ...], "seconds"}

DRY is one `shardcheck dry --json` object: the model and its sizes, and per
sharding type ("types") the times, bytes, files and chunks of a save, the
resharded load's plan when one was planned, and "peak_mb" (bench/scale.py
adds it: the process's peak memory above its start). A slope above "limit"
(a cost growing faster than linearly) is flagged; a null slope (a time too
small to fit, or a quantity that is not positive) is shown as "–".
Anything malformed raises load.InputError naming the file and the key.
"""
import dataclasses
import math
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from load import Checker, read_json

DEFAULT_FILE = os.path.join("scale", "scale.json")
NO_SLOPE = "–"
SWEEP_NAME = re.compile(r"[A-Za-z0-9_-]+")
# The fields of a `shardcheck dry --json` object and of each of its "types" entries.
DRY_FIELDS = (("model", "str"), ("tensors", "int"), ("elements", "num"), ("model_dtype", "str"),
              ("dp", "int"), ("reshard_to", "int"), ("bucket_size", "num"), ("buckets", "int"),
              ("start_rss_bytes", "num"), ("peak_rss_bytes", "num"))
TYPE_FIELDS = (("type", "str"), ("layout_s", "num"), ("plan_s", "num"), ("metadata_s", "num"),
               ("metadata_bytes", "num"), ("record_bytes_max", "num"), ("record_bytes_total", "num"),
               ("header_bytes_max", "num"), ("header_bytes_total", "num"), ("files", "int"),
               ("chunks", "int"))
# Present only when a resharded load was planned (reshard_*), or added by bench/scale.py (peak_mb).
OPTIONAL_TYPE_FIELDS = (("reshard_plan_s", "num"), ("reshard_max_rank_s", "num"),
                        ("reshard_pieces", "int"), ("reshard_chunk_reads", "int"), ("peak_mb", "num"))


@dataclasses.dataclass
class Point:
    """One size of a sweep: its x and the dry run there."""
    x: float
    result: Dict[str, Any]

    def value(self, sharding: str, quantities: Sequence[str]) -> Optional[float]:
        """The sum of `quantities` for one sharding type; None when one is absent."""
        for t in self.result["types"]:
            if t["type"] == sharding and all(q in t for q in quantities):
                return sum(t[q] for q in quantities)
        return None


@dataclasses.dataclass
class Sweep:
    name: str
    x: str                                          # what varies: "dp", "tensors"
    points: List[Point]
    slopes: Dict[str, Dict[str, Optional[float]]]   # type -> quantity -> fitted slope

    @property
    def xs(self) -> List[float]:
        return [p.x for p in self.points]

    @property
    def models(self) -> List[str]:
        return list(dict.fromkeys(p.result["model"] for p in self.points))

    @property
    def types(self) -> List[str]:
        """The sharding types, those with slopes first, in the file's order."""
        found = [t["type"] for p in self.points for t in p.result["types"]]
        return list(dict.fromkeys(list(self.slopes) + found))


@dataclasses.dataclass
class Scale:
    path: str
    command: str
    machine: Dict[str, Any]
    quantities: List[str]
    limit: float
    sweeps: List[Sweep]
    headline: List[Dict[str, Any]]
    seconds: Optional[float]


def default_scale_path(results_dir: str) -> Optional[str]:
    """RESULTS_DIR/scale/scale.json when it exists, else None."""
    path = os.path.join(results_dir, DEFAULT_FILE)
    return path if os.path.isfile(path) else None


def load_scale(path: str) -> Scale:
    """Reads and validates bench/scale.py's file; InputError names the file and the key."""
    doc = read_json(path)
    ck = Checker(path)
    ck.obj(doc, "(top level)")
    quantities = ck.field(doc, "quantities", "", "list")
    for i, q in enumerate(quantities):
        if not isinstance(q, str):
            ck.fail(f"quantities[{i}]", "expected a string (a dry --json field name)")
    sweeps = [_sweep(ck, name, s) for name, s in ck.field(doc, "sweeps", "", "obj").items()]
    headline = [_dry(ck, d, f"headline[{i}]") for i, d in enumerate(ck.field(doc, "headline", "", "list"))]
    return Scale(path, ck.field(doc, "command", "", "str"), ck.field(doc, "machine", "", "obj", required=False) or {},
                 quantities, ck.field(doc, "limit", "", "num"), sweeps, headline,
                 ck.field(doc, "seconds", "", "num", required=False))


def _sweep(ck: Checker, name: str, doc: Any) -> Sweep:
    where = f"sweeps.{name}"
    if not SWEEP_NAME.fullmatch(name):
        ck.fail(where, "a sweep's name must be letters, digits, _ or -")
    ck.obj(doc, where)
    points = []
    for i, p in enumerate(ck.field(doc, "points", where, "list")):
        at = f"{where}.points[{i}]"
        ck.obj(p, at)
        x = ck.field(p, "x", at, "num")
        if x <= 0:
            ck.fail(f"{at}.x", f"expected a positive number, got {x}")
        points.append(Point(x, _dry(ck, ck.field(p, "result", at, "obj"), f"{at}.result")))
    return Sweep(name, ck.field(doc, "x", where, "str"), points,
                 _slopes(ck, ck.field(doc, "slopes", where, "obj"), f"{where}.slopes"))


def _slopes(ck: Checker, doc: dict, where: str) -> Dict[str, Dict[str, Optional[float]]]:
    out = {}
    for sharding, by_quantity in doc.items():
        ck.obj(by_quantity, f"{where}.{sharding}")
        out[sharding] = {q: ck.field(by_quantity, q, f"{where}.{sharding}", "num", nullable=True)
                         for q in by_quantity}
    return out


def _dry(ck: Checker, doc: Any, where: str) -> Dict[str, Any]:
    """One `shardcheck dry --json` object, checked."""
    ck.obj(doc, where)
    for name, kind in DRY_FIELDS:
        ck.field(doc, name, where, kind)
    for i, t in enumerate(ck.field(doc, "types", where, "list")):
        at = f"{where}.types[{i}]"
        ck.obj(t, at)
        for name, kind in TYPE_FIELDS:
            ck.field(t, name, at, kind)
        for name, kind in OPTIONAL_TYPE_FIELDS:
            ck.field(t, name, at, kind, required=False)
    return doc


def slope_text(v: Optional[float]) -> str:
    """"0.94", or "–" for no slope."""
    return NO_SLOPE if v is None else f"{v:.2f}"


def fit_slope(xs: Sequence[float], ys: Sequence[float]) -> Optional[float]:
    """The least-squares slope of log(y) on log(x), as bench/scale.py fits it;
    None with fewer than two sizes or a y that is not positive."""
    if len(set(xs)) < 2 or any(y <= 0 for y in ys):
        return None
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


@dataclasses.dataclass
class SlopeCell:
    quantity: str
    slope: Optional[float]
    over: bool                                      # above the file's limit


@dataclasses.dataclass
class SlopeRow:
    type: str
    cells: List[SlopeCell]


@dataclasses.dataclass
class SlopeTable:
    """One sweep's slopes: a row per sharding type, a column per quantity."""
    sweep: Sweep
    quantities: List[str]
    rows: List[SlopeRow]

    @property
    def over(self) -> List[Tuple[str, str]]:
        """(type, quantity) of each slope above the limit."""
        return [(r.type, c.quantity) for r in self.rows for c in r.cells if c.over]


def slope_tables(scale: Scale) -> List[SlopeTable]:
    return [SlopeTable(s, scale.quantities, slope_rows(s, scale.quantities, scale.limit)) for s in scale.sweeps]


def slope_rows(sweep: Sweep, quantities: Sequence[str], limit: float) -> List[SlopeRow]:
    rows = []
    for sharding in sweep.types:
        fitted = sweep.slopes.get(sharding, {})
        rows.append(SlopeRow(sharding, [SlopeCell(q, fitted.get(q), (fitted.get(q) or 0.0) > limit)
                                        for q in quantities]))
    return rows


@dataclasses.dataclass
class HeadlineRow:
    """One sharding type of one headline dry run."""
    model: str
    tensors: int
    dp: int
    reshard_to: int                                 # 0: no resharded load planned
    type: str
    metadata_bytes: float
    files: int
    chunks: int
    plan_s: float
    metadata_s: float
    reshard_s: Optional[float]
    peak_mb: float

    @property
    def dp_text(self) -> str:
        """"4096 → 3072", or the dp alone without a resharded load."""
        return f"{self.dp} → {self.reshard_to}" if self.reshard_to else str(self.dp)


def headline_rows(scale: Scale) -> List[HeadlineRow]:
    return [headline_row(d, t) for d in scale.headline for t in d["types"]]


def headline_row(dry: Dict[str, Any], t: Dict[str, Any]) -> HeadlineRow:
    peak = t["peak_mb"] if "peak_mb" in t else (dry["peak_rss_bytes"] - dry["start_rss_bytes"]) / 1e6
    return HeadlineRow(dry["model"], dry["tensors"], dry["dp"], dry["reshard_to"], t["type"],
                       t["metadata_bytes"], t["files"], t["chunks"], t["plan_s"], t["metadata_s"],
                       t.get("reshard_plan_s"), peak)


def series(sweep: Sweep, quantities: Sequence[str]) -> List[Tuple[str, List[float], List[float]]]:
    """(type, xs, ys) of the sum of `quantities` per sharding type, the
    points where it is positive (a log axis shows nothing else); types
    without such a point are left out."""
    out = []
    for sharding in sweep.types:
        pts = [(p.x, p.value(sharding, quantities)) for p in sweep.points]
        pts = [(x, y) for x, y in pts if y is not None and y > 0]
        if pts:
            out.append((sharding, [x for x, _ in pts], [y for _, y in pts]))
    return out


def series_slope(sweep: Sweep, sharding: str, quantities: Sequence[str], xs, ys) -> Optional[float]:
    """The slope a plotted line shows: the file's for one quantity, fitted
    over the plotted points for a sum of several."""
    if len(quantities) == 1:
        return sweep.slopes.get(sharding, {}).get(quantities[0])
    return fit_slope(xs, ys)
