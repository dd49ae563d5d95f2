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
