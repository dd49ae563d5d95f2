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

How cost grows (`cost_growth`): shardcheck_bench's DistributedOptimizer
step (dist_step/<setup>/dp<D>/N), per-rank state (dist_state/<setup>/dp<D>/N)
and checkpoint (checkpoint/plain/<op>/N, checkpoint/<type>/<op>/N)
families, each figure the median of a benchmark's repetitions (its
"iteration" runs; the median aggregate when only aggregates were written;
a name in several files: the last file's, in name order).
Google Benchmark's name suffixes (/iterations:1, /repeats:1, /real_time,
/manual_time) are dropped. A family absent from every file leaves its part
out.
"""
import collections
import dataclasses
import glob
import os
import statistics
from typing import Dict, Iterable, List, Optional, Tuple

from bench_format import (CHECKPOINT_OPS, DP_PART, NS_PER_UNIT, PLAIN_OPS,  # noqa: F401
                          counters_of, parse_run_name, reshard_over_same_dp, size_label)
from load import Checker, InputError, read_json

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
            counters = counters_of(b)
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



@dataclasses.dataclass
class Repeated:
    """The repetitions of one benchmark of one file: real times in ms and counters."""
    file: str
    run_name: str
    ms: List[float]
    counters: Dict[str, List[float]]

    @property
    def median(self) -> float:
        return statistics.median(self.ms)

    @property
    def low(self) -> float:
        return min(self.ms)

    @property
    def high(self) -> float:
        return max(self.ms)

    def counter(self, name: str) -> Optional[float]:
        """The median of a counter over the repetitions; None when no repetition has it."""
        values = self.counters.get(name)
        return statistics.median(values) if values else None

    def gbps(self) -> Optional[float]:
        """bytes_per_step / median time, in GB/s."""
        nbytes = self.counter("bytes_per_step")
        return nbytes / (self.median * 1e-3) / 1e9 if nbytes and self.median else None


def repeated(benchmarks: Iterable[Benchmark]) -> List[Repeated]:
    """The repetitions of each run name of each file, in first-seen order: its
    "iteration" runs without an error, or its median aggregate when it has none."""
    runs: Dict[Tuple[str, str], List[Benchmark]] = collections.OrderedDict()
    medians: Dict[Tuple[str, str], Benchmark] = {}
    for b in benchmarks:
        if b.error or b.real_ns is None:
            continue
        key = (b.file, b.run_name)
        if not b.aggregate:
            runs.setdefault(key, []).append(b)
        elif b.aggregate == "median":
            medians[key] = b
            runs.setdefault(key, [])
    out = []
    for (file, name), reps in runs.items():
        reps = reps or [medians[(file, name)]]
        counters: Dict[str, List[float]] = collections.defaultdict(list)
        for b in reps:
            for k, v in b.counters.items():
                counters[k].append(float(v))
        out.append(Repeated(file, name, [b.real_ns / 1e6 for b in reps], dict(counters)))
    return out


@dataclasses.dataclass
class DistStepRow:
    """One DistributedOptimizer step benchmark: rank 0's step and its split."""
    setup: str
    n: int
    dp: int
    step: Repeated
    speedup: Optional[float] = None     # the median step at dp 1 of the same N / this one

    def part_ms(self, counter: str) -> Optional[float]:
        return self.step.counter(counter)


# The split of rank 0's step: (counter, label), in the order of a step.
STEP_SPLIT = (("rs_ms", "reduce-scatter"), ("update_ms", "update"), ("ag_ms", "all-gather"),
              ("allreduce_ms", "all-reduce"))


@dataclasses.dataclass
class StateRow:
    """The per-rank bytes of fp32 main params and state of one setup, N and DP size."""
    setup: str
    n: int
    dp: int
    max_bytes: Optional[float]
    min_bytes: Optional[float]
    dp1_share: Optional[float]          # max / (dp 1's bytes / D)

    @property
    def imbalance(self) -> Optional[float]:
        return self.max_bytes / self.min_bytes if self.max_bytes and self.min_bytes else None


@dataclasses.dataclass
class CheckpointRow:
    """Save and load of one sharding type at one N (kind "plain": the plain
    file's write, read_warm and read_cold stand as save, load_warm, load_cold)."""
    kind: str
    n: int
    ops: Dict[str, Repeated]

    @property
    def plain(self) -> bool:
        return self.kind == "plain"

    def op(self, name: str) -> Optional[Repeated]:
        """A sharding type's op, or the plain file's counterpart of it."""
        if self.plain:
            name = {"save": "write", "load_warm": "read_warm", "load_cold": "read_cold"}.get(name, "")
        return self.ops.get(name)

    @property
    def reshard_ratio(self) -> Optional[float]:
        """bench_format.reshard_over_same_dp of this row's loads."""
        return reshard_over_same_dp(self.ops.get("load_reshard_cold"), self.ops.get("load_cold"))


@dataclasses.dataclass
class CostGrowth:
    dist_step: List[DistStepRow]
    state: List[StateRow]
    checkpoint: List[CheckpointRow]     # per N: the plain file first, then the sharding types


def _setup_and_dp(parts: List[str]) -> Tuple[str, Optional[int]]:
    """("<setup>", 2) from ["<setup>", "dp2"]; ("", None) when the parts have no such shape."""
    m = DP_PART.fullmatch(parts[-1]) if len(parts) >= 2 else None
    return ("/".join(parts[:-1]), int(m.group(1))) if m else ("", None)


def _by_setup_n_dp(found: Dict[Tuple[str, int, int], Repeated]) -> List[Tuple[Tuple[str, int, int], Repeated]]:
    """Setups in first-seen order, then N and D rising."""
    setups = list(dict.fromkeys(s for s, _, _ in found))
    return sorted(found.items(), key=lambda kv: (setups.index(kv[0][0]), kv[0][1], kv[0][2]))


def dist_step_rows(runs: List[Repeated]) -> List[DistStepRow]:
    found = {}
    for r in runs:
        family, parts, args = parse_run_name(r.run_name)
        setup, dp = _setup_and_dp(parts)
        if family == "dist_step" and dp is not None and len(args) == 1:
            found[(setup, args[0], dp)] = r
    rows = [DistStepRow(setup, n, dp, r) for (setup, n, dp), r in _by_setup_n_dp(found)]
    for row in rows:
        one = found.get((row.setup, row.n, 1))
        if one and row.step.median:
            row.speedup = one.median / row.step.median
    return rows


def state_rows(runs: List[Repeated]) -> List[StateRow]:
    found = {}
    for r in runs:
        family, parts, args = parse_run_name(r.run_name)
        setup, dp = _setup_and_dp(parts)
        if family == "dist_state" and dp is not None and len(args) == 1:
            found[(setup, args[0], dp)] = r
    return [StateRow(setup, n, dp, r.counter("state_bytes_max"), r.counter("state_bytes_min"),
                     r.counter("dp1_share"))
            for (setup, n, dp), r in _by_setup_n_dp(found)]


def checkpoint_rows(runs: List[Repeated]) -> List[CheckpointRow]:
    ops: Dict[Tuple[str, int], Dict[str, Repeated]] = collections.OrderedDict()
    for r in runs:
        family, parts, args = parse_run_name(r.run_name)
        if family != "checkpoint" or len(parts) < 2 or len(args) != 1:
            continue
        kind, op = "/".join(parts[:-1]), parts[-1]
        if op in (PLAIN_OPS if kind == "plain" else CHECKPOINT_OPS):
            ops.setdefault((kind, args[0]), {})[op] = r
    kinds = list(dict.fromkeys(["plain"] + [k for k, _ in ops]))
    return [CheckpointRow(kind, n, found)
            for (kind, n), found in sorted(ops.items(), key=lambda kv: (kv[0][1], kinds.index(kv[0][0])))]


def cost_growth(benchmarks: Iterable[Benchmark]) -> Optional[CostGrowth]:
    """The "How cost grows" tables of `benchmarks`; None when none of their
    families is there."""
    runs = repeated(benchmarks)
    growth = CostGrowth(dist_step_rows(runs), state_rows(runs), checkpoint_rows(runs))
    return growth if growth.dist_step or growth.state or growth.checkpoint else None
