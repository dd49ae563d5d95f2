"""Snapshots in shardcheck's layout (docs/systems.md, "What a run writes").

A snapshot is one safetensors file of the whole model-space state after a
step: `param.<name>` (the model param, its model dtype), `main_param.<name>`
(the fp32 main param, bf16 models only) and `state.<key>.<name>` for every
state key the system's optimizer keeps for that param, under the system's
own names (torch.optim's Adam: `step`, `exp_avg`, `exp_avg_sq`). Written
atomically: a temporary file in the same folder, then a rename.
"""

import os

FORMAT = "shardcheck-snapshot/1"


def snapshot_name(step, after_load=False):
    """step_0004.safetensors after update 4; loaded_0004.safetensors right after loading step 4."""
    return f"{'loaded' if after_load else 'step'}_{step:04d}.safetensors"


def write_snapshot(path, tensors, metadata):
    """Writes {key: tensor} (any device; copied to contiguous CPU) with string metadata."""
    from safetensors.torch import save_file  # imports torch: only once the system is up

    cpu = {k: v.detach().to("cpu").contiguous() for k, v in sorted(tensors.items())}
    meta = {"format": FORMAT}
    meta.update({k: str(v) for k, v in metadata.items()})
    tmp = f"{path}.tmp{os.getpid()}"
    save_file(cpu, tmp, metadata=meta)
    os.replace(tmp, path)
