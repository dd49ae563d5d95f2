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
