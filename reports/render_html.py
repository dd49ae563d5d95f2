"""The self-contained HTML report: view models for templates/report.html.j2.

`render(results, ...)` returns one HTML document with inline CSS and inline
SVG plots; it loads nothing from the network and runs no script. Below the
header, a block (id "answers", answers.py) answers the reviewer's three
questions: what failed first, what changed against the baseline, what was
not covered. Cell sections come failing/errored first, then the others
(passing, skipped), each in run order, and each section's id is the cell id
(the matrix links to it). With a selftest.json beside results.json, a
"Detection power" section (id "detection", detection.py) comes before the
cells, linked from the navigation. When an external system appears at two
or more releases (megatron-core@0.18.2 and @0.19.2), a "Releases compared"
section (id "releases", releases.py) follows the navigation: one table per
system base pairing its cells across releases, with what changed.

The header's headline (headline.py) says the run's verdict and what it
rests on: PASS only when some cell ran its checks, NOTHING CHECKED (in a
failure's colour) when none did, and an interrupted run says so there.

Red marks failure only: a group table row is red only when a check that
covers the group failed (summary.group_coverage), and then only the figures
of the runs that check failed in; a group that no check covers is shown
muted and "not checked". A tolerance check shows the figure that decided
it against its bound (summary.judgement), and a group table shows only the
figures its checks use (summary.figures_used); differing elements beside a
tolerance check are marked as informational.

To keep pages with hundreds of cells fast, plots are drawn for at most
`failing_plots` failing/errored cells and `passing_plots` passing ones;
passing cells are picked one per matrix row first, then in run order,
among cells that have something to draw: first those with a loss, a
scheduled lr or a nonzero difference, then those with only a grad norm
(summary.plot_priority). Every cell keeps its tables.

The performance section lists the benchmarks (medians of repeated ones)
and, when shardcheck_bench's DistributedOptimizer, per-rank state or
checkpoint families are there, a "How cost grows" part (bench.cost_growth,
bench_plots): their tables and log-log plots against the model size.
With bench/scale.py's file (`scale`, bench_scale.py) that part gets "At
Megatron scale (dry mode)": per sweep, the fitted slopes per sharding type
and quantity (those above the file's limit flagged) and one figure of
log-log panels, then the headline runs; the performance section then shows
even without benchmarks.
"""
import dataclasses
import os
import re
import urllib.parse
from typing import Dict, List, Optional

import jinja2
from markupsafe import Markup

import answers as answers_mod
import bench_plots
import bench_scale
import compare as compare_mod
import headline as headline_mod
import matrix as matrix_mod
import plots
import releases as releases_mod
import summary
from bench import STEP_SPLIT, Benchmark, Repeated, cost_growth, ratios, shown
from bench_format import factor as fmt_factor, mb as fmt_mb, ms as fmt_ms, rate as fmt_rate, size_label
from bench_scale import Scale
from detection import Detection
from load import FAILED, Cell, Results, counts_of

# The verdicts whose section shows where the cell first broke: those that fail the run
# and the expected failures, which broke as declared.
SHOWS_FIRST_FAILURE = FAILED + ("xfail",)
# The first failure's check of an xpass cell: no check failed, its expectation did.
EXPECTED_FAILURE = "expected-failure"

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


@dataclasses.dataclass
class Options:
    passing_plots: int = 60
    failing_plots: int = 200
    html_name: str = "report.html"
    bench_dir: str = "bench"   # where the performance section's JSON came from, as shown


def href(cell_id: str) -> str:
    """The in-page link to a cell's section."""
    return "#" + urllib.parse.quote(cell_id, safe="-._~!$&'()*+,;=:@/?")


def fmt_num(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if v == 0:
        return "0"
    return f"{v:.3g}"


def fmt_secs(v) -> str:
    """Seconds with one decimal, or a dash for None."""
    return "—" if v is None else f"{v:.1f} s"


def fmt_bytes(v) -> str:
    if v is None:
        return "—"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(v) >= size:
            return f"{v / size:.1f} {unit}"
    return f"{v} B"


def fmt_spread(r: Optional[Repeated]) -> str:
    """"12.3 (11.9–13.0)": the median (min–max) ms of a benchmark's repetitions."""
    if r is None:
        return "—"
    if len(r.ms) == 1:
        return fmt_ms(r.median)
    return f"{fmt_ms(r.median)} ({fmt_ms(r.low)}–{fmt_ms(r.high)})"


def choose_plotted(cells: List[Cell], options: Options) -> Dict[str, str]:
    """Cell id -> "" for cells whose plots are drawn, or a note saying why not."""
    out: Dict[str, str] = {}
    bad = [c for c in cells if c.verdict != "pass" and summary.plot_priority(c.result)]
    good = sorted((c for c in cells if c.verdict == "pass" and summary.plot_priority(c.result)),
                  key=lambda c: -summary.plot_priority(c.result))
    for c in bad[:options.failing_plots]:
        out[c.id] = ""
    picked, rows = [], set()
    for c in good:                      # one per matrix row first
        row = matrix_mod.row_of(c)
        if row not in rows and len(picked) < options.passing_plots:
            rows.add(row)
            picked.append(c)
    for c in good:
        if len(picked) >= options.passing_plots:
            break
        if c not in picked:
            picked.append(c)
    for c in picked:
        out[c.id] = ""
    note_bad = (f"plots left out: only the first {options.failing_plots} failing cells are drawn "
                f"(--failing-plots)")
    note_good = (f"plots left out to keep the page small: {len(picked)} of {len(good)} passing cells "
                 f"with something to draw are drawn (--passing-plots)")
    for c in bad + good:
        out.setdefault(c.id, note_bad if c.verdict != "pass" else note_good)
    return out


GROUP_STATUS = {"fail": "failed", "pass": "passed", "unchecked": "not checked"}
PASSED_KIND = {"bitwise": "bitwise equal", "tolerance": "within tolerance"}
# What a figure column shows where no check of the group uses that figure.
UNUSED = {"rel": "no check of this group judges relative error",
          "ulp": "no check of this group judges ULP distances",
          "elements": "no check of this group counts differing elements"}
# The note beside differing elements that a tolerance check allows.
TOLERATED = "informational: the tolerance allows elements to differ"


def _judged(checks: List[dict]) -> List[dict]:
    """The deciding figure of each tolerance check among `checks` (failed
    ones first): {"name", "text", "within"}, the text led by the check's
    run ("resumed: max rel 1 > 1.3e-3") when several checks judge the group."""
    judged = [(c, summary.judgement(c)) for c in sorted(checks, key=lambda c: c["verdict"] != "fail")]
    judged = [(c, j) for c, j in judged if j is not None]
    return [{"name": c["name"], "within": j.within,
             "text": f"{c['run']}: {j.text}" if len(judged) > 1 and c.get("run") else j.text}
            for c, j in judged]


def _group_status(result: dict, group: str, checks: List[dict], elsewhere: List[str] = ()) -> dict:
    """The status cell of a group row: its verdict, a short text, the
    deciding figure of each tolerance check against its bound, and the names
    of the checks behind it (or why none applies; `elsewhere` names the
    checks that judge the group in another comparison of the cell)."""
    verdict = summary.group_verdict(checks)
    if verdict == "fail":
        text = ", ".join(c["name"] for c in checks if c["verdict"] == "fail")
    elif verdict == "pass":
        text = ", ".join(dict.fromkeys(PASSED_KIND.get(c["kind"], c["kind"]) for c in checks))
    else:
        text = summary.unchecked_reason(result, group)
        if elsewhere:
            text += "; against the single-device run (below): " + ", ".join(elsewhere)
    return {"verdict": verdict, "label": GROUP_STATUS[verdict], "text": text, "judged": _judged(checks),
            "checks": ", ".join(c["name"] for c in checks)}


def _figure_tone(verdict: str, checks: List[dict], run: str, runs: List[str]) -> str:
    """The class of a group's figures in one run's columns: "bad" (red) when a
    check that failed covers the group in that run, "muted" when no check
    covers the group, else "" (neutral, whatever the figures)."""
    if verdict == "unchecked":
        return "muted"
    failed = [c for c in checks if c["verdict"] == "fail"]
    return "bad" if any(run in summary.check_runs(c, runs) for c in failed) else ""


def _figure_classes(tone: str, stats: summary.GroupStats, used: List[str]) -> Dict[str, str]:
    """The class of each figure of one run's columns: "muted" on every figure
    of an unchecked group and on a figure no check uses (shown as a dash);
    "bad" only on a nonzero figure that a failed check uses."""
    values = {"abs": stats.max_abs.value, "rel": stats.max_rel.value, "ulp": stats.max_ulp.value,
              "elements": stats.mismatches.value}
    return {name: "muted" if tone == "muted" or name not in used else (tone if value else "")
            for name, value in values.items()}


def _run_figures(stats: summary.GroupStats, tone: str, used: List[str], tolerated: bool) -> dict:
    """One run's figures in a group row: max abs/rel/ULP and the most
    differing elements at a step, each None where no check uses it (`used`;
    the column then says why on hover), their classes, the sign-change note
    beside the ULP figure, and the note beside differing elements that only a
    tolerance check judges (`tolerated`: informational, never red)."""
    show = used + (["elements"] if tolerated else [])
    elements_note = None
    if tolerated and stats.mismatches.value:
        elements_note = TOLERATED
    elif stats.mismatch_steps > 1:
        elements_note = f"at {stats.mismatch_steps} steps"
    return {"abs": stats.max_abs, "rel": stats.max_rel if "rel" in show else None,
            "ulp": stats.max_ulp if "ulp" in show else None,
            "elements": stats.mismatches if "elements" in show else None, "elements_note": elements_note,
            "unused": UNUSED, "mismatch_steps": stats.mismatch_steps,
            "sign_note": summary.sign_change_note(stats.sign_changes) if "ulp" in show else None,
            "cls": _figure_classes(tone, stats, used)}


def _group_rows(r: dict, ff: Optional[dict], elsewhere: Optional[Dict[str, List[str]]] = None) -> dict:
    """The group table of one comparison of a cell (summary.reference_view
    or summary.single_device_view): one row per group with its status and,
    per compared run, its max abs/rel/ULP, steps with mismatches and
    sign-change note; `ff` (the cell's first failure) marks the group of
    its tensor; `elsewhere` (group -> check names) names the checks that
    judge a group in the other comparison."""
    stats = summary.group_stats(r)
    runs = summary.diff_runs(r)
    coverage = summary.group_coverage(r)
    tensor_parts = set(((ff or {}).get("tensor") or "").split("."))
    rows = []
    for group in r.get("groups", []):
        per_run = [s for s in stats if s.group == group]
        checks = coverage[group]
        status = _group_status(r, group, checks, (elsewhere or {}).get(group, []))
        used = summary.figures_used(checks)
        tolerated = bool(checks) and "elements" not in used   # only tolerance checks: informational
        rows.append({"group": group, "owner": per_run[0].owner if per_run else "",
                     "suspect": group in tensor_parts, "status": status,
                     "runs": [_run_figures(s, _figure_tone(status["verdict"], checks, s.run, runs), used, tolerated)
                              for s in per_run]})
    run_labels = [plots.run_label(name, r["runs"][name]) for name in runs]
    return {"runs": run_labels, "rows": rows, "rel_label": summary.rel_label(r)}


def _check_row(check: dict) -> dict:
    """A row of a cell's checks table: the check, the figure that decided a
    tolerance check against its bound ("judged"), whether its max rel and
    max ULP seen mean anything to it, and its against and detail with any
    SEMANTICS.md citation pointed at the docs (summary.cite_docs)."""
    j = summary.judgement(check)
    return dict(check, judged=j.text if j else None, judged_within=j.within if j else None,
                rel_used=summary.uses_rel(check), ulp_used=summary.uses_ulp(check),
                against_text=summary.cite_docs(check.get("against")) or "?",
                detail_text=summary.cite_docs(check.get("detail")) or "")


def _failing_check_judged(cell: Cell, ff: Optional[dict]) -> Optional[str]:
    """The deciding figure of the check a cell first failed, when that is a
    tolerance check: "max rel 2.1e-2 > 1e-3"; else None."""
    name = (ff or {}).get("check")
    check = next((c for c in (cell.result or {}).get("checks", []) if c["name"] == name), None)
    j = summary.judgement(check) if check else None
    return j.text if j else None


def _single_device_checks(result: Optional[dict]) -> Dict[str, List[str]]:
    """Group -> the names of the checks against an external system's
    single-device run that cover it (n/a ones left out)."""
    out: Dict[str, List[str]] = {}
    for c in (result or {}).get("checks", []):
        if c.get("against") == summary.SINGLE_DEVICE and c["verdict"] != "n/a":
            for group in summary.check_groups(result, c):
                out.setdefault(group, []).append(c["name"])
    return out


def _expected(cell: Cell) -> Optional[dict]:
    """The expected-failure box of a cell declared expected to fail: its
    reason (the docs/findings.md reference apart), the check expected to
    fail first when named, and what it got; None for other cells."""
    exp = summary.expectation(cell)
    if exp is None:
        return None
    return {"verdict": cell.verdict, "reason": exp.reason, "ref": exp.ref, "text": exp.text,
            "got": exp.got, "got_text": exp.got_text, "failing_check": exp.failing_check}


def _system(cell: Cell) -> Optional[dict]:
    """An external system's part of a section: its name, the versions its
    adapter reported, and each adapter run's exit code, log, error and notes."""
    r = cell.result or {}
    if not cell.external and not r.get("adapter"):
        return None
    runs = [{"run": a["run"], "exit_code": a.get("exit_code"), "log": a.get("log"),
             "error": summary.adapter_error_line(a.get("error")),
             "traceback": (a.get("error") or {}).get("traceback"), "notes": a.get("notes") or []}
            for a in r.get("adapter") or []]
    return {"name": cell.system, "versions": summary.system_versions(r), "runs": runs,
            "state_keys": r.get("system_state_keys") or []}


def _single_device(cell: Cell, index: int, plotted: bool, ff: Optional[dict]) -> Optional[dict]:
    """The group table and |diff| plot of the distributed runs against the
    system's single-device run; None for a cell without them."""
    view = summary.single_device_view(cell.result)
    if view is None:
        return None
    svg, zero = None, summary.zero_series(view)
    if plotted:
        svg, zero = plots.diff_svg(view, f"c{index}s", (ff or {}).get("step"), against="single device")
    return {"groups": _group_rows(view, ff), "diff_svg": Markup(svg) if svg else None, "zero": zero,
            "all_zero": len(zero) == len(view["runs"]) * len(view["groups"])}


def _memory(result: Optional[dict]) -> Optional[dict]:
    memory = (result or {}).get("memory") or []
    if not memory:
        return None
    columns: List[tuple] = []
    for rank in memory:
        for e in rank["entries"]:
            key = (e.get("child") or "", e["key"])
            if key not in columns:
                columns.append(key)
    rows = []
    for rank in memory:
        by_key = {(e.get("child") or "", e["key"]): e for e in rank["entries"]}
        rows.append({"rank": rank["rank"], "owned": rank.get("owned_elements"),
                     "total": rank.get("total_bytes"),
                     "entries": [by_key.get(k) for k in columns]})
    return {"columns": columns, "rows": rows}


def _section(cell: Cell, index: int, plot_note: Optional[str], comparison) -> dict:
    r = cell.result
    ff = summary.first_failure(cell) if cell.verdict in SHOWS_FIRST_FAILURE else None
    if ff and ff.get("step") is None and ff.get("tensor") is None \
            and ff.get("detail") == (r or {}).get("error"):
        ff = None                       # an error with no failing check: the error box says it all
    if ff and cell.verdict == "xpass" and ff.get("check") == EXPECTED_FAILURE:
        ff = None                       # no check failed: the expected-failure box says it all
    loss_svg = grad_svg = diff_svg = base_svg = None
    zero = summary.zero_series(r)
    uid = f"c{index}"
    if r and plot_note == "":
        loss = plots.loss_svg(r, uid + "l")
        loss_svg = Markup(loss) if loss else None
        grad = plots.grad_norm_svg(r, uid + "g")
        grad_svg = Markup(grad) if grad else None
        then = comparison.baseline.result if comparison and comparison.baseline else None
        base = plots.baseline_svg(r, then, uid + "b") if then else None
        base_svg = Markup(base) if base else None
        diff, zero = plots.diff_svg(summary.reference_view(r), uid + "d", (ff or {}).get("step"))
        diff_svg = Markup(diff) if diff else None
    runs = summary.diff_runs(r)
    all_zero = bool(runs) and len(zero) == len(runs) * len(r["groups"])
    return {"id": cell.id, "href": href(cell.id), "verdict": cell.verdict, "cell": cell,
            "config": summary.config_line(cell), "schema": list((r or {}).get("schema", {}).items()),
            "error": (r or {}).get("error"), "missing_result": r is None,
            "result_path": cell.result_path, "first_failure": ff,
            "skipped": summary.skip_reason(cell) if cell.verdict == "skipped" else None,
            "loss_svg": loss_svg, "grad_svg": grad_svg, "diff_svg": diff_svg, "baseline_svg": base_svg, "zero": zero, "all_zero": all_zero,
            "plot_note": plot_note or None,
            "groups": _group_rows(summary.reference_view(r), ff, _single_device_checks(r)) if r else None,
            "checks": [_check_row(c) for c in (r or {}).get("checks", [])],
            "memory": _memory(r), "comparison": comparison, "expected": _expected(cell),
            "system": _system(cell), "single_device": _single_device(cell, index, plot_note == "", ff)}


def _cost_growth(benchmarks: List[Benchmark]) -> Optional[dict]:
    """The "How cost grows" part: bench.cost_growth's tables and their plots;
    None when none of its families is there."""
    growth = cost_growth(benchmarks)
    if growth is None:
        return None
    return {"dist_step": growth.dist_step, "state": growth.state, "checkpoint": growth.checkpoint,
            "split": STEP_SPLIT,
            "step_svg": _growth_svg(bench_plots.dist_step_figure(growth.dist_step), "perf-step"),
            "split_svg": _growth_svg(bench_plots.dist_split_figure(growth.dist_step), "perf-split"),
            "checkpoint_svg": _growth_svg(bench_plots.checkpoint_figure(growth.checkpoint), "perf-ckpt")}


def _growth_svg(fig, uid: str) -> Optional[dict]:
    """{"svg": the inline SVG, "width": its natural width in CSS px}, or None."""
    text = bench_plots.svg_or_none(fig, uid)
    if not text:
        return None
    view_box = re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) ', text)
    return {"svg": Markup(text), "width": round(float(view_box.group(1)) * 4 / 3) if view_box else 520}


def _scale(scale: Optional[Scale]) -> Optional[dict]:
    """The "At Megatron scale (dry mode)" part: per sweep its slope table and
    figure, and the headline rows; None without a scale file."""
    if scale is None:
        return None
    sweeps = [{"table": table, "svg": _growth_svg(bench_plots.scale_figure(table.sweep), f"perf-scale-{i}")}
              for i, table in enumerate(bench_scale.slope_tables(scale))]
    return {"scale": scale, "sweeps": sweeps, "headline": bench_scale.headline_rows(scale)}


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=fmt_num, bytes=fmt_bytes, secs=fmt_secs, ms=fmt_ms, spread=fmt_spread,
                       factor=fmt_factor, rate=fmt_rate, mb=fmt_mb, size=size_label,
                       slope=bench_scale.slope_text)
    env.globals.update(href=href, symbol=matrix_mod.SYMBOL, worst=matrix_mod.worst, run_label=headline_mod.run_label,
                       text_symbol=headline_mod.TEXT_SYMBOL,
                       skip_reason=summary.skip_reason,
                       verdict_label=lambda v: matrix_mod.VERDICT_LABEL.get(v, v),
                       loss_shift_rtol=compare_mod.LOSS_SHIFT_RTOL,
                       grad_norm_shift_rtol=compare_mod.GRAD_NORM_SHIFT_RTOL, perf_tol=compare_mod.PERF_CHANGE_TOL)
    return env


def render(results: Results, baseline: Optional[Results] = None, benchmarks: List[Benchmark] = (),
           options: Options = Options(), baseline_benchmarks: List[Benchmark] = (),
           detection: Optional[Detection] = None, scale: Optional[Scale] = None) -> str:
    """The report as one HTML string; `detection` (RESULTS_DIR/selftest.json)
    adds the "Detection power" section, `scale` (bench/scale.py's file) the
    "At Megatron scale (dry mode)" part of the performance section; None
    leaves either out."""
    comparisons = compare_mod.compare(results, baseline) if baseline else []
    changes = compare_mod.baseline_changes(comparisons, benchmarks, baseline_benchmarks) if baseline else None
    by_id = {c.id: c for c in comparisons}
    plotted = choose_plotted(results.cells, options)
    bad = [c for c in results.cells if c.verdict in FAILED]
    xfailed = [c for c in results.cells if c.verdict == "xfail"]
    ordered = bad + xfailed + [c for c in results.cells if c.verdict not in FAILED and c.verdict != "xfail"]
    sections = [_section(c, i, plotted.get(c.id), by_id.get(c.id)) for i, c in enumerate(ordered)]
    failing = []
    for c in bad:
        ff = summary.first_failure(c)
        failing.append({"id": c.id, "href": href(c.id), "verdict": c.verdict, "ff": ff,
                        "judged": _failing_check_judged(c, ff)})
    expected = [dict(_expected(c), id=c.id, href=href(c.id), system=c.system if c.external else None)
                for c in results.cells if summary.expectation(c) is not None]
    agg = results.aggregate
    listed = shown(list(benchmarks))
    bench_ratios = ratios(listed)
    counter_names = []
    for b in listed:
        counter_names += [k for k in b.counters if k not in counter_names]
    return _environment().get_template("report.html.j2").render(
        agg=agg, env=agg["environment"], counts=agg.get("counts") or counts_of(results),
        head=headline_mod.headline(results),
        results=results, warnings=results.warnings, answers=answers_mod.answer(results, changes),
        matrix=matrix_mod.build(results.cells, agg.get("optimizer_order")),
        verdicts_shown=[v for v in matrix_mod.SYMBOL if any(c.verdict == v for c in results.cells)],
        sections=sections, failing=failing, expected=expected, by_id=by_id,
        baseline=baseline, comparisons=comparisons,
        flagged=[c for c in comparisons if c.flags], unflagged=[c for c in comparisons if not c.flags],
        benchmarks=listed, ratios=bench_ratios, counter_names=counter_names,
        growth=_cost_growth(list(benchmarks)), scale=_scale(scale),
        detection=detection, releases=releases_mod.compare_releases(results.cells),
        plotted_count=sum(1 for v in plotted.values() if v == ""), options=options)
