#!/usr/bin/python3
"""Checks that every #include "folder/..." follows the layering the folder
READMEs give: each folder may include only the folders listed for it
below (tests, *_test.cc, may include anything: only tests and the harness see
both the reference and the distributed side).

Usage: check_layering.py SOURCE_DIR     exit 0 clean, 1 with one line per violation
"""
import os
import re
import sys

# folder -> folders its code may include (itself always).
ALLOWED = {
    "spec": [],
    "kernels": ["spec"],
    "optimizers": ["spec", "kernels"],
    "reference": ["spec", "kernels", "optimizers"],
    "distributed": ["spec", "kernels", "optimizers"],
    "testing": ["spec", "kernels", "optimizers", "reference"],
    "harness/models": ["spec", "testing"],
    "harness/scale": ["spec", "testing"],
    "harness/cell": ["spec", "kernels", "optimizers", "reference", "distributed", "testing", "harness/models"],
    "harness/matrix": ["spec", "distributed", "testing", "harness/models", "harness/cell",
                       "harness/launch", "harness/systems"],
    "harness/launch": ["spec", "distributed", "testing"],
    "harness/systems": ["spec", "distributed", "testing", "harness/launch"],
    "harness/detection": ["spec", "distributed", "testing", "harness/models", "harness/cell",
                          "harness/matrix", "harness/systems"],
    "fuzz": ["spec", "distributed", "testing", "harness/matrix", "harness/systems"],
    "bench": ["spec", "kernels", "optimizers", "reference", "distributed", "testing",
              "harness/models", "harness/cell"],
    "harness/cli": ["spec", "kernels", "reference", "distributed", "testing", "harness/models", "harness/cell",
                    "harness/matrix", "harness/launch", "harness/detection", "harness/systems",
                    "harness/scale"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    """The ALLOWED key a project path belongs to, or None."""
    for key in sorted(ALLOWED, key=len, reverse=True):
        if path == key or path.startswith(key + "/"):
            return key
    return None


def main():
    root = sys.argv[1]
    violations, files = [], 0
    for key in ALLOWED:
        base = os.path.join(root, key)
        for dirpath, _, names in os.walk(base):
            for name in sorted(names):
                if not name.endswith((".h", ".cc", ".cu", ".cuh")) or name.endswith("_test.cc"):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if folder_of(rel) != key:
                    continue  # a sub-folder with rules of its own
                files += 1
                for n, line in enumerate(open(os.path.join(dirpath, name), encoding="utf-8"), 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = folder_of(m.group(1))
                    if target is None or target == key or target in ALLOWED[key]:
                        continue
                    violations.append(f"{rel}:{n}: includes {m.group(1)} ({key}/ may include "
                                      f"{', '.join(ALLOWED[key]) or 'only itself'})")
    for v in violations:
        print(v)
    print(f"{files} files checked, {len(violations)} layering violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
