"""Malformed input: exit code 2 and one line naming the file and the key."""
import json
import os

import pytest

import synth
from conftest import run_report


def write(tmp_path, cells=None):
    return synth.write_results(str(tmp_path / "r"), cells or synth.lion_only())


def edit(path, fn):
    with open(path) as f:
        doc = json.load(f)
    fn(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def expect_error(out, *needles):
    proc = run_report(out, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    assert not os.path.exists(os.path.join(out, "report.html"))
    return lines[0]


def cell_json(out):
    cid = synth.lion_only()[0]["entry"]["id"]
    return os.path.join(out, cid, "result.json")


def test_missing_results_json(tmp_path):
    expect_error(str(tmp_path), os.path.join(str(tmp_path), "results.json"), "cannot read")


def test_invalid_json(tmp_path):
    out = write(tmp_path)
    with open(os.path.join(out, "results.json"), "a") as f:
        f.write("}")
    expect_error(out, "results.json", "invalid JSON at line")


def test_nan_is_not_a_json_number(tmp_path):
    out = write(tmp_path)
    path = cell_json(out)
    text = open(path).read().replace('"wall_s": ', '"wall_s": NaN, "x": ', 1)
    open(path, "w").write(text)
    expect_error(out, "result.json", "NaN is not a JSON number")


def test_missing_cells_key(tmp_path):
    out = write(tmp_path)
    edit(os.path.join(out, "results.json"), lambda d: d.pop("cells"))
    expect_error(out, "results.json: cells: missing")


def test_bad_verdict(tmp_path):
    out = write(tmp_path)
    edit(os.path.join(out, "results.json"), lambda d: d["cells"][0].update(verdict="ok"))
    expect_error(out, "results.json: cells[0].verdict:", "'ok'")


def test_wrong_format(tmp_path):
    out = write(tmp_path)
    edit(cell_json(out), lambda d: d.update(format="shardcheck-cell-result/9"))
    expect_error(out, "result.json: format:")


def test_missing_result_json_of_a_passing_cell(tmp_path):
    out = write(tmp_path)
    os.remove(cell_json(out))
    expect_error(out, cell_json(out), "cannot read")


def test_diff_group_not_in_the_schema_groups(tmp_path):
    """A runner that hard-codes a second moment for Lion must not go unnoticed."""
    out = write(tmp_path)

    def add(d):
        d["runs"]["resumed"]["diff"]["exp_avg_sq"] = d["runs"]["resumed"]["diff"]["exp_avg"]
    edit(cell_json(out), add)
    expect_error(out, "result.json: runs.resumed.diff.exp_avg_sq:", "is not one of the cell's groups")


def test_diff_group_missing(tmp_path):
    out = write(tmp_path)
    edit(cell_json(out), lambda d: d["runs"]["uninterrupted"]["diff"].pop("exp_avg"))
    expect_error(out, "runs.uninterrupted.diff: has no group 'exp_avg'")


def test_series_length_mismatch(tmp_path):
    out = write(tmp_path)
    edit(cell_json(out), lambda d: d["runs"]["resumed"]["diff"]["params"]["max_abs"].pop())
    expect_error(out, "runs.resumed.diff.params.max_abs: has 8 entries but steps has 9")


def test_string_in_a_series(tmp_path):
    out = write(tmp_path)
    edit(cell_json(out), lambda d: d["runs"]["uninterrupted"]["diff"]["params"]["max_ulp"].__setitem__(2, "0"))
    expect_error(out, "runs.uninterrupted.diff.params.max_ulp[2]: expected num or null")


def test_cell_id_mismatch(tmp_path):
    out = write(tmp_path)
    edit(cell_json(out), lambda d: d.update(id="other"))
    expect_error(out, "result.json: id: is 'other'")


def test_bad_bench_file(tmp_path):
    out = write(tmp_path)
    doc = synth.bench_doc()
    doc["benchmarks"][1]["time_unit"] = "fortnights"
    synth.write_results(out, synth.lion_only(), bench={"micro.json": doc})
    expect_error(out, "micro.json: benchmarks[1].time_unit:")


def test_inconsistent_counts_are_a_warning_not_an_error(tmp_path):
    out = write(tmp_path)
    edit(os.path.join(out, "results.json"), lambda d: d["counts"].update(passed=7))
    proc = run_report(out)
    html = open(os.path.join(out, "report.html")).read()
    assert "counts (cells/passed/failed/errored) say 1/7/0/0 but the cells list has 1/1/0/0" in html
    assert proc.returncode == 0


@pytest.mark.parametrize("verdict", ["pass", "fail"])
def test_exit_zero_whatever_the_verdict(tmp_path, verdict):
    cells = synth.one_failing() if verdict == "fail" else synth.all_passing()
    out = synth.write_results(str(tmp_path / verdict), cells)
    proc = run_report(out, "--out", str(tmp_path / "x.html"))
    assert proc.returncode == 0 and os.path.getsize(tmp_path / "x.html") > 10_000
    assert proc.stdout.startswith(f"make_report.py: {verdict.upper()}: {len(cells)} cells")


@pytest.mark.parametrize("value, needles", [
    ("adam", ["results.json: optimizer_order: expected list, got the string 'adam'"]),
    ({"adam": 0}, ["results.json: optimizer_order: expected list, got an object"]),
    (["adam", 3], ["results.json: optimizer_order[1]: expected a string", "got a number"]),
    (["lion", None], ["results.json: optimizer_order[1]: expected a string", "got null"]),
])
def test_malformed_optimizer_order(tmp_path, value, needles):
    out = write(tmp_path)
    edit(os.path.join(out, "results.json"), lambda d: d.update(optimizer_order=value))
    expect_error(out, *needles)


def _set_lr(run, fn):
    def apply(d):
        d["runs"][run]["lr"] = fn(d["runs"][run]["lr"])
    return apply


@pytest.mark.parametrize("run, fn, needle", [
    ("resumed", lambda lr: lr[:-1], "result.json: runs.resumed.lr: has 8 entries but steps has 9"),
    ("uninterrupted", lambda lr: lr + [1e-4], "runs.uninterrupted.lr: has 13 entries but steps has 12"),
    ("reference", lambda lr: ["0.0001"] + lr[1:], "runs.reference.lr[0]: expected num or null, got the string"),
    ("resumed", lambda lr: lr[:3] + [True] + lr[4:], "runs.resumed.lr[3]: expected num or null, got a boolean"),
    ("uninterrupted", lambda lr: 1e-4, "runs.uninterrupted.lr: expected a list, got a number"),
])
def test_malformed_lr_series(tmp_path, run, fn, needle):
    out = write(tmp_path)
    edit(cell_json(out), _set_lr(run, fn))
    expect_error(out, needle)


def test_lr_and_optimizer_order_are_optional(tmp_path):
    """Older results have neither field; null lr entries (after a load) are fine."""
    cells = [synth.make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4, lr_schedule=None)]
    out = synth.write_results(str(tmp_path / "old"), cells, optimizer_order=None)
    assert "optimizer_order" not in json.load(open(os.path.join(out, "results.json")))
    assert "lr" not in json.load(open(cell_json(out)))["runs"]["resumed"]
    assert run_report(out).returncode == 0
    new = synth.write_results(str(tmp_path / "new"), synth.lion_only())
    assert json.load(open(cell_json(new)))["runs"]["resumed"]["lr"][0] is None   # the after-load step
    assert run_report(new).returncode == 0


def test_malformed_rel_floor_and_sign_changes(tmp_path):
    out = write(tmp_path)
    edit(cell_json(out), lambda d: d.update(rel_floor="1e-5"))
    expect_error(out, "result.json: rel_floor: expected num, got the string '1e-5'")
    out = write(tmp_path)
    edit(cell_json(out), lambda d: d.update(rel_floor=1e-5) or
         d["runs"]["resumed"]["diff"]["params"].update(sign_changes=[0]))
    expect_error(out, "runs.resumed.diff.params.sign_changes: has 1 entries but steps has 9")
