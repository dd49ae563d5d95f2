"""ci/pr-report end to end, in a throwaway repository made from this checkout.

The repository gets two commits: the checkout as it is (the base) and a
documentation change (the pull request). First `ci/pr-report HEAD~1` must
pass and write a report with no red in it. Then a bug is put into the
working tree, uncommitted (the DistributedOptimizer's step counter skips a
step after step 2, so Adam's bias correction goes wrong from step 3): the
same command must exit 1 and the report must name the failing cell, its
step, tensor and check at the top.

Both builds of each run compile only the `shardcheck` target; with the
ccache settings of CMakeLists.txt they mostly hit the cache filled by the
project's own build. Run by ctest as report.pr_report (/usr/bin/python3).
"""
import html
import json
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT_S = 1500
SCENARIO = """\
name: pr-report-test
description: Adam and Lion, dp 2 saved at step 3 and resumed at dp 3, oracle gradients.
model: oracle:mixed-small
dtype: fp32
optimizer: [{name: adam}, {name: lion}]
sharding_type: dp_reshardable
dp: 2
resume:
  - {save_at: 3, dp: 3}
steps: 6
bucket_size: 1000
"""
STEP_LINE = "  ++step_;\n  // 1. Reduce the gradients"
BUGGY_STEP_LINE = "  step_ += step_ == 2 ? 2 : 1;\n  // 1. Reduce the gradients"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}


def git(repo, *args):
    subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True,
                   env={**os.environ, **GIT_ENV})


def copy_checkout(dest):
    """This checkout's tracked and untracked-but-not-ignored files, as on disk."""
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], check=True, capture_output=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = os.path.join(ROOT, rel)
        if not os.path.isfile(src):
            continue                    # deleted in the working tree
        os.makedirs(os.path.dirname(os.path.join(dest, rel)) or dest, exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel))


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("pr") / "repo")
    os.makedirs(path)
    copy_checkout(path)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    with open(os.path.join(path, "docs", "reports.md"), "a") as f:
        f.write("\nA documentation change.\n")
    git(path, "commit", "-q", "-am", "a documentation change")
    with open(os.path.join(path, "pr-scenario.yaml"), "w") as f:
        f.write(SCENARIO)
    yield path
    shutil.rmtree(path, ignore_errors=True)   # the builds are large; kept only on a crash


def pr_report(repo):
    proc = subprocess.run([os.path.join(repo, "ci", "pr-report"), "HEAD~1",
                           "--scenario", "pr-scenario.yaml"],
                          cwd=repo, capture_output=True, text=True, timeout=TIMEOUT_S)
    print(proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def body_of(report_html):
    """The report without its <style> block (CSS names every class)."""
    return re.sub(r"<style>.*?</style>", "", report_html, flags=re.S)


def first_failing_cell(results_dir):
    agg = json.loads(read(os.path.join(results_dir, "results.json")))
    failing = [c for c in agg["cells"] if c["verdict"] == "fail"]
    return failing[0] if failing else None


def test_a_passing_pull_request_gives_a_report_with_no_red(repo):
    proc = pr_report(repo)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = os.path.join(repo, "out", "pr")
    report = read(os.path.join(out, "report.html"))
    summary = read(os.path.join(out, "summary.md"))
    base = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD~1"],
                          capture_output=True, text=True, check=True).stdout.strip()
    head = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert head in report and base in report, "the report names both commits"
    assert first_failing_cell(os.path.join(out, "head-results")) is None
    body = body_of(report)
    red = re.findall(r'class="[^"]*\b(v-fail|v-error|fail|nz)\b[^"]*"', body)
    assert not red, f"red classes in a passing report: {sorted(set(red))}"
    nothing_failed = re.search(r'<p id="first-failure" class="ok">([^<]*)', body)
    assert nothing_failed and "Nothing failed" in nothing_failed.group(1), "the top does not say all passed"
    assert "pr-report-test" in report
    assert summary.strip(), "summary.md is empty"


def test_a_bug_in_the_working_tree_is_named_at_the_top(repo):
    path = os.path.join(repo, "distributed", "distrib_optimizer.cc")
    source = read(path)
    assert STEP_LINE in source, "the step counter line moved: update STEP_LINE"
    with open(path, "w") as f:
        f.write(source.replace(STEP_LINE, BUGGY_STEP_LINE))
    proc = pr_report(repo)
    assert proc.returncode == 1, proc.stderr[-2000:]
    out = os.path.join(repo, "out", "pr")
    assert first_failing_cell(os.path.join(out, "base-results")) is None
    cell = first_failing_cell(os.path.join(out, "head-results"))
    assert cell is not None, "the buggy step counter was not caught"
    ff = cell["first_failure"]
    assert ff["step"] == 3, ff
    report = read(os.path.join(out, "report.html"))
    body = body_of(report)
    top = body.find('id="first-failure" class="fail"')
    assert top >= 0, "no first-failure block"
    assert top < body.find('id="matrix"'), "the first failure is not above the matrix"
    block = html.unescape(re.sub(r"<[^>]+>", " ", body[top:top + 4000]))
    for want in (cell["id"], str(ff["step"]), ff["tensor"], ff["check"]):
        assert want in block, f"{want!r} not in the first-failure block: {block[:600]}"
    summary = read(os.path.join(out, "summary.md"))
    assert cell["id"] in summary.split("\n\n")[0] + summary[:1500]
