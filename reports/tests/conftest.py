"""pytest setup for the report tests: import paths, the `browser` marker, and
fixtures that write synthetic results (synth.py) and run make_report.py on them."""
import os
import subprocess
import sys

import pytest

sys.dont_write_bytecode = True
TESTS = os.path.dirname(os.path.abspath(__file__))
REPORTS = os.path.dirname(TESTS)
for p in (REPORTS, TESTS):
    if p not in sys.path:
        sys.path.insert(0, p)

import synth  # noqa: E402

MAKE_REPORT = os.path.join(REPORTS, "make_report.py")


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: renders the report in headless Chromium")


def run_report(*args, check=True) -> subprocess.CompletedProcess:
    """Runs make_report.py with this interpreter; returns the finished process."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, MAKE_REPORT, *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"make_report.py {args} exited {proc.returncode}:\n{proc.stderr}")
    return proc


class Report:
    """A synthetic results dir with its generated HTML and Markdown."""

    def __init__(self, out_dir, cells, baseline_dir=None, bench=None, extra_args=(), **write_kw):
        self.dir = str(out_dir)
        synth.write_results(self.dir, cells, bench=bench, **write_kw)
        self.html_path = os.path.join(self.dir, "report.html")
        self.md_path = os.path.join(self.dir, "summary.md")
        args = [self.dir, "--markdown", self.md_path, *extra_args]
        if baseline_dir:
            args += ["--baseline", baseline_dir]
        self.proc = run_report(*args)
        with open(self.html_path, encoding="utf-8") as f:
            self.html = f.read()
        with open(self.md_path, encoding="utf-8") as f:
            self.md = f.read()

    def section(self, cell_id: str) -> str:
        """The HTML of one cell's section."""
        start = self.html.index(f'id="{cell_id}"')
        return self.html[start:self.html.index("</section>", start)]


@pytest.fixture
def make_report(tmp_path):
    """make_report(cells, name="r", **kw) -> Report, in a fresh folder under tmp_path
    (keywords that Report does not take, e.g. optimizer_order, go to synth.write_results)."""
    def make(cells, name="r", **kw):
        return Report(tmp_path / name, cells, **kw)
    return make


@pytest.fixture(scope="session")
def large_report(tmp_path_factory):
    """The 400-cell set (4 failing), generated once for the session."""
    return Report(tmp_path_factory.mktemp("large"), synth.large(400, failing=4))
