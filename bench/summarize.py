#!/usr/bin/python3
"""summarize.py: The Markdown summary of shardcheck_bench's Google Benchmark JSON.

Reads the JSON that `shardcheck_bench --benchmark_out=FILE
--benchmark_out_format=json --benchmark_repetitions=R
--benchmark_report_aggregates_only=false` writes and prints (or writes with
--out) one table per benchmark family: the optimizer step per optimizer
and size, STREAM, Newton-Schulz against at::mm, the DistributedOptimizer
step, the per-rank optimizer state, checkpoint save and load, and one for
any other benchmark. A family missing from the JSON leaves its table out.
Standard library only; Debian's /usr/bin/python3.

Every figure is the MEDIAN of the repetitions (the machines are shared and
noisy), with the spread (min-max) beside a time; Google Benchmark's own
aggregates (mean, stddev, ...) are not used. Names may carry Google
Benchmark's suffixes (/iterations:1, /repeats:1, /real_time,
/manual_time); they are dropped.

Optimizer step (<kind>/<variant>/N, real time per step):
  GB/s           bytes_per_step / median time: every variant of a kind is
                 credited with the fused kernel's traffic, so they compare
  baseline ms    fused_baseline: the fused kernel in its x86-64 baseline
                 (SSE2) instance; fused is the widest instruction set the
                 CPU runs (the context's cpu_isa, in the header)
  ISA gain       fused_baseline median / fused median
  roofline       no_math median / fused median: the fraction of the
                 no-math pass's speed the fused kernel reaches
  vs reference   reference median / fused median: the fused kernel's speed-up
  vs torch_optim torch_optim median / fused median
Newton-Schulz (newton_schulz/<rows>/<cols> and at_mm/<rows>/<cols>):
  GFLOP/s        flops_per_call / median time
  NS / at::mm    NS GFLOP/s / at::mm GFLOP/s
DistributedOptimizer step (dist_step/<setup>/dp<D>/N, rank 0's wall time
of one step):
  reduce-scatter, update, all-gather, all-reduce, slowest rank ms
                 the medians of the counters rs_ms, update_ms, ag_ms,
                 allreduce_ms, slowest_rank_ms
  state MB       state_bytes / 1e6: the largest rank's main params + state
  vs dp 1        the median step at dp 1 of the same N / this median
Per-rank optimizer state (dist_state/<setup>/dp<D>/N):
  max MB, min MB state_bytes_max, state_bytes_min / 1e6
  max / (dp 1/D) dp1_share: the largest rank against an even split of dp 1
  imbalance      state_bytes_max / state_bytes_min
Checkpoint (checkpoint/plain/{write,read_cold,read_warm}/N and
checkpoint/<type>/{save,load_warm,load_cold,load_reshard_cold}/N):
  GB/s           bytes_per_step / median time
  / plain ...    that GB/s / the plain file's GB/s of the same N
  reshard / same-DP  median of load_reshard_cold's over_same_dp (a same-DP
                     cold load timed beside it); without it, load_reshard_cold
                     median / load_cold median

Exit status: 0 written; 1 a benchmark reported an error (the summary is
still written and names it); 2 the input is unreadable or not Google
Benchmark JSON.
"""
import argparse
import collections
import json
import os
import statistics
import sys
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

# The names and number formats shared with the report (reports/bench_format.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reports"))
from bench_format import (CHECKPOINT_OPS, DP_PART, NS_PER_UNIT, PLAIN_OPS,  # noqa: E402,F401
                          counters_of, factor, mb, ms, parse_run_name, quotient, rate,
                          reshard_over_same_dp, size_label)

STEP_VARIANTS = ("fused", "fused_baseline", "no_math", "fused_2t", "no_math_2t", "reference", "torch_optim")
NEWTON_SCHULZ, AT_MM = "newton_schulz", "at_mm"


class InputError(Exception):
    pass


class Key(NamedTuple):
    """A benchmark's name without Google Benchmark's suffixes: "dist_step/adamw/dp2/16777216"
    is ("dist_step", "adamw/dp2", (16777216,))."""
    family: str
    variant: str               # the parts between the family and the arguments, "/"-joined
    args: Tuple[int, ...]      # the trailing numeric parts

    @property
    def n(self) -> Optional[int]:
        """The size of a one-argument benchmark."""
        return self.args[0] if len(self.args) == 1 else None

    @property
    def parts(self) -> List[str]:
        return self.variant.split("/") if self.variant else []

    def __str__(self) -> str:
        return "/".join([self.family] + self.parts + [str(a) for a in self.args])


class Group:
    """The repetitions of one benchmark (one name, one size)."""

    def __init__(self):
        self.ms: List[float] = []
        self.counters: Dict[str, List[float]] = collections.defaultdict(list)
        self.errors: List[str] = []

    @property
    def median(self) -> Optional[float]:
        return statistics.median(self.ms) if self.ms else None

    def counter(self, name: str) -> Optional[float]:
        """The median of a counter over the repetitions; None when no repetition has it."""
        values = self.counters.get(name)
        return statistics.median(values) if values else None

    @property
    def bytes_per_step(self) -> Optional[float]:
        return self.counter("bytes_per_step")

    def gbps(self) -> Optional[float]:
        m = self.median
        if not m or not self.bytes_per_step:
            return None
        return self.bytes_per_step / (m * 1e-3) / 1e9

    def gflops(self) -> Optional[float]:
        """flops_per_call / median time, in GFLOP/s."""
        m, flops = self.median, self.counter("flops_per_call")
        if not m or not flops:
            return None
        return flops / (m * 1e-3) / 1e9


Groups = Dict[Key, Group]


def parse_name(run_name: str) -> Key:
    """Key("adamw", "fused", (1048576,)) from "adamw/fused/1048576/real_time" (also with
    "/iterations:1" or "/repeats:1" before the timing); Key(name, "", ()) for a bare name."""
    family, parts, args = parse_run_name(run_name)
    return Key(family, "/".join(parts), args)


def load(path: str) -> Tuple[Dict, Groups]:
    """The context and the repetitions grouped by name, in file order."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise InputError(f"{path}: not Google Benchmark JSON (no 'benchmarks' list)")
    groups: Groups = collections.OrderedDict()
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
        for k, v in counters_of(b).items():
            g.counters[k].append(v)
    return doc.get("context") or {}, groups


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
    return quotient(num.median if num else None, den.median if den else None, 2, suffix)


def counter_ms(g: Optional[Group], name: str) -> str:
    return ms(g.counter(name)) if g else "—"


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
    ]
    if context.get("cpu_isa"):
        lines.append(f"- fused kernel instruction set: {context['cpu_isa']} (the widest this CPU runs, "
                     "chosen at run time); fused_baseline: the x86-64 baseline (SSE2) instance")
    lines += [
        "- each figure: the median of the repetitions' real time per step in ms, min–max in "
        "brackets; GB/s: the optimizer's traffic per step (the fused kernel's: reads of param, "
        "grad and every state array, writes of param and every state array) / median time",
        "",
    ]
    return lines


def is_step(k: Key) -> bool:
    return k.variant in STEP_VARIANTS and k.n is not None


def is_stream(k: Key) -> bool:
    return k.family == "stream" and k.variant in ("copy", "triad") and k.n is not None


def is_newton_schulz(k: Key) -> bool:
    return k.family in (NEWTON_SCHULZ, AT_MM) and not k.variant and len(k.args) == 2


def setup_and_dp(k: Key) -> Tuple[str, Optional[int]]:
    """("adamw", 2) from the variant "adamw/dp2"; ("", None) when it has no such shape."""
    parts = k.parts
    m = DP_PART.fullmatch(parts[-1]) if len(parts) >= 2 else None
    return ("/".join(parts[:-1]), int(m.group(1))) if m else ("", None)


def is_dist_step(k: Key) -> bool:
    return k.family == "dist_step" and k.n is not None and setup_and_dp(k)[1] is not None


def is_dist_state(k: Key) -> bool:
    return k.family == "dist_state" and k.n is not None and setup_and_dp(k)[1] is not None


def checkpoint_op(k: Key) -> Tuple[str, str]:
    """("dp_reshardable", "load_cold") from "checkpoint/dp_reshardable/load_cold/N";
    ("", "") for a name of another shape."""
    parts = k.parts
    if k.family != "checkpoint" or k.n is None or len(parts) < 2:
        return "", ""
    kind, op = "/".join(parts[:-1]), parts[-1]
    if op in (PLAIN_OPS if kind == "plain" else CHECKPOINT_OPS):
        return kind, op
    return "", ""


def is_checkpoint(k: Key) -> bool:
    return bool(checkpoint_op(k)[0])


TABLED: Tuple[Callable[[Key], bool], ...] = (is_step, is_stream, is_newton_schulz, is_dist_step,
                                            is_dist_state, is_checkpoint)


def in_order(values) -> list:
    """The distinct values in first-seen order."""
    return list(dict.fromkeys(values))


def step_table(groups: Groups) -> List[str]:
    kinds = in_order(k.family for k in groups if is_step(k))
    if not kinds:
        return []
    lines = [
        "## Optimizer step",
        "",
        "roofline: no_math time / fused time (1.00 = the fused kernel moves its bytes as fast as a "
        "pass that does no math); baseline: the fused kernel's x86-64 baseline (SSE2) instance, "
        "ISA gain: its time / fused time; vs reference, vs torch_optim: their time / fused time "
        "(above 1: the fused kernel is faster); 2t: one call split over 2 threads, its roofline "
        "against the no_math pass split the same way.",
        "",
        "| optimizer | N | bytes/elem | fused ms | fused GB/s | baseline ms | ISA gain "
        "| no_math ms | no_math GB/s | roofline "
        "| fused 2t ms | no_math 2t ms | roofline 2t "
        "| reference ms | vs reference | torch_optim ms | vs torch_optim |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    sizes = sorted({k.n for k in groups if is_step(k)})
    for kind in kinds:
        for n in sizes:
            row = {v: groups.get(Key(kind, v, (n,))) for v in STEP_VARIANTS}
            if not any(row.values()):
                continue
            fused = row["fused"]
            bpe = next((g.bytes_per_step / n for g in row.values() if g and g.bytes_per_step), None)
            lines.append(
                f"| {kind} | {size_label(n)} | {'—' if bpe is None else f'{bpe:.0f}'} "
                f"| {timing(fused)} | {gbps(fused)} | {timing(row['fused_baseline'])} "
                f"| {ratio(row['fused_baseline'], fused, '×')} "
                f"| {timing(row['no_math'])} | {gbps(row['no_math'])} "
                f"| {ratio(row['no_math'], fused)} | {timing(row['fused_2t'])} | {timing(row['no_math_2t'])} "
                f"| {ratio(row['no_math_2t'], row['fused_2t'])} | {timing(row['reference'])} "
                f"| {ratio(row['reference'], fused, '×')} | {timing(row['torch_optim'])} "
                f"| {ratio(row['torch_optim'], fused, '×')} |")
    return lines + [""]


def stream_table(groups: Groups) -> List[str]:
    sizes = sorted({k.n for k in groups if is_stream(k)})
    if not sizes:
        return []
    lines = ["## STREAM (fp32, one thread)", "",
             "copy: c = a, 8 bytes/elem; triad: a = b + q·c, 12 bytes/elem (STREAM's counts: the "
             "write-allocate reads of c and a are not counted, so these underestimate the traffic "
             "that the in-place optimizer passes do not pay).", "",
             "| N | copy ms | copy GB/s | triad ms | triad GB/s |", "|---:|---:|---:|---:|---:|"]
    for n in sizes:
        c, t = groups.get(Key("stream", "copy", (n,))), groups.get(Key("stream", "triad", (n,)))
        lines.append(f"| {size_label(n)} | {timing(c)} | {gbps(c)} | {timing(t)} | {gbps(t)} |")
    return lines + [""]


def newton_schulz_table(groups: Groups) -> List[str]:
    shapes = in_order(k.args for k in groups if is_newton_schulz(k))
    if not shapes:
        return []
    lines = ["## Newton–Schulz (fp32, 5 iterations) against at::mm", "",
             "NS: Muon's orthogonalization of a rows × cols matrix; at::mm: ATen's product of the "
             "matrix with its transpose, what NS spends most of its time in. GFLOP/s: flops_per_call "
             "/ median time; NS ÷ at::mm: NS GFLOP/s / at::mm GFLOP/s (the gap is NS's own overhead).",
             "",
             "| shape | NS ms | NS GFLOP/s | at::mm ms | at::mm GFLOP/s | NS ÷ at::mm |",
             "|---|---:|---:|---:|---:|---:|"]
    for rows, cols in shapes:
        ns = groups.get(Key(NEWTON_SCHULZ, "", (rows, cols)))
        mm = groups.get(Key(AT_MM, "", (rows, cols)))
        ns_rate, mm_rate = (ns.gflops() if ns else None), (mm.gflops() if mm else None)
        lines.append(f"| {rows}×{cols} | {timing(ns)} | {rate(ns_rate)} | {timing(mm)} | {rate(mm_rate)} "
                     f"| {quotient(ns_rate, mm_rate)} |")
    return lines + [""]


def by_setup_n_dp(groups: Groups, accept: Callable[[Key], bool]) -> Dict[Tuple[str, int, int], Group]:
    """The groups that `accept` takes, keyed (setup, N, D): setups in file order, then N and D rising."""
    keyed = {(setup_and_dp(k)[0], k.n, setup_and_dp(k)[1]): g for k, g in groups.items() if accept(k)}
    setups = in_order(s for s, _, _ in keyed)
    return {key: keyed[key] for key in sorted(keyed, key=lambda x: (setups.index(x[0]), x[1], x[2]))}


def dist_step_table(groups: Groups) -> List[str]:
    rows = by_setup_n_dp(groups, is_dist_step)
    if not rows:
        return []
    lines = ["## DistributedOptimizer step (AdamW, ranks as threads over Gloo)", "",
             "step: rank 0's wall time of one step (median of the repetitions, min–max); the split is "
             "rank 0's, each the median of its counter: reduce-scatter of the grad buckets, the update "
             "(the rest: the fused update of the rank's shard, the main → model copy), all-gather of "
             "the param buckets, all-reduce (the grad norm's and others). slowest rank: the slowest "
             "rank's step; state MB: the largest rank's fp32 main params + state; vs dp 1: the step "
             "at dp 1 of the same N / this step.", "",
             "| N | dp | step ms | reduce-scatter ms | update ms | all-gather ms | all-reduce ms "
             "| slowest rank ms | state MB per rank | vs dp 1 |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (setup, n, dp), g in rows.items():
        lines.append(f"| {size_label(n)} | {dp} | {timing(g)} | {counter_ms(g, 'rs_ms')} "
                     f"| {counter_ms(g, 'update_ms')} | {counter_ms(g, 'ag_ms')} "
                     f"| {counter_ms(g, 'allreduce_ms')} | {counter_ms(g, 'slowest_rank_ms')} "
                     f"| {mb(g.counter('state_bytes'))} | {ratio(rows.get((setup, n, 1)), g, '×')} |")
    return lines + [""]


def dist_state_table(groups: Groups) -> List[str]:
    rows = by_setup_n_dp(groups, is_dist_state)
    if not rows:
        return []
    lines = ["## Per-rank optimizer state (fp32 main params + state)", "",
             "Bytes per rank after construction. max ÷ (dp 1 / D): the largest rank against an even "
             "split of dp 1's bytes (1.000: a perfect split); within 1.02 is the target for elementwise "
             "optimizers. Muon composites place whole matrices on one rank each, so their imbalance "
             "(max / min) is shown.", "",
             "| setup | N | dp | max MB | min MB | max ÷ (dp 1 / D) | imbalance max/min |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for (setup, n, dp), g in rows.items():
        hi, lo = g.counter("state_bytes_max"), g.counter("state_bytes_min")
        share = g.counter("dp1_share")
        lines.append(f"| {setup} | {size_label(n)} | {dp} | {mb(hi)} | {mb(lo)} "
                     f"| {'—' if share is None else f'{share:.3f}'} | {quotient(hi, lo, 3)} |")
    return lines + [""]


def checkpoint_table(groups: Groups) -> List[str]:
    ops = {(checkpoint_op(k), k.n): g for k, g in groups.items() if is_checkpoint(k)}
    if not ops:
        return []
    kinds = in_order(kind for (kind, _), _ in ops if kind != "plain")
    sizes = sorted({n for _, n in ops})

    def rate_of(kind: str, op: str, n: int) -> Optional[float]:
        g = ops.get(((kind, op), n))
        return g.gbps() if g else None

    lines = ["## Checkpoint save and load (AdamW, dp 2; state = 12 bytes per param)", "",
             "GB/s: the checkpoint's file bytes / median time of one call (rank 0's wall time). plain: "
             "one file of the same bytes written (fsync) and read back cold (after "
             "POSIX_FADV_DONTNEED) or warm (page cache); each ÷ plain: that GB/s / the plain file's. "
             "reshard ÷ same-DP: the cold load of a dp-4 save at dp 2 / a cold load of the dp-2 "
             "save timed beside it in the same repetition, the median over repetitions "
             "(target ≤ 1.3).", "",
             "| N | sharding type | save GB/s | save ÷ plain write | load warm GB/s "
             "| load warm ÷ plain read warm | load cold GB/s | load cold ÷ plain read cold "
             "| reshard ÷ same-DP |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sizes:
        write, cold, warm = (rate_of("plain", op, n) for op in PLAIN_OPS)
        if any(((("plain", op), n) in ops) for op in PLAIN_OPS):
            lines.append(f"| {size_label(n)} | plain file (write, read warm, read cold) | {rate(write)} | — "
                         f"| {rate(warm)} | — | {rate(cold)} | — | — |")
        for kind in kinds:
            row = {op: ops.get(((kind, op), n)) for op in CHECKPOINT_OPS}
            if not any(row.values()):
                continue
            save, load_warm, load_cold = (rate_of(kind, op, n) for op in ("save", "load_warm", "load_cold"))
            lines.append(f"| {size_label(n)} | {kind} | {rate(save)} | {quotient(save, write)} "
                         f"| {rate(load_warm)} | {quotient(load_warm, warm)} | {rate(load_cold)} "
                         f"| {quotient(load_cold, cold)} "
                         f"| {factor(reshard_over_same_dp(row['load_reshard_cold'], row['load_cold']))} |")
    return lines + [""]


def other_table(groups: Groups) -> List[str]:
    rest = [(k, g) for k, g in groups.items() if not any(tabled(k) for tabled in TABLED)]
    if not rest:
        return []
    lines = ["## Other benchmarks", "", "| benchmark | N | ms | GB/s |", "|---|---:|---:|---:|"]
    for k, g in rest:
        name = "/".join([k.family] + k.parts)
        lines.append(f"| {name} | {'/'.join(size_label(a) for a in k.args)} | {timing(g)} | {gbps(g)} |")
    return lines + [""]


def summarize(path: str, note: str = "") -> Tuple[str, List[str]]:
    """The Markdown of `path` and the names of the benchmarks that reported an error."""
    context, groups = load(path)
    reps = sorted({len(g.ms) + len(g.errors) for g in groups.values()})
    title = "Optimizer-step benchmarks"
    lines = header(context, title, note)
    if reps:
        lines.insert(len(lines) - 1, f"- repetitions per benchmark: {'/'.join(map(str, reps))}")
    for table in (step_table, stream_table, newton_schulz_table, dist_step_table, dist_state_table,
                  checkpoint_table, other_table):
        lines += table(groups)
    errors = [str(k) for k, g in groups.items() if g.errors]
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
