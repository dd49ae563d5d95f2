#!/usr/bin/python3
"""The headline scenario checks what it says: scenarios/seed_regression_lion.yaml's
resharded cells (saved at dp 2, resumed at dp 4) compare params, main params and
every state key of Muon + Lion (momentum_buffer, exp_avg) bitwise against the
reference, at every step of the uninterrupted and the resumed run, and pass.

Usage: seed_regression_test.py SHARDCHECK_BINARY SCENARIO OUT_DIR FILTER
"""
import json
import os
import shutil
import subprocess
import sys

BITWISE = ("bitwise-params", "bitwise-main_params", "bitwise-state")
GROUPS = {"params", "main_params", "momentum_buffer", "exp_avg"}


def cell_problems(cell_dir):
    r = json.load(open(os.path.join(cell_dir, "result.json")))
    problems = []
    if r["verdict"] != "pass":
        problems.append(f"verdict {r['verdict']}: {r.get('first_failure')}")
    if set(r["groups"]) != GROUPS:
        problems.append(f"groups {r['groups']}, expected {sorted(GROUPS)}")
    checks = {c["name"]: c for c in r["checks"]}
    for name in BITWISE:
        c = checks.get(name)
        if c is None or c["kind"] != "bitwise" or c["verdict"] != "pass":
            problems.append(f"{name}: {c and c['verdict']} (expected a bitwise check that passed)")
    for run in ("uninterrupted", "resumed"):
        diff = r["runs"][run].get("diff", {})
        for group in GROUPS:
            d = diff.get(group)
            if d is None:
                problems.append(f"{run}: no diff of {group}")
            elif any(d["max_abs"]) or any(d["mismatches"]):
                problems.append(f"{run}: {group} differs from the reference")
    return problems


def main():
    binary, scenario, out, filt = sys.argv[1:5]
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([binary, "run", scenario, "--filter", filt, "--quiet", "--out", out],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout[-3000:], p.stderr[-3000:])
        return 1
    agg = json.load(open(os.path.join(out, "results.json")))
    cells = [c["id"] for c in agg["cells"]]
    failures = []
    if not cells or not all("-to-dp" in c for c in cells):
        failures.append(f"expected resharded cells only, got {cells}")
    for cell in cells:
        failures += [f"{cell}: {p}" for p in cell_problems(os.path.join(out, cell))]
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(f"{len(cells)} resharded cells: params, main params, momentum_buffer and exp_avg "
              "bitwise equal to the reference at every step")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
