"""The HTML report, end to end: synthetic results -> make_report.py -> assertions on the HTML."""
import glob
import json
import os
import re

import pytest

import synth
from conftest import REPORTS, run_report


def matrix_html(html: str) -> str:
    start = html.index('<table id="matrix"')
    return html[start:html.index("</table>", start)]


def table(section: str, cls: str) -> str:
    start = section.index(f'<table class="{cls}">')
    return section[start:section.index("</table>", start)]


def test_all_passing(make_report):
    cells = synth.all_passing()
    r = make_report(cells)
    assert '<span class="badge big v-pass">PASS</span>' in r.html
    assert "v-fail" not in matrix_html(r.html)
    assert "<b>4</b> passed, <b>0</b> failed, <b>0</b> errored" in r.html
    for c in cells:
        cid = c["entry"]["id"]
        assert f'<section class="cell v-pass" id="{cid}">' in r.html
        assert f'href="#{cid}"' in matrix_html(r.html)
    # the matrix columns are the dp sizes and resume plans
    for label in ("<th>dp2</th>", "<th>dp2→dp3</th>", "<th>dp2→dp4</th>", "<th>dp4</th>"):
        assert label in matrix_html(r.html)
    assert 'id="failing"' not in r.html


def test_one_failing_cell_shows_its_first_failure(make_report):
    r = make_report(synth.one_failing())
    bad = "lion.dp_zero_gather_scatter.dp2-to-dp3.bf16.oracle-gpt-tiny"
    assert '<span class="badge big v-fail">FAIL</span>' in r.html
    # matrix: the failing slot is red and links to the section
    m = matrix_html(r.html)
    assert re.search(r'<td class="v-fail">\s*<a class="chip v-fail" href="#' + re.escape(bad) + '"', m)
    sec = r.section(bad)
    assert 'class="cell v-fail"' in r.html[r.html.index(f'id="{bad}"') - 40:r.html.index(f'id="{bad}"')]
    assert "First failure:</b> step <b>6</b>" in sec
    assert "<code>state.exp_avg.layers.1.fc1.weight</code>" in sec
    assert "<svg" in sec                                  # the |diff| plot of the jump
    # the failing check is marked, and listed with its step and tensor
    checks = table(sec, "checks")
    assert re.search(r'<tr class="fail"><td><code>resumed-vs-reference-bitwise-state</code>', checks)
    assert '<td class="n">6</td>' in checks
    # the summary at the top lists it too, and failing sections come first
    top = r.html[r.html.index('id="failing"'):r.html.index('id="matrix"')]
    assert bad in top and "state.exp_avg.layers.1.fc1.weight" in top
    assert r.html.index(f'id="{bad}"') < r.html.index('id="adam.dp_reshardable.dp2.bf16.oracle-gpt-tiny"')


def test_lion_table_has_its_one_state_key(make_report):
    cells = synth.lion_only() + [synth.make_cell("adam", "dp_reshardable", 2)]
    r = make_report(cells)
    lion = r.section("lion.dp_reshardable.dp2-to-dp3.bf16.oracle-gpt-tiny")
    groups = table(lion, "groups")
    assert "<code>exp_avg</code>" in groups
    assert "exp_avg_sq" not in lion
    assert "<code>params</code>" in groups and "<code>main_params</code>" in groups
    # the Adam cell beside it does have exp_avg_sq: the table follows each cell's own schema
    adam = r.section("adam.dp_reshardable.dp2.bf16.oracle-gpt-tiny")
    assert "<code>exp_avg_sq</code>" in table(adam, "groups")


def test_unknown_optimizer_state_keys_come_from_the_schema(make_report, monkeypatch):
    monkeypatch.setitem(synth.SCHEMAS, "sophia", {"sophia": ["hessian_ema", "exp_avg"]})
    cell = synth.make_cell("sophia", "dp_reshardable", 2, resume_dp=3, save_at=4,
                           fail={"group": "hessian_ema", "step": 7, "run": "resumed", "size": 1e-3})
    r = make_report([cell])
    sec = r.section(cell["entry"]["id"])
    groups = table(sec, "groups")
    assert "<code>hessian_ema</code>" in groups and "<td>sophia</td>" in groups
    assert ">hessian_ema<" in sec                   # in the plot legend (SVG text)
    assert "schema sophia: <b>hessian_ema, exp_avg</b>" in sec


def test_no_state_key_is_hard_coded_in_the_report_code():
    sources = glob.glob(os.path.join(REPORTS, "*.py")) + glob.glob(os.path.join(REPORTS, "templates", "*"))
    assert len(sources) >= 8
    for path in sources:
        text = open(path, encoding="utf-8").read()
        for key in ("exp_avg", "momentum_buffer"):
            assert key not in text, f"{path} names the state key {key}"


def plot_of(section: str, kind: str) -> str:
    """The SVG of one plot ("loss", "gnorm" or "diff") of a cell section, or ""."""
    m = re.search(rf'<div class="plot {kind}">(<svg.*?</svg>)', section, re.S)
    return m.group(1) if m else ""


def test_bitwise_cell_says_so_instead_of_plotting_zeros(make_report):
    r = make_report(synth.lion_only())
    sec = r.section("lion.dp_reshardable.dp2-to-dp3.bf16.oracle-gpt-tiny")
    assert "bitwise equal at every step" in sec
    assert not plot_of(sec, "diff") and not plot_of(sec, "loss")   # nothing nonzero, no loss
    assert len(svgs_of(sec)) == 1 and plot_of(sec, "gnorm")        # only the grad norms are drawn


def test_loss_curves_name_the_resume_dp_and_mark_the_save(make_report):
    cell = synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=8, model="gpt-tiny", steps=30)
    r = make_report([cell])
    sec = r.section(cell["entry"]["id"])
    assert len(svgs_of(sec)) == 3                   # loss + grad norm + |diff|
    loss = plot_of(sec, "loss")
    for text in ("reference (dp1)", "uninterrupted (dp2)", "resumed (dp3, from step 8)", "save at step 8"):
        assert f">{text}<" in loss
    assert "atol 1e-05 rtol 0.0013" in plot_of(sec, "diff")   # the tolerance band of the tolerance checks


def test_page_is_self_contained_and_ids_are_unique(make_report):
    r = make_report(synth.realistic(), bench={"micro.json": synth.bench_doc()})
    assert "<script" not in r.html and "<link" not in r.html and "src=" not in r.html
    urls = set(re.findall(r"https?://[^\s\"')]+", r.html))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls
    ids = re.findall(r'\bid="([^"]+)"', r.html)
    dupes = {i for i in ids if ids.count(i) > 1}
    assert not dupes
    assert r.html.count("<svg") >= 6
    for ref in re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', r.html):
        target = ref[0] or ref[1]
        assert target in ids, f"dangling reference #{target}"


def test_error_cell_without_result_json(make_report, tmp_path):
    cells = synth.realistic()
    err = next(c for c in cells if c["entry"]["verdict"] == "error")
    err["result"] = None                            # the runner died before writing it
    r = make_report(cells)
    sec = r.section(err["entry"]["id"])
    assert "No result.json" in sec and 'badge v-error">ERROR' in sec


def test_performance_section(make_report):
    r = make_report(synth.all_passing(), bench={"micro.json": synth.bench_doc()})
    perf = r.html[r.html.index('id="performance"'):r.html.index('id="cells"')]
    for name in ("shard_update_adam/fused", "newton_schulz/5iter", "bytes_per_second"):
        assert name in perf
    assert "<td class=\"n\">0.250</td><td class=\"n\">4.00×</td>" in perf
    assert "<td class=\"n\">0.300</td><td class=\"n\">3.33×</td>" in perf  # 90 us vs 0.30 ms
    assert "newton_schulz/5iter</code></td><td><code>" not in perf        # no baseline, no ratio


def test_no_performance_section_without_bench(make_report):
    assert 'id="performance"' not in make_report(synth.all_passing()).html


def _write_bench(folder, name, doc):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        json.dump(doc, f)


def test_bench_option_reads_that_folder_instead_of_results_bench(make_report, tmp_path):
    # ci/bench writes out/bench; ci/demo passes --bench out/bench. --bench
    # replaces RESULTS_DIR/bench: the results' own bench file is not shown.
    other = tmp_path / "out" / "bench"
    doc = synth.bench_doc()
    doc["benchmarks"][4]["name"] = doc["benchmarks"][4]["run_name"] = "adamw/fused/1048576/real_time"
    _write_bench(other, "optimizer_step.json", doc)
    _write_bench(other, "notes.md.txt", {})                       # not *.json: ignored
    r = make_report(synth.all_passing(), bench={"micro.json": synth.bench_doc()},
                    extra_args=["--bench", str(other)])
    perf = r.html[r.html.index('id="performance"'):r.html.index('id="cells"')]
    assert "adamw/fused/1048576/real_time" in perf and "optimizer_step.json" in perf
    assert "micro.json" not in perf and "newton_schulz/5iter" not in perf
    assert f"From <code>{other}/*.json</code>" in perf
    assert "<td class=\"n\">0.250</td><td class=\"n\">4.00×</td>" in perf   # ratios still work


def test_bench_option_without_json_files_leaves_the_section_out(make_report, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = make_report(synth.all_passing(), extra_args=["--bench", str(empty)])
    assert 'id="performance"' not in r.html


def test_bench_option_naming_a_missing_folder_is_an_input_error(tmp_path):
    out = str(tmp_path / "r")
    synth.write_results(out, synth.all_passing())
    proc = run_report(out, "--bench", str(tmp_path / "nowhere"), check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"make_report.py: error: {tmp_path / 'nowhere'}: (folder): "
                                   "no such folder of Google Benchmark JSON files")
    assert not os.path.exists(os.path.join(out, "report.html"))


def test_baseline_flags_changed_verdict_missing_and_grown_cells(make_report, tmp_path):
    base_cells = synth.all_passing() + [synth.make_cell("adamw", "dp_reshardable", 2)]
    base = make_report(base_cells, name="base")
    now_cells = synth.all_passing()
    changed = "adam.dp_reshardable.dp2-to-dp3.bf16.oracle-gpt-tiny"
    now_cells[1] = synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=4,
                                   fail={"group": "exp_avg_sq", "step": 5, "run": "resumed", "size": 1e-4})
    assert now_cells[1]["entry"]["id"] == changed
    r = make_report(now_cells, name="now", baseline_dir=base.dir)
    cmp_html = r.html[r.html.index('id="baseline"'):r.html.index('id="cells"')]
    row = cmp_html[cmp_html.index(f'href="#{changed}"'):]
    row = row[:row.index("</tr>")]
    assert "verdict changed: pass → fail" in row
    assert "max |Δ| grew: resumed/exp_avg_sq 0 → 0.00018</td>" in row
    assert "adamw.dp_reshardable.dp2.bf16.oracle-gpt-tiny" in cmp_html and "missing in these results" in cmp_html
    assert "<p class=\"note\">4 cells unchanged.</p>" not in cmp_html
    assert "3 cells unchanged." in cmp_html
    # the matrix marks the changed cell; its section shows both sides
    assert re.search(r'class="chip v-fail changed" href="#' + re.escape(changed), matrix_html(r.html))
    sec = r.section(changed)
    assert 'baseline <span class="badge v-pass">PASS</span> → now' in sec
    assert '<td class="n grew">0.00018</td>' in sec
    # the Markdown lists it too
    assert f"`{changed}` (regressed)" in r.md


def test_baseline_identical_flags_nothing(make_report):
    base = make_report(synth.all_passing(), name="base")
    r = make_report(synth.all_passing(), name="now", baseline_dir=base.dir)
    assert "No differences" in r.html and "changed" not in matrix_html(r.html)


def test_long_series_keep_their_maximum(make_report):
    cell = synth.make_cell("lion", "dp_reshardable", 2, steps=5000, tolerance=True)
    diff = cell["result"]["runs"]["uninterrupted"]["diff"]["exp_avg"]
    diff["max_abs"][3776] = 0.5                     # step 3777
    r = make_report([cell])
    sec = r.section(cell["entry"]["id"])
    assert "0.5 (3777)" in table(sec, "groups")
    svg = re.findall(r"<svg.*?</svg>", sec, re.S)[-1]
    # downsampled: far fewer path vertices than 5000 steps × series
    assert svg.count(" L ") < 6 * 2 * 2000
    assert len(r.html) < 1_500_000


def test_large_matrix_stays_usable(large_report):
    html = large_report.html
    assert html.count('<section class="cell') == 400
    assert html.count('class="chip v-') >= 400
    assert len(html) < 12_000_000, len(html)
    failing = re.findall(r'<section class="cell v-fail" id="([^"]+)">', html)
    assert len(failing) == 4
    for cid in failing:
        sec = large_report.section(cid)
        assert "<svg" in sec and "First failure:</b> step <b>5</b>" in sec
    plotted = sum(1 for s in re.findall(r"<section.*?</section>", html, re.S) if "<svg" in s)
    assert plotted <= 4 + 60
    assert "plots left out to keep the page small" in html


def test_help_and_bad_flags():
    from conftest import run_report
    proc = run_report("--help")
    for flag in ("--baseline", "--out", "--markdown", "RESULTS_DIR", "docs/reports.md"):
        assert flag in proc.stdout
    assert run_report("--no-such-flag", check=False).returncode == 2


@pytest.mark.parametrize("passing", [0, 2])
def test_passing_plots_limit(make_report, passing):
    cells = [synth.make_cell(o, "dp_reshardable", 2, model="gpt-tiny") for o in synth.SCHEMAS]
    r = make_report(cells, extra_args=["--passing-plots", passing])
    plotted = [s for s in re.findall(r"<section.*?</section>", r.html, re.S) if "<svg" in s]
    assert len(plotted) == passing


def test_checks_of_other_kinds_and_not_applicable_verdicts(make_report):
    """Check kinds and run names outside the documented examples render as they are."""
    cell = synth.make_cell("lion", "dp_reshardable", 2, model="gpt-tiny")
    cell["result"]["checks"].append({"name": "loss-falls", "kind": "loss_fall", "on": "loss",
                                     "run": "reference", "against": "its first step", "verdict": "pass",
                                     "detail": "reference loss fell 40%"})
    cell["result"]["checks"].append({"name": "uninterrupted+resumed-loss", "kind": "tolerance", "on": "loss",
                                     "run": "uninterrupted+resumed", "against": "reference",
                                     "verdict": "n/a", "detail": "no loss"})
    r = make_report([cell])
    checks = table(r.section(cell["entry"]["id"]), "checks")
    assert "<code>loss-falls</code></td><td>loss_fall</td>" in checks
    assert '<td class="v-na">n/a</td>' in checks


def test_error_cell_shows_the_error_once(make_report):
    cells = synth.realistic()
    err = next(c for c in cells if c["entry"]["verdict"] == "error")
    ff = {"check": "run", "step": None, "tensor": None, "detail": err["result"]["error"]}
    err["result"]["first_failure"] = err["entry"]["first_failure"] = ff
    r = make_report(cells)
    sec = r.section(err["entry"]["id"])
    assert "<b>Error:</b> rank 2 exited with signal 9 (Killed) during load" in sec
    assert "First failure:" not in sec
    # the top list still names it
    top = r.html[r.html.index('id="failing"'):r.html.index('id="matrix"')]
    assert "rank 2 exited with signal 9" in top


def matrix_rows(html: str):
    """The matrix's row labels, top to bottom, as (optimizer, sharding type)."""
    return re.findall(r"<tr><th>([^<]*?) · ([^<]*?)</th>", matrix_html(html))[1:]


def markdown_rows(md: str):
    return re.findall(r"^\| ([^|`]*?) · ([^|]*?) \|", md, re.M)[1:]


def order_cells(monkeypatch):
    """Cells in an order that no registry would give, with a custom label
    ("adam-gpt") that no registry lists."""
    monkeypatch.setitem(synth.SCHEMAS, "adam-gpt", synth.SCHEMAS["adam"])
    return [synth.make_cell(o, "dp_reshardable", 2) for o in ("muon_lion", "adam-gpt", "lion", "adam")]


def test_matrix_rows_follow_optimizer_order(make_report, monkeypatch):
    r = make_report(order_cells(monkeypatch), optimizer_order=["muon_lion", "sgd", "lion", "adam"])
    expect = ["muon_lion", "lion", "adam", "adam-gpt"]      # listed ones first, then by appearance
    assert [o for o, _ in matrix_rows(r.html)] == expect
    assert [o for o, _ in markdown_rows(r.md)] == expect
    r = make_report(order_cells(monkeypatch), name="registry")   # synth's registry order
    assert [o for o, _ in matrix_rows(r.html)] == ["adam", "lion", "muon_lion", "adam-gpt"]


def test_matrix_without_optimizer_order_keeps_the_order_of_appearance(make_report, monkeypatch):
    cells = order_cells(monkeypatch)
    r = make_report(cells, optimizer_order=None)
    with open(os.path.join(r.dir, "results.json")) as f:
        assert '"optimizer_order"' not in f.read()
    assert [o for o, _ in matrix_rows(r.html)] == ["muon_lion", "adam-gpt", "lion", "adam"]
    assert [o for o, _ in markdown_rows(r.md)] == ["muon_lion", "adam-gpt", "lion", "adam"]
    for c in cells:
        assert f'href="#{c["entry"]["id"]}"' in matrix_html(r.html)


def test_matrix_rows_keep_sharding_types_within_an_optimizer(make_report):
    cells = [synth.make_cell("lion", "fully_reshardable", 2), synth.make_cell("adam", "dp_reshardable", 2),
             synth.make_cell("lion", "dp_reshardable", 2)]
    r = make_report(cells, optimizer_order=["lion", "adam"])
    assert matrix_rows(r.html) == [("lion", "dp_reshardable"), ("lion", "fully_reshardable"),
                                   ("adam", "dp_reshardable")]


def test_no_optimizer_is_named_in_the_report_code():
    names = set(synth.OPTIMIZER_ORDER) | set(synth.SCHEMAS) | {"muon"}
    sources = glob.glob(os.path.join(REPORTS, "*.py"))
    assert len(sources) >= 8
    for path in sources:
        text = open(path, encoding="utf-8").read()
        for name in names:
            assert not re.search(rf"\b{re.escape(name)}\b", text, re.I), f"{path} names the optimizer {name}"


def svgs_of(section: str):
    return re.findall(r"<svg.*?</svg>", section, re.S)


def test_scheduled_lr_is_drawn_on_an_lr_axis_of_the_loss_curves(make_report):
    sched = synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=8, model="gpt-tiny", steps=30,
                            lr_schedule="warmup_cosine")
    const = synth.make_cell("adamw", "dp_reshardable", 2, resume_dp=3, save_at=8, model="gpt-tiny", steps=30)
    r = make_report([sched, const])
    sec = r.section(sched["entry"]["id"])
    loss = svgs_of(sec)[0]
    assert ">loss and lr<" in loss and ">lr<" in loss and ">loss<" in loss      # title, lr axis/legend, loss axis
    assert ">reference (dp1)<" in loss and ">save at step 8<" in loss
    assert "lr <b>scheduled, 1e-05 to 0.0001</b>" in sec
    # a constant lr is said in the config line and not drawn
    sec = r.section(const["entry"]["id"])
    loss = svgs_of(sec)[0]
    assert ">loss<" in loss and ">lr<" not in loss and "loss and lr" not in loss
    assert "<span>lr <b>0.0001</b></span>" in sec


def test_oracle_cell_with_scheduled_lr_gets_its_curve_panel(make_report):
    sched = synth.make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4, lr_schedule="warmup_cosine")
    const = synth.make_cell("lion", "fully_reshardable", 2, resume_dp=3, save_at=4)
    r = make_report([sched, const])
    sec = r.section(sched["entry"]["id"])
    assert len(svgs_of(sec)) == 2 and not plot_of(sec, "diff")   # lr and grad norm; the diffs are all zero
    assert ">lr (no loss)<" in plot_of(sec, "loss") and ">save at step 4<" in plot_of(sec, "loss")
    assert "bitwise equal at every step" in sec
    sec = r.section(const["entry"]["id"])
    assert not plot_of(sec, "loss") and "<span>lr <b>0.0001</b></span>" in sec


def test_results_without_lr_render_as_before(make_report):
    cell = synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=8, model="gpt-tiny", steps=30,
                           lr_schedule=None)
    r = make_report([cell], optimizer_order=None)
    sec = r.section(cell["entry"]["id"])
    assert len(svgs_of(sec)) == 3 and ">lr<" not in plot_of(sec, "loss")
    assert "<span>lr <b>" not in sec


def test_performance_table_lists_medians_of_repeated_benchmarks(tmp_path):
    """Repetitions and Google Benchmark's other aggregates stay out of the
    table when a median exists; a benchmark run once is listed as it is."""
    from bench import Benchmark, shown
    def b(run, agg, t):
        return Benchmark("f.json", f"{run}{'_' + agg if agg else ''}", run, agg, t, t, "ms", 1, {}, None)
    rows = [b("adamw/fused/16", "", 10.0), b("adamw/fused/16", "", 12.0),
            b("adamw/fused/16", "mean", 11.0), b("adamw/fused/16", "median", 11.0),
            b("adamw/fused/16", "stddev", 1.0), b("stream/copy/16", "", 3.0)]
    listed = shown(rows)
    assert [(x.run_name, x.aggregate) for x in listed] == [("adamw/fused/16", "median"), ("stream/copy/16", "")]
