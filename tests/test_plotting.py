"""Fan chart legends: the shared band key and each panel's seed legend never overlap each other,
never lie on a panel's data area (curves, bands, budget, data-end and target lines), never run
wider than a panel, and long run ids are shortened to what tells a panel's runs apart."""

from __future__ import annotations

import copy
import io

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.legend import Legend
from matplotlib.text import Text

from forecast import report as rp
from forecast.data import FarFromDataWarning
from forecast.plotting import (
    SEED_LEGEND_CHARS,
    plot_fan_chart,
    short_run_labels,
    trim_label,
    wrap_title,
)

LONG = "2024-11-30_sweepA_{recipe}_lr3e-4_bs512_seed{seed}"
LONG_RECIPE = "2026-11-30_sweepB_{recipe}_cispo_lr3e-4_bs512_offpolicy8_fp32head"
KEY_LABELS = ["90%", "50%", "median", "last observed", "budget"]

# ----------------------------------------------------------------------------- labels


def test_seed_labels_keep_what_differs_between_the_runs_of_a_panel():
    ids = [LONG.format(recipe="cispo", seed=s) for s in range(3)]
    assert short_run_labels(ids) == ["seed0", "seed1", "seed2"]
    assert short_run_labels(["scalerl_8b-s0", "scalerl_8b-s1"]) == ["s0", "s1"]
    # a number's own minus and point do not split it
    assert short_run_labels(["a_lr1e-4_s0", "a_lr3e-4_s0"]) == ["lr1e-4", "lr3e-4"]
    assert short_run_labels(["x_lr0.001_s0", "x_lr0.003_s0"]) == ["lr0.001", "lr0.003"]
    # words that vary apart from each other are both kept, the shared ones between them dropped
    assert short_run_labels(["lr1e-4_bs512_seed0", "lr3e-4_bs512_seed1"]) == ["lr1e-4 seed0", "lr3e-4 seed1"]
    assert short_run_labels([1, 2]) == ["1", "2"]


def test_long_labels_are_trimmed_with_an_ellipsis_and_stay_distinct():
    one = short_run_labels([LONG.format(recipe="cispo", seed=0)])  # a lone run: nothing to compare with
    assert len(one[0]) <= SEED_LEGEND_CHARS and "\u2026" in one[0] and one[0].endswith("seed0")
    ids = [f"{w}-{'x' * 30}-{k}" for k, w in enumerate(["alpha", "beta", "gamma"])]
    labels = short_run_labels(ids)
    assert all(len(label) <= SEED_LEGEND_CHARS for label in labels)
    assert len(set(labels)) == 3
    # cut ends that would coincide are numbered rather than merged
    same_ends = [f"{'a' * 30}{k}{'b' * 30}" for k in range(2)]
    labels = short_run_labels(same_ends, max_chars=12)
    assert len(set(labels)) == 2 and all(len(label) <= 12 for label in labels)
    assert trim_label("short") == "short"
    # ids that differ only in their separators are named whole
    assert short_run_labels(["a_b", "a-b"]) == ["a_b", "a-b"]


# ----------------------------------------------------------------------------- geometry


def _renderer(fig):
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _panels(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def _overlap(a, b) -> bool:
    """Boxes share area (touching edges do not count)."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 0.5 and min(a.y1, b.y1) - max(a.y0, b.y0) > 0.5


def _check_legends(fig, n_panels):
    r = _renderer(fig)
    panels = _panels(fig)
    assert len(panels) == n_panels
    # every legend drawn, the figure's and the panels' (a legend kept with add_artist included)
    legends = [*fig.legends, *(c for ax in panels for c in ax.get_children() if isinstance(c, Legend))]
    boxes = [leg.get_window_extent(r) for leg in legends]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not _overlap(a, b), f"legends overlap: {a} and {b}"
        for ax in panels:  # the data area: curves, bands, budget, data-end and target lines
            assert not _overlap(a, ax.bbox), f"a legend lies on the panel {ax.get_title()!r}"
            assert not _overlap(a, ax.title.get_window_extent(r)), f"a legend covers the title {ax.get_title()!r}"
            assert not _overlap(a, ax.xaxis.get_tightbbox(r)), f"a legend covers the x axis of {ax.get_title()!r}"
        # inside the figure: a plain savefig (no bbox_inches="tight") shows them whole
        assert fig.bbox.x0 - 1 <= a.x0 and a.x1 <= fig.bbox.x1 + 1 and fig.bbox.y0 - 1 <= a.y0 and a.y1 <= fig.bbox.y1 + 1
    assert len(fig.legends) == 1, "one band key for the whole figure"
    key = [t.get_text() for t in fig.legends[0].get_texts()]
    assert [text for text in key if not text.startswith("target ")] == KEY_LABELS  # a target line adds its own entry
    seed_legends = [ax.get_legend() for ax in panels]
    assert all(leg is not None for leg in seed_legends), "every panel keeps its own seed legend"
    assert len(legends) == 1 + n_panels
    for ax, leg in zip(panels, seed_legends, strict=True):
        assert not {t.get_text() for t in leg.get_texts()} & set(KEY_LABELS), "band entries only in the key"
        box = leg.get_window_extent(r)
        assert box.width <= ax.bbox.width, "a seed legend wider than its panel"
        assert ax.bbox.x0 <= box.x0 and box.x1 <= ax.bbox.x1, "a seed legend sticks out of its panel's column"
        assert box.y1 <= ax.bbox.y0, "a seed legend sits under its own panel"
    return r


def _with_long_ids(fitted):
    fc = copy.copy(fitted)
    runs = fitted.runs_.copy()
    seed = runs["run_id"].str.rsplit("-s", n=1).str[-1]
    runs["run_id"] = [LONG.format(recipe=rec, seed=s) for rec, s in zip(runs["recipe"], seed, strict=True)]
    fc.runs_ = runs
    return fc


def test_fan_chart_legends_overlap_neither_each_other_nor_the_data(fitted):
    fig = plot_fan_chart(fitted, budget=2e5)
    try:
        _check_legends(fig, len(fitted.recipes))
        for ax in _panels(fig):
            labels = [t.get_text() for t in ax.get_legend().get_texts()]
            assert labels == ["s0", "s1"]
            # its own dotted line at that recipe's last compute
            last = fitted.runs_.loc[fitted.runs_["recipe"] == ax.get_title(), "compute"].max()
            dotted = [ln for ln in ax.get_lines() if ln.get_linestyle() == ":"]
            assert len(dotted) == 1 and dotted[0].get_xdata()[0] == pytest.approx(last)
    finally:
        plt.close(fig)


def test_long_run_ids_are_shortened_and_do_not_widen_the_panels(fitted):
    short = plot_fan_chart(fitted, budget=2e5)
    long = plot_fan_chart(_with_long_ids(fitted), budget=2e5)
    try:
        _check_legends(long, len(fitted.recipes))
        for ax in _panels(long):
            texts = [t.get_text() for t in ax.get_legend().get_texts()]
            assert texts == ["seed0", "seed1"]
            assert all(len(t) <= SEED_LEGEND_CHARS for t in texts)
        # same figure, same panels: the long ids took no room from the data
        assert tuple(long.get_size_inches()) == tuple(short.get_size_inches())
        for a, b in zip(_panels(short), _panels(long), strict=True):
            assert b.bbox.width == pytest.approx(a.bbox.width, rel=0.02)
            assert b.bbox.height == pytest.approx(a.bbox.height, rel=0.02)
    finally:
        plt.close(short)
        plt.close(long)


def test_many_distinct_long_ids_in_one_panel_stay_under_it(fitted):
    fc = copy.copy(fitted)
    runs = fitted.runs_.copy()
    # eight made-up runs per recipe whose ids differ in several places
    parts = []
    for k in range(8):
        part = runs[runs["run_id"].str.endswith("-s0")].copy()
        part["run_id"] = part["recipe"] + f"_lr{k}e-4_warmup{100 * k}_bs512_seed{k % 2}"
        parts.append(part)
    fc.runs_ = pd.concat(parts, ignore_index=True)
    fig = plot_fan_chart(fc, budget=2e5, title="a title over the key")
    try:
        r = _check_legends(fig, len(fitted.recipes))
        (title,) = [t for t in fig.get_children() if isinstance(t, Text) and t.get_text() == "a title over the key"]
        assert not _overlap(title.get_window_extent(r), fig.legends[0].get_window_extent(r))
        assert title.get_window_extent(r).y1 <= fig.bbox.y1 + 1
        for ax in _panels(fig):
            texts = [t.get_text() for t in ax.get_legend().get_texts()]
            assert len(set(texts)) == 8 and all(len(t) <= SEED_LEGEND_CHARS for t in texts)
    finally:
        plt.close(fig)


class _LongRecipeNames:
    """`fitted` with its recipes named as a big sweep names them (70 characters); forecasts are the fit's own."""

    def __init__(self, fc):
        self._fc, self.compute_unit = fc, fc.compute_unit
        self.recipes = [LONG_RECIPE.format(recipe=r) for r in fc.recipes]
        self._fitted_name = dict(zip(self.recipes, fc.recipes, strict=True))
        self.runs_ = fc.runs_.assign(recipe=[LONG_RECIPE.format(recipe=r) for r in fc.runs_["recipe"]])

    def predict(self, compute, *, recipe, kind):
        return self._fc.predict(compute, recipe=self._fitted_name[recipe], kind=kind)


def test_titles_wrap_at_word_separators_and_keep_every_character():
    name = LONG_RECIPE.format(recipe="scalerl_scout_moe")
    lines = wrap_title(name, 33).split("\n")
    assert all(len(line) <= 33 for line in lines) and "".join(lines) == name
    assert lines[0] == "2026-11-30_sweepB_scalerl_scout_" and "lr3e-4" in "".join(lines[1:])  # numbers stay whole
    assert wrap_title("scalerl_8b", 33) == "scalerl_8b"
    assert wrap_title("x" * 40, 16) == "x" * 16 + "\n" + "x" * 16 + "\n" + "x" * 8


def test_long_recipe_names_stay_inside_their_own_columns(fitted):
    fc = _LongRecipeNames(fitted)
    fig = plot_fan_chart(fc, budget=2e5)
    try:
        r = _check_legends(fig, len(fc.recipes))
        panels = _panels(fig)
        assert [ax.get_title().replace("\n", "") for ax in panels] == fc.recipes, "wrapped, nothing cut"
        boxes = [ax.title.get_window_extent(r) for ax in panels]
        for i, (ax, box) in enumerate(zip(panels, boxes, strict=True)):
            assert fig.bbox.x0 - 1 <= box.x0 and box.x1 <= fig.bbox.x1 + 1, f"title {i} runs off the figure"
            assert fig.bbox.y0 - 1 <= box.y0 and box.y1 <= fig.bbox.y1 + 1, f"title {i} runs off the figure"
            assert box.y0 >= ax.bbox.y1 - 1, f"title {i} lies on its panel"
            for other in boxes[i + 1:]:
                assert not _overlap(box, other), "titles run into each other"
    finally:
        plt.close(fig)


def test_names_with_dollar_signs_are_drawn_as_written_not_read_as_maths(fitted):
    """matplotlib reads text between two '$' as maths: a recipe named 'dapo $\\lr$ sweep' failed the fan chart, and
    with it `forecast report` (a traceback, no page), and 'grpo $\\alpha$' was drawn as 'grpo α'."""
    from forecast.plotting import as_written

    fc = _LongRecipeNames(fitted)
    names = ["dapo $\\lr$ sweep", "grpo $\\alpha$", "cost $5 a run"][:len(fitted.recipes)]
    renamed = dict(zip(fitted.recipes, names, strict=True))
    fc.recipes, fc._fitted_name = names, dict(zip(names, fitted.recipes, strict=True))
    fc.runs_ = fitted.runs_.assign(recipe=fitted.runs_["recipe"].map(renamed), run_id="$" + fitted.runs_["run_id"] + "$")
    fig = plot_fan_chart(fc, budget=2e5)
    try:
        _renderer(fig)  # drawn: the maths was parsed here
        titles = [ax.title for ax in _panels(fig)]
        assert [title._preprocess_math(title.get_text()) for title in titles] == [(name, False) for name in names]
        seeds = [text for ax in _panels(fig) for text in ax.get_legend().get_texts()]
        assert seeds and all(text._preprocess_math(text.get_text())[1] is False for text in seeds)
        assert all("$" in text._preprocess_math(text.get_text())[0] for text in seeds)  # 's0$': the ids' ends
    finally:
        plt.close(fig)
    assert as_written("a $b$ c") == "a \\$b\\$ c" and as_written(3) == "3"


def test_one_panel_key_fits_the_figure(fitted):
    fig = fitted.plot(recipes="scalerl_8b", budget=2e5)
    try:
        _check_legends(fig, 1)
    finally:
        plt.close(fig)


def test_report_fan_chart_keeps_legends_off_the_target_line(fitted, monkeypatch):
    """The report draws its target line after plot_fan_chart; it lies inside the panels, where no
    legend is."""
    seen = {}
    monkeypatch.setattr(rp, "figure_png", lambda fig, **kw: seen.setdefault("fig", fig) and b"")
    rp.fan_chart_png(fitted, 2e5, 0.6, recipes=list(fitted.recipes))
    fig = seen["fig"]
    try:
        r = _check_legends(fig, len(fitted.recipes))
        for ax in _panels(fig):
            target = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-."]
            assert len(target) == 1
            y = ax.transData.transform((1.0, 0.6))[1]
            assert ax.bbox.y0 < y < ax.bbox.y1
            for leg in [ax.get_legend(), *fig.legends]:
                box = leg.get_window_extent(r)
                assert not (box.y0 <= y <= box.y1 and min(box.x1, ax.bbox.x1) > max(box.x0, ax.bbox.x0))
    finally:
        plt.close(fig)


def test_plotting_into_the_callers_axes_leaves_their_figure_alone(fitted):
    """Two recipes drawn by two calls into one figure of the caller's: no figure-level key (two
    calls stacked two in one place) and each call's key outside its own panel, right of it."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
    try:
        first, second = fitted.recipes[:2]
        fitted.plot(recipes=first, ax=left, budget=1e6)
        fitted.plot(recipes=second, ax=right)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        assert fig.legends == []
        for panel in (left, right):
            keys = [a for a in panel.artists if isinstance(a, Legend)]
            assert len(keys) == 1 and keys[0].get_window_extent(renderer).x0 >= panel.bbox.x1
            assert panel.get_legend() is not None  # its seeds, under it
        labels = [t.get_text() for t in [a for a in left.artists if isinstance(a, Legend)][0].get_texts()]
        assert labels == KEY_LABELS
    finally:
        plt.close(fig)


def test_plot_fan_chart_called_directly_refuses_what_it_cannot_draw(fitted):
    """forecast.plotting is imported directly (the quickstart does, for the forest): its fan chart
    checks its arguments as ScalingForecaster.plot does. A name was split into its letters, and
    kind="run" drew a recipe's runs as one zigzag band."""
    with pytest.raises(KeyError, match="unknown recipe 'ppo'; known: scalerl"):
        plot_fan_chart(fitted, recipes=["ppo"])
    with pytest.raises(ValueError, match="kind='run'"):
        plot_fan_chart(fitted, recipes=["scalerl_8b"], kind="run")
    with pytest.raises(ValueError, match="recipes is empty"):
        plot_fan_chart(fitted, recipes=[])
    with pytest.raises(ValueError, match="budget must be finite and > 0"):
        plot_fan_chart(fitted, budget=-1e5)
    fig = plot_fan_chart(fitted, recipes="scalerl_8b")
    try:
        assert [ax.get_title() for ax in _panels(fig)] == ["scalerl_8b"]
    finally:
        plt.close(fig)


def test_fan_chart_takes_recipes_as_an_array_or_series(fitted):
    """A notebook picks recipes from a table (`table["recipe"]`, `.unique()`): an array or a Series
    of two or more names raised numpy's and pandas' "truth value ... is ambiguous"."""
    import numpy as np

    two = list(fitted.recipes[:2])
    for recipes in (np.array(two), pd.Series(two), (r for r in two)):
        fig = fitted.plot(recipes=recipes)
        try:
            assert [ax.get_title() for ax in _panels(fig)] == two
        finally:
            plt.close(fig)


def test_fan_chart_draws_a_recipe_named_twice_once(fitted, small_sweep):
    """recipes=[a, a] drew two identical panels, and the run table's own column (`runs["recipe"]`, a
    name per evaluation) a panel per row. Each recipe is drawn once, in the order first named, as
    decide(recipes=...) ranks a repeated name once."""
    first, second = fitted.recipes[:2]
    for recipes, drawn in (([first, first], [first]), ([second, first, second], [second, first]),
                           (small_sweep["recipe"], list(dict.fromkeys(small_sweep["recipe"])))):
        fig = fitted.plot(recipes=recipes)
        try:
            assert [ax.get_title() for ax in _panels(fig)] == drawn
        finally:
            plt.close(fig)


def test_fan_chart_refuses_a_column_count_below_one(fitted):
    for ncols in (0, -1, 2.5):  # 0 was a ZeroDivisionError, -1 matplotlib's "figure size must be positive"
        with pytest.raises(ValueError, match="ncols must be a whole number >= 1"):
            fitted.plot(ncols=ncols)
    fig = fitted.plot(ncols=1)
    try:
        assert len({round(ax.get_position().x0, 3) for ax in _panels(fig)}) == 1  # one column
    finally:
        plt.close(fig)


def test_forest_into_the_callers_axes_leaves_their_layout_alone(fitted):
    """As the fan chart does with axes it is given: no tight_layout on the caller's figure, which
    moved their other panels."""
    from forecast.plotting import plot_asymptote_forest

    fig, (forest, other) = plt.subplots(1, 2, figsize=(10, 3))
    try:
        before = [tuple(a.get_position().bounds) for a in (forest, other)]
        assert plot_asymptote_forest(fitted, ax=forest) is fig
        assert [tuple(a.get_position().bounds) for a in (forest, other)] == before
        assert [t.get_text() for t in forest.get_yticklabels()][-1] == fitted.asymptote().query(
            "level == 'recipe'").sort_values("q50")["recipe"].iloc[-1]  # the best at the top
    finally:
        plt.close(fig)


def test_the_key_names_what_the_bands_are_of(fitted):
    """A "mean" chart's bands leave out seed spread and evaluation noise, so most dots fall outside
    them; its key said only "90%", "50%", "median", as a "new_run" chart's does, and read as a
    miscalibrated forecast once shown without the code that drew it."""
    titles = {}
    for kind in ("new_run", "mean"):
        fig = fitted.plot(budget=2e5, kind=kind)
        try:
            _check_legends(fig, len(fitted.recipes))
            titles[kind] = fig.legends[0].get_title().get_text()
        finally:
            plt.close(fig)
    assert "new run" in titles["new_run"] and "mean" in titles["mean"]
    fig, panel = plt.subplots()
    try:
        fitted.plot(recipes=fitted.recipes[0], ax=panel, kind="mean")  # the caller's axes: the key beside the panel
        (key,) = [a for a in panel.artists if isinstance(a, Legend)]
        assert key.get_title().get_text() == titles["mean"]
    finally:
        plt.close(fig)


def test_forest_refuses_a_reference_that_is_no_pass_rate(fitted):
    """A string was drawn as a category at x=0 and 60 (a percent) as a line far right, squeezing
    the intervals into a corner without a word."""
    from forecast.plotting import plot_asymptote_forest

    for reference in ("0.6", 60, float("nan"), True):
        with pytest.raises(ValueError, match="reference must be a pass rate in"):
            plot_asymptote_forest(fitted, reference=reference)
    fig = plot_asymptote_forest(fitted, reference=0.6)
    try:
        (line,) = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "--"]
        assert line.get_xdata()[0] == 0.6
    finally:
        plt.close(fig)


def test_the_forest_names_its_target_line_on_the_image(fitted):
    """The forest drew its reference as a bare dashed line: notebook 01 shows the chart with no
    caption, and one pasted into slides lost the report's caption too, so nothing said what the
    line at 0.59 was. The x axis now names it, as the fan chart's key names its target line."""
    from forecast.plotting import plot_asymptote_forest

    fig = plot_asymptote_forest(fitted, reference=0.59)
    try:
        assert "dashed line: target 0.59" in fig.axes[0].get_xlabel()
    finally:
        plt.close(fig)
    fig = plot_asymptote_forest(fitted)
    try:
        assert "target" not in fig.axes[0].get_xlabel()
    finally:
        plt.close(fig)


def test_the_forest_says_which_bar_is_which_interval_on_the_image(fitted):
    """The forest's x axis said "50% and 90% intervals" without saying which bar was which: the
    report's caption says thick = 50%, thin = 90%, but notebook 01's forest and a chart copied out
    of the report have no caption. A key under the x label now names the median, the thick bar and
    the thin bar, drawn as they are, and covers no interval."""
    import numpy as np

    from forecast.plotting import plot_asymptote_forest

    for on_callers_axes in (False, True):
        fig = plot_asymptote_forest(fitted, reference=0.6, ax=plt.subplots()[1] if on_callers_axes else None)
        try:
            r = _renderer(fig)
            ax = fig.axes[0]
            key = ax.get_legend()
            assert key is not None, "the forest has no key"
            widths = {t.get_text(): h.get_linewidth() for t, h in zip(key.get_texts(), key.legend_handles, strict=True)}
            assert "median" in widths and widths["50% interval"] > widths["90% interval"]
            # the key's thick bar is the drawn 50% interval, the inner one: narrower than the thin 90% one
            bars = {lw: [np.ptp(line.get_xdata()) for line in ax.get_lines() if line.get_linewidth() == lw]
                    for lw in (widths["50% interval"], widths["90% interval"])}
            assert len(bars[widths["50% interval"]]) == len(fitted.recipes) == len(bars[widths["90% interval"]])
            assert all(a < b for a, b in zip(bars[widths["50% interval"]], bars[widths["90% interval"]], strict=True))
            box = key.get_window_extent(r)
            assert box.y1 <= ax.get_window_extent(r).y0, "the key lies on the intervals"
            assert box.y1 <= ax.xaxis.label.get_window_extent(r).y0 + 0.5, "the key covers the x label"
            if not on_callers_axes:  # a figure of ours keeps the key whole
                assert fig.bbox.y0 - 1 <= box.y0 and fig.bbox.x0 - 1 <= box.x0 and box.x1 <= fig.bbox.x1 + 1
        finally:
            plt.close(fig)


def test_the_fan_chart_forest_and_cross_validation_chart_name_the_metric_alike(fitted):
    """The fan chart's y axis said "metric", the cross-validation chart's "observed - forecast (pass
    rate)" and the forest's x axis named no unit: three words for one quantity on the report's
    charts. Each now says "metric", the word the fan chart and the notebooks' charts use."""
    from forecast.plotting import plot_asymptote_forest, plot_cross_validation

    cv = pd.DataFrame({"cut": 0.5, "ahead": [1.2, 1.5, 2.0], "observed": [0.40, 0.42, 0.45],
                       "forecast": [0.41, 0.42, 0.43], "lower": [0.35, 0.36, 0.37], "upper": [0.47, 0.48, 0.49],
                       "covered": True, "level": 0.9})
    labels = {}
    for name, fig in (("fan chart", fitted.plot(recipes=fitted.recipes[0])), ("forest", plot_asymptote_forest(fitted)),
                      ("cross-validation", plot_cross_validation(cv))):
        try:
            fig.canvas.draw()
            labels[name] = " ".join(t for ax in fig.axes for t in (ax.get_xlabel(), ax.get_ylabel()) if t)
        finally:
            plt.close(fig)
    for name, said in labels.items():
        assert "metric" in said and "pass rate" not in said, f"{name}: {said}"


def test_a_grid_of_the_callers_with_spare_axes_leaves_the_key_readable(fitted):
    """Three recipes into a 2 x 2 grid: the key sits right of the last panel, where the spare
    fourth axes was drawn over it (the key's handles showed, its words did not)."""
    fig, grid = plt.subplots(2, 2, figsize=(10, 7))
    try:
        fitted.plot(ax=grid, budget=2e5)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        assert not grid[1, 1].get_visible()
        (key,) = [a for a in grid.ravel()[len(fitted.recipes) - 1].artists if isinstance(a, Legend)]
        for text in key.get_texts():
            box = text.get_window_extent(renderer)
            assert not any(_overlap(box, ax.bbox) for ax in _panels(fig)), f"{text.get_text()!r} lies under a panel"
    finally:
        plt.close(fig)


def test_the_target_line_is_named_in_the_key(fitted):
    """The report's target line was drawn after the chart, outside its key: a forwarded image showed
    an unexplained red line. Now plot(target=) draws it in every panel and names it in the key."""
    fig = fitted.plot(budget=2e5, target=0.6)
    try:
        _check_legends(fig, len(fitted.recipes))
        assert "target 0.6" in [t.get_text() for t in fig.legends[0].get_texts()]
        for ax in _panels(fig):
            assert [ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_linestyle() == "-."] == [0.6]
    finally:
        plt.close(fig)
    fig = fitted.plot(budget=2e5)
    try:
        assert not any(t.get_text().startswith("target") for t in fig.legends[0].get_texts())
    finally:
        plt.close(fig)
    for bad in (1.5, -0.1, "0.6", True, float("nan")):
        with pytest.raises(ValueError, match="target must be a pass rate"):
            fitted.plot(budget=2e5, target=bad)


class _TwoLevels:
    """A stand-in forecaster whose two recipes sit far apart: 'low' near 0.2, 'high' near 0.8."""

    compute_unit = "flops"
    recipes = ["low", "high"]

    def __init__(self):
        grid = [1e3 * 10 ** (i / 4) for i in range(9)]
        self.runs_ = pd.DataFrame([{"recipe": r, "run_id": f"{r}-s0", "compute": c, "metric": level}
                                   for r, level in (("low", 0.2), ("high", 0.8)) for c in grid])

    def predict(self, grid, recipe, kind):
        level = 0.2 if recipe == "low" else 0.8
        return pd.DataFrame({"compute": grid, "q05": level - 0.05, "q25": level - 0.02, "q50": level,
                             "q75": level + 0.02, "q95": level + 0.05})


def test_a_target_line_keeps_every_panels_data_on_the_chart():
    """The target's y-range was widened inside the loop over panels: set_ylim on the first panel turned
    autoscaling off for every panel sharing its y axis, so a later recipe's data (here 0.8 beside a
    first recipe at 0.2 and a target of 0.3) lay off the chart."""
    for target in (0.3, 0.95):
        fig = plot_fan_chart(_TwoLevels(), budget=1e6, target=target)
        try:
            for ax in _panels(fig):
                low, high = ax.get_ylim()
                assert low < 0.15 and high > 0.85, (target, low, high)  # both recipes' bands, 0.15-0.85
                assert low < target - 0.02 and high > target + 0.02
        finally:
            plt.close(fig)


@pytest.mark.parametrize("budget", [1e300, 1.7e308])
def test_a_budget_near_the_largest_float_draws_the_fan_chart_without_an_overflow(budget):
    """`forecast demo --budget 1e300` (and `forecast report`, which draws the same chart) printed
    matplotlib's "overflow encountered in exp" and "... in power": the log axis's 5% margin of 297
    decades reached past 1e308, and so did its ticks, tens of decades apart, one stride past each end."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("ignore", FarFromDataWarning)  # the budget is meant to be far out here
        fig = plot_fan_chart(_TwoLevels(), budget=budget)
        try:
            fig.savefig(io.BytesIO(), format="png")  # the ticks are placed when it is drawn
            for ax in _panels(fig):
                low, high = ax.get_xlim()
                assert low < 1.001e3 and budget <= high < float("inf")  # the data (from 1e3) and the budget line in view
        finally:
            plt.close(fig)


def test_every_row_of_panels_says_what_its_y_axis_is(fitted):
    """On a grid of several rows, only the top-left panel said 'metric': a reader at the fifth row
    of a large sweep's chart had no label in sight."""
    fig = plot_fan_chart(fitted, budget=2e5, ncols=2)  # 3 recipes: 2 rows
    try:
        panels = _panels(fig)
        assert [ax.get_ylabel() for ax in panels] == ["metric", "", "metric"]
    finally:
        plt.close(fig)


class _LongForestNames:
    """`fitted` with 66-character recipe names, for the forest plot; its numbers are the fit's own."""

    def __init__(self, fc):
        self._fc = fc
        self.recipes = [LONG_RECIPE.format(recipe=r) for r in fc.recipes]
        self._long = dict(zip(fc.recipes, self.recipes, strict=True))

    def asymptote(self):
        table = self._fc.asymptote()
        return table.assign(recipe=table["recipe"].map(lambda r: self._long.get(r, r)))

    def draws(self, name):
        return self._fc.draws(name)


def test_forest_keeps_room_for_its_intervals_beside_long_recipe_names(fitted):
    """At a fixed 6 inches, names of 42 characters left the intervals 1.7 inches, and names of 66
    did not fit at all (tight_layout gave up, and they ran off the figure's left edge)."""
    import warnings

    from forecast.plotting import plot_asymptote_forest

    for fc in (fitted, _LongForestNames(fitted)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "Tight layout not applied" is a UserWarning
            fig = plot_asymptote_forest(fc)
        try:
            ax = fig.axes[0]
            assert ax.get_position().width * fig.get_figwidth() >= 3.5
            renderer = fig.canvas.get_renderer()
            for label in ax.get_yticklabels():
                assert label.get_window_extent(renderer).x0 >= fig.bbox.x0 - 1, f"{label.get_text()} runs off the figure"
        finally:
            plt.close(fig)


def _convergence_marks(fig) -> list[Text]:
    texts = [*fig.texts, *(t for ax in fig.axes for t in ax.texts)]
    return [t for t in texts if "fit did not converge" in t.get_text()]


@pytest.mark.parametrize("chart", ["fan_chart", "fan_chart_one_panel", "fan_chart_in_callers_axes", "forest"])
def test_a_flagged_fits_charts_say_so_on_the_image(fitted, monkeypatch, chart):
    """The page's red banner stayed on the page: a fan chart or forest pasted alone into slides
    showed a fit that did not converge as if it had. The image itself now says so, in red; a
    converged fit's image carries no such mark."""
    from matplotlib.colors import to_hex

    from forecast.inference import ConvergenceReport
    from forecast.plotting import plot_asymptote_forest

    def draw():
        if chart == "forest":
            return plot_asymptote_forest(fitted, reference=0.6)
        if chart == "fan_chart_in_callers_axes":
            return fitted.plot(recipes=fitted.recipes[0], ax=plt.subplots(figsize=(5, 3.5))[1])
        return fitted.plot(recipes=fitted.recipes[0] if chart == "fan_chart_one_panel" else None, budget=2e5, target=0.6)

    flagged = ConvergenceReport(max_rhat=1.0304, min_ess_bulk=900.0, min_ess_tail=800.0, divergences=3, n_draws=2000)
    monkeypatch.setattr(fitted, "diagnostics", lambda: flagged)
    fig = draw()
    try:
        marks = _convergence_marks(fig)
        assert len(marks) == 1 and to_hex(marks[0].get_color()) == "#c53030"
        said = marks[0].get_text().replace("\n", " ")
        # each problem in short (the diagnostics say the rest): mutant that survived, the problems in full
        assert said == "fit did not converge: R-hat up to 1.030 (> 1.01); 3 divergent transitions \u2014 see its diagnostics"
        r = _renderer(fig)
        box = marks[0].get_window_extent(r)
        # whole inside the figure, and over nothing else that is drawn: the key, a panel, a title
        assert fig.bbox.x0 - 1 <= box.x0 and box.x1 <= fig.bbox.x1 + 1 and box.y1 <= fig.bbox.y1 + 1
        others = [leg.get_window_extent(r) for leg in fig.legends] + [ax.bbox for ax in _panels(fig)]
        others += [ax.title.get_window_extent(r) for ax in _panels(fig) if ax.get_title()]
        if chart != "fan_chart_in_callers_axes":  # there it is written inside the panel, on a white box
            assert not any(_overlap(box, other) for other in others)
    finally:
        plt.close("all")
    converged = ConvergenceReport(max_rhat=1.002, min_ess_bulk=900.0, min_ess_tail=800.0, divergences=0, n_draws=2000)
    monkeypatch.setattr(fitted, "diagnostics", lambda: converged)
    fig = draw()
    try:
        assert _convergence_marks(fig) == []
    finally:
        plt.close("all")


def test_the_mark_of_a_fit_flagged_without_a_problem_named_reads_once_see_its_diagnostics():
    """A fit flagged unconverged whose report listed no problem (a reweighted fit's Pareto k NaN: not <= 0.7, yet not
    > 0.7 either) marked its charts "fit did not converge: see its diagnostics \u2014 see its diagnostics". Pareto k
    NaN is a problem named now, and a report of another kind that names none reads "see its diagnostics" once."""
    from types import SimpleNamespace

    from forecast.inference import ConvergenceReport
    from forecast.plotting import convergence_mark

    nan_k = ConvergenceReport(max_rhat=1.002, min_ess_bulk=900.0, min_ess_tail=800.0, divergences=0, n_draws=2000,
                              pareto_k=float("nan"), reweight_efficiency=0.5)
    assert not nan_k.converged
    assert convergence_mark(SimpleNamespace(diagnostics=lambda: nan_k)) == (
        "fit did not converge: Pareto k could not be computed \u2014 see its diagnostics")
    unnamed = SimpleNamespace(converged=False, problems=lambda: [])
    assert convergence_mark(SimpleNamespace(diagnostics=lambda: unnamed)) == "fit did not converge \u2014 see its diagnostics"


def test_the_key_beside_a_callers_panel_is_kept_by_a_tight_save(fitted):
    """On the caller's axes the key sits right of the last panel, outside it. add_artist clipped it
    to the panel, so matplotlib's tight bounding box (savefig(bbox_inches='tight'), and Jupyter's
    inline figures, which save that way) left it out: the image showed bands and lines with no key."""
    fig, panel = plt.subplots()
    try:
        fitted.plot(recipes=fitted.recipes[0], ax=panel, budget=2e5)
        (key,) = [a for a in panel.artists if isinstance(a, Legend)]
        r = _renderer(fig)
        tight, box = fig.get_tightbbox(r), key.get_window_extent(r).transformed(fig.dpi_scale_trans.inverted())
        assert box.x1 <= tight.x1 + 0.01 and box.x0 >= tight.x0 - 0.01
    finally:
        plt.close(fig)


def test_the_convergence_mark_on_a_callers_small_panel_leaves_most_of_it_in_view():
    """Inside a caller's panel the mark sits over the data: four problems on a 4 x 3 inch panel
    covered 30% of it at full size; smaller and on a see-through box it covers under a quarter."""
    from forecast.plotting import _mark_in_panel

    mark = ("fit did not converge: R-hat up to 1.030 (> 1.01); 3 divergent transitions; bulk ESS as low as 76 "
            "(< 200); tail ESS as low as 60 (< 200) \u2014 see its diagnostics")
    fig, ax = plt.subplots(figsize=(4, 3))
    try:
        _mark_in_panel(ax, mark)
        renderer = _renderer(fig)
        box = ax.texts[0].get_bbox_patch().get_window_extent(renderer)
        assert box.width * box.height < 0.25 * ax.bbox.width * ax.bbox.height
        assert ax.texts[0].get_bbox_patch().get_alpha() < 0.9  # the curve shows through
    finally:
        plt.close(fig)


class _ManySeeds:
    """A stand-in forecaster of one recipe with `n` runs, its runs scattered over the median curve."""

    compute_unit = "flops"
    recipes = ["a"]

    def __init__(self, n):
        grid = [1e3 * 10 ** (i / 4) for i in range(9)]
        self.runs_ = pd.DataFrame([{"recipe": "a", "run_id": f"a-s{s}", "compute": c, "metric": 0.5 + 0.01 * (s - n / 2)}
                                   for s in range(n) for c in grid])

    def predict(self, grid, recipe, kind):
        return pd.DataFrame({"compute": grid, "q05": 0.40, "q25": 0.45, "q50": 0.5, "q75": 0.55, "q95": 0.60})


def test_seeds_are_told_apart_from_the_forecast_lines_and_from_each_other_without_colour():
    """A panel's first seed was drawn in the band's and median's own blue: its dots vanished into the
    median line on a curve the fit follows (the synthetic Table 1 sweep), and a fourth seed's red
    dots and an eighth's grey ones were the target's and the data end's colours. Seeds also differed
    by colour alone, and the second and third (orange, green: every panel of a 3-seed sweep) look
    the same to a protanope. Each seed now has its own marker as well as a colour none of the
    chart's lines has."""
    from matplotlib.colors import to_hex

    fig = plot_fan_chart(_ManySeeds(8), budget=1e6, target=0.55)
    try:
        (panel,) = _panels(fig)
        seeds = panel.get_legend().legend_handles
        assert len(seeds) == 8
        lines = [ln for ln in panel.get_lines() if ln.get_linestyle() != "None"]  # median, data end, budget, target
        line_colours = {to_hex(ln.get_color()) for ln in lines} | {to_hex(band.get_facecolor()[0]) for band in
                                                                    panel.collections}  # the bands, without alpha
        assert len(lines) == 4
        dots = [ln for ln in panel.get_lines() if ln.get_linestyle() == "None"]
        assert len(dots) == 8
        for dot in dots:
            assert to_hex(dot.get_color()) not in line_colours, f"{dot.get_label()} has a line's colour"
        assert len({dot.get_marker() for dot in dots}) == 8, "seeds differ by their markers too"
        assert len({(to_hex(dot.get_color()), dot.get_marker()) for dot in dots}) == 8
        assert [h.get_marker() for h in seeds] == [dot.get_marker() for dot in dots]  # the legend shows them
    finally:
        plt.close(fig)


class _Levels(_TwoLevels):
    """A stand-in forecaster of `n` recipes whose levels climb from 0.2 (the first) to 0.8 (the last)."""

    def __init__(self, n):
        grid = [1e3 * 10 ** (i / 4) for i in range(9)]
        self.recipes = [f"r{k}" for k in range(n)]
        self._level = {r: 0.2 + 0.6 * k / (n - 1) for k, r in enumerate(self.recipes)}
        self.runs_ = pd.DataFrame([{"recipe": r, "run_id": f"{r}-s0", "compute": c, "metric": level}
                                   for r, level in self._level.items() for c in grid])

    def predict(self, grid, recipe, kind):
        level = self._level[recipe]
        return pd.DataFrame({"compute": grid, "q05": level - 0.05, "q25": level - 0.02, "q50": level,
                             "q75": level + 0.02, "q95": level + 0.05})


def test_the_reports_fan_chart_images_share_one_y_range(monkeypatch):
    """A sweep of 10 or more recipes is drawn as several fan-chart images, each of which took its own
    y range: on the synthetic Table 1 sweep part 1 ran 0.25-0.75 and part 2 0.27-0.66, so the same
    target line and the same pass rate stood at different heights in the two, and a recipe of part 2
    looked to climb further than one of part 1 that climbed as far. Every image now has one range."""
    drawn = []
    monkeypatch.setattr(rp, "figure_png", lambda fig, **kw: drawn.append(fig) or b"")
    fc = _Levels(10)  # 4 rows of 3: two images
    figures = rp.fan_chart_figures(fc, 1e6, 0.5, list(fc.recipes))
    try:
        assert len(figures) == 2 and len(drawn) == 2
        ranges = {tuple(round(v, 6) for v in ax.get_ylim()) for fig in drawn for ax in _panels(fig)}
        assert len(ranges) == 1, ranges
        ((low, high),) = ranges
        assert low < 0.15 and high > 0.85  # every recipe's band, 0.15-0.85, in every image
        for fig in drawn:
            _check_legends(fig, len(_panels(fig)))
    finally:
        plt.close("all")
    drawn.clear()
    rp.fan_chart_figures(fc, 1e6, 0.5, fc.recipes[:3])  # one image: its own range, as before
    try:
        (fig,) = drawn
        low, high = _panels(fig)[0].get_ylim()
        assert 0.1 < low < 0.2 and high < 0.6  # the target 0.5 on it, 0.8 not
    finally:
        plt.close("all")
    for bad in ((0.5, 0.2), (0.1,), (0.1, float("nan")), ("0", "1")):
        with pytest.raises(ValueError, match="ylim must be"):
            plot_fan_chart(fc, recipes=fc.recipes[:1], ylim=bad)


def test_a_fan_charts_y_range_is_learnt_without_laying_the_figure_out():
    """The report learns each fan-chart image's y range before it draws the images with their shared one;
    it drew each image whole for it (key, seed legends, tight_layout: most of a report's time on a sweep of
    10 or more recipes). fan_chart_ylim draws the panels alone, and must give the whole figure's range."""
    from forecast.plotting import fan_chart_ylim

    fc = _Levels(10)
    # one row of panels, two rows, one panel; no target, one within the bands, above them, below them
    # (each figure drawn whole takes about 2 s: every pairing of the two was 25 s of the suite)
    cases = [(fc.recipes[:3], None), (fc.recipes[:3], 0.05), (fc.recipes[3:9], 0.5), (fc.recipes[3:9], 0.95),
             (fc.recipes[9:], None)]
    try:
        for recipes, target in cases:
            whole = plot_fan_chart(fc, recipes=recipes, budget=1e6, target=target).axes[0].get_ylim()
            assert fan_chart_ylim(fc, recipes=recipes, budget=1e6, target=target) == whole
            plt.close("all")
    finally:
        plt.close("all")


class _ShortSpan(_ManySeeds):
    """`_ManySeeds` of `n` recipes whose evaluations span 2.2e12-3.1e12 flops, under a fifth of a decade."""

    def __init__(self, n_recipes, n_seeds=3):
        grid = [2.2e12 * (3.1 / 2.2) ** (i / 8) for i in range(9)]
        self.recipes = [f"r{k}" for k in range(n_recipes)]
        self.runs_ = pd.DataFrame([{"recipe": r, "run_id": f"{r}-s{s}", "compute": c, "metric": 0.5}
                                   for r in self.recipes for s in range(n_seeds) for c in grid])


def _x_tick_labels(ax, renderer):
    low, high = ax.get_xlim()
    labels = [t for t in ax.xaxis.get_ticklabels(which="both") if t.get_text() and low <= t.get_position()[0] <= high]
    return sorted(((t.get_text(), t.get_window_extent(renderer)) for t in labels), key=lambda tb: tb[1].x0)


@pytest.mark.parametrize(("n_recipes", "budget"), [(1, None), (3, None), (3, 3.3e12)])
def test_compute_tick_labels_of_a_short_span_do_not_run_into_each_other(n_recipes, budget):
    """Over less than about 0.4 decades of compute matplotlib labels every minor tick of the log axis:
    on runs evaluated from 2.2e12 to 3.1e12 flops, '2.4x10^12', '2.6x10^12', '2.8x10^12' and
    '3x10^12' ran into each other. Every second (or third...) label is kept instead, at least two."""
    fig = plot_fan_chart(_ShortSpan(n_recipes), budget=budget)
    try:
        r = _renderer(fig)
        for ax in _panels(fig):
            labels = _x_tick_labels(ax, r)
            assert len(labels) >= 2, labels
            for (a_text, a), (b_text, b) in zip(labels, labels[1:], strict=False):
                assert b.x0 - a.x1 > 0, f"{a_text!r} runs into {b_text!r}"
        fig.savefig(io.BytesIO(), format="png", dpi=100, bbox_inches="tight")  # as the report saves it: unchanged
        r = _renderer(fig)
        for ax in _panels(fig):
            labels = _x_tick_labels(ax, r)
            assert len(labels) >= 2 and all(b.x0 > a.x1 for (_, a), (_, b) in zip(labels, labels[1:], strict=False))
    finally:
        plt.close(fig)


def _dense_cross_validation(n=400, seed=0):
    """A cross_validate()-shaped table of two cuts whose errors fill the chart to every corner."""
    import numpy as np

    rng = np.random.default_rng(seed)
    parts = []
    for cut, reach in ((0.25, 4.5), (0.5, 2.2)):
        ahead = np.exp(rng.uniform(0, np.log(reach), n))
        forecast = rng.uniform(0.3, 0.6, n)
        observed = forecast + rng.normal(0, 0.03, n)
        parts.append(pd.DataFrame({"cut": cut, "run_id": "a-s0", "ahead": ahead, "observed": observed,
                                   "forecast": forecast, "lower": forecast - 0.045, "upper": forecast + 0.045,
                                   "covered": abs(observed - forecast) <= 0.045, "level": 0.9}))
    cv = pd.concat(parts, ignore_index=True)
    cv.attrs = {"level": 0.9}
    return cv


@pytest.mark.parametrize("on_callers_axes", [False, True])
def test_the_cross_validation_key_covers_none_of_its_dots(on_callers_axes):
    """The key sat inside the panel where matplotlib found the least data ('best'), which on a dense
    chart is still on data: on the shipped trainer sweep's 1122 held-out evaluations it covered the
    largest miss of all (-0.088), and on this table of 800 it covers one wherever it goes. It now sits
    under the x label, as the fan chart's seed legends do, inside the figure (on a caller's axes,
    inside what a tight save keeps)."""
    import numpy as np

    from forecast.plotting import plot_cross_validation

    fig = plot_cross_validation(_dense_cross_validation(), ax=plt.subplots(figsize=(7, 5))[1] if on_callers_axes else None)
    try:
        r = _renderer(fig)
        (ax,) = fig.axes
        key = ax.get_legend().get_window_extent(r)
        dots = np.vstack([c.get_offset_transform().transform(c.get_offsets()) for c in ax.collections
                          if type(c).__name__ == "PathCollection"])
        assert len(dots) == 800
        inside = (dots[:, 0] >= key.x0) & (dots[:, 0] <= key.x1) & (dots[:, 1] >= key.y0) & (dots[:, 1] <= key.y1)
        assert not inside.any(), f"the key covers {inside.sum()} evaluations"
        assert not _overlap(key, ax.bbox) and not _overlap(key, ax.xaxis.get_tightbbox(r))
        if on_callers_axes:  # their figure, laid out by them: a tight save (Jupyter's inline figures) keeps it
            tight = fig.get_tightbbox(r).transformed(fig.dpi_scale_trans)
            assert tight.y0 <= key.y0 + 1 and tight.x0 <= key.x0 + 1 and key.x1 <= tight.x1 + 1
        else:
            assert fig.bbox.x0 - 1 <= key.x0 and key.x1 <= fig.bbox.x1 + 1 and fig.bbox.y0 - 1 <= key.y0
        assert [t.get_text() for t in ax.get_legend().get_texts()][0].startswith("cut 0.25: ")
    finally:
        plt.close("all")


def test_the_forests_bars_are_the_asymptotes_quantiles_they_are_named_for(fitted):
    """The thin bar (the key's 90% interval) runs from A's 5% to its 95% quantile, the thick one (50%)
    from 25% to 75%, the dot at the median: the fit's own asymptote() for the 90% bar and the median."""
    import numpy as np

    from forecast.plotting import FOREST_STYLE, plot_asymptote_forest

    fig = plot_asymptote_forest(fitted)
    try:
        ax = fig.axes[0]
        names = [tick.get_text() for tick in ax.get_yticklabels()]
        bars = {}
        for line in ax.get_lines():
            y = int(round(float(np.atleast_1d(line.get_ydata())[0])))
            kind = {FOREST_STYLE["90% interval"]["lw"]: "90%", FOREST_STYLE["50% interval"]["lw"]: "50%"}.get(
                line.get_linewidth(), "median")
            bars.setdefault(names[y], {})[kind] = np.asarray(line.get_xdata(), dtype=float)
    finally:
        plt.close(fig)
    table = fitted.asymptote().query("level == 'recipe'").set_index("recipe")
    assert set(bars) == set(fitted.recipes)
    for k, recipe in enumerate(fitted.recipes):
        draws = fitted.draws("A")[:, k]
        np.testing.assert_allclose(bars[recipe]["90%"], table.loc[recipe, ["q05", "q95"]].to_numpy(dtype=float))
        np.testing.assert_allclose(bars[recipe]["50%"], np.quantile(draws, [0.25, 0.75]))
        np.testing.assert_allclose(bars[recipe]["median"], [table.loc[recipe, "q50"]])


class _KnownQuantiles:
    """A stand-in forecaster of two recipes whose forecast quantiles are levels of their own at every
    compute (q05 0.1, q25 0.3, q50 0.5, q75 0.7, q95 0.9), each recipe evaluated up to a compute of
    its own, and each run's evaluations a known climb; it records the grids and kinds it is asked for."""

    compute_unit = "flops"
    recipes = ["short", "long"]
    ENDS = {"short": 1e4, "long": 1e5}

    def __init__(self):
        self.asked = []
        self.runs_ = pd.DataFrame([{"recipe": r, "run_id": f"{r}-s{s}", "compute": c, "metric": 0.2 + 0.05 * k + 0.01 * s}
                                   for r, end in self.ENDS.items() for s in range(2)
                                   for k, c in enumerate([1e3, 3e3, end])])

    def predict(self, grid, recipe, kind):
        self.asked.append((recipe, kind, list(grid)))
        return pd.DataFrame({"compute": grid, "q05": 0.1, "q25": 0.3, "q50": 0.5, "q75": 0.7, "q95": 0.9})


def _band_y_range(band) -> tuple[float, float]:
    import numpy as np

    ys = np.vstack([path.vertices for path in band.get_paths()])[:, 1]
    return float(ys.min()), float(ys.max())


@pytest.mark.parametrize("kind", ["new_run", "mean"])
def test_the_fan_chart_draws_each_quantile_line_and_point_where_its_name_says(kind):
    """Known answers for what a reader takes off the chart: the band named 90% spans q05-q95 and the
    one named 50% q25-q75, the median line is q50, the compute axis is logarithmic from the first
    evaluation to the budget and says its unit, each seed's dots are its evaluations, the data-end
    line is the recipe's own last compute, the budget and target lines sit at the values the key
    names. Mutants that survived the other fast tests: a 50% band from q05/q95, the median at q75, a
    linear compute axis, dots shifted by one evaluation, the sweep's data end on every panel, a budget
    line at half the budget, a target of 0.65 named 'target 0.7', a grid stopping at the data short
    of the budget, and predict() asked for 'new_run' whatever kind the chart was drawn for."""
    import numpy as np

    fc = _KnownQuantiles()
    fig = plot_fan_chart(fc, budget=1e6, target=0.65, kind=kind)
    try:
        panels = _panels(fig)
        assert [p.get_title() for p in panels] == ["short", "long"]
        for panel, recipe in zip(panels, fc.recipes, strict=True):
            assert panel.get_xscale() == "log" and panel.get_xlabel() == "compute (flops)"
            bands = {band.get_label(): band for band in panel.collections}
            assert _band_y_range(bands["90%"]) == pytest.approx((0.1, 0.9))
            assert _band_y_range(bands["50%"]) == pytest.approx((0.3, 0.7))
            lines = {line.get_label(): line for line in panel.get_lines()}
            np.testing.assert_allclose(lines["median"].get_ydata(), 0.5)
            assert float(lines["last observed"].get_xdata()[0]) == fc.ENDS[recipe]
            assert float(lines["budget"].get_xdata()[0]) == 1e6
            np.testing.assert_allclose(lines["target 0.65"].get_ydata(), 0.65)
            for run_id, run in fc.runs_[fc.runs_["recipe"] == recipe].groupby("run_id"):
                np.testing.assert_allclose(lines[run_id].get_xdata(), run["compute"])
                np.testing.assert_allclose(lines[run_id].get_ydata(), run["metric"])
        assert [(recipe, k) for recipe, k, _ in fc.asked] == [("short", kind), ("long", kind)]
        for _, _, grid in fc.asked:  # from the sweep's first evaluation out to the budget
            assert grid[0] == pytest.approx(1e3) and grid[-1] == pytest.approx(1e6)
    finally:
        plt.close(fig)


def test_a_target_on_the_edge_of_a_given_y_range_is_drawn_inside_the_frame():
    """Mutant that survived: the y range widened only to the target itself, not 0.03 past it, so the
    report's shared range of (0.1, 0.9) put a target of 0.9 on the panel's frame, where it vanishes."""
    fig = plot_fan_chart(_TwoLevels(), budget=1e6, target=0.9, ylim=(0.1, 0.9))
    try:
        for ax in _panels(fig):
            assert ax.get_ylim() == pytest.approx((0.1, 0.93))
    finally:
        plt.close(fig)


def test_the_cross_validation_key_says_how_many_evaluations_fell_inside():
    """Mutant that survived: the key's share inverted (the misses' share named as the evaluations
    inside), so a cut with 3 of 4 evaluations inside its band read '25% of 4 inside'."""
    from forecast.plotting import plot_cross_validation

    cv = pd.DataFrame({"cut": 0.5, "run_id": "a-s0", "ahead": [1.2, 1.5, 2.0, 3.0], "observed": [0.50, 0.51, 0.49, 0.60],
                       "forecast": 0.5, "lower": 0.45, "upper": 0.55, "covered": [True, True, True, False], "level": 0.9})
    cv.attrs = {"level": 0.9}
    fig = plot_cross_validation(cv)
    try:
        assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["cut 0.5: 75% of 4 inside"]
    finally:
        plt.close(fig)


def _known_bands_cross_validation():
    """Two cuts whose bands are known by hand: cut 0.25's evaluations at reaches 1.2x and 4x, three
    at each, with intervals running (0.01, 0.02, 0.09) and (0.05, 0.10, 0.40) below their forecasts
    and (0.03, 0.03, 0.30) and (0.12, 0.12, 0.12) above (medians 0.02, 0.10 below and 0.03, 0.12
    above; means differ); cut 0.5's three at 1.5x and 2x, 0.05 either side. Forecasts differ, so a
    band drawn at the intervals' edges rather than relative to their forecasts lies elsewhere."""
    import numpy as np

    forecast = np.array([0.40, 0.50, 0.60, 0.45, 0.55, 0.65, 0.50, 0.50, 0.50])
    below = np.array([0.01, 0.02, 0.09, 0.05, 0.10, 0.40, 0.05, 0.05, 0.05])
    above = np.array([0.03, 0.03, 0.30, 0.12, 0.12, 0.12, 0.05, 0.05, 0.05])
    error = np.array([0.00, 0.05, -0.05, 0.00, 0.20, -0.20, 0.01, -0.06, 0.02])
    cv = pd.DataFrame({"cut": [0.25] * 6 + [0.5] * 3, "run_id": "a-s0",
                       "ahead": [1.2, 1.2, 1.2, 4.0, 4.0, 4.0, 1.5, 1.5, 2.0], "observed": forecast + error,
                       "forecast": forecast, "lower": forecast - below, "upper": forecast + above,
                       "covered": (error >= -below) & (error <= above), "level": 0.9})
    cv.attrs = {"level": 0.9}
    return cv


def test_the_cross_validation_chart_draws_each_cuts_band_and_errors_where_its_key_says():
    """Known answers for what a reader takes off the cross-validation chart: each cut's band, in its
    dots' colour, spans the median of its intervals' edges relative to their forecasts over the
    evaluations about that far ahead; the dots are observed - forecast around a line at 0; the axes
    and the key say so. Mutants that survived the other fast tests: a band from the intervals' lower
    edges themselves, one band over all reaches, bands shifted a bin to the right (off the evaluations
    they stand for), the mean of the edges for their median, each cut's band in the next cut's
    colour, the y axis named 'forecast - observed', the x axis 'compute', the line at 0 left out."""
    import numpy as np
    from matplotlib.collections import PathCollection, PolyCollection
    from matplotlib.colors import to_hex

    from forecast.plotting import plot_cross_validation

    cv = _known_bands_cross_validation()
    fig = plot_cross_validation(cv)
    try:
        (ax,) = fig.axes
        dots = {c.get_label().split(":")[0]: c for c in ax.collections if isinstance(c, PathCollection)}
        colour_of = {cut: to_hex(c.get_facecolor()[0], keep_alpha=False) for cut, c in dots.items()}
        assert sorted(colour_of) == ["cut 0.25", "cut 0.5"] and len(set(colour_of.values())) == 2
        for cut, value in (("cut 0.25", 0.25), ("cut 0.5", 0.5)):
            rows = cv[cv["cut"] == value]
            np.testing.assert_allclose(dots[cut].get_offsets(), np.column_stack([rows["ahead"], rows["observed"] - rows["forecast"]]))
        bands = []
        for band in (c for c in ax.collections if isinstance(c, PolyCollection)):
            xy = np.vstack([path.vertices for path in band.get_paths()])
            bands.append((xy[:, 0].min(), xy[:, 0].max(), xy[:, 1].min(), xy[:, 1].max(),
                          to_hex(band.get_facecolor()[0], keep_alpha=False)))
        assert len(bands) == 4
        expected = {("cut 0.25", 1.2): (-0.02, 0.03), ("cut 0.25", 4.0): (-0.10, 0.12),
                    ("cut 0.5", 1.5): (-0.05, 0.05), ("cut 0.5", 2.0): (-0.05, 0.05)}
        for (cut, reach), (low, high) in expected.items():
            over = [(y0, y1) for x0, x1, y0, y1, colour in bands
                    if x0 <= reach * (1 + 1e-9) and reach <= x1 * (1 + 1e-9) and colour == colour_of[cut]]
            assert len(over) == 1, (cut, reach, bands)
            assert over[0] == pytest.approx((low, high)), (cut, reach)
        zero = [line for line in ax.get_lines() if np.allclose(line.get_ydata(), 0)]
        assert len(zero) == 1 and zero[0].get_transform() == ax.get_yaxis_transform()  # across the whole panel
        assert ax.get_ylabel() == "observed - forecast (metric)"
        assert ax.get_xlabel() == "reach: compute / the run's last compute before the cut"
        key = ax.get_legend()
        assert key.get_title().get_text() == "bands: the 90% interval"
        assert [t.get_text() for t in key.get_texts()] == ["cut 0.25: 67% of 6 inside", "cut 0.5: 67% of 3 inside"]
    finally:
        plt.close(fig)


def _flagged_cuts(*cuts_problems):
    """_known_bands_cross_validation with the fits of its cuts as given: (cut, problems), flagged where
    problems are given."""
    cv = _known_bands_cross_validation()
    cv.attrs["fits"] = [{"cut": cut, "runs": 1, "left_out": [], "converged": not problems, "problems": problems}
                        for cut, problems in cuts_problems]
    return cv


@pytest.mark.parametrize("on_callers_axes", [False, True])
def test_the_cross_validation_charts_mark_names_the_cut_its_problems_and_what_they_mean(on_callers_axes):
    """Known answer for the words on a cross-validation chart whose cut's fit did not converge: the cut,
    each problem in short and the caveat that the chart's coverage and errors are approximate, above
    the panel on a figure of our own (over none of it) and at its top on a caller's. Mutant that
    survived: the caveat left out, so a pasted chart named the problems without saying what they
    mean for the numbers it shows."""
    from forecast.plotting import plot_cross_validation

    cv = _flagged_cuts((0.25, []), (0.5, ["R-hat up to 1.121 (> 1.01): chains disagree",
                                          "8 divergent transitions: the posterior geometry was not explored reliably"]))
    fig = plot_cross_validation(cv, ax=plt.subplots(figsize=(7, 4.2))[1] if on_callers_axes else None)
    try:
        (mark,) = _convergence_marks(fig)
        assert mark.get_text().replace("\n", " ") == ("fit did not converge at cut 0.5: R-hat up to 1.121 (> 1.01); "
                                                      "8 divergent transitions \u2014 its coverage and errors are approximate")
        r = _renderer(fig)
        (ax,) = _panels(fig)
        box, panel = mark.get_window_extent(r), ax.bbox
        if on_callers_axes:  # inside the panel, at its top
            assert panel.x0 <= box.x0 and box.x1 <= panel.x1 and panel.y1 - 0.1 * panel.height <= box.y1 <= panel.y1
        else:  # above the panel, inside the figure
            assert box.y0 >= panel.y1 and box.y1 <= fig.bbox.y1 + 1 and fig.bbox.x0 - 1 <= box.x0 and box.x1 <= fig.bbox.x1 + 1
    finally:
        plt.close("all")


def test_on_a_callers_panel_each_flagged_cut_starts_its_own_line_of_the_mark():
    """On a caller's axes the cross-validation chart's mark, one line per flagged cut, was wrapped as
    one paragraph: its line breaks became spaces, and the first cut's problems ran on into the next
    cut's words ('tail ESS as low as 60 (< 400) fit did not / converge at cut 0.5: ...'), where a
    figure of our own starts each cut on a line of its own."""
    from forecast.plotting import plot_cross_validation

    cv = _flagged_cuts((0.25, ["R-hat up to 1.121 (> 1.01): chains disagree",
                               "8 divergent transitions: the posterior geometry was not explored reliably",
                               "tail ESS as low as 60 (< 400): the 5% and 95% quantiles are noisy"]),
                       (0.5, ["3 divergent transitions: the posterior geometry was not explored reliably"]))
    for ax in (None, plt.subplots(figsize=(5, 3.5))[1]):
        fig = plot_cross_validation(cv, ax=ax)
        try:
            (mark,) = _convergence_marks(fig)
            lines = mark.get_text().split("\n")
            assert lines[0].startswith("fit did not converge at cut 0.25: R-hat")
            assert sum(line.startswith("fit did not converge at cut 0.5: 3 divergent") for line in lines) == 1, lines
            assert " ".join(lines) == ("fit did not converge at cut 0.25: R-hat up to 1.121 (> 1.01); 8 divergent transitions; "
                                       "tail ESS as low as 60 (< 400) fit did not converge at cut 0.5: 3 divergent transitions "
                                       "\u2014 its coverage and errors are approximate")
        finally:
            plt.close("all")


def test_a_one_panel_charts_mark_adds_to_the_figure_rather_than_taking_the_panels_room():
    """Mutant that survived: the figure left its height under the mark, so tight_layout made room for
    the mark's lines out of the panel: a cross-validation chart of two flagged cuts lost a third of
    its panel's height to them. The figure grows by the mark; the panel keeps its height."""
    from forecast.plotting import plot_cross_validation

    problems = ["R-hat up to 1.121 (> 1.01): chains disagree", "8 divergent transitions: the posterior geometry was not explored reliably",
                "tail ESS as low as 60 (< 400): the 5% and 95% quantiles are noisy"]
    heights = []
    for cuts in (((0.25, []), (0.5, [])), ((0.25, problems), (0.5, problems))):
        fig = plot_cross_validation(_flagged_cuts(*cuts))
        try:
            heights.append(fig.axes[0].get_position().height * fig.get_figheight())
        finally:
            plt.close(fig)
    converged, flagged = heights
    assert flagged >= 0.95 * converged, heights
