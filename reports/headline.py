"""The run's headline: its verdict and what that verdict rests on, the first
thing both outputs say (the HTML report's header, the Markdown summary's
heading).

The verdict is load.Results.verdict: results.json's "pass", "fail",
"nothing-checked" (no cell that finished ran a check: all skipped, e.g. GPU
cells on a machine without one) or "interrupted" (SIGINT or SIGTERM stopped
the run before every cell finished, and nothing failed); "fail" wins over
the others. Older results say only pass or fail: one where no cell ran its
checks reads as nothing checked, so a PASS always means something was
checked. The line counts what the verdict rests on:

    ✅ PASS: 10 of 12 cells passed, 2 skipped
    ❌ FAIL: 1 of 5 cells failed, 4 passed
    ⚠️ NOTHING CHECKED: 0 of 4 cells ran (4 skipped)
    ⏹ INTERRUPTED by SIGINT: 3 of 8 cells finished, 5 not run (3 passed)

An interrupted run that also failed says FAIL, and the interruption on a
line of its own (Headline.interruption_line). The Markdown uses the emoji
above; the HTML page the plain symbols of TEXT_SYMBOL (✓ ✗ ⚠ ■), which
fonts without emoji still draw.
"""
import dataclasses
from typing import Dict, List, Optional

from load import Results, counts_of

LABEL = {"pass": "PASS", "fail": "FAIL", "nothing-checked": "NOTHING CHECKED", "interrupted": "INTERRUPTED"}
SYMBOL = {"pass": "✅", "fail": "❌", "nothing-checked": "⚠️", "interrupted": "⏹"}
# The same as plain text symbols, for the HTML page (fonts without emoji still draw them).
TEXT_SYMBOL = {"pass": "✓", "fail": "✗", "nothing-checked": "⚠", "interrupted": "■"}


@dataclasses.dataclass
class Headline:
    verdict: str                    # load.RUN_VERDICTS
    text: str                       # what it rests on: "10 of 12 cells passed, 2 skipped"
    interrupted_by: Optional[str]   # the signal that stopped the run, or None
    interruption: Optional[str]     # what an interrupted run that failed adds: "2 of 6 cells finished, 4 not run"

    @property
    def label(self) -> str:
        """The verdict as the badge shows it: "PASS", "NOTHING CHECKED"."""
        return LABEL.get(self.verdict, self.verdict.upper())

    @property
    def symbol(self) -> str:
        return SYMBOL.get(self.verdict, "❌")

    @property
    def title(self) -> str:
        """The label, with the signal of an interrupted run: "INTERRUPTED by SIGINT"."""
        if self.verdict == "interrupted" and self.interrupted_by:
            return f"{self.label} by {self.interrupted_by}"
        return self.label

    def line(self, symbols: Dict[str, str] = SYMBOL) -> str:
        """The whole headline: "⚠️ NOTHING CHECKED: 0 of 4 cells ran (4 skipped)"
        (`symbols`: SYMBOL, or TEXT_SYMBOL for the HTML)."""
        return f"{symbols.get(self.verdict, symbols['fail'])} {self.title}: {self.text}"

    def interruption_line(self, symbols: Dict[str, str] = SYMBOL) -> Optional[str]:
        """ "⏹ INTERRUPTED by SIGTERM: 2 of 6 cells finished, 4 not run" for an
        interrupted run that failed, else None."""
        if self.interruption is None:
            return None
        return f"{symbols['interrupted']} {LABEL['interrupted']} by {self.interrupted_by}: {self.interruption}"


def run_label(verdict: Optional[str]) -> str:
    """A run verdict as a badge shows it (another run's, e.g. the baseline's)."""
    return LABEL.get(verdict or "", (verdict or "?").upper())


def _parts(counts: Dict[str, int]) -> List[str]:
    """The counts after the main figure: skipped cells and expected failures
    (xfail), each when there are some."""
    parts = []
    if counts.get("skipped"):
        parts.append(f"{counts['skipped']} skipped")
    if counts.get("xfailed"):
        parts.append(f"{counts['xfailed']} failed as expected (xfail)")
    return parts


def _failed_text(counts: Dict[str, int], finished: int) -> str:
    """ "2 of 5 cells failed (1 failed, 1 errored), 3 passed"."""
    bad = counts["failed"] + counts["errored"] + counts.get("xpassed", 0)
    kinds = [f"{n} {what}" for n, what in ((counts["failed"], "failed"), (counts["errored"], "errored"),
                                            (counts.get("xpassed", 0), "xpass")) if n]
    text = f"{bad} of {finished} cells failed"
    if len(kinds) > 1 or counts["errored"] or counts.get("xpassed"):
        text += f" ({', '.join(kinds)})"
    return ", ".join([text, f"{counts['passed']} passed"] + _parts(counts))


def _interruption_text(finished: int, not_run: int) -> str:
    """ "3 of 8 cells finished, 5 not run"."""
    return f"{finished} of {finished + not_run} cells finished, {not_run} not run"


def headline(results: Results) -> Headline:
    """The headline of `results`: its verdict and the counts behind it
    (results.json's counts, else those of the cells listed)."""
    verdict = results.verdict
    counts = results.aggregate.get("counts") or counts_of(results)
    not_run = results.not_run
    finished = counts["cells"] - not_run if results.aggregate.get("counts") else len(results.cells)
    by = results.interrupted_by
    interruption = None
    if verdict == "fail":
        text = _failed_text(counts, finished)
        if by is not None:
            interruption = _interruption_text(finished, not_run)
    elif verdict == "nothing-checked":
        ran = sum(1 for c in results.cells if c.ran)
        left = [f"{counts['skipped']} skipped"] if counts.get("skipped") else []
        other = finished - ran - counts.get("skipped", 0)
        if other > 0:
            left.append(f"{other} errored as expected (xfail)")
        text = f"{ran} of {finished} cells ran" + (f" ({', '.join(left)})" if left else "")
    elif verdict == "interrupted":
        shown = ([f"{counts['passed']} passed"] if counts["passed"] else []) + _parts(counts)
        text = _interruption_text(finished, not_run) + (f" ({', '.join(shown)})" if shown else "")
    else:
        text = ", ".join([f"{counts['passed']} of {finished} cells passed"] + _parts(counts))
    return Headline(verdict, text, by, interruption)
