#!/usr/bin/env python3
"""How the checkpoint engine's costs grow at Megatron scale, without data
(docs/performance.md, "Cost at scale").

Runs `shardcheck dry --json --repeat 3` (processes of their own per
sharding type and size, so each peak memory is its own) over two sweeps.
A point's time is the median, over 3 processes, of each process's fastest
of 3 plans: one process's times move by up to 1.7x with where its memory
lands (the 8-layer fully_sharded_model_space resharded plan took 0.0047 to
0.0081 s over 12 processes), which a fastest-of-3 inside one process does
not even out. The processes run in rounds, each round every point of the
sweep once, so that a slow spell of the machine spreads over all sizes
instead of raising one. The sweeps:

  dp       gpt-175b (1,156 tensors) at dp 1024, 2048, 4096, 8192, bucket size
           16e9 elements (11 buckets at every dp: the sweep varies dp alone),
           each load planned at 3/4 of the dp;
  tensors  deepseek-v3-moe with 8, 16, 32, 61 and 122 layers (3,949 to
           93,097 tensors) at dp 1024, the same bucket size, loads at dp 768:
           61 is the model's own depth, 122 twice it: the first size's
           index still fits the 32 MB L3 and the others do not, and over
           8-61 layers alone that one size moved the resharded plans'
           slopes between 1.02 and 1.11 from run to run (a fit across a
           cache measures the cache; a fifth size past it weighs growth);

then fits, per sharding type and quantity, the slope of log(quantity)
against log(dp) and log(tensors) by least squares, and the headline: both
presets at dp 4096 with Megatron's default bucket size, loads planned at
dp 3072. Writes one JSON file (default out/scale/scale.json, beside
out/bench/ whose *.json files are Google Benchmark output):

  {"command": ..., "machine": ..., "sweeps": {"dp": {"x": "dp", "points":
   [{"x": 1024, "preset": ..., "result": <dry --json>}, ...], "slopes":
   {type: {quantity: slope}}}, "tensors": {...}},
   "headline": [<dry --json>, ...], "quantities": [...], "limit": 1.1}

and prints a table. Exit status 1 when a slope exceeds the limit (a cost
growing faster than linearly), 2 on bad arguments or a failed run.

usage: bench/scale.py [--binary build/shardcheck] [--out out/scale/scale.json]
                      [--quick] [--processes 3]
  --quick   dp 256-2048, 4-18 layers at dp 256, no headline: a check in
            about a minute
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

TYPES = ["dp_reshardable", "fully_reshardable", "dp_zero_gather_scatter",
         "fully_sharded_model_space"]
# The quantities fitted, as dry --json names them (peak_mb is derived).
# reshard_max_rank_s, the slowest of thousands of sub-millisecond per-rank
# times, measures the machine's noise more than growth: recorded, not fitted.
QUANTITIES = ["layout_s", "plan_s", "metadata_s", "metadata_bytes", "header_bytes_total",
              "files", "chunks", "reshard_plan_s", "peak_mb"]
# Each time is the fastest of this many plans in the process (dry --repeat),
# and a point's the median over PROCESSES processes.
REPEAT = 3
PROCESSES = 3
LIMIT = 1.1
SWEEP_BUCKET = 16_000_000_000
# Times below this are timer noise for a slope: the fit skips such a series.
MIN_SECONDS = 2e-3


def run_dry(binary, args, repeat=REPEAT):
    cmd = [binary, "dry", "--json", "--repeat", str(repeat)] + [str(a) for a in args]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"bench/scale.py: {' '.join(cmd)} exited {proc.returncode}")
    result = json.loads(proc.stdout)
    result["wall_s"] = time.monotonic() - started
    for t in result["types"]:
        t["peak_mb"] = (result["peak_rss_bytes"] - result["start_rss_bytes"]) / 1e6
    return result


def merge(runs):
    """The first run's result, each of its times (the *_s fields of each
    type, and peak_mb) the median over all of `runs`."""
    merged = runs[0]
    for i, t in enumerate(merged["types"]):
        for q in list(t):
            if q.endswith("_s") or q == "peak_mb":
                t[q] = statistics.median(r["types"][i][q] for r in runs)
    merged["processes"] = len(runs)
    return merged


def slope(xs, ys):
    """Least-squares slope of log(y) on log(x); None when a y is not positive."""
    if len(xs) < 2 or any(y is None or y <= 0 for y in ys):
        return None
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / den


def fit(points):
    """{type: {quantity: slope}} over a sweep's points."""
    out = {}
    for t in TYPES:
        out[t] = {}
        for q in QUANTITIES:
            xs, ys = [], []
            for p in points:
                for r in p["result"]["types"]:
                    if r["type"] == t and q in r:
                        xs.append(p["x"])
                        ys.append(r[q])
            if q.endswith("_s") and ys and max(ys) < MIN_SECONDS:
                out[t][q] = None  # too small to time
                continue
            out[t][q] = slope(xs, ys)
    return out


def sweep(binary, name, sizes, args_of, processes):
    """Runs every type at each size in `processes` rounds, each round every
    point once, and merges each point's runs; a point's x is the result's
    `name` (its dp, or its tensor count). Round by round, not a point's
    processes back to back: a slow spell of the machine (other tenants,
    memory compaction) then lands on every size alike instead of on one,
    which a slope would read as growth."""
    runs = {(size, t): [] for size in sizes for t in TYPES}
    for round_ in range(processes):
        for size in sizes:
            for t in TYPES:
                print(f"bench/scale.py: {name} sweep, round {round_ + 1}/{processes}, size {size}, {t}",
                      file=sys.stderr, flush=True)
                runs[(size, t)].append(run_dry(binary, args_of(size) + ["--sharding", t]))
    points = []
    for size in sizes:
        merged = None
        for t in TYPES:
            r = merge(runs[(size, t)])
            if merged is None:
                merged = r
            else:
                merged["types"] += r["types"]
        points.append({"x": merged[name], "result": merged})
    return {"x": name, "points": points, "slopes": fit(points)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="build/shardcheck")
    ap.add_argument("--out", default="out/scale/scale.json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--processes", type=int, default=PROCESSES,
                    help="processes per point; its times are their median")
    a = ap.parse_args()
    if a.processes < 1:
        ap.error("--processes must be at least 1")
    if not os.access(a.binary, os.X_OK):
        raise SystemExit(f"bench/scale.py: no binary at {a.binary} (build it: ci/setup)")
    div = 4 if a.quick else 1
    dps = [1024 // div, 2048 // div, 4096 // div, 8192 // div]
    # Every size past the MoE preset's 3 dense layers, so tensors grow with layers.
    layers = [8, 16, 32, 61, 122] if not a.quick else [4, 6, 10, 18]
    started = time.monotonic()
    out = {
        "command": " ".join([sys.argv[0]] + sys.argv[1:]),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
        "quantities": QUANTITIES,
        "limit": LIMIT,
        "sweeps": {
            "dp": sweep(a.binary, "dp", dps, lambda dp: [
                "--preset", "gpt-175b", "--dp", dp, "--bucket-size", SWEEP_BUCKET], a.processes),
            "tensors": sweep(a.binary, "tensors", layers, lambda n: [
                "--preset", "deepseek-v3-moe", "--layers", n, "--dp", 1024 // div,
                "--bucket-size", SWEEP_BUCKET], a.processes),
        },
        "headline": [],
    }
    if not a.quick:
        for preset in ("gpt-175b", "deepseek-v3-moe"):
            print(f"bench/scale.py: headline {preset}", file=sys.stderr, flush=True)
            rows = [run_dry(a.binary, ["--preset", preset, "--dp", 4096, "--sharding", t], repeat=1)
                    for t in TYPES]
            merged = rows[0]
            merged["types"] = [r["types"][0] for r in rows]
            out["headline"].append(merged)
    out["seconds"] = time.monotonic() - started
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, a.out)
    worst = print_table(out)
    print(f"wrote {a.out} ({out['seconds']:.0f} s)")
    return 1 if worst is not None and worst > LIMIT else 0


def print_table(out):
    worst = None
    for name, s in out["sweeps"].items():
        print(f"\nslopes in {name} ({', '.join(str(p['x']) for p in s['points'])}):")
        print(f"{'type':27s}" + "".join(f"{q:>19s}" for q in QUANTITIES))
        for t in TYPES:
            cells = []
            for q in QUANTITIES:
                v = s["slopes"][t].get(q)
                cells.append(f"{'-' if v is None else f'{v:.2f}':>19s}")
                if v is not None:
                    worst = v if worst is None else max(worst, v)
            print(f"{t:27s}" + "".join(cells))
    return worst


if __name__ == "__main__":
    sys.exit(main())
