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


def top_lines(md: str):
    """The answer lines between the verdict heading and the environment line."""
    return md.split("\n\ncommit", 1)[0].splitlines()[2:]


def test_top_lines_answer_the_three_questions(make_report):
    cells = synth.one_failing() + [
        synth.make_cell("lion", "dp_reshardable", 2, resume_dp=4, save_at=4, model="gpt-tiny", real_checks=True),
        synth.make_cell("adamw", "dp_reshardable", 8, skipped="needs 8 GPUs, the node has 2")]
    md = make_report(cells).md
    first, baseline, uncovered = top_lines(md)
    assert first == ("- **Failed first:** `lion.dp_zero_gather_scatter.dp2-to-dp3.bf16.oracle-gpt-tiny` (fail): "
                     "step 6, tensor `state.exp_avg.layers.1.fc1.weight`, check "
                     "`resumed-vs-reference-bitwise-state`.")
    assert baseline == "- **Against the baseline:** no baseline given."
    assert uncovered.startswith("- **Not covered:** 1 skipped: `adamw.dp_reshardable.dp8.bf16.oracle-gpt-tiny` "
                                "(needs 8 GPUs, the node has 2); 1 check n/a on 1 cell: `bitwise-params` on 1; "
                                "groups not checked on 1 cell: `params` on 1, `main_params` on 1, `exp_avg` on 1 "
                                "(e.g. `lion.dp_reshardable.dp2-to-dp4.bf16.gpt-tiny`: only the loss is checked")
    # the skipped cell is not listed as failing, but among the skipped cells with its reason
    failing = md.split("### Failing cells", 1)[1].split("###", 1)[0]
    assert "| `adamw.dp_reshardable.dp8" not in failing
    assert "| `adamw.dp_reshardable.dp8.bf16.oracle-gpt-tiny` | needs 8 GPUs, the node has 2 |" in \
        md.split("### Skipped cells", 1)[1]


def test_top_lines_of_a_passing_run(make_report):
    first, baseline, uncovered = top_lines(make_report(synth.all_passing()).md)
    assert first == "- **Failed first:** nothing: 4 of 4 cells passed."
    assert uncovered.startswith("- **Not covered:** nothing")


def test_top_lines_stay_short_with_many_skipped_cells(tmp_path):
    cells = synth.large(400, failing=0)
    for c in cells:
        c["entry"]["verdict"] = c["result"]["verdict"] = "skipped"
        c["result"]["skipped"] = "s" * 1000
    out = synth.write_results(str(tmp_path / "r"), cells)
    md = render_markdown.render(load_results(out))
    lines = top_lines(md)
    assert len(lines) == 3 and all(len(line) < 1500 for line in lines)
    assert "400 skipped" in lines[2] and "and 397 more" in lines[2]
