"""Google Benchmark JSON files for the performance section: DIR/*.json of
make_report.py's --bench DIR, by default RESULTS_DIR/bench/*.json.

Each file is what `--benchmark_format=json` (or `--benchmark_out`) writes: a
"context" object and a "benchmarks" list. Every key of a benchmark that is
not one of Google Benchmark's own fields and holds a number is a counter
(`bytes_per_second`, `items_per_second`, user counters).

Ratios: a benchmark whose run name ends in "/baseline" is the baseline of
every other benchmark of the same file whose run name starts with the same
prefix followed by "/" (the longest such prefix wins) and that has the same
aggregate name (mean, median, ... or none). The ratio is real_time(other) /
real_time(baseline), both converted to nanoseconds; the speed-up is its
inverse.
"""
import dataclasses
import glob
import os
from typing import Dict, List, Optional

from load import Checker, InputError, read_json

STANDARD_KEYS = {"name", "family_index", "per_family_instance_index", "run_name", "run_type",
                 "repetitions", "repetition_index", "threads", "iterations", "real_time", "cpu_time",
                 "time_unit", "aggregate_name", "aggregate_unit", "error_occurred", "error_message",
                 "label", "big_o", "rms", "complexity"}
NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
BASELINE_SUFFIX = "/baseline"


@dataclasses.dataclass
class Benchmark:
    file: str
    name: str
    run_name: str
    aggregate: str
    real_time: Optional[float]
    cpu_time: Optional[float]
    time_unit: str
    iterations: Optional[int]
    counters: Dict[str, float]
    error: Optional[str]

    @property
    def real_ns(self) -> Optional[float]:
        if self.real_time is None:
            return None
        return self.real_time * NS_PER_UNIT[self.time_unit]


@dataclasses.dataclass
class Ratio:
    file: str
    name: str
    baseline: str
    ratio: float            # real time of `name` / real time of `baseline`

    @property
    def speedup(self) -> float:
        return 1.0 / self.ratio if self.ratio else float("inf")


def load_bench(results_dir: str) -> List[Benchmark]:
    """Every benchmark of RESULTS_DIR/bench/*.json, files in name order; [] if none."""
    return load_bench_dir(os.path.join(results_dir, "bench"))


def load_bench_dir(bench_dir: str, required: bool = False) -> List[Benchmark]:
    """Every benchmark of BENCH_DIR/*.json, files in name order; [] if none.
    With `required`, a BENCH_DIR that is not a folder raises InputError."""
    if required and not os.path.isdir(bench_dir):
        raise InputError(bench_dir, "(folder)", "no such folder of Google Benchmark JSON files")
    out = []
    for path in sorted(glob.glob(os.path.join(glob.escape(bench_dir), "*.json"))):
        doc = read_json(path)
        ck = Checker(path)
        ck.obj(doc, "(top level)")
        for i, b in enumerate(ck.field(doc, "benchmarks", "", "list")):
            where = f"benchmarks[{i}]"
            ck.obj(b, where)
            name = ck.field(b, "name", where, "str")
            failed = bool(b.get("error_occurred"))
            unit = ck.field(b, "time_unit", where, "str", required=not failed) or "ns"
            if unit not in NS_PER_UNIT:
                ck.fail(f"{where}.time_unit", f"expected one of {'/'.join(NS_PER_UNIT)}, got {unit!r}")
            real = ck.field(b, "real_time", where, "num", required=not failed)
            cpu = ck.field(b, "cpu_time", where, "num", required=False)
            iters = ck.field(b, "iterations", where, "int", required=False)
            counters = {k: v for k, v in b.items() if k not in STANDARD_KEYS
                        and isinstance(v, (int, float)) and not isinstance(v, bool)}
            out.append(Benchmark(os.path.basename(path), name, b.get("run_name") or name,
                                 b.get("aggregate_name") or "", real, cpu, unit, iters, counters,
                                 b.get("error_message") if failed else None))
    return out


def shown(benchmarks: List[Benchmark]) -> List[Benchmark]:
    """What the performance table lists: a benchmark run with repetitions
    shows only its median aggregate (the machines are noisy: medians); a
    run without aggregates shows as it is."""
    has_median = {(b.file, b.run_name) for b in benchmarks if b.aggregate == "median"}
    return [b for b in benchmarks
            if (b.file, b.run_name) not in has_median or b.aggregate == "median"]


def ratios(benchmarks: List[Benchmark]) -> List[Ratio]:
    """Each benchmark against its "<prefix>/baseline" (see the module docstring)."""
    base = {(b.file, b.run_name[:-len(BASELINE_SUFFIX)], b.aggregate): b
            for b in benchmarks if b.run_name.endswith(BASELINE_SUFFIX) and b.real_ns}
    out = []
    for b in benchmarks:
        if b.run_name.endswith(BASELINE_SUFFIX) or not b.real_ns:
            continue
        parts = b.run_name.split("/")
        for k in range(len(parts) - 1, 0, -1):
            found = base.get((b.file, "/".join(parts[:k]), b.aggregate))
            if found:
                out.append(Ratio(b.file, b.name, found.name, b.real_ns / found.real_ns))
                break
    return out

