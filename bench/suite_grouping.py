#!/usr/bin/env python3
"""What running a gtest binary's tests one process per suite saves over one
process per test, as ctest ran them before cmake/suite_gtests.cmake
(docs/performance.md, "The matrix's own speed").

For each binary given (default: the spec, testing, distributed and
kernels test binaries of build/), runs every test in a process of its own,
then every suite in a process of its own, one after the other in this one
process, and prints the wall time of each and their ratio. Both run the
same tests; only the number of libtorch start-ups differs.

usage: bench/suite_grouping.py [BINARY...]
"""
import json
import os
import subprocess
import sys
import tempfile
import time


def listing(binary):
    """{suite: [test names]} of `binary` (gtest's JSON listing)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([binary, "--gtest_list_tests", f"--gtest_output=json:{f.name}"],
                       check=True, capture_output=True)
        data = json.load(open(f.name))
    return {s["name"]: [t["name"] for t in s.get("testsuite", [])] for s in data["testsuites"]}


def timed(binary, filters):
    started = time.monotonic()
    for flt in filters:
        p = subprocess.run([binary, f"--gtest_filter={flt}"], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"{binary} --gtest_filter={flt} failed:\n{p.stdout[-2000:]}")
    return time.monotonic() - started


def main():
    binaries = sys.argv[1:] or [os.path.join("build", b) for b in
                                ("spec_test", "testing_test", "distributed_test", "kernels_test")]
    total_each = total_suite = 0.0
    tests = suites = 0
    for b in binaries:
        found = listing(b)
        each = [f"{s}.{t}" for s, names in found.items() for t in names]
        per_suite = [f"{s}.*" for s, names in found.items() if names]
        t_each, t_suite = timed(b, each), timed(b, per_suite)
        print(f"{b}: {len(each)} tests, one process each {t_each:.1f} s; "
              f"{len(per_suite)} suites, one process each {t_suite:.1f} s; ratio {t_each / t_suite:.2f}")
        total_each += t_each
        total_suite += t_suite
        tests += len(each)
        suites += len(per_suite)
    print(f"all: {tests} tests {total_each:.1f} s, {suites} suites {total_suite:.1f} s: "
          f"{total_each / total_suite:.2f}x, {total_each - total_suite:.1f} s saved")


if __name__ == "__main__":
    main()
