"""shardcheck's adapter for megatron-core's DistributedOptimizer (docs/systems.md, "megatron-core").

The system under test is what megatron's own training loop drives, at tensor- and pipeline-
parallel size 1:

- `parallel_state.initialize_model_parallel(1, 1)`;
- a MegatronModule holding the plan's params, wrapped in megatron's DistributedDataParallel
  (`use_distributed_optimizer=True`, the grad buffer in fp32, the model's config with
  `calculate_per_token_loss=True`, so the reduce-scatter is a plain sum);
- `get_megatron_optimizer` with the plan's setup (torch.optim's Adam/AdamW where no
  TransformerEngine or Apex is installed; Lion and Muon from emerging-optimizers);
- each step: this rank's oracle partial written into every param's `main_grad`, then
  `finish_grad_sync()` and the optimizer's `step()`, the lr set on the param groups as megatron's
  scheduler would;
- checkpoints through `sharded_state_dict` and `dist_checkpointing.save` / `load`, with the
  plan's sharding type as `distrib_optim_sharding_type`.

The single-device run is the torch optimizer megatron would build (torch.optim.Adam or AdamW,
emerging-optimizers' Lion) on plain tensors. Which megatron-core runs is the plan's system
version: each pinned release is installed on its own under the venv (docs/systems.md,
"Dependencies"). On a CPU, megatron's CUDA uses are redirected by cuda_redirect.py and counted
by call site; nothing else is patched.
"""

import os
import sys

# emerging-optimizers' Lion step is torch.compile'd; on the CPU it runs eagerly.
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common.adapter_main import System, main  # noqa: E402
from common.plan import PlanError  # noqa: E402

VERSIONS = ("0.18.2", "0.19.2")
SHARDING_TYPES = ("dp_reshardable", "fully_reshardable", "fully_sharded_model_space", "dp_zero_gather_scatter")
# emerging-optimizers' Newton-Schulz coefficient sets megatron names (muon_coefficient_type),
# as in the plan's ns_coefficients: one triple for every iteration, or one per iteration.
NS_COEFFICIENTS = {
    "simple": [3.4445, -4.7750, 2.0315],
    "quintic": [4.0848, -6.8946, 2.9270, 3.9505, -6.3029, 2.6377, 3.7418, -5.5913, 2.3037,
                2.8769, -3.1427, 1.2046, 2.8366, -3.0525, 1.2012],
}
# The registry setups this adapter maps onto megatron's OptimizerConfig, by the kinds of the
# setup's children: kinds -> (optimizer, muon_scalar_optimizer or None, decoupled_weight_decay).
# Muon's scalar "adam" is AdamW in both (the registry's as_scalar trait; megatron's default).
SETUPS = {("adam",): ("adam", None, False), ("adamw",): ("adam", None, True), ("lion",): ("lion", None, True),
          ("muon", "adamw"): ("muon", "adam", True), ("muon", "lion"): ("muon", "lion", True)}


def setup_kinds(plan):
    """The kinds of the plan's setup children, in order ("muon", "lion")."""
    return tuple(c.get("kind") for c in plan.setup.get("children", []))


# A copy of an installed release with a finding's one spot patched, for the
# confirmation runs of docs/findings.md only (systems/megatron_core/confirm.py).
PATCHED_ROOT_ENV = "SHARDCHECK_MEGATRON_CORE_ROOT"


def megatron_root(version):
    """Where megatron-core `version` is: <venv>/megatron-core/<version>, or a patched copy."""
    return os.environ.get(PATCHED_ROOT_ENV) or os.path.join(sys.prefix, "megatron-core", version)


class MegatronCore(System):
    name = "megatron-core"
    source_markers = ("/megatron/", "/emerging_optimizers/", "/torch/")

    @classmethod
    def check_plan(cls, plan, run):
        version = plan.system.get("version", "")
        if version not in VERSIONS:
            raise PlanError(f"{plan.path}: megatron-core version {version!r} (this adapter runs "
                            f"{', '.join(VERSIONS)})")
        if not os.path.isdir(megatron_root(version)):
            raise PlanError(f"{plan.path}: megatron-core {version} is not installed at "
                            f"{megatron_root(version)} (run ci/setup-systems)")
        name = plan.setup.get("name")
        if setup_kinds(plan) not in SETUPS:
            raise PlanError(f"{plan.path}: megatron-core's adapter has no setup {name} (it runs "
                            f"{', '.join('_'.join(k) for k in SETUPS)})")
        if plan.sharding_type not in SHARDING_TYPES:
            raise PlanError(f"{plan.path}: megatron-core's DistributedOptimizer has no sharding "
                            f"type {plan.sharding_type}")
        if plan.setup.get("max_grad_norm", 0):
            raise PlanError(f"{plan.path}: megatron-core's adapter does not clip gradients")
        muon = SETUPS[setup_kinds(plan)][0] == "muon"
        if muon and cls.coefficient_type(plan.hyper(0)) is None:
            raise PlanError(f"{plan.path}: megatron-core's Muon takes the Newton-Schulz coefficient sets "
                            f"{', '.join(NS_COEFFICIENTS)}, not {plan.hyper(0).get('ns_coefficients')}")
        if muon and plan.dtype != "bf16":
            raise PlanError(f"{plan.path}: megatron-core runs {name} through the layer-wise "
                            "DistributedOptimizer, which needs a bf16 model")

    @staticmethod
    def coefficient_type(muon):
        """megatron's muon_coefficient_type for the plan's Muon hyperparameters, or None."""
        given = [float(x) for x in muon.get("ns_coefficients", [])]
        for name, values in NS_COEFFICIENTS.items():
            if name == "quintic" and int(muon.get("ns_steps", 0)) != 5:
                continue
            if len(given) == len(values) and all(abs(a - b) < 1e-6 for a, b in zip(given, values)):
                return name
        return None

    # --- importing and joining -------------------------------------------------

    def import_system(self):
        version = self.plan.system["version"]
        sys.path.insert(0, megatron_root(version))
        import torch
        torch.set_num_threads(1)
        self.torch = torch
        self.gpu = torch.cuda.is_available() and os.environ.get("SHARDCHECK_SYSTEMS_DEVICE", "") != "cpu"
        self.notes.append(f"optimizer setup {self.plan.setup['name']}; model {self.plan.dtype}")
        self.redirection = None
        if not self.gpu:
            from megatron_core.cuda_redirect import Redirection
            self.redirection = Redirection()
            self.redirection.install()
        import megatron.core
        if megatron.core.__version__.split("+")[0] != version:
            raise RuntimeError(f"imported megatron-core {megatron.core.__version__} from "
                               f"{megatron.core.__file__}, expected {version}")
        self.megatron = megatron.core
        if os.environ.get(PATCHED_ROOT_ENV):
            self.notes.append(f"megatron-core {version} from a patched copy at {megatron_root(version)}")

    def versions(self):
        out = {"megatron-core": self.megatron.__version__, "torch": self.torch.__version__,
               "python": sys.version.split()[0]}
        try:
            from importlib.metadata import version
            out["emerging-optimizers"] = version("emerging-optimizers")
        except Exception:  # noqa: BLE001 - optional for adam/adamw
            pass
        return out

    @property
    def torch_single(self):
        """The single-device run on plain torch optimizers (every setup but Muon, whose
        single device is megatron's own stack at dp 1: its Muon has no plain-torch twin)."""
        return self.run.name == "single_device" and not self._muon()

    def init_distributed(self):
        if self.torch_single:
            return
        import datetime

        import torch.distributed as dist
        backend = "nccl" if self.gpu else "gloo"
        if self.gpu:
            self.torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=self.plan.timeout_s))
        from megatron.core import parallel_state
        parallel_state.initialize_model_parallel(1, 1)

    def final_notes(self):
        """One line per redirected CUDA call site (cuda_redirect.py), also printed to the log."""
        if getattr(self, "redirection", None) is None:
            return ["no CUDA call redirected (running on a GPU)"] if getattr(self, "gpu", False) else []
        lines = [f"redirected to the CPU: {r['kind']} at {r['site']} ({r['calls']} calls)"
                 for r in self.redirection.sites()]
        if self.rank == 0:
            for line in lines:
                print(f"megatron-core adapter: {line}", file=sys.stderr, flush=True)
        return lines

    def close(self):
        if not self.torch_single:
            from megatron.core import parallel_state
            parallel_state.destroy_model_parallel()
        super().close()

    # --- the model and the optimizer ---------------------------------------------

    def _dtype(self):
        return self.torch.bfloat16 if self.plan.dtype == "bf16" else self.torch.float32

    def _model(self, initial_params):
        torch = self.torch
        from megatron.core.transformer import TransformerConfig
        from megatron.core.transformer.module import MegatronModule
        bf16 = self.plan.dtype == "bf16"
        config = TransformerConfig(num_layers=1, hidden_size=8, num_attention_heads=1,
                                   params_dtype=self._dtype(), bf16=bf16,
                                   calculate_per_token_loss=True)
        device = torch.cuda.current_device() if self.gpu else "cpu"
        params = self.plan.params

        class Params(MegatronModule):
            def __init__(self):
                super().__init__(config)
                for q, v in zip(params, initial_params):
                    t = torch.from_numpy(v.copy()).to(device=device, dtype=config.params_dtype)
                    self.register_parameter(q.name, torch.nn.Parameter(t))
                    # What megatron's language models mark on their embeddings and output
                    # layer (Muon leaves them to the scalar optimizer).
                    if q.role in ("embedding", "output"):
                        getattr(self, q.name).is_embedding_or_output_parameter = True

        return Params(), config

    def _optimizer_config(self):
        from megatron.core.optimizer import OptimizerConfig
        setup = self.plan.setup
        optimizer, scalar, decoupled = SETUPS[setup_kinds(self.plan)]
        children = setup["children"]
        first = children[0]
        kw = dict(optimizer=optimizer, lr=first["lr"], min_lr=0.0, weight_decay=first["weight_decay"],
                  clip_grad=0.0, bf16=self.plan.dtype == "bf16", params_dtype=self._dtype(),
                  use_distributed_optimizer=True)
        if optimizer == "adam":
            kw.update(adam_beta1=first["beta1"], adam_beta2=first["beta2"], adam_eps=first["eps"],
                      decoupled_weight_decay=decoupled)
        elif optimizer == "lion":
            kw.update(lion_beta1=first["beta1"], lion_beta2=first["beta2"])
        else:
            scalar_hyper = children[1]
            kw.update(muon_momentum=first["momentum"], muon_nesterov=bool(first["nesterov"]),
                      muon_num_ns_steps=int(first["ns_steps"]), muon_scale_mode=first["scale_mode"],
                      muon_coefficient_type=self.coefficient_type(first),
                      muon_extra_scale_factor=first["extra_scale"], muon_scalar_optimizer=scalar,
                      use_layer_wise_distributed_optimizer=True)
            if scalar == "adam":
                kw.update(adam_beta1=scalar_hyper["beta1"], adam_beta2=scalar_hyper["beta2"],
                          adam_eps=scalar_hyper["eps"])
            else:
                kw.update(lion_beta1=scalar_hyper["beta1"], lion_beta2=scalar_hyper["beta2"])
        return OptimizerConfig(**kw)

    def setup(self, initial_params):
        torch = self.torch
        module, config = self._model(initial_params)
        self.names = [p.name for p in self.plan.params]
        if self.torch_single:
            self.module = module
            self.params = [getattr(module, n) for n in self.names]
            # Megatron's bf16 training keeps fp32 main params and steps those; fp32 steps the
            # params themselves.
            self.mains = ([p.detach().float().clone() for p in self.params] if self.plan.dtype == "bf16"
                          else self.params)
            self.optimizer = self._single_device_optimizer()
            return
        from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
        from megatron.core.optimizer import get_megatron_optimizer
        ddp_config = DistributedDataParallelConfig(use_distributed_optimizer=True, grad_reduce_in_fp32=True,
                                                   overlap_grad_reduce=False, overlap_param_gather=False,
                                                   average_in_collective=False)
        self.model = DistributedDataParallel(config=config, ddp_config=ddp_config, module=module,
                                             full_param_layout=self._layout(module, ddp_config))
        self.module = module
        self.params = [getattr(module, n) for n in self.names]
        self.optimizer = get_megatron_optimizer(self._optimizer_config(), [self.model])
        self.notes.append(f"megatron built {self._describe(self.optimizer)}")
        self.weight_decay = self.plan.setup["children"][0]["weight_decay"]
        del torch

    def _muon(self):
        return SETUPS[setup_kinds(self.plan)][0] == "muon"

    def _layout(self, module, ddp_config):
        """The param layout megatron's training loop computes before it wraps the model: the
        layer-wise one for Muon (after tagging the params it manages), else the
        DistributedOptimizer's."""
        if self._muon():
            from megatron.core.optimizer.layer_wise_optimizer import (LayerWiseDistributedOptimizer,
                                                                      tag_params_for_buffer_routing)
            tag_params_for_buffer_routing([module])
            planner = LayerWiseDistributedOptimizer
        else:
            from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer
            planner = DistributedOptimizer
        return planner.compute_full_param_layout(list(module.parameters()), None, self.dp, ddp_config)

    def _single_device_optimizer(self):
        """The torch optimizer megatron builds, on the model's params (no DistributedOptimizer)."""
        torch = self.torch
        setup = self.plan.setup
        first = setup["children"][0]
        by_name = {n: p for n, p in zip(self.names, self.mains)}
        groups = [{"params": [by_name[n] for n in g.params], "weight_decay": g.weight_decay * g.wd_mult}
                  for g in self.plan.groups if g.params]
        self.single_lr = [g.lr for g in self.plan.groups if g.params]
        kind = setup_kinds(self.plan)[0]
        if kind in ("adam", "adamw"):
            cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
            return cls(groups, lr=first["lr"], betas=(first["beta1"], first["beta2"]), eps=first["eps"])
        if kind == "lion":
            from emerging_optimizers.scalar_optimizers import Lion
            return Lion(groups, lr=first["lr"], betas=(first["beta1"], first["beta2"]))
        raise PlanError(f"{self.plan.path}: no single-device optimizer for {setup['name']} yet")

    # --- a step ----------------------------------------------------------------------

    def step(self, step, grads, lr_factor):
        torch = self.torch
        if self.torch_single:
            for group, lr in zip(self.optimizer.param_groups, self.single_lr):
                group["lr"] = lr * lr_factor
            for m, g in zip(self.mains, grads):
                m.grad = torch.from_numpy(g.copy()).to(m.device)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            if self.mains is not self.params:
                with torch.no_grad():
                    for p, m in zip(self.params, self.mains):
                        p.copy_(m)
            return
        self._schedule(lr_factor)
        self.model.zero_grad_buffer()
        self.optimizer.zero_grad()
        for p, g in zip(self.params, grads):
            p.main_grad.copy_(torch.from_numpy(g))
        self.model.finish_grad_sync()
        ok, _, _ = self.optimizer.step()
        if not ok:
            raise RuntimeError(f"megatron's optimizer skipped step {step} (update_successful False)")

    # --- checkpoints -------------------------------------------------------------------

    def _schedule(self, lr_factor):
        """What megatron's OptimizerParamScheduler sets on every param group before a step: the
        lr (max_lr times the plan's factor, times the group's lr_mult) and the weight decay (the
        config's times the group's wd_mult; megatron builds its no-decay group with the config's)."""
        for group in self.optimizer.param_groups:
            group["lr"] = group["max_lr"] * lr_factor * group.get("lr_mult", 1.0)
            group["weight_decay"] = self.weight_decay * group.get("wd_mult", 1.0)

    @staticmethod
    def _describe(opt):
        """The optimizer tree megatron built, e.g. ChainedOptimizer[DistributedOptimizer(AdamW)]:
        says whether the state is sharded (a DistributedOptimizer or the layer-wise one) or not."""
        if hasattr(opt, "chained_optimizers"):
            inner = ", ".join(MegatronCore._describe(o) for o in opt.chained_optimizers)
            return f"{type(opt).__name__}[{inner}]"
        return f"{type(opt).__name__}({type(opt.optimizer).__name__})"

    def _leaves(self):
        """The optimizers under megatron's ChainedOptimizers (nested for the layer-wise one), or
        the one optimizer."""
        out, todo = [], [self.optimizer]
        while todo:
            opt = todo.pop(0)
            if hasattr(opt, "chained_optimizers"):
                todo[:0] = list(opt.chained_optimizers)
            else:
                out.append(opt)
        return out

    def _metadata(self):
        return {"distrib_optim_sharding_type": self.plan.sharding_type}

    def _sharded_state_dict(self, is_loading):
        model_sd = self.module.sharded_state_dict()
        optim_sd = self.optimizer.sharded_state_dict(model_sd, is_loading=is_loading, metadata=self._metadata())
        return {"model": model_sd, "optimizer": optim_sd}

    def save(self, ckpt_dir, step):
        from megatron.core import dist_checkpointing
        os.makedirs(ckpt_dir, exist_ok=True)
        dist_checkpointing.save(self._sharded_state_dict(is_loading=False), ckpt_dir)

    def load(self, ckpt_dir, step):
        from megatron.core import dist_checkpointing
        # What megatron's training loop does before it loads into a fresh optimizer.
        for opt in self._leaves():
            if hasattr(opt, "_init_optimizer_states_with_dummy_values") and not opt.optimizer.state:
                opt._init_optimizer_states_with_dummy_values()
                self.notes.append("called DistributedOptimizer._init_optimizer_states_with_dummy_values() "
                                  "before load, as megatron's training loop does")
        state = dist_checkpointing.load(self._sharded_state_dict(is_loading=True), ckpt_dir)
        self.module.load_state_dict(state["model"])
        if "load_model_only" in self.plan.inject:
            self.notes.append("injected: load_model_only (the optimizer state was not loaded)")
            return
        self.optimizer.load_state_dict(state["optimizer"])

    # --- snapshots -----------------------------------------------------------------------

    def _state_tensors(self, opt_state):
        return {k: v for k, v in opt_state.items() if isinstance(v, self.torch.Tensor)}

    def snapshot(self):
        torch = self.torch
        out = {f"param.{n}": p.detach().cpu().clone() for n, p in zip(self.names, self.params)}
        if self.torch_single:
            for n, m in zip(self.names, self.mains):
                if self.plan.dtype == "bf16":
                    out[f"main_param.{n}"] = m.detach().cpu().clone()
                for key, v in self._state_tensors(self.optimizer.state.get(m, {})).items():
                    out[f"state.{key}.{n}"] = v.detach().cpu()
            return out
        pieces = self._local_pieces()
        import torch.distributed as dist
        gathered = [None] * self.run.dp
        dist.all_gather_object(gathered, pieces)
        if self.rank != 0:
            return None
        for name, p in zip(self.names, self.params):
            full = {}
            for rank_pieces in gathered:
                for start, end, tensors in rank_pieces.get(name, []):
                    for key, v in tensors.items():
                        if v.dim() == 0:
                            full[key] = v  # a per-param scalar (torch's `step`): any shard's
                            continue
                        if key not in full:
                            full[key] = torch.full((p.numel(),), float("nan"), dtype=v.dtype)
                        full[key][start:end] = v
            for key, v in full.items():
                prefix = "main_param" if key == "param" else f"state.{key}"
                out[f"{prefix}.{name}"] = v if v.dim() == 0 else v.view(p.shape)
        return out

    def _local_pieces(self):
        """{param name: [(start, end, {"param": main shard, state key: shard})]} of this rank."""
        pieces = {}
        name_of = {p: n for n, p in zip(self.names, self.params)}
        for opt in self._leaves():
            for model_param, main, r in self._main_params(opt):
                tensors = {"param": main.detach().float().cpu().reshape(-1).clone()}
                for key, v in self._state_tensors(opt.optimizer.state.get(main, {})).items():
                    v = v.detach().cpu()
                    tensors[key] = (v if v.dim() == 0 else v.reshape(-1)).clone()
                pieces.setdefault(name_of[model_param], []).append((r[0], r[1], tensors))
        return pieces

    @staticmethod
    def _main_params(opt):
        """(model param, main param, (start, end) in the flattened model param) of every main
        param `opt` holds on this rank: shards under a DistributedOptimizer, whole params under
        megatron's unsharded optimizers."""
        if hasattr(opt, "float16_groups"):
            # Megatron's mixed-precision optimizer on whole params (the layer-wise Muon's: each
            # rank holds the params it was given).
            for model_group, main_group in zip(opt.float16_groups, opt.fp32_from_float16_groups):
                for model_param, main in zip(model_group, main_group):
                    yield model_param, main, (0, model_param.numel())
            for group in opt.fp32_from_fp32_groups:
                for p in group:
                    yield p, p, (0, p.numel())
            return
        if not hasattr(opt, "shard_fp32_groups"):
            for group in opt.optimizer.param_groups:
                for p in group["params"]:
                    yield p, p, (0, p.numel())
            return
        for model_groups, shard_groups in ((opt.model_float16_groups, opt.shard_fp32_from_float16_groups),
                                           (opt.model_fp32_groups, opt.shard_fp32_groups)):
            for model_group, shard_group in zip(model_groups, shard_groups):
                for model_param, shard in zip(model_group, shard_group):
                    r = opt._get_model_param_range_map(model_param)["param"]
                    yield model_param, shard, (r.start, r.end)

if __name__ == "__main__":
    main(MegatronCore)
