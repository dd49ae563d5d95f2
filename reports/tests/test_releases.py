"""Releases compared (releases.py): an external system pinned at several releases
("megatron-core@0.18.2", "megatron-core@0.19.2"), its cells paired across releases,
what changed, and the section of the HTML and the Markdown."""
import re

import pytest

import releases
import render_markdown
import synth
from load import Cell, load_results
from releases import CHANGED, FIXED, ONE_RELEASE, REGRESSED, SAME

REST = "adamw.dp_reshardable.dp2-to-dp3@4.fp32.oracle-mixed-small"


def cell(system: str, rest: str = REST, verdict: str = "pass", check=None, detail="", result=None,
         skipped=None, **entry) -> Cell:
    """A Cell with only its results.json entry (and `result` when given)."""
    e = dict({"id": f"{system}.{rest}", "dir": f"{system}.{rest}", "system": system, "optimizer": "adamw",
              "sharding_type": "dp_reshardable", "dp": 2, "resume_dp": 3, "save_at": 4, "dtype": "fp32",
              "model": "oracle:mixed-small", "verdict": verdict, "skipped": skipped,
              "first_failure": {"check": check, "step": 4, "tensor": None, "detail": detail} if check else None},
             **entry)
    return Cell(e, result, "")


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


# ---- names, versions, keys -------------------------------------------------------

@pytest.mark.parametrize("name, parts", [
    ("megatron-core@0.19.2", ("megatron-core", "0.19.2", None)),
    ("megatron-core@0.19.2+fused", ("megatron-core", "0.19.2", "fused")),
    ("torch-fsdp2+fused", ("torch-fsdp2", None, "fused")),
    ("shardcheck", ("shardcheck", None, None)),
])
def test_split_system(name, parts):
    s = releases.split_system(name)
    assert (s.base, s.version, s.variant) == parts


def test_versions_sort_as_versions():
    assert sorted(["0.19.2", "0.9.1", "0.18.2"], key=releases.version_key) == ["0.9.1", "0.18.2", "0.19.2"]
    assert sorted(["0.19.10", "0.19.2", "1.0"], key=releases.version_key) == ["0.19.2", "0.19.10", "1.0"]
    assert sorted(["1.0.1", "1.0.post1", "1.0", "1.0rc1", "1.0.dev0"], key=releases.version_key) == \
        ["1.0.dev0", "1.0rc1", "1.0", "1.0.post1", "1.0.1"]


def test_pair_key_drops_the_version_and_keeps_the_variant():
    assert releases.pair_key(cell("megatron-core@0.18.2")) == ("megatron-core", None, REST)
    assert releases.pair_key(cell("megatron-core@0.19.2+fused")) == ("megatron-core", "fused", REST)
    assert releases.pair_key(cell("torch-fsdp2+fused")) is None        # pinned at no version
    assert releases.pair_key(cell("shardcheck", id=REST)) is None


# ---- change classification ---------------------------------------------------------

def outcomes(*specs):
    """Outcomes of (verdict, check) pairs, oldest release first; None for a missing release."""
    return [None if s is None else releases.outcome(cell("x@1", verdict=s[0], check=s[1], detail="d"))
            for s in specs]


@pytest.mark.parametrize("specs, change", [
    ((("pass", None), ("pass", None)), SAME),
    ((("fail", "system-raised"), ("fail", "system-raised")), SAME),
    ((("fail", "system-raised"), ("pass", None)), FIXED),
    ((("error", "run"), ("pass", None)), FIXED),
    ((("xfail", "system-raised"), ("pass", None)), FIXED),
    ((("xfail", "system-raised"), ("xpass", "expected-failure")), FIXED),
    ((("pass", None), ("fail", "bitwise-state-vs-single_device")), REGRESSED),
    ((("pass", None), ("xfail", "system-raised")), REGRESSED),
    ((("pass", None), ("error", "run")), REGRESSED),
    ((("fail", "system-raised"), ("fail", "bitwise-params-vs-single_device")), CHANGED),
    ((("fail", "system-raised"), ("error", "run")), CHANGED),
    ((("pass", None), ("skipped", None)), CHANGED),
    ((("fail", "system-raised"), ("xfail", "system-raised")), CHANGED),
    ((("pass", None), ("fail", "system-raised"), ("pass", None)), CHANGED),   # broke in between
    ((("fail", "system-raised"), None, ("pass", None)), FIXED),               # the missing one is skipped
    ((None, ("pass", None)), ONE_RELEASE),
    ((("fail", "system-raised"), None), ONE_RELEASE),
])
def test_classify(specs, change):
    assert releases.classify(outcomes(*specs)) == change


def test_outcome_text():
    long = "resumed run, rank 0, load at step 4: RuntimeError: " + "x" * 200
    o = releases.outcome(cell("m@1", verdict="fail", check="system-raised", detail=long))
    assert o.check == "system-raised" and len(o.detail) == releases.DETAIL_CHARS and o.detail.endswith("…")
    assert o.text == "system-raised: " + o.detail and o.expected is None
    skipped = releases.outcome(cell("m@1", verdict="skipped", skipped="needs 4 GPUs, the node has 2"))
    assert (skipped.check, skipped.text) == (None, "needs 4 GPUs, the node has 2")
    assert releases.outcome(cell("m@1")).text == ""
    xfail = releases.outcome(cell("m@1", verdict="xfail", check="system-raised", detail="d", result={
        "expected": {"verdict": "fail", "reason": "docs/findings.md#megatron-lion-reshard the state is lost",
                     "failing_check": None, "got": "fail"}}))
    assert xfail.expected == "docs/findings.md#megatron-lion-reshard"


# ---- pairing ------------------------------------------------------------------------

def test_pairs_cells_across_releases_sorted_as_versions():
    cells = [cell("megatron-core@0.19.2", verdict="fail", check="system-raised", detail="new"),
             cell("megatron-core@0.9.1"),
             cell("megatron-core@0.18.2", verdict="fail", check="system-raised", detail="old"),
             cell("torch-fsdp2", id=f"torch-fsdp2.{REST}"), cell("shardcheck", id=REST)]
    (t,) = releases.compare_releases(cells)
    assert t.base == "megatron-core" and t.versions == ["0.9.1", "0.18.2", "0.19.2"]
    (row,) = t.rows
    assert row.rest == REST and row.variant is None
    assert [o.cell.system for o in row.outcomes] == ["megatron-core@0.9.1", "megatron-core@0.18.2",
                                                     "megatron-core@0.19.2"]
    assert [o.detail for o in row.outcomes] == ["", "old", "new"]
    assert row.change == REGRESSED and t.change_label(row) == "regressed"
    assert (row.get("optimizer"), row.get("sharding_type"), t.plan(row), row.get("dtype")) == \
        ("adamw", "dp_reshardable", "dp2→dp3", "fp32")


def test_rows_of_one_release_and_variants_kept_apart():
    other = "adamw.fully_reshardable.dp2-to-dp3@4.fp32.oracle-mixed-small"
    cells = [cell("megatron-core@0.18.2"), cell("megatron-core@0.19.2"),
             cell("megatron-core@0.19.2", rest=other, sharding_type="fully_reshardable"),
             cell("megatron-core@0.18.2+fused", verdict="fail", check="system-raised", detail="d"),
             cell("megatron-core@0.19.2+fused")]
    (t,) = releases.compare_releases(cells)
    assert [(r.variant, r.rest) for r in t.rows] == [(None, REST), (None, other), ("fused", REST)]
    plain, single, fused = t.rows
    assert plain.change == SAME and fused.change == FIXED
    assert single.change == ONE_RELEASE and single.outcomes[0] is None
    assert t.change_label(single) == "only in 0.19.2"
    assert t.varies("variant") and not t.varies("model") and not t.varies("save_at")
    assert t.counts() == {REGRESSED: 0, FIXED: 1, CHANGED: 0, SAME: 1, ONE_RELEASE: 1}
    assert t.counts_text() == "3 cells compared: 0 regressed, 1 fixed, 0 changed, 1 same, 1 in one release only"


def test_variants_alone_make_no_table():
    # one version of megatron-core, seen plain and with a variant; torch-fsdp2 pinned at none
    cells = [cell("megatron-core@0.19.2"), cell("megatron-core@0.19.2+fused"),
             cell("torch-fsdp2", id=f"torch-fsdp2.{REST}"), cell("torch-fsdp2+fused", id=f"torch-fsdp2+fused.{REST}")]
    assert releases.compare_releases(cells) == []


def test_a_table_per_base_in_order_of_appearance():
    cells = [cell("te@2.1"), cell("megatron-core@0.18.2"), cell("te@2.10"), cell("megatron-core@0.19.2"),
             cell("solo@1.0")]
    tables = releases.compare_releases(cells)
    assert [(t.base, t.versions) for t in tables] == [("te", ["2.1", "2.10"]),
                                                      ("megatron-core", ["0.18.2", "0.19.2"])]


def test_save_step_and_model_shown_when_they_vary():
    cells = [cell(f"m@{v}", rest=f"adamw.dp_reshardable.dp2-to-dp3@{s}.fp32.{m}", save_at=s, model=m)
             for v in ("1", "2") for s, m in ((4, "oracle-a"), (6, "oracle-b"))]
    (t,) = releases.compare_releases(cells)
    assert t.varies("save_at") and t.varies("model")
    assert [t.plan(r) for r in t.rows] == ["dp2→dp3 @4", "dp2→dp3 @6"]


def test_the_real_megatron_run_pairs_into_four_same_rows(tmp_path):
    out = synth.write_results(str(tmp_path / "r"), synth.releases())
    (t,) = releases.compare_releases(load_results(out).cells)
    assert t.versions == ["0.18.2", "0.19.2"]
    assert [r.get("sharding_type") for r in t.rows] == ["dp_reshardable", "fully_reshardable",
                                                       "fully_sharded_model_space", "dp_zero_gather_scatter"]
    assert {r.change for r in t.rows} == {SAME}
    old, new = t.rows[1].outcomes
    assert old.check == new.check == "system-raised"
    assert "distrib_optimizer.py:1167" in old.cell.entry["first_failure"]["detail"]
    assert "distrib_optimizer.py:1223" in new.cell.entry["first_failure"]["detail"]
    assert t.counts_text() == "4 cells compared: 0 regressed, 0 fixed, 0 changed, 4 same"


# ---- the HTML and the Markdown --------------------------------------------------------

def mixed():
    """The megatron run's cells, and: a row fixed in 0.19.2 (0.18.2 failed as expected), one
    regressed (0.19.2 fails against the single-device run), one changed (0.18.2 raised, 0.19.2
    fails a check), one in 0.19.2 only, a +fused row, shardcheck's own cell and a torch-fsdp2 one."""
    found = "docs/findings.md#megatron-lion-reshard the state is lost on a DP change"
    lion = synth.expect_failure(synth.release_cell("0.18.2", "dp_reshardable", optimizer="lion"), found,
                                failing_check="system-raised")
    bad = {"group": "exp_avg", "step": 5, "run": "resumed"}
    return (synth.releases()
            + [lion, synth.release_cell("0.19.2", "dp_reshardable", raised=False, optimizer="lion"),
               synth.release_cell("0.18.2", "fully_reshardable", raised=False, optimizer="adam"),
               synth.release_cell("0.19.2", "fully_reshardable", raised=False, optimizer="adam", fail=bad),
               synth.release_cell("0.18.2", "fully_sharded_model_space", optimizer="lion"),
               synth.release_cell("0.19.2", "fully_sharded_model_space", raised=False, optimizer="lion", fail=bad),
               synth.release_cell("0.19.2", "dp_zero_gather_scatter", raised=False, optimizer="lion"),
               synth.release_cell("0.19.2", "dp_reshardable", variant="fused")]
            + [synth.make_cell("adam", "dp_reshardable", 2, system="shardcheck"),
               synth.make_external_cell("torch-fsdp2", "adam", "dcp", 2)])


@pytest.fixture(scope="module")
def mixed_report(tmp_path_factory):
    from conftest import Report
    return Report(tmp_path_factory.mktemp("releases"), mixed())


def section(html: str) -> str:
    start = html.index('<h2 id="releases">')
    return html[start:html.index("<h2", start + 5)]


def test_html_section(mixed_report):
    html = mixed_report.html
    sec = section(html)
    # near the top: after the answers and the navigation, before the failing cells, matrix and cells
    assert html.index('<section id="answers">') < html.index('<h2 id="releases">') < html.index('id="failing"') \
        < html.index('id="matrix"') < html.index('id="cells"')
    assert '<a href="#releases">Releases compared</a>' in html
    count = text(sec[sec.index('id="releases-megatron-core"'):])
    assert count.startswith('id="releases-megatron-core">megatron-core 0.18.2 → 0.19.2: 9 cells compared: '
                            '1 regressed, 1 fixed, 1 changed, 4 same, 2 in one release only')
    assert sec.count('<table class="releases">') == 1          # one base at two releases; torch-fsdp2 at none
    head = re.search(r"<tr><th>variant</th>.*?</tr>", sec, re.S).group(0)
    assert re.findall(r"<th>([^<]*)</th>", head) == ["variant", "optimizer", "sharding type", "dp", "dtype",
                                                      "megatron-core@0.18.2", "megatron-core@0.19.2", "change"]
    rows = re.findall(r"<tr title=\"([^\"]*)\">(.*?)</tr>", sec, re.S)
    by_rest = {rest: body for rest, body in rows}
    assert len(rows) == 9 and "torch-fsdp2" not in sec and "shardcheck" not in sec.split("</p>", 1)[1]
    fixed = by_rest["lion.dp_reshardable.dp2-to-dp3@4.fp32.oracle-mixed-small"]
    assert '<td class="ch-fixed">fixed</td>' in fixed
    assert '<span class="badge v-xfail">XFAIL</span>' in fixed and '<span class="badge v-pass">PASS</span>' in fixed
    assert "expected to fail: docs/findings.md#megatron-lion-reshard" in fixed
    assert ('href="#megatron-core@0.18.2.lion.dp_reshardable.dp2-to-dp3@4.fp32.oracle-mixed-small"' in fixed)
    regressed = by_rest["adam.fully_reshardable.dp2-to-dp3@4.fp32.oracle-mixed-small"]
    assert '<td class="ch-regressed">regressed</td>' in regressed
    assert "<code>bitwise-state-vs-single_device</code>: " in regressed
    single = by_rest["lion.dp_zero_gather_scatter.dp2-to-dp3@4.fp32.oracle-mixed-small"]
    assert re.search(r"<td>—</td>\s*<td><a href=", single) and "only in 0.19.2" in single
    same = by_rest["adamw.fully_reshardable.dp2-to-dp3@4.fp32.oracle-mixed-small"]
    assert "<code>system-raised</code>: resumed run, rank 0, load at step 4: KeyError: &#39;step&#39;" in same
    assert '<td class="ch-same">same</td>' in same
    fused = [body for rest, body in rows if body.startswith("<td>+fused</td>")]
    assert len(fused) == 1 and "only in 0.19.2" in fused[0]


def test_markdown_section(mixed_report):
    md = mixed_report.md
    assert md.index("**18 cells:") < md.index("### Releases compared") < md.index("### Matrix")
    part = md[md.index("### Releases compared"):md.index("### Matrix")]
    assert ("**megatron-core** `0.18.2` → `0.19.2`: 9 cells compared: 1 regressed, 1 fixed, 1 changed, 4 same, "
            "2 in one release only.") in part
    assert "| cell | 0.18.2 | 0.19.2 | change |" in part and "|---|---|---|---|" in part
    rows = [line for line in part.splitlines() if line.startswith("| ") and not line.startswith("| cell")]
    assert len(rows) == 9
    detail = "resumed run, rank 0, load at step 4: KeyError: 'step' (megatron/core/optimizer/distrib_optimizer.py…"
    assert len(detail) == releases.DETAIL_CHARS                 # cut before the line numbers, which differ
    assert rows[1] == (f"| adamw · fully_reshardable · dp2→dp3 · fp32 | ❌ fail `system-raised`: {detail} | "
                       f"❌ fail `system-raised`: {detail} | same |")
    fixed = next(r for r in rows if r.startswith("| lion · dp_reshardable"))
    assert "🟡 xfail `system-raised`:" in fixed and "· expected to fail: docs/findings.md#megatron-lion-reshard" in fixed
    assert fixed.endswith("| ✅ pass | fixed |")
    assert next(r for r in rows if r.startswith("| adam · fully_reshardable")).endswith("| regressed |")
    assert next(r for r in rows if r.startswith("| lion · dp_zero_gather_scatter")).startswith(
        "| lion · dp_zero_gather_scatter · dp2→dp3 · fp32 | — | ✅ pass | only in 0.19.2 |")
    assert any(r.startswith("| +fused · adamw · dp_reshardable") for r in rows)
    changed = next(r for r in rows if r.startswith("| lion · fully_sharded_model_space"))
    assert "❌ fail `system-raised`: uninterrupted run" in changed and "❌ fail `bitwise-state-vs-single_device`" in changed
    assert changed.endswith("| changed |")


def test_the_real_run_renders_four_same_rows(make_report):
    r = make_report(synth.releases())
    assert "4 cells compared: 0 regressed, 0 fixed, 0 changed, 4 same" in text(section(r.html))
    assert r.html.count('<td class="ch-same">same</td>') == 4
    assert "**megatron-core** `0.18.2` → `0.19.2`: 4 cells compared: 0 regressed, 0 fixed, 0 changed, 4 same." in r.md


@pytest.mark.parametrize("cells", [
    lambda: [c for c in synth.releases() if c["entry"]["system"] == "megatron-core@0.19.2"],
    lambda: synth.systems(),
    lambda: synth.all_passing(),
])
def test_no_section_with_one_release(make_report, cells):
    r = make_report(cells())
    assert 'id="releases"' not in r.html and "Releases compared" not in r.html
    assert "Releases compared" not in r.md


def test_the_markdown_section_is_bounded(tmp_path):
    cells = [synth.release_cell(v, s, optimizer=o, base=b)  # each raised: rows with two long details
             for b in ("megatron-core", "transformer-engine") for v in ("0.18.2", "0.19.2")
             for o in synth.SCHEMAS for s in synth.SHARDING_TYPES]
    out = synth.write_results(str(tmp_path / "r"), cells)
    md = render_markdown.render(load_results(out), limit=8000)
    assert len(md) < 8000
    part = md[md.index("### Releases compared"):md.index("### Matrix")]
    assert re.search(r"_… and \d+ more megatron-core rows left out to stay under the limit; see the HTML report._",
                     part)
    assert re.search(r"_… (and )?\d+ (more )?transformer-engine rows left out", part)   # no room left for it
    assert "| adam · dp_reshardable · dp2→dp3 · fp32 |" in part and "### Matrix" in md
    full = render_markdown.render(load_results(out))
    assert full.count("20 cells compared: 0 regressed, 0 fixed, 0 changed, 20 same.") == 2
    assert "rows left out" not in full
