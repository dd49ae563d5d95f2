"""bench/summarize.py on hand-made Google Benchmark JSON: medians of the
repetitions (aggregates ignored), the spread, GB/s, the roofline fraction,
the speed-ups, the ISA gain, the Newton-Schulz, DistributedOptimizer,
per-rank state and checkpoint tables, errors and malformed input."""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
SUMMARIZE = os.path.join(HERE, "summarize.py")
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import summarize as summarize_mod  # noqa: E402


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


def gb_doc(entries, **context):
    """Google Benchmark JSON of `entries`: (name as Google Benchmark writes it, the
    repetitions' times in ms, counters: a number for every repetition or a list,
    one per repetition), each followed by a median aggregate that must not be used."""
    benchmarks = []
    for name, times_ms, counters in entries:
        for i, t in enumerate(times_ms):
            per_rep = {k: (v[i] if isinstance(v, list) else v) for k, v in counters.items()}
            benchmarks.append(dict({"name": name, "run_name": name, "run_type": "iteration",
                                    "repetitions": len(times_ms), "repetition_index": i, "threads": 1,
                                    "iterations": 1, "real_time": t, "cpu_time": t / 2, "time_unit": "ms"},
                                   **per_rep))
        if len(times_ms) > 1:
            benchmarks.append(dict({"name": name + "_median", "run_name": name, "run_type": "aggregate",
                                    "aggregate_name": "median", "real_time": 999.0, "cpu_time": 999.0,
                                    "time_unit": "ms"}, **{k: 999.0 for k in counters}))
    return {"context": dict({"date": "2026-12-03T19:00:00+00:00", "host_name": "ci", "num_cpus": 2,
                             "mhz_per_cpu": 2596}, **context), "benchmarks": benchmarks}


def cells_of(md, first_cells):
    return [c.strip() for c in row(md, first_cells).strip("|").split("|")]


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
    assert cells == ["adamw", "16M", "28", "50.0 (40.0–70.0)", f"{adamw / 0.050 / 1e9:.1f}", "—", "—",
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
    assert cells[3] == "2.00" and cells[5:7] == ["—", "—"]          # no fused_baseline
    assert cells[9] == "0.50" and cells[10:13] == ["—", "—", "—"]
    assert cells[14] == "2.00×" and cells[15:] == ["—", "—"]
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


def test_names_lose_google_benchmarks_suffixes():
    parse = summarize_mod.parse_name
    assert parse("adamw/fused/1048576/real_time") == ("adamw", "fused", (1048576,))
    assert parse("dist_step/adamw/dp2/16777216/iterations:1/manual_time") == \
        ("dist_step", "adamw/dp2", (16777216,))
    assert parse("dist_state/muon_lion/dp4/50331648/iterations:1/repeats:1/manual_time") == \
        ("dist_state", "muon_lion/dp4", (50331648,))
    assert parse("checkpoint/fully_sharded_model_space/load_reshard_cold/1048576/iterations:1/manual_time") == \
        ("checkpoint", "fully_sharded_model_space/load_reshard_cold", (1048576,))
    assert parse("newton_schulz/1024/4096/real_time") == ("newton_schulz", "", (1024, 4096))
    assert parse("plain") == ("plain", "", ())
    assert str(parse("dist_step/adamw/dp2/16777216/iterations:1/manual_time")) == "dist_step/adamw/dp2/16777216"


def test_isa_gain_against_the_baseline_instance(tmp_path):
    n = 1 << 24
    traffic = {"bytes_per_step": 28.0 * n, "elements": n}
    doc = gb_doc([(f"adamw/fused/{n}/real_time", [10.0, 11.0, 9.0], traffic),
                  (f"adamw/fused_baseline/{n}/real_time", [20.0, 19.0, 22.0], traffic),
                  (f"lion/fused/{n}/real_time", [4.0], traffic)], cpu_isa="avx512")
    proc, md = summarize(tmp_path, doc)
    assert proc.returncode == 0, proc.stderr
    assert "fused kernel instruction set: avx512" in md
    assert "| fused ms | fused GB/s | baseline ms | ISA gain |" in md
    cells = cells_of(md, "| adamw | 16M |")
    assert cells[3:7] == ["10.0 (9.00–11.0)", f"{28.0 * n / 0.010 / 1e9:.1f}", "20.0 (19.0–22.0)", "2.00×"]
    assert cells_of(md, "| lion | 16M |")[5:7] == ["—", "—"]
    assert "## Other benchmarks" not in md and "999" not in md


def test_newton_schulz_against_at_mm(tmp_path):
    doc = gb_doc([("newton_schulz/1024/4096/real_time", [11.0, 10.0, 12.0],
                   {"flops_per_call": 1.1e9, "flops_per_second": 1.0e11}),
                  ("at_mm/1024/4096/real_time", [4.0, 5.0, 3.0],
                   {"flops_per_call": 1.0e9, "flops_per_second": 2.5e11}),
                  ("newton_schulz/512/512/real_time", [2.0], {"flops_per_call": 1.0e9})])
    proc, md = summarize(tmp_path, doc)
    assert proc.returncode == 0, proc.stderr
    assert "## Newton–Schulz (fp32, 5 iterations) against at::mm" in md
    # NS: 1.1e9 flops / 11 ms = 100 GFLOP/s; at::mm: 1e9 / 4 ms = 250 GFLOP/s.
    assert cells_of(md, "| 1024×4096 |") == ["1024×4096", "11.0 (10.0–12.0)", "100", "4.00 (3.00–5.00)",
                                             "250", "0.40"]
    assert cells_of(md, "| 512×512 |") == ["512×512", "2.00", "500", "—", "—", "—"]
    assert "## Other benchmarks" not in md and "## Optimizer step" not in md


def dist_step(dp, n, times, rs, **counters):
    return (f"dist_step/adamw/dp{dp}/{n}/iterations:1/manual_time", times,
            dict({"rs_ms": rs, "ag_ms": 2.0, "allreduce_ms": 0.5, "update_ms": [40.0, 30.0, 35.0],
                  "slowest_rank_ms": 120.0, "state_bytes": 12.0 * n / dp, "dp": dp, "elements": n}, **counters))


def test_distributed_step_split_and_speed_up_against_dp_1(tmp_path):
    n, small = 16 << 20, 1 << 20
    doc = gb_doc([dist_step(1, n, [100.0, 110.0, 90.0], [0.0, 0.0, 0.0]),
                  dist_step(2, n, [60.0, 50.0, 55.0], [5.0, 7.0, 6.0]),
                  dist_step(4, n, [25.0, 30.0, 20.0], [3.0, 3.0, 3.0]),
                  dist_step(2, small, [5.0, 5.0, 5.0], [1.0, 1.0, 1.0])])
    proc, md = summarize(tmp_path, doc)
    assert proc.returncode == 0, proc.stderr
    assert "## DistributedOptimizer step (AdamW, ranks as threads over Gloo)" in md
    assert cells_of(md, "| 16M | 1 |") == ["16M", "1", "100 (90.0–110)", "0.000", "35.0", "2.00", "0.500",
                                          "120", f"{12.0 * n / 1e6:.1f}", "1.00×"]
    assert cells_of(md, "| 16M | 2 |") == ["16M", "2", "55.0 (50.0–60.0)", "6.00", "35.0", "2.00", "0.500",
                                          "120", f"{6.0 * n / 1e6:.1f}", "1.82×"]       # 100 / 55
    assert cells_of(md, "| 16M | 4 |")[-1] == "4.00×"                                   # 100 / 25
    assert cells_of(md, "| 1M | 2 |")[-1] == "—"                                        # no dp 1 at 1M
    lines = md.splitlines()
    assert lines.index(row(md, "| 1M | 2 |")) < lines.index(row(md, "| 16M | 1 |"))    # N, then dp, rising
    assert "## Other benchmarks" not in md and "repetitions per benchmark: 3" in md


def test_per_rank_state_share_and_imbalance(tmp_path):
    n = 48 << 20

    def state(setup, dp, hi, lo, share):
        return (f"dist_state/{setup}/dp{dp}/{n}/iterations:1/repeats:1/manual_time", [12.0],
                {"state_bytes_max": hi, "state_bytes_min": lo, "state_bytes_mean": (hi + lo) / 2,
                 "dp1_share": share, "dp": dp, "elements": n})
    doc = gb_doc([state("adamw", 2, 302.0e6, 301.0e6, 1.0041), state("muon_adam", 2, 7.5e6, 5.0e6, 1.25),
                  state("muon_adam", 1, 12.5e6, 12.5e6, 1.0)])
    proc, md = summarize(tmp_path, doc)
    assert proc.returncode == 0, proc.stderr
    assert "## Per-rank optimizer state (fp32 main params + state)" in md and "within 1.02" in md
    assert cells_of(md, "| adamw | 48M | 2 |") == ["adamw", "48M", "2", "302.0", "301.0", "1.004", "1.003"]
    assert cells_of(md, "| muon_adam | 48M | 2 |") == ["muon_adam", "48M", "2", "7.5", "5.0", "1.250", "1.500"]
    lines = md.splitlines()
    assert lines.index(row(md, "| muon_adam | 48M | 1 |")) < lines.index(row(md, "| muon_adam | 48M | 2 |"))
    assert "## Other benchmarks" not in md and "## DistributedOptimizer step" not in md


def checkpoint(kind, op, n, times, nbytes):
    return (f"checkpoint/{kind}/{op}/{n}/iterations:1/manual_time", times,
            {"bytes_per_step": nbytes, "bytes_per_second": nbytes / (times[0] * 1e-3), "elements": n})


def test_checkpoint_rates_against_the_plain_file_and_reshard_cost(tmp_path):
    n, gb = 1 << 20, 1.2e9
    doc = gb_doc([checkpoint("plain", "write", n, [1000.0, 900.0, 1100.0], gb),     # 1.20 GB/s
                  checkpoint("plain", "read_cold", n, [600.0, 600.0, 700.0], gb),   # 2.00 GB/s
                  checkpoint("plain", "read_warm", n, [200.0, 150.0, 250.0], gb),   # 6.00 GB/s
                  checkpoint("dp_reshardable", "save", n, [2000.0, 2100.0, 1900.0], gb),
                  checkpoint("dp_reshardable", "load_warm", n, [300.0, 300.0, 300.0], gb),
                  checkpoint("dp_reshardable", "load_cold", n, [800.0, 700.0, 900.0], gb),
                  checkpoint("dp_reshardable", "load_reshard_cold", n, [1000.0, 1000.0, 1100.0], gb),
                  checkpoint("fully_sharded_model_space", "save", n, [1200.0], gb)])
    proc, md = summarize(tmp_path, doc)
    assert proc.returncode == 0, proc.stderr
    assert "## Checkpoint save and load (AdamW, dp 2; state = 12 bytes per param)" in md
    assert cells_of(md, "| 1M | plain file") == ["1M", "plain file (write, read warm, read cold)", "1.20", "—",
                                                "6.00", "—", "2.00", "—", "—"]
    # save 0.60 GB/s = 0.50 of the plain write; load warm 4.00 = 0.67 of read warm; load cold
    # 1.50 = 0.75 of read cold; reshard 1000 ms / same-DP 800 ms = 1.25.
    assert cells_of(md, "| 1M | dp_reshardable |") == ["1M", "dp_reshardable", "0.60", "0.50", "4.00", "0.67",
                                                      "1.50", "0.75", "1.25"]
    assert cells_of(md, "| 1M | fully_sharded_model_space |") == ["1M", "fully_sharded_model_space", "1.00",
                                                                 "0.83", "—", "—", "—", "—", "—"]
    assert "## Other benchmarks" not in md


def test_a_resharded_load_timed_beside_a_same_dp_load_gives_the_median_of_its_ratios(tmp_path):
    n, gb = 1 << 20, 1.2e9
    resharded = checkpoint("dp_reshardable", "load_reshard_cold", n, [1000.0, 1000.0, 1100.0], gb)
    resharded[2]["over_same_dp"] = [1.4, 0.9, 1.0]     # per repetition: median 1.00
    doc = gb_doc([checkpoint("dp_reshardable", "load_cold", n, [800.0, 700.0, 900.0], gb), resharded])
    proc, md = summarize(tmp_path, doc)
    assert proc.returncode == 0, proc.stderr
    assert cells_of(md, "| 1M | dp_reshardable |")[-1] == "1.00"   # not 1000 / 800 = 1.25


def test_absent_families_leave_their_tables_out(tmp_path):
    n = 1 << 20
    doc = gb_doc([(f"adamw/fused/{n}/real_time", [1.0], {"bytes_per_step": 28.0 * n}),
                  (f"dist_step/adamw/dp2/{n}/iterations:1/manual_time", [3.0], {"rs_ms": 1.0}),
                  ("checkpoint/plain/rewind/1048576/iterations:1/manual_time", [2.0], {})])
    proc, md = summarize(tmp_path, doc)
    assert proc.returncode == 0, proc.stderr
    assert "## Optimizer step" in md and "## DistributedOptimizer step" in md
    for title in ("## STREAM", "## Newton–Schulz", "## Per-rank optimizer state", "## Checkpoint"):
        assert title not in md
    assert "fused kernel instruction set" not in md                  # no cpu_isa in the context
    # A name of none of the tables' shapes still goes to "Other benchmarks".
    assert "| checkpoint/plain/rewind | 1M | 2.00 | — |" in md
    dist = cells_of(md, "| 1M | 2 |")
    assert dist[3] == "1.00" and dist[4:9] == ["—", "—", "—", "—", "—"] and dist[9] == "—"
