#!/usr/bin/python3
"""ctest cli.numeric_flags: every numeric flag of every subcommand has a
range (docs/reliability.md, "Numeric flags").

The flags come from each subcommand's --help (CLI11 prints a type: INT,
UINT, FLOAT, NUMBER), so a flag added tomorrow is walked too. Each is
tried with 0, -1 and a huge value on top of arguments that make the
command otherwise valid and quick:
- -1 and the huge value, where refused, exit 2 within seconds with one
  error line that names the flag; -1 is refused by every flag (no numeric
  flag of shardcheck takes a negative number), and so is the huge value by
  every integer flag (each has an upper bound);
- a value that is taken runs to an end (exit 0, 1 or 2) within a minute:
  nothing hangs, nothing spawns 20,000 threads.

Usage: cli_numeric_flags_test.py SHARDCHECK SOURCE_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

BIN, SRC = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="shardcheck_numeric_flags_")
SCENARIO = os.path.join(SRC, "scenarios/ci/oracle_roundtrip.yaml")
SMALL = ["--optimizer", "adamw", "--shapes", "a=8x4,b=5", "--steps", "2"]
HUGE_INT, HUGE_REAL = "99999999999999999999", "1e300"
OPTION = re.compile(r"^\s+(-\w,)?(--[a-z0-9-]+)(,--[a-z0-9-]+)*\s+(INT|UINT|FLOAT|NUMBER)\b(\S*)")
FAILURES = []
fresh_count = 0


def fresh(name):
    global fresh_count
    fresh_count += 1
    return os.path.join(WORK, f"{name}{fresh_count}")


def first_cell():
    out = subprocess.run([BIN, "list", SCENARIO], capture_output=True, text=True).stdout
    return next(line.split()[0] for line in out.splitlines() if "[" in line)


def checkpoint():
    ck = os.path.join(WORK, "ck", "step2")
    subprocess.run([BIN, "train"] + SMALL + ["--save-at", "2", "--save-dir", ck, "--out",
                                             fresh("t")], check=True, capture_output=True)
    return ck


def shapes_file():
    path = os.path.join(WORK, "shapes.txt")
    with open(path, "w") as f:
        f.write("a=64x64\nb=64\n")
    return path


def base_args(sub, ck, cell):
    """Arguments that make `sub` valid and quick, the flag under test aside."""
    return {
        "reference": lambda: SMALL + ["--out", fresh("r")],
        "update-norms": lambda: SMALL,
        "train": lambda: SMALL + ["--out", fresh("t")],
        "launch": lambda: ["--nproc", "1", "--", "true"],
        "run": lambda: [SCENARIO, "--filter", "id=" + cell, "--quiet", "--out", fresh("run")],
        "list": lambda: [SCENARIO],
        "inspect": lambda: [ck, "--no-verify"],
        "ckpt-diff": lambda: [ck, ck],
        "export": lambda: [ck, "--out", fresh("e") + ".safetensors"],
        "gc": lambda: [os.path.dirname(ck), "--dry-run"],
        "selftest": lambda: ["--list"],
        "oracle": lambda: ["--model", "shapes:a=4x4", "--steps", "1", "--out",
                           fresh("o") + ".safetensors"],
        "optimizers": lambda: [],
        "dry": lambda: ["--shapes", shapes_file()],
    }.get(sub, lambda: [])()


def subcommands():
    out = subprocess.run([BIN, "--help"], capture_output=True, text=True).stdout
    part = out.split("Subcommands:")[1]
    return [line.split()[0] for line in part.splitlines() if re.match(r"^  \S", line)]


def numeric_flags(sub):
    out = subprocess.run([BIN, sub, "--help"], capture_output=True, text=True).stdout
    flags = []
    for line in out.splitlines():
        m = OPTION.match(line)
        if m:
            flags.append((m.group(2), m.group(4)))
    return flags


def try_value(sub, flag, kind, value, ck, cell):
    args = [BIN, sub, flag, value] + base_args(sub, ck, cell)
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        FAILURES.append(f"{sub} {flag} {value}: still running after 60 s")
        return
    name = flag[2:]
    said = p.stderr.replace("_", "-")
    refused = p.returncode == 2
    must_refuse = value == "-1" or (value == HUGE_INT and kind in ("INT", "UINT"))
    if must_refuse and not refused:
        FAILURES.append(f"{sub} {flag} {value}: exit {p.returncode}, expected a refusal (2)\n"
                        f"    {p.stderr.strip()[-300:]}")
    elif refused and name not in said:
        FAILURES.append(f"{sub} {flag} {value}: refused without naming {flag}: "
                        f"{p.stderr.strip()[-300:]}")
    elif refused and len(p.stderr.strip().splitlines()) != 1 and sub != "launch":
        FAILURES.append(f"{sub} {flag} {value}: {len(p.stderr.strip().splitlines())} error lines")
    elif p.returncode not in (0, 1, 2):
        FAILURES.append(f"{sub} {flag} {value}: exit {p.returncode}: {p.stderr.strip()[-300:]}")


def main():
    ck, cell = checkpoint(), first_cell()
    seen = set()
    tried = 0
    for sub in subcommands():
        for flag, kind in numeric_flags(sub):
            # A flag shared by several subcommands (the oracle-run flags) is
            # walked once unless its range differs (--threads, --timeout).
            key = (flag, kind, sub if flag in ("--threads", "--timeout", "--jobs") else "")
            if key in seen:
                continue
            seen.add(key)
            huge = HUGE_INT if kind in ("INT", "UINT") else HUGE_REAL
            for value in ("0", "-1", huge):
                try_value(sub, flag, kind, value, ck, cell)
                tried += 1
    subprocess.run(["rm", "-rf", WORK])
    for f in FAILURES:
        print("FAIL:", f)
    print(f"{tried} values on {len(seen)} numeric flags: {tried - len(FAILURES)} passed, "
          f"{len(FAILURES)} failed")
    return 1 if FAILURES or len(seen) < 20 else 0


if __name__ == "__main__":
    sys.exit(main())
