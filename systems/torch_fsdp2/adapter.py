"""shardcheck's adapter for PyTorch FSDP2 with torch.distributed.checkpoint (DCP).

The system under test: `fully_shard` (FSDP2: every param a DTensor sharded
on dim 0 over the DP mesh, gradients reduce-scattered and averaged by FSDP
itself), torch.optim's Adam, AdamW or SGD on the sharded params (the for-loop,
`foreach` or `fused` implementation, the plan's system variant), and DCP
for checkpoints (`get_state_dict` / `dcp.save`, `dcp.load` /
`set_state_dict`), which may load at another DP size. The single-device run
is the same torch.optim optimizer on plain tensors.

Gradients enter through FSDP's own backward: each param sits in its own
module, whose forward is sum(weight * (dp * g_r)) for this rank's oracle
partial g_r. FSDP averages over the dp ranks, and dp * g_r is exact, so
the reduced gradient is the oracle's global gradient bit for bit. Nothing
in torch is patched.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common.adapter_main import System, main  # noqa: E402
from common.plan import PlanError  # noqa: E402

# The registry's kinds this adapter maps onto torch.optim, with the
# registry hyperparameters each takes (docs/systems.md, "torch-fsdp2").
KINDS = {"adam": ("lr", "weight_decay", "beta1", "beta2", "eps"),
         "adamw": ("lr", "weight_decay", "beta1", "beta2", "eps"),
         "sgd": ("lr", "weight_decay", "momentum", "nesterov")}
# "" is torch.optim's own default choice (the for-loop implementation for CPU tensors).
VARIANTS = ("", "foreach", "fused")


class TorchFsdp2(System):
    name = "torch-fsdp2"
    source_markers = ("/torch/",)

    @classmethod
    def check_plan(cls, plan, run):
        children = plan.setup.get("children", [])
        if len(children) != 1:
            raise PlanError(f"{plan.path}: torch-fsdp2 drives one torch.optim optimizer, "
                            f"not the composite {plan.setup.get('name')}")
        kind = children[0].get("kind")
        if kind not in KINDS:
            raise PlanError(f"{plan.path}: torch.optim has no {kind} (torch-fsdp2 runs {', '.join(KINDS)})")
        if plan.sharding_type != "dcp":
            raise PlanError(f"{plan.path}: torch-fsdp2 saves through DCP (sharding_type dcp), "
                            f"not {plan.sharding_type}")
        if plan.dtype != "fp32":
            raise PlanError(f"{plan.path}: torch-fsdp2 runs fp32 models only, not {plan.dtype}")
        if plan.setup.get("max_grad_norm", 0):
            raise PlanError(f"{plan.path}: torch-fsdp2's adapter does not clip gradients")
        if plan.system.get("variant", "") not in VARIANTS:
            raise PlanError(f"{plan.path}: torch-fsdp2 variant {plan.system.get('variant')!r} "
                            f"(foreach, fused, or none)")

    def import_system(self):
        import torch
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import state_dict as sd
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        self.torch, self.dcp, self.sd = torch, dcp, sd
        self.init_device_mesh, self.fully_shard = init_device_mesh, fully_shard
        torch.set_num_threads(1)

    def versions(self):
        return {"torch": self.torch.__version__, "python": sys.version.split()[0]}

    def init_distributed(self):
        if self.run.name != "single_device":
            super().init_distributed()

    # --- the model and the optimizer -------------------------------------

    def _module(self, initial_params):
        torch = self.torch

        class Leaf(torch.nn.Module):
            def __init__(self, value):
                super().__init__()
                self.weight = torch.nn.Parameter(torch.from_numpy(value.copy()))

            def forward(self, g):
                return (self.weight * g).sum()

        class Model(torch.nn.Module):
            def __init__(self, values):
                super().__init__()
                self.leaves = torch.nn.ModuleList(Leaf(v) for v in values)

        return Model(initial_params)

    def _optimizer(self, params_by_name):
        torch = self.torch
        hyper = self.plan.hyper(0)
        kind = hyper["kind"]
        variant = self.plan.system.get("variant", "")
        impl = {"foreach": {"foreach": True}, "fused": {"fused": True}}.get(variant, {})
        groups = [{"params": [params_by_name[n] for n in g.params], "lr": g.lr,
                   "weight_decay": g.weight_decay * g.wd_mult} for g in self.plan.groups if g.params]
        self.base_lr = [g.lr for g in self.plan.groups if g.params]
        if kind in ("adam", "adamw"):
            cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
            return cls(groups, betas=(hyper["beta1"], hyper["beta2"]), eps=hyper["eps"], **impl)
        return torch.optim.SGD(groups, momentum=hyper["momentum"], nesterov=bool(hyper["nesterov"]),
                               dampening=0.0, **impl)

    def setup(self, initial_params):
        self.model = self._module(initial_params)
        if self.run.name != "single_device":
            mesh = self.init_device_mesh("cpu", (self.dp,))
            for leaf in self.model.leaves:
                self.fully_shard(leaf, mesh=mesh)
            self.fully_shard(self.model, mesh=mesh)
        self.names = [p.name for p in self.plan.params]
        by_name = {n: leaf.weight for n, leaf in zip(self.names, self.model.leaves)}
        self.fqn_to_name = {f"leaves.{i}.weight": n for i, n in enumerate(self.names)}
        self.optimizer = self._optimizer(by_name)

    # --- a step -------------------------------------------------------------

    def step(self, step, grads, lr_factor):
        torch = self.torch
        for group, lr in zip(self.optimizer.param_groups, self.base_lr):
            group["lr"] = lr * lr_factor
        if self.run.name == "single_device":
            for leaf, g in zip(self.model.leaves, grads):
                leaf.weight.grad = torch.from_numpy(g.copy())
        else:
            # FSDP2 averages the gradient over the ranks: feed dp * g_r (exact) so the mean is
            # the oracle's sum.
            scale = torch.tensor(float(self.dp), dtype=torch.float32)
            loss = sum(leaf(torch.from_numpy(g) * scale) for leaf, g in zip(self.model.leaves, grads))
            loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    # --- checkpoints ----------------------------------------------------------

    def save(self, ckpt_dir, step):
        model_sd, optim_sd = self.sd.get_state_dict(self.model, self.optimizer)
        self.dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=ckpt_dir)

    def load(self, ckpt_dir, step):
        if "load_model_only" in self.plan.inject:
            # The injected bug of the negative check: the optimizer state is not loaded.
            model_sd = self.sd.get_model_state_dict(self.model)
            self.dcp.load({"model": model_sd}, checkpoint_id=ckpt_dir)
            self.sd.set_model_state_dict(self.model, model_sd)
            self.notes.append("injected: load_model_only (the optimizer state was not loaded)")
            return
        model_sd, optim_sd = self.sd.get_state_dict(self.model, self.optimizer)
        state = {"model": model_sd, "optim": optim_sd}
        self.dcp.load(state, checkpoint_id=ckpt_dir)
        self.sd.set_state_dict(self.model, self.optimizer, model_state_dict=state["model"],
                               optim_state_dict=state["optim"])

    # --- snapshots --------------------------------------------------------------

    def snapshot(self):
        if self.run.name == "single_device":
            params = {n: leaf.weight.detach() for n, leaf in zip(self.names, self.model.leaves)}
            state = {n: self.optimizer.state.get(leaf.weight, {}) for n, leaf in zip(self.names, self.model.leaves)}
        else:
            opts = self.sd.StateDictOptions(full_state_dict=True, cpu_offload=True)
            msd = self.sd.get_model_state_dict(self.model, options=opts)
            if not self.optimizer.state:
                osd = {"state": {}}  # nothing to gather: never stepped (get_optimizer_state_dict would step)
            else:
                osd = self.sd.get_optimizer_state_dict(self.model, self.optimizer, options=opts)
            if self.rank != 0:
                return None
            params = {self.fqn_to_name[k]: v for k, v in msd.items()}
            state = {self.fqn_to_name[k]: v for k, v in osd["state"].items()}
        out = {f"param.{n}": p for n, p in params.items()}
        for n, st in state.items():
            for key, value in st.items():
                if isinstance(value, self.torch.Tensor):
                    out[f"state.{key}.{n}"] = value.detach()
        return out


if __name__ == "__main__":
    main(TorchFsdp2)
