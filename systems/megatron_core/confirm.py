"""Confirms a megatron-core finding's cause (docs/findings.md, "Confirming a cause").

A finding names one spot in megatron-core's source. Its confirmation is a run of the cells it
fails with that spot patched, in a copy of the installed release, and nothing else changed:

    .venv-torch/bin/python systems/megatron_core/confirm.py --version 0.19.2 \\
        --patch megatron-core-load-missing-step-key --patch megatron-core-shared-step-tensor \\
        --scenario S.yaml --out D [--shardcheck build/shardcheck]

copies .venv-torch/megatron-core/<version> to D/megatron-core-patched, applies each
systems/megatron_core/findings/<anchor>@<version>.patch there (`patch -p1`; a patch that does
not apply is an error), and runs `shardcheck run S.yaml --out D/run` with the adapter pointed at
the copy (SHARDCHECK_MEGATRON_CORE_ROOT). It exits with shardcheck's code: 0 when every cell
passes. The installed releases are never touched.
"""

import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def patch_path(anchor, version):
    return os.path.join(HERE, "findings", f"{anchor}@{version}.patch")


def patched_copy(version, anchors, out_dir):
    """A copy of megatron-core `version` with the findings' patches applied; its path."""
    src = os.path.join(sys.prefix, "megatron-core", version)
    if not os.path.isdir(src):
        raise SystemExit(f"confirm: megatron-core {version} is not installed at {src} (run ci/setup-systems)")
    dst = os.path.join(out_dir, "megatron-core-patched")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    for anchor in anchors:
        path = patch_path(anchor, version)
        if not os.path.isfile(path):
            raise SystemExit(f"confirm: no patch {path}")
        r = subprocess.run(["patch", "-p1", "--forward", "--batch", "-d", dst, "-i", path],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"confirm: {path} does not apply to megatron-core {version}: "
                             f"{(r.stdout + r.stderr).strip().splitlines()[-1]}")
    return dst


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", required=True, help="the megatron-core release (0.18.2, 0.19.2)")
    ap.add_argument("--patch", action="append", default=[], help="a finding's anchor in docs/findings.md")
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shardcheck", default=os.path.join(ROOT, "build", "shardcheck"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    root = patched_copy(args.version, args.patch, args.out)
    env = dict(os.environ, SHARDCHECK_MEGATRON_CORE_ROOT=root)
    print(f"confirm: megatron-core {args.version} with {', '.join(args.patch) or 'no patch'}", flush=True)
    r = subprocess.run([args.shardcheck, "run", args.scenario, "--out", os.path.join(args.out, "run")], env=env)
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
