#!/usr/bin/python3
"""Runs the Python reader of docs/checkpoint-format.md, verbatim, on real checkpoints.

Usage: checkpoint_reader_test.py SHARDCHECK_BINARY CHECKPOINT_FORMAT_MD

Extracts the code block between <!-- python-reader:begin --> and
<!-- python-reader:end -->, saves checkpoints of all four sharding types
(single process, and dp 3 through `shardcheck launch`), and checks that
read_checkpoint() reconstructs, byte for byte, every fp32 main param and
state tensor that `shardcheck export` writes (its final.safetensors parsed
here with the standard library). Exit 0 only if every case matches.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

TYPES = ["dp_reshardable", "fully_reshardable", "dp_zero_gather_scatter",
         "fully_sharded_model_space"]
# (optimizer, dtype, dp, bucket size): bf16 Muon (layer-wise state, main_param),
# fp32 Adam (two state keys, no main_param), several buckets, and dp 3.
CASES = [("muon_lion", "bf16", 1, 5000), ("adam", "fp32", 1, 30000), ("muon_adam", "bf16", 3, 5000)]


def load_reader(doc_path):
    text = open(doc_path, encoding="utf-8").read()
    found = re.search(r"<!-- python-reader:begin -->\s*```python\n(.*?)```\s*<!-- python-reader:end -->",
                      text, re.S)
    if not found:
        raise SystemExit(f"{doc_path}: no python-reader block between the markers")
    namespace = {}
    exec(compile(found.group(1), f"{doc_path}:python-reader", "exec"), namespace)
    return namespace["read_checkpoint"]


def read_safetensors(path):
    """{name: (dtype, shape, bytes)} and the metadata."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    return {k: (e["dtype"], e["shape"], data[base + e["data_offsets"][0]:base + e["data_offsets"][1]])
            for k, e in header.items()}, meta


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-3000:]}")


def check(read_checkpoint, binary, tmp, opt, dtype, dp, bucket, sharding):
    name = f"{opt}-{dtype}-dp{dp}-{sharding}"
    ckpt, export = os.path.join(tmp, name), os.path.join(tmp, name + ".safetensors")
    train = [binary, "train", "--optimizer", opt, "--model", "gpt-tiny", "--steps", "3", "--dtype", dtype,
             "--bucket-size", str(bucket), "--save-at", "2", "--save-dir", ckpt, "--sharding-type", sharding,
             "--out", os.path.join(tmp, name + "-out")]
    run([binary, "launch", "--nproc", str(dp), "--timeout", "120", "--"] + train if dp > 1 else train)
    run([binary, "export", ckpt, "--out", export])
    want, meta = read_safetensors(export)
    got = read_checkpoint(ckpt)
    compared, bad = 0, []
    for param, kinds in got.items():
        for kind, data in kinds.items():
            key = (("main_param." if dtype == "bf16" else "param.") + param if kind == "param"
                   else f"state.{kind}.{param}")
            if key not in want:
                bad.append(f"{key} not in the export")
                continue
            compared += 1
            if want[key][0] != "F32" or want[key][2] != data:
                bad.append(f"{key}: bytes differ ({len(data)} read, {len(want[key][2])} exported)")
    # Everything the export holds besides the model params must have been reconstructed.
    expected = sum(1 for k in want if not (dtype == "bf16" and k.startswith("param.")))
    if compared != expected:
        bad.append(f"reconstructed {compared} tensors, the export holds {expected}")
    if meta.get("step") != "2":
        bad.append(f"export step {meta.get('step')}, expected 2")
    print(f"{name:45s} {compared:3d} tensors {'ok' if not bad else 'MISMATCH: ' + '; '.join(bad[:5])}")
    return not bad


def main():
    binary, doc = sys.argv[1], sys.argv[2]
    read_checkpoint = load_reader(doc)
    failures = total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for opt, dtype, dp, bucket in CASES:
            for sharding in TYPES:
                total += 1
                try:
                    ok = check(read_checkpoint, binary, tmp, opt, dtype, dp, bucket, sharding)
                except Exception as e:  # a failed run or a reader error is a failure, named
                    print(f"{opt}-{dtype}-dp{dp}-{sharding}: ERROR {e}")
                    ok = False
                failures += not ok
    print(f"{total - failures} passed, {failures} failed")
    return 1 if failures or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
