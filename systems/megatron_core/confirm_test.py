"""Each megatron-core finding's cause, confirmed (docs/findings.md, "megatron-core findings").

A finding's cells fail on the installed release (scenarios/ci/systems_megatron.yaml marks them
xfail, so CI sees that). Here each runs again against a copy of the release with the finding's
one spot patched (systems/megatron_core/confirm.py), and must pass every check, bitwise: the
patched spot was the cause. Stacked findings are confirmed in order: with the first patch alone
the cell moves on to the next finding's failure.

Run by ctest (`systems.megatron_confirm`):
    /usr/bin/python3 -m pytest -q systems/megatron_core/confirm_test.py --binary build/shardcheck
"""

import json
import os
import subprocess
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = os.path.join(ROOT, ".venv-torch", "bin", "python")
CONFIRM = os.path.join(ROOT, "systems", "megatron_core", "confirm.py")

STEP_KEY = "megatron-core-load-missing-step-key"
SHARED_STEP = "megatron-core-shared-step-tensor"


def cell(optimizer, sharding="fully_reshardable", dtype="fp32", resume=True, version="0.19.2"):
    """One megatron-core cell: dp 2, 12 steps, saved at step 4 and resumed at dp 3."""
    text = f"""\
        name: confirm
        system: megatron-core@{version}
        model: oracle:mixed-small
        dtype: {dtype}
        optimizer: {{name: {optimizer}, weight_decay: 0.02}}
        sharding_type: {sharding}
        dp: 2
        steps: 12
        """
    if resume:
        text += "resume: {save_at: 4, dp: 3}\n"
    return textwrap.dedent(text)


def confirm(tmp_path, binary, version, patches, text):
    """Runs the cell on a patched copy of `version`; its result.json."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "cell.yaml"
    path.write_text(text)
    out = tmp_path / "out"
    args = [PYTHON, CONFIRM, "--version", version, "--scenario", str(path), "--out", str(out),
            "--shardcheck", binary]
    for p in patches:
        args += ["--patch", p]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900)
    with open(out / "run" / "results.json", encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    assert len(cells) == 1, proc.stdout + proc.stderr
    with open(out / "run" / cells[0]["dir"] / "result.json", encoding="utf-8") as f:
        result = json.load(f)
    notes = [n for a in result.get("adapter", []) for n in a.get("notes", [])]
    assert any("from a patched copy" in n for n in notes), notes
    return proc.returncode, result


@pytest.fixture
def binary(request):
    return request.config.getoption("binary")


def spawned_workers():
    """PIDs of multiprocessing spawn workers on this machine (megatron's save starts some)."""
    p = subprocess.run(["pgrep", "-f", "multiprocessing.spawn"], capture_output=True, text=True)
    return set(p.stdout.split())


@pytest.fixture(autouse=True)
def no_worker_outlives_its_cell():
    before = spawned_workers()
    yield
    left = spawned_workers() - before
    assert not left, f"processes left running after the cell: {sorted(left)}"


def assert_passes(rc, result):
    failure = result.get("first_failure") or {}
    assert result["verdict"] == "pass", failure.get("detail")
    assert rc == 0
    assert all(c["verdict"] == "pass" for c in result["checks"])


def assert_parts_after_load(result):
    """The resumed run loaded and stepped, and parts bitwise at step 5, the first after the load."""
    failure = result["first_failure"]
    assert failure["check"].startswith("bitwise-"), failure
    assert failure["step"] == 5 and failure["detail"].startswith("resumed run, step 5"), failure
    assert result["verdict"] == "fail"


@pytest.mark.parametrize("version", ["0.18.2", "0.19.2"])
def test_load_step_key_then_shared_step(tmp_path, binary, version):
    # The load's KeyError patched alone: the resume gets through and parts at step 5, the first
    # step after the load, where the shared step counter miscounts bias correction.
    if version == "0.19.2":
        rc, result = confirm(tmp_path / "one", binary, version, [STEP_KEY], cell("adamw"))
        assert_parts_after_load(result)
    rc, result = confirm(tmp_path / "both", binary, version, [STEP_KEY, SHARED_STEP],
                         cell("adamw", version=version))
    assert_passes(rc, result)


def test_dp_zero_loader_grad_mode(tmp_path, binary):
    rc, result = confirm(tmp_path, binary, "0.19.2",
                         ["megatron-core-dp-zero-load-grad-mode", STEP_KEY, SHARED_STEP],
                         cell("adamw", sharding="dp_zero_gather_scatter"))
    assert_passes(rc, result)


def test_dp_reshardable_loader_grad_mode(tmp_path, binary):
    # Past the grad-mode patch the load goes through; the resumed run then parts from the
    # uninterrupted one (a further cause on this path, docs/findings.md).
    rc, result = confirm(tmp_path, binary, "0.19.2",
                         ["megatron-core-dp-reshardable-load-grad-mode", STEP_KEY, SHARED_STEP],
                         cell("adamw", sharding="dp_reshardable"))
    assert_parts_after_load(result)


def test_lion_through_the_distributed_optimizer(tmp_path, binary):
    rc, result = confirm(tmp_path, binary, "0.19.2", ["megatron-core-lion-unsharded"],
                         cell("lion", resume=False))
    assert_passes(rc, result)
    notes = [n for a in result["adapter"] for n in a["notes"]]
    assert any("DistributedOptimizer(Lion)" in n for n in notes), notes


def test_layer_wise_lion_checkpoint_without_step(tmp_path, binary):
    rc, result = confirm(tmp_path, binary, "0.19.2", ["megatron-core-state-dict-step-without-step"],
                         cell("muon_lion", dtype="bf16"))
    assert_passes(rc, result)
