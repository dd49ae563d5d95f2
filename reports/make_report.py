#!/usr/bin/python3
"""make_report.py: Turns a shardcheck results directory into a self-contained HTML report and a Markdown summary.

Reads only the JSON files of docs/results-schema.md (RESULTS_DIR/results.json,
RESULTS_DIR/<cell>/result.json) and, for the performance section, Google
Benchmark JSON (--bench DIR/*.json, by default RESULTS_DIR/bench/*.json) and
bench/scale.py's dry-mode file (--scale FILE, by default RESULTS_DIR/scale/scale.json
when it exists) and, for the detection-power section, RESULTS_DIR/selftest.json when it exists. Run it
with Debian's /usr/bin/python3 (python3-matplotlib, python3-jinja2).

Exit status: 0 when the report was written, whatever the verdict; 2 when an
input file is unreadable or malformed (one line on stderr naming the file
and the key); 1 when the output cannot be written.
"""
import argparse
import os
import sys
import time

sys.dont_write_bytecode = True   # never leave __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench import load_bench, load_bench_dir  # noqa: E402
from bench_scale import default_scale_path, load_scale  # noqa: E402
from detection import load_detection  # noqa: E402
from headline import headline  # noqa: E402
from load import InputError, load_results  # noqa: E402
import render_html  # noqa: E402
import render_markdown  # noqa: E402

EPILOG = """\
The HTML opens from disk: inline CSS and SVG, no script, no network. It shows
the verdict (PASS only when some cell ran its checks; NOTHING CHECKED when
every cell that finished was skipped; INTERRUPTED, with the cells not run,
when a signal stopped the run) and environment; the first failure, the changes against the
baseline and what was not covered; the expected failures (xfail: failed as
declared, does not fail the run; xpass: passed though expected to fail,
fails the run) with their reasons; a matrix ([system x] optimizer x
sharding type by DP size / resume plan) linking to one section per cell:
an external system's versions, adapter runs and comparisons with its own
single-device run, loss curves (with
the lr schedule on a second axis when it is not constant), grad norms,
log-scale |diff| per tensor group against the tolerance bands, per-group
max abs and the figures its checks use (red only where a check failed; a
tolerance check's deciding figure against its bound), the checks, the first
failing step and tensor, and memory per rank.
With --baseline, cells are matched by id and changes are flagged. See
docs/reports.md.

releases compared: when an external system appears at two or more releases
(system megatron-core@0.18.2 and megatron-core@0.19.2), both outputs pair
its cells across releases (same id without the @<version>) in one table per
system, with each release's verdict and first failure and whether the row
is the same, fixed, regressed or changed.

performance: the Google Benchmark JSON files DIR/*.json of --bench DIR (for
example out/bench, which ci/bench writes; ci/demo passes it when it exists),
or without --bench those of RESULTS_DIR/bench/*.json. Nothing else is
searched: without --bench, out/bench is not read. The section is left out
when there is no file; a --bench DIR that is not a folder is an error (exit
2). The baseline's benchmarks are always OTHER_RESULTS_DIR/bench/*.json.

cost at scale: the JSON file of --scale FILE (bench/scale.py writes
out/scale/scale.json; ci/demo passes it when it exists), or without --scale
RESULTS_DIR/scale/scale.json when it exists. It adds "At Megatron scale (dry
mode)" to the performance section's "How cost grows" part (the section shows
for it alone, without benchmarks): the checkpoint engine's layout, save
plan, metadata and resharded-load plan for real-scale param lists with no
tensor data, the slopes fitted over each sweep's sizes (those above the
file's limit flagged), log-log plots and the headline runs. A --scale FILE
that is missing or malformed is an input error (exit 2).

detection power: RESULTS_DIR/selftest.json, which `shardcheck selftest --out
RESULTS_DIR` writes beside results.json (ci/demo does). When it exists the
report gets a "Detection power" section (failpoints caught out of tried, the
clean run, one row per failpoint) and the Markdown one line; without it
neither says anything about detection. A malformed selftest.json is an input
error (exit 2).

exit status: 0 the report was written (whatever the verdict); 2 an input file
is unreadable or malformed (one line naming the file and the key); 1 an
output file cannot be written.

examples:
  reports/make_report.py out/ci
  reports/make_report.py out/ci --baseline out/main --markdown out/ci/summary.md
  reports/make_report.py out/demo --bench out/bench
  reports/make_report.py out/demo --scale out/scale/scale.json
"""


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="make_report.py", description=__doc__.split("\n")[0].split(": ", 1)[1],
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results_dir", metavar="RESULTS_DIR", help="folder written by `shardcheck run ... --out DIR`")
    ap.add_argument("--baseline", metavar="OTHER_RESULTS_DIR",
                    help="another results folder to compare with, cell by cell (matched by id)")
    ap.add_argument("--bench", metavar="DIR",
                    help="Google Benchmark JSON files DIR/*.json for the performance section "
                         "(default: RESULTS_DIR/bench; ci/bench writes out/bench)")
    ap.add_argument("--scale", metavar="FILE",
                    help="bench/scale.py's dry-mode JSON for the performance section's cost at scale "
                         "(default: RESULTS_DIR/scale/scale.json when it exists; bench/scale.py writes "
                         "out/scale/scale.json)")
    ap.add_argument("--out", metavar="FILE", help="HTML file to write (default: RESULTS_DIR/report.html)")
    ap.add_argument("--markdown", metavar="FILE",
                    help=f"also write a GitHub-flavoured summary for a PR comment (< {render_markdown.LIMIT} chars)")
    ap.add_argument("--html-link", metavar="URL",
                    help="where the Markdown links to the HTML report (default: the --out file name)")
    ap.add_argument("--passing-plots", type=int, default=60, metavar="N",
                    help="draw plots for at most N passing cells (default 60; failing cells come first)")
    ap.add_argument("--failing-plots", type=int, default=200, metavar="N",
                    help="draw plots for at most N failing or errored cells (default 200)")
    ap.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    out = args.out or os.path.join(args.results_dir, "report.html")
    try:
        results = load_results(args.results_dir)
        baseline = load_results(args.baseline) if args.baseline else None
        benchmarks = (load_bench_dir(args.bench, required=True) if args.bench
                      else load_bench(args.results_dir))
        baseline_benchmarks = load_bench(args.baseline) if args.baseline else []
        detection = load_detection(args.results_dir, results.aggregate["environment"].get("commit"))
        scale_path = args.scale or default_scale_path(args.results_dir)
        scale = load_scale(scale_path) if scale_path else None
    except InputError as e:
        print(f"make_report.py: error: {e}", file=sys.stderr)
        return 2
    options = render_html.Options(passing_plots=max(0, args.passing_plots),
                                  failing_plots=max(0, args.failing_plots),
                                  html_name=os.path.basename(out),
                                  bench_dir=args.bench.rstrip("/") if args.bench else "bench")
    html = render_html.render(results, baseline, benchmarks, options, baseline_benchmarks, detection, scale=scale)
    outputs = [(out, html)]
    if args.markdown:
        outputs.append((args.markdown,
                        render_markdown.render(results, baseline, args.html_link or os.path.basename(out),
                                               benchmarks=benchmarks, baseline_benchmarks=baseline_benchmarks,
                                               detection=detection)))
    for path, text in outputs:
        try:
            _write(path, text)
        except OSError as e:
            print(f"make_report.py: error: cannot write {path}: {e.strerror or e}", file=sys.stderr)
            return 1
    if not args.quiet:
        print(f"make_report.py: {headline(results).title}: {len(results.cells)} cells -> {out} "
              f"({len(html.encode()) / 1e6:.2f} MB, {time.monotonic() - started:.1f} s)"
              + (f", {args.markdown}" if args.markdown else ""))
    return 0


def _write(path: str, text: str):
    """Writes `text` to `path` through a temporary file, so a reader never sees half a report."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


if __name__ == "__main__":
    sys.exit(main())
