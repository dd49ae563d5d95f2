"""Downsampling and SVG cleaning of plots.py."""
import math
import random
import re

import plots


def test_short_series_are_untouched():
    assert plots.keep_indices(list(range(2000))) == list(range(2000))


def test_downsampling_keeps_the_maximum_and_the_ends():
    rng = random.Random(3)
    values = [rng.random() for _ in range(100_000)]
    values[77_777] = 5.0
    values[5] = None
    values[6] = float("nan")
    idx = plots.keep_indices(values)
    assert len(idx) <= 2000
    assert 77_777 in idx and idx[0] == 0 and idx[-1] == 99_999
    assert idx == sorted(set(idx))
    # every bucket's envelope survives: the min of the kept points is the true min
    finite = [v for v in values if v is not None and not math.isnan(v)]
    assert min(values[i] for i in idx if values[i] is not None and not math.isnan(values[i])) == min(finite)


def test_downsampling_a_single_spike_in_zeros():
    values = [None] * 50_000
    values[123] = 1e-3
    assert 123 in plots.keep_indices(values, 100)


def test_svg_is_inlinable_with_prefixed_ids():
    from matplotlib.figure import Figure
    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.plot([1, 2, 3], [1, 4, 9], marker="o")
    svg = plots.to_svg(fig, "zz9")
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "<?xml" not in svg and "<metadata" not in svg and "<style" not in svg
    ids = re.findall(r'\bid="([^"]+)"', svg)
    assert ids and all(i.startswith("zz9-") for i in ids)
    assert all(r.startswith("zz9-") for r in re.findall(r'(?:url\(#|href="#)([^")]+)', svg))
    assert not re.search(r'^<svg[^>]* width=', svg)


def _lines(ax):
    return {line.get_label(): line for line in ax.get_lines()}


def test_scheduled_lr_gets_a_secondary_lr_axis():
    import synth
    cell = synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=8, model="gpt-tiny", steps=30,
                           lr_schedule="warmup_cosine")
    fig = plots.loss_figure(cell["result"])
    assert len(fig.axes) == 2
    loss_ax, lr_ax = fig.axes
    assert loss_ax.get_ylabel() == "loss" and lr_ax.get_ylabel() == "lr"
    assert "reference (dp1)" in _lines(loss_ax) and "lr" not in _lines(loss_ax)
    lr_line = _lines(lr_ax)["lr"]
    assert list(lr_line.get_ydata()) == cell["result"]["runs"]["reference"]["lr"]
    assert lr_line.get_linestyle() == "--" and lr_line.get_linewidth() < 1.5
    # the resumed run follows the schedule: one lr curve, not one per run
    assert list(_lines(lr_ax)) == ["lr"]
    assert loss_ax.get_zorder() > lr_ax.get_zorder()     # the loss stays on top
    assert "save at step 8" in _lines(loss_ax)


def test_constant_lr_draws_nothing_new():
    import synth
    cell = synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=8, model="gpt-tiny", steps=30)
    assert len(set(cell["result"]["runs"]["reference"]["lr"])) == 1
    fig = plots.loss_figure(cell["result"])
    assert len(fig.axes) == 1 and "lr" not in _lines(fig.axes[0])
    oracle = synth.make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4)
    assert plots.loss_figure(oracle["result"]) is None and plots.loss_svg(oracle["result"], "x") is None


def test_oracle_cell_with_scheduled_lr_draws_the_lr_alone():
    import synth
    cell = synth.make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4, lr_schedule="warmup_cosine")
    assert cell["result"]["runs"]["reference"]["loss"] is None
    fig = plots.loss_figure(cell["result"])
    assert fig is not None and len(fig.axes) == 1
    assert fig.axes[0].get_ylabel() == "lr"
    assert set(_lines(fig.axes[0])) == {"lr", "save at step 4"}
    svg = plots.loss_svg(cell["result"], "o1")
    assert ">lr<" in svg and ">lr (no loss)<" in svg


def test_a_resumed_lr_that_leaves_the_schedule_is_drawn_too():
    """A resume that lost its scheduler position shows as a second lr curve."""
    import synth
    cell = synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=8, model="gpt-tiny", steps=30,
                           lr_schedule="warmup_cosine")
    resumed = cell["result"]["runs"]["resumed"]
    resumed["lr"] = [None] + [synth.lr_at(s - 8, 30, "warmup_cosine") for s in resumed["steps"][1:]]
    lr_ax = plots.loss_figure(cell["result"]).axes[1]
    assert set(_lines(lr_ax)) == {"lr", "lr, resumed (dp3, from step 8)"}


REDS = ("#d62728", "#c62828", "#b71c1c")


def _series_lines(fig):
    """The drawn |diff| series ("run/group" labels) of every panel."""
    return [line for ax in fig.axes for line in ax.get_lines() if "/" in line.get_label()]


def test_diff_groups_are_never_red_and_styled_by_their_checks():
    import matplotlib.colors
    import synth
    cell = synth.make_cell("adam", "dp_reshardable", 2, resume_dp=3, save_at=4, model="gpt-tiny",
                           fail={"group": "exp_avg", "step": 6, "run": "resumed"})
    result = cell["result"]
    result["checks"] = [c for c in result["checks"] if not c["name"].endswith("-main_params")]
    fig, _ = plots.diff_figure(result, 6)
    lines = _series_lines(fig)
    assert {line.get_label() for line in lines} >= {"resumed/exp_avg", "uninterrupted/exp_avg_sq"}
    for line in lines:
        assert matplotlib.colors.to_hex(line.get_color()) not in REDS, line.get_label()
    assert all(matplotlib.colors.to_hex(c) not in REDS for c in plots.GROUP_COLORS)
    width = {line.get_label(): line.get_linewidth() for line in lines}
    alpha = {line.get_label(): line.get_alpha() for line in lines}
    assert width["resumed/exp_avg"] > width["resumed/params"]          # the failed check's group
    assert width["uninterrupted/exp_avg"] > width["resumed/params"]    # (the group, in every run)
    assert alpha["resumed/main_params"] < 1 and alpha["resumed/params"] == 1   # main_params: no check
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "exp_avg (check failed)" in legend and "main_params (not checked)" in legend
    assert "params" in legend                     # its checks passed: plain
    assert "exp_avg_sq (check failed)" in legend  # the failed check is on "state": every state group


def test_grad_norm_figure_goes_log_beyond_two_decades():
    import synth
    cell = synth.make_cell("lion", "dp_reshardable", 2, resume_dp=3, save_at=4)
    result = cell["result"]
    fig = plots.grad_norm_figure(result)
    ax = fig.axes[0]
    assert ax.get_yscale() == "linear" and ax.get_title() == "grad norm"       # 1 .. 1/12
    assert set(_lines(ax)) == {"reference (dp1)", "uninterrupted (dp2)", "resumed (dp3, from step 4)",
                               "save at step 4"}
    for run in result["runs"].values():
        run["grad_norm"] = [10.0 ** -s for s in run["steps"]]
    ax = plots.grad_norm_figure(result).axes[0]
    assert ax.get_yscale() == "log" and ax.get_title() == "grad norm (log scale)"
    for run in result["runs"].values():
        run["grad_norm"] = [None] * len(run["steps"])
    assert plots.grad_norm_figure(result) is None
    assert not plots.spans_decades([0.0, 1e-5, 1.0], 2)      # a zero cannot go on a log axis
