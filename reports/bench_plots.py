"""The "How cost grows" plots of the performance section as inline SVG text
(matplotlib, no pyplot state; plots.to_svg cleans them for inlining).

Three figures, each left out (None) when its family is absent:
- the DistributedOptimizer step time against the model size N, log-log,
  one line per DP size, min-max of the repetitions as error bars;
- where rank 0's step goes: one stacked bar per N and DP size, the shares
  of reduce-scatter, update, all-gather and all-reduce, the median step
  time written above each bar;
- checkpoint save and load time against N, log-log, one panel per
  operation (save, load warm, load cold, load with a DP change, cold), one
  line per sharding type and the plain file's write or read as a dashed
  reference;
- per sweep of bench/scale.py's dry runs (bench_scale.py), one figure of
  log-log panels against the sweep's x (dp, tensors): metadata.json bytes,
  save plan + metadata time, the resharded load's plan time and peak
  memory, one line per sharding type, each legend entry giving the line's
  fitted slope.

No red: red marks failures in this report.
"""
from typing import Dict, List, Optional, Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

import plots
from bench import STEP_SPLIT, CheckpointRow, DistStepRow
from bench_format import size_label
from bench_scale import Sweep, series, series_slope, slope_text

LINE_COLORS = plots.GROUP_COLORS
SPLIT_COLORS = {"rs_ms": "#1f77b4", "update_ms": "#2ca02c", "ag_ms": "#ff7f0e", "allreduce_ms": "#9467bd"}
PLAIN_STYLE = dict(color=plots.TOLERANCE_COLOR, linestyle="--", linewidth=1.2)
# (operation, panel title, the plain file's counterpart)
CHECKPOINT_PANELS = (("save", "save", "write"), ("load_warm", "load, warm", "read_warm"),
                     ("load_cold", "load, cold", "read_cold"),
                     ("load_reshard_cold", "load at dp 2 of a dp-4 save, cold", "read_cold"))
# The panels of a dry-mode sweep: (the dry --json quantities summed, title, y label).
SCALE_PANELS = ((("metadata_bytes",), "metadata.json", "bytes"),
                (("plan_s", "metadata_s"), "save plan + metadata", "s"),
                (("reshard_plan_s",), "resharded-load plan", "s"),
                (("peak_mb",), "peak memory above the start", "MB"))


def _size_axis(ax, sizes: Sequence[int]):
    """A log x axis of model sizes, ticked at the measured ones."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(list(sizes))
    ax.set_xticklabels([size_label(n) for n in sizes])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.grid(True, which="major", alpha=0.3)
    if len(sizes) == 1:
        ax.set_xlim(sizes[0] / 2, sizes[0] * 2)


def _errorbar(ax, xs: List[int], reps, **style):
    """Medians joined by a line, the repetitions' min-max as error bars."""
    medians = [r.median for r in reps]
    spread = [[m - r.low for m, r in zip(medians, reps)], [r.high - m for m, r in zip(medians, reps)]]
    ax.errorbar(xs, medians, yerr=spread, marker="o", markersize=4, capsize=3, **style)


def dist_step_figure(rows: List[DistStepRow]) -> Optional[Figure]:
    """Step time (ms) against N, one line per DP size."""
    if not rows:
        return None
    fig = Figure(figsize=(5.4, 3.2))
    ax = fig.add_subplot()
    for i, dp in enumerate(sorted({r.dp for r in rows})):
        mine = sorted((r for r in rows if r.dp == dp), key=lambda r: r.n)
        _errorbar(ax, [r.n for r in mine], [r.step for r in mine], color=LINE_COLORS[i % len(LINE_COLORS)],
                  label=f"dp {dp}")
    _size_axis(ax, sorted({r.n for r in rows}))
    ax.set_xlabel("model size N (params)")
    ax.set_ylabel("step time (ms)")
    ax.set_title("DistributedOptimizer step (rank 0)")
    ax.legend(loc="best")
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.16, top=0.9)
    return fig


def split_shares(row: DistStepRow) -> Optional[Dict[str, float]]:
    """The share of each part of STEP_SPLIT in their sum; None without a split."""
    parts = {k: max(row.part_ms(k) or 0.0, 0.0) for k, _ in STEP_SPLIT}
    total = sum(parts.values())
    return {k: v / total for k, v in parts.items()} if total > 0 else None


def dist_split_figure(rows: List[DistStepRow]) -> Optional[Figure]:
    """One stacked bar per row: the shares of rank 0's step."""
    shown = [(r, split_shares(r)) for r in rows]
    shown = [(r, s) for r, s in shown if s]
    if not shown:
        return None
    width = 2.6 + 0.45 * len(shown)          # 0.8 in of axis labels, 1.3 in of legend
    fig = Figure(figsize=(width, 3.2))
    ax = fig.add_subplot()
    xs = list(range(len(shown)))
    bottom = [0.0] * len(shown)
    for key, label in STEP_SPLIT:
        heights = [100 * s[key] for _, s in shown]
        ax.bar(xs, heights, bottom=bottom, width=0.7, color=SPLIT_COLORS[key], label=label)
        bottom = [b + h for b, h in zip(bottom, heights)]
    for x, (r, _) in zip(xs, shown):
        ax.text(x, 101, f"{r.step.median:.3g}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{size_label(r.n)}\ndp {r.dp}" for r, _ in shown], fontsize=7)
    ax.set_ylim(0, 112)
    ax.set_ylabel("share of rank 0's step (%)")
    ax.set_title("where rank 0's step goes (median ms above)")
    handles, labels = ax.get_legend_handles_labels()
    right = 1 - 1.35 / width
    fig.legend(handles[::-1], labels[::-1], loc="center left", bbox_to_anchor=(right + 0.01, 0.5), frameon=False)
    fig.subplots_adjust(left=0.8 / width, right=right, bottom=0.18, top=0.9)
    return fig


def checkpoint_figure(rows: List[CheckpointRow]) -> Optional[Figure]:
    """Save and load time (ms) against N: one panel per operation, one line
    per sharding type, the plain file dashed."""
    panels = [p for p in CHECKPOINT_PANELS if any(r.ops.get(p[0]) for r in rows if not r.plain)]
    if not panels:
        return None
    kinds = list(dict.fromkeys(r.kind for r in rows if not r.plain))
    sizes = sorted({r.n for r in rows})
    cols = 2 if len(panels) > 1 else 1
    nrows = (len(panels) + cols - 1) // cols
    height = 2.4 * nrows + 0.9                # 0.9 in: the last row's axis label and the legend
    fig = Figure(figsize=(9.0 if cols == 2 else 5.0, height))
    for i, (op, title, plain_op) in enumerate(panels):
        ax = fig.add_subplot(nrows, cols, i + 1)
        for k, kind in enumerate(kinds):
            mine = [r for r in rows if r.kind == kind and r.ops.get(op)]
            if mine:
                _errorbar(ax, [r.n for r in mine], [r.ops[op] for r in mine],
                          color=LINE_COLORS[k % len(LINE_COLORS)])
        plain = [r for r in rows if r.plain and r.ops.get(plain_op)]
        if plain:
            ax.plot([r.n for r in plain], [r.ops[plain_op].median for r in plain], marker="s", markersize=3,
                    **PLAIN_STYLE)
        _size_axis(ax, sizes)
        ax.set_title(f"{title} (plain file: {plain_op.replace('_', ' ')})", fontsize=9)
        ax.set_ylabel("ms")
        if i >= len(panels) - cols:
            ax.set_xlabel("model size N (params)")
    handles = [Line2D([], [], color=LINE_COLORS[k % len(LINE_COLORS)], marker="o", markersize=4, label=kind)
               for k, kind in enumerate(kinds)]
    if any(r.plain for r in rows):
        handles.append(Line2D([], [], marker="s", markersize=3, label="plain file", **PLAIN_STYLE))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 5), frameon=False)
    fig.subplots_adjust(left=0.08 if cols == 2 else 0.15, right=0.98, bottom=0.95 / height,
                        top=1 - 0.3 / height, wspace=0.22, hspace=0.45)
    return fig


def _sweep_axis(ax, xs: Sequence[float]):
    """Log-log axes, x ticked at the sweep's sizes."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{x:g}" for x in xs])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.grid(True, which="major", alpha=0.3)
    if len(set(xs)) == 1:
        ax.set_xlim(xs[0] / 2, xs[0] * 2)


def scale_figure(sweep: Sweep) -> Optional[Figure]:
    """The panels of SCALE_PANELS that have a line against the sweep's x, one
    line per sharding type, labelled with its slope; None when none has."""
    panels = [(p, series(sweep, p[0])) for p in SCALE_PANELS]
    panels = [(p, lines) for p, lines in panels if lines]
    if not panels:
        return None
    colors = {t: LINE_COLORS[k % len(LINE_COLORS)] for k, t in enumerate(sweep.types)}
    cols = 2 if len(panels) > 1 else 1
    nrows = (len(panels) + cols - 1) // cols
    height = 2.6 * nrows + 0.5
    fig = Figure(figsize=(9.0 if cols == 2 else 5.0, height))
    for i, ((quantities, title, unit), lines) in enumerate(panels):
        ax = fig.add_subplot(nrows, cols, i + 1)
        for sharding, xs, ys in lines:
            slope = series_slope(sweep, sharding, quantities, xs, ys)
            ax.plot(xs, ys, marker="o", markersize=4, color=colors[sharding],
                    label=f"{sharding}: slope {slope_text(slope)}")
        _sweep_axis(ax, sweep.xs)
        ax.set_title(f"{title} against {sweep.x}", fontsize=9)
        ax.set_ylabel(unit)
        ax.legend(loc="best", fontsize=6.5)
        if i >= len(panels) - cols:
            ax.set_xlabel(sweep.x)
    fig.subplots_adjust(left=0.08 if cols == 2 else 0.15, right=0.98, bottom=0.5 / height,
                        top=1 - 0.3 / height, wspace=0.22, hspace=0.45)
    return fig


def svg_or_none(fig: Optional[Figure], uid: str) -> Optional[str]:
    return None if fig is None else plots.to_svg(fig, uid)
