"""The performance section's "How cost grows" part: shardcheck_bench's
DistributedOptimizer step, per-rank state and checkpoint families from
hand-made Google Benchmark JSON (synth.growth_bench_doc) -> medians, ratios,
tables and log-log plots; an absent family leaves its part out."""
import html as html_mod
import re

import bench
import bench_format
import bench_plots
import synth

M1, M16 = 1 << 20, 16 << 20


def growth_part(html: str) -> str:
    """The HTML of the "How cost grows" part."""
    start = html.index('id="cost-growth"')
    return html[start:html.index('id="cells"', start)]


def table_rows(html: str, table_id: str):
    """The cells of a table's body rows, tags stripped."""
    start = html.index(f'id="{table_id}"')
    body = html[start:html.index("</table>", start)]
    rows = []
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)[1:]:
        rows.append([html_mod.unescape(re.sub(r"<[^>]+>", "", c)).strip()
                     for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)])
    return rows


def row_of(rows, *first):
    return next(r for r in rows if tuple(r[:len(first)]) == first)


def report_with(make_report, doc, name="r"):
    return make_report(synth.all_passing(), name=name, bench={"optimizer_step.json": doc})


def test_run_names_lose_google_benchmarks_suffixes():
    assert bench_format.parse_run_name("dist_state/muon_lion/dp4/1048576/iterations:1/repeats:1/manual_time") == \
        ("dist_state", ["muon_lion", "dp4"], (1048576,))
    assert bench_format.parse_run_name("checkpoint/dp_zero_gather_scatter/load_cold/16777216/iterations:1/manual_time") == \
        ("checkpoint", ["dp_zero_gather_scatter", "load_cold"], (16777216,))
    assert bench_format.parse_run_name("newton_schulz/1024/4096/real_time") == ("newton_schulz", [], (1024, 4096))
    assert bench_format.parse_run_name("plain") == ("plain", [], ())


def test_medians_come_from_the_repetitions_not_the_aggregates(tmp_path):
    def b(agg, t, **counters):
        name = "dist_step/adamw/dp2/1048576/iterations:1/manual_time"
        return bench.Benchmark("f.json", f"{name}_{agg}" if agg else name, name, agg, t, t, "ms", 1, counters, None)
    reps = bench.repeated([b("", 3.0, rs_ms=1.0), b("", 1.0, rs_ms=3.0), b("", 2.0, rs_ms=2.0),
                           b("median", 999.0, rs_ms=999.0), b("mean", 999.0)])
    assert len(reps) == 1 and reps[0].median == 2.0 and (reps[0].low, reps[0].high) == (1.0, 3.0)
    assert reps[0].counter("rs_ms") == 2.0 and reps[0].counter("ag_ms") is None
    only_aggregates = bench.repeated([b("median", 5.0, rs_ms=4.0), b("stddev", 0.1)])
    assert only_aggregates[0].ms == [5.0] and only_aggregates[0].counter("rs_ms") == 4.0


def test_cost_growth_tables_with_medians_ratios_and_speed_ups(make_report):
    r = report_with(make_report, synth.growth_bench_doc())
    part = growth_part(r.html)
    assert "How cost grows" in part
    assert ">999" not in re.sub(r"<svg.*?</svg>", "", part, flags=re.S)   # the aggregates are not used

    step = table_rows(part, "dist-step-table")
    assert [(x[1], x[2]) for x in step] == [("1M", "1"), ("1M", "2"), ("1M", "4"),
                                           ("16M", "1"), ("16M", "2"), ("16M", "4")]
    # 16M dp 2: step medians 100 (dp 1) and 55 -> 1.82x; the split is each counter's median.
    assert row_of(step, "adamw", "16M", "2") == ["adamw", "16M", "2", "55.0 (50.0–60.0)", "5.50", "33.0", "11.0",
                                                 "0.500", "60.5", f"{12.0 * M16 / 2 / 1e6:.1f}", "1.82×"]
    assert row_of(step, "adamw", "16M", "4")[-1] == "4.00×"                  # 100 / 25
    assert row_of(step, "adamw", "1M", "2")[-1] == "1.67×"                   # 10 / 6
    assert row_of(step, "adamw", "16M", "1")[-1] == "1.00×"

    ckpt = table_rows(part, "checkpoint-table")
    # The plain file first at each N: write 1.2 GB in 1000 ms, reads warm 200 ms and cold 600 ms.
    assert ckpt[0] == ["1M", "plain file (write, read warm, read cold)", "1000 (900–1100)", "1.20",
                       "200 (150–250)", "6.00", "600 (600–700)", "2.00", "—", "—"]
    # save 2000 ms (0.60 GB/s), load warm 300 (4.00), cold 800 (1.50), reshard 1000 ms / 800 ms = 1.25.
    assert row_of(ckpt, "1M", "dp_reshardable") == ["1M", "dp_reshardable", "2000 (1900–2100)", "0.60",
                                                   "300 (300–300)", "4.00", "800 (700–900)", "1.50",
                                                   "1000 (1000–1100)", "1.25"]
    assert row_of(ckpt, "16M", "fully_sharded_model_space")[2:4] == ["32000 (30400–33600)", "0.60"]
    # A resharded load timed beside a same-DP one: the median of the paired ratios, not 1.25.
    assert row_of(ckpt, "1M", "fully_sharded_model_space")[-1] == "0.90"
    assert [x[1].split(" ")[0] for x in ckpt] == ["plain", "dp_reshardable", "fully_sharded_model_space"] * 2

    state = table_rows(part, "state-table")
    assert row_of(state, "muon_adam", "16M", "2") == ["muon_adam", "16M", "2", f"{12.0 * M16 / 2 * 1.25 / 1e6:.1f}",
                                                      f"{12.0 * M16 / 2 * 1.25 / 1.5 / 1e6:.1f}", "1.250", "1.500"]
    assert row_of(state, "adamw", "1M", "4")[5:] == ["1.004", "1.002"]
    assert row_of(state, "adamw", "1M", "1")[5:] == ["1.000", "1.000"]


def test_cost_growth_plots_are_inline_with_unique_ids(make_report):
    r = report_with(make_report, synth.growth_bench_doc())
    part = growth_part(r.html)
    svgs = re.findall(r"<svg.*?</svg>", part, re.S)
    assert len(svgs) == 3
    step_svg, split_svg, ckpt_svg = svgs
    for text in ("dp 1", "dp 2", "dp 4", "16M"):
        assert f">{text}<" in step_svg
    for text in ("reduce-scatter", "update", "all-gather", "all-reduce"):
        assert f">{text}<" in split_svg
    for text in ("dp_reshardable", "fully_sharded_model_space", "plain file"):
        assert f">{text}<" in ckpt_svg
    ids = re.findall(r'\bid="([^"]+)"', r.html)
    assert not {i for i in ids if ids.count(i) > 1}
    for ref in re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', r.html):
        assert (ref[0] or ref[1]) in ids
    # The section's benchmark table still lists the medians (the aggregates), as before.
    perf = r.html[r.html.index('id="performance"'):r.html.index('id="cost-growth"')]
    assert "dist_step/adamw/dp2/16777216/iterations:1/manual_time_median" in perf


def test_figures_are_log_log_with_a_line_per_dp_size_and_a_panel_per_operation():
    growth = bench.cost_growth(bench_rows(synth.growth_bench_doc()))
    fig = bench_plots.dist_step_figure(growth.dist_step)
    ax = fig.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert len(ax.containers) == 3                                      # dp 1, 2, 4
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["dp 1", "dp 2", "dp 4"]
    dp2 = ax.containers[1].lines[0]
    assert list(dp2.get_xdata()) == [M1, M16] and list(dp2.get_ydata()) == [6.0, 55.0]
    shares = bench_plots.split_shares(growth.dist_step[4])              # 16M dp 2: 5.5, 33, 11, 0.5 ms
    assert abs(shares["update_ms"] - 33.0 / 50.0) < 1e-12
    ckpt = bench_plots.checkpoint_figure(growth.checkpoint)
    assert len(ckpt.axes) == 4 and all(a.get_xscale() == a.get_yscale() == "log" for a in ckpt.axes)


def bench_rows(doc):
    """bench.Benchmark rows of a Google Benchmark document, as load_bench_dir makes them."""
    return [bench.Benchmark("optimizer_step.json", b["name"], b.get("run_name") or b["name"],
                            b.get("aggregate_name") or "", b["real_time"], b["cpu_time"], b["time_unit"],
                            b.get("iterations"),
                            bench_format.counters_of(b), None)
            for b in doc["benchmarks"]]


def test_an_absent_family_leaves_its_part_out(make_report):
    r = report_with(make_report, synth.growth_bench_doc(families=("dist_state",)), name="state-only")
    part = growth_part(r.html)
    assert 'id="cost-state"' in part and "state-table" in part
    assert 'id="cost-dist-step"' not in part and 'id="cost-checkpoint"' not in part
    assert "<svg" not in part                                          # the state part has no plot
    r = report_with(make_report, synth.growth_bench_doc(families=("dist_step", "checkpoint")), name="no-state")
    part = growth_part(r.html)
    assert 'id="cost-dist-step"' in part and 'id="cost-checkpoint"' in part and 'id="cost-state"' not in part
    assert len(re.findall(r"<svg", part)) == 3
    r = make_report(synth.all_passing(), name="micro", bench={"micro.json": synth.bench_doc()})
    assert 'id="performance"' in r.html and 'id="cost-growth"' not in r.html


def test_a_quick_run_without_dp_1_has_no_speed_up():
    doc = synth.growth_bench_doc(families=("dist_step",))
    doc["benchmarks"] = [b for b in doc["benchmarks"] if "/dp1/" not in b["name"]]
    growth = bench.cost_growth(bench_rows(doc))
    assert [r.dp for r in growth.dist_step] == [2, 4, 2, 4]
    assert all(r.speedup is None for r in growth.dist_step)
    assert growth.state == [] and growth.checkpoint == []
