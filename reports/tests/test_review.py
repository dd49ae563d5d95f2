"""What a reviewer reads first: the three answers at the top, red only where a
check failed, the relative-error and ULP semantics, and the grad norms."""
import re

import pytest

import compare
import summary
import synth
from load import Cell

FAILING = "lion.dp_zero_gather_scatter.dp2-to-dp3.bf16.oracle-gpt-tiny"


def answers_of(html: str) -> str:
    start = html.index('<section id="answers">')
    return html[start:html.index("</section>", start)]


def first_failure_of(html: str) -> str:
    m = re.search(r'<p id="first-failure"[^>]*>(.*?)</p>', html, re.S)
    return m.group(0)


def text(html: str) -> str:
    """The text of an HTML fragment, tags dropped and whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def group_rows(section: str):
    """group -> (the row's <tr> tag, its cells' HTML) of a section's group table."""
    start = section.index('<table class="groups">')
    body = section[start:section.index("</table>", start)]
    rows = {}
    for tr, cells in re.findall(r'(<tr class="g-[^"]*">)(.*?)</tr>', body, re.S):
        rows[re.search(r"<code>([^<]+)</code>", cells).group(1)] = (tr, cells)
    return rows


def figures(cells: str):
    """The (class, text) of each numeric figure cell of one group row."""
    return re.findall(r'<td class="n ?([^"]*)">(.*?)</td>', cells, re.S)


# ---- red only where a check failed ----------------------------------------

def test_passing_cell_with_nonzero_diffs_has_no_red(make_report):
    cell = synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=4, model="gpt-tiny")
    r = make_report([cell])
    rows = group_rows(r.section(cell["entry"]["id"]))
    assert set(rows) == {"params", "main_params", "exp_avg", "exp_avg_sq"}
    for group, (tr, cells) in rows.items():
        assert tr == '<tr class="g-pass">', group
        figs = figures(cells)
        assert any(re.match(r"[1-9]", t) for _, t in figs), f"{group}: the figures should be nonzero"
        assert all(cls in ("", "muted") for cls, _ in figs), (group, figs)   # figures no check uses: muted
        assert "<b>passed</b><small>within tolerance</small>" in cells
    body = r.html.split("</style>", 1)[1]
    assert "g-fail" not in body and 'class="n bad"' not in body


def test_failing_group_is_red_only_in_the_run_that_failed(make_report):
    r = make_report(synth.one_failing())
    rows = group_rows(r.section(FAILING))
    tr, cells = rows["exp_avg"]
    assert tr == '<tr class="g-fail suspect">'
    assert "<b>failed</b><small>resumed-vs-reference-bitwise-state</small>" in cells
    figs = figures(cells)            # uninterrupted: abs rel ulp elements, then resumed: the same
    # a bitwise check judges max abs and differing elements; relative error and ULPs are dashes
    assert [cls for cls, _ in figs[:4]] == ["", "muted", "muted", ""]      # zero in the run that passed
    assert [cls for cls, _ in figs[4:8]] == ["bad", "muted", "muted", "bad"]
    assert figs[4][1] == "0.045 (12)"           # the largest difference and its step
    assert figs[7][1].startswith("47 (8)")      # the most differing elements at a step, and that step
    for group in ("params", "main_params"):              # their checks passed: neutral
        assert rows[group][0] == '<tr class="g-pass">'


def test_group_that_no_check_covers_is_not_checked_and_muted(make_report):
    # A cross-DP resume of a sign-based setup on a real model: only the loss is checked.
    cell = synth.make_cell("lion", "dp_reshardable", 2, resume_dp=4, save_at=4, model="gpt-tiny",
                           real_checks=True)
    assert [c["verdict"] for c in cell["result"]["checks"] if c["on"] != "loss"] == ["n/a"]
    r = make_report([cell])
    rows = group_rows(r.section(cell["entry"]["id"]))
    assert set(rows) == {"params", "main_params", "exp_avg"}
    for group, (tr, cells) in rows.items():
        assert tr == '<tr class="g-unchecked">'
        assert "<b>not checked</b><small>only the loss is checked in this cell" in cells
        assert all(cls == "muted" for cls, _ in figures(cells)), group
    assert "n/a here: bitwise-params" in rows["params"][1]
    assert "n/a here" not in rows["exp_avg"][1]
    assert "bad" not in r.section(cell["entry"]["id"]).split('<table class="groups">')[1].split("</table>")[0]


def test_group_coverage():
    cell = synth.make_cell("adam", "dp_reshardable", 2, resume_dp=2, save_at=4, model="gpt-tiny",
                           real_checks=True)       # a same-DP resume: the bitwise resume check applies
    result = cell["result"]
    cov = summary.group_coverage(result)
    assert list(cov) == result["groups"]
    assert [c["name"] for c in cov["params"]] == ["tolerance-params", "bitwise-params"]
    assert cov["main_params"] == [] and cov["exp_avg"] == [] and cov["exp_avg_sq"] == []
    # "state" covers every state group; "n/a" covers nothing
    result["checks"].append({"name": "x", "kind": "bitwise", "on": "state", "verdict": "pass"})
    result["checks"].append({"name": "y", "kind": "bitwise", "on": "main_params", "verdict": "n/a"})
    cov = summary.group_coverage(result)
    assert [c["name"] for c in cov["exp_avg"]] == ["x"] and [c["name"] for c in cov["exp_avg_sq"]] == ["x"]
    assert cov["main_params"] == []
    assert summary.group_verdict(cov["exp_avg"]) == "pass"
    assert summary.group_verdict(cov["main_params"]) == "unchecked"
    result["checks"][-2]["verdict"] = "fail"
    assert summary.group_verdict(summary.group_coverage(result)["exp_avg"]) == "fail"


def test_check_runs():
    runs = ["uninterrupted", "resumed"]
    assert summary.check_runs({"run": "uninterrupted+resumed"}, runs) == runs
    assert summary.check_runs({"run": "resumed"}, runs) == ["resumed"]
    assert summary.check_runs({"run": "reference"}, runs) == runs
    assert summary.check_runs({}, runs) == runs


# ---- the answers at the top -----------------------------------------------

def test_first_failure_block_names_cell_step_tensor_and_check(make_report):
    cells = synth.one_failing()
    cells.append(synth.make_cell("adamw", "dp_reshardable", 2, resume_dp=3, save_at=4,
                                 fail={"group": "exp_avg_sq", "step": 9, "run": "resumed"}))
    r = make_report(cells)
    block = first_failure_of(r.html)
    assert 'class="fail"' in block
    assert f'href="#{FAILING}"' in block and f"<code>{FAILING}</code>" in block
    t = text(block)
    assert "step 6" in t and "tensor state.exp_avg.layers.1.fc1.weight" in t
    assert "check resumed-vs-reference-bitwise-state" in t
    assert "1 other failing or errored cell." in t
    # above the matrix and the failing table
    assert r.html.index('id="first-failure"') < r.html.index('id="failing"') < r.html.index('id="matrix"')


def test_first_failure_is_an_error_when_that_comes_first(make_report):
    err = synth.make_cell("muon_lion", "fully_reshardable", 2, error="rank 1 exited with signal 9")
    r = make_report([synth.make_cell("adam", "dp_reshardable", 2), err] + synth.one_failing()[-1:])
    t = text(first_failure_of(r.html))
    assert err["entry"]["id"] in t and "(error)" in t and "rank 1 exited with signal 9" in t
    assert "1 other failing or errored cell." in t


def test_all_passing_top_block_is_green(make_report):
    r = make_report(synth.all_passing())
    block = answers_of(r.html)
    assert '<p id="first-failure" class="ok">✓ Nothing failed: 4 of 4 cells passed.</p>' in block
    assert "No baseline given" in block
    assert "Nothing left out" in block
    for red in ("fail", "neg", "bad"):
        assert f'class="{red}"' not in block
    # the matrix legend shows only the verdicts present
    assert '<span class="chip v-fail">fail</span>' not in r.html
    assert '<span class="chip v-pass">pass</span>' in r.html


def test_skipped_and_not_applicable_are_not_covered(make_report):
    cells = synth.all_passing() + [
        synth.make_cell("adamw", "dp_reshardable", 8, skipped="needs 8 GPUs, the node has 2"),
        synth.make_cell("lion", "dp_reshardable", 2, resume_dp=4, save_at=4, model="gpt-tiny", real_checks=True),
        synth.make_cell("adam", "fully_reshardable", 2, resume_dp=4, save_at=4, model="gpt-tiny",
                        real_checks=True)]
    r = make_report(cells)
    t = text(answers_of(r.html))
    assert "Nothing failed: 6 of 7 cells passed, 1 skipped." in t
    assert "Skipped: 1 cell: adamw.dp_reshardable.dp8.bf16.oracle-gpt-tiny (needs 8 GPUs, the node has 2)" in t
    assert "Checks that said n/a: 2 on 2 cells: bitwise-params on 2" in t
    assert ("Groups not checked, on 2 cells: main_params on 2, exp_avg on 2, params on 1, exp_avg_sq on 1 "
            "(e.g. lion.dp_reshardable.dp2-to-dp4.bf16.gpt-tiny: only the loss is checked in this cell; "
            "n/a here: bitwise-params)") in t
    # the skipped cell is not a failure: not in the failing table, no first-failure box, grey
    assert 'id="failing"' not in r.html
    sec = r.section("adamw.dp_reshardable.dp8.bf16.oracle-gpt-tiny")
    assert "<b>Skipped:</b> needs 8 GPUs, the node has 2" in sec and "First failure" not in sec
    assert '<section class="cell v-skipped"' in r.html
    assert 'class="warn"' not in r.html


def test_without_checks_on_a_group_the_reason_says_what_is_checked():
    cell = synth.make_cell("adam", "dp_reshardable", 2, model="gpt-tiny")
    result = cell["result"]
    result["checks"] = [c for c in result["checks"] if c["on"] != "state"]
    assert summary.unchecked_reason(result, "exp_avg") == "the checks compare main_params, params only"
    result["checks"] = []
    assert summary.unchecked_reason(result, "exp_avg") == "the cell has no check that applies"


# ---- against the baseline --------------------------------------------------

def baseline_pair(make_report):
    """A baseline and a current run: one cell regressed, one fixed, one loss
    curve moved by ~10%, and every cell twice as slow."""
    def cells(shift):
        return [synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=4,
                                fail=None if shift else {"group": "exp_avg", "step": 5}),
                synth.make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4,
                                fail={"group": "exp_avg", "step": 5} if shift else None),
                synth.make_cell("adamw", "dp_reshardable", 2, model="gpt-tiny", loss_shift=shift),
                synth.make_cell("muon_adam", "dp_reshardable", 2, model="gpt-tiny")]
    def timed(cells, wall):
        for c in cells:
            c["entry"]["wall_s"] = c["result"]["wall_s"] = wall
        return cells
    base = make_report(timed(cells(0.0), 1.0), name="base")
    return make_report(timed(cells(0.3), 2.0), name="now", baseline_dir=base.dir)


def test_baseline_answers_new_failures_fixed_loss_shift_and_wall_time(make_report):
    r = baseline_pair(make_report)
    t = text(answers_of(r.html))
    assert "New failures: 1: lion.dp_reshardable.dp2-to-dp3.bf16.oracle-gpt-tiny" in t
    assert "Fixed: 1: adam.dp_reshardable.dp2-to-dp3.bf16.oracle-gpt-tiny" in t
    m = re.search(r"Loss curves shifted beyond 2%: 1: adamw\.dp_reshardable\.dp2\.bf16\.gpt-tiny "
                  r"\(reference (\d+\.\d)%, uninterrupted (\d+\.\d)%\)", t)
    assert m and 5 < float(m.group(1)) < 30, t
    assert "muon_adam" not in t                          # its loss did not move
    assert "wall time of 4 cells 4.0 s → 8.0 s (+100%) beyond ±25%" in t
    # the Markdown's top lines say the same
    top = r.md.split("\n\ncommit", 1)[0]
    assert "**Against the baseline:** 1 new failure: `lion.dp_reshardable.dp2-to-dp3.bf16.oracle-gpt-tiny`" in top
    assert "1 fixed: `adam.dp_reshardable.dp2-to-dp3.bf16.oracle-gpt-tiny`" in top
    assert "1 loss curve shifted beyond 2%: `adamw.dp_reshardable.dp2.bf16.gpt-tiny` (" in top
    assert "(+100%, ⚠️ beyond ±25%)" in top
    # the shifted cell is flagged in the comparison table too
    assert "loss shifted beyond 2%: reference" in r.html


def test_identical_baseline_changes_nothing(make_report):
    base = make_report(synth.realistic(), name="base")
    r = make_report(synth.realistic(), name="now", baseline_dir=base.dir)
    t = text(answers_of(r.html))
    assert "New failures: none Fixed: none Loss curves shifted beyond 2%: none" in t
    assert re.search(r"wall time of 7 cells ([\d.]+) s → \1 s \(\+0%\) What", t), t
    assert 'class="flag"' not in answers_of(r.html) and "Also flagged" not in t


def test_loss_shift_is_relative_to_the_baseline_scale():
    run = {"steps": [1, 2, 3], "loss": [4.0, 2.0, None]}
    moved = {"steps": [2, 3, 4], "loss": [2.1, 9.0, 1.0]}        # only step 2 is on both sides
    shift = compare.loss_shift("reference", moved, run)
    assert shift.step == 2 and shift.max_delta == pytest.approx(0.1) and shift.scale == 2.0
    assert shift.rel == pytest.approx(0.05)
    assert compare.loss_shift("reference", {"steps": [7], "loss": [1.0]}, run) is None
    a = synth.make_cell("adamw", "dp_reshardable", 2, model="gpt-tiny")["result"]
    b = synth.make_cell("adamw", "dp_reshardable", 2, model="gpt-tiny", loss_shift=0.01)["result"]
    c = synth.make_cell("adamw", "dp_reshardable", 2, model="gpt-tiny", loss_shift=0.3)["result"]
    assert compare.shifted_losses(b, a) == []                   # under 2%
    assert [s.run for s in compare.shifted_losses(c, a)] == ["reference", "uninterrupted"]


def test_performance_changes_beyond_a_quarter():
    def bench(name, ns):
        from bench import Benchmark
        return Benchmark("micro.json", name, name, "", ns, ns, "ns", 10, {}, None)
    before = [bench("a", 100.0), bench("b", 100.0), bench("gone", 5.0)]
    after = [bench("a", 120.0), bench("b", 160.0), bench("new", 5.0)]
    changes = compare.bench_changes(after, before)
    assert [(c.name, round(c.rel, 2)) for c in changes] == [("b", 0.6)]
    cells = [Cell({"id": "x", "verdict": "pass", "wall_s": w}, None, "") for w in (10.0, 12.0)]
    wall = compare.wall_change([compare.CellComparison("x", cells[1], cells[0], [], [], [])])
    assert wall.before == 10.0 and wall.after == 12.0 and not wall.beyond


# ---- relative error and ULP semantics ----------------------------------------

def test_rel_floor_and_sign_changes(make_report):
    cell = synth.make_cell("adam", "dp_reshardable", 2, model="gpt-tiny", rel_floor=1e-5,
                           sign_changes={"group": "exp_avg", "step": 5, "count": 3})
    many = synth.make_cell("adamw", "dp_reshardable", 2, model="gpt-tiny", rel_floor=1e-5,
                           sign_changes={"group": "params", "step": 5, "count": 1})
    many["result"]["runs"]["uninterrupted"]["diff"]["params"]["sign_changes"][7] = 4
    for c in (cell, many):          # ULP figures (and their sign-change notes) show where a check has a max ULP
        for check in c["result"]["checks"]:
            check["max_ulp"] = 64
    r = make_report([cell, many])
    rows = group_rows(r.section(cell["entry"]["id"]))
    assert '<span class="sc">ULP n/a for 3 sign-changing elements (step 5)</span>' in rows["exp_avg"][1]
    assert 'class="sc"' not in rows["params"][1]
    assert "max rel<br><small>vs max(|b|, 1e-05)</small>" in r.section(cell["entry"]["id"])
    assert ">max relative |Δ| vs max(|b|, 1e-05)<" in r.section(cell["entry"]["id"])
    rows = group_rows(r.section(many["entry"]["id"]))
    assert "ULP n/a for up to 4 sign-changing elements per step (2 steps)" in rows["params"][1]


def test_results_without_rel_floor_or_sign_changes_render_as_before(make_report):
    cell = synth.make_cell("adam", "dp_reshardable", 2, model="gpt-tiny")
    assert "rel_floor" not in cell["result"]
    assert "sign_changes" not in cell["result"]["runs"]["uninterrupted"]["diff"]["params"]
    r = make_report([cell])
    sec = r.section(cell["entry"]["id"])
    assert "<th>max rel</th>" in sec and "vs max(|b|" not in sec
    assert 'class="sc"' not in sec and "sign-changing" not in sec
    assert ">max relative |Δ|<" in sec


def test_sign_change_note():
    assert summary.sign_change_note(summary.series_max([1, 2], [0, 0])) is None
    assert summary.sign_change_note(summary.series_max([1, 2], None)) is None
    assert summary.sign_change_note(summary.series_max([1, 2], [0, 1])) == \
        "ULP n/a for 1 sign-changing element (step 2)"


# ---- grad norms ----------------------------------------------------------------

def test_grad_norm_plot_beside_the_loss_and_alone_without_one(make_report):
    real = synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=8, model="gpt-tiny", steps=30)
    oracle = synth.make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4)
    r = make_report([real, oracle])
    sec = r.section(real["entry"]["id"])
    plots = re.findall(r'<div class="plot (\w+)"><svg', sec)
    assert plots == ["loss", "gnorm", "diff"]
    gnorm = re.search(r'<div class="plot gnorm">(<svg.*?</svg>)', sec, re.S).group(1)
    assert ">grad norm<" in gnorm and ">resumed (dp3, from step 8)<" in gnorm and ">save at step 8<" in gnorm
    sec = r.section(oracle["entry"]["id"])
    assert re.findall(r'<div class="plot (\w+)"><svg', sec) == ["gnorm"]


def test_no_grad_norm_no_plot(make_report):
    cell = synth.make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4)
    for run in cell["result"]["runs"].values():
        del run["grad_norm"]
    r = make_report([cell])
    assert "<svg" not in r.section(cell["entry"]["id"])


def test_a_skipped_cell_does_not_hide_a_failure_in_its_matrix_slot(make_report):
    failing = synth.make_cell("lion", "dp_reshardable", 2,
                              fail={"group": "exp_avg", "step": 3, "run": "uninterrupted"})
    skipped = synth.make_cell("lion", "dp_reshardable", 2, dtype="fp32", skipped="needs a GPU")
    r = make_report([skipped, failing])
    matrix = r.html[r.html.index('<table id="matrix"'):]
    assert re.search(r'<td class="v-fail">\s*<a class="chip v-skipped"', matrix)


def test_grad_norm_shift_is_flagged_and_drawn_against_the_baseline(make_report):
    """A grad-norm curve that moved beyond 5% is flagged (answers, Markdown,
    the cell's comparison) with the PR-vs-base figure; one within 5% is not."""
    def cells(scale):
        c = synth.make_cell("adamw", "dp_reshardable", 2, model="gpt-tiny")
        c["result"]["config"]["optimizer"]["max_grad_norm"] = 0.5
        for run in c["result"]["runs"].values():
            run["grad_norm"] = [None if v is None else v * scale for v in run["grad_norm"]]
        return [c]
    base = make_report(cells(1.0), name="base")
    small = make_report(cells(1.03), name="small", baseline_dir=base.dir)
    moved = make_report(cells(1.2), name="moved", baseline_dir=base.dir)
    assert "Grad-norm curves shifted beyond 5%: none" in text(answers_of(small.html))
    t = text(answers_of(moved.html))
    assert re.search(r"Grad-norm curves shifted beyond 5%: 1: adamw\.dp_reshardable\.dp2\.bf16\.gpt-tiny "
                     r"\(reference 20\.0%", t), t
    assert "grad norm shifted beyond 5%: reference 20.0% at step" in moved.html
    assert "1 grad-norm curve shifted beyond 5%" in moved.md
    assert moved.html.count('class="plot baseline"') == 1 and "grad norm: now vs baseline" in moved.html
    # the configuration line counts the steps that clipped (norm + 1e-6 > 0.5)
    steps = cells(1.2)[0]["result"]["runs"]["reference"]["grad_norm"]
    clipped = sum(1 for v in steps if v is not None and v + 1e-6 > 0.5)
    assert f"0.5 (clipped {clipped} of {len(steps)} steps)" in moved.html


def test_series_shift_compares_the_named_series():
    base = {"steps": [1, 2, 3], "loss": [4.0, 3.0, 2.0], "grad_norm": [1.0, 2.0, None]}
    now = {"steps": [1, 2, 3], "loss": [4.0, 3.0, 2.0], "grad_norm": [1.0, 2.5, 9.0]}
    assert compare.series_shift("r", now, base, "loss").rel == 0.0
    shift = compare.series_shift("r", now, base, "grad_norm")
    assert (shift.step, shift.series) == (2, "grad_norm") and shift.rel == pytest.approx(0.25)
    result = lambda run: {"runs": {"r": run}}
    assert [s.series for s in compare.shifted_series(result(now), result(base), "grad_norm", 0.05)] == ["grad_norm"]
    assert compare.shifted_series(result(now), result(base), "grad_norm", 0.3) == []
