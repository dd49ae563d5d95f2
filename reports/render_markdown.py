"""The GitHub-flavoured Markdown summary for a PR comment (--markdown).

The headline (headline.py: "✅ PASS: 10 of 12 cells passed, 2 skipped",
"⚠️ NOTHING CHECKED: 0 of 4 cells ran (4 skipped)", "⏹ INTERRUPTED by
SIGINT: 3 of 8 cells finished, 5 not run"), then three lines answering the reviewer's questions
(answers.py): the first failure (cell, step, tensor, check), what changed
against the baseline, what was not covered. Then the environment, the
counts (xfail and xpass apart from passed and failed), the releases
compared when an external system appears at two or more releases
(releases.py: one table per system base, its counts by change above it),
the matrix as a table, the cells that fail the run with their first
divergence (a tolerance check's deciding figure against its bound), the
skipped cells with their reasons, the cells declared expected to fail (xfail, xpass) with their reasons and what they
got, the baseline differences when there is a baseline, and a link to the
HTML report. With a selftest.json (detection.py), one line under the counts says
how many failpoints were caught and names those that escaped. The whole text stays under LIMIT characters
(GitHub refuses comments over 65536): sections that do not fit are cut at a
row boundary with a note saying how many rows were left out.
"""
from typing import List, Optional, Sequence

import answers as answers_mod
import compare as compare_mod
import headline as headline_mod
import matrix as matrix_mod
import releases as releases_mod
import summary
from bench import Benchmark
from detection import Detection
from load import FAILED, Cell, Results, counts_of

LIMIT = 60000
RESERVE = 600          # kept free for the truncation notes and the link
DETAIL_CHARS = 240


def cell_text(text, limit: int = DETAIL_CHARS) -> str:
    """`text` made safe for one Markdown table cell."""
    if text is None:
        return "—"
    s = " ".join(str(text).split()).replace("|", "\\|")
    return s if len(s) <= limit else s[:limit - 1] + "…"


def _slot_text(members: List[Cell], chips) -> str:
    if not members:
        return ""
    if all(c.verdict == "pass" for c in members):
        return "✅" if len(members) == 1 else f"✅×{len(members)}"
    bad = [f"{matrix_mod.SYMBOL[c.verdict]} {chips[c.id]}".strip() for c in members if c.verdict != "pass"]
    good = sum(1 for c in members if c.verdict == "pass")
    return " ".join(bad) + (f" ✅×{good}" if good else "")


def _matrix_lines(results: Results) -> List[str]:
    m = matrix_mod.build(results.cells, results.aggregate.get("optimizer_order"))
    head = f"| {m.head_label} | " + " | ".join(m.column_label(c) for c in m.columns) + " |"
    rule = "|---|" + "---|" * len(m.columns)
    rows = [f"| {m.row_label(r)} | " + " | ".join(cell_text(_slot_text(m.slot(r, c), m.chips), 400)
                                                  for c in m.columns) + " |" for r in m.rows]
    return [head, rule] + rows


def _judged_text(cell: Cell, check_name: Optional[str]) -> str:
    """ "(max rel 2.1e-2 > 1e-3)": the deciding figure of a tolerance check
    the cell failed, against its bound; "" for any other check."""
    check = next((c for c in (cell.result or {}).get("checks", []) if c["name"] == check_name), None)
    j = summary.judgement(check) if check else None
    return f"({j.text})" if j else ""


def _failing_lines(results: Results) -> List[str]:
    rows = []
    for c in results.cells:
        if c.verdict not in FAILED:
            continue
        ff = summary.first_failure(c) or {}
        step = ff.get("step")
        judged = _judged_text(c, ff.get("check"))
        rows.append(f"| `{cell_text(c.id, 200)}` | {matrix_mod.SYMBOL[c.verdict]} {c.verdict} | "
                    f"{'—' if step is None else step} | "
                    f"{('`' + cell_text(ff['tensor'], 160) + '`') if ff.get('tensor') else '—'} | "
                    f"{cell_text(ff.get('check'), 120)}{' ' + cell_text(judged, 80) if judged else ''} | "
                    f"{cell_text(ff.get('detail'))} |")
    return rows


def _skipped_lines(results: Results) -> List[str]:
    """One table row per skipped cell: its id and why it was not run."""
    return [f"| `{cell_text(c.id, 200)}` | {cell_text(summary.skip_reason(c), 300)} |"
            for c in results.cells if c.verdict == "skipped"]


def _expected_lines(results: Results) -> List[str]:
    """One table row per cell declared expected to fail (xfail, xpass, or a
    fail or error that was not the expected failure): verdict, what it got,
    the reason."""
    rows = []
    for c in results.cells:
        exp = summary.expectation(c)
        if exp is None:
            continue
        check = f" (expected to fail first: `{cell_text(exp.failing_check, 80)}`)" if exp.failing_check else ""
        rows.append(f"| `{cell_text(c.id, 200)}` | {matrix_mod.SYMBOL.get(c.verdict, '')} {c.verdict} | "
                    f"{cell_text(exp.got_text, 40)} | {cell_text(exp.reason, 300)}{check} |")
    return rows


def _release_text(o: Optional[releases_mod.Outcome]) -> str:
    """One release's cell of a row: "❌ fail `check`: detail · expected to fail: <reason>", or "—"."""
    if o is None:
        return "—"
    text = f"{matrix_mod.SYMBOL.get(o.verdict, '')} {o.verdict}"
    if o.check:
        text += f" `{cell_text(o.check, 80)}`" + (":" if o.detail else "")
    if o.detail:
        text += " " + cell_text(o.detail, releases_mod.DETAIL_CHARS + 20)
    if o.expected:
        text += f" · expected to fail: {cell_text(o.expected, 80)}"
    return text


def _release_tables(tables: List[releases_mod.ReleaseTable], room: int) -> List[str]:
    """The "Releases compared" section in at most about `room` characters:
    per system base, its counts line and its table; rows that do not fit
    are left out with a note."""
    out = ["### Releases compared", "",
           "_Cells of an external system pinned at several releases, paired by their id without the "
           "`@<version>`. same: verdicts and first failing checks agree; fixed: the oldest release broke "
           "(fail, error, xfail) and the newest passed; regressed: the reverse; changed: otherwise._", ""]
    for t in tables:
        versions = " → ".join(f"`{cell_text(v, 40)}`" for v in t.versions)
        head = [f"**{cell_text(t.base, 80)}** {versions}: {t.counts_text()}.", "",
                "| cell | " + " | ".join(cell_text(v, 40) for v in t.versions) + " | change |",
                "|---|" + "---|" * len(t.versions) + "---|"]
        rows = []
        for r in t.rows:
            parts = ([f"+{r.variant}"] if r.variant else []) + [r.get("optimizer"), r.get("sharding_type"),
                                                                 t.plan(r), r.get("dtype")]
            parts += [r.get("model")] if t.varies("model") else []
            cell = " · ".join(str(p) for p in parts if p is not None)
            rows.append(f"| {cell_text(cell, 160)} | " + " | ".join(_release_text(o) for o in r.outcomes)
                        + f" | {cell_text(t.change_label(r), 40)} |")
        left_room = room - len("\n".join(out)) - len("\n".join(head))
        if left_room <= 0:
            out += [f"_… {len(t.rows)} {cell_text(t.base, 80)} rows left out to stay under the limit; "
                    "see the HTML report._", ""]
            continue
        kept, left = _fit(rows, left_room)
        out += head + kept
        if left:
            out += ["", f"_… and {left} more {cell_text(t.base, 80)} rows left out to stay under the limit; "
                        "see the HTML report._"]
        out.append("")
    return out


def counts_line(counts: dict) -> str:
    """ "5 cells: 4 passed, 1 failed, 0 errored" and, when there are any,
    the skipped cells, the expected failures (xfail) and unexpected passes
    (xpass), counted apart, and the cells an interrupted run did not finish."""
    line = (f"{counts['cells']} cells: {counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['errored']} errored")
    if counts.get("skipped"):
        line += f", {counts['skipped']} skipped"
    if counts.get("xfailed") or counts.get("xpassed"):
        line += f", {counts.get('xfailed', 0)} xfail, {counts.get('xpassed', 0)} xpass"
    if counts.get("not_run"):
        line += f", {counts['not_run']} not run (interrupted)"
    return line


LIST_MAX = 3           # cells or names listed per answer line before "and N more"


def _names(items: List[str], limit: int = LIST_MAX) -> str:
    """Up to `limit` of `items` joined, and how many more there are."""
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _count(n: int, noun: str) -> str:
    """ "1 cell", "2 cells". """
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _code(text, limit: int = 160) -> str:
    return f"`{cell_text(text, limit)}`"


def _first_failure_line(a: answers_mod.Answers) -> str:
    f = a.first_failure
    interrupted = f"; {a.not_run} not run (interrupted by {a.interrupted_by})" if a.interrupted_by else ""
    if f is None and not a.ran:
        return (f"- **Failed first:** nothing, but ⚠️ nothing was checked: 0 of {a.cells} cells ran their checks"
                + (f" ({a.skipped} skipped)" if a.skipped else "") + interrupted + ".")
    if f is None:
        where = f" in the {a.cells} cells that finished" if a.interrupted_by else ""
        return (f"- **Failed first:** nothing{where}: {a.passed} of {a.cells} cells passed"
                + (f", {a.skipped} skipped" if a.skipped else "")
                + (f", {a.xfailed} failed as expected (xfail)" if a.xfailed else "") + interrupted + ".")
    w = f.where
    step = "—" if w.get("step") is None else w["step"]
    others = f" ({f.others} other failing or errored cell{'s' if f.others != 1 else ''} below)" if f.others else ""
    xpass = " It was expected to fail and passed (xpass): drop the expectation if the bug is fixed." \
        if f.cell.verdict == "xpass" else ""
    return (f"- **Failed first:** {_code(f.cell.id, 200)} ({f.cell.verdict}): step {step}, "
            f"tensor {_code(w.get('tensor'))}, check {_code(w.get('check'), 120)}{others}.{xpass}")


def _counted(count_label: str, names: List[str]) -> str:
    """ "2 fixed: `a`, `b`" — a count and, when there are any, the first names."""
    return count_label + (": " + _names(names) if names else "")


def _baseline_line(b: Optional[compare_mod.BaselineChanges]) -> str:
    if b is None:
        return "- **Against the baseline:** no baseline given."
    tol = compare_mod.PERF_CHANGE_TOL
    shifts = [f"{_code(c.id, 120)} ({', '.join(f'{s.run} {s.rel:.1%}' for s in c.loss_shifts)})"
              for c in b.loss_shifted]
    parts = [_counted(_count(len(b.new_failures), "new failure"), [_code(c.id, 120) for c in b.new_failures]),
             _counted(f"{len(b.fixed)} fixed", [_code(c.id, 120) for c in b.fixed]),
             _counted(_count(len(b.loss_shifted), "loss curve") + f" shifted beyond {compare_mod.LOSS_SHIFT_RTOL:.0%}",
                      shifts)]
    if b.norm_shifted:
        norms = [f"{_code(c.id, 120)} ({', '.join(f'{s.run} {s.rel:.1%}' for s in c.norm_shifts)})"
                 for c in b.norm_shifted]
        parts.append(_counted(_count(len(b.norm_shifted), "grad-norm curve") +
                              f" shifted beyond {compare_mod.GRAD_NORM_SHIFT_RTOL:.0%}", norms))
    if b.wall:
        where = "⚠️ beyond" if b.wall.beyond else "within"
        parts.append(f"{b.wall.name} {b.wall.before:.1f} s → {b.wall.after:.1f} s ({b.wall.rel:+.0%}, {where} ±{tol:.0%})")
    if b.bench:
        parts.append(_counted(_count(len(b.bench), "benchmark") + f" beyond ±{tol:.0%}",
                              [f"{_code(p.name, 80)} {p.rel:+.0%}" for p in b.bench]))
    if b.other_flagged:
        parts.append(_count(len(b.other_flagged), "other flagged cell"))
    return "- **Against the baseline:** " + "; ".join(parts) + "."


def _not_covered_line(n: answers_mod.NotCovered) -> str:
    if n.nothing:
        return "- **Not covered:** nothing: every cell ran, no check said n/a, every tensor group was checked."
    parts = []
    if n.not_run:
        parts.append(f"{_count(n.not_run, 'cell')} not run (interrupted by {n.interrupted_by or 'a signal'})")
    if n.skipped:
        parts.append(f"{len(n.skipped)} skipped: " + _names([f"{_code(c.id, 120)} ({cell_text(why, 120)})"
                                                            for c, why in n.skipped]))
    if n.expected:
        parts.append(f"expected failures (xfail): {len(n.expected)} ("
                     + _names([f"{cell_text(why, 120)} ×{count}" if count > 1 else cell_text(why, 120)
                               for why, count in n.expected_reasons().items()]) + ")")
    if n.na_checks:
        parts.append(f"{_count(n.na_total, 'check')} n/a on {_count(n.na_cells, 'cell')}: "
                     + _names([f"{_code(name, 80)} on {count}" for name, count in n.na_checks.items()]))
    if n.unchecked:
        cell, why = n.unchecked_cells[0]
        parts.append(f"groups not checked on {_count(len(n.unchecked_cells), 'cell')}: "
                     + _names([f"{_code(g, 80)} on {count}" for g, count in n.unchecked.items()])
                     + f" (e.g. {_code(cell.id, 120)}: {cell_text(why, 160)})")
    return "- **Not covered:** " + "; ".join(parts) + "."


def answer_lines(a: answers_mod.Answers) -> List[str]:
    """The three answer lines, each bounded (lists cut at LIST_MAX entries)."""
    return [_first_failure_line(a), _baseline_line(a.baseline), _not_covered_line(a.not_covered)]


ESCAPED_MAX = 10       # escaped failpoints named on the detection line before "and N more"


def detection_line(d: Detection) -> str:
    """ "**Detection power: X of Y failpoints caught**", the escaped ones by
    name, and the clean run's verdict, on one line."""
    line = f"**Detection power: {d.caught} of {d.tried} failpoints caught**"
    if d.escaped:
        line += "; escaped: " + _names([_code(name, 80) + (f" ({note})" if note else "")
                                        for name, note in d.escaped_notes()], ESCAPED_MAX)
    if d.clean_passed:
        line += f"; clean run passed ({_count(d.clean_cells, 'cell')})."
    else:
        line += (f"; ⚠️ the clean run failed on {len(d.clean_failed)} of {_count(d.clean_cells, 'cell')}, "
                 "so a catch means nothing.")
    return line


def _fit(lines: List[str], budget: int) -> (List[str], int):
    """The longest prefix of `lines` that fits in `budget` characters, and how many were left out."""
    out, used = [], 0
    for i, line in enumerate(lines):
        if used + len(line) + 1 > budget:
            return out, len(lines) - i
        out.append(line)
        used += len(line) + 1
    return out, 0


def render(results: Results, baseline: Optional[Results] = None, html_link: str = "report.html",
           limit: int = LIMIT, benchmarks: Sequence[Benchmark] = (),
           baseline_benchmarks: Sequence[Benchmark] = (), detection: Optional[Detection] = None) -> str:
    """The summary as Markdown text, shorter than `limit` characters;
    `detection` (RESULTS_DIR/selftest.json) adds the detection-power line."""
    agg, env = results.aggregate, results.aggregate["environment"]
    comparisons = compare_mod.compare(results, baseline) if baseline is not None else []
    changes = compare_mod.baseline_changes(comparisons, benchmarks, baseline_benchmarks) \
        if baseline is not None else None
    counts = agg.get("counts") or counts_of(results)
    head_line = headline_mod.headline(results)
    scenarios = ", ".join(f"`{cell_text(s.get('file') or s.get('name'), 120)}`" for s in agg["scenarios"][:10])
    if len(agg["scenarios"]) > 10:
        scenarios += f" and {len(agg['scenarios']) - 10} more"
    head = [f"## shardcheck: {head_line.line()}", ""]
    if head_line.interruption:
        head += [f"**{head_line.interruption_line()}**", ""]
    head += answer_lines(answers_mod.answer(results, changes))
    head += ["",
             f"commit `{cell_text(env.get('commit', '?'), 60)}` · started {cell_text(agg.get('started'), 40)} · "
             f"backend {cell_text(env.get('backend'), 30)} · libtorch {cell_text(env.get('libtorch'), 30)} · "
             f"host {cell_text(env.get('host'), 60)}", "",
             f"**{counts_line(counts)}**" + (f" · scenarios: {scenarios}" if scenarios else ""), ""]
    if detection is not None:
        head += [detection_line(detection), ""]
    warnings = results.warnings + (detection.warnings if detection is not None else [])
    for w in warnings[:5]:
        head += [f"> ⚠️ {cell_text(w, 400)}", ""]
    tail = ["", f"Full report with plots and per-tensor tables: [{cell_text(html_link, 300)}]({html_link})", ""]

    budget = limit - RESERVE - len("\n".join(head)) - len("\n".join(tail))
    body: List[str] = []

    releases = releases_mod.compare_releases(results.cells)
    if releases:
        body += _release_tables(releases, budget // 4)

    matrix = _matrix_lines(results)
    kept, left = _fit(matrix[2:], budget // 2 - len(matrix[0]) - len(matrix[1]))
    body += ["### Matrix", "", matrix[0], matrix[1]] + kept
    if left:
        body += ["", f"_… {left} more matrix rows left out to stay under {limit} characters; see the HTML report._"]
    body.append("")

    failing = _failing_lines(results)
    if failing:
        header = ["### Failing cells", "", "| cell | verdict | first failing step | tensor | check | detail |",
                  "|---|---|---|---|---|---|"]
        room = budget - len("\n".join(body)) - len("\n".join(header))
        if baseline is not None:
            room -= min(room // 3, 8000)
        kept, left = _fit(failing, room)
        body += header + kept
        if left:
            body += ["", f"_… and {left} more failing cells not listed here; see the HTML report._"]
        body.append("")

    expected = _expected_lines(results)
    if expected:
        header = ["### Expected failures", "",
                  "_xfail: failed as expected, does not fail the run; xpass: expected to fail but passed, "
                  "fails the run; a fail or error was not the expected failure._", "",
                  "| cell | verdict | got | reason |", "|---|---|---|---|"]
        room = budget - len("\n".join(body)) - len("\n".join(header))
        if baseline is not None:
            room -= min(room // 3, 8000)
        kept, left = _fit(expected, room)
        body += header + kept
        if left:
            body += ["", f"_… and {left} more expected failures not listed here; see the HTML report._"]
        body.append("")

    skipped = _skipped_lines(results)
    if skipped:
        header = ["### Skipped cells", "", "_Not run, so nothing was checked in them:_", "",
                  "| cell | reason |", "|---|---|"]
        room = min(budget // 4, budget - len("\n".join(body)) - len("\n".join(header)))
        kept, left = _fit(skipped, room)
        body += header + kept
        if left:
            body += ["", f"_… and {left} more skipped cells not listed here; see the HTML report._"]
        body.append("")

    if baseline is not None:
        flagged = [c for c in comparisons if c.flags]
        body += ["### Against the baseline", "",
                 f"Baseline commit `{cell_text(baseline.aggregate['environment'].get('commit', '?'), 60)}`: "
                 f"{len(flagged)} cells flagged.", ""]
        lines = [f"- `{cell_text(c.id, 200)}` ({c.status}): {cell_text('; '.join(c.flags), 300)}" for c in flagged]
        kept, left = _fit(lines, budget - len("\n".join(body)))
        body += kept
        if left:
            body += [f"- _… and {left} more flagged cells; see the HTML report._"]
        body.append("")

    text = "\n".join(head + body + tail)
    if len(text) >= limit:      # cannot happen with the budgets above; never exceed the limit anyway
        text = text[:limit - 200].rsplit("\n", 1)[0] + "\n\n_… truncated to stay under the limit._\n"
    return text
