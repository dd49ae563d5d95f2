"""What shardcheck_bench's Google Benchmark JSON means and how its figures
are written, shared by ci/bench's summary (bench/summarize.py) and the
report's performance section (reports/bench.py, reports/render_html.py).
Standard library only: bench/summarize.py imports it without the report's
packages.

Names: Google Benchmark appends its options and the timing to a run name
("dist_step/<setup>/dp2/16777216/iterations:1/manual_time"); `parse_run_name`
drops them and splits the rest into the family, the parts and the numeric
arguments. Every numeric field of a benchmark that is not one of Google
Benchmark's own is a counter.

Numbers: milliseconds and rates with three significant digits (at least),
bytes in MB with one decimal, a dash for a missing figure.
"""
import re
from typing import Dict, List, Optional, Tuple

# Google Benchmark's fields of a run; every other numeric field is a counter.
STANDARD_KEYS = {"name", "family_index", "per_family_instance_index", "run_name", "run_type",
                 "repetitions", "repetition_index", "threads", "iterations", "real_time", "cpu_time",
                 "time_unit", "aggregate_name", "aggregate_unit", "error_occurred", "error_message",
                 "label", "big_o", "rms", "complexity"}
NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
# What Google Benchmark appends to a name: its options, then the timing.
OPTION_PART = re.compile(r"real_time|manual_time|process_time"
                         r"|(iterations|repeats|threads|min_time|min_warmup_time):[^/]+")
DP_PART = re.compile(r"dp(\d+)")
# The checkpoint family's operations: the plain file's, and each sharding type's.
PLAIN_OPS = ("write", "read_cold", "read_warm")
CHECKPOINT_OPS = ("save", "load_warm", "load_cold", "load_reshard_cold")
DASH = "—"


def reshard_over_same_dp(resharded, same_dp) -> Optional[float]:
    """A resharded load's time over a same-DP load's (target at most 1.3): the
    median over repetitions of load_reshard_cold's counter over_same_dp (a cold
    same-DP load timed beside it, in turns); for a run without that counter,
    load_reshard_cold's median / load_cold's. Each argument has `counter(name)`
    (a counter's median) and `median` (ms), or is None."""
    paired = resharded.counter("over_same_dp") if resharded else None
    if paired:
        return paired
    if not resharded or not same_dp or not same_dp.median:
        return None
    return resharded.median / same_dp.median


def parse_run_name(run_name: str) -> Tuple[str, List[str], Tuple[int, ...]]:
    """("dist_step", ["<setup>", "dp2"], (16777216,)) from
    "dist_step/<setup>/dp2/16777216/iterations:1/manual_time": the family, the
    parts up to the numeric arguments, the arguments."""
    parts = run_name.split("/")
    while len(parts) > 1 and OPTION_PART.fullmatch(parts[-1]):
        parts.pop()
    args: List[int] = []
    while len(parts) > 1 and parts[-1].isdigit():
        args.insert(0, int(parts.pop()))
    return parts[0], parts[1:], tuple(args)


def counters_of(benchmark: Dict) -> Dict[str, float]:
    """The counters of one benchmark entry: its numeric fields that are not Google Benchmark's."""
    return {k: float(v) for k, v in benchmark.items()
            if k not in STANDARD_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool)}


def size_label(n: Optional[int]) -> str:
    """"16M" for 16 * 2**20; the number itself when it is no whole K, M or G; "" for None."""
    if n is None:
        return ""
    for shift, suffix in ((30, "G"), (20, "M"), (10, "K")):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return f"{n >> shift}{suffix}"
    return str(n)


def rate(v: Optional[float]) -> str:
    """A GB/s or GFLOP/s figure with three significant digits (at least), or a dash."""
    if v is None:
        return DASH
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def ms(v: Optional[float]) -> str:
    """Milliseconds as `rate` writes them, with three decimals below 1 ms."""
    return f"{v:.3f}" if v is not None and v < 1 else rate(v)


def mb(nbytes: Optional[float]) -> str:
    """Bytes in MB (10^6) with one decimal, or a dash."""
    return DASH if nbytes is None else f"{nbytes / 1e6:.1f}"


def factor(v: Optional[float], digits: int = 2, suffix: str = "") -> str:
    """A ratio with `digits` decimals and a suffix ("0.83", "1.2×"), or a dash."""
    return DASH if v is None else f"{v:.{digits}f}{suffix}"


def quotient(a: Optional[float], b: Optional[float], digits: int = 2, suffix: str = "") -> str:
    """a / b as `factor` writes it, or a dash when either is missing or zero."""
    if not a or not b:
        return DASH
    return factor(a / b, digits, suffix)
