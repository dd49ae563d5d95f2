"""The performance section's "At Megatron scale (dry mode)" sub-part: a
hand-made file of bench/scale.py's shape (scale_doc) -> validation, the
slope and headline tables, the log-log figure per sweep and the HTML."""
import html as html_mod
import json
import os
import re

import pytest

import bench_plots
import bench_scale
import synth
from conftest import run_report
from load import InputError

TYPES = ["dp_reshardable", "fully_reshardable"]
QUANTITIES = ["layout_s", "plan_s", "metadata_s", "metadata_bytes", "files", "chunks", "reshard_plan_s",
              "peak_mb"]
# Each quantity of dp_reshardable as c * x**k: (c, k); fully_reshardable's are half of them, with
# files constant. reshard_plan_s grows as x**1.5: over the limit 1.1.
GROWTH = {"layout_s": (1e-7, 1.0), "plan_s": (1e-4, 1.0), "metadata_s": (3e-4, 1.0),
          "metadata_bytes": (1000.0, 1.0), "chunks": (4.0, 1.0), "reshard_plan_s": (1e-5, 1.5),
          "peak_mb": (0.5, 0.5)}
SLOPES = {"layout_s": None, "plan_s": 1.0, "metadata_s": 1.0, "metadata_bytes": 1.0, "files": 1.0,
          "chunks": 1.0, "reshard_plan_s": 1.5, "peak_mb": 0.5}


def type_result(sharding: str, x: float) -> dict:
    scale = 1.0 if sharding == TYPES[0] else 0.5
    t = {"type": sharding, "record_bytes_max": 100, "record_bytes_total": 1000, "header_bytes_max": 50,
         "header_bytes_total": 500, "files": int(x) + 1 if sharding == TYPES[0] else 2}
    for q, (c, k) in GROWTH.items():
        t[q] = scale * c * x ** k
    for q in ("metadata_bytes", "chunks"):
        t[q] = int(t[q])
    t.update(reshard_max_rank_s=t["reshard_plan_s"] / 4, reshard_pieces=9711, reshard_chunk_reads=16047)
    return t


def dry(model: str, tensors: int, dp: int, reshard_to: int = None) -> dict:
    x = dp if model == "gpt-175b" else tensors
    return {"model": model, "tensors": tensors, "elements": 174615846912, "optimizer": "adamw",
            "states": ["s1", "s2"], "model_dtype": "bf16", "dp": dp,
            "reshard_to": dp * 3 // 4 if reshard_to is None else reshard_to, "bucket_size": 16000000000,
            "buckets": 11, "types": [type_result(t, x) for t in TYPES], "start_rss_bytes": 10_000_000,
            "peak_rss_bytes": 50_000_000, "wall_s": 1.5}


def sweep(name: str, points) -> dict:
    slopes = {t: dict(SLOPES) for t in TYPES}
    slopes[TYPES[1]]["files"] = 0.0
    return {"x": name, "points": [{"x": x, "result": r} for x, r in points], "slopes": slopes}


def scale_doc() -> dict:
    """bench/scale.py's file: a dp sweep of gpt-175b, a tensors sweep of the MoE preset at dp 256."""
    return {"command": "bench/scale.py --quick", "machine": {"cpu_count": 2, "platform": "Linux"},
            "quantities": QUANTITIES, "limit": 1.1,
            "sweeps": {"dp": sweep("dp", [(dp, dry("gpt-175b", 1156, dp)) for dp in (256, 512, 1024, 2048)]),
                       "tensors": sweep("tensors", [(n, dry("deepseek-v3-moe", n, 256))
                                                    for n in (821, 2385, 5513, 11769)])},
            "headline": [dry("gpt-175b", 1156, 4096), dry("deepseek-v3-moe", 45395, 4096)],
            "seconds": 57.9}


def write(path, doc) -> str:
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f)
    return str(path)


def load(tmp_path, doc=None) -> bench_scale.Scale:
    return bench_scale.load_scale(write(tmp_path / "scale.json", doc or scale_doc()))


def test_load_reads_the_sweeps_slopes_and_headline(tmp_path):
    s = load(tmp_path)
    assert [w.name for w in s.sweeps] == ["dp", "tensors"] and s.limit == 1.1 and s.seconds == 57.9
    dp, tensors = s.sweeps
    assert dp.x == "dp" and dp.xs == [256, 512, 1024, 2048] and dp.models == ["gpt-175b"]
    assert tensors.xs == [821, 2385, 5513, 11769] and tensors.types == TYPES
    assert dp.slopes[TYPES[0]]["reshard_plan_s"] == 1.5 and dp.slopes[TYPES[0]]["layout_s"] is None
    assert dp.points[1].value(TYPES[0], ["plan_s", "metadata_s"]) == pytest.approx(4e-4 * 512)
    assert dp.points[1].value(TYPES[0], ["no_such_quantity"]) is None
    assert [d["model"] for d in s.headline] == ["gpt-175b", "deepseek-v3-moe"]


def test_the_fit_is_bench_scale_pys_log_log_slope():
    xs = [256, 512, 1024, 2048]
    assert bench_scale.fit_slope(xs, [3 * x ** 1.5 for x in xs]) == pytest.approx(1.5)
    assert bench_scale.fit_slope(xs, [1, 0, 1, 1]) is None
    assert bench_scale.fit_slope([256], [1.0]) is None


def _without(doc, *path):
    d = doc
    for k in path[:-1]:
        d = d[k]
    del d[path[-1]]


def _set(value, *path):
    def change(doc):
        d = doc
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value
    return change


@pytest.mark.parametrize("change, message", [
    (lambda d: _without(d, "limit"), "limit: missing"),
    (lambda d: _without(d, "headline", 1, "dp"), "headline[1].dp: missing"),
    (_set("slow", "sweeps", "dp", "points", 1, "result", "types", 0, "plan_s"),
     "sweeps.dp.points[1].result.types[0].plan_s: expected num, got the string 'slow'"),
    (_set([], "sweeps", "tensors", "slopes", "dp_reshardable"),
     "sweeps.tensors.slopes.dp_reshardable: expected an object, got a list"),
    (_set("1.2", "sweeps", "tensors", "slopes", "dp_reshardable", "plan_s"),
     "sweeps.tensors.slopes.dp_reshardable.plan_s: expected num, got the string '1.2'"),
    (_set(0, "sweeps", "dp", "points", 0, "x"), "sweeps.dp.points[0].x: expected a positive number, got 0"),
    (_set(2.5, "sweeps", "dp", "points", 0, "result", "types", 1, "files"),
     "sweeps.dp.points[0].result.types[1].files: expected int, got a number"),
    (_set([1], "quantities"), "quantities[0]: expected a string (a dry --json field name)"),
    (_set({"x": "dp"}, "sweeps", "dp size"), "sweeps.dp size: a sweep's name must be letters, digits, _ or -"),
])
def test_a_malformed_file_names_the_key(tmp_path, change, message):
    doc = scale_doc()
    change(doc)
    path = write(tmp_path / "scale.json", doc)
    with pytest.raises(InputError) as e:
        bench_scale.load_scale(path)
    assert str(e.value) == f"{path}: {message}"


def test_make_report_says_what_is_wrong_in_one_line(tmp_path):
    out = synth.write_results(str(tmp_path / "r"), synth.all_passing())
    doc = scale_doc()
    del doc["sweeps"]["dp"]["points"][2]["result"]["types"][0]["metadata_bytes"]
    path = write(tmp_path / "scale.json", doc)
    proc = run_report(out, "--scale", path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"make_report.py: error: {path}: "
                                   "sweeps.dp.points[2].result.types[0].metadata_bytes: missing")
    missing = str(tmp_path / "nowhere.json")
    proc = run_report(out, "--scale", missing, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith(f"make_report.py: error: {missing}: (file): cannot read")
    assert not os.path.exists(os.path.join(out, "report.html"))


def test_the_slope_table_flags_slopes_over_the_limit(tmp_path):
    tables = bench_scale.slope_tables(load(tmp_path))
    assert [t.sweep.name for t in tables] == ["dp", "tensors"]
    dp = tables[0]
    assert dp.quantities == QUANTITIES and [r.type for r in dp.rows] == TYPES
    row = dp.rows[0]
    assert [bench_scale.slope_text(c.slope) for c in row.cells] == \
        ["–", "1.00", "1.00", "1.00", "1.00", "1.00", "1.50", "0.50"]
    assert [c.quantity for c in row.cells if c.over] == ["reshard_plan_s"]
    assert dp.over == [(TYPES[0], "reshard_plan_s"), (TYPES[1], "reshard_plan_s")]


def test_a_slope_at_the_limit_is_not_flagged(tmp_path):
    doc = scale_doc()
    for by_type in doc["sweeps"]["dp"]["slopes"].values():
        by_type["reshard_plan_s"] = 1.1
    assert bench_scale.slope_tables(load(tmp_path, doc))[0].over == []


def test_headline_rows(tmp_path):
    doc = scale_doc()
    doc["headline"][1]["reshard_to"] = 0                      # no resharded load planned
    for t in doc["headline"][1]["types"]:
        for q in ("reshard_plan_s", "reshard_max_rank_s", "reshard_pieces", "reshard_chunk_reads", "peak_mb"):
            del t[q]
    rows = bench_scale.headline_rows(load(tmp_path, doc))
    assert [(r.model, r.type) for r in rows] == [("gpt-175b", TYPES[0]), ("gpt-175b", TYPES[1]),
                                                ("deepseek-v3-moe", TYPES[0]), ("deepseek-v3-moe", TYPES[1])]
    first = rows[0]
    assert first.dp_text == "4096 → 3072" and first.metadata_bytes == 4096000 and first.files == 4097
    assert first.reshard_s == pytest.approx(1e-5 * 4096 ** 1.5) and first.peak_mb == pytest.approx(0.5 * 64)
    moe = rows[2]
    assert moe.dp_text == "4096" and moe.reshard_s is None
    assert moe.peak_mb == pytest.approx(40.0)                 # peak_rss_bytes - start_rss_bytes


def test_each_sweep_has_one_figure_of_log_log_panels_with_slopes(tmp_path):
    dp = load(tmp_path).sweeps[0]
    fig = bench_plots.scale_figure(dp)
    assert len(fig.axes) == 4
    assert all(a.get_xscale() == a.get_yscale() == "log" for a in fig.axes)
    legends = [[t.get_text() for t in a.get_legend().get_texts()] for a in fig.axes]
    assert legends[0] == [f"{TYPES[0]}: slope 1.00", f"{TYPES[1]}: slope 1.00"]
    assert legends[2] == [f"{TYPES[0]}: slope 1.50", f"{TYPES[1]}: slope 1.50"]
    assert legends[3] == [f"{TYPES[0]}: slope 0.50", f"{TYPES[1]}: slope 0.50"]
    assert legends[1] == [f"{TYPES[0]}: slope 1.00", f"{TYPES[1]}: slope 1.00"]   # plan + metadata, fitted here
    line = fig.axes[1].get_lines()[0]
    assert list(line.get_xdata()) == [256, 512, 1024, 2048]
    assert list(line.get_ydata()) == pytest.approx([4e-4 * x for x in (256, 512, 1024, 2048)])


def test_a_panel_without_lines_is_left_out(tmp_path):
    doc = scale_doc()
    for p in doc["sweeps"]["tensors"]["points"]:
        for t in p["result"]["types"]:
            del t["reshard_plan_s"]
            t["peak_mb"] = 0.0                                # nothing a log axis can show
    tensors = load(tmp_path, doc).sweeps[1]
    fig = bench_plots.scale_figure(tensors)
    assert [a.get_title() for a in fig.axes] == ["metadata.json against tensors",
                                                 "save plan + metadata against tensors"]
    for p in doc["sweeps"]["tensors"]["points"]:
        p["result"]["types"] = []
    assert bench_plots.scale_figure(load(tmp_path, doc).sweeps[1]) is None


def scale_part(html: str) -> str:
    start = html.index('id="cost-scale"')
    return html[start:html.index('id="cells"', start)]


def table_rows(html: str, table_id: str):
    """The cells of a table's body rows, tags stripped."""
    start = html.index(f'id="{table_id}"')
    body = html[start:html.index("</table>", start)]
    return [[html_mod.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
            for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)[1:]]


def test_the_html_shows_the_sub_part_in_how_cost_grows(make_report, tmp_path):
    path = write(tmp_path / "out" / "scale" / "scale.json", scale_doc())
    r = make_report(synth.all_passing(), bench={"optimizer_step.json": synth.growth_bench_doc()},
                    extra_args=["--scale", path])
    html = r.html
    assert html.index('id="performance"') < html.index('id="cost-growth"') < html.index('id="cost-state"') \
        < html.index('id="cost-scale"') < html.index('id="cells"')
    part = scale_part(html)
    assert "At Megatron scale (dry mode)" in part and f"From <code>{path}</code>" in part
    assert "with no tensor data" in part and "fitted by least squares over the sweep" in part
    svgs = re.findall(r"<svg.*?</svg>", part, re.S)
    assert len(svgs) == 2                                         # one figure per sweep
    assert f">{TYPES[0]}: slope 1.50<" in svgs[0] and ">tensors<" in svgs[1]
    rows = table_rows(part, "scale-slopes-dp")
    assert rows[0] == [TYPES[0], "–", "1.00", "1.00", "1.00", "1.00", "1.00", "1.50", "0.50"]
    assert rows[1][5] == "0.00"
    assert part.count('<td class="n flag" title="above 1.1">1.50</td>') == 4    # 2 types x 2 sweeps
    assert f"2 slopes above 1.1</b>: {TYPES[0]} reshard_plan_s, {TYPES[1]} reshard_plan_s" in part
    head = table_rows(part, "scale-headline")
    assert head[0] == ["gpt-175b", "1156", "4096 → 3072", TYPES[0], "4.1", "4097", "16384", "0.41", "1.23",
                       f"{1e-5 * 4096 ** 1.5:.3g}", "32.0"]
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert not {i for i in ids if ids.count(i) > 1}
    for ref in re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', html):
        assert (ref[0] or ref[1]) in ids


def test_a_scale_file_alone_makes_the_performance_section(make_report, tmp_path):
    write(tmp_path / "r" / "scale" / "scale.json", scale_doc())   # the default: RESULTS_DIR/scale/scale.json
    r = make_report(synth.all_passing())
    assert '<a href="#performance">Performance</a>' in r.html
    perf = r.html[r.html.index('id="performance"'):r.html.index('id="cells"')]
    assert 'id="cost-growth"' in perf and 'id="cost-scale"' in perf
    assert "Google Benchmark" not in perf and 'id="cost-dist-step"' not in perf
    doc = scale_doc()
    doc["headline"] = []
    path = write(tmp_path / "quick.json", doc)
    r = make_report(synth.all_passing(), name="quick", extra_args=["--scale", path])
    assert 'id="scale-headline"' not in r.html and 'id="scale-slopes-tensors"' in r.html


def test_without_a_scale_file_nothing_changes(make_report):
    r = make_report(synth.all_passing(), bench={"optimizer_step.json": synth.growth_bench_doc()})
    assert 'id="cost-growth"' in r.html and 'id="cost-scale"' not in r.html
    assert 'id="performance"' not in make_report(synth.all_passing(), name="bare").html


def test_help_names_the_scale_option():
    out = run_report("--help").stdout
    assert "--scale FILE" in out and "RESULTS_DIR/scale/scale.json" in out and "dry" in out


def test_the_render_call_of_older_callers_still_works(tmp_path):
    import load as load_mod
    import render_html
    out = synth.write_results(str(tmp_path / "r"), synth.all_passing())
    html = render_html.render(load_mod.load_results(out))
    assert 'id="performance"' not in html
    html = render_html.render(load_mod.load_results(out), scale=load(tmp_path))
    assert 'id="cost-scale"' in html
