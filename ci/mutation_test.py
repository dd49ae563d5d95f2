"""ci/mutation.py's --retest: an earlier run's rows re-made on today's tree.

Run by ctest (`mutation.retest`): /usr/bin/python3 -m pytest -q ci/mutation_test.py
"""
import importlib.util
import json
import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("mutation", HERE / "mutation.py")
mutation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutation)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A repository root with one source file, as ROOT."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.cc").write_text(
        "int f(int x) {\n  return x + 1;\n}\n\nint g(int x) {\n  return x + 1;\n}\n")
    monkeypatch.setattr(mutation, "ROOT", tmp_path)
    return tmp_path


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def row(line, outcome, diff="- return x + 1; / + return x - 1;", source="lib/a.cc"):
    return {"source": source, "line": line, "diff": diff, "outcome": outcome}


def test_retests_survivors_timeouts_and_untried_only(tree):
    rows = write_rows(tree / "rows.jsonl", [
        row(2, "killed"), row(2, "not-compiling"), row(2, "survived"),
        row(6, "timed-out"), row(6, "untried")])
    sample, decided = mutation.retest_sample(rows, [], tree / "out")
    assert [m.origin for m in sample] == ["lib/a.cc:2", "lib/a.cc:6", "lib/a.cc:6"]
    assert decided == []


def test_the_changed_line_is_found_by_text_nearest_the_recorded_line(tree):
    # The file moved on: a line was added above both candidates.
    src = tree / "lib" / "a.cc"
    src.write_text("// new\n" + src.read_text())
    rows = write_rows(tree / "rows.jsonl", [row(6, "survived")])
    [m], _ = mutation.retest_sample(rows, [], tree / "out")
    assert m.line == 7  # g's return, not f's (line 3)
    mutated = pathlib.Path(m.path).read_text().split("\n")
    assert mutated[6] == "  return x - 1;"  # indentation kept
    assert mutated[2] == "  return x + 1;"
    assert src.read_text().count("return x + 1;") == 2  # the source itself untouched


def test_a_line_no_longer_there_is_gone_and_equivalents_are_carried(tree):
    rows = write_rows(tree / "rows.jsonl", [
        row(3, "survived", diff="- return y; / + return 0;"),
        row(2, "survived")])
    sample, decided = mutation.retest_sample(rows, ["lib/a.cc:2"], tree / "out")
    assert sample == []
    assert [(d["outcome"], d["retest_of"]) for d in decided] == [
        ("gone", "lib/a.cc:3"), ("equivalent", "lib/a.cc:2")]
    assert len({d["mutant"] for d in decided}) == 2  # ids for --resume


def test_two_mutants_of_one_line_get_files_of_their_own(tree):
    rows = write_rows(tree / "rows.jsonl", [
        row(2, "survived"), row(2, "survived", diff="- return x + 1; / + return x * 1;")])
    sample, _ = mutation.retest_sample(rows, [], tree / "out")
    assert len({m.path for m in sample}) == 2
    texts = [pathlib.Path(m.path).read_text() for m in sample]
    assert "return x - 1;" in texts[0] and "return x * 1;" in texts[1]


def test_summary_lists_survivors_and_gone_rows_apart(tmp_path):
    rows = [dict(row(2, "killed"), killer="t"), row(2, "survived"),
            dict(row(3, "gone"), retest_of="lib/a.cc:3")]
    mutation.summarize(rows, tmp_path, "ci/mutation --retest rows.jsonl", 60)
    text = (tmp_path / "summary.md").read_text()
    survivors, gone = text.split("## Survivors")[1].split("## Gone")
    assert "lib/a.cc:2" in survivors and "lib/a.cc:3" not in survivors
    assert "lib/a.cc:3" in gone
    assert "| **all** | 1 | 1 | 0 | 0 | 0 | 50% |" in text


def test_untried_lists_the_sample_rows_the_run_lacks(tmp_path):
    sample = [mutation.Mutant("lib/a.cc", f"/m/{i}.cc", i, f"- a / + b{i}") for i in range(4)]
    (tmp_path / "mutants.jsonl").write_text(
        json.dumps({"mutant": "/m/1.cc", "outcome": "killed"}) + "\n" +
        json.dumps({"mutant": "/elsewhere.cc", "outcome": "killed"}) + "\n")
    assert mutation.write_untried(sample, tmp_path) == 0
    rows = [json.loads(l) for l in (tmp_path / "untried.jsonl").read_text().splitlines()]
    assert [r["mutant"] for r in rows] == ["/m/0.cc", "/m/2.cc", "/m/3.cc"]
    assert {r["outcome"] for r in rows} == {"untried"}
