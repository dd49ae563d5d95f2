"""The run loop every Python adapter shares (docs/systems.md, "Adding a system").

An adapter is a program that shardcheck starts through its launcher, one
process per rank with torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), as

    <python> systems/<system>/adapter.py --plan CELL_DIR/plan.json --run NAME

A Python adapter defines a `System` subclass (its hooks drive the real
system) and calls `main(ThatSystem)`. This loop does the rest:

1. reads the plan (a malformed one: exit 2) and lets the system refuse what
   it cannot run (exit 2);
2. imports the system and joins the process group (a failure: exit 3);
3. builds the model from the oracle's initial params, or loads the run's
   checkpoint through the system's own API, and writes a snapshot;
4. for every step of the run: this rank's oracle gradients (its micro-
   batches, summed and divided by M), the system's step, a snapshot, and
   the save at the plan's step;
5. writes RUN_DIR/final.safetensors and RUN_DIR/rank_<r>.json.

Anything the system under test raises ends the run with exit 1 and the
error in rank_<r>.json: its type, message, the phase and step, and the
innermost frame in the system's own source (file:line). That is a finding,
not something to work around. Communication failures exit 3, and
collective timeouts 124.
"""

import argparse
import json
import os
import sys
import time
import traceback

from . import exit_codes, oracle
from .plan import PlanError, load_plan
from .snapshot import snapshot_name, write_snapshot

RANK_FORMAT = "shardcheck-adapter-rank/1"


class System:
    """One system under test, driven through one run of a plan.

    Hooks are called on every rank in the same order; snapshot() may be a
    collective. `self.plan`, `self.run`, `self.rank` and `self.dp` are set
    before any hook runs.
    """

    name = ""               # the scenario's system name, e.g. "torch-fsdp2"
    source_markers = ()     # path fragments of the system's own source, e.g. ("/torch/",)

    def __init__(self, plan, run, rank, dp):
        self.plan, self.run, self.rank, self.dp = plan, run, rank, dp
        self.notes = []     # lines for rank_<r>.json (what the adapter did beyond the plan)

    @classmethod
    def check_plan(cls, plan, run):
        """Raises PlanError for what this system cannot run (an optimizer, a sharding type...)."""

    def import_system(self):
        """Imports the system's modules (a failure is an environment error)."""

    def init_distributed(self):
        """Joins the default process group from torchrun's environment (Gloo on the CPU)."""
        import datetime

        import torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=self.plan.timeout_s))

    def versions(self):
        """{package: version} of what ran, for the cell's result."""
        return {}

    def setup(self, initial_params):
        """Builds the model with `initial_params` (float32 numpy arrays, pid order) and the optimizer."""
        raise NotImplementedError

    def step(self, step, grads, lr_factor):
        """One optimizer step: `grads` are this rank's partial gradients (float32 numpy, pid order),
        to be reduced over the DP group by the system itself; every group's lr is its lr times
        `lr_factor`."""
        raise NotImplementedError

    def save(self, ckpt_dir, step):
        """Saves the model and optimizer through the system's own checkpoint API."""
        raise NotImplementedError

    def load(self, ckpt_dir, step):
        """Loads what save() wrote (possibly at another DP size) through the system's own API."""
        raise NotImplementedError

    def final_notes(self):
        """Lines for rank_<r>.json written when the run ends, however it ends (what the adapter
        counted while driving the system, e.g. redirected calls)."""
        return []

    def snapshot(self):
        """The whole model-space state in shardcheck's layout on rank 0 (see snapshot.py), None on
        the other ranks."""
        raise NotImplementedError

    def close(self):
        """Leaves the process group."""
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


class _Failure(Exception):
    def __init__(self, code, phase, step, error):
        super().__init__(str(error))
        self.code, self.phase, self.step, self.error = code, phase, step, error


def _classify(error):
    """The exit code of an exception raised while driving the system."""
    if isinstance(error, PlanError):
        return exit_codes.BAD_PLAN
    text = f"{type(error).__name__}: {error}".lower()
    if "timed out" in text or "timeout" in type(error).__name__.lower():
        return exit_codes.TIMEOUT
    comm = ("connection reset", "connection closed", "connection refused", "broken pipe",
            "gloo", "distnetworkerror", "diststoreerror", "distbackenderror")
    if isinstance(error, OSError) or any(c in text for c in comm):
        return exit_codes.ENVIRONMENT
    return exit_codes.SYSTEM_FAILED


def _where(tb, markers):
    """The innermost frame of `tb` inside the system's source, as 'pkg/file.py:line in func'."""
    frames = traceback.extract_tb(tb)
    for fr in reversed(frames):
        path = fr.filename.replace(os.sep, "/")
        for m in markers:
            i = path.rfind(m)
            if i >= 0:
                return f"{path[i + 1:]}:{fr.lineno} in {fr.name}"
    fr = frames[-1] if frames else None
    return f"{fr.filename}:{fr.lineno} in {fr.name}" if fr else ""


class _Runner:
    def __init__(self, system_cls, plan, run, rank, world):
        self.system = system_cls(plan, run, rank, world)
        self.plan, self.run, self.rank = plan, run, rank
        self.phase, self.step = "setup", None
        self.steps_done = []

    def guarded(self, phase, step, fn, *args):
        self.phase, self.step = phase, step
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - everything the system raises is reported
            raise _Failure(_classify(e), phase, step, e) from e

    def grads(self, step):
        p = self.plan
        b, e = oracle.rank_micro_batches(self.rank, self.run.dp, p.micro_batches)
        return [oracle.partial_grad(p.seed, step, q.pid, tuple(q.shape), p.micro_batches, b, e, p.zero_mask)
                for q in p.params]

    def write(self, step, after_load=False):
        tensors = self.guarded("snapshot", step, self.system.snapshot)
        if self.rank != 0:
            return
        if tensors is None:
            raise _Failure(exit_codes.SYSTEM_FAILED, "snapshot", step,
                           RuntimeError("the adapter's snapshot() gave nothing on rank 0"))
        meta = {"step": step, "run": self.run.name, "after_load": "true" if after_load else "false",
                "system": self.plan.system.get("name", "")}
        names = [snapshot_name(step, after_load)]
        if step == self.run.last_step and not after_load:
            names.append("final.safetensors")
        for name in names:
            try:
                write_snapshot(os.path.join(self.run.out_dir, name), tensors, meta)
            except Exception as e:  # noqa: BLE001 - our own file: never the system's failure
                raise _Failure(exit_codes.ENVIRONMENT, "snapshot", step, e) from e

    def go(self):
        s, r, p = self.system, self.run, self.plan
        init = [oracle.initial_param(p.seed, q.pid, tuple(q.shape)) for q in p.params]
        self.guarded("setup", None, s.setup, init)
        if r.load_dir:
            self.guarded("load", r.load_step, s.load, r.load_dir, r.load_step)
            self.write(r.load_step, after_load=True)
        else:
            self.write(r.first_step - 1)
        for t in range(r.first_step, r.last_step + 1):
            g = self.grads(t)
            self.guarded("step", t, s.step, t, g, p.lr_factor[t - 1])
            self.steps_done.append(t)
            self.write(t)
            if r.save_at == t:
                self.guarded("save", t, s.save, r.save_dir, t)


def _reap_children():
    """Stops the processes the system started in this rank (megatron's checkpoint save starts a
    multiprocessing Manager server per save). os._exit skips the finalizers that would stop
    them, and left running they outlive the cell and hold its memory."""
    import multiprocessing
    children = multiprocessing.active_children()
    for p in children:
        p.terminate()
    for p in children:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()


def _write_rank_file(run, rank, record):
    os.makedirs(run.out_dir, exist_ok=True)
    path = os.path.join(run.out_dir, f"rank_{rank}.json")
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main(system_cls, argv=None):
    """Runs one run of a plan on this rank and exits with the code of docs/systems.md."""
    ap = argparse.ArgumentParser(description=f"shardcheck adapter for {system_cls.name} (docs/systems.md)")
    ap.add_argument("--plan", required=True, help="the cell's plan.json")
    ap.add_argument("--run", required=True, help="the run of the plan to do (single_device, uninterrupted, resumed)")
    args = ap.parse_args(argv)
    t0 = time.time()
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    try:
        plan = load_plan(args.plan)
        run = plan.run(args.run)
        if world != run.dp:
            raise PlanError(f"{args.plan}: run {run.name} is at dp {run.dp}, and WORLD_SIZE is {world}")
        system_cls.check_plan(plan, run)
    except PlanError as e:
        print(f"{system_cls.name} adapter: error: {e}", file=sys.stderr, flush=True)
        sys.exit(exit_codes.BAD_PLAN)
    record = {"format": RANK_FORMAT, "rank": rank, "run": run.name, "dp": run.dp, "system": system_cls.name,
              "status": "ok", "exit_code": 0, "versions": {}, "steps_done": [], "error": None, "notes": []}
    runner = None
    code = exit_codes.OK
    try:
        os.makedirs(run.out_dir, exist_ok=True)
        runner = _Runner(system_cls, plan, run, rank, world)
        try:
            runner.system.import_system()
            record["versions"] = runner.system.versions()
            runner.system.init_distributed()
        except Exception as e:  # noqa: BLE001
            raise _Failure(exit_codes.ENVIRONMENT if not isinstance(e, PlanError) else exit_codes.BAD_PLAN,
                           "setup", None, e) from e
        runner.go()
    except Exception as e:  # noqa: BLE001 - the adapter's own bug: not a finding about the system
        f = e if isinstance(e, _Failure) else _Failure(exit_codes.ENVIRONMENT, "adapter", None, e)
        code = f.code
        e = f.error
        record["status"] = {1: "system_failed", 2: "bad_plan", 3: "environment", 124: "timeout"}[code]
        if f.phase == "adapter":
            record["status"] = "adapter_error"
        record["error"] = {"type": type(e).__name__, "message": str(e).strip().splitlines()[0] if str(e).strip() else "",
                           "phase": f.phase, "step": f.step,
                           "where": _where(e.__traceback__, system_cls.source_markers),
                           "traceback": traceback.format_exception(type(e), e, e.__traceback__)}
        where = record["error"]["where"]
        print(f"{system_cls.name} adapter: rank {rank}: {f.phase}"
              + (f" at step {f.step}" if f.step is not None else "")
              + f": {type(e).__name__}: {record['error']['message']}" + (f" ({where})" if where else ""),
              file=sys.stderr, flush=True)
    record["exit_code"] = code
    if runner is not None:
        record["steps_done"] = runner.steps_done
        try:
            record["notes"] = runner.system.notes + list(runner.system.final_notes())
        except Exception as e:  # noqa: BLE001 - the record must still be written
            record["notes"] = runner.system.notes + [f"final_notes failed: {e}"]
    record["wall_s"] = round(time.time() - t0, 3)
    try:
        _write_rank_file(run, rank, record)
    except OSError as e:
        print(f"{system_cls.name} adapter: error: cannot write rank_{rank}.json: {e}", file=sys.stderr, flush=True)
        code = code or exit_codes.ENVIRONMENT
    if runner is not None and code == exit_codes.OK:
        try:
            runner.system.close()
        except Exception:  # noqa: BLE001 - the run is done; leaving the group is best effort
            pass
    _reap_children()
    sys.stdout.flush()
    # os._exit: a failed rank must not wait in the process group's teardown for peers that died.
    os._exit(code)
