"""Expected failures (xfail, xpass) and external systems under test (torch-fsdp2):
what they count for, how the HTML and Markdown show them apart, and what the loader accepts."""
import json
import os
import re

import pytest

import answers
import matrix
import synth
from compare import baseline_changes, compare
from conftest import run_report
from load import load_results

XFAIL_FAIL = "lion.dp_reshardable.dp2-to-dp3.bf16.oracle-gpt-tiny"
XFAIL_ERROR = "lion.fully_reshardable.dp2.bf16.oracle-gpt-tiny"
PASSING = "adam.dp_reshardable.dp2.bf16.oracle-gpt-tiny"
XPASS = "adamw.dp_reshardable.dp4.bf16.oracle-gpt-tiny"
FAILING = "muon_adam.dp_reshardable.dp2.bf16.oracle-gpt-tiny"
OOM = "docs/findings.md#gloo-oom a known out-of-memory kill on small runners"
FIXED = "docs/findings.md#adamw-dp4 the dp-4 gather drops a bucket"


def xfail_cells():
    """A passing cell, an xfail that failed and an xfail that errored."""
    return [synth.make_cell("adam", "dp_reshardable", 2),
            synth.expect_failure(synth.make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4,
                                                 fail={"group": "exp_avg", "step": 6, "run": "resumed"})),
            synth.expect_failure(synth.make_cell("lion", "fully_reshardable", 2,
                                                 error="rank 1 exited with signal 9 (Killed) during load"), OOM,
                                 errored="xfail")]


def xpass_cell():
    return synth.expect_failure(synth.make_cell("adamw", "dp_reshardable", 4), FIXED)


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def between(html: str, start: str, end: str) -> str:
    i = html.index(start)
    return html[i:html.index(end, i)]


def answers_of(html: str) -> str:
    return between(html, '<section id="answers">', "</section>")


def matrix_of(html: str) -> str:
    return between(html, '<table id="matrix"', "</table>")


# ---- what they count for -----------------------------------------------------

def test_synthetic_expectations_follow_the_runner():
    fail, error = xfail_cells()[1:]
    assert fail["entry"]["verdict"] == fail["result"]["verdict"] == "xfail"
    assert fail["result"]["expected"] == {"verdict": "fail", "reason": synth.FINDING, "failing_check": None,
                                          "got": "fail"}
    assert fail["result"]["first_failure"]["check"] == "resumed-vs-reference-bitwise-state"
    assert error["result"]["expected"]["got"] == "error" and error["result"]["error"]
    xpass = xpass_cell()
    assert xpass["entry"]["verdict"] == "xpass" and xpass["result"]["config"]["expect"]["reason"] == FIXED
    assert xpass["result"]["first_failure"]["check"] == "expected-failure"
    assert all(c["verdict"] == "pass" for c in xpass["result"]["checks"])


def test_xfail_does_not_fail_the_run(make_report, tmp_path):
    r = make_report(xfail_cells())
    res = load_results(r.dir)
    assert res.aggregate["verdict"] == "pass" and res.warnings == []
    assert res.aggregate["counts"]["xfailed"] == 2 and res.aggregate["counts"]["xpassed"] == 0
    a = answers.answer(res)
    assert a.first_failure is None and a.passed == 1 and a.xfailed == 2
    assert '<span class="badge big v-pass">PASS</span>' in r.html
    assert 'id="failing"' not in r.html                    # not a failing cell
    assert ("✓ Nothing failed: 1 of 3 cells passed, "
            '<a href="#expected">2 failed as expected (xfail)</a>.') in answers_of(r.html)
    assert r.md.startswith("## shardcheck: ✅ PASS")
    assert "- **Failed first:** nothing: 1 of 3 cells passed, 2 failed as expected (xfail)." in r.md
    assert "### Failing cells" not in r.md
    assert r.proc.stdout.startswith("make_report.py: PASS: 3 cells")


def test_xpass_fails_the_run_and_comes_first(make_report):
    r = make_report(xfail_cells() + [xpass_cell()])
    res = load_results(r.dir)
    assert res.aggregate["verdict"] == "fail" and res.warnings == []
    first = answers.answer(res).first_failure
    assert first.cell.id == XPASS and first.others == 0
    assert '<span class="badge big v-fail">FAIL</span>' in r.html
    block = text(answers_of(r.html))
    assert f"First failure: {XPASS} (xpass)" in block and "check expected-failure" in block
    assert "expected to fail and passed" in block
    failing = between(r.html, 'id="failing"', "</table>")
    assert XPASS in failing and XFAIL_FAIL not in failing and XFAIL_ERROR not in failing
    assert r.md.startswith("## shardcheck: ❌ FAIL")
    assert f"- **Failed first:** `{XPASS}` (xpass)" in r.md
    row = next(line for line in r.md.splitlines() if line.startswith(f"| `{XPASS}`"))
    assert "| ❗ xpass |" in row and "expected-failure" in row


def test_the_first_failure_skips_an_earlier_xfail(make_report):
    cells = xfail_cells() + [synth.make_cell("muon_adam", "dp_reshardable", 2,
                                             fail={"group": "momentum_buffer", "step": 3, "run": "uninterrupted"})]
    r = make_report(cells)
    assert text(answers_of(r.html)).count("First failure:") == 1
    assert f"First failure: {FAILING} (fail)" in text(answers_of(r.html))
    assert "No other cell failed." in answers_of(r.html)
    assert f"- **Failed first:** `{FAILING}` (fail)" in r.md
    # sections: the failing cell, then the expected failures, then the passing one
    order = [r.html.index(f'id="{cid}"') for cid in (FAILING, XFAIL_FAIL, XFAIL_ERROR, PASSING)]
    assert order == sorted(order)


def test_expected_failures_are_not_covered_not_failures(make_report):
    r = make_report(xfail_cells())
    res = load_results(r.dir)
    n = answers.not_covered(res)
    assert [c.id for c, _ in n.expected] == [XFAIL_FAIL, XFAIL_ERROR]
    assert n.expected_reasons() == {synth.FINDING: 1, OOM: 1}
    assert not n.nothing and n.skipped == []
    # the errored xfail did not run: its groups are not "not checked"
    assert n.unchecked == {}
    li = text(between(r.html, 'id="not-covered-expected">', "</li>"))
    assert li.startswith('id="not-covered-expected">Expected failures (xfail, not failures): 2 cells:')
    assert "docs/findings.md#gloo-oom a known out-of-memory kill on small runners (1)" in li
    line = next(x for x in r.md.splitlines() if x.startswith("- **Not covered:**"))
    assert "expected failures (xfail): 2 (" in line and "docs/findings.md#gloo-oom" in line


def test_an_expected_failure_that_fails_another_check_stays_a_failure(make_report):
    cell = synth.expect_failure(synth.make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4,
                                                fail={"group": "exp_avg", "step": 6, "run": "resumed"}),
                                failing_check="system-raised")
    assert cell["entry"]["verdict"] == "fail"
    r = make_report([cell])
    assert '<span class="badge big v-fail">FAIL</span>' in r.html
    assert f"First failure: {XFAIL_FAIL} (fail)" in text(answers_of(r.html))
    box = text(between(r.section(XFAIL_FAIL), '<div class="exp v-fail">', "</div>"))
    assert "Expected to fail, but another check failed first: this fails the run." in box
    assert "expected to fail first: system-raised · got: fail" in box
    assert "expected system-raised to fail" in text(r.section(XFAIL_FAIL))
    row = next(line for line in r.md.splitlines() if line.startswith(f"| `{XFAIL_FAIL}` | ❌ fail | failed |"))
    assert "(expected to fail first: `system-raised`)" in row
    assert "xfail" not in r.md.split("### Expected failures")[0]


def test_an_expected_failure_that_errors_stays_an_error(make_report):
    cell = synth.expect_failure(synth.make_cell("lion", "fully_reshardable", 2, error="rank 1 exited"), OOM)
    assert cell["entry"]["verdict"] == "error" and cell["result"]["expected"]["got"] == "error"
    r = make_report([cell])
    assert load_results(r.dir).aggregate["verdict"] == "fail"
    assert f"First failure: {XFAIL_ERROR} (error)" in text(answers_of(r.html))
    box = text(between(r.section(XFAIL_ERROR), '<div class="exp v-error">', "</div>"))
    assert "Expected to fail, but it errored: this fails the run" in box and "got: error" in box
    assert f"| `{XFAIL_ERROR}` | ⚠️ error | errored | {OOM} |" in r.md


# ---- shown apart -------------------------------------------------------------

def test_html_shows_xfail_and_xpass_apart(make_report):
    r = make_report(xfail_cells() + [xpass_cell()])
    counts = between(r.html, 'id="counts"', "</td>")
    assert "<b>1</b> passed, <b>0</b> failed, <b>0</b> errored" in counts
    assert "<b>2</b> xfail</span>" in counts and "<b>1</b> xpass</span>" in counts
    m = matrix_of(r.html)
    for cid, verdict in ((XFAIL_FAIL, "xfail"), (XFAIL_ERROR, "xfail"), (XPASS, "xpass"), (PASSING, "pass")):
        assert re.search(rf'<td class="v-{verdict}">\s*<a class="chip v-{verdict}" href="#{re.escape(cid)}"', m), cid
    assert "v-fail" not in m
    legend = between(r.html, '<p class="note legend">', "</p>")
    assert '<span class="chip v-xfail">xfail (expected failure)</span>' in legend
    assert '<span class="chip v-xpass">xpass (expected to fail, passed)</span>' in legend
    for cid, verdict in ((XFAIL_FAIL, "xfail"), (XPASS, "xpass")):
        assert f'<section class="cell v-{verdict}" id="{cid}">' in r.html
        assert f'<span class="badge v-{verdict}">{verdict.upper()}</span>' in r.section(cid)
    table = between(r.html, 'id="expected"', "</table>")
    assert [cid for cid in (XFAIL_FAIL, XFAIL_ERROR, XPASS) if cid in table] == [XFAIL_FAIL, XFAIL_ERROR, XPASS]
    assert PASSING not in table
    assert 'href="#expected">Expected failures (3)</a>' in r.html


def test_each_section_shows_the_reason_and_what_it_got(make_report):
    r = make_report(xfail_cells() + [xpass_cell()])
    fail = r.section(XFAIL_FAIL)
    box = text(between(fail, '<div class="exp v-xfail">', "</div>"))
    assert "Expected failure (xfail): it failed as declared; this does not fail the run." in box
    assert ("Reason: docs/findings.md#fsdp2-resume-drops-state the optimizer state is not loaded "
            "after a DP change · got: fail") in box
    assert "<code>docs/findings.md#fsdp2-resume-drops-state</code>" in fail
    # an xfail keeps its first failure, on a neutral box, and its failed check
    assert '<div class="ff xf"><b>First failure:</b> step <b>6</b>' in fail
    assert re.search(r'<tr class="fail"><td><code>resumed-vs-reference-bitwise-state</code>', fail)
    error = r.section(XFAIL_ERROR)
    assert "it errored as declared" in text(error) and "got: error" in text(error)
    assert "<code>docs/findings.md#gloo-oom</code> a known out-of-memory kill on small runners" in error
    assert "<b>Error:</b> rank 1 exited with signal 9" in error
    xpass = r.section(XPASS)
    box = text(between(xpass, '<div class="exp v-xpass">', "</div>"))
    assert "Expected to fail, but passed (xpass): this fails the run" in box
    assert "Reason: docs/findings.md#adamw-dp4 the dp-4 gather drops a bucket · got: pass" in box
    assert "First failure" not in xpass                    # no check failed; the box says why it fails
    assert "Expected" not in r.section(PASSING)


def test_markdown_shows_xfail_and_xpass_apart(make_report):
    r = make_report(xfail_cells() + [xpass_cell()])
    assert "**4 cells: 1 passed, 0 failed, 0 errored, 2 xfail, 1 xpass**" in r.md
    assert re.search(r"^\| lion · dp_reshardable \|  \| 🟡 \|  \|$", r.md, re.M)
    assert re.search(r"^\| lion · fully_reshardable \| 🟡 \|", r.md, re.M)
    assert re.search(r"^\| adamw · dp_reshardable \|  \|  \| ❗ \|$", r.md, re.M)
    table = r.md[r.md.index("### Expected failures"):]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert rows[0] == f"| `{XFAIL_FAIL}` | 🟡 xfail | failed | {synth.FINDING} |"
    assert rows[1] == f"| `{XFAIL_ERROR}` | 🟡 xfail | errored | {OOM} |"
    assert rows[2] == f"| `{XPASS}` | ❗ xpass | passed every check | {FIXED} |"


def test_counts_without_xfail_say_nothing_of_them(make_report):
    r = make_report(synth.one_failing())
    assert "xfail" not in r.md and "xpass" not in r.md
    assert "xfail" not in between(r.html, 'id="counts"', "</td>")
    assert 'id="expected"' not in r.html


# ---- the matrix ----------------------------------------------------------------

def test_matrix_severity():
    assert [v for v, _ in sorted(matrix.SEVERITY.items(), key=lambda kv: -kv[1])] == \
        ["fail", "xpass", "error", "xfail", "skipped", "pass"]

    class C:
        def __init__(self, verdict):
            self.verdict = verdict
    assert matrix.worst([C("pass"), C("xfail"), C("skipped")]) == "xfail"
    assert matrix.worst([C("xfail"), C("xpass"), C("error")]) == "xpass"
    assert matrix.worst([C("xpass"), C("fail")]) == "fail"


def test_an_xfail_does_not_hide_an_xpass_in_its_slot(make_report):
    cells = [synth.expect_failure(synth.make_cell("lion", "dp_reshardable", 2, dtype=dtype,
                                                  fail={"group": "exp_avg", "step": 3, "run": "uninterrupted"}
                                                  if dtype == "bf16" else None))
             for dtype in ("bf16", "fp32")]
    r = make_report(cells)
    m = matrix_of(r.html)
    assert re.search(r'<td class="v-xpass">\s*<a class="chip v-xfail"[^>]*>bf16 \(xfail\)</a>'
                     r'<a class="chip v-xpass"[^>]*>fp32 \(xpass\)</a>', m)
    assert "| lion · dp_reshardable | 🟡 bf16 ❗ fp32 |" in r.md


# ---- against a baseline --------------------------------------------------------

def test_an_xfail_that_now_passes_is_a_new_failure(tmp_path):
    before = synth.write_results(str(tmp_path / "before"), [synth.expect_failure(
        synth.make_cell("adamw", "dp_reshardable", 4, fail={"group": "exp_avg", "step": 3, "run": "uninterrupted"}),
        FIXED)])
    after = synth.write_results(str(tmp_path / "after"), [xpass_cell()])
    changes = baseline_changes(compare(load_results(after), load_results(before)))
    assert [c.id for c in changes.new_failures] == [XPASS] and changes.fixed == []


# ---- the loader ----------------------------------------------------------------

def edit(path, fn):
    with open(path) as f:
        doc = json.load(f)
    fn(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def expect_error(out, *needles):
    proc = run_report(out, check=False)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line, line
    for n in needles:
        assert n in line, line
    return line


def test_an_xfail_must_say_what_it_expected(tmp_path):
    out = synth.write_results(str(tmp_path / "r"), xfail_cells())
    edit(os.path.join(out, XFAIL_FAIL, "result.json"), lambda d: d.pop("expected"))
    expect_error(out, f"{XFAIL_FAIL}/result.json: expected: missing")


@pytest.mark.parametrize("cell, got", [(XFAIL_FAIL, "pass"), (XPASS, "fail")])
def test_what_it_got_must_agree_with_its_verdict(tmp_path, cell, got):
    out = synth.write_results(str(tmp_path / "r"), xfail_cells() + [xpass_cell()])
    edit(os.path.join(out, cell, "result.json"), lambda d: d["expected"].update(got=got))
    expect_error(out, f"{cell}/result.json: expected.got:", f"got {got!r}")


def test_older_counts_without_xfailed_are_zero(tmp_path):
    out = synth.write_results(str(tmp_path / "r"), synth.all_passing())
    edit(os.path.join(out, "results.json"), lambda d: [d["counts"].pop(k) for k in ("xfailed", "xpassed")])
    res = load_results(out)
    assert res.warnings == [] and res.aggregate["counts"]["xfailed"] == 0
    out = synth.write_results(str(tmp_path / "x"), xfail_cells())
    edit(os.path.join(out, "results.json"), lambda d: [d["counts"].pop(k) for k in ("xfailed", "xpassed")])
    assert load_results(out).warnings == [
        "results.json counts (xfailed/xpassed) say 0/0 but the cells list has 2/0"]


def test_a_passing_verdict_with_an_xpass_is_a_warning(tmp_path):
    out = synth.write_results(str(tmp_path / "r"), [xpass_cell()])
    edit(os.path.join(out, "results.json"), lambda d: d.update(verdict="pass"))
    assert load_results(out).warnings == ["results.json verdict is 'pass' but its cells make it 'fail'"]


def test_an_errored_xfail_may_lack_its_result_json(tmp_path):
    out = synth.write_results(str(tmp_path / "r"), xfail_cells())
    os.remove(os.path.join(out, XFAIL_ERROR, "result.json"))
    res = load_results(out)
    assert res.cell(XFAIL_ERROR).result is None
    run_report(out)


# ---- external systems under test -----------------------------------------------

EXT_PASS = "torch-fsdp2.adam.dcp.dp2.fp32.oracle-gpt-tiny"
EXT_FAIL = "torch-fsdp2.adam.dcp.dp2-to-dp3.fp32.oracle-gpt-tiny"
EXT_RAISED = "torch-fsdp2+fused.adamw.dcp.dp2-to-dp4.fp32.oracle-gpt-tiny"
EXT_XPASS = "torch-fsdp2.adamw.dcp.dp4.fp32.oracle-gpt-tiny"


@pytest.fixture(scope="module")
def systems_report(tmp_path_factory):
    from conftest import Report
    return Report(tmp_path_factory.mktemp("systems"), synth.systems())


def test_external_cells_load(systems_report):
    res = load_results(systems_report.dir)
    assert res.warnings == []
    assert [c.system for c in res.cells] == ["shardcheck"] * 3 + ["torch-fsdp2"] * 2 + \
        ["torch-fsdp2+fused", "torch-fsdp2"]
    ext = res.cell(EXT_FAIL).result
    assert list(ext["runs"]) == ["reference", "single_device", "uninterrupted", "resumed"]
    assert list(ext["runs"]["resumed"]["diff_single_device"]) == ["params", "step", "exp_avg", "exp_avg_sq"]
    raised = res.cell(EXT_RAISED).result
    assert raised["runs"] == {} and raised["checks"][0]["kind"] == "system-raised"
    assert res.aggregate["counts"] == {"cells": 7, "passed": 2, "failed": 1, "errored": 0, "skipped": 0,
                                       "xfailed": 3, "xpassed": 1}


def test_older_results_name_no_system(tmp_path):
    out = synth.write_results(str(tmp_path / "r"), synth.all_passing())
    res = load_results(out)
    assert {c.system for c in res.cells} == {"shardcheck"} and not any(c.external for c in res.cells)


def test_matrix_rows_name_external_systems(systems_report):
    from test_report import matrix_rows
    m = matrix_of(systems_report.html)
    assert "<tr><th>system · optimizer · sharding type</th>" in m
    labels = re.findall(r"<tr><th>([^<]*)</th>", m)[1:]
    assert labels == ["adam · dp_reshardable", "lion · dp_reshardable", "lion · fully_reshardable",
                      "torch-fsdp2 · adam · dcp", "torch-fsdp2 · adamw · dcp", "torch-fsdp2+fused · adamw · dcp"]
    assert matrix_rows(systems_report.html)[0] == ("adam", "dp_reshardable")
    md = systems_report.md
    assert "| system · optimizer · sharding type | dp2 | dp2→dp3 | dp2→dp4 | dp4 |" in md
    assert "| torch-fsdp2 · adam · dcp | ✅ | ❌ |  |  |" in md
    assert "| torch-fsdp2+fused · adamw · dcp |  |  | 🟡 |  |" in md
    assert "| adam · dp_reshardable | ✅ |" in md


def test_external_section_shows_versions_adapter_runs_and_single_device(systems_report):
    sec = systems_report.section(EXT_FAIL)
    assert "system <b>torch-fsdp2</b>" in sec
    sys_line = text(between(sec, f'id="{EXT_FAIL}--system"', "</div>"))
    assert "System under test: torch-fsdp2 — torch 2.11.0+cu130, python 3.12.3" in sys_line
    assert "its state keys: step, exp_avg, exp_avg_sq" in sys_line
    adapter = between(sec, '<table class="adapter">', "</table>")
    assert [run for run in ("single_device", "uninterrupted", "resumed") if f"<td>{run}</td>" in adapter] == \
        ["single_device", "uninterrupted", "resumed"]
    # the reference comparison: the single-device run is one of the compared runs
    groups = between(sec, '<table class="groups">', "</table>")
    assert "single_device (dp1)" in groups and "resumed (dp3, from step 3)" in groups
    # the single-device comparison: the system's own state keys, the failed check, red where it failed
    single = between(sec, '<table class="groups single-device">', "</table>")
    assert "<code>step</code>" in single and "torch-fsdp2" in single
    assert "resumed (dp3, from step 3) vs single device" in single
    row = between(single, "<code>step</code>", "</tr>")
    assert "bitwise-state-vs-single_device" in row and 'class="n bad"' in row
    assert "max |Δ| vs single device" in between(sec, f'id="{EXT_FAIL}--single-device"', "</table>")
    assert '<div class="ff"><b>First failure:</b> step <b>4</b>' in sec
    # a check against the single-device run does not paint the reference table's figures
    assert "bad" not in groups
    notes = systems_report.section(EXT_PASS)
    assert "<small>rank 0: fully_shard on 3 modules</small>" in notes


def test_a_group_checked_against_the_single_device_run_only_says_so(systems_report):
    sec = systems_report.section(EXT_XPASS)
    groups = between(sec, '<table class="groups">', "</table>")
    assert "not checked" in groups
    assert "against the single-device run (below): bitwise-state-vs-single_device" in groups
    res = load_results(systems_report.dir)
    assert answers.not_covered(res).unchecked == {}         # it was checked, against the single device


def test_system_raised_cell_renders_its_error(systems_report):
    sec = systems_report.section(EXT_RAISED)
    assert '<section class="cell v-xfail"' in systems_report.html[
        systems_report.html.index(f'id="{EXT_RAISED}"') - 40:systems_report.html.index(f'id="{EXT_RAISED}"') + 5]
    assert "<code>system-raised</code>" in sec
    adapter = between(sec, '<table class="adapter">', "</table>")
    assert ("rank 1, load at step 3: RuntimeError: Missing key in checkpoint "
            "(torch/distributed/checkpoint/default_planner.py:471)") in adapter
    assert "<summary>traceback</summary>" in adapter and "Traceback (most recent call last)" in adapter
    assert "groups single-device" not in sec
    assert "got: fail" in text(sec)


def test_a_system_raised_fail_needs_no_runs(make_report):
    cell = synth.make_external_cell(raised={"run": "uninterrupted", "rank": 0, "phase": "step", "step": 2,
                                            "type": "ValueError", "message": "bad shard"})
    r = make_report([cell])
    cid = cell["entry"]["id"]
    assert f"First failure: {cid} (fail): step 2" in text(answers_of(r.html))
    assert "uninterrupted run, rank 0, step at step 2: ValueError: bad shard" in r.md


def test_systems_summary_stays_short(systems_report):
    assert len(systems_report.md) < 6000
    assert systems_report.proc.stdout.startswith("make_report.py: FAIL: 7 cells")


def test_single_device_groups_may_hold_main_params_and_no_state(tmp_path):
    cell = synth.make_external_cell("torch-fsdp2", "adam", resume_dp=3, save_at=3)
    result = cell["result"]
    for run in ("uninterrupted", "resumed"):
        diff = result["runs"][run]["diff_single_device"]
        diff["main_params"] = diff["params"]
        for key in result["system_state_keys"]:
            del diff[key]
    result["system_state_keys"] = []              # e.g. plain SGD keeps no state
    result["checks"] = [c for c in result["checks"] if c["on"] != "state"]
    out = synth.write_results(str(tmp_path / "r"), [cell])
    res = load_results(out)
    from summary import single_device_view
    assert single_device_view(res.cells[0].result)["groups"] == ["params", "main_params"]
    run_report(out)


@pytest.mark.parametrize("fn, needles", [
    (lambda d: d["runs"]["resumed"]["diff_single_device"].update(momentum=d["runs"]["resumed"]["diff"]["params"]),
     ["runs.resumed.diff_single_device.momentum: is not one of params, main_params or the cell's "
      "system_state_keys"]),
    (lambda d: d["runs"]["uninterrupted"]["diff_single_device"].pop("step"),
     ["runs.uninterrupted.diff_single_device: has no group 'step' (listed in 'system_state_keys')"]),
    (lambda d: d.pop("system_state_keys"),
     ["runs.uninterrupted.diff_single_device: needs the cell's 'system_state_keys'"]),
    (lambda d: d["runs"]["resumed"]["diff_single_device"]["step"]["max_abs"].pop(),
     ["runs.resumed.diff_single_device.step.max_abs: has 3 entries but steps has 4"]),
    (lambda d: d["runs"]["single_device"]["diff"].pop("exp_avg"),
     ["runs.single_device.diff: has no group 'exp_avg' (listed in 'groups')"]),
    (lambda d: d["adapter"][0].update(exit_code="0"), ["adapter[0].exit_code: expected int"]),
    (lambda d: d["adapter"][1].update(notes=["ok", 3]), ["adapter[1].notes[1]: expected a string"]),
    (lambda d: d["adapter"][1].update(error={"type": "E", "step": "3"}), ["adapter[1].error.step: expected int"]),
    (lambda d: d["environment"]["system"]["versions"].update(torch=2.11),
     ["environment.system.versions.torch: expected str"]),
    (lambda d: d["config"].update(system=["torch-fsdp2"]), ["config.system: expected str"]),
    (lambda d: d["config"].update(expect={"verdict": "fail"}), ["config.expect.reason: missing"]),
])
def test_malformed_external_cells(tmp_path, fn, needles):
    cell = synth.make_external_cell(resume_dp=3, save_at=3)
    out = synth.write_results(str(tmp_path / "r"), [cell])
    edit(os.path.join(out, cell["entry"]["dir"], "result.json"), fn)
    expect_error(out, "result.json:", *needles)
