#!/usr/bin/python3
"""summarize.py: The Markdown summary of shardcheck_bench's Google Benchmark JSON.

Reads the JSON that `shardcheck_bench --benchmark_out=FILE
--benchmark_out_format=json --benchmark_repetitions=R
--benchmark_report_aggregates_only=false` writes and prints (or writes with
--out) one table per optimizer and size, one for STREAM and one for any
other benchmark. Standard library only; Debian's /usr/bin/python3.

Every figure is the MEDIAN of the repetitions' real time per step (the
machines are shared and noisy), with the spread (min-max) beside it;
Google Benchmark's own aggregates (mean, stddev, ...) are not used.
  GB/s           bytes_per_step / median time: every variant of a kind is
                 credited with the fused kernel's traffic, so they compare
  roofline       no_math median / fused median: the fraction of the
                 no-math pass's speed the fused kernel reaches
  vs reference   reference median / fused median: the fused kernel's speed-up
  vs torch_optim torch_optim median / fused median

Exit status: 0 written; 1 a benchmark reported an error (the summary is
still written and names it); 2 the input is unreadable or not Google
Benchmark JSON.
"""
import argparse
import collections
import json
import statistics
import sys
from typing import Dict, List, Optional, Tuple

NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
STEP_VARIANTS = ("fused", "no_math", "fused_2t", "no_math_2t", "reference", "torch_optim")


class InputError(Exception):
    pass


class Group:
    """The repetitions of one benchmark (one name, one size)."""

    def __init__(self):
        self.ms: List[float] = []
        self.bytes_per_step: Optional[float] = None
        self.errors: List[str] = []

    @property
    def median(self) -> Optional[float]:
        return statistics.median(self.ms) if self.ms else None

    def gbps(self) -> Optional[float]:
        m = self.median
        if not m or not self.bytes_per_step:
            return None
        return self.bytes_per_step / (m * 1e-3) / 1e9


def parse_name(run_name: str) -> Tuple[str, str, Optional[int]]:
    """("adamw", "fused", 1048576) from "adamw/fused/1048576/real_time";
    (name, "", None) when the name has no such shape."""
    parts = run_name.split("/")
    if len(parts) >= 3 and parts[2].isdigit():
        return parts[0], parts[1], int(parts[2])
    return run_name, "", None


def load(path: str) -> Tuple[Dict, Dict[Tuple[str, str, Optional[int]], Group]]:
    """The context and the repetitions grouped by (family, variant, N), in file order."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise InputError(f"{path}: not Google Benchmark JSON (no 'benchmarks' list)")
    groups: Dict[Tuple[str, str, Optional[int]], Group] = collections.OrderedDict()
    for i, b in enumerate(doc["benchmarks"]):
        if not isinstance(b, dict) or "name" not in b:
            raise InputError(f"{path}: benchmarks[{i}] has no name")
        if b.get("run_type", "iteration") != "iteration":
            continue  # Google Benchmark's aggregates: the medians are computed here
        g = groups.setdefault(parse_name(b.get("run_name") or b["name"]), Group())
        if b.get("error_occurred"):
            g.errors.append(str(b.get("error_message") or "error"))
            continue
        unit = b.get("time_unit", "ns")
        if unit not in NS_PER_UNIT or not isinstance(b.get("real_time"), (int, float)):
            raise InputError(f"{path}: benchmarks[{i}] ({b['name']}): no real_time in a known unit")
        g.ms.append(b["real_time"] * NS_PER_UNIT[unit] / 1e6)
        if isinstance(b.get("bytes_per_step"), (int, float)):
            g.bytes_per_step = float(b["bytes_per_step"])
    return doc.get("context") or {}, groups


def size_label(n: Optional[int]) -> str:
    if n is None:
        return ""
    for shift, suffix in ((30, "G"), (20, "M"), (10, "K")):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return f"{n >> shift}{suffix}"
    return str(n)


def ms(v: Optional[float]) -> str:
    if v is None:
        return "—"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def timing(g: Optional[Group]) -> str:
    """"12.3 (11.9–13.0)": median (min–max) ms; the errors when it has no time."""
    if g is None:
        return "—"
    if not g.ms:
        return "error: " + "; ".join(sorted(set(g.errors))) if g.errors else "—"
    if len(g.ms) == 1:
        return ms(g.ms[0])
    return f"{ms(g.median)} ({ms(min(g.ms))}–{ms(max(g.ms))})"


def gbps(g: Optional[Group]) -> str:
    v = g.gbps() if g else None
    return "—" if v is None else f"{v:.1f}"


def ratio(num: Optional[Group], den: Optional[Group], suffix: str = "") -> str:
    a, b = (num.median if num else None), (den.median if den else None)
    if not a or not b:
        return "—"
    return f"{a / b:.2f}{suffix}"


def header(context: Dict, title: str, note: str) -> List[str]:
    caches = ", ".join(f"L{c.get('level')}{'d' if c.get('type') == 'Data' else ''} "
                       f"{c.get('size', 0) // 1024} KiB"
                       for c in context.get("caches", []) if c.get("type") in ("Data", "Unified"))
    load_avg = context.get("load_avg")
    lines = [f"# {title}", ""]
    if note:
        lines += [note, ""]
    lines += [
        f"- date: {context.get('date', '?')}; host: {context.get('host_name', '?')}; "
        f"{context.get('num_cpus', '?')} CPUs at {context.get('mhz_per_cpu', '?')} MHz"
        + (f"; caches: {caches}" if caches else ""),
        f"- ATen threads (reference, torch_optim): {context.get('aten_threads', '?')}; fused kernel "
        f"and loops: {context.get('fused_threads', '1')} thread"
        + (f"; load average at start: {', '.join(f'{x:.2f}' for x in load_avg)}" if load_avg else ""),
        "- each figure: the median of the repetitions' real time per step in ms, min–max in "
        "brackets; GB/s: the optimizer's traffic per step (the fused kernel's: reads of param, "
        "grad and every state array, writes of param and every state array) / median time",
        "",
    ]
    return lines


def step_table(groups) -> List[str]:
    kinds = []
    for (family, variant, n) in groups:
        if variant in STEP_VARIANTS and family not in kinds:
            kinds.append(family)
    if not kinds:
        return []
    lines = [
        "## Optimizer step",
        "",
        "roofline: no_math time / fused time (1.00 = the fused kernel moves its bytes as fast as a "
        "pass that does no math); vs reference, vs torch_optim: their time / fused time "
        "(above 1: the fused kernel is faster); 2t: one call split over 2 threads, its roofline "
        "against the no_math pass split the same way.",
        "",
        "| optimizer | N | bytes/elem | fused ms | fused GB/s | no_math ms | no_math GB/s | roofline "
        "| fused 2t ms | no_math 2t ms | roofline 2t "
        "| reference ms | vs reference | torch_optim ms | vs torch_optim |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    sizes = sorted({n for (_, v, n) in groups if v in STEP_VARIANTS and n is not None})
    for kind in kinds:
        for n in sizes:
            row = {v: groups.get((kind, v, n)) for v in STEP_VARIANTS}
            if not any(row.values()):
                continue
            fused = row["fused"]
            bpe = next((g.bytes_per_step / n for g in row.values() if g and g.bytes_per_step), None)
            lines.append(
                f"| {kind} | {size_label(n)} | {'—' if bpe is None else f'{bpe:.0f}'} "
                f"| {timing(fused)} | {gbps(fused)} | {timing(row['no_math'])} | {gbps(row['no_math'])} "
                f"| {ratio(row['no_math'], fused)} | {timing(row['fused_2t'])} | {timing(row['no_math_2t'])} "
                f"| {ratio(row['no_math_2t'], row['fused_2t'])} | {timing(row['reference'])} "
                f"| {ratio(row['reference'], fused, '×')} | {timing(row['torch_optim'])} "
                f"| {ratio(row['torch_optim'], fused, '×')} |")
    return lines + [""]


def stream_table(groups) -> List[str]:
    sizes = sorted({n for (f, v, n) in groups if f == "stream" and n is not None})
    if not sizes:
        return []
    lines = ["## STREAM (fp32, one thread)", "",
             "copy: c = a, 8 bytes/elem; triad: a = b + q·c, 12 bytes/elem (STREAM's counts: the "
             "write-allocate reads of c and a are not counted, so these underestimate the traffic "
             "that the in-place optimizer passes do not pay).", "",
             "| N | copy ms | copy GB/s | triad ms | triad GB/s |", "|---:|---:|---:|---:|---:|"]
    for n in sizes:
        c, t = groups.get(("stream", "copy", n)), groups.get(("stream", "triad", n))
        lines.append(f"| {size_label(n)} | {timing(c)} | {gbps(c)} | {timing(t)} | {gbps(t)} |")
    return lines + [""]


def other_table(groups) -> List[str]:
    rest = [(k, g) for k, g in groups.items()
            if not (k[1] in STEP_VARIANTS or (k[0] == "stream" and k[1] in ("copy", "triad")))]
    if not rest:
        return []
    lines = ["## Other benchmarks", "", "| benchmark | N | ms | GB/s |", "|---|---:|---:|---:|"]
    for (family, variant, n), g in rest:
        name = f"{family}/{variant}" if variant else family
        lines.append(f"| {name} | {size_label(n)} | {timing(g)} | {gbps(g)} |")
    return lines + [""]


def summarize(path: str, note: str = "") -> Tuple[str, List[str]]:
    """The Markdown of `path` and the names of the benchmarks that reported an error."""
    context, groups = load(path)
    reps = sorted({len(g.ms) + len(g.errors) for g in groups.values()})
    title = "Optimizer-step benchmarks"
    lines = header(context, title, note)
    if reps:
        lines.insert(len(lines) - 1, f"- repetitions per benchmark: {'/'.join(map(str, reps))}")
    lines += step_table(groups) + stream_table(groups) + other_table(groups)
    errors = [f"{f}/{v}/{n}" if v else f for (f, v, n), g in groups.items() if g.errors]
    if errors:
        lines += ["## Errors", ""] + [f"- `{e}`" for e in errors] + [""]
    return "\n".join(lines), errors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="summarize.py", description=__doc__.split("\n")[0].split(": ", 1)[1],
                                 epilog="\n".join(__doc__.split("\n")[2:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", metavar="JSON", help="Google Benchmark JSON of shardcheck_bench")
    ap.add_argument("--out", metavar="FILE", help="write the Markdown here (default: stdout)")
    ap.add_argument("--note", default="", help="a line under the title (e.g. the command that ran)")
    args = ap.parse_args(argv)
    try:
        text, errors = summarize(args.json, args.note)
    except InputError as e:
        print(f"summarize.py: error: {e}", file=sys.stderr)
        return 2
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            print(f"summarize.py: error: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(text)
    for e in errors:
        print(f"summarize.py: benchmark {e} reported an error", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    sys.exit(main())
