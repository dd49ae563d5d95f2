#!/usr/bin/python3
"""Reads `shardcheck reference` output with the Python standard library only.

Usage: reference_header_test.py SHARDCHECK_BINARY
Runs the reference for every named optimizer setup of the registry
(`shardcheck optimizers --names`) in fp32 and bf16 and parses each
final.safetensors header by hand (8-byte length, JSON, data offsets).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

DTYPE_SIZE = {"F32": 4, "BF16": 2, "I64": 8}


def read_header(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0, f"{path}: header length {n} is not a multiple of 8"
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    end = 0
    for name, e in header.items():
        numel = 1
        for d in e["shape"]:
            numel *= d
        begin, stop = e["data_offsets"]
        assert stop - begin == numel * DTYPE_SIZE[e["dtype"]], name
        end = max(end, stop)
    assert 8 + n + end == len(data), f"{path}: {len(data) - 8 - n - end} stray bytes"
    return header, meta


def main():
    binary = sys.argv[1]
    failures = 0
    setups = subprocess.run([binary, "optimizers", "--names"], check=True, stdout=subprocess.PIPE,
                            text=True).stdout.split()
    assert setups, "the registry lists no setups"
    with tempfile.TemporaryDirectory() as tmp:
        for opt in setups:
            for dtype in ["fp32", "bf16"]:
                out = os.path.join(tmp, f"{opt}-{dtype}")
                subprocess.run([binary, "reference", "--optimizer", opt, "--model", "gpt-tiny",
                                "--steps", "2", "--dtype", dtype, "--out", out], check=True,
                               stdout=subprocess.DEVNULL)
                header, meta = read_header(os.path.join(out, "final.safetensors"))
                config = json.load(open(os.path.join(out, "config.json")))
                keys = {k for child in config["optimizer"]["children"] for k in
                        (s["key"] for s in child["schema"])}
                state_keys = {name.split(".")[1] for name in header if name.startswith("state.")}
                params = [n for n in header if n.startswith("param.")]
                mains = [n for n in header if n.startswith("main_param.")]
                ok = (state_keys == keys and meta.get("step") == "2"
                      and len(params) == len(config["model"]["params"])
                      and len(mains) == (len(params) if dtype == "bf16" else 0)
                      and all(header[p]["dtype"] == ("BF16" if dtype == "bf16" else "F32")
                              for p in params))
                print(f"{opt:10s} {dtype}: {len(header)} tensors, state keys {sorted(state_keys)}"
                      f" {'ok' if ok else 'MISMATCH'}")
                failures += not ok
    print(f"{2 * len(setups) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
