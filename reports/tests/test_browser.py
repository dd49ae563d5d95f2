"""The report in a real browser: Debian's headless Chromium.

Skips only when Chromium is not installed AND the CI environment variable is
unset (or "0"/"false"/"no"); under CI a missing Chromium fails the test.
"""
import os
import re
import shutil
import subprocess

import matplotlib.image
import numpy as np
import pytest

import synth

pytestmark = pytest.mark.browser
TIMEOUT_S = 120
CONSOLE = re.compile(r"Uncaught|ERROR:CONSOLE|:CONSOLE[:(]|CONSOLE\(")
FAIL_RED = np.array([0xc6, 0x28, 0x28]) / 255.0      # the FAIL badge
PASS_GREEN = np.array([0xc8, 0xe6, 0xc9]) / 255.0    # a passing matrix slot


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="module")
def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if in_ci():
        pytest.fail("chromium is not installed but CI is set: ci/setup installs Debian's chromium")
    pytest.skip("chromium is not installed (apt-get install chromium); under CI=true this fails")


def run_chromium(binary, tmp_path, url, *args) -> subprocess.CompletedProcess:
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-dev-shm-usage",
           f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0", *args, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)


def console_lines(stderr: str):
    """Console messages and uncaught exceptions that Chromium logged."""
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("browser") / "results")
    cells = synth.realistic()
    synth.write_results(out, cells, bench={"micro.json": synth.bench_doc()})
    from conftest import run_report
    run_report(out)
    return out, cells


def test_screenshot_is_not_blank(chromium, report, tmp_path):
    out, _ = report
    png = tmp_path / "shot.png"
    proc = run_chromium(chromium, tmp_path, "file://" + os.path.join(out, "report.html"),
                        f"--screenshot={png}", "--window-size=1400,2000")
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    img = matplotlib.image.imread(str(png))[..., :3]
    assert img.shape[:2] == (2000, 1400)
    assert img.std() > 0.05, "the screenshot is (nearly) one colour"
    not_white = (img < 0.9).any(axis=2).mean()
    assert not_white > 0.03, f"only {not_white:.1%} of the page is not white"
    # the CSS applied: the red FAIL badge and green pass slots are on screen
    assert (np.abs(img - FAIL_RED).max(axis=2) < 0.04).sum() > 200
    assert (np.abs(img - PASS_GREEN).max(axis=2) < 0.04).sum() > 200
    assert not console_lines(proc.stderr), console_lines(proc.stderr)


def test_dom_has_the_matrix_and_no_console_errors(chromium, report, tmp_path):
    out, cells = report
    proc = run_chromium(chromium, tmp_path, "file://" + os.path.join(out, "report.html"), "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert '<table id="matrix" class="matrix">' in dom
    for c in cells:
        assert f'id="{c["entry"]["id"]}"' in dom
    assert dom.count("<svg") >= 6
    assert not console_lines(proc.stderr), console_lines(proc.stderr)


def test_console_check_catches_a_script_error(chromium, tmp_path):
    """The console check above can fail: a page that throws is caught."""
    page = tmp_path / "bad.html"
    page.write_text('<html><body><p id="matrix">x</p><script>throw new Error("boom")</script></body></html>')
    proc = run_chromium(chromium, tmp_path, f"file://{page}", "--dump-dom")
    assert any("Uncaught Error: boom" in line for line in console_lines(proc.stderr)), proc.stderr[-2000:]
