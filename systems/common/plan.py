"""The plan shardcheck hands an adapter (docs/systems.md, "The plan"), read and checked.

A malformed plan raises PlanError naming the key; the adapter exits 2.
"""

import json
import os
from dataclasses import dataclass, field
from typing import List, Optional

FORMAT = "shardcheck-plan/1"


class PlanError(Exception):
    """The plan is malformed or asks for something this adapter cannot do (exit 2)."""


@dataclass
class Param:
    pid: int
    name: str
    shape: List[int]
    role: str          # embedding | output | other


@dataclass
class Group:
    optimizer: str     # the registry kind that owns the group's params
    wd_mult: float
    lr: float
    weight_decay: float  # the config's weight decay; the group's is weight_decay * wd_mult
    params: List[str]


@dataclass
class Run:
    name: str          # single_device | uninterrupted | resumed
    dp: int
    first_step: int
    last_step: int
    save_at: Optional[int] = None
    save_dir: Optional[str] = None   # absolute
    load_dir: Optional[str] = None   # absolute
    load_step: Optional[int] = None
    out_dir: str = ""                # absolute: where the run's files go


@dataclass
class Plan:
    path: str
    cell: str
    system: dict
    model_name: str
    dtype: str                       # fp32 | bf16 (the model params')
    params: List[Param]
    seed: int
    micro_batches: int
    zero_mask: bool
    setup: dict                      # the resolved optimizer setup (docs/results-schema.md, "optimizer")
    groups: List[Group]
    lr_factor: List[float]           # lr_factor[t-1]: the schedule's factor of step t
    sharding_type: str
    steps: int
    timeout_s: float
    runs: List[Run]
    inject: List[str] = field(default_factory=list)

    def run(self, name):
        for r in self.runs:
            if r.name == name:
                return r
        raise PlanError(f"{self.path}: no run '{name}' (the plan has {', '.join(r.name for r in self.runs)})")

    def hyper(self, child=0):
        """The hyperparameters of child `child` of the setup: {name: value}."""
        return self.setup["children"][child]


def _get(obj, key, kind, where):
    if key not in obj:
        raise PlanError(f"{where}: missing key '{key}'")
    v = obj[key]
    if kind is float and isinstance(v, int) and not isinstance(v, bool):
        v = float(v)
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise PlanError(f"{where}: '{key}' must be {kind.__name__}, got {type(v).__name__}")
    return v


def _run(obj, base, i, path):
    where = f"{path}: runs[{i}]"
    r = Run(name=_get(obj, "name", str, where), dp=_get(obj, "dp", int, where),
            first_step=_get(obj, "first_step", int, where), last_step=_get(obj, "last_step", int, where))
    r.out_dir = os.path.join(base, r.name)
    if obj.get("save_at") is not None:
        r.save_at = _get(obj, "save_at", int, where)
        r.save_dir = os.path.join(base, _get(obj, "save_dir", str, where))
    if obj.get("load_dir") is not None:
        r.load_dir = os.path.join(base, _get(obj, "load_dir", str, where))
        r.load_step = _get(obj, "load_step", int, where)
        if r.first_step != r.load_step + 1:
            raise PlanError(f"{where}: first_step {r.first_step} must follow load_step {r.load_step}")
    if r.dp < 1 or r.first_step < 1 or r.last_step < r.first_step:
        raise PlanError(f"{where}: dp {r.dp}, steps {r.first_step}..{r.last_step} make no run")
    return r


def load_plan(path):
    """Reads and checks `path`. Raises PlanError naming the file and key."""
    try:
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        raise PlanError(f"{path}: cannot read the plan: {e}") from e
    if j.get("format") != FORMAT:
        raise PlanError(f"{path}: format {j.get('format')!r}, expected {FORMAT!r}")
    base = os.path.dirname(os.path.abspath(path))
    model = _get(j, "model", dict, path)
    oracle = _get(j, "oracle", dict, path)
    opt = _get(j, "optimizer", dict, path)
    params = [Param(pid=_get(p, "pid", int, f"{path}: model.params"), name=_get(p, "name", str, f"{path}: model.params"),
                    shape=list(_get(p, "shape", list, f"{path}: model.params")), role=p.get("role", "other"))
              for p in _get(model, "params", list, f"{path}: model")]
    for i, p in enumerate(params):
        if p.pid != i:
            raise PlanError(f"{path}: model.params[{i}] has pid {p.pid}: params come in pid order")
    groups = [Group(optimizer=_get(g, "optimizer", str, f"{path}: optimizer.groups"),
                    wd_mult=_get(g, "wd_mult", float, f"{path}: optimizer.groups"),
                    lr=_get(g, "lr", float, f"{path}: optimizer.groups"),
                    weight_decay=_get(g, "weight_decay", float, f"{path}: optimizer.groups"),
                    params=list(_get(g, "params", list, f"{path}: optimizer.groups")))
              for g in _get(opt, "groups", list, f"{path}: optimizer")]
    plan = Plan(path=path, cell=_get(j, "cell", str, path), system=_get(j, "system", dict, path),
                model_name=_get(model, "name", str, f"{path}: model"), dtype=_get(model, "dtype", str, f"{path}: model"),
                params=params, seed=_get(oracle, "seed", int, f"{path}: oracle"),
                micro_batches=_get(oracle, "micro_batches", int, f"{path}: oracle"),
                zero_mask=_get(oracle, "zero_mask", bool, f"{path}: oracle"),
                setup=_get(opt, "setup", dict, f"{path}: optimizer"), groups=groups,
                lr_factor=[float(x) for x in _get(opt, "lr_factor", list, f"{path}: optimizer")],
                sharding_type=_get(j, "sharding_type", str, path), steps=_get(j, "steps", int, path),
                timeout_s=float(_get(j, "timeout_s", float, path)),
                runs=[_run(r, base, i, path) for i, r in enumerate(_get(j, "runs", list, path))],
                inject=list(j.get("inject", [])))
    if plan.dtype not in ("fp32", "bf16"):
        raise PlanError(f"{path}: model.dtype {plan.dtype!r} (fp32 or bf16)")
    if len(plan.lr_factor) != plan.steps:
        raise PlanError(f"{path}: optimizer.lr_factor has {len(plan.lr_factor)} entries for {plan.steps} steps")
    named = {p.name for p in params}
    grouped = [n for g in groups for n in g.params]
    if sorted(grouped) != sorted(named):
        raise PlanError(f"{path}: optimizer.groups must hold every param exactly once")
    return plan
