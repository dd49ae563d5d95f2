"""bench/summarize.py on hand-made Google Benchmark JSON: medians of the
repetitions (aggregates ignored), the spread, GB/s, the roofline fraction,
the speed-ups, errors and malformed input."""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
SUMMARIZE = os.path.join(HERE, "summarize.py")


def run(reps, n=1 << 24, aggregate_ms=999.0):
    benchmarks = []
    for name, times_ms, bytes_per_step in reps:
        run_name = f"{name}/{n}/real_time"
        for i, t in enumerate(times_ms):
            b = {"name": run_name, "run_name": run_name, "run_type": "iteration", "repetitions": len(times_ms),
                 "repetition_index": i, "iterations": 3, "real_time": t, "cpu_time": t,
                 "time_unit": "ms", "bytes_per_step": bytes_per_step, "elements": n}
            if t is None:
                b = {"name": run_name, "run_name": run_name, "run_type": "iteration",
                     "error_occurred": True, "error_message": "out of memory"}
            benchmarks.append(b)
        benchmarks.append({"name": run_name + "_median", "run_name": run_name, "run_type": "aggregate",
                           "aggregate_name": "median", "real_time": aggregate_ms, "cpu_time": 1.0,
                           "time_unit": "ms", "bytes_per_step": bytes_per_step})
    return {"context": {"date": "2026-12-03T19:00:00+00:00", "host_name": "ci", "num_cpus": 2,
                        "mhz_per_cpu": 2596, "aten_threads": "1", "fused_threads": "1",
                        "caches": [{"type": "Data", "level": 1, "size": 49152, "num_sharing": 1}],
                        "load_avg": [1.5, 1.0, 0.5]},
            "benchmarks": benchmarks}


def summarize(tmp_path, doc):
    path = tmp_path / "optimizer_step.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    out = tmp_path / "summary.md"
    proc = subprocess.run([sys.executable, SUMMARIZE, str(path), "--out", str(out), "--note", "`ci/bench --quick`"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    return proc, out.read_text() if out.exists() else ""


def row(md, first_cells):
    return next(line for line in md.splitlines() if line.startswith(first_cells))


def test_medians_spread_bandwidth_roofline_and_speedups(tmp_path):
    n = 1 << 24
    adamw = 28.0 * n  # bytes per step
    doc = run([("adamw/reference", [400.0, 500.0, 450.0], adamw),
               ("adamw/fused", [40.0, 60.0, 50.0, 41.0, 70.0], adamw),   # median 50
               ("adamw/no_math", [10.0, 10.0, 9.0], adamw),
               ("adamw/fused_2t", [30.0, 25.0, 26.0], adamw),             # median 26
               ("adamw/no_math_2t", [6.5, 6.0, 7.0], adamw),              # median 6.5
               ("adamw/torch_optim", [100.0, 80.0, 90.0], adamw),
               ("stream/copy", [4.0, 5.0, 4.5], 8.0 * n),
               ("stream/triad", [6.0, 6.0, 6.0], 12.0 * n)], n=n)
    proc, md = summarize(tmp_path, doc)
    assert proc.returncode == 0, proc.stderr
    assert "`ci/bench --quick`" in md and "2 CPUs at 2596 MHz" in md and "L1d 48 KiB" in md
    assert "repetitions per benchmark: 3/5" in md
    r = row(md, "| adamw | 16M |")
    cells = [c.strip() for c in r.strip("|").split("|")]
    assert cells == ["adamw", "16M", "28", "50.0 (40.0–70.0)", f"{adamw / 0.050 / 1e9:.1f}",
                     "10.0 (9.00–10.0)", f"{adamw / 0.010 / 1e9:.1f}", "0.20",
                     "26.0 (25.0–30.0)", "6.50 (6.00–7.00)", "0.25",
                     "450 (400–500)", "9.00×", "90.0 (80.0–100)", "1.80×"]
    assert "999" not in md                          # Google Benchmark's aggregates are not used
    s = [c.strip() for c in row(md, "| 16M |").strip("|").split("|")]
    assert s == ["16M", "4.50 (4.00–5.00)", f"{8.0 * n / 0.0045 / 1e9:.1f}", "6.00 (6.00–6.00)",
                 f"{12.0 * n / 0.006 / 1e9:.1f}"]


def test_kind_without_torch_counterpart_and_unknown_benchmarks(tmp_path):
    n = 1 << 20
    doc = run([("lion/fused", [2.0], 20.0 * n), ("lion/no_math", [1.0], 20.0 * n),
               ("lion/reference", [4.0], 20.0 * n), ("newton_schulz/5iter", [3.0], 0.0)], n=n)
    proc, md = summarize(tmp_path, doc)
    assert proc.returncode == 0, proc.stderr
    cells = [c.strip() for c in row(md, "| lion | 1M |").strip("|").split("|")]
    assert cells[3] == "2.00" and cells[7] == "0.50" and cells[8:11] == ["—", "—", "—"]
    assert cells[12] == "2.00×" and cells[13:] == ["—", "—"]
    assert "## Other benchmarks" in md and "| newton_schulz/5iter | 1M | 3.00 | — |" in md
    assert "## STREAM" not in md


def test_an_errored_benchmark_is_named_and_exits_1(tmp_path):
    n = 1 << 26
    doc = run([("ademamix/fused", [None, None], 36.0 * n), ("ademamix/no_math", [5.0], 36.0 * n)], n=n)
    proc, md = summarize(tmp_path, doc)
    assert proc.returncode == 1
    assert "benchmark ademamix/fused/67108864 reported an error" in proc.stderr
    assert "| ademamix | 64M |" in md and "error: out of memory" in md
    assert "## Errors" in md and "- `ademamix/fused/67108864`" in md


def test_input_that_is_not_benchmark_json_exits_2(tmp_path):
    proc, md = summarize(tmp_path, "{\"benchmarks\": 3}")
    assert proc.returncode == 2 and md == ""
    assert proc.stderr.startswith("summarize.py: error: ") and "no 'benchmarks' list" in proc.stderr
    proc, _ = summarize(tmp_path, "not json")
    assert proc.returncode == 2
