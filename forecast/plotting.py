"""Fan charts and forest plots, beside the model rather than inside it."""

from __future__ import annotations

import matplotlib.pyplot as plt  # no backend forced: notebooks keep inline figures
import numpy as np


def _grid(fc, budget, n=80):
    lo = float(fc.runs_["compute"].min())
    hi = max(float(fc.runs_["compute"].max()), float(budget or 0))
    return np.geomspace(lo, hi, n)


def plot_fan_chart(fc, *, recipes=None, budget=None, kind="new_run", ax=None, ncols=3, title=None):
    """One panel per recipe: observed evaluations, the posterior median curve and 50%/90% bands
    out to `budget`. Returns the matplotlib Figure."""
    recipes = list(recipes) if recipes is not None else fc.recipes
    grid = _grid(fc, budget)
    if ax is not None:
        axes = np.atleast_1d(ax).ravel()
        if len(axes) < len(recipes):
            raise ValueError(f"ax holds {len(axes)} axes for {len(recipes)} recipes; pass recipes=[...] or as many axes")
        fig = axes[0].figure
    else:
        ncols = min(ncols, len(recipes))
        nrows = int(np.ceil(len(recipes) / ncols))
        fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.2 * nrows), squeeze=False, sharey=True)
        axes = axes.ravel()
        for extra in axes[len(recipes):]:
            extra.set_visible(False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    band_handles = None  # the first panel's bands, median and budget line, named once for the figure
    for panel, recipe in zip(axes, recipes, strict=False):
        pred = fc.predict(grid, recipe=recipe, kind=kind)
        bands = [
            panel.fill_between(pred["compute"], pred["q05"], pred["q95"], color="tab:blue", alpha=0.18, lw=0, label="90%"),
            panel.fill_between(pred["compute"], pred["q25"], pred["q75"], color="tab:blue", alpha=0.35, lw=0, label="50%"),
            *panel.plot(pred["compute"], pred["q50"], color="tab:blue", lw=1.6, label="median"),
        ]
        runs = fc.runs_[fc.runs_["recipe"] == recipe]
        seeds = [panel.plot(run["compute"], run["metric"], ".", ms=4, color=colours[i % len(colours)], alpha=0.8, label=run_id)[0]
                 for i, (run_id, run) in enumerate(runs.groupby("run_id"))]
        # this recipe's own data end: right of it the panel is extrapolation, however far the sweep's other recipes went
        panel.axvline(float(runs["compute"].max()), color="grey", ls=":", lw=1.2)
        if budget:
            bands.append(panel.axvline(budget, color="black", ls="--", lw=1, label="budget"))
        band_handles = band_handles or bands
        panel.set_xscale("log")
        panel.set_title(recipe, fontsize=13)
        panel.set_xlabel(f"compute ({fc.compute_unit})", fontsize=11)
        panel.tick_params(labelsize=10)
        panel.grid(alpha=0.3)
        # every panel names its own seeds (colours repeat across panels)
        panel.legend(handles=seeds, fontsize=8, loc="best", framealpha=0.7)
    axes[0].set_ylabel("metric", fontsize=11)
    seed_legend = axes[0].get_legend()  # a second legend() replaces the first unless it is kept as an artist
    axes[0].legend(handles=band_handles, fontsize=8, loc="upper left", framealpha=0.7)
    axes[0].add_artist(seed_legend)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_asymptote_forest(fc, *, ax=None, reference=None):
    """Forest plot of recipe asymptotes with 50% and 90% intervals (best at top)."""
    table = fc.asymptote().query("level == 'recipe'").sort_values("q50")
    draws = {r: fc.draws("A")[:, k] for k, r in enumerate(fc.recipes)}
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 0.45 * len(table) + 1.2))
    else:
        fig = ax.figure
    for y, recipe in enumerate(table["recipe"]):
        d = draws[recipe]
        q = np.quantile(d, [0.05, 0.25, 0.5, 0.75, 0.95])
        ax.plot([q[0], q[4]], [y, y], color="tab:blue", lw=1.2)
        ax.plot([q[1], q[3]], [y, y], color="tab:blue", lw=4)
        ax.plot(q[2], y, "o", color="white", mec="tab:blue", ms=6)
    if reference is not None:
        ax.axvline(reference, color="black", ls="--", lw=1)
    ax.set_yticks(range(len(table)))
    ax.set_yticklabels(table["recipe"])
    ax.set_xlabel("asymptote A (50% and 90% intervals)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
