"""The Markdown summary: contents, and the 60,000-character bound on large matrices."""
import re

import synth
from load import load_results
import render_markdown


def test_failing_summary(make_report):
    r = make_report(synth.one_failing())
    md = r.md
    assert md.startswith("## shardcheck: ❌ FAIL")
    assert "| optimizer · sharding type | dp2 | dp2→dp3 | dp2→dp4 | dp4 |" in md
    assert "|---|---|---|---|---|" in md
    assert re.search(r"^\| lion · dp_zero_gather_scatter \|  \| ❌ \|  \|  \|$", md, re.M)
    row = next(line for line in md.splitlines() if line.startswith("| `lion.dp_zero_gather_scatter"))
    assert "| 6 | `state.exp_avg.layers.1.fc1.weight` | resumed-vs-reference-bitwise-state |" in row
    assert "[report.html](report.html)" in md
    assert "**5 cells: 4 passed, 1 failed, 0 errored**" in md


def test_passing_summary_has_no_failing_section(make_report):
    md = make_report(synth.all_passing()).md
    assert md.startswith("## shardcheck: ✅ PASS") and "Failing cells" not in md
    assert "| adam · dp_reshardable | ✅ | ✅ |" in md


def test_large_summary_under_the_limit(large_report):
    md = large_report.md
    assert len(md) < 60000
    assert md.count("\n| `") == 4                     # the four failing cells
    assert len([l for l in md.splitlines() if l.startswith("| ") and " · " in l]) == 21  # header + 20 rows


def test_all_failing_large_matrix_is_truncated_with_a_note(tmp_path):
    cells = synth.large(400, failing=0)
    for c in cells:                                   # every cell fails, with a long detail
        c["entry"]["verdict"] = c["result"]["verdict"] = "fail"
        c["entry"]["first_failure"] = {"check": "resumed-vs-reference-bitwise-state", "step": 3,
                                       "tensor": "state.x.layers.1.fc1.weight", "detail": "d" * 1000}
    out = synth.write_results(str(tmp_path / "r"), cells)
    md = render_markdown.render(load_results(out))
    assert len(md) < 60000
    assert re.search(r"_… and \d+ more failing cells not listed here; see the HTML report._", md)
    assert "| lion · dp_reshardable |" in md           # the matrix is still there


def test_many_matrix_rows_are_truncated_too(tmp_path):
    cells = [synth.make_cell("lion", f"type_{i:03d}", 2, ranks_memory=False) for i in range(600)]
    for c in cells:
        c["result"]["config"]["sharding_type"] = c["entry"]["sharding_type"]
    out = synth.write_results(str(tmp_path / "r"), cells)
    md = render_markdown.render(load_results(out), limit=6000)
    assert len(md) < 6000 and "more matrix rows left out" in md
