"""Plots of one cell as inline SVG text (matplotlib, no pyplot state).

Three figures per cell: the loss curves of every run that has a loss (the
save point marked), with the learning rate on a secondary "lr" axis when
the cell's lr is scheduled (not constant) — or the lr curve alone for a
cell without a loss (oracle models); each run's grad norm per step (log
scale when it spans more than two decades); and a log-scale |diff| figure
(max abs and max rel per step, one colour per tensor group, one line style
per compared run) with the atol/rtol of the cell's tolerance checks. Zeros
cannot be drawn on a log scale, so exactly-zero points are left out and
series that are zero at every step are returned as "bitwise equal" notes
instead.

In the |diff| figure red means failure only: the group colours hold no
red, a group with a failed check is drawn thick and its legend entry says
so, and a group that no check covers is drawn faint, "(not checked)".

Series longer than MAX_POINTS are downsampled by keeping each bucket's
minimum and maximum plus the global maximum, so the largest difference is
always drawn. The SVG is cleaned for inlining: no XML prolog, metadata or
per-figure style, ids prefixed with a per-figure uid so that many figures
can share one page.
"""
import io
import math
import re
from typing import List, Optional, Sequence, Tuple

import matplotlib
matplotlib.use("Agg")
import numpy as np  # noqa: E402  (matplotlib's own dependency)
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import LogLocator, NullLocator  # noqa: E402

from summary import (LR_REL_TOL, diff_runs, group_coverage, group_verdict, lr_schedule,  # noqa: E402
                     rel_label, tolerance_lines, zero_series)

MAX_POINTS = 2000
RUN_STYLES = {"reference": dict(color="#222222", linestyle="-", linewidth=2.6, alpha=0.55),
              "uninterrupted": dict(color="#1565c0", linestyle="--", linewidth=1.6),
              "resumed": dict(color="#ef6c00", linestyle=":", linewidth=2.0),
              # an external system's own run on one device (docs/results-schema.md)
              "single_device": dict(color="#6d4c41", linestyle="-.", linewidth=1.6)}
OTHER_RUN_STYLE = dict(linestyle="-.", linewidth=1.4)
# The lr is context, not the subject: thin, grey and dashed, under the loss curves.
# A tolerance bound is a threshold, not a failure: dark grey, never red.
TOLERANCE_COLOR = "#424242"
LR_STYLE = dict(color="#8a8a8a", linestyle="--", linewidth=1.0)
DIFF_LINESTYLES = ["-", "--", ":", "-."]
# No red among the group colours: red marks failures.
GROUP_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#00695c", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
# How a group's |diff| lines look by its checks' verdict (summary.group_verdict).
GROUP_STYLES = {"fail": dict(linewidth=2.6, alpha=1.0), "pass": dict(linewidth=1.4, alpha=1.0),
                "unchecked": dict(linewidth=1.0, alpha=0.4)}
GROUP_LEGEND = {"fail": " (check failed)", "pass": "", "unchecked": " (not checked)"}
# A grad norm spanning more than this many decades gets a log y axis.
LOG_DECADES = 2
RC = {"svg.fonttype": "none", "svg.hashsalt": "shardcheck", "font.size": 9,
      "axes.titlesize": 10, "legend.fontsize": 8, "font.family": "sans-serif",
      "font.sans-serif": ["DejaVu Sans"]}
MARKER_MAX_POINTS = 2   # shorter series get markers, or a single point would not show


def keep_indices(values: Sequence, max_points: int = MAX_POINTS) -> List[int]:
    """Indices of `values` to draw: all of them when there are at most
    `max_points`; else the first, the last, the minimum and maximum of each
    of ~max_points/2 buckets, and always the index of the global maximum.
    None and NaN entries count as missing."""
    n = len(values)
    if n <= max_points:
        return list(range(n))
    arr = _floats(values)
    finite = np.isfinite(arr)
    keep = {0, n - 1}
    if finite.any():
        keep.add(int(np.nanargmax(np.where(finite, arr, np.nan))))
    buckets = max(1, (max_points - 3) // 2)
    edges = np.linspace(0, n, buckets + 1).astype(int)
    for lo, hi in zip(edges[:-1], edges[1:]):
        seg = arr[lo:hi]
        ok = np.isfinite(seg)
        if hi <= lo or not ok.any():
            continue
        masked = np.where(ok, seg, np.nan)
        keep.add(lo + int(np.nanargmin(masked)))
        keep.add(lo + int(np.nanargmax(masked)))
    return sorted(keep)


def downsample(steps: Sequence, values: Sequence, max_points: int = MAX_POINTS) -> Tuple[list, list]:
    idx = keep_indices(values, max_points)
    return [steps[i] for i in idx], [values[i] for i in idx]


def _floats(values: Sequence) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def run_label(name: str, run: dict) -> str:
    """Legend text of a run: its name and DP size (and save step for a resume)."""
    parts = []
    if run.get("dp") is not None:
        parts.append(f"dp{run['dp']}")
    if run.get("save_at") is not None:
        parts.append(f"from step {run['save_at']}")
    return f"{name} ({', '.join(parts)})" if parts else name


def save_step(result: dict) -> Optional[int]:
    resume = (result.get("config") or {}).get("resume") or {}
    if resume.get("save_at") is not None:
        return resume["save_at"]
    for run in result["runs"].values():
        if run.get("save_at") is not None:
            return run["save_at"]
    return None


def loss_figure(result: dict) -> Optional[Figure]:
    """The overlaid loss curves, or None when there is nothing to draw.

    When the cell's lr is scheduled (not constant), it is drawn on a
    secondary y-axis labelled "lr" (the figure then has two axes); a cell
    without a loss but with a scheduled lr gets the lr curve alone. A
    constant lr is not drawn (summary.config_line states it)."""
    runs = [(name, run) for name, run in result["runs"].items()
            if run.get("loss") and any(v is not None for v in run["loss"])]
    lr = lr_schedule(result)
    scheduled = lr is not None and not lr.constant
    if not runs and not scheduled:
        return None
    fig = Figure(figsize=(7.2, 2.9))
    ax = fig.add_subplot()
    for name, run in runs:
        x, y = downsample(run["steps"], run["loss"])
        style = RUN_STYLES.get(name, OTHER_RUN_STYLE)
        ax.plot(x, _floats(y), label=run_label(name, run), marker="." if len(x) <= MARKER_MAX_POINTS else None,
                markersize=5, **style)
    lr_ax = None
    if scheduled:
        lr_ax = ax.twinx() if runs else ax
        _draw_lr(lr_ax, result, lr.runs)
        lr_ax.set_ylabel("lr")
        lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))   # "1e-4" once, short ticks
    save = save_step(result)
    if save is not None:
        ax.axvline(save, color="#6a1b9a", linestyle="-", linewidth=1, alpha=0.7, label=f"save at step {save}")
    ax.set_xlabel("step")
    if runs:
        ax.set_ylabel("loss")
        ax.set_title("loss and lr" if scheduled else "loss")
    else:
        ax.set_title("lr (no loss)")
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if lr_ax is not None and lr_ax is not ax:
        more = lr_ax.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
        ax.set_zorder(lr_ax.get_zorder() + 1)   # the loss curves over the lr, not under it
        ax.patch.set_visible(False)
    ax.legend(handles, labels, loc="best")
    right = 0.92 if lr_ax is not None and lr_ax is not ax else 0.98
    fig.subplots_adjust(left=0.09 if runs else 0.11, right=right, bottom=0.15, top=0.9)
    return fig


def _draw_lr(ax, result: dict, names: List[str]):
    """The lr of the reference run (else the first run with one), plus that
    of any other run whose lr differs from it at some step (e.g. a resume
    that lost its scheduler position)."""
    base_name = "reference" if "reference" in names else names[0]
    base = result["runs"][base_name]
    x, y = downsample(base["steps"], base["lr"])
    ax.plot(x, _floats(y), label="lr", marker="." if len(x) <= MARKER_MAX_POINTS else None, markersize=4,
            **LR_STYLE)
    at = {s: v for s, v in zip(base["steps"], base["lr"]) if v is not None}
    for name in names:
        run = result["runs"][name]
        if name == base_name or all(v is None or (s in at and math.isclose(v, at[s], rel_tol=LR_REL_TOL))
                                    for s, v in zip(run["steps"], run["lr"])):
            continue
        x, y = downsample(run["steps"], run["lr"])
        color = RUN_STYLES.get(name, {}).get("color", "#444444")
        ax.plot(x, _floats(y), label=f"lr, {run_label(name, run)}", color=color, linestyle="--",
                linewidth=1.0, alpha=0.8, marker="." if len(x) <= MARKER_MAX_POINTS else None, markersize=4)


def loss_svg(result: dict, uid: str) -> Optional[str]:
    """loss_figure() as SVG text, or None when it has nothing to draw."""
    fig = loss_figure(result)
    return None if fig is None else to_svg(fig, uid)


def grad_norm_figure(result: dict) -> Optional[Figure]:
    """Each run's grad norm per step (null entries, e.g. right after a load,
    left out), with the save step; a log y axis when the values span more
    than LOG_DECADES decades. None when no run has a grad norm."""
    runs = [(name, run) for name, run in result["runs"].items()
            if any(v is not None for v in run.get("grad_norm") or [])]
    if not runs:
        return None
    fig = Figure(figsize=(4.6, 2.9))
    ax = fig.add_subplot()
    for name, run in runs:
        x, y = downsample(run["steps"], run["grad_norm"])
        ax.plot(x, _floats(y), label=run_label(name, run), marker="." if len(x) <= MARKER_MAX_POINTS else None,
                markersize=5, **RUN_STYLES.get(name, OTHER_RUN_STYLE))
    log = spans_decades([v for _, run in runs for v in run["grad_norm"]], LOG_DECADES)
    if log:
        ax.set_yscale("log")
        ax.yaxis.set_minor_locator(NullLocator())
    save = save_step(result)
    if save is not None:
        ax.axvline(save, color="#6a1b9a", linestyle="-", linewidth=1, alpha=0.7, label=f"save at step {save}")
    ax.set_xlabel("step")
    ax.set_ylabel("grad norm")
    ax.set_title("grad norm (log scale)" if log else "grad norm")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best")
    fig.subplots_adjust(left=0.15, right=0.97, bottom=0.15, top=0.9)
    return fig


def baseline_figure(result: dict, baseline: dict) -> Optional[Figure]:
    """The PR against its base: each run's loss (left) and grad norm (right)
    now (solid) and in the baseline (dashed, same colour), runs matched by
    name. A panel is drawn when some run has that series on both sides;
    None when neither panel has anything."""
    panels = []
    for key, title in (("loss", "loss"), ("grad_norm", "grad norm")):
        pairs = [(name, run, baseline["runs"][name]) for name, run in result["runs"].items()
                 if name in baseline["runs"] and _has(run, key) and _has(baseline["runs"][name], key)]
        if pairs:
            panels.append((key, title, pairs))
    if not panels:
        return None
    fig = Figure(figsize=(4.6 * len(panels), 2.9))
    for i, (key, title, pairs) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for name, now, then in pairs:
            color = RUN_STYLES.get(name, {}).get("color", "#444444")
            for run, style, side in ((now, "-", "now"), (then, "--", "baseline")):
                x, y = downsample(run["steps"], run[key])
                ax.plot(x, _floats(y), color=color, linestyle=style, linewidth=1.4,
                        label=f"{name}, {side}")
        ax.set_xlabel("step")
        ax.set_title(f"{title}: now vs baseline")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.9, wspace=0.25)
    return fig


def _has(run: dict, key: str) -> bool:
    return any(v is not None for v in run.get(key) or [])


def baseline_svg(result: dict, baseline: dict, uid: str) -> Optional[str]:
    """baseline_figure() as SVG text, or None when it has nothing to draw."""
    fig = baseline_figure(result, baseline)
    return None if fig is None else to_svg(fig, uid)


def spans_decades(values: Sequence, decades: float) -> bool:
    """Whether the finite values are all positive and max/min exceeds 10**decades."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite or min(finite) <= 0:
        return False
    return max(finite) / min(finite) > 10 ** decades


def grad_norm_svg(result: dict, uid: str) -> Optional[str]:
    """grad_norm_figure() as SVG text, or None when no run has a grad norm."""
    fig = grad_norm_figure(result)
    return None if fig is None else to_svg(fig, uid)


def diff_svg(result: dict, uid: str, fail_step: Optional[int] = None,
             against: Optional[str] = None) -> Tuple[Optional[str], List[str]]:
    """The log-scale |diff| figure as SVG text (None if every series is zero),
    and the "run/group" series that are exactly zero at every step."""
    fig, zero = diff_figure(result, fail_step, against)
    return (None if fig is None else to_svg(fig, uid)), zero


def diff_figure(result: dict, fail_step: Optional[int] = None,
                against: Optional[str] = None) -> Tuple[Optional[Figure], List[str]]:
    """The log-scale |diff| figure (None if every series is zero), and the
    "run/group" series that are exactly zero at every step. Each drawn
    series is labelled "run/group"; each group is styled by its checks'
    verdict (GROUP_STYLES). `against` names what the diffs compare with in
    the panel titles when it is not the reference (e.g. "single device")."""
    runs = diff_runs(result)
    groups = result["groups"]
    verdicts = {g: group_verdict(checks) for g, checks in group_coverage(result).items()}
    rel = rel_label(result)
    vs = f" vs {against}" if against else ""
    panels = [("max_abs", f"max |Δ|{vs}", "atol"), ("max_rel", f"max relative |Δ|{vs} {rel}".strip(), "rtol")]
    zero = zero_series(result)
    drawn = {p[0]: [] for p in panels}
    for ri, name in enumerate(runs):
        run = result["runs"][name]
        for gi, group in enumerate(groups):
            if f"{name}/{group}" in zero:
                continue
            for key, _, _ in panels:
                vals = run["diff"][group].get(key)
                if not vals:
                    continue
                positive = [v if (v is not None and v > 0 and math.isfinite(v)) else None for v in vals]
                if all(v is None for v in positive):
                    continue
                x, y = downsample(run["steps"], positive)
                drawn[key].append((ri, gi, x, y))
    used = [p for p in panels if drawn[p[0]]]
    if not used:
        return None, zero

    fig = Figure(figsize=(10.0 if len(used) == 2 else 6.4, 3.0))
    axes = [fig.add_subplot(1, len(used), i + 1) for i in range(len(used))]
    lines = tolerance_lines(result)
    save = save_step(result)
    handles = []
    for ax, (key, title, tol) in zip(axes, used):
        for ri, gi, x, y in drawn[key]:
            ax.plot(x, _floats(y), color=GROUP_COLORS[gi % len(GROUP_COLORS)],
                    linestyle=DIFF_LINESTYLES[ri % len(DIFF_LINESTYLES)], label=f"{runs[ri]}/{groups[gi]}",
                    marker="." if len(x) <= MARKER_MAX_POINTS else None, markersize=5,
                    **GROUP_STYLES[verdicts[groups[gi]]])
        for li, line in enumerate(lines):
            value = line.atol if tol == "atol" else line.rtol
            if value:
                ax.axhline(value, color=TOLERANCE_COLOR, linestyle=(0, (4, 2 + 2 * li)), linewidth=1)
        if fail_step is not None:
            ax.axvline(fail_step, color="#c62828", linewidth=1, alpha=0.6)
        if save is not None:
            ax.axvline(save, color="#6a1b9a", linewidth=1, alpha=0.7)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(numticks=7))
        ax.yaxis.set_minor_locator(NullLocator())   # minor log ticks cost more time than they help
        ax.set_xlabel("step")
        ax.set_title(title)
        ax.grid(True, which="major", alpha=0.3)
    used_groups = sorted({gi for key in drawn for _, gi, _, _ in drawn[key]})
    used_runs = sorted({ri for key in drawn for ri, _, _, _ in drawn[key]})
    for gi in used_groups:
        verdict = verdicts[groups[gi]]
        handles.append(Line2D([], [], color=GROUP_COLORS[gi % len(GROUP_COLORS)],
                              label=groups[gi] + GROUP_LEGEND[verdict], **GROUP_STYLES[verdict]))
    for ri in used_runs:
        run = result["runs"][runs[ri]]
        handles.append(Line2D([], [], color="#444", linestyle=DIFF_LINESTYLES[ri % len(DIFF_LINESTYLES)],
                              label=run_label(runs[ri], run)))
    for li, line in enumerate(lines):
        bits = [f"{k} {v:g}" for k, v in (("atol", line.atol), ("rtol", line.rtol)) if v]
        if bits:
            targets = "tolerance checks" if len(lines) == 1 else ", ".join(line.targets)
            handles.append(Line2D([], [], color=TOLERANCE_COLOR, linestyle=(0, (4, 2 + 2 * li)),
                                  label=f"{' '.join(bits)} ({targets})"))
    if fail_step is not None:
        handles.append(Line2D([], [], color="#c62828", alpha=0.6, label=f"first failure, step {fail_step}"))
    if save is not None:
        handles.append(Line2D([], [], color="#6a1b9a", alpha=0.7, label=f"save at step {save}"))
    # Fixed margins (no tight bbox: it draws the figure twice); the legend takes the right edge.
    right = 0.72 if len(used) == 2 else 0.56
    fig.subplots_adjust(left=0.08 if len(used) == 2 else 0.13, right=right, bottom=0.16, top=0.9, wspace=0.3)
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(right + 0.01, 0.5), frameon=False)
    return fig, zero


def to_svg(fig: Figure, uid: str) -> str:
    """`fig` as SVG text fit for inlining in HTML next to other figures."""
    buf = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg",
                    metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r"<style[^>]*>.*?</style>", "", svg, flags=re.S)
    svg = re.sub(r'<g id="[^"]*">', "<g>", svg)
    svg = re.sub(r'(\bid="|url\(#|href="#)', lambda m: m.group(1) + uid + "-", svg)
    svg = re.sub(r">\s+<", "><", svg)
    svg = re.sub(r"\s*\n\s*", " ", svg)
    svg = re.sub(r'\b(d|x|y|transform)="([^"]*)"', _round_numbers, svg)
    svg = re.sub(r'^<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1', svg)
    return svg.strip()


def _round_numbers(m) -> str:
    """Coordinates to 2 decimals (1/100 pt is far below a pixel)."""
    return f'{m.group(1)}="' + re.sub(r"(\d+\.\d\d)\d+", r"\1", m.group(2)) + '"'


def _apply_rc():
    """Text size and SVG text-as-text must hold while the figure is built, too."""
    matplotlib.rcParams.update(RC)


_apply_rc()
