#!/usr/bin/python3
"""Synthetic results directories that follow docs/results-schema.md.

The tests build their inputs with this module instead of running the C++
harness. `make_cell(...)` returns one cell (its results.json entry and its
result.json); `write_results(dir, cells)` writes a results directory; the
named sets below are what the tests use. State keys appear here only as
test data: each optimizer's schema is declared once in SCHEMAS.

`expect_failure(cell, reason)` declares a cell expected to fail, as the
runner does for a scenario's `xfail` entry: a failing or errored cell
becomes "xfail", a passing one "xpass". `make_external_cell(...)` makes a
cell of an external system under test (e.g. "torch-fsdp2"): a single-device
run, `diff_single_device` on the system's own state keys, adapter runs and
versions, or, with `raised`, the one `system-raised` check and no runs.
`release_cell(version, sharding)` makes one of a system pinned at a release
("megatron-core@0.19.2"), as the megatron-core run that compared two
releases wrote it; `releases()` is that run's eight cells.
`with_judged_by(cell)` gives each check the "judged_by" of newer results;
`write_results(..., interrupted_by="SIGINT", not_run=N)` writes a run that
a signal stopped before N cells finished.

Command line (for measurements and screenshots):
    synth.py {realistic,passing,one-failing,lion,systems,releases,large} OUT_DIR [--cells N] [--bench] [--selftest]
"""
import argparse
import json
import math
import os
import random
from typing import Dict, List, Optional

SCHEMAS = {
    "adam": {"adam": ["exp_avg", "exp_avg_sq"]},
    "adamw": {"adamw": ["exp_avg", "exp_avg_sq"]},
    "lion": {"lion": ["exp_avg"]},
    "muon_adam": {"muon": ["momentum_buffer"], "adam": ["exp_avg", "exp_avg_sq"]},
    "muon_lion": {"muon": ["momentum_buffer"], "lion": ["exp_avg"]},
}
# The optimizer registry's order, as the runner writes it into results.json's
# "optimizer_order" (it lists setups the synthetic sets never use, too).
OPTIMIZER_ORDER = ["adam", "adamw", "ademamix", "lion", "sgd", "muon_adam", "muon_lion"]
BASE_LR = 1e-4
# Setups with a sign-based child: the runner checks their real-model params bitwise only.
SIGN_BASED = ("lion", "muon_lion")
MODEL_GROUPS = ("params", "main_params")
SHARDING_TYPES = ["dp_reshardable", "fully_reshardable", "dp_zero_gather_scatter",
                  "fully_sharded_model_space"]
ENV = {"commit": "d93ad75", "libtorch": "1.13.1", "backend": "gloo", "host": "ci-runner-3",
       "shardcheck": "0.1"}


def cell_id(optimizer, sharding, dp, resume_dp, dtype, model):
    plan = f"dp{dp}" if resume_dp is None else f"dp{dp}-to-dp{resume_dp}"
    return f"{optimizer}.{sharding}.{plan}.{dtype}.{model.replace(':', '-')}"


def groups_of(optimizer: str, dtype: str) -> List[str]:
    groups = ["params"] + (["main_params"] if dtype == "bf16" else [])
    for keys in SCHEMAS[optimizer].values():
        groups += [k for k in keys if k not in groups]
    return groups


def lr_at(step: int, steps: int, schedule: Optional[str], base: float = BASE_LR) -> float:
    """The scheduled lr at `step` of `steps`: "constant", or "warmup_cosine"
    (linear warm-up over the first quarter, then cosine decay to base/10)."""
    if schedule in (None, "constant"):
        return base
    if schedule != "warmup_cosine":
        raise ValueError(schedule)
    warmup = max(1, steps // 4)
    if step <= warmup:
        return base * step / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    low = base / 10
    return low + 0.5 * (base - low) * (1 + math.cos(math.pi * progress))


def make_cell(optimizer="lion", sharding="dp_reshardable", dp=2, resume_dp=None, save_at=None,
              dtype="bf16", model="oracle:gpt-tiny", steps=12, fail: Optional[dict] = None,
              error: Optional[str] = None, scenario="ci-oracle", seed=1, tolerance=False,
              ranks_memory=True, noise=0.0, lr_schedule: Optional[str] = "constant",
              real_checks=False, rel_floor: Optional[float] = None, sign_changes: Optional[dict] = None,
              loss_shift=0.0, skipped: Optional[str] = None, system: Optional[str] = None) -> Dict:
    """One cell as {"entry": results.json entry, "result": result.json or None}.

    fail = {"group": G, "step": S, "run": "resumed"|"uninterrupted", "size": X}
    makes the group's diff jump to X from step S on, and the check covering
    that group and run fail there. tolerance=True (or a non-oracle model)
    gives small nonzero diffs checked against atol/rtol instead of bitwise
    zeros. Checks are on params, main_params (when a group) and state, per
    compared run; real_checks=True gives a real model the runner's default
    checks instead (real_model_checks). lr_schedule ("constant",
    "warmup_cosine", or None for no "lr" series, as older results) gives
    every run its per-step lr (null after a load).

    rel_floor writes result.json's "rel_floor"; sign_changes = {"group": G,
    "step": S, "count": N, "run": R} gives every diff group a
    "sign_changes" series, zero but for N at step S of group G in run R.
    Both are left out by default, as in older results. loss_shift is added
    to every loss value (a moved loss curve, for baseline comparisons).
    skipped = REASON makes a cell that was not run. system = NAME writes the
    system under test (results.json's cells[].system, config.system); None
    leaves both out, as in older results."""
    rng = random.Random(f"{optimizer}{sharding}{dp}{resume_dp}{dtype}{model}{seed}")
    if resume_dp is not None and save_at is None:
        save_at = max(1, steps // 3)
    cid = cell_id(optimizer, sharding, dp, resume_dp, dtype, model)
    has_loss = not model.startswith("oracle:")
    tolerance = tolerance or has_loss
    groups = groups_of(optimizer, dtype)
    schema = SCHEMAS[optimizer]
    verdict = "skipped" if skipped else "error" if error else ("fail" if fail else "pass")
    if real_checks and (fail or not has_loss):
        raise ValueError("real_checks makes passing real-model cells only")

    def series(run_name, start):
        steps_list = list(range(start, steps + 1))
        n = len(steps_list)
        diff = {}
        for gi, g in enumerate(groups):
            if tolerance:
                base = [1e-8 * (1 + gi) * (1 + 0.05 * i) * (1 + 0.3 * rng.random()) for i in range(n)]
            else:
                base = [0.0] * n
            if fail and fail.get("run", "resumed") == run_name and fail["group"] == g:
                base = [fail.get("size", 3e-2) * (1 + 0.1 * i) if s >= fail["step"] else v
                        for i, (s, v) in enumerate(zip(steps_list, base))]
            ulp = [0 if v == 0 else int(v / 1e-9) + 1 for v in base]
            diff[g] = {"max_abs": base, "max_rel": [v * 40 for v in base], "max_ulp": ulp,
                       "mismatches": [0 if v == 0 else 1 + int(rng.random() * 50) for v in base]}
            if sign_changes:
                hit = sign_changes["group"] == g and sign_changes.get("run", "uninterrupted") == run_name
                diff[g]["sign_changes"] = [sign_changes["count"] if hit and s == sign_changes["step"] else 0
                                           for s in steps_list]
        return steps_list, diff

    def losses(steps_list, shift=0.0):
        if not has_loss:
            return None
        return [round(4.2 * math.exp(-s / (steps * 0.6)) + 0.8 + 0.02 * math.sin(s) + shift + loss_shift, 6)
                for s in steps_list]

    def lrs(steps_list, after_load=None):
        return [None if after_load and after_load[i] else lr_at(x, steps, lr_schedule)
                for i, x in enumerate(steps_list)]

    runs = {}
    ref_steps = list(range(1, steps + 1))
    runs["reference"] = {"dp": 1, "steps": ref_steps, "loss": losses(ref_steps),
                         "grad_norm": [1.0 / s for s in ref_steps], "lr": lrs(ref_steps)}
    s, d = series("uninterrupted", 1)
    runs["uninterrupted"] = {"dp": dp, "steps": s, "loss": losses(s), "grad_norm": [1.0 / x for x in s],
                             "lr": lrs(s), "diff": d}
    if resume_dp is not None:
        s, d = series("resumed", save_at)
        loss = losses(s, shift=0.0)
        if loss is not None:
            loss[0] = None  # the after-load comparison has no loss
            if fail:
                loss = [None if v is None else v + (0.05 if x >= fail["step"] else 0.0)
                        for x, v in zip(s, loss)]
        after_load = [x == save_at for x in s]
        runs["resumed"] = {"dp": resume_dp, "save_at": save_at, "steps": s,
                           "after_load": after_load, "loss": loss,
                           "grad_norm": [1.0 / x for x in s], "lr": lrs(s, after_load), "diff": d}
    if lr_schedule is None:
        for run in runs.values():
            del run["lr"]

    if real_checks:
        checks = real_model_checks(optimizer, dp, resume_dp, dtype)
    else:
        checks = synthetic_checks(runs, groups, tolerance, has_loss, fail)
    first_failure = None
    if fail:
        bad = next(c for c in checks if c["verdict"] == "fail")
        first_failure = {"check": bad["name"], "step": bad["first_failing_step"],
                         "tensor": bad["first_failing_tensor"], "detail": bad["detail"]}

    memory = []
    if ranks_memory:
        for r in range(dp):
            entries = [{"child": "model", "key": "main_param", "elements": 6784, "bytes": 27136}]
            for child, keys in schema.items():
                for k in keys:
                    entries.append({"child": child, "key": k, "elements": 6784 // (1 + r % 2),
                                    "bytes": 4 * 6784 // (1 + r % 2)})
            memory.append({"rank": r, "owned_elements": 6784 * len(entries),
                           "total_bytes": sum(e["bytes"] for e in entries), "entries": entries})

    children = [{"kind": k, "role": "all" if len(schema) == 1 else ("matrix" if k == "muon" else "scalar"),
                 "lr": BASE_LR, "schema": [{"key": key, "dtype": "fp32"} for key in keys]}
                for k, keys in schema.items()]
    result = {
        "format": "shardcheck-cell-result/1", "id": cid,
        "scenario": {"name": scenario, "file": f"scenarios/ci/{scenario}.yaml", "line": 12},
        "config": {"model": model, "dtype": dtype, "steps": steps, "seed": seed, "micro_batches": 24,
                   "bucket_size": 1000, "backend": "gloo", "sharding_type": sharding, "dp": dp,
                   "resume": None if resume_dp is None else {"save_at": save_at, "dp": resume_dp},
                   "optimizer": {"name": optimizer, "max_grad_norm": 0.0, "children": children}},
        "environment": dict(ENV), "schema": schema, "groups": groups, "runs": runs, "checks": checks,
        "verdict": verdict, "error": error, "first_failure": first_failure, "memory": memory,
        "wall_s": round(0.5 + rng.random() * 2, 2)}
    if rel_floor is not None:
        result["rel_floor"] = rel_floor
    if system is not None:
        result["config"]["system"] = system
        result["config"]["expect"] = None
    if error:
        result.update(runs={}, checks=[], memory=[], first_failure=None)
    if skipped:
        result.update(runs={}, checks=[], memory=[], groups=[], first_failure=None, skipped=skipped)
    entry = {"id": cid, "dir": cid, "scenario": scenario, "optimizer": optimizer, "sharding_type": sharding,
             "dp": dp, "resume_dp": resume_dp, "save_at": save_at, "dtype": dtype, "model": model,
             "steps": steps, "verdict": verdict, "first_failure": first_failure, "wall_s": result["wall_s"]}
    if system is not None:
        entry["system"] = system
    if skipped:
        entry["skipped"] = skipped          # the runner writes the reason in both files
    return {"entry": entry, "result": result}


FINDING = "docs/findings.md#fsdp2-resume-drops-state the optimizer state is not loaded after a DP change"


def judged_by(check: Dict) -> Optional[Dict]:
    """A check's "judged_by" as the runner writes it: null for a bitwise
    check; for a tolerance check the figure that decided it against its
    bound: max_abs against atol when within it, else max_rel against rtol."""
    if check["kind"] != "tolerance":
        return None
    if check["max_abs"] <= check["atol"]:
        return {"figure": "max_abs", "value": check["max_abs"], "bound": check["atol"]}
    return {"figure": "max_rel", "value": check["max_rel"], "bound": check["rtol"]}


def with_judged_by(cell: Dict) -> Dict:
    """`cell` with every check's "judged_by" (judged_by()), as newer results
    have it; returns `cell`."""
    for check in (cell["result"] or {}).get("checks", []):
        check["judged_by"] = judged_by(check)
    return cell


def expect_failure(cell: Dict, reason: str = FINDING, failing_check: Optional[str] = None,
                   errored: str = "error") -> Dict:
    """`cell` declared expected to fail, as the runner's ApplyExpectation
    writes it: config.expect and result.json's "expected" with what the
    cell got. A failing cell becomes "xfail" (first failure and checks
    kept), unless `failing_check` names another check than the one that
    failed first: then it stays "fail", its detail saying so. A passing one
    becomes "xpass", whose first failure is the pseudo-check
    "expected-failure". An errored one gets `errored`: "error", as the
    runner gives it, or "xfail", which the results format also allows.
    Returns `cell`."""
    entry, result = cell["entry"], cell["result"]
    got = entry["verdict"]
    if got not in ("pass", "fail", "error"):
        raise ValueError(f"a {got} cell cannot be expected to fail")
    result["config"]["expect"] = {"verdict": "fail", "reason": reason}
    result["expected"] = {"verdict": "fail", "reason": reason, "failing_check": failing_check, "got": got}
    verdict = got
    if got == "pass":
        verdict = "xpass"
        result["first_failure"] = {"check": "expected-failure", "step": None, "tensor": None,
                                   "detail": f"expected to fail ({reason}), but every check passed: "
                                             "if the bug is fixed, drop the expectation"}
    elif got == "error":
        verdict = errored
    elif failing_check in (None, result["first_failure"]["check"]):
        verdict = "xfail"
    else:
        ff = result["first_failure"]
        ff["detail"] = f"expected {failing_check} to fail ({reason}), but {ff['check']} failed first: {ff['detail']}"
    entry["verdict"] = result["verdict"] = verdict
    entry["first_failure"] = result["first_failure"]
    return cell


SYSTEM_VERSIONS = {"torch": "2.11.0+cu130", "python": "3.12.3"}


def system_state_keys(optimizer: str) -> List[str]:
    """The state keys an external system keeps for `optimizer`: its schema's
    and torch's "step" counter, which no schema lists."""
    keys = ["step"]
    for names in SCHEMAS[optimizer].values():
        keys += [k for k in names if k not in keys]
    return keys


def make_external_cell(system="torch-fsdp2", optimizer="adam", sharding="dcp", dp=2, resume_dp=None,
                       save_at=None, steps=6, fail: Optional[dict] = None, raised: Optional[dict] = None,
                       notes=(), seed=1) -> Dict:
    """One cell of an external system under test, as RunExternalCell writes it.

    Runs: the reference, "single_device" (the system on one device; its diff
    is against the reference) and the distributed runs, each with a "diff"
    against the reference (tolerance-level) and a "diff_single_device" on
    params and the system's state keys (bitwise zero). Losses and grad norms
    are null (oracle runs). Checks: tolerance-params (the reference),
    bitwise params and state against single_device, and bitwise state of
    the resumed run against the uninterrupted one (n/a without a resume).

    fail = {"group": G, "step": S, "run": R} makes diff_single_device of G
    jump from step S on in run R, and the check against single_device that
    covers G fail there. raised = {"run": R, "rank": K, "phase": P, "step":
    S, "type": T, "message": M} makes the system raise in run R: the cell
    fails its one check "system-raised" and has no runs, schema or groups."""
    c = make_cell(optimizer, sharding, dp, resume_dp=resume_dp, save_at=save_at, dtype="fp32",
                  steps=steps, scenario="systems", seed=seed, tolerance=True, ranks_memory=False,
                  system=system)
    entry, result = c["entry"], c["result"]
    entry["id"] = entry["dir"] = result["id"] = f"{system}.{entry['id']}"    # as the runner names them
    keys = system_state_keys(optimizer)
    runs = result["runs"]
    for run in runs.values():
        run["loss"] = None
        run["grad_norm"] = [None] * len(run["steps"])
    single = dict(runs["uninterrupted"], dp=1)
    single["diff"] = {g: dict(series) for g, series in runs["uninterrupted"]["diff"].items()}
    distributed = [name for name in ("uninterrupted", "resumed") if name in runs]
    for name in distributed:
        runs[name]["diff_single_device"] = {
            g: _single_device_series(runs[name]["steps"], fail if fail and fail["run"] == name
                                     and fail["group"] == g else None) for g in ["params"] + keys}
    result["runs"] = {"reference": runs["reference"], "single_device": single,
                      **{name: runs[name] for name in distributed}}
    result.update(system_state_keys=keys, checks=external_checks(result, fail))
    result["environment"]["system"] = {"name": system, "versions": dict(SYSTEM_VERSIONS)}
    result["adapter"] = [{"run": name, "exit_code": 0, "log": f"{name}.log", "error": None,
                          "notes": [f"rank 0: {note}" for note in notes]}
                         for name in ["single_device"] + distributed]
    first = next((ch for ch in result["checks"] if ch["verdict"] == "fail"), None)
    if first:
        result["first_failure"] = {"check": first["name"], "step": first["first_failing_step"],
                                   "tensor": first["first_failing_tensor"], "detail": first["detail"]}
    if raised:
        _system_raised(result, raised)
    result["verdict"] = "fail" if result["first_failure"] else "pass"
    entry.update(verdict=result["verdict"], first_failure=result["first_failure"])
    return c


# What the megatron-core run that compared two pinned releases (system: megatron-core@0.18.2 and
# megatron-core@0.19.2; adamw, dp 2 -> 3 saved at step 4, fp32, oracle:mixed-small) raised, per
# sharding type: (run, phase, type, message, file, line in 0.18.2). Both releases raised the same,
# 56 lines further down in 0.19.2's distrib_optimizer.py.
MEGATRON_RAISED = {
    "dp_reshardable": ("resumed", "load", "RuntimeError", "a view of a leaf Variable that requires grad is being "
                       "used in an in-place operation.", "megatron/core/optimizer/distrib_optimizer.py", 1169),
    "fully_reshardable": ("resumed", "load", "KeyError", "'step'", "megatron/core/optimizer/distrib_optimizer.py",
                          1167),
    "fully_sharded_model_space": ("uninterrupted", "save", "CheckpointingException",
                                  "ShardedTensor.flattened_range is not supported.",
                                  "megatron/core/dist_checkpointing/mapping.py", 134),
    "dp_zero_gather_scatter": ("resumed", "load", "RuntimeError", "a view of a leaf Variable that requires grad is "
                               "being used in an in-place operation.", "megatron/core/optimizer/distrib_optimizer.py",
                               1169),
}
MEGATRON_FUNCTION = {"distrib_optimizer.py": "_set_main_param_and_optimizer_states",
                     "mapping.py": "validate_metadata_integrity"}


def release_cell(version: str, sharding: str = "dp_reshardable", raised: bool = True, base: str = "megatron-core",
                 variant: Optional[str] = None, optimizer: str = "adamw", fail: Optional[dict] = None) -> Dict:
    """One cell of `base` pinned at `version` (system "<base>@<version>[+<variant>]"), named as
    the runner names it: "<system>.<optimizer>.<sharding>.dp2-to-dp3@4.fp32.oracle-mixed-small".
    raised=True gives it what the megatron-core run raised for `sharding` (MEGATRON_RAISED, the
    line moved down 56 from 0.19 on); raised=False lets it pass, or fail `fail` as in
    make_external_cell."""
    system = f"{base}@{version}" + (f"+{variant}" if variant else "")
    how = None
    if raised:
        run, phase, kind, message, path, line = MEGATRON_RAISED[sharding]
        if path.endswith("distrib_optimizer.py") and version_tuple(version) >= (0, 19):
            line += 56
        how = {"run": run, "rank": 0, "phase": phase, "step": 4, "type": kind, "message": message,
               "where": f"{path}:{line} in {MEGATRON_FUNCTION[os.path.basename(path)]}"}
    c = make_external_cell(system, optimizer, sharding, 2, resume_dp=3, save_at=4, steps=12, fail=fail, raised=how)
    entry, result = c["entry"], c["result"]
    cid = f"{system}.{optimizer}.{sharding}.dp2-to-dp3@4.fp32.oracle-mixed-small"
    entry.update(id=cid, dir=cid, model="oracle:mixed-small", scenario="megatron-probe", skipped=None)
    result.update(id=cid)
    result["config"]["model"] = "oracle:mixed-small"
    result["environment"]["system"]["versions"] = {"megatron-core": version, **SYSTEM_VERSIONS}
    return c


def version_tuple(version: str):
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def _single_device_series(steps: List[int], fail: Optional[dict]) -> Dict:
    """A diff_single_device group: bitwise zero, or a jump from fail["step"] on."""
    size = (fail or {}).get("size", 1e-3)
    abs_ = [size * (1 + 0.1 * i) if fail and s >= fail["step"] else 0.0 for i, s in enumerate(steps)]
    return {"max_abs": abs_, "max_rel": [v * 10 for v in abs_], "max_ulp": [int(v / 1e-9) for v in abs_],
            "mismatches": [3 if v else 0 for v in abs_], "tol_violations": [3 if v else 0 for v in abs_],
            "sign_changes": [0] * len(steps)}


def external_checks(result: Dict, fail: Optional[dict]) -> List[Dict]:
    """The checks of an external system's cell (see make_external_cell)."""
    distributed = [r for r in ("uninterrupted", "resumed") if r in result["runs"]]
    both = "+".join(distributed)

    def check(kind, on, against, verdict="pass", run=both, step=None, tensor=None, detail="", **figures):
        name = f"{kind}-{on}" + ("" if against == "reference" else f"-vs-{against}")
        return dict({"name": name, "kind": kind, "on": on, "run": run, "against": against,
                     "atol": 1e-5 if kind == "tolerance" else 0.0, "rtol": 1.3e-3 if kind == "tolerance" else 0.0,
                     "max_ulp": None, "verdict": verdict, "first_failing_step": step,
                     "first_failing_tensor": tensor, "max_abs": 0.0, "max_rel": 0.0, "max_ulp_seen": 0,
                     "detail": detail}, **figures)
    out = [check("tolerance", "params", "reference", detail="within tolerance to the reference at 12 snapshots")]
    for on in ("params", "state"):
        covers = fail and (fail["group"] == on or (on == "state" and fail["group"] not in MODEL_GROUPS))
        if covers:
            tensor = ("state." if on == "state" else "") + f"{fail['group']}.layers.0.weight"
            out.append(check("bitwise", on, "single_device", "fail", run=fail["run"], step=fail["step"],
                             tensor=tensor, max_abs=fail.get("size", 1e-3),
                             detail=f"{fail['run']} run, step {fail['step']}: {tensor}: 3 elements differ"))
        else:
            out.append(check("bitwise", on, "single_device",
                             detail="bitwise equal to the single_device run at 12 snapshots"))
    if "resumed" in distributed:
        out.append(check("bitwise", "state", "uninterrupted", run="resumed",
                         detail="bitwise equal to the uninterrupted run at 4 snapshots"))
    else:
        out.append(check("bitwise", "state", "uninterrupted", "n/a", run="",
                         detail="no resume plan: nothing to compare with the uninterrupted run"))
    return out


def _system_raised(result: Dict, raised: Dict):
    """The system raised in raised["run"]: the adapter runs stop there, the
    cell fails its one check "system-raised" and has no runs, schema or groups."""
    run, rank, step = raised.get("run", "resumed"), raised.get("rank", 1), raised.get("step")
    error = {"type": raised.get("type", "RuntimeError"), "message": raised.get("message", "Missing key in checkpoint"),
             "phase": raised.get("phase", "load"), "step": step,
             "where": raised.get("where", "torch/distributed/checkpoint/default_planner.py:471"),
             "traceback": ["Traceback (most recent call last):\n", "  File \"adapter.py\", line 150, in load\n",
                           f"{raised.get('type', 'RuntimeError')}: {raised.get('message', 'Missing key in checkpoint')}\n"],
             "rank": rank}
    names = [a["run"] for a in result["adapter"]]
    result["adapter"] = result["adapter"][:names.index(run) + 1]
    result["adapter"][-1].update(exit_code=1, error=error)
    detail = (f"{run} run, rank {rank}, {error['phase']}" + (f" at step {step}" if step is not None else "")
              + f": {error['type']}: {error['message']} ({error['where']})")
    result["checks"] = [{"name": "system-raised", "kind": "system-raised", "on": "state", "run": run,
                         "against": "the run itself", "atol": 0.0, "rtol": 0.0, "max_ulp": None, "verdict": "fail",
                         "first_failing_step": step, "first_failing_tensor": None, "max_abs": 0.0, "max_rel": 0.0,
                         "max_ulp_seen": 0, "detail": detail}]
    result["first_failure"] = {"check": "system-raised", "step": step, "tensor": None, "detail": detail}
    for key in ("runs", "schema", "groups", "system_state_keys", "rel_floor"):
        result.pop(key, None)


def synthetic_checks(runs: Dict, groups: List[str], tolerance: bool, has_loss: bool,
                     fail: Optional[dict]) -> List[Dict]:
    """One check per compared run on params, main_params (when a group) and
    state, bitwise or within a tolerance; a loss continuity check for a
    resumed real model. The check covering fail's group and run fails."""
    checks = []
    ons = ["params"] + (["main_params"] if "main_params" in groups else []) + ["state"]
    for run_name in [r for r in ("uninterrupted", "resumed") if r in runs]:
        for on in ons:
            covers = fail and (fail["group"] == on or (on == "state" and fail["group"] not in MODEL_GROUPS))
            failing = bool(covers) and fail.get("run", "resumed") == run_name
            kind = "tolerance" if tolerance else "bitwise"
            check = {"name": f"{run_name}-vs-reference-{kind}-{on}", "kind": kind, "on": on,
                     "run": run_name, "against": "reference",
                     "atol": 1e-5 if tolerance else 0.0, "rtol": 1.3e-3 if tolerance else 0.0,
                     "max_ulp": None if tolerance else 0, "verdict": "fail" if failing else "pass",
                     "first_failing_step": fail["step"] if failing else None,
                     "first_failing_tensor": f"state.{fail['group']}.layers.1.fc1.weight"
                     if failing and on == "state" else ("layers.1.fc1.weight" if failing else None),
                     "max_abs": fail.get("size", 3e-2) if failing else (1e-7 if tolerance else 0.0),
                     "max_rel": 1.0 if failing else (4e-6 if tolerance else 0.0),
                     "max_ulp_seen": 123456 if failing else (100 if tolerance else 0),
                     "detail": (f"{fail['group']} differs by {fail.get('size', 3e-2):g} at step "
                                f"{fail['step']} (layers.1.fc1.weight[17])") if failing
                     else f"{'within tolerance' if tolerance else 'bitwise equal'} at {len(runs[run_name]['steps'])} steps"}
            checks.append(check)
    if has_loss and "resumed" in runs:
        checks.append({"name": "resumed-vs-uninterrupted-loss-continuity", "kind": "loss_continuity",
                       "on": "loss", "run": "resumed", "against": "uninterrupted", "atol": 0.0,
                       "rtol": 1e-6, "max_ulp": None, "verdict": "fail" if fail else "pass",
                       "first_failing_step": fail["step"] if fail else None, "first_failing_tensor": None,
                       "max_abs": 0.05 if fail else 0.0, "max_rel": 0.01 if fail else 0.0,
                       "max_ulp_seen": None, "detail": "loss continuous across the resume"
                       if not fail else f"loss jumps by 0.05 at step {fail['step']}"})
    return checks


def real_model_checks(optimizer: str, dp: int, resume_dp: Optional[int], dtype: str) -> List[Dict]:
    """The runner's default checks of a passing real-model cell
    (docs/scenarios.md, "Default checks"): tolerance on params (not for a
    setup with a sign-based child), tolerance on the loss and, with a
    resume, a bitwise same-DP resume check ("n/a" when the DP size changes)
    and loss continuity."""
    def check(kind, on, verdict="pass", run="uninterrupted+resumed", against="reference", detail="", **tol):
        return dict({"name": f"{kind}-{on}", "kind": kind, "on": on, "run": run, "against": against,
                     "atol": 0.0, "rtol": 0.0, "max_ulp": None, "verdict": verdict,
                     "first_failing_step": None, "first_failing_tensor": None, "max_abs": 0.0,
                     "max_rel": 0.0, "max_ulp_seen": 0, "detail": detail}, **tol)
    loss_rtol = 1e-4 if dtype == "fp32" else 1e-2
    out = []
    if optimizer not in SIGN_BASED:
        out.append(check("tolerance", "params", atol=1e-3 if dtype == "fp32" else 1e-2, rtol=1e-2,
                         detail="within tolerance to the reference"))
    out.append(check("tolerance", "loss", rtol=loss_rtol, detail="losses within tolerance of the reference"))
    if resume_dp is not None:
        same = resume_dp == dp
        out.append(check("bitwise", "params", "pass" if same else "n/a", run="resumed", against="uninterrupted",
                         detail="resumed run bitwise equal to the uninterrupted run" if same else
                         "the resume changes the DP size: the reduction order changes, so only tolerance applies"))
        out.append(check("loss_continuity", "loss", run="resumed", against="uninterrupted", rtol=loss_rtol,
                         detail="resumed loss continues the uninterrupted curve"))
    return out


def run_verdict(entries: List[Dict], results: List[Optional[Dict]], interrupted: bool) -> str:
    """results.json's verdict as the runner gives it: "fail" when a cell
    failed, errored or xpassed; else "interrupted" when a signal stopped the
    run; else "nothing-checked" when no cell ran its checks (all skipped, or
    an xfail that errored); else "pass"."""
    if any(e["verdict"] in ("fail", "error", "xpass") for e in entries):
        return "fail"
    if interrupted:
        return "interrupted"
    ran = [e for e, r in zip(entries, results) if e["verdict"] in ("pass", "xpass", "fail") or
           (e["verdict"] == "xfail" and r is not None and (r.get("expected") or {}).get("got") != "error")]
    return "nothing-checked" if not ran else "pass"


def write_results(out: str, cells: List[Dict], commit="d93ad75", bench: Optional[Dict] = None,
                  started="2026-12-02T18:01:02Z",
                  optimizer_order: Optional[List[str]] = OPTIMIZER_ORDER,
                  selftest: Optional[Dict] = None, verdict: Optional[str] = None,
                  interrupted_by: Optional[str] = None, not_run: int = 0) -> str:
    """Writes OUT/results.json and OUT/<cell>/result.json; returns OUT.
    optimizer_order=None leaves "optimizer_order" out, as older results do;
    `selftest` (e.g. selftest_doc()) is written as OUT/selftest.json.
    The verdict is run_verdict's unless `verdict` gives one (e.g. "pass" for
    a run that checked nothing, as older results said, or "" to leave it
    out). interrupted_by = "SIGINT" writes a run that a signal stopped with
    `not_run` cells not finished: "interrupted", "interrupted_by", counts of
    the cells selected (`cells` being the finished ones) and counts.not_run."""
    os.makedirs(out, exist_ok=True)
    for c in cells:
        if c["result"] is not None:
            c["result"]["environment"]["commit"] = commit
            os.makedirs(os.path.join(out, c["entry"]["dir"]), exist_ok=True)
            with open(os.path.join(out, c["entry"]["dir"], "result.json"), "w") as f:
                json.dump(c["result"], f)
    entries = [c["entry"] for c in cells]
    def n(verdict):
        return sum(e["verdict"] == verdict for e in entries)
    counts = {"cells": len(entries) + not_run, "passed": n("pass"), "failed": n("fail"), "errored": n("error"),
              "skipped": n("skipped"), "xfailed": n("xfail"), "xpassed": n("xpass")}
    if interrupted_by is not None:
        counts["not_run"] = not_run
    scen = sorted({e["scenario"] for e in entries})
    if verdict is None:
        verdict = run_verdict(entries, [c["result"] for c in cells], interrupted_by is not None)
    agg = {"format": "shardcheck-results/1", "verdict": verdict,
           "started": started, "wall_s": round(sum(e["wall_s"] for e in entries), 1),
           "environment": dict(ENV, commit=commit),
           "scenarios": [{"name": s, "file": f"scenarios/ci/{s}.yaml", "description": "synthetic"}
                         for s in scen],
           "counts": counts, "cells": entries}
    if not verdict:
        del agg["verdict"]
    if interrupted_by is not None:
        agg.update(interrupted=True, interrupted_by=interrupted_by)
    if optimizer_order is not None:
        agg["optimizer_order"] = list(optimizer_order)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(agg, f, indent=1)
    if bench:
        os.makedirs(os.path.join(out, "bench"), exist_ok=True)
        for name, doc in bench.items():
            with open(os.path.join(out, "bench", name), "w") as f:
                json.dump(doc, f, indent=1)
    if selftest is not None:
        with open(os.path.join(out, "selftest.json"), "w") as f:
            json.dump(selftest, f, indent=1)
    return out


def bench_doc() -> Dict:
    """A Google Benchmark JSON document with a baseline pair and a counter."""
    def b(name, real, unit="us", **counters):
        return dict({"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                     "repetition_index": 0, "threads": 1, "iterations": 1000, "real_time": real,
                     "cpu_time": real * 0.98, "time_unit": unit}, **counters)
    return {"context": {"date": "2026-12-02T18:00:00+00:00", "host_name": "ci-runner-3",
                        "num_cpus": 2, "library_build_type": "release"},
            "benchmarks": [b("shard_update_adam/baseline", 420.0, bytes_per_second=1.9e9),
                           b("shard_update_adam/fused", 105.0, bytes_per_second=7.6e9),
                           b("shard_update_lion/baseline", 0.30, unit="ms"),
                           b("shard_update_lion/fused", 90.0),
                           b("newton_schulz/5iter", 2.5, unit="ms")]}


def growth_benchmark(name: str, times_ms: List[float], **counters) -> List[Dict]:
    """One benchmark as shardcheck_bench writes it: an "iteration" run per
    repetition (a counter given as a list has one value per repetition) and,
    for more than one repetition, Google Benchmark's aggregates, whose values
    (999) no figure may use."""
    runs = []
    for i, t in enumerate(times_ms):
        per_rep = {k: (v[i] if isinstance(v, list) else v) for k, v in counters.items()}
        runs.append(dict({"name": name, "run_name": name, "run_type": "iteration", "repetitions": len(times_ms),
                          "repetition_index": i, "threads": 1, "iterations": 1, "real_time": t,
                          "cpu_time": t / 2, "time_unit": "ms"}, **per_rep))
    if len(times_ms) > 1:
        for agg in ("mean", "median", "stddev"):
            runs.append(dict({"name": f"{name}_{agg}", "run_name": name, "run_type": "aggregate",
                              "repetitions": len(times_ms), "threads": 1, "aggregate_name": agg,
                              "iterations": len(times_ms), "real_time": 999.0, "cpu_time": 999.0,
                              "time_unit": "ms"}, **{k: 999.0 for k in counters}))
    return runs


GROWTH_FAMILIES = ("dist_step", "dist_state", "checkpoint")


def growth_bench_doc(families=GROWTH_FAMILIES) -> Dict:
    """shardcheck_bench's DistributedOptimizer step, per-rank state and
    checkpoint families at N = 1M and 16M, with round medians (see the
    comments) so that the tests can state the figures they expect."""
    m1, m16 = 1 << 20, 16 << 20
    benchmarks: List[Dict] = []
    if "dist_step" in families:
        # medians: 1M 10, 6, 4 ms; 16M 100, 55, 25 ms at dp 1, 2, 4
        times = {(m1, 1): [10.0, 11.0, 9.0], (m1, 2): [6.0, 6.0, 7.0], (m1, 4): [4.0, 4.0, 5.0],
                 (m16, 1): [100.0, 110.0, 90.0], (m16, 2): [60.0, 50.0, 55.0], (m16, 4): [25.0, 30.0, 20.0]}
        for (n, dp), t in times.items():
            benchmarks += growth_benchmark(
                f"dist_step/adamw/dp{dp}/{n}/iterations:1/manual_time", t,
                rs_ms=[0.0, 0.0, 0.0] if dp == 1 else [t[0] * 0.1, t[1] * 0.1, t[2] * 0.1],
                ag_ms=[0.0, 0.0, 0.0] if dp == 1 else [t[0] * 0.2, t[1] * 0.2, t[2] * 0.2],
                allreduce_ms=0.5, update_ms=[x * 0.6 for x in t], slowest_rank_ms=[x * 1.1 for x in t],
                state_bytes=12.0 * n / dp, dp=dp, elements=n)
    if "dist_state" in families:
        for setup, share, imbalance in (("adamw", 1.004, 1.002), ("muon_adam", 1.25, 1.5)):
            for n in (m1, m16):
                for dp in (1, 2, 4):
                    hi = 12.0 * n / dp * (share if dp > 1 else 1.0)
                    benchmarks += growth_benchmark(
                        f"dist_state/{setup}/dp{dp}/{n}/iterations:1/repeats:1/manual_time", [3.0],
                        state_bytes_max=hi, state_bytes_min=hi / (imbalance if dp > 1 else 1.0),
                        state_bytes_mean=hi, dp1_share=share if dp > 1 else 1.0, dp=dp, elements=n)
    if "checkpoint" in families:
        # per 1.2 GB (times scale with N): plain write 1000 ms, read cold 600, read warm 200;
        # save 2000, load warm 300, load cold 800, load reshard cold 1000 (reshard / same-DP 1.25
        # by the medians; fully_sharded_model_space's resharded load also carries the ratio to a
        # same-DP load timed beside it, over_same_dp 0.8, 1.5, 0.9 per repetition: median 0.9)
        ops = [("plain", "write", [1000.0, 900.0, 1100.0], {}), ("plain", "read_cold", [600.0, 600.0, 700.0], {}),
               ("plain", "read_warm", [200.0, 150.0, 250.0], {})]
        for kind in ("dp_reshardable", "fully_sharded_model_space"):
            paired = {"over_same_dp": [0.8, 1.5, 0.9]} if kind == "fully_sharded_model_space" else {}
            ops += [(kind, "save", [2000.0, 2100.0, 1900.0], {}), (kind, "load_warm", [300.0, 300.0, 300.0], {}),
                    (kind, "load_cold", [800.0, 700.0, 900.0], {}),
                    (kind, "load_reshard_cold", [1000.0, 1000.0, 1100.0], paired)]
        for n in (m1, m16):
            scale = n / m1
            for kind, op, t, extra in ops:
                benchmarks += growth_benchmark(
                    f"checkpoint/{kind}/{op}/{n}/iterations:1/manual_time", [x * scale for x in t],
                    bytes_per_step=1.2e9 * scale, bytes_per_second=1.2e9 / (t[0] * 1e-3), elements=n, **extra)
    return {"context": {"date": "2026-12-03T19:00:00+00:00", "host_name": "ci-runner-3", "num_cpus": 2,
                        "cpu_isa": "avx512"},
            "benchmarks": benchmarks}


def failpoint_entry(name: str, bug: str, verdict: str = "caught", checks=("bitwise-params",),
                    cell: str = "adam.dp_reshardable.dp1-resume@4.fp32.oracle-mixed-small", step=4,
                    tensor="params.fc1.weight", scenario="scenarios/ci/oracle_roundtrip.yaml",
                    filt="optimizer=adam,dp=1,dtype=fp32,sharding_type=dp_reshardable",
                    error: Optional[str] = None) -> Dict:
    """One failpoints[] entry of selftest.json, as `shardcheck selftest` writes it."""
    caught = verdict == "caught"
    by = [{"cell": cell, "check": c, "step": step, "tensor": tensor,
           "detail": f"resumed run, step {step} (right after the load), {c}: 100 elements differ"}
          for c in checks] if caught else []
    return {"name": name, "bug": bug, "where": "distributed/checkpoint.cc, the end of a load",
            "scenario": scenario, "filter": filt, "why": "", "cells": 1,
            "reached": verdict != "not_reached", "verdict": verdict,
            "checks": sorted(checks) if caught else [], "caught_by": by,
            "first_failure": {"cell": cell, "check": checks[0], "step": step, "tensor": tensor} if caught else None,
            "time_to_first_failure_s": 1.3 if caught else None, "wall_s": 2.9, "error": error}


def selftest_doc(escaped: bool = True, clean_failed: List[str] = (), commit="d93ad75") -> Dict:
    """A selftest.json document: three failpoints caught (bitwise, strict-load,
    routing) and, with `escaped`, one that escaped and one never reached."""
    fps = [failpoint_entry("skip_post_load_param_sync",
                           "model params are not re-derived from the loaded main params "
                           "(Megatron-LM PR #6920 class)"),
           failpoint_entry("third_state_key_dropped", "an optimizer with three states saves two",
                           checks=("strict-load",), cell="ademamix.dp_reshardable.dp1-resume@4.fp32.oracle-mixed-small",
                           tensor=None),
           failpoint_entry("scalar_params_routed_to_muon", "embedding and output matrices go to Muon",
                           checks=("routing",), step=0, tensor="embed.weight")]
    if escaped:
        fps += [failpoint_entry("lion_sign_zero_is_one", "Lion's sign(0) is taken as +1 <b>bold</b>",
                                verdict="escaped", scenario="scenarios/ci/sparse_grads.yaml",
                                filt="optimizer=lion"),
                failpoint_entry("drop_step_on_save", "the step counter is not saved", verdict="not_reached")]
    missed = [f["name"] for f in fps if f["verdict"] != "caught"]
    return {"format": "shardcheck-selftest/1", "environment": dict(ENV, commit=commit), "wall_s": 41.2,
            "clean": {"verdict": "fail" if clean_failed else "pass", "cells": 22,
                      "failed_cells": list(clean_failed)},
            "summary": {"tried": len(fps), "caught": len(fps) - len(missed), "escaped": missed},
            "failpoints": fps}


# ---- the named sets -------------------------------------------------------

def all_passing() -> List[Dict]:
    return [make_cell("adam", "dp_reshardable", 2),
            make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=4),
            make_cell("lion", "fully_reshardable", 2, resume_dp=4, save_at=4),
            make_cell("muon_adam", "dp_reshardable", 4)]


def one_failing() -> List[Dict]:
    cells = all_passing()
    cells.append(make_cell("lion", "dp_zero_gather_scatter", 2, resume_dp=3, save_at=4,
                           fail={"group": "exp_avg", "step": 6, "run": "resumed", "size": 2.5e-2}))
    return cells


def lion_only() -> List[Dict]:
    return [make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4)]


def realistic() -> List[Dict]:
    """A few cells as a CI run would give: gpt-tiny with losses (the first one
    with a warm-up + cosine lr schedule, the others a constant lr), oracle
    cells, Muon, one failing Lion resume and one cell that could not run."""
    return [make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=8, model="gpt-tiny", steps=30,
                      lr_schedule="warmup_cosine"),
            make_cell("adamw", "fully_reshardable", 2, model="gpt-tiny", steps=30),
            make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4),
            make_cell("lion", "dp_zero_gather_scatter", 2, resume_dp=4, save_at=8, model="gpt-tiny",
                      steps=30, fail={"group": "exp_avg", "step": 12, "run": "resumed", "size": 2.5e-2}),
            make_cell("muon_adam", "fully_sharded_model_space", 4, resume_dp=2, save_at=4),
            make_cell("muon_lion", "dp_reshardable", 3, model="moe-tiny", steps=30),
            make_cell("muon_lion", "fully_reshardable", 2, resume_dp=3, save_at=4,
                      error="rank 2 exited with signal 9 (Killed) during load")]


def systems() -> List[Dict]:
    """shardcheck cells beside an external system's: an expected failure that
    failed (xfail), one that errored (an xfail, as the format allows), and
    torch-fsdp2 cells that pass, fail against their single-device run,
    raise (system-raised) as expected (xfail), and pass though expected to
    fail (xpass)."""
    return [make_cell("adam", "dp_reshardable", 2, system="shardcheck"),
            expect_failure(make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4, system="shardcheck",
                                     fail={"group": "exp_avg", "step": 6, "run": "resumed"})),
            expect_failure(make_cell("lion", "fully_reshardable", 2, system="shardcheck",
                                     error="rank 1 exited with signal 9 (Killed) during load"),
                           "docs/findings.md#gloo-oom a known out-of-memory kill on small runners", errored="xfail"),
            make_external_cell("torch-fsdp2", "adam", "dcp", 2, notes=("fully_shard on 3 modules",)),
            make_external_cell("torch-fsdp2", "adam", "dcp", 2, resume_dp=3, save_at=3,
                               fail={"group": "step", "step": 4, "run": "resumed"}),
            expect_failure(make_external_cell("torch-fsdp2+fused", "adamw", "dcp", 2, resume_dp=4, save_at=3,
                                              raised={"run": "resumed", "rank": 1, "phase": "load", "step": 3}),
                           failing_check="system-raised"),
            expect_failure(make_external_cell("torch-fsdp2", "adamw", "dcp", 4),
                           "docs/findings.md#fsdp2-fused-adamw fused AdamW diverges at dp 4")]


def releases() -> List[Dict]:
    """The megatron-core run that compared two pinned releases: adamw, dp 2 -> 3 at step 4, on
    each sharding type, at 0.18.2 then 0.19.2 (run order as it wrote them). Every cell raised,
    the same in both releases (MEGATRON_RAISED)."""
    order = ["dp_reshardable", "fully_reshardable", "fully_sharded_model_space", "dp_zero_gather_scatter"]
    return [release_cell(v, s) for v in ("0.18.2", "0.19.2") for s in order]


def large(n: int = 400, failing: int = 4, steps: int = 12) -> List[Dict]:
    """n cells over optimizer × sharding × dp plans × dtypes × models; `failing` of them fail."""
    plans = [(1, None), (2, None), (4, None), (2, 3), (3, 2), (4, 2), (2, 4), (1, 4)]
    cells, k = [], 0
    combos = [(o, s, p, dt, m) for dt in ("bf16", "fp32") for m in ("oracle:gpt-tiny", "gpt-tiny", "oracle:moe")
              for o in SCHEMAS for s in SHARDING_TYPES for p in plans]
    every = max(1, n // max(1, failing))
    for i, (o, s, (dp, rdp), dt, m) in enumerate(combos[:n]):
        fail = None
        if failing and i % every == every // 2 and k < failing:
            group = groups_of(o, dt)[-1]
            fail = {"group": group, "step": 5, "run": "resumed" if rdp else "uninterrupted", "size": 1e-2}
            k += 1
        cells.append(make_cell(o, s, dp, resume_dp=rdp, save_at=4 if rdp else None, dtype=dt, model=m,
                               steps=steps, fail=fail))
    return cells


SETS = {"realistic": realistic, "passing": all_passing, "one-failing": one_failing, "lion": lion_only,
        "systems": systems, "releases": releases}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("set", choices=sorted(SETS) + ["large"])
    ap.add_argument("out")
    ap.add_argument("--cells", type=int, default=400, help="cells of the large set (default 400)")
    ap.add_argument("--bench", action="store_true",
                    help="also write bench/micro.json and bench/optimizer_step.json (growth_bench_doc)")
    ap.add_argument("--selftest", action="store_true", help="also write selftest.json (one failpoint escaped)")
    a = ap.parse_args()
    cells = large(a.cells) if a.set == "large" else SETS[a.set]()
    bench = {"micro.json": bench_doc(), "optimizer_step.json": growth_bench_doc()} if a.bench else None
    write_results(a.out, cells, bench=bench,
                  selftest=selftest_doc() if a.selftest else None)
    print(f"wrote {len(cells)} cells to {a.out}")


if __name__ == "__main__":
    main()
