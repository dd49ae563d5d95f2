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
# The reds of failing rows and boxes: a failing slot, a failed group or check row, a red figure.
FAILING_REDS = [np.array(c) / 255.0 for c in ((0xff, 0xcd, 0xd2), (0xff, 0xeb, 0xee), (0xb7, 0x1c, 0x1c),
                                              (0xef, 0x9a, 0x9a))]
SCREEN = (1280, 800)


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


def pixels_like(img, color, tol=0.015) -> int:
    """How many pixels of `img` are within `tol` of `color` in every channel (the
    default is tighter than 4/255: light pinks sit close to the greys)."""
    return int((np.abs(img - color).max(axis=2) < tol).sum())


def first_screen(binary, tmp_path, html_path, name):
    """A 1280x800 screenshot of the top of a page, as an RGB array."""
    png = tmp_path / f"{name}.png"
    proc = run_chromium(binary, tmp_path, "file://" + html_path, f"--screenshot={png}",
                        f"--window-size={SCREEN[0]},{SCREEN[1]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    img = matplotlib.image.imread(str(png))[..., :3]
    assert img.shape[:2] == (SCREEN[1], SCREEN[0])
    return img


def test_first_failure_is_on_the_first_screen(chromium, tmp_path):
    out = synth.write_results(str(tmp_path / "results"), synth.one_failing())
    from conftest import run_report
    run_report(out)
    html = open(os.path.join(out, "report.html"), encoding="utf-8").read()
    probe = ("<script>for (const id of ['first-failure', 'answers'])"
             " document.body.setAttribute('data-bottom-' + id,"
             " document.getElementById(id).getBoundingClientRect().bottom)</script>")
    copy = tmp_path / "probe.html"                    # the report itself stays script-free
    copy.write_text(html.replace("</body>", probe + "</body>"), encoding="utf-8")
    proc = run_chromium(chromium, tmp_path, f"file://{copy}", "--dump-dom",
                        f"--window-size={SCREEN[0]},{SCREEN[1]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    bottoms = dict(re.findall(r'data-bottom-([\w-]+)="([\d.]+)"', proc.stdout))
    assert set(bottoms) == {"first-failure", "answers"}, proc.stdout[:2000]
    assert 0 < float(bottoms["first-failure"]) <= SCREEN[1]
    assert float(bottoms["answers"]) <= SCREEN[1]     # the three answers fit on the first screen
    block = re.search(r'<p id="first-failure".*?</p>', proc.stdout, re.S).group(0)
    text = " ".join(re.sub(r"<[^>]+>", "", block).split())
    for part in ("lion.dp_zero_gather_scatter.dp2-to-dp3.bf16.oracle-gpt-tiny", "step 6",
                 "tensor state.exp_avg.layers.1.fc1.weight", "check resumed-vs-reference-bitwise-state"):
        assert part in text, text
    assert not console_lines(proc.stderr), console_lines(proc.stderr)


def test_passing_first_screen_has_no_red(chromium, tmp_path):
    from conftest import run_report
    shots = {}
    for name, cells in (("passing", synth.all_passing()), ("failing", synth.one_failing())):
        out = synth.write_results(str(tmp_path / name), cells)
        run_report(out)
        shots[name] = first_screen(chromium, tmp_path, os.path.join(out, "report.html"), name)
    assert pixels_like(shots["passing"], PASS_GREEN) > 200          # the green slots are on screen
    assert pixels_like(shots["passing"], FAIL_RED) == 0
    for red in FAILING_REDS:
        assert pixels_like(shots["passing"], red) == 0, red * 255
    # the same check sees the reds of a failing report's first screen
    assert pixels_like(shots["failing"], FAIL_RED) > 200
    assert sum(pixels_like(shots["failing"], red) for red in FAILING_REDS) > 200


def test_console_check_catches_a_script_error(chromium, tmp_path):
    """The console check above can fail: a page that throws is caught."""
    page = tmp_path / "bad.html"
    page.write_text('<html><body><p id="matrix">x</p><script>throw new Error("boom")</script></body></html>')
    proc = run_chromium(chromium, tmp_path, f"file://{page}", "--dump-dom")
    assert any("Uncaught Error: boom" in line for line in console_lines(proc.stderr)), proc.stderr[-2000:]
