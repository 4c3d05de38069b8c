"""Scale decisions: which recipe to put a large budget on, decided from the whole posterior.

Two layers, so that the rules can be tested on hand-made posteriors with known answers:

  pure functions over posterior draws   `rank_recipes(draws_at_budget, ...)`, `probability_best`,
                                        `probability_reach`, `split_budget(sample, ...)`,
                                        `recommend_text(table, ...)`
  a thin wrapper over a fitted model    `decide(fc, budget, target=...)`,
                                        `decide_split(fc, total, ...)`

Draws are arrays of one scalar per posterior draw (the metric of a new run of the recipe at the
budget). Draw i of every recipe comes from the same posterior sample, so comparisons between
recipes ("P(best)") are taken draw by draw and keep the posterior's correlations.

Why these numbers: the expected metric ranks recipes; P(best) says how sure that ranking is;
the 5% quantile is the downside a risk-averse owner of the budget cares about (PyMC-Marketing's
VaR idea); P(reaching a target) and the compute needed for it answer "is this budget enough?".
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .data import FAR_BEYOND_DATA, UNSPECIFIED_UNIT, warn_if_far_from_data
from .formatting import (
    computes_told_apart,
    fixed,
    fmt_compute,
    fmt_p_reach,
    name_of,
    pretty_as_str,
    prob_is,
    said_together,
    shown_so_it_reads_true,
    told_apart,
    unknown_name_message,
)
from .inference import as_real

__all__ = [
    "probability_best",
    "probability_reach",
    "summarize_compute_to_target",
    "rank_recipes",
    "recommend_text",
    "split_budget",
    "recommend_split_text",
    "recommended_split",
    "ScaleDecision",
    "decide",
    "decide_split",
    "recipe_draws_at",
    "forecasts_below_data",
]

# Below this P(best) the leader is not called a clear winner in the recommendation text.
CLEAR_WINNER_P = 0.8


# ----------------------------------------------------------------------------- pure rules


def _as_matrix(draws: Mapping[str, np.ndarray]) -> tuple[list[str], np.ndarray]:
    """Stack per-recipe draws into (n_draws, n_recipes); every recipe needs the same draw count."""
    names = list(draws)
    if not names:
        raise ValueError("no recipes given")
    arrays = [np.asarray(draws[n], dtype=float).ravel() for n in names]
    lengths = {len(a) for a in arrays}
    if len(lengths) != 1:
        raise ValueError(f"every recipe needs the same number of draws, got {sorted(lengths)}")
    return names, np.column_stack(arrays)


def _checked_target(target, *, optional: bool = True) -> float | None:
    """A target as a float in (0, 1), or None where `optional`; ValueError in words for anything
    else. "0.6" failed as a TypeError comparing it with 0 (numpy's, in the rules over draws)."""
    if target is None and optional:
        return None
    target = as_real(target)
    if isinstance(target, bool) or not isinstance(target, numbers.Real) or not 0 < target < 1:
        raise ValueError(f"target must lie in (0, 1), got {target!r}")
    return float(target)


def mcse_of_mean(values) -> float:
    """Monte Carlo standard error of the mean of draws in the sampler's order (chain after chain):
    sd / sqrt(ESS), the effective sample size from the draws' autocorrelation (Geyer's initial
    monotone sequence, as ArviZ and Stan estimate it; chains taken end to end as one sequence).
    Draws of one chain are correlated, so sd / sqrt(n), which assumes they are not, understated the
    error (1.4x on a fast fit, where a recipe's metric had an ESS of 301 of 600). ESS is taken as
    at most n, so the error is never stated below sd / sqrt(n): too small an error would call
    noise a difference."""
    x = np.asarray(values, dtype=float).ravel()
    n = len(x)
    sd = float(x.std()) if n else float("nan")
    if n < 4 or not sd > 0:
        return sd / np.sqrt(n) if n else float("nan")
    return sd / np.sqrt(min(float(n), _effective_size(x)))


def _effective_size(x: np.ndarray) -> float:
    """Effective sample size of the mean of one sequence: n / (1 + 2 sum of autocorrelations), the
    sum over pairs of lags while a pair's sum is positive, made non-increasing (Geyer 1992)."""
    n = len(x)
    centred = x - x.mean()
    spectrum = np.fft.rfft(centred, 2 * n)
    autocovariance = np.fft.irfft(spectrum * np.conj(spectrum))[:n]
    rho = autocovariance / autocovariance[0]
    pairs = rho[: n - n % 2].reshape(-1, 2).sum(axis=1)  # rho_0 + rho_1, rho_2 + rho_3, ...
    stop = int(np.argmax(pairs <= 0)) if (pairs <= 0).any() else len(pairs)
    tau = -1.0 + 2.0 * float(np.minimum.accumulate(pairs[:stop]).sum())
    return n / max(tau, 1.0 / np.log10(n))


def _best_shares(draws: Mapping[str, np.ndarray]) -> tuple[list[str], np.ndarray]:
    """(names, shares): shares[i, k] is recipe k's part of being best in draw i (1, or 1/m in an m-way tie)."""
    names, matrix = _as_matrix(draws)
    is_max = matrix == matrix.max(axis=1, keepdims=True)
    return names, is_max / is_max.sum(axis=1, keepdims=True)


def probability_best(draws: Mapping[str, np.ndarray]) -> dict[str, float]:
    """P(recipe is the best) = share of draws in which it has the highest value.

    Ties (equal values in one draw, as with identical posteriors) share the draw equally, so the
    probabilities always sum to 1.
    """
    names, share = _best_shares(draws)
    return {n: float(p) for n, p in zip(names, share.mean(axis=0), strict=True)}


def probability_reach(draws: Mapping[str, np.ndarray], target: float) -> dict[str, float]:
    """P(metric at the budget >= target), per recipe."""
    target = _checked_target(target, optional=False)
    return {n: float(np.mean(np.asarray(d, dtype=float) >= target)) for n, d in draws.items()}


def summarize_compute_to_target(compute_draws: np.ndarray, quantiles=(0.05, 0.5, 0.95)) -> dict:
    """Compute needed for a target, from per-draw values where inf means "never reaches it".

    Quantiles use the inverted CDF over all draws (inf included), so q95 is honestly inf when
    more than 5% of draws never get there, instead of a quantile of the lucky draws only.
    Columns are named as predict() names its quantiles: compute_q05, and compute_q2_5 for 0.025.
    """
    # names and checks of the forecaster's tables: rounded to whole percents, 0.025 was "compute_q02"
    # and 0.975 "compute_q98", and of (0.02, 0.025) the first was overwritten by the second, silently
    from .forecaster import _checked_quantiles, _qname

    c = np.asarray(compute_draws, dtype=float).ravel()
    out = {"p_reach_ever": float(np.isfinite(c).mean())}
    for q in _checked_quantiles(quantiles):
        out[f"compute_{_qname(q)}"] = float(np.quantile(c, q, method="inverted_cdf"))
    return out


def rank_recipes(
    draws_at_budget: Mapping[str, np.ndarray],
    *,
    target: float | None = None,
    compute_to_target: Mapping[str, np.ndarray] | None = None,
    budget: float | None = None,
) -> pd.DataFrame:
    """One row per recipe, best expected metric first.

    Columns: recipe, budget, expected (posterior mean), expected_mcse (its Monte Carlo standard
    error, mcse_of_mean: sd / sqrt(effective sample size of the draws), at least sd / sqrt(draws):
    a refit with another random_seed moves expected by about this much), q05 (downside), q50, q95,
    p_best, p_best_mcse (likewise, of each draw's share of being best), and with
    a target: p_target (P(metric at the budget >= target)); with compute_to_target draws as well:
    p_reach_ever, compute_q05, compute_q50, compute_q95. p_target is taken on `draws_at_budget`
    (for decide(): a new run's pass rate, with wander and extrapolation widening) and p_reach_ever
    on the curve's parameters, so p_target can exceed p_reach_ever when the curve tops out just
    below the target.
    """
    target = _checked_target(target)
    names, shares = _best_shares(draws_at_budget)
    rows = []
    for recipe, d in draws_at_budget.items():
        d = np.asarray(d, dtype=float).ravel()
        best_share = shares[:, names.index(recipe)]
        row = {
            "recipe": recipe,
            "budget": budget,
            "expected": float(d.mean()),
            "expected_mcse": mcse_of_mean(d),
            "q05": float(np.quantile(d, 0.05)),
            "q50": float(np.quantile(d, 0.5)),
            "q95": float(np.quantile(d, 0.95)),
            "p_best": float(best_share.mean()),
            "p_best_mcse": mcse_of_mean(best_share),
        }
        if target is not None:
            row["p_target"] = float(np.mean(d >= target))
            if compute_to_target is not None and recipe in compute_to_target:
                row.update(summarize_compute_to_target(compute_to_target[recipe]))
        rows.append(row)
    table = pd.DataFrame(rows).sort_values(["expected", "p_best"], ascending=False, kind="stable")
    return table.reset_index(drop=True)


_fmt = fmt_compute  # 38,400 or 3.2e15, "never" for inf: as the report prints compute
COMPUTE_COLUMNS = ("budget", "compute_q05", "compute_q50", "compute_q95", "compute_per_run")  # written with _fmt


def _compute_interval(low, high) -> str:
    """A compute interval in words; 'never-never' (at least 95% of draws never reach it) reads as one never."""
    if not np.isfinite(low) and not np.isfinite(high):
        return "90% interval: never"
    return f"90% interval {_fmt(low)}-{_fmt(high)}"


UNLIKELY_TARGET_P = 0.05  # below this P(>= target at the budget) for every recipe, none is said to reach it


def _below_the_bar(p: float) -> str:
    """prob_is of a P(>= target) said to be below UNLIKELY_TARGET_P, with the digits it takes to read
    so: 0.0495 as '= 0.0495', not '= 0.05 ... (below 0.05)'."""
    text = prob_is(p)
    if text.startswith("=") and not float(text[2:]) < UNLIKELY_TARGET_P:
        text = f"= {shown_so_it_reads_true(p, lambda v: v < UNLIKELY_TARGET_P, 2)}"
    return text


def _target_measures_disagree(row, budget: float) -> bool:
    """P(>= target at the budget) and the curve's compute to target point different ways: the first
    above P(ever reaches it), or the median compute to target within the budget while fewer than
    half of the draws are at the target there (or beyond it while more than half are)."""
    if "p_reach_ever" not in row or pd.isna(row.get("p_reach_ever")):
        return False
    if row.p_target > row.p_reach_ever:
        return True
    median = row.get("compute_q50")
    return median is not None and pd.notna(median) and (median <= budget) != (row.p_target >= 0.5)


def _starts_at_target(row, column: str = "compute_q50") -> bool:
    """The median draw's curve starts at or above the target (compute to target 0: the documented
    rule for R0 >= target), whatever it does after; False without the compute columns. column: the
    median's name (the report's table calls it c_target_q50)."""
    median = row.get(column)
    return median is not None and pd.notna(median) and median == 0


def _falls_below_target(row, column: str = "compute_q50") -> bool:
    """Starts at or above the target yet is forecast below it at the budget (fewer than half the
    draws there): a falling curve, for which "reached at compute 0" and "P(ever reaches it) 1.00"
    read as if more compute would get there."""
    return _starts_at_target(row, column) and row["p_target"] < 0.5


def starts_at_target_note(row, target: float, column: str = "compute_q50") -> str | None:
    """What decide says of a compute to target of 0, for a table's row (the report's): its curve
    starts at or above the target, and, if it falls below it by the budget, that more compute does
    not bring it back. None for a row that needs no word."""
    if not _starts_at_target(row, column):
        return None
    note = f"its curve starts at or above {target:g} in the median draw (compute to reach it 0)"
    if _falls_below_target(row, column):
        note += (f"; it falls below {target:g} by this budget, so reaching it means starting there, "
                 "and more compute does not bring it back")
    return note


def _told_apart(likelier: float, other: float) -> tuple[str, str]:
    """prob_is of two probabilities, the first called likelier in the text: with as many digits
    as it takes for the two to differ (0.125 and 0.118 both print as '= 0.12')."""
    first, second = prob_is(likelier), prob_is(other)
    if first != second or not first.startswith("=") or likelier == other:
        return first, second
    return told_apart(likelier, other, lambda value, digits: f"= {fixed(value, digits)}", (3, 4, 5))


LEVEL_NAMED = 3  # recipes level with the runner-up named in the sentence; the table holds the rest
MC_LEVEL_SE = 2.0  # expected metrics closer than this many Monte Carlo standard errors of their difference are level


def _more_in_the_table(n: int) -> str:
    """The recipes a sentence does not name, counted: "1 more recipe", not "1 more recipes"."""
    return f"{n} more recipe{'' if n == 1 else 's'} in the table"


def _recipes_named(names: Sequence[str]) -> str:
    """"'a'", "'a' and 'b'", "'a', 'b', 'c' and 2 more recipes in the table": names a sentence can hold."""
    quoted = [f"'{name}'" for name in names]
    if len(quoted) > LEVEL_NAMED:
        return ", ".join(quoted[:LEVEL_NAMED]) + f" and {_more_in_the_table(len(quoted) - LEVEL_NAMED)}"
    return said_together(quoted)


def _whose_highest(table: pd.DataFrame, column: str) -> str:
    """Whose is the highest value of `column`: "for 'b'", or, where recipes share it (a tie is no
    one's), "for 'a' and 'b'" or "for every recipe"."""
    holders = list(table.loc[table[column] == table[column].max(), "recipe"])
    return "for every recipe" if 1 < len(holders) == len(table) else f"for {_recipes_named(holders)}"


def _level_with(others: pd.DataFrame, row) -> list[str]:
    """Recipes of `others` whose expected metric is within Monte Carlo noise of `row`'s (fewer than
    MC_LEVEL_SE standard errors apart), so their order is the sampler's luck, not the data's; none
    without the expected_mcse column (a table made by hand). An equal expected metric is level
    whatever its error (constant draws have none)."""
    if "expected_mcse" not in others or pd.isna(row.get("expected_mcse")):
        return []
    se = np.hypot(others["expected_mcse"], row.expected_mcse)
    gap = (others["expected"] - row.expected).abs()
    return list(others.loc[(gap < MC_LEVEL_SE * se) | (gap == 0), "recipe"])  # equal draws tie with no error at all


def _near_the_bar(top) -> str:
    """For a leader whose P(best) lies within MC_LEVEL_SE Monte Carlo standard errors of the
    clear-winner bar, where "Scale" or "Too close to call" is the sampler's luck: the error and what
    it means. Empty otherwise, or without the p_best_mcse column (a table made by hand)."""
    mcse = top.get("p_best_mcse")
    if mcse is None or pd.isna(mcse) or abs(top.p_best - CLEAR_WINNER_P) >= MC_LEVEL_SE * mcse:
        return ""
    return f"standard error {mcse:.3f}: a refit with another random seed can call it the other way"


def recommend_text(table: pd.DataFrame, *, budget: float, target: float | None = None, unit: str = UNSPECIFIED_UNIT,
                   largest_observed: float | None = None, smallest_observed: float | None = None) -> str:
    """A plain-words recommendation from a `rank_recipes` table; every claim cites its number.
    largest_observed: the data's largest compute; a median compute to target more than
    FAR_BEYOND_DATA times it is called the curve's extrapolation, as the report calls it.
    smallest_observed: the data's smallest compute; a median compute to target below it is the
    curve traced back before the data, and is said to be."""
    target = _checked_target(target)
    if table.empty:
        return "no recipes to rank"
    top = table.iloc[0]

    def headline(p_best_is: str | None) -> str:
        return (f"at {_fmt(budget)} {unit} a new run of '{top.recipe}' is expected to reach {top.expected:.3f} "
                f"(90% interval {top.q05:.3f}-{top.q95:.3f})" + (f", P(best) {p_best_is}" if p_best_is else ""))

    head = headline(prob_is(top.p_best))
    parts = []
    if target is not None and "p_target" in table and table["p_target"].max() < UNLIKELY_TARGET_P:
        # the question was the target: say first that no recipe answers it, before ranking them
        likeliest = table.loc[table["p_target"].idxmax()]
        # a larger budget does not help a curve that starts above the target and falls below it
        instead = ("a lower target or a smaller budget (its curve starts at or above the target and falls below it)"
                   if _falls_below_target(likeliest) else "a larger budget or a lower target")
        if "p_reach_ever" in table and table["p_reach_ever"].max() < UNLIKELY_TARGET_P:
            # every curve tops out below the target: more compute does not take it past its asymptote
            holders = _whose_highest(table, "p_reach_ever")
            at_most = "" if holders == "for every recipe" else " at most,"
            instead = (f"no recipe's curve is likely ever to reach it (P(ever reaches it) "
                       f"{_below_the_bar(table['p_reach_ever'].max())}{at_most} {holders}): "
                       "a lower target")
        parts.append(
            f"No recipe is likely to reach {target:g} at {_fmt(budget)} {unit}: the best chance is "
            f"P {_below_the_bar(likeliest.p_target)} {_whose_highest(table, 'p_target')} "
            f"(below {UNLIKELY_TARGET_P:g}); {instead}, "
            "or the ranking at this budget below."
        )
    if len(table) == 1:
        # P(best) 1.00 alone reads as certainty; it compares the recipe with nothing
        parts.append(f"Only one recipe, '{top.recipe}', so nothing is compared (its P(best) is 1 by definition): "
                     f"{headline(None)}.")
    else:
        second = table.iloc[1]
        second_is = prob_is(second.p_best)
        if top.p_best >= CLEAR_WINNER_P:
            near = _near_the_bar(top)
            parts.append(f"Scale '{top.recipe}': {head}"
                         + (f" (within Monte Carlo noise of the {CLEAR_WINNER_P:.2f} bar for a clear winner, {near})" if near else "") + ".")
        else:
            # the partner is the likeliest other winner, which need not be second by expected metric
            # (a wide posterior can win more often with a lower mean)
            partner = table.iloc[1:].loc[table.iloc[1:]["p_best"].idxmax()]
            partner_is, second_is = _told_apart(partner.p_best, second.p_best)
            why = "" if partner.recipe == second.recipe else f" (the likeliest other winner, P(best) {partner_is})"
            if prob_is(top.p_best).startswith("="):  # 0.798 as "= 0.80, below 0.80" contradicts itself
                head = headline(f"= {shown_so_it_reads_true(top.p_best, lambda p: p < CLEAR_WINNER_P, 2)}")
            near = _near_the_bar(top)
            level = _level_with(table.iloc[1:], top)
            # a lead within Monte Carlo noise (or an exact tie, kept in the order given) is no lean
            verdict = (f" between {_recipes_named([top.recipe, *level])}, level within Monte Carlo noise (which of "
                       "them leads can change from fit to fit)" if level else f", leaning '{top.recipe}'")
            parts.append(
                f"Too close to call{verdict}: {head}, below {CLEAR_WINNER_P:.2f} (the bar for a "
                f"clear winner{f'; within Monte Carlo noise of it, {near}' if near else ''}). Consider running '{top.recipe}' and '{partner.recipe}'{why} side by side, or more "
                "seeds first."
            )
        runner_up = f"Runner-up '{second.recipe}': expected {second.expected:.3f}, P(best) {second_is}"
        level = _level_with(table.iloc[2:], second)
        if level:  # named as second on a difference a refit with another random_seed turns round
            names = ", ".join(f"'{r}'" for r in level[:LEVEL_NAMED])
            if len(level) > LEVEL_NAMED:  # a wide sweep of near-equal recipes named a hundred of them in one sentence
                names += f" and {_more_in_the_table(len(level) - LEVEL_NAMED)}"
            runner_up += (f" (level with {names} within Monte Carlo noise: which of them "
                          "comes second can change from fit to fit)")
        parts.append(runner_up + ".")
        parts.append(f"Downside (5% quantile): {top.q05:.3f} for '{top.recipe}' vs {second.q05:.3f} for '{second.recipe}'.")
        safest = table.loc[table["q05"].idxmax()]
        if safest.recipe != top.recipe and f"{safest.q05:.3f}" != f"{top.q05:.3f}":  # a tie in the digits shown is none
            parts.append(
                f"Risk-averse choice: '{safest.recipe}' has the best downside ({safest.q05:.3f} vs {top.q05:.3f})."
            )
    if target is not None and "p_target" in table:
        sentence = f"P(>= {target:g} at this budget) {prob_is(top.p_target)} for '{top.recipe}'"
        if "compute_q50" in table and pd.notna(top.get("compute_q50")):
            median = f"{_fmt(top.compute_q50)} {unit}" if np.isfinite(top.compute_q50) else "never, in the median draw"
            if _starts_at_target(top):  # "0" alone reads as "free", and next to P = 0.00 as a contradiction
                median += f", as its curve starts at or above {target:g} in the median draw"
            elif largest_observed and np.isfinite(top.compute_q50) and top.compute_q50 > FAR_BEYOND_DATA * largest_observed:
                # the report's compute-to-target section says so; decide gave 3.32e14 as if it were a plan
                median += (f", {_fmt(top.compute_q50 / largest_observed)}x the largest compute observed: the "
                           "curve's extrapolation, not something the data show")
            elif smallest_observed and 0 < top.compute_q50 < smallest_observed:
                # 4.69e8 where the first evaluation, at 7.55e9, already stood above the target, stated as a plan
                median += (f", below the smallest compute observed ({_fmt(smallest_observed)} {unit}): the curve traced "
                           "back, not something the data show")
            sentence += (
                f"; compute to reach {target:g}: {median} "
                f"({_compute_interval(top.compute_q05, top.compute_q95)}; "
                f"P(ever reaches it) {prob_is(top.p_reach_ever, fmt_p_reach(top.p_reach_ever))})"
            )
        if _falls_below_target(top):
            # not the wander-and-widening disagreement below: the curve itself goes down
            sentence += (
                f"; it falls below {target:g} by this budget, so reaching it means starting there, "
                "and more compute does not bring it back"
            )
        elif _target_measures_disagree(top, budget):
            # both are right, and they differ on purpose: say why rather than leave a puzzle
            sentence += (
                "; P(>= target at this budget) counts a run's wander around its curve and the widening "
                "of forecasts far ahead, the compute to reach it follows the recipe's curve alone, so the "
                "two can disagree"
            )
        parts.append(sentence + ".")
        best_target = table.loc[table["p_target"].idxmax()]
        # a tie in the digits shown is none: "= 0.57 for 'a'. ... 'b' is likelier (P = 0.57)" contradicts itself
        if (best_target.recipe != top.recipe and best_target.p_target > top.p_target
                and prob_is(best_target.p_target) != prob_is(top.p_target)):
            parts.append(
                f"For the target alone, '{best_target.recipe}' is likelier to get there "
                f"(P {prob_is(best_target.p_target)})."
            )
    return " ".join(parts)


# a split into k runs draws every recipe's k seeds for each k up to it: the work grows as k squared
# (64: about 10 s), and a budget split into more runs than this is no longer one decision
MAX_SPLIT_WAYS = 64


def split_budget(
    sample: Callable[[str, float, int], np.ndarray],
    recipes: Sequence[str],
    total: float,
    *,
    max_ways: int = 4,
    smallest_compute: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Should a total budget go to one run, or be split into k runs of total/k (keeping the best)?

    `sample(recipe, compute, n_seeds)` returns draws (n_draws, n_seeds) of that many fresh seeds'
    metric (draw i aligned across recipes and seeds; one column: every seed alike). For each k the k runs are picked one at a
    time, each the run that raises the expected best of those picked the most: a first run of the
    recipe with the best expected metric at total/k, then another recipe or another seed of one
    already picked, whichever is worth more. The value of the split is, draw by draw, the best of
    its k runs. Splitting pays when the leaders are hard to tell apart (or seeds of one spread
    widely) and curves have flattened by total/k; it costs when curves still climb.

    `smallest_compute` (recipe -> the smallest compute of its runs' evaluations): a recipe takes no
    part in a split whose runs would get less (recipes_in_split), where its forecast would run its
    curve backwards, before its first evaluation; a split none of them takes part in ends the table.
    One run takes every recipe, as decide() ranks them at the same compute.
    """
    # nan gave a table of NaN compute, "1e5" a TypeError, and max_ways 0 an empty table
    if isinstance(total, bool) or not isinstance(total, numbers.Real) or not (np.isfinite(total) and total > 0):
        raise ValueError(f"total budget must be finite and > 0, got {total!r}")
    if isinstance(max_ways, bool) or not isinstance(max_ways, numbers.Integral) or max_ways < 1:
        raise ValueError(f"max_ways must be a whole number >= 1, got {max_ways!r}")
    rows, bests = [], []
    for k in range(1, max_ways + 1):
        per_run = total / k
        taking_part = recipes_in_split(recipes, per_run, k, smallest_compute)
        if not taking_part:  # runs smaller still with more ways: none takes part in those either
            break
        draws = {r: _seed_columns(sample(r, per_run, k), k) for r in taking_part}
        chosen, best = [], np.full(len(next(iter(draws.values()))), -np.inf)
        for _ in range(k):
            # each recipe's next seed, and what the best of the runs picked would be with it
            with_next = {r: np.maximum(best, draws[r][:, chosen.count(r)]) for r in taking_part}
            pick = max(taking_part, key=lambda r: with_next[r].mean())  # ties: the first in the order given
            best = with_next[pick]
            chosen.append(pick)
        bests.append(best)
        one_run = bests[0]
        rows.append(
            {
                "ways": k,
                "compute_per_run": per_run,
                "recipes": chosen,
                "expected_best": float(best.mean()),
                "q05": float(np.quantile(best, 0.05)),
                "q95": float(np.quantile(best, 0.95)),
                # Monte Carlo standard error of its gain over one run (draw by draw: both come from one posterior)
                "gain_mcse": mcse_of_mean(best - one_run),
                # the fewest runs whose expected best this one does not beat by more than Monte Carlo noise
                "level_with": next(j + 1 for j, fewer in enumerate(bests) if _within_noise(best - fewer)),
            }
        )
    return pd.DataFrame(rows)


def within_data(compute: float, smallest_compute: float) -> bool:
    """A run of `compute` starts no earlier than the data: at or above its smallest compute, or within
    a rounding error below it (0.3 / 3 is 0.09999999999999999 in floats)."""
    return compute >= smallest_compute or math.isclose(compute, smallest_compute, rel_tol=1e-9)


def recipes_in_split(recipes: Sequence[str], per_run: float, ways: int,
                     smallest_compute: Mapping[str, float] | None) -> list[str]:
    """The recipes that take part in a split into `ways` runs of `per_run` each: those whose data reach
    down to it (each recipe judged by its own smallest compute: a recipe first evaluated later is
    forecast backwards below that, however early another recipe's data start). One run takes them all."""
    if ways == 1 or smallest_compute is None:
        return list(recipes)
    return [r for r in recipes if within_data(per_run, smallest_compute[r])]


def _within_noise(gain: np.ndarray) -> bool:
    """A gain, draw by draw, whose mean is at most MC_LEVEL_SE Monte Carlo standard errors above zero."""
    return float(gain.mean()) <= MC_LEVEL_SE * mcse_of_mean(gain)


def _seed_columns(draws, n_seeds: int) -> np.ndarray:
    """A sampler's draws as (n_draws, n_seeds); one column (or a flat array) is every seed alike."""
    draws = np.asarray(draws, dtype=float)
    draws = draws[:, None] if draws.ndim == 1 else draws
    return np.broadcast_to(draws, (draws.shape[0], n_seeds))


def _runs_text(recipes: Sequence[str], quote: str = "'") -> str:
    """['a', 'a', 'b'] -> "'a' (2 seeds), 'b'": the runs of a split, by recipe in order of first pick.
    quote="" for the table, whose column holds names alone (stripping the quotes afterwards took the
    ones inside a name too: "it's" came out as "its")."""
    counts = {r: list(recipes).count(r) for r in dict.fromkeys(recipes)}
    return ", ".join(f"{quote}{r}{quote}" + (f" ({n} seeds)" if n > 1 else "") for r, n in counts.items())


def _split_choice(table: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series, pd.Series | None]:
    """(one, top, best, more) of a `split_budget` table, as recommend_split_text argues: one run; the
    highest split in the digits shown; the split recommended; and the split of more runs that gave
    way to it, level with it within Monte Carlo noise (None where none did)."""
    shown = table["expected_best"].map(lambda v: float(f"{v:.3f}"))
    one = table.iloc[0]
    # the rows whose gain over one run is more than Monte Carlo noise (or that have no error to judge it by)
    mcse = table["gain_mcse"] if "gain_mcse" in table else pd.Series(np.nan, index=table.index)
    real = (table["ways"] == 1) | mcse.isna() | (table["expected_best"] - one.expected_best > MC_LEVEL_SE * mcse)
    top = table.loc[table.index[shown >= shown.max()][0]]
    # the highest split may be noise while one with fewer runs (and a smaller error) gains for real:
    # that one is recommended; "one run" beside a 2-way split that gains 5 standard errors misled
    best = table.loc[table.index[real & (shown >= shown[real].max())][0]]
    more = None
    fewest = best.get("level_with")
    if fewest is not None and not pd.isna(fewest) and 1 < fewest < best.ways:
        # more runs that do not beat fewer by more than Monte Carlo noise: the fewer are the plan, if
        # their own gain over one run is beyond noise (a split is only recommended for such a gain)
        fewer = table.index[table["ways"] == fewest][0]
        if real[fewer]:
            more, best = best, table.loc[fewer]
    return one, top, best, more


def recommended_split(table: pd.DataFrame) -> pd.Series:
    """The row of a `split_budget` table that recommend_split_text recommends (ways 1: one run), for a
    script to read as numbers rather than from the sentence."""
    return _split_choice(table)[2]


def recommend_split_text(table: pd.DataFrame, *, total: float, unit: str = UNSPECIFIED_UNIT) -> str:
    """Plain words for `split_budget`: the fewest k whose expected best-of-k is the highest in the
    3 digits the text prints. A gain that does not show in them is Monte Carlo noise, and more runs
    cost more to manage: the fewer runs win the tie. A split whose gain over one run shows in the
    digits but lies within MC_LEVEL_SE of its Monte Carlo standard error (gain_mcse) is not
    recommended: a refit with another seed could call it the other way. The highest of the splits
    that gain for real is recommended then, and one run, with the noise said, when none does. And a
    split the table finds level within noise with one of fewer runs (level_with) gives way to it,
    where that one's own gain over one run is beyond noise too."""
    one, top, best, more = _split_choice(table)
    names = _runs_text(best.recipes)
    if best.ways == 1 and top.ways > 1:
        gain = top.expected_best - one.expected_best
        return (
            f"Put the whole {_fmt(total)} {unit} into one run of '{one.recipes[0]}': expected {one.expected_best:.3f} "
            f"(90% interval {one.q05:.3f}-{one.q95:.3f}). {top.ways} runs of {_fmt(top.compute_per_run)} ({_runs_text(top.recipes)}) "
            f"give {top.expected_best:.3f}, a gain of {gain:.4f} within Monte Carlo "
            f"noise (standard error {top.gain_mcse:.4f}): a refit can call it the other way, and one run is the simpler plan."
        )
    if best.ways == 1:
        text = (
            f"Put the whole {_fmt(total)} {unit} into one run of {names}: expected {best.expected_best:.3f} "
            f"(90% interval {best.q05:.3f}-{best.q95:.3f})."
        )
        if len(table) > 1:
            two = table.iloc[1]
            text += f" Splitting in two ({_fmt(two.compute_per_run)} each: {_runs_text(two.recipes)}) gives {two.expected_best:.3f}."
        return text
    text = (
        f"Split {_fmt(total)} {unit} into {best.ways} runs of {_fmt(best.compute_per_run)} ({names}) and keep the "
        f"best: expected {best.expected_best:.3f} (90% interval {best.q05:.3f}-{best.q95:.3f}) vs "
        f"{one.expected_best:.3f} for one run of '{one.recipes[0]}'."
    )
    if more is not None:
        text += (f" {more.ways} runs give {more.expected_best:.3f}, level with {best.ways} within Monte Carlo noise: "
                 "the fewer runs are the simpler plan.")
    return text


# ----------------------------------------------------------------------------- on a fitted model


def recipe_draws_at(fc, recipe: str, compute: float, *, kind: str = "new_run") -> np.ndarray:
    """Draws of a new run's true pass rate for one recipe at one compute (seed-to-seed spread,
    wander and extrapolation uncertainty; no white noise of a single evaluation). kind: "new_run"
    (a new seed of the recipe) or "mean" (the recipe's mean curve), as sample_curves takes it.

    Each recipe gets its own random stream: with one shared seed, every recipe's "new seed" would
    get the same seed luck, and P(best) would ignore seed-to-seed variance.
    """
    # one normal per draw, as predict() draws it: a forecast of the same run with an evaluation's noise added
    return fc.sample_curves([compute], recipe=recipe, kind=kind, rng=fc.recipe_stream(recipe), eval_noise=False,
                            shared_noise=True)[:, 0]


def _checked_recipes(fc, recipes) -> list[str]:
    """recipes= as a list (one name is a list of one), each one the fit knows (KeyError naming them)."""
    if recipes is None:
        return fc.recipes
    recipes = [recipes] if isinstance(recipes, (str, numbers.Number)) else list(recipes)
    recipes = [r if isinstance(r, str) else name_of(r) for r in recipes]  # a table's names are text: its recipe 1 is "1"
    unknown = [r for r in recipes if r not in fc.recipes]
    if len(unknown) == 1:  # with the likely name it was meant as
        raise KeyError(unknown_name_message("recipe", unknown[0], fc.recipes))
    if unknown or not recipes:
        raise KeyError(f"unknown recipe {', '.join(map(repr, unknown)) or '(none given)'}; known: {', '.join(fc.recipes)}")
    return recipes


@dataclass
class ScaleDecision:
    """A ranked table plus the recommendation in words; `to_dict()` for JSON."""

    table: pd.DataFrame
    recommendation: str
    budget: float | None = None
    target: float | None = None
    unit: str = UNSPECIFIED_UNIT
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain JSON types; a compute the target is never reached at is null, as in `report --json`."""
        from .io import json_safe

        records = json_safe(self.table.to_dict(orient="records"))
        return {
            "budget": self.budget,
            "target": self.target,
            "compute_unit": self.unit,
            "recommendation": self.recommendation,
            "table": records,
            **self.extra,
        }

    def __str__(self) -> str:
        table = self.table.copy()
        for column in table.select_dtypes("number").columns:  # "never" for inf, as the recommendation says it
            if column in COMPUTE_COLUMNS:  # compute as the recommendation and the report write it: 2.95e12, not 2.954e+12
                table[column] = table[column].map(_fmt)
            else:
                table[column] = table[column].map(lambda v: "never" if np.isinf(v) else f"{v:.4g}")
        if "recipes" in table:  # a split's runs as its sentence names them: 'dapo' (5 seeds), not a list 5 names long
            table["recipes"] = table["recipes"].map(lambda runs: _runs_text(runs, quote=""))
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            return f"compute in {self.unit}\n{table.to_string(index=False)}\n\n{self.recommendation}"

    _repr_pretty_ = pretty_as_str


def _checked_budget(fc, budget, name: str = "budget") -> float:
    """A budget as a float; ValueError in words, as plot() says it, for anything but a finite compute
    > 0. inf was refused as "compute must be finite and > 0" (not naming the budget), and None or
    "1e5" failed as a TypeError comparing them with 0. Several budgets at once (a list, an array) are
    named as such: "must be finite and > 0, got [3000]" sent the user looking for a bad number."""
    budget = as_real(budget)
    if not isinstance(budget, str) and np.ndim(budget) > 0:
        raise ValueError(f"{name} is one compute (in {fc.compute_unit}), got {np.size(budget)} values: "
                         f"{np.asarray(budget).ravel().tolist()}; "
                         f"ask for one {name} at a time")
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real) or not (np.isfinite(budget) and budget > 0):
        raise ValueError(f"{name} must be finite and > 0 (compute in {fc.compute_unit}), got {budget!r}")
    return float(budget)


def decide(fc, budget: float, *, target: float | None = None, recipes: Sequence[str] | None = None,
           say_below_data: bool = True) -> ScaleDecision:
    """Rank the recipes of a fitted ScalingForecaster for one run at `budget` compute. A budget more
    than 100x the data's largest compute (or below its smallest) gives a FarFromDataWarning (as
    `forecast decide` flags --budget): likely another unit than the run table's. The recipes forecast
    below their data at it are `extra["recipes_below_data"]`, said in the recommendation unless
    say_below_data is False: where the page says it elsewhere (the report's banner, of a budget below all the data)."""
    budget = _checked_budget(fc, budget)
    target = _checked_target(target)
    from .curves import compute_to_target as curve_compute_to_target

    recipes = _checked_recipes(fc, recipes)
    warn_if_far_from_data([budget], fc.runs_["compute"], unit=fc.compute_unit, name="budget")
    draws = {r: recipe_draws_at(fc, r, budget) for r in recipes}
    c_star = None
    if target is not None:
        c_star = {}
        for r in recipes:
            p = fc.curve_parameters(recipe=r, kind="new_run", rng=fc.recipe_stream(r))
            c_star[r] = curve_compute_to_target(target, p["A"], p["B"], np.exp(p["log_C_mid"]), p["R0"])
    table = rank_recipes(draws, target=target, compute_to_target=c_star, budget=budget)
    text = recommend_text(table, budget=budget, target=target, unit=fc.compute_unit,
                          largest_observed=float(fc.runs_["compute"].max()), smallest_observed=float(fc.runs_["compute"].min()))
    below = recipes_below_data(budget, smallest_compute_by_recipe(fc, recipes))
    if below and say_below_data:
        text += " " + below_data_text(budget, below, fc.compute_unit, every=len(below) == len(recipes) > 1)
    return ScaleDecision(table=table, recommendation=text, budget=budget, target=target, unit=fc.compute_unit,
                         extra={"recipes_below_data": below})


def recipes_below_data(compute: float, smallest_compute: Mapping[str, float]) -> list[dict]:
    """The recipes whose data start above `compute` (their smallest compute, in the order given), as
    records {recipe, smallest_compute}: forecast there, each one's curve is run backwards before its
    runs' first evaluation, however early another recipe's data start."""
    return [{"recipe": r, "smallest_compute": s} for r, s in smallest_compute.items() if not within_data(compute, s)]


def below_data_text(compute: float, below: Sequence[Mapping], unit: str = UNSPECIFIED_UNIT, *, lead: str = "",
                    every: bool = False, runs: bool = False) -> str:
    """What `recipes_below_data` found, in one sentence: "'grpo' is forecast at 1e10 flops, below its
    smallest compute in the data (2.49e10 flops), where ...". lead: words before it ("For one run, ").
    every: `below` holds every recipe compared, said as such rather than named one by one. runs: the
    entries are runs ({run_id, smallest_compute}, as predict's kind="run" forecasts them), each one
    judged by its own first evaluation: "Run 'grpo-s0' is forecast at ..."."""
    if every:
        at, smallest = computes_told_apart(compute, min(entry["smallest_compute"] for entry in below))
        return (f"{lead}{'every recipe' if lead else 'Every recipe'} is forecast at {at} {unit}, below the smallest "
                f"compute of any recipe's runs ({smallest} {unit}), where the forecasts extrapolate the curves "
                "backwards, before any run's first evaluation.")
    names = [entry["run_id" if runs else "recipe"] for entry in below]
    one = len(names) == 1
    shown = [computes_told_apart(compute, entry["smallest_compute"]) for entry in below]
    at = max((at for at, _ in shown), key=len)
    smallest = [recipe_smallest for _, recipe_smallest in shown]
    computes = _smallest_computes_said(smallest, unit)
    # a run has no runs: its own first evaluation is where its data start
    named = f"{'r' if lead else 'R'}un{'' if one else 's'} {_names_in_full(names)}" if runs else _names_in_full(names)
    first = ("its first evaluation" if one else "their first evaluations") if runs else \
        f"{'its' if one else 'their'} runs' first evaluation"
    return (f"{lead}{named} {'is' if one else 'are'} forecast at {at} {unit}, below "
            f"{'its smallest compute' if one else 'their smallest computes'} in the data ({computes}), where "
            f"{'its forecast extrapolates its curve' if one else 'their forecasts extrapolate their curves'} "
            f"backwards, before {first}.")


def _whose_first_evaluation(fc, forecasts: pd.DataFrame) -> tuple[bool, list[str], dict[str, float]]:
    """Whose data each row of `fc.predict()`'s table is judged by: the run's own for kind="run" (the
    table has run_id), else its recipe's runs'. (by run, the row's name, smallest compute by name)."""
    by_run = "run_id" in forecasts.columns
    names = [name_of(name) for name in forecasts["run_id" if by_run else "recipe"]]
    smallest = (smallest_compute_by_run if by_run else smallest_compute_by_recipe)(fc, list(dict.fromkeys(names)))
    return by_run, names, smallest


def _check_forecast_table(fc, forecasts) -> None:
    """What forecasts_below_data reads of a table: a hand-made one without a recipe column failed as
    KeyError: 'recipe', and one naming a recipe the fit lacks as KeyError: 'c'."""
    if not isinstance(forecasts, pd.DataFrame):
        raise TypeError(f"forecasts_below_data takes fc.predict()'s table (a DataFrame), got {type(forecasts).__name__}")
    if getattr(fc, "runs_", None) is None:  # before fit() it failed as TypeError: 'NoneType' object is not subscriptable
        from .forecaster import NotFittedError  # imported here: forecaster imports this module

        raise NotFittedError("fit() has not been called: call fit(runs) before forecasts_below_data()")
    if "compute" not in forecasts.columns or not {"recipe", "run_id"} & set(forecasts.columns):
        raise ValueError("forecasts_below_data reads a table as fc.predict() gives it: it needs the columns 'compute' "
                         "and 'recipe' (or 'run_id', for kind='run' forecasts); this table has "
                         f"{', '.join(map(str, forecasts.columns)) or 'no columns'}")
    what = "run_id" if "run_id" in forecasts.columns else "recipe"
    known = list(dict.fromkeys(fc.runs_[what].map(name_of)))
    for name in dict.fromkeys(forecasts[what].map(name_of)):
        if name not in known:
            raise KeyError(unknown_name_message(what, name, known))


def forecasts_below_data(fc, forecasts: pd.DataFrame) -> list[bool]:
    """For each row of `fc.predict()`'s table, whether its compute lies below the first evaluation of
    what it forecasts: of the run for kind="run", else of the recipe's runs. There its curve is
    extrapolated backwards, however early other recipes' data start."""
    _check_forecast_table(fc, forecasts)
    _, names, smallest = _whose_first_evaluation(fc, forecasts)
    return [not within_data(compute, smallest[name]) for compute, name in zip(forecasts["compute"], names, strict=True)]


def predict_below_data_texts(fc, forecasts: pd.DataFrame) -> list[str]:
    """What predict says of its forecasts below their own data (`forecasts_below_data`), as decide says it
    (below_data_text): each recipe, or run, named once, at the largest compute asked below its first
    evaluation; those named at one compute in one sentence. A compute below all the data is left to the
    far-from-data warning, which says it as a likely unit mix-up, since every forecast there runs backwards."""
    by_run, names, smallest = _whose_first_evaluation(fc, forecasts)
    lowest = float(fc.runs_["compute"].min())
    said_at: dict[str, float] = {}
    for compute, name in zip(forecasts["compute"], names, strict=True):
        if not within_data(compute, smallest[name]) and compute >= lowest:
            said_at[name] = max(said_at.get(name, compute), float(compute))
    by_compute: dict[float, list[dict]] = {}
    for name, compute in said_at.items():
        by_compute.setdefault(compute, []).append({"run_id" if by_run else "recipe": name, "smallest_compute": smallest[name]})
    return [below_data_text(compute, below, fc.compute_unit, runs=by_run) for compute, below in sorted(by_compute.items())]


def ways_within_data(total: float, max_ways: int, smallest_compute: float) -> int:
    """The most runs, up to max_ways, that `total` splits into with each run's compute (total / k) no
    less than the data's smallest compute; 1 at least, whose own total is judged by the far-from-data
    warning. A run of the smallest compute itself is within the data, a rounding error below it too (0.3 / 3
    is 0.09999999999999999 in floats)."""
    return max([1, *(k for k in range(1, max_ways + 1) if within_data(total / k, smallest_compute))])


def _below_data(per_run: float, smallest_compute: float) -> tuple[str, str]:
    """A run's compute and the smallest compute it falls below, with the digits it takes to read
    apart: 5e13 / 47 against 1.0648e12 is '1.064e12, below ... 1.065e12', not '1.06e12, below ... 1.06e12'."""
    return computes_told_apart(per_run, smallest_compute)


def left_out_ways_text(total: float, within: int, max_ways: int, smallest_compute: float,
                       unit: str = UNSPECIFIED_UNIT, *, whose: str = "in the data", total_below: bool = False) -> str:
    """Why splits into more than `within` runs are not in the table. whose: where the smallest compute
    is found ("of the recipes compared", where those are not all of the fit's). total_below: the total
    itself lies below that smallest compute, which is said before this (the one run's sentence, or the
    report's banner): the splits' runs are only further below, and their numbers all there is left to say."""
    first = within + 1
    which = f"A split into {first} runs is" if first == max_ways else f"Splits into {first} to {max_ways} runs are"
    per_run, smallest = _below_data(total / first, smallest_compute)
    if total_below:
        data = "the data" if whose == "in the data" else f"the data {whose}"
        return (f"{which} left out: each run would get {per_run} {unit}{'' if first == max_ways else ' or less'}, "
                f"further below {data} than one run.")
    return (f"{which} left out: each run would get {per_run} {unit}{'' if first == max_ways else ' or less'}, below the "
            f"smallest compute {whose} ({smallest} {unit}), where the forecast would extrapolate the "
            "curves backwards, before any run's first evaluation.")


def _smallest_computes_said(smallest: Sequence[str], unit: str) -> str:
    """Recipes' smallest computes (as shown) in a sentence: '2.49e10 flops each' where all are one number
    ('2.49e10, 2.49e10 and 2.49e10 flops' said it three times), else '6.05e9 and 2.49e10 flops'."""
    if len(set(smallest)) == 1:
        return f"{smallest[0]} {unit}" + ("" if len(smallest) == 1 else " each")
    return f"{said_together(smallest)} {unit}"


def _names_in_full(names: Sequence[str]) -> str:
    """"'a'", "'a' and 'b'", "'a', 'b' and 'c'": every name, since each is a recipe the plan leaves out."""
    quoted = [f"'{name}'" for name in names]
    return said_together(quoted)


def recipes_left_out_text(total: float, left_out: Mapping[str, Sequence[int]], smallest_compute: Mapping[str, float],
                          unit: str = UNSPECIFIED_UNIT) -> str:
    """Which recipes take no part in which splits of the table, and why: one sentence per first split
    a recipe is left out of (its ways run from there to the table's last), the first with the reason."""
    by_first: dict[int, list[str]] = {}
    for recipe, ways in left_out.items():
        if ways:
            by_first.setdefault(ways[0], []).append(recipe)
    sentences = []
    for first, names in sorted(by_first.items()):
        last = left_out[names[0]][-1]
        one = len(names) == 1
        which = f"the split into {first} runs" if first == last else f"splits into {first} to {last} runs"
        or_less = "" if first == last else " or less"
        # the digits it takes for the run's compute to read below each recipe's smallest
        shown = [_below_data(total / first, smallest_compute[r]) for r in names]
        per_run = max((run for run, _ in shown), key=len)
        smallest = [recipe_smallest for _, recipe_smallest in shown]
        computes = _smallest_computes_said(smallest, unit)
        head = f"{_names_in_full(names)} {'takes' if one else 'take'} no part in {which}"
        if sentences:  # the reason is the first sentence's; the others say their numbers
            sentences.append(f"{head} ({per_run} {unit} a run{or_less}, below {computes}).")
            continue
        sentences.append(
            f"{head}: each run would get {per_run} {unit}{or_less}, below {'its smallest compute' if one else 'their smallest computes'} "
            f"in the data ({computes}), where {'its forecast' if one else 'their forecasts'} would extrapolate "
            f"{'its curve' if one else 'their curves'} backwards, before {'its' if one else 'their'} runs' first evaluation.")
    return " ".join(sentences)


def smallest_compute_by_recipe(fc, recipes: Sequence[str]) -> dict[str, float]:
    """Each recipe's smallest compute in the fit's data: where its runs' first evaluations begin."""
    runs = fc.runs_
    smallest = runs.groupby(runs["recipe"].map(name_of))["compute"].min()
    return {r: float(smallest[r]) for r in recipes}


def smallest_compute_by_run(fc, run_ids: Sequence[str]) -> dict[str, float]:
    """Each run's smallest compute in the fit's data: its first evaluation."""
    runs = fc.runs_
    smallest = runs.groupby(runs["run_id"].map(name_of))["compute"].min()
    return {r: float(smallest[r]) for r in run_ids}


def decide_split(fc, total: float, *, max_ways: int = 4, recipes: Sequence[str] | None = None,
                 say_below_data: bool = True) -> ScaleDecision:
    """One run at `total`, or k runs at total/k keeping the best? Decided on a fitted forecaster; the
    recommendation's choice as a number is `extra["recommended_ways"]` (1: one run; the table's row
    of that many ways holds its compute per run, runs and expected best). A total more than 100x
    the data's largest compute (or below its smallest) gives a FarFromDataWarning, as decide() does
    for its budget.

    Each recipe is judged against its own smallest compute: a split whose runs would each get less
    leaves that recipe out (`extra["recipes_left_out"]`: recipe, smallest_compute and the ways of the
    table it takes no part in), since its forecast there extrapolates its curve backwards, before
    its runs' first evaluation, and a plan should not rest on it. For that recipe only: the other
    recipes' forecasts at that compute rest on their data, and a split of them is a plan the data
    can judge; leaving the split out for all would let one recipe first evaluated late (another
    evaluation schedule, a larger batch) take every split away from the rest. A split no recipe
    takes part in is left out (`extra["ways_left_out"]`). The recommendation says which and why.
    One run keeps every recipe, as decide() ranks them at the budget; the recipes forecast below their
    data at it are `extra["recipes_below_data"]`, said in the recommendation unless say_below_data is
    False: where decide()'s recommendation at the same budget, which says it, is read beside it, or the
    page's banner of a total below all the data (the report). Splits of such a total are left out with
    their numbers alone, the reason being the total's own, said there."""
    total = _checked_budget(fc, total, "total")
    # "3" failed as a TypeError, 2.5 deep in range(), and True passed as one way
    if (isinstance(max_ways, bool) or not isinstance(max_ways, numbers.Integral)
            or not 1 <= max_ways <= MAX_SPLIT_WAYS):
        raise ValueError(f"max_ways must be between 1 and {MAX_SPLIT_WAYS} (a whole number), got {max_ways!r}")
    max_ways = int(max_ways)
    recipes = _checked_recipes(fc, recipes)
    warn_if_far_from_data([total], fc.runs_["compute"], unit=fc.compute_unit, name="total")
    smallest = smallest_compute_by_recipe(fc, recipes)
    lowest = min(smallest.values())
    within = ways_within_data(total, max_ways, lowest)
    table = split_budget(lambda r, c, n: fc.sample_new_seeds(c, recipe=r, n_seeds=n), recipes, total, max_ways=within,
                         smallest_compute=smallest)
    text = recommend_split_text(table, total=total, unit=fc.compute_unit)
    below = recipes_below_data(total, smallest)  # one run takes every recipe, as decide ranks them
    if below and say_below_data:
        text += " " + below_data_text(total, below, fc.compute_unit, lead="For one run, ",
                                      every=len(below) == len(recipes) > 1)
    left_out = {r: [k for k in range(2, within + 1) if r not in recipes_in_split(recipes, total / k, k, smallest)]
                for r in recipes}
    left_out = dict(sorted(((r, ways) for r, ways in left_out.items() if ways), key=lambda item: item[1][0]))
    if left_out:
        text += " " + recipes_left_out_text(total, left_out, smallest, fc.compute_unit)
    if within < max_ways:
        whose = "in the data" if lowest == float(fc.runs_["compute"].min()) else "of the recipes compared"
        text += " " + left_out_ways_text(total, within, max_ways, lowest, fc.compute_unit, whose=whose,
                                         total_below=not within_data(total, lowest))
    return ScaleDecision(table=table, recommendation=text, budget=total, unit=fc.compute_unit,
                         extra={"mode": "split", "recommended_ways": int(recommended_split(table)["ways"]),
                                "ways_left_out": list(range(within + 1, max_ways + 1)),
                                "recipes_below_data": below,
                                "recipes_left_out": [{"recipe": r, "smallest_compute": smallest[r], "ways": ways}
                                                     for r, ways in left_out.items()]})
