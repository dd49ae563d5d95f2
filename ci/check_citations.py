#!/usr/bin/python3
"""Checks that the repository stands alone: every page of docs/ that a
tracked file cites (a path under docs/ ending .md, with or without an
#anchor) exists, and no tracked file cites a design document that is not
in the repository (the routing rule, the op sequences and the tolerances
all live in docs/).

Usage: check_citations.py SOURCE_DIR   exit 0 clean, 1 with one line per bad citation
"""
import os
import re
import subprocess
import sys

# Documents that were never part of the repository; what they held is in docs/.
OUTSIDE = ("SEMANTICS.md", "ARCHITECTURE.md", "VERIFIED.md", "STYLE.md", "../shared/")
# Files allowed to name them: the report's translation of older results'
# citations, and the tests of that translation and of this check.
TRANSLATORS = ("reports/summary.py", "reports/render_html.py", "reports/tests/",
               "docs/reports.md", "ci/check_citations.py")
CITE = re.compile(r"\bdocs/([A-Za-z0-9_./-]+?\.md)")
TEXT = (".cc", ".h", ".cu", ".py", ".md", ".yaml", ".txt", ".cmake", ".in", ".j2", ".sh", ".json")


def tracked(root):
    out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True)
    if out.returncode != 0:  # a source tree without git: walk it
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith((".", "build", "out"))]
            for f in files:
                yield os.path.relpath(os.path.join(d, f), root)
        return
    yield from out.stdout.split()


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    bad = []
    for rel in tracked(root):
        path = os.path.join(root, rel)
        if not rel.endswith(TEXT) and not rel.startswith("ci/") or not os.path.isfile(path):
            continue
        try:
            text = open(path, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if not rel.startswith(TRANSLATORS):
                for name in OUTSIDE:
                    if name in line:
                        bad.append(f"{rel}:{n}: cites {name}, which is not in the repository "
                                   "(cite docs/ instead)")
            for m in CITE.finditer(line):
                target = os.path.join(root, "docs", m.group(1))
                if not os.path.isfile(target):
                    bad.append(f"{rel}:{n}: cites docs/{m.group(1)}, which does not exist")
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
