"""The adapter protocol end to end (docs/systems.md): shardcheck driving PyTorch FSDP2 + DCP
through systems/torch_fsdp2/adapter.py, the negative check, expected failures (xfail, xpass),
cells a system cannot run, and the adapter's own errors.

Run by ctest (`systems.protocol`, `systems.expectations`):
    /usr/bin/python3 -m pytest -q systems/systems_test.py --binary build/shardcheck
Tests marked `torch` need the systems' venv (ci/setup-systems).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINDING = "docs/findings.md#torch-fused-adam-cpu-shard-length"


@pytest.fixture
def binary(request):
    return request.config.getoption("binary")


def scenario(tmp_path, text, name="s.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def run(binary, path, out, env=None, *args):
    full_env = dict(os.environ, **(env or {}))
    p = subprocess.run([binary, "run", path, "--out", str(out), "--quiet", *args],
                       capture_output=True, text=True, env=full_env, timeout=900)
    return p.returncode, p.stdout + p.stderr


def results(out):
    with open(os.path.join(out, "results.json")) as f:
        agg = json.load(f)
    cells = {}
    for c in agg["cells"]:
        with open(os.path.join(out, c["dir"], "result.json")) as f:
            cells[c["id"]] = json.load(f)
    return agg, cells


FSDP2_CELL = textwrap.dedent("""\
    name: t
    system: torch-fsdp2
    model: oracle:mixed-small
    optimizer: {name: adamw, weight_decay: 0.02}
    sharding_type: dcp
    dp: 2
    resume: {save_at: 4, dp: 3}
    steps: 8
    """)


@pytest.mark.torch
def test_load_without_optimizer_state_fails_a_named_check(binary, tmp_path):
    """The negative check: a resume that loads only the model (the adapter's injected bug)
    must fail a state check right after the load, naming the tensor."""
    path = scenario(tmp_path, FSDP2_CELL)
    code, log = run(binary, path, tmp_path / "out", {"SHARDCHECK_ADAPTER_INJECT": "load_model_only"})
    assert code == 1, log
    agg, cells = results(tmp_path / "out")
    (cell,) = cells.values()
    assert cell["verdict"] == "fail"
    checks = {c["name"]: c for c in cell["checks"]}
    for name in ("bitwise-state-vs-single_device", "bitwise-state-vs-uninterrupted", "tolerance-state"):
        c = checks[name]
        assert c["verdict"] == "fail", name
        assert c["first_failing_step"] == 4, name
        assert c["first_failing_tensor"].startswith("state."), name
        assert "right after the load" in c["detail"], name
    # The params are loaded: they part only at the first update after the load.
    assert checks["bitwise-params-vs-uninterrupted"]["first_failing_step"] == 5
    assert any("load_model_only" in n for a in cell["adapter"] for n in a["notes"])


@pytest.mark.torch
def test_clean_reshard_is_bitwise_and_records_the_system(binary, tmp_path):
    path = scenario(tmp_path, FSDP2_CELL)
    code, log = run(binary, path, tmp_path / "out")
    assert code == 0, log
    agg, cells = results(tmp_path / "out")
    (cell,) = cells.values()
    assert cell["verdict"] == "pass"
    names = [c["name"] for c in cell["checks"]]
    assert names == ["bitwise-params-vs-single_device", "bitwise-state-vs-single_device",
                     "bitwise-params-vs-uninterrupted", "bitwise-state-vs-uninterrupted",
                     "tolerance-params", "tolerance-state"]
    assert cell["environment"]["system"]["versions"]["torch"].startswith("2.11")
    assert agg["cells"][0]["system"] == "torch-fsdp2"
    # torch keeps a `step` per param: compared within the system, not against the schema.
    assert "step" in cell["system_state_keys"]
    assert "step" in cell["runs"]["resumed"]["diff_single_device"]
    for run_name in ("single_device", "uninterrupted", "resumed"):
        assert os.path.exists(tmp_path / "out" / cell["id"] / run_name / "final.safetensors")


@pytest.mark.torch
def test_xpass_fails_the_run(binary, tmp_path):
    """A cell expected to fail that passes is an xpass, and the run fails (strict)."""
    path = scenario(tmp_path, FSDP2_CELL + f"expect: fail\nreason: \"{FINDING}\"\n")
    code, log = run(binary, path, tmp_path / "out")
    assert code == 1, log
    agg, cells = results(tmp_path / "out")
    (cell,) = cells.values()
    assert cell["verdict"] == "xpass"
    assert cell["first_failure"]["check"] == "expected-failure"
    assert agg["counts"]["xpassed"] == 1 and agg["verdict"] == "fail"
    assert "1 passed unexpectedly (xpass)" in log


@pytest.mark.torch
def test_fused_sgd_fails_with_the_systems_own_error(binary, tmp_path):
    """What the system under test raises is a failed check naming torch's file:line."""
    path = scenario(tmp_path, FSDP2_CELL.replace("torch-fsdp2", "torch-fsdp2+fused")
                    .replace("adamw", "sgd"))
    code, log = run(binary, path, tmp_path / "out")
    assert code == 1, log
    _, cells = results(tmp_path / "out")
    (cell,) = cells.values()
    assert cell["verdict"] == "fail"
    ff = cell["first_failure"]
    assert ff["check"] == "system-raised" and ff["step"] == 1
    assert "_fused_sgd_" in ff["detail"] and "torch/distributed/tensor/" in ff["detail"]
    assert cell["adapter"][-1]["error"]["phase"] == "step"


def shardcheck_cell(tmp_path, extra):
    return scenario(tmp_path, textwrap.dedent("""\
        name: e
        model: oracle:mixed-small
        optimizer: sgd
        sharding_type: dp_reshardable
        dp: 2
        resume: {save_at: 2, dp: 3}
        steps: 4
        bucket_size: 1000
        """) + extra)


def test_xfail_is_not_a_failure(binary, tmp_path):
    """A cell expected to fail that fails its expected check is an xfail; the run passes."""
    path = shardcheck_cell(tmp_path, f"expect: fail\nfailing_check: bitwise-params\nreason: \"{FINDING}\"\n")
    code, log = run(binary, path, tmp_path / "out", {"SHARDCHECK_FAILPOINTS": "grad_scale_applied_twice"})
    assert code == 0, log
    agg, cells = results(tmp_path / "out")
    (cell,) = cells.values()
    assert cell["verdict"] == "xfail"
    assert cell["expected"]["reason"] == FINDING and cell["expected"]["got"] == "fail"
    assert cell["first_failure"]["check"] == "bitwise-params"
    assert agg["counts"]["xfailed"] == 1 and agg["verdict"] == "pass"


def test_xfail_on_another_check_is_a_failure(binary, tmp_path):
    path = shardcheck_cell(tmp_path, f"expect: fail\nfailing_check: system-raised\nreason: \"{FINDING}\"\n")
    code, log = run(binary, path, tmp_path / "out", {"SHARDCHECK_FAILPOINTS": "grad_scale_applied_twice"})
    assert code == 1, log
    _, cells = results(tmp_path / "out")
    (cell,) = cells.values()
    assert cell["verdict"] == "fail"
    assert "expected system-raised to fail" in cell["first_failure"]["detail"]


def test_expected_failure_that_passes_is_xpass_without_torch(binary, tmp_path):
    path = shardcheck_cell(tmp_path, f"xfail:\n  - {{optimizer: sgd, reason: \"{FINDING}\"}}\n")
    code, log = run(binary, path, tmp_path / "out")
    assert code == 1, log
    _, cells = results(tmp_path / "out")
    assert [c["verdict"] for c in cells.values()] == ["xpass"]


def test_combinations_a_system_lacks_are_skipped_with_the_reason(binary, tmp_path):
    path = scenario(tmp_path, """\
        name: u
        system: [shardcheck, torch-fsdp2]
        model: oracle:mixed-small
        optimizer: [adamw, lion]
        sharding_type: [dp_reshardable, dcp]
        dp: 2
        steps: 2
        exclude:
          - {system: shardcheck, optimizer: adamw, sharding_type: dp_reshardable}
          - {system: torch-fsdp2, optimizer: adamw, sharding_type: dcp}
        """)
    code, log = run(binary, path, tmp_path / "out", {}, "--filter", "optimizer=lion")
    _, cells = results(tmp_path / "out")
    verdicts = {cid: c["verdict"] for cid, c in cells.items()}
    reasons = {cid: c.get("skipped", "") for cid, c in cells.items()}
    assert verdicts["lion.dp_reshardable.dp2.fp32.oracle-mixed-small"] == "pass"
    assert "has no sharding type dcp" in reasons["lion.dcp.dp2.fp32.oracle-mixed-small"]
    assert "torch.optim has no such optimizer" in reasons["torch-fsdp2.lion.dcp.dp2.fp32.oracle-mixed-small"]
    assert "checkpoints through DCP" in reasons["torch-fsdp2.lion.dp_reshardable.dp2.fp32.oracle-mixed-small"]
    assert code == 0, log


def test_missing_python_is_an_environment_error(binary, tmp_path):
    path = scenario(tmp_path, FSDP2_CELL)
    code, log = run(binary, path, tmp_path / "out", {"SHARDCHECK_SYSTEMS_PYTHON": str(tmp_path / "no-python")})
    assert code == 3, log
    _, cells = results(tmp_path / "out")
    (cell,) = cells.values()
    assert cell["verdict"] == "error"
    assert "ci/setup-systems" in cell["error"] and "no-python" in cell["error"]


def test_adapter_refuses_a_malformed_plan(tmp_path):
    """Exit 2 and one line naming the file and key, before importing torch."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format": "shardcheck-plan/1", "cell": "x"}))
    p = subprocess.run([sys.executable, os.path.join(ROOT, "systems", "torch_fsdp2", "adapter.py"),
                        "--plan", str(plan), "--run", "uninterrupted"], capture_output=True, text=True)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and str(plan) in lines[0] and "missing key 'model'" in lines[0], p.stderr
