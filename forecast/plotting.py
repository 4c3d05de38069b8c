"""Fan charts and forest plots, beside the model rather than inside it."""

from __future__ import annotations

import numbers
import re

import matplotlib.pyplot as plt  # no backend forced: notebooks keep inline figures
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, Formatter, FuncFormatter, LogLocator, NullLocator

from .data import FarFromDataWarning, warn_if_far_from_data
from .formatting import unknown_name_message
from .inference import as_real
from .thread_warnings import this_threads_warnings_dropped


def _grid(fc, budget, n=80):
    lo = float(fc.runs_["compute"].min())
    hi = max(float(fc.runs_["compute"].max()), float(budget or 0))
    return np.geomspace(lo, hi, n)


# a log axis's ends stay this many decades inside float64's range, so its ticks can go one decade beyond
_LOG_AXIS_HEADROOM_DECADES = 1.0


def log_x_margin(lo: float, hi: float, margin: float) -> float:
    """The x margin (a fraction of the span, as Axes.set_xmargin takes it) of a log axis over [lo, hi]:
    `margin`, shrunk where it would carry an end past float64's range. Autoscaling a budget of 1e300
    with the default 5% of 285 decades asked for 1e314, and matplotlib said "overflow encountered in
    exp" on the terminal (`forecast demo --budget 1e300`, `forecast report`)."""
    decades = np.log10(hi) - np.log10(lo)
    if not decades > 0:
        return margin
    top = np.log10(np.finfo(float).max) - _LOG_AXIS_HEADROOM_DECADES
    bottom = np.log10(np.finfo(float).tiny) + _LOG_AXIS_HEADROOM_DECADES
    room = min(top - np.log10(hi), np.log10(lo) - bottom) / decades
    return float(min(margin, max(room, 0.0)))


class FiniteLogLocator(LogLocator):
    """matplotlib's log-axis ticks, less those past float64's range. Over a few hundred decades its ticks
    are tens of decades apart, and it places one a stride beyond each end (off the axis, never drawn):
    past 1e308 that tick overflowed, "overflow encountered in power" on the terminal."""

    def tick_values(self, vmin, vmax):
        with np.errstate(over="ignore"):
            ticks = super().tick_values(vmin, vmax)
        return ticks[np.isfinite(ticks)]


# where run ids split into words; not inside a number: "3e-4", "0.001"
_SEPARATORS = re.compile(r"[_/:|,\s]+|(?<!\de)-+|(?<!\d)\.|\.(?!\d)")
SEED_LEGEND_CHARS = 20  # the longest seed label a panel's legend shows; longer ones are cut in the middle
SEED_FONTSIZE = 8
_PANEL_FILL = 0.92  # of a panel's width a seed legend may take
_CHAR_WIDTH_EM = 0.62  # a generous mean glyph width (DejaVu Sans), for laying out columns before any drawing


def _words(run_id: str) -> list[tuple[int, int]]:
    """(start, end) of each word of a run id, the separators between them left out."""
    spans, at = [], 0
    for sep in _SEPARATORS.finditer(run_id):
        if sep.start() > at:
            spans.append((at, sep.start()))
        at = sep.end()
    if at < len(run_id):
        spans.append((at, len(run_id)))
    return spans or [(0, len(run_id))]


def trim_label(label: str, max_chars: int = SEED_LEGEND_CHARS) -> str:
    """`label` cut in the middle to at most max_chars, an ellipsis where the cut is (the end,
    where seeds are usually named, is kept)."""
    if len(label) <= max_chars:
        return label
    head = (max_chars - 1) // 2
    tail = max_chars - 1 - head
    return label[:head] + "\u2026" + label[len(label) - tail:]


TITLE_FONTSIZE = 13
_COLUMN_IN = 4.2  # the width of one column of the fan chart's own grid
_COLUMN_TITLE_IN = _COLUMN_IN * 0.9  # of that, the width a panel's title may take


def as_written(name) -> str:
    """A recipe's or run's name for matplotlib, drawn as written: it reads text between two '$' as maths, so a
    name like 'dapo $\\lr$ sweep' failed the chart (and with it the report, a traceback) and 'grpo $\\alpha$'
    was drawn as 'grpo α' beside a table that says otherwise. An escaped '\\$' is drawn as '$'."""
    return str(name).replace("$", r"\$")


def wrap_title(label: str, max_chars: int) -> str:
    """`label` on lines of at most max_chars, broken after its word separators (a word longer than
    that is cut). A panel's title is its recipe's name, and recipes of one sweep may differ anywhere
    in it, so it is wrapped rather than trimmed; on one line a name of 70 characters ran into its
    neighbours' titles and off the figure."""
    starts = [a for a, _ in _words(label)][1:]
    pieces = [label[a:b] for a, b in zip([0, *starts], [*starts, len(label)], strict=True)]  # a word and its separator
    lines, line = [], ""
    for piece in pieces:
        if line and len(line) + len(piece.rstrip()) > max_chars:
            lines.append(line)
            line = ""
        line += piece
        while len(line.rstrip()) > max_chars:  # one word wider than the panel
            lines.append(line[:max_chars])
            line = line[max_chars:]
    lines.append(line)
    return "\n".join(text.rstrip() for text in lines if text.strip())


def _title_chars(width_in: float) -> int:
    """The longest title line that fits width_in inches at TITLE_FONTSIZE (estimated, before drawing)."""
    return max(8, int(width_in * 72 / (TITLE_FONTSIZE * _CHAR_WIDTH_EM)))


def _differing_part(ids: list[str]) -> list[str]:
    """The words in which run ids differ. Ids of as many words each keep the positions where the
    words vary ("lr1e-4_bs512_seed0", "lr3e-4_bs512_seed1" -> "lr1e-4 seed0", "lr3e-4 seed1"; words
    next to each other keep their own separator); others lose the words all share at the start and
    at the end."""
    spans = [_words(r) for r in ids]
    words = [[r[a:b] for a, b in s] for r, s in zip(ids, spans, strict=True)]
    if len({len(w) for w in words}) == 1:
        varying = [k for k in range(len(words[0])) if len({w[k] for w in words}) > 1]
        if varying:
            runs, labels = [], []
            for k in varying:  # consecutive varying positions form one piece of the original text
                if runs and runs[-1][-1] == k - 1:
                    runs[-1].append(k)
                else:
                    runs.append([k])
            for r, s in zip(ids, spans, strict=True):
                labels.append(" ".join(r[s[group[0]][0]:s[group[-1]][1]] for group in runs))
            return labels
    shortest = min(len(w) for w in words)
    prefix = 0
    while prefix < shortest - 1 and len({w[prefix] for w in words}) == 1:
        prefix += 1
    suffix = 0
    while suffix < shortest - 1 - prefix and len({w[len(w) - 1 - suffix] for w in words}) == 1:
        suffix += 1
    return [r[s[prefix][0]:s[len(s) - 1 - suffix][1]] for r, s in zip(ids, spans, strict=True)]


def short_run_labels(run_ids, max_chars: int = SEED_LEGEND_CHARS) -> list[str]:
    """Legend labels for the runs of one panel: the words in which their ids differ, cut in the
    middle with an ellipsis when still longer than max_chars. ["cispo-s0", "cispo-s1"] -> ["s0",
    "s1"]; "2024-11-30_sweepA_cispo_lr3e-4_bs512_seed0" and its "...seed1" -> "seed0", "seed1".
    One run keeps its id (trimmed). Labels stay distinct: where cutting would merge two, they are
    numbered."""
    ids = [str(r) for r in run_ids]
    labels = _differing_part(ids) if len(ids) > 1 else ids
    if len(set(labels)) < len(labels):  # ids differing only in their separators: say them whole
        labels = ids
    labels = [trim_label(label, max_chars) for label in labels]
    if len(set(labels)) < len(labels):
        labels = [f"{i}: {trim_label(label, max_chars - len(str(i)) - 2)}" for i, label in enumerate(labels, 1)]
    return labels


def _renderer(fig):
    # Agg and the canvases built on it (inline, ipympl); else the one tight_layout itself would use
    get = getattr(fig.canvas, "get_renderer", None) or getattr(fig, "_get_renderer", None)
    try:
        return get() if get is not None else None
    except Exception:  # noqa: BLE001 - a canvas that cannot render yet: fall back to estimates
        return None


def _seed_legend_columns(labels, width_in: float) -> int:
    """As many columns as fit in width_in inches at SEED_FONTSIZE (estimated, before drawing)."""
    em = SEED_FONTSIZE / 72
    longest = max((len(label) for label in labels), default=1)
    column = (2.0 + 0.8 + 2.0) * em + longest * _CHAR_WIDTH_EM * em  # handle, its pad, column spacing, text
    return max(1, min(len(labels), int((width_in - 2 * em) // column)))


def _below_xlabel(panel, renderer, gap_pt: float = 4.0):
    """A transform for the panel's own axes fraction, shifted down past its tick labels and
    x label, so a legend anchored at (0.5, 0) sits under them and follows the panel when the layout
    moves it."""
    from matplotlib.transforms import ScaledTranslation

    fig = panel.figure
    if renderer is not None:
        below = panel.xaxis.get_tightbbox(renderer)
        drop_in = (panel.bbox.y0 - below.y0) / fig.dpi if below is not None else 0.0
    else:  # ticks, tick labels (10 pt) and the x label (11 pt) with their pads
        drop_in = 36 / 72
    return panel.transAxes + ScaledTranslation(0, -(drop_in + gap_pt / 72), fig.dpi_scale_trans)


def _add_seed_legend(panel, handles, labels, renderer):
    """The panel's own seed legend, under its x label: never on the curves, bands or reference
    lines, and never wider than the panel (columns are dropped until it fits)."""
    fig = panel.figure
    width_in = panel.get_position().width * fig.get_figwidth() * _PANEL_FILL
    ncol = _seed_legend_columns(labels, width_in)
    while True:
        legend = panel.legend(handles, labels, fontsize=SEED_FONTSIZE, ncol=ncol, loc="upper center",
                              bbox_to_anchor=(0.5, 0.0), bbox_transform=_below_xlabel(panel, renderer),
                              borderaxespad=0.0, framealpha=0.7, columnspacing=1.2, handletextpad=0.4,
                              markerscale=1.5)
        if ncol == 1 or renderer is None or legend.get_window_extent(renderer).width <= _PANEL_FILL * panel.bbox.width:
            return legend
        ncol -= 1


def _seed_legend_rows(labels_per_panel, panel_width_in: float) -> int:
    """Rows of the tallest seed legend, for the figure height."""
    return max((int(np.ceil(len(labels) / _seed_legend_columns(labels, panel_width_in)))
                for labels in labels_per_panel if labels), default=1)


class _LabelsOnlyAt(Formatter):
    """`inner`'s tick labels at the ticks in `keep`, none at the others (the cursor's readout is inner's)."""

    def __init__(self, inner, keep):
        self.inner, self.keep = inner, np.asarray(keep, dtype=float)

    def set_locs(self, locs):
        super().set_locs(locs)
        self.inner.set_locs(locs)  # a log formatter picks which of the minor ticks it labels here

    def __call__(self, x, pos=None):
        return self.inner(x, pos) if np.isclose(self.keep, x, rtol=1e-9, atol=0).any() else ""

    def format_data(self, value):
        return self.inner.format_data(value)

    def format_data_short(self, value):
        return self.inner.format_data_short(value)


def _thin_compute_tick_labels(panel, renderer, gap_px: float = 2.0) -> None:
    """Every second (third, ...) label of the compute axis where its labels run into each other, a
    label at a power of ten kept where there is one. Over less than about 0.4 decades matplotlib labels
    every minor tick of a log axis: on runs evaluated from 2.2e12 to 3.1e12, '2.4x10^12',
    '2.6x10^12', '2.8x10^12' and '3x10^12' overlapped."""
    if renderer is None:
        return
    low, high = sorted(panel.get_xlim())
    major = {label.get_position()[0] for label in panel.xaxis.get_majorticklabels()}
    labelled = sorted(((label.get_position()[0], label.get_window_extent(renderer))
                       for label in panel.xaxis.get_ticklabels(which="both")
                       if label.get_text() and low <= label.get_position()[0] <= high), key=lambda lb: lb[1].x0)

    def fits(kept):
        return all(b.x0 - a.x1 >= gap_px for (_, a), (_, b) in zip(kept, kept[1:], strict=False))

    if fits(labelled):
        return
    first_major = next((k for k, (x, _) in enumerate(labelled) if x in major), 0)
    step = next(k for k in range(2, len(labelled) + 1) if fits(labelled[first_major % k::k]))
    keep = [x for x, _ in labelled[first_major % step::step]]
    panel.xaxis.set_major_formatter(_LabelsOnlyAt(panel.xaxis.get_major_formatter(), keep))
    panel.xaxis.set_minor_formatter(_LabelsOnlyAt(panel.xaxis.get_minor_formatter(), keep))


# A seed's dots: a colour none of the chart's own lines has (the bands' and median's blue, the
# target's red, the data end's grey, the budget's black; a first seed in the median's blue vanished
# into it where the fit follows the data), and a marker of its own, so that seeds are told apart
# without colour too (orange and green, the second and third seeds, are one colour to a protanope).
# 7 colours beside 8 markers: 56 runs of a panel before a pair repeats.
SEED_COLOURS = ("tab:orange", "tab:purple", "tab:green", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
SEED_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")

# what the bands and median are of, as the key's title: a "mean" chart's bands leave out seed spread and
# evaluation noise, so most dots fall outside them, and without it looked like a miscalibrated "new_run" one
KEY_TITLES = {"new_run": "forecast for a new run's evaluations", "mean": "forecast of the recipe's mean curve"}


def _fan_chart_recipes(fc, recipes, budget, kind) -> list:
    """The recipes to draw, after refusing what a fan chart cannot draw. Here rather than in
    ScalingForecaster.plot, so that plot_fan_chart called directly is checked too: there a name
    was split into its letters, kind="run" joined a recipe's runs into one zigzag band, and an
    empty list or a budget <= 0 failed deep in matplotlib or drew nothing."""
    if kind not in ("new_run", "mean"):
        raise ValueError(f"plot() draws kind 'new_run' or 'mean', got {kind!r}; for one run's own forecast "
                         "use predict(compute, run_id=..., kind='run')")
    if isinstance(recipes, (str, numbers.Number)):
        recipes = [recipes]
    elif recipes is not None:  # an array or Series (table["recipe"], .unique()) has no truth value
        recipes = list(recipes)
    if recipes is not None:  # a table's names are text (validate_runs): its recipe 1 is "1"
        recipes = [recipe if isinstance(recipe, str) else str(recipe) for recipe in recipes]
        # each once, in the order first named, as decide() ranks them: [a, a] drew two identical panels,
        # and a run table's own column (runs["recipe"], a name per evaluation) a panel per row
        recipes = list(dict.fromkeys(recipes))
    if recipes is not None and len(recipes) == 0:
        raise ValueError(f"recipes is empty: name at least one of {', '.join(fc.recipes)} (or leave it out for all)")
    for recipe in recipes or []:
        if recipe not in fc.recipes:
            raise KeyError(unknown_name_message("recipe", recipe, fc.recipes))
    if budget is not None and not (isinstance(budget, (int, float, np.number)) and np.isfinite(budget) and budget > 0):
        raise ValueError(f"budget must be finite and > 0 (compute in {fc.compute_unit}), got {budget!r}")
    return recipes if recipes is not None else list(fc.recipes)


def _checked_target(target):
    """A target is a pass rate: a number in [0, 1], or None for no line."""
    if target is None:
        return None
    target = as_real(target)
    if isinstance(target, bool) or not isinstance(target, (int, float, np.number)) or not 0 <= target <= 1:
        raise ValueError(f"target must be a pass rate in [0, 1], got {target!r}")
    return float(target)


CONVERGENCE_MARK_COLOUR = "#c53030"  # the report's red (its banner's and NOT CONVERGED chip's)
CONVERGENCE_MARK_FONTSIZE = 10


def convergence_mark(fc) -> str | None:
    """For a fit that did not converge, the words its charts carry: 'fit did not converge: R-hat up
    to 1.030 (> 1.01); 3 divergent transitions - see its diagnostics'; None for a converged fit (or one
    without diagnostics). A chart is forwarded alone, pasted into slides without the page's banner."""
    diagnostics = getattr(fc, "diagnostics", None)
    report = diagnostics() if callable(diagnostics) else None
    if report is None or report.converged:
        return None
    problems = "; ".join(problem.split(":")[0] for problem in report.problems())
    # no problem to name (a report of another kind): "see its diagnostics" once, not "... — see its diagnostics" again
    return f"fit did not converge: {problems} \u2014 see its diagnostics" if problems else "fit did not converge \u2014 see its diagnostics"


# inside a caller's panel the mark sits over the data: smaller, and on a box the curves show through
CONVERGENCE_MARK_IN_PANEL_FONTSIZE = 8


def _wrapped_mark(mark: str, width_in: float, fontsize: float = CONVERGENCE_MARK_FONTSIZE) -> str:
    """The mark in lines that fit width_in inches at `fontsize` (estimated, before drawing), each of
    its own lines (a cross-validation's flagged cuts, one a line) wrapped on its own: wrapped whole,
    its breaks became spaces and one cut's problems ran on into the next cut's words."""
    import textwrap

    chars = max(20, int(width_in * 72 / (fontsize * _CHAR_WIDTH_EM)))
    return "\n".join(wrapped for line in mark.split("\n") for wrapped in textwrap.wrap(line, chars))


def _mark_in_panel(panel, mark: str) -> None:
    """On a caller's axes (their figure to lay out): inside the panel's top left, on a box the data
    shows through (at full size and opacity, four problems on a small panel hid most of its curve)."""
    width_in = panel.get_position().width * panel.figure.get_figwidth()
    fontsize = CONVERGENCE_MARK_IN_PANEL_FONTSIZE
    panel.text(0.02, 0.98, _wrapped_mark(mark, 0.96 * width_in, fontsize), transform=panel.transAxes, ha="left",
               va="top", color=CONVERGENCE_MARK_COLOUR, fontsize=fontsize, zorder=10,
               bbox={"facecolor": "white", "edgecolor": CONVERGENCE_MARK_COLOUR, "alpha": 0.6, "pad": 2})


def _lay_out_one_panel(fig, ax, mark: str | None, own_figure: bool) -> None:
    """A one-panel chart's last step: on a figure of ours, the mark (if any) above the panel, where
    tight_layout keeps room for it, the figure taller by its lines; on a caller's figure (theirs to lay
    out: tight_layout moved their other axes), the mark inside the panel."""
    if own_figure:
        if mark:  # each of its lines wrapped to the figure's width
            mark = "\n".join(_wrapped_mark(line, 0.96 * fig.get_figwidth()) for line in mark.split("\n"))
            fig.set_figheight(fig.get_figheight() + 0.2 * (mark.count("\n") + 1) + 0.1)
            fig.suptitle(mark, color=CONVERGENCE_MARK_COLOUR, fontsize=CONVERGENCE_MARK_FONTSIZE)
        fig.tight_layout()
    elif mark:
        _mark_in_panel(ax, mark)


def plot_fan_chart(fc, *, recipes=None, budget=None, kind="new_run", ax=None, ncols=3, title=None, target=None,
                   ylim=None):
    """One panel per recipe: observed evaluations, the posterior median curve and 50%/90% bands
    out to `budget`, and `target` (a pass rate) as a dash-dot line when given. Returns the
    matplotlib Figure. `ylim` (low, high): the panels' y range instead of their data's, widened to
    hold the target line (the report gives its several images of one sweep one range).

    Legends stay off the data: one key for the bands, the median, the budget, target and data-end lines,
    shared by the figure above the panels; and under each panel its own seeds, labelled by what
    tells them apart (`short_run_labels`)."""
    fig, axes, recipes, mark, band_handles, seeds_of, labels_of = _fan_chart_panels(
        fc, recipes=recipes, budget=budget, kind=kind, ax=ax, ncols=ncols, title=title, target=target, ylim=ylim)
    return _fan_chart_laid_out(fig, axes, recipes, mark, band_handles, seeds_of, labels_of, fc=fc, ax=ax,
                               title=title, kind=kind)


def fan_chart_ylim(fc, *, recipes, budget, target, kind="new_run") -> tuple[float, float]:
    """The y range plot_fan_chart(fc, recipes=..., budget=..., target=...) gives its panels, without laying
    the figure out: the key, the seed legends and tight_layout, which do not move the range, are most of
    a fan chart's time, and the report learns each image's range before it draws the images."""
    import matplotlib.pyplot as plt

    fig = _fan_chart_panels(fc, recipes=recipes, budget=budget, kind=kind, ax=None, ncols=3, title=None,
                            target=target, ylim=None)[0]
    try:
        return fig.axes[0].get_ylim()
    finally:
        plt.close(fig)


def _fan_chart_panels(fc, *, recipes, budget, kind, ax, ncols, title, target, ylim):
    """plot_fan_chart's panels, drawn and given their y range: (figure, axes, recipes, the convergence
    mark, the key's handles, each panel's seeds, each recipe's seed labels)."""
    budget = as_real(budget)
    recipes = _fan_chart_recipes(fc, recipes, budget, kind)
    target = _checked_target(target)
    if ylim is not None and not (len(ylim) == 2 and all(isinstance(v, numbers.Real) and np.isfinite(v) for v in ylim)
                                 and ylim[0] < ylim[1]):
        raise ValueError(f"ylim must be (low, high), finite numbers with low < high, got {ylim!r}")
    grid = _grid(fc, budget)
    if budget is not None:  # said once for the budget, not by predict() for each panel's grid
        warn_if_far_from_data([budget], fc.runs_["compute"], unit=fc.compute_unit, name="budget", stacklevel=4)
    labels_of = {}
    for recipe in recipes:
        runs = fc.runs_[fc.runs_["recipe"] == recipe]
        labels_of[recipe] = [as_written(label) for label in short_run_labels([run_id for run_id, _ in runs.groupby("run_id")])]
    if ax is not None:
        axes = np.atleast_1d(ax).ravel()
        if len(axes) < len(recipes):
            raise ValueError(f"ax holds {len(axes)} axes for {len(recipes)} recipes; pass recipes=[...] or as many axes")
        for extra in axes[len(recipes):]:  # as on a figure of our own: a grid's empty frame beside the last
            extra.set_visible(False)       # panel was drawn over its key, which sits there
        fig = axes[0].figure
        title_of = {recipe: as_written(wrap_title(recipe, _title_chars(panel.get_position().width * fig.get_figwidth())))
                    for panel, recipe in zip(axes, recipes, strict=False)}
    else:
        # refused here: 0 was a ZeroDivisionError and -1 a "figure size must be positive" from matplotlib
        if isinstance(ncols, bool) or not isinstance(ncols, (int, np.integer)) or ncols < 1:
            raise ValueError(f"ncols must be a whole number >= 1, got {ncols!r}")
        ncols = min(ncols, len(recipes))
        nrows = int(np.ceil(len(recipes) / ncols))
        legend_rows = _seed_legend_rows(labels_of.values(), _COLUMN_IN * 0.8 * _PANEL_FILL)
        title_of = {recipe: as_written(wrap_title(recipe, _title_chars(_COLUMN_TITLE_IN))) for recipe in recipes}
        extra_title_lines = max(text.count("\n") for text in title_of.values())
        # room under each panel for its seed legend, above it for a wrapped title, and above the panels for the shared key (its title and a row)
        height = (3.2 + 0.2 + 0.17 * legend_rows + 0.22 * extra_title_lines) * nrows + 0.5 + (0.35 if title else 0)
        if mark := convergence_mark(fc):  # a red line (or two) under the title, above the key
            mark = _wrapped_mark(mark, 0.96 * _COLUMN_IN * ncols)
            height += 0.2 * (mark.count("\n") + 1) + 0.1
        fig, axes = plt.subplots(nrows, ncols, figsize=(_COLUMN_IN * ncols, height), squeeze=False, sharey=True)
        axes = axes.ravel()
        for extra in axes[len(recipes):]:
            extra.set_visible(False)
    band_handles = None  # the first panel's bands, median and reference lines, named once for the figure
    seeds_of = {}
    for panel, recipe in zip(axes, recipes, strict=False):
        # log x and its margin before anything is drawn: each line autoscales the axis as it is added
        panel.set_xmargin(log_x_margin(grid[0], grid[-1], panel.margins()[0]))
        panel.set_xscale("log")
        panel.xaxis.set_major_locator(FiniteLogLocator())
        with this_threads_warnings_dropped(FarFromDataWarning):  # said above, of the budget
            pred = fc.predict(grid, recipe=recipe, kind=kind)
        bands = [
            panel.fill_between(pred["compute"], pred["q05"], pred["q95"], color="tab:blue", alpha=0.18, lw=0, label="90%"),
            panel.fill_between(pred["compute"], pred["q25"], pred["q75"], color="tab:blue", alpha=0.35, lw=0, label="50%"),
            *panel.plot(pred["compute"], pred["q50"], color="tab:blue", lw=1.6, label="median"),
        ]
        runs = fc.runs_[fc.runs_["recipe"] == recipe]
        seeds_of[panel] = [panel.plot(run["compute"], run["metric"], ls="none", marker=SEED_MARKERS[i % len(SEED_MARKERS)],
                                      ms=3.5, mew=0, color=SEED_COLOURS[i % len(SEED_COLOURS)], alpha=0.8,
                                      label=str(run_id))[0]
                           for i, (run_id, run) in enumerate(runs.groupby("run_id"))]
        # this recipe's own data end: right of it the panel is extrapolation, however far the sweep's other recipes went
        bands.append(panel.axvline(float(runs["compute"].max()), color="grey", ls=":", lw=1.2, label="last observed"))
        if budget:
            bands.append(panel.axvline(budget, color="black", ls="--", lw=1, label="budget"))
        if target is not None:  # in the key with the other lines: a caption alone was easy to miss
            bands.append(panel.axhline(target, color="tab:red", ls="-.", lw=1.2, alpha=0.8, label=f"target {target:g}"))
        band_handles = band_handles or bands
        panel.set_title(title_of[recipe], fontsize=TITLE_FONTSIZE)
        panel.set_xlabel(f"compute ({fc.compute_unit})", fontsize=11)
        panel.tick_params(labelsize=10)
        panel.grid(alpha=0.3)
    if ylim is not None:
        for panel in axes[:len(recipes)]:
            panel.set_ylim(*ylim)
    if target is not None:
        # once every panel is drawn: set_ylim turns autoscaling off, and on panels sharing y (a figure
        # of our own) set in the first panel it froze every later one to the first's range, whose
        # data could then lie off the chart
        for panel in axes[:len(recipes)]:
            low, high = panel.get_ylim()
            panel.set_ylim(min(low, target - 0.03), max(high, target + 0.03))  # never on the frame, where it vanishes
    # every row's first panel on a figure of our own: on one of 8 rows only the top row said what y was
    for panel in (axes[:len(recipes):ncols] if ax is None else axes[:1]):
        panel.set_ylabel("metric", fontsize=11)
    return fig, axes, recipes, (mark if ax is None else None), band_handles, seeds_of, labels_of


def _fan_chart_laid_out(fig, axes, recipes, mark, band_handles, seeds_of, labels_of, *, fc, ax, title, kind):
    """plot_fan_chart's figure with its panels drawn (_fan_chart_panels): its key, its seed legends and
    its layout."""
    if ax is not None:
        if mark := convergence_mark(fc):
            _mark_in_panel(axes[0], mark)
        return _legends_on_given_axes(axes[:len(recipes)], band_handles, seeds_of, labels_of, recipes, title, KEY_TITLES[kind])
    # the title at the very top (its default place sinks into the key on a tall figure), the key under it
    suptitle = fig.suptitle(title, y=1.0 - 0.05 / fig.get_figheight(), va="top") if title else None
    key_top = 1.0 - (0.35 / fig.get_figheight() if title else 0.0)
    renderer = _renderer(fig)
    if mark:  # under the title, above the key: what the figure says before anything it shows
        note = fig.text(0.5, key_top - 0.05 / fig.get_figheight(), mark, ha="center", va="top", color=CONVERGENCE_MARK_COLOUR,
                        fontsize=CONVERGENCE_MARK_FONTSIZE)
        note_in = note.get_window_extent(renderer).height / fig.dpi if renderer is not None else 0.2 * (mark.count("\n") + 1)
        key_top -= (note_in + 0.1) / fig.get_figheight()
    for ncol in range(len(band_handles), 0, -1):  # one row, unless the figure is too narrow for it (one panel)
        key = fig.legend(handles=band_handles, labels=[h.get_label() for h in band_handles], fontsize=9,
                         loc="upper center", bbox_to_anchor=(0.5, key_top), ncol=ncol, frameon=False,
                         title=KEY_TITLES[kind], title_fontsize=9)
        if ncol == 1 or renderer is None or key.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
            break
        key.remove()
    key_in = key.get_window_extent(renderer).height / fig.dpi if renderer is not None else 0.5  # its title and a row
    top = key_top - (key_in + 0.05) / fig.get_figheight()  # the panels fill what the key and the title leave
    if suptitle is not None and renderer is not None:  # tight_layout adds room for a suptitle, already kept above the key
        pad_in = 1.08 * plt.rcParams["font.size"] / 72  # tight_layout's default pad
        top += (suptitle.get_window_extent(renderer).height / fig.dpi + pad_in) / fig.get_figheight()
    rect = (0, 0, 1, top)
    fig.tight_layout(rect=rect)  # first the panels' widths, which the seed legends' columns fit
    for panel, recipe in zip(axes, recipes, strict=False):
        # every panel names its own seeds (colours repeat across panels)
        _add_seed_legend(panel, seeds_of[panel], labels_of[recipe], renderer)
    fig.tight_layout(rect=rect)  # then room under each panel for its seed legend
    for panel in axes[:len(recipes)]:
        _thin_compute_tick_labels(panel, renderer)
    return fig


def _legends_on_given_axes(axes, band_handles, seeds_of, labels_of, recipes, title, key_title):
    """Axes the caller laid out: the figure is theirs, so no figure-level key (two calls would stack
    two) and no tight_layout. The key sits right of the last panel, outside it, and each panel's
    seeds under it, as on a figure of our own."""
    fig = axes[0].figure
    last = axes[-1]
    key = last.legend(handles=band_handles, labels=[h.get_label() for h in band_handles], fontsize=9,
                      loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False, title=key_title, title_fontsize=9)
    last.add_artist(key)  # kept when the panel's seed legend replaces its legend below
    # add_artist clips it to the panel, which the tight bounding box (savefig(bbox_inches="tight"),
    # Jupyter's inline figures) then leaves out: the key, outside the panel, was cut off the image
    key.set_clip_on(False)
    renderer = _renderer(fig)
    for panel, recipe in zip(axes, recipes, strict=False):
        _add_seed_legend(panel, seeds_of[panel], labels_of[recipe], renderer)
        _thin_compute_tick_labels(panel, renderer)
    if title:
        fig.suptitle(title)
    return fig


FOREST_DATA_IN = 4.5  # the intervals' own width, whatever the names beside them take
FOREST_KEY_IN = 0.3  # the key's row under the x label
# how the forest draws a recipe's median and intervals, and its key names them: keyed by that name
FOREST_STYLE = {
    "median": {"marker": "o", "linestyle": "none", "color": "white", "mec": "tab:blue", "ms": 6},
    "50% interval": {"color": "tab:blue", "lw": 4},
    "90% interval": {"color": "tab:blue", "lw": 1.2},
}


def _forest_width_in(names) -> float:
    """A forest plot's width: its names (estimated, before drawing) beside FOREST_DATA_IN of
    intervals. At a fixed 6 inches, names of 42 characters left the intervals 1.7 inches, and
    names of 66 more than the figure (tight_layout gave up and they ran off its edge)."""
    from matplotlib.font_manager import FontProperties

    size = FontProperties(size=plt.rcParams["ytick.labelsize"]).get_size_in_points()  # "medium" and the like too
    names_in = max((len(str(n)) for n in names), default=0) * _CHAR_WIDTH_EM * size / 72
    return max(6.0, FOREST_DATA_IN + names_in + 0.5)


def plot_asymptote_forest(fc, *, ax=None, reference=None):
    """Forest plot of recipe asymptotes with 50% and 90% intervals (best at top); `reference`: a
    pass rate in [0, 1] (a target) drawn as a dashed line and named under the x axis."""
    # refused, not drawn: a string became a category at x=0 and 60 (a percent) a line far right,
    # either squeezing every interval into a corner of the panel without a word
    if reference is not None and (isinstance(reference, bool) or not isinstance(reference, (int, float, np.number))
                                  or not 0 <= reference <= 1):
        raise ValueError(f"reference must be a pass rate in [0, 1], got {reference!r}")
    table = fc.asymptote().query("level == 'recipe'").sort_values("q50")
    draws = {r: fc.draws("A")[:, k] for k, r in enumerate(fc.recipes)}
    own_figure = ax is None
    if own_figure:  # its height holds the key's row under the x label (FOREST_KEY_IN)
        fig, ax = plt.subplots(figsize=(_forest_width_in(table["recipe"]), 0.45 * len(table) + 1.2 + FOREST_KEY_IN))
    else:
        fig = ax.figure
    for y, recipe in enumerate(table["recipe"]):
        d = draws[recipe]
        q = np.quantile(d, [0.05, 0.25, 0.5, 0.75, 0.95])
        ax.plot([q[0], q[4]], [y, y], **FOREST_STYLE["90% interval"])
        ax.plot([q[1], q[3]], [y, y], **FOREST_STYLE["50% interval"])
        ax.plot(q[2], y, **FOREST_STYLE["median"])
    if reference is not None:
        ax.axvline(reference, color="black", ls="--", lw=1)
    ax.set_yticks(range(len(table)))
    ax.set_yticklabels([as_written(recipe) for recipe in table["recipe"]])
    # the line named on the image, as the fan chart's key names its target: a pasted chart has no caption
    named = f"; dashed line: target {reference:g}" if reference is not None else ""
    ax.set_xlabel(f"asymptote A (metric){named}")
    ax.grid(axis="x", alpha=0.3)
    # which bar is which, on the image: the report's caption says it, but notebook 01's forest and a
    # chart copied out of the report have none. Under the x label, as the cross-validation chart's key,
    # where it covers no interval
    ax.legend([Line2D([], [], **style) for style in FOREST_STYLE.values()], list(FOREST_STYLE), fontsize=8,
              ncol=len(FOREST_STYLE), loc="upper center", bbox_to_anchor=(0.5, 0.0),
              bbox_transform=_below_xlabel(ax, _renderer(fig)), borderaxespad=0.0)
    _lay_out_one_panel(fig, ax, convergence_mark(fc), own_figure)
    return fig


def _interval_band(ahead: np.ndarray, below: np.ndarray, above: np.ndarray, n_bins: int = 8) -> list:
    """[(left, right, low, high)]: per log-spaced bin of reach that holds an evaluation, the median
    of the interval's edges relative to each forecast there."""
    if ahead.max() <= ahead.min():
        return [(ahead.min() / 1.02, ahead.max() * 1.02, float(np.median(below)), float(np.median(above)))]
    edges = np.geomspace(ahead.min(), ahead.max(), n_bins + 1)
    which = np.clip(np.digitize(ahead, edges) - 1, 0, n_bins - 1)
    return [(edges[b], edges[b + 1], float(np.median(below[which == b])), float(np.median(above[which == b])))
            for b in range(n_bins) if (which == b).any()]


def cross_validation_mark(cv) -> str | None:
    """For a cross-validation with a cut whose fit did not converge, the words its chart carries,
    one line per such cut: 'fit did not converge at cut 0.5: R-hat up to 1.121 (> 1.01); 8 divergent
    transitions - its coverage and errors are approximate'; None where every cut's fit converged
    (or the table does not say)."""
    from .cross_validation import fits_of

    flagged = [fit for fit in fits_of(cv) if not fit["converged"]]
    if not flagged:
        return None
    lines = []
    for fit in flagged:
        problems = "; ".join(problem.split(":")[0] for problem in fit["problems"]) or "see its diagnostics"
        lines.append(f"fit did not converge at cut {fit['cut']:g}: {problems}")
    return "\n".join(lines) + " \u2014 its coverage and errors are approximate"


CROSS_VALIDATION_KEY_COLUMN_IN = 2.7  # one key entry, 'cut 0.25: 87% of 662 inside', with its handle, at 8 pt
REACH_TICKS = (1, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024)


def plot_cross_validation(cv, *, ax=None):
    """Held-out evaluations of a cross-validation (forecast.cross_validation.cross_validate), one
    colour per cut: each one's error (observed - forecast) against how far ahead it was forecast,
    and the band the central interval spans there (the median of its edges over evaluations about
    that far ahead). Points outside the band are misses; a cloud above 0 means forecasts ran low.
    cv: cross_validate()'s table, or the path of the CSV file `forecast cross-validate --out` wrote."""
    from .cross_validation import as_cross_validation, level_of, level_text

    cv = as_cross_validation(cv, "plot_cross_validation()")
    missing = [c for c in ("cut", "ahead", "observed", "forecast", "lower", "upper", "covered") if c not in cv.columns]
    if missing:
        raise ValueError(f"not a cross_validate() result: no column {missing[0]!r}")
    own_figure = ax is None
    if own_figure:
        fig, ax = plt.subplots(figsize=(7, 4.2))
    else:
        fig = ax.figure
    for k, (cut, rows) in enumerate(cv.groupby("cut", sort=True)):
        colour = f"C{k}"
        ahead = rows["ahead"].to_numpy(float)
        forecast = rows["forecast"].to_numpy(float)
        for left, right, low, high in _interval_band(ahead, rows["lower"].to_numpy(float) - forecast,
                                                      rows["upper"].to_numpy(float) - forecast):
            ax.fill_between([left, right], low, high, color=colour, alpha=0.15, lw=0)
        ax.scatter(ahead, rows["observed"].to_numpy(float) - forecast, s=9, alpha=0.5, color=colour,
                   label=f"cut {cut:g}: {rows['covered'].mean():.0%} of {len(rows)} inside")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xscale("log")
    # "1.5x", "2x", not matplotlib's "2 x 10^0", whose log ticks leave a reach of 1-2x one label
    reach = cv["ahead"].to_numpy(float)
    ticks = [t for t in REACH_TICKS if reach.min() / 1.05 <= t <= reach.max() * 1.05]
    if len(ticks) >= 2:
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}x"))
    ax.set_xlabel("reach: compute / the run's last compute before the cut")
    ax.set_ylabel("observed - forecast (metric)")  # the fan chart's word for its y axis
    ax.grid(alpha=0.3)
    # under the x label, as the fan chart's seed legends: inside the panel ("best") it covered the
    # trainer sweep's largest miss of 1122, and on any chart this dense it covers some
    n_cuts = cv["cut"].nunique()
    width_in = ax.get_position().width * fig.get_figwidth()
    ncol = max(1, min(n_cuts, int(width_in // CROSS_VALIDATION_KEY_COLUMN_IN)))
    ax.legend(title=f"bands: the {level_text(level_of(cv))} interval", fontsize=8, title_fontsize=8, ncol=ncol,
              loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=_below_xlabel(ax, _renderer(fig)),
              borderaxespad=0.0)
    # the fan chart's red line, for the cuts whose fits were flagged: the image is pasted alone too
    _lay_out_one_panel(fig, ax, cross_validation_mark(cv), own_figure)
    return fig
