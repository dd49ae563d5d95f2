"""What the top of the report promises: PASS only when something was
checked, skips counted and explained, interrupted runs said first, tolerance
checks shown by the figure that decided them against its bound; and
ci/pr-report's help."""
import json
import os
import re
import subprocess

import pytest

import summary
import synth
from conftest import REPORTS, run_report
from load import load_results

GPU_REASON = "needs 2 GPUs (one per rank), 0 available"
ROOT = os.path.dirname(REPORTS)


def skipped_cells(reason=GPU_REASON):
    """The all_passing set as a machine without a GPU skips it."""
    return [synth.make_cell(c["entry"]["optimizer"], c["entry"]["sharding_type"], c["entry"]["dp"],
                            resume_dp=c["entry"]["resume_dp"], save_at=c["entry"]["save_at"], skipped=reason)
            for c in synth.all_passing()]


def headline_of(html: str) -> str:
    return re.search(r'<p id="headline"[^>]*>(.*?)</p>', html, re.S).group(1)


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def group_row(section: str, group: str) -> str:
    """The HTML of one row of a section's group table."""
    body = section[section.index('<table class="groups">'):]
    body = body[:body.index("</table>")]
    return next(row for row in re.findall(r'<tr class="g-[^"]*">.*?</tr>', body, re.S)
                if f"<code>{group}</code>" in row)


# ---- nothing checked ---------------------------------------------------------

def test_all_skipped_is_nothing_checked_never_pass(make_report):
    r = make_report(skipped_cells())
    assert json.load(open(os.path.join(r.dir, "results.json")))["verdict"] == "nothing-checked"
    top = r.html[r.html.index("</style>"):r.html.index('<section id="answers">')]
    assert '<span class="badge big v-nothing-checked">NOTHING CHECKED</span>' in top
    assert headline_of(r.html) == "⚠ NOTHING CHECKED: 0 of 4 cells ran (4 skipped)"
    assert "v-pass" not in top and "PASS" not in top
    assert "<title>shardcheck report — NOTHING CHECKED" in r.html
    assert "Nothing failed, but nothing was checked: 0 of 4 cells ran their checks (4 skipped)" in text(r.html)
    assert "✓ Nothing failed" not in r.html
    # every skipped cell gives its reason: in the answers, its section and the matrix
    assert f"({GPU_REASON})" in text(r.html[r.html.index('<section id="answers">'):])
    for c in r.html.split('<section class="cell v-skipped"')[1:]:
        assert f"<b>Skipped:</b> {GPU_REASON}" in c
    assert r.html.count(f": skipped: {GPU_REASON}\"") == 4            # the matrix entries' titles
    assert "no reason given" not in r.html and "no reason given" not in r.md
    # the Markdown's heading, first answer and its table of skipped cells
    assert r.md.startswith("## shardcheck: ⚠️ NOTHING CHECKED: 0 of 4 cells ran (4 skipped)\n")
    assert "- **Failed first:** nothing, but ⚠️ nothing was checked: 0 of 4 cells ran their checks (4 skipped)." \
        in r.md
    skipped = r.md.split("### Skipped cells", 1)[1]
    assert skipped.count(f"| {GPU_REASON} |") == 4
    assert r.proc.stdout.startswith("make_report.py: NOTHING CHECKED: 4 cells")
    assert load_results(r.dir).warnings == []


@pytest.mark.parametrize("verdict", ["pass", ""])
def test_older_results_that_checked_nothing_are_not_a_pass(make_report, verdict):
    """Older results said "pass" (or, without a verdict, nothing): zero cells ran means nothing was checked."""
    r = make_report(skipped_cells(), verdict=verdict)
    said = json.load(open(os.path.join(r.dir, "results.json"))).get("verdict")
    assert said == (verdict or None)
    assert headline_of(r.html) == "⚠ NOTHING CHECKED: 0 of 4 cells ran (4 skipped)"
    assert r.md.startswith("## shardcheck: ⚠️ NOTHING CHECKED")
    assert 'class="warn"' not in r.html and load_results(r.dir).warnings == []


def test_no_reason_given_only_when_the_field_is_absent(make_report):
    cells = skipped_cells()
    del cells[0]["entry"]["skipped"], cells[0]["result"]["skipped"]
    r = make_report(cells)
    assert r.html.count("<b>Skipped:</b> no reason given") == 1
    assert r.html.count(f"<b>Skipped:</b> {GPU_REASON}") == 3
    assert summary.skip_reason(load_results(r.dir).cells[1]) == GPU_REASON


def test_a_cell_skipped_without_result_json_gives_the_reason_of_results_json(tmp_path):
    cells = skipped_cells()
    out = synth.write_results(str(tmp_path / "r"), cells)
    os.remove(os.path.join(out, cells[0]["entry"]["dir"], "result.json"))
    res = load_results(out)
    assert res.cells[0].result is None and summary.skip_reason(res.cells[0]) == GPU_REASON


def test_some_skips_are_counted_on_the_first_line(make_report):
    cells = synth.all_passing()[:2] + skipped_cells()[2:]
    r = make_report(cells)
    assert '<span class="badge big v-pass">PASS</span>' in r.html
    assert headline_of(r.html) == "✓ PASS: 2 of 4 cells passed, 2 skipped"
    assert r.md.startswith("## shardcheck: ✅ PASS: 2 of 4 cells passed, 2 skipped\n")
    assert r.md.split("### Skipped cells", 1)[1].count(f"| {GPU_REASON} |") == 2


def test_a_failing_run_says_how_many_failed(make_report):
    r = make_report(synth.one_failing() + [synth.make_cell("adam", "fully_reshardable", 4, skipped=GPU_REASON)])
    assert headline_of(r.html) == "✗ FAIL: 1 of 6 cells failed, 4 passed, 1 skipped"
    assert r.md.startswith("## shardcheck: ❌ FAIL: 1 of 6 cells failed, 4 passed, 1 skipped\n")


# ---- interrupted runs --------------------------------------------------------

def test_interrupted_run_says_so_at_the_very_top(make_report):
    r = make_report(synth.all_passing()[:3], interrupted_by="SIGINT", not_run=5)
    agg = json.load(open(os.path.join(r.dir, "results.json")))
    assert agg["verdict"] == "interrupted" and agg["counts"]["cells"] == 8 and agg["counts"]["not_run"] == 5
    line = "INTERRUPTED by SIGINT: 3 of 8 cells finished, 5 not run (3 passed)"
    assert headline_of(r.html) == f"■ {line}"
    assert r.html.index('id="headline"') < r.html.index('id="counts"') < r.html.index('id="answers"')
    assert '<span class="badge big v-interrupted">INTERRUPTED</span>' in r.html
    assert "<b class=\"incomplete\">5</b> not run (interrupted)" in r.html
    assert "Nothing failed in the 3 cells that finished: 3 passed; 5 not run (interrupted by SIGINT)." \
        in text(r.html)
    assert "Not run: 5 cells: the run was interrupted by SIGINT" in text(r.html)
    assert r.md.startswith(f"## shardcheck: ⏹ {line}\n")
    assert "5 cells not run (interrupted by SIGINT)" in r.md
    assert "**8 cells: 3 passed, 0 failed, 0 errored, 5 not run (interrupted)**" in r.md
    assert r.proc.stdout.startswith("make_report.py: INTERRUPTED by SIGINT: 3 cells")
    assert load_results(r.dir).warnings == [] and 'class="warn"' not in r.html


def test_interrupted_run_that_failed_is_a_fail_and_still_says_it_was_interrupted(make_report):
    r = make_report(synth.one_failing()[-2:], interrupted_by="SIGTERM", not_run=4)
    assert json.load(open(os.path.join(r.dir, "results.json")))["verdict"] == "fail"
    assert headline_of(r.html) == "✗ FAIL: 1 of 2 cells failed, 1 passed"
    interrupted = re.search(r'<p id="interrupted"[^>]*>(.*?)</p>', r.html).group(1)
    assert interrupted == "■ INTERRUPTED by SIGTERM: 2 of 6 cells finished, 4 not run"
    assert r.html.index('id="interrupted"') < r.html.index('id="answers"')
    head = r.md.split("\n\n")
    assert head[0].startswith("## shardcheck: ❌ FAIL")
    assert head[1] == "**⏹ INTERRUPTED by SIGTERM: 2 of 6 cells finished, 4 not run**"


def test_interrupted_before_any_cell_finished(make_report):
    r = make_report([], interrupted_by="SIGINT", not_run=8)
    assert headline_of(r.html) == "■ INTERRUPTED by SIGINT: 0 of 8 cells finished, 8 not run"
    assert r.md.startswith("## shardcheck: ⏹ INTERRUPTED by SIGINT: 0 of 8 cells finished, 8 not run")


def test_interrupted_counts_that_disagree_are_a_warning(tmp_path):
    out = synth.write_results(str(tmp_path / "r"), synth.all_passing()[:3], interrupted_by="SIGINT", not_run=5)
    path = os.path.join(out, "results.json")
    agg = json.load(open(path))
    agg["counts"]["not_run"] = 4
    json.dump(agg, open(path, "w"))
    assert load_results(out).warnings == [
        "results.json counts (cells - not_run/passed/failed/errored) say 4/3/0/0 but the cells list has 3/3/0/0"]


# ---- tolerance checks: the deciding figure against its bound ----------------------

def tolerance_cell(**kw):
    """A passing gpt-tiny cell with a resume: tolerance checks without a max ULP, nonzero differences."""
    return synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=4, model="gpt-tiny", **kw)


def test_tolerance_row_shows_the_deciding_figure_and_hides_ulp(make_report):
    cell = synth.with_judged_by(tolerance_cell())
    check = next(c for c in cell["result"]["checks"] if c["on"] == "params")
    check["judged_by"] = {"figure": "max_rel", "value": 3.1e-4, "bound": 1e-3}
    r = make_report([cell])
    sec = r.section(cell["entry"]["id"])
    row = group_row(sec, "params")
    assert "<b>passed</b><small>within tolerance</small>" in row
    assert ">uninterrupted: max rel 3.1e-4 ≤ 1e-3</small>" in row
    assert ">resumed: max abs 1e-7 ≤ 1e-5</small>" in row          # the resumed run's check, judged by max abs
    # no check of the group has a max ULP: the ULP figure is a dash, not a raw count
    cells = re.findall(r'<td class="n ?([^"]*)">(.*?)</td>', row, re.S)
    assert len(cells) == 8          # two runs: uninterrupted, resumed
    for ulp in (cells[2], cells[6]):
        assert ulp[0] == "muted" and ulp[1].endswith(">—</span>")
    # differing elements beside a passing tolerance are informational, never "steps with mismatches"
    assert "informational: the tolerance allows elements to differ" in row
    assert "steps with mismatches" not in sec
    assert 'class="n bad"' not in sec
    checks = sec[sec.index('<table class="checks">'):]
    assert '<td class="judged">max rel 3.1e-4 ≤ 1e-3</td>' in checks


def test_tolerance_figure_is_derived_without_judged_by(make_report):
    cell = tolerance_cell()
    assert all("judged_by" not in c for c in cell["result"]["checks"])
    r = make_report([cell])
    row = group_row(r.section(cell["entry"]["id"]), "params")
    assert ">uninterrupted: max abs 1e-7 ≤ 1e-5</small>" in row


def test_a_check_with_max_ulp_shows_ulp(make_report):
    cell = tolerance_cell()
    for c in cell["result"]["checks"]:
        c["max_ulp"] = 64
    row = group_row(make_report([cell]).section(cell["entry"]["id"]), "params")
    cells = re.findall(r'<td class="n ?([^"]*)">(.*?)</td>', row, re.S)
    assert re.match(r"\d+$", cells[2][1]) and cells[2][0] == ""


def test_failed_tolerance_check_names_its_figure_and_bound(make_report):
    cell = synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=4, model="gpt-tiny",
                           fail={"group": "exp_avg", "step": 6, "run": "resumed"})
    r = make_report([cell])
    row = group_row(r.section(cell["entry"]["id"]), "exp_avg")
    assert 'class="judged over"' in row and ">resumed: max rel 1 &gt; 1.3e-3</small>" in row
    failing = r.html[r.html.index('id="failing"'):r.html.index('id="matrix"')]
    assert "<small>max rel 1 &gt; 1.3e-3</small>" in failing
    assert "| resumed-vs-reference-tolerance-state (max rel 1 > 1.3e-3) |" in r.md


def test_judgement():
    def check(verdict="pass", **kw):
        return dict({"kind": "tolerance", "verdict": verdict, "atol": 1e-5, "rtol": 1e-3}, **kw)
    assert summary.judgement(check(max_abs=2e-6, max_rel=7.32e3)).text == "max abs 2e-6 ≤ 1e-5"
    assert summary.judgement(check(max_abs=3e-4, max_rel=3.1e-4)).text == "max rel 3.1e-4 ≤ 1e-3"
    assert summary.judgement(check("fail", max_abs=3e-2, max_rel=0.5)).text == "max rel 0.5 > 1e-3"
    # neither maximum within its half of atol + rtol·|b|, yet each element was: no figure decided it alone
    assert summary.judgement(check(max_abs=3e-4, max_rel=7.32e3)).text == "every element within atol + rtol·|b|"
    judged = {"figure": "violations", "value": 0, "bound": 0}
    assert summary.judgement(check(judged_by=judged)).text == \
        "violations 0 ≤ 0 (elements beyond atol + rtol·|b|)"
    assert summary.judgement({"kind": "bitwise", "verdict": "pass", "judged_by": None}) is None
    assert summary.judgement(check("n/a")) is None
    continuity = {"kind": "loss_continuity", "verdict": "pass", "rtol": 1e-4, "max_rel": 2e-5}
    assert summary.judgement(continuity) is None          # derived for tolerance checks only
    continuity["judged_by"] = {"figure": "max_rel", "value": 2e-5, "bound": 1e-4}
    assert summary.judgement(continuity).text == "max rel 2e-5 ≤ 1e-4"
    assert summary.figures_used([{"kind": "bitwise", "max_ulp": 0}]) == ["abs", "elements"]
    assert summary.figures_used([check()]) == ["abs", "rel"]
    assert summary.figures_used([check(max_ulp=4)]) == ["abs", "rel", "ulp"]


@pytest.mark.parametrize("judged, needle", [
    ({"figure": "max_ulp", "value": 1, "bound": 2}, "checks[0].judged_by.figure: expected one of"),
    ({"figure": "max_rel", "value": "3e-4", "bound": 1e-3}, "checks[0].judged_by.value: expected num"),
    ({"figure": "max_rel", "value": 3e-4}, "checks[0].judged_by.bound: missing"),
])
def test_malformed_judged_by_is_an_input_error(tmp_path, judged, needle):
    cell = tolerance_cell()
    cell["result"]["checks"][0]["judged_by"] = judged
    out = synth.write_results(str(tmp_path / "r"), [cell])
    proc = run_report(out, check=False)
    assert proc.returncode == 2 and needle in proc.stderr


def test_an_unknown_run_verdict_is_an_input_error(tmp_path):
    out = synth.write_results(str(tmp_path / "r"), synth.lion_only(), verdict="skipped")
    proc = run_report(out, check=False)
    assert proc.returncode == 2
    assert "results.json: verdict: expected one of pass/fail/nothing-checked/interrupted" in proc.stderr


# ---- citations ---------------------------------------------------------------

def test_report_cites_the_docs_not_semantics_md(make_report):
    cell = synth.make_cell("muon_adam", "dp_reshardable", 2)
    cell["result"]["checks"].append({"name": "routing", "kind": "routing", "on": "params", "run": "setup",
                                     "against": "SEMANTICS.md routing rule", "verdict": "pass",
                                     "detail": "every one of 12 params routed as the rule says"})
    r = make_report([cell])
    assert "SEMANTICS" not in r.html and "SEMANTICS" not in r.md
    assert "setup vs docs/optimizers.md routing rule" in r.html
    for name in os.listdir(os.path.join(REPORTS, "templates")):
        assert "SEMANTICS" not in open(os.path.join(REPORTS, "templates", name), encoding="utf-8").read(), name


# ---- ci/pr-report --help -----------------------------------------------------------

def test_pr_report_help_is_exactly_the_header_comment():
    script = os.path.join(ROOT, "ci", "pr-report")
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == ""
    lines = open(script).read().splitlines()[1:]
    header = [re.sub(r"^# ?", "", line) for line in lines[:next(i for i, l in enumerate(lines) if not l.startswith("#"))]]
    assert proc.stdout.splitlines() == header
    assert header[0].startswith("ci/pr-report BASE_REF") and header[-1].endswith("build or run of either side.")
    assert "set -euo" not in proc.stdout and "pipefail" not in proc.stdout
