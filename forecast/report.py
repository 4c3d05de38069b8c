"""The planning report: one self-contained HTML page that a planning meeting reads at a glance.

    from forecast.report import write_report
    write_report(fc, "report.html", budget=6.4e4, target=0.62)

The page needs no network to open (inline CSS, charts as base64 PNG, no scripts), so it can be
mailed, attached to a ticket or opened on a machine without internet. It holds, top to bottom:
the recommendation and its reasons, one table of every recipe at the budget (P(best), metric,
asymptote, compute to target), the fan charts, the asymptote forest, the compute-to-target table,
early-stop advice per run, the fit's convergence diagnostics (a red banner at the top when the fit
did not converge, and a banner for the data's warnings said when its runs were read) and
provenance (inputs, runs, package version, date).

Three layers, so every part is testable on its own:
  collect_report(fc, ...)  fit -> ReportData (plain tables, text and PNG bytes); it and the
                           helpers above it are the only code here that reads the posterior;
  *_html(...)              pure functions: a piece of ReportData -> an HTML fragment (all text
                           escaped with html.escape);
  render_report(data)      joins the fragments into the page; write_report writes it atomically.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import math
import re
import sys
from dataclasses import dataclass, field
from os import PathLike

import numpy as np
import pandas as pd

from . import __version__
from .data import FarFromDataWarning
from .formatting import (
    COMMAND_SETTINGS,  # noqa: F401 (moved to formatting, for forecast watch: forecast.cli and the tests import it from here)
    FAST_FIT_QUICK_LOOK,
    GAIN_PER_COMPUTE_WORDS,
    PYTHON_SETTINGS,
    SettingNames,
    fmt_compute,
    fmt_p_reach,
    fmt_prob,
    names_shown,
    prob_is,
    shown_against_limit,
)
from .io import atomic_write_text, json_safe
from .shape_check import misshapen_runs_sentence
from .thread_warnings import this_threads_warnings_dropped

__all__ = [
    "ReportData",
    "Recommendation",
    "collect_report",
    "render_report",
    "write_report",
    "report_summary",
    "p_best_from_draws",
    "budget_draws",
    "budget_table",
    "default_budget",
    "default_target",
]

BUDGET_MULTIPLE = 4.0  # default budget: this many times the largest compute observed so far
CLEAR_WINNER = 0.8  # P(best) at or above which the built-in recommendation names one recipe

# ============================================================================ data


@dataclass
class Recommendation:
    """A decision in words: one headline and the reasons behind it, and who made it."""

    headline: str
    reasons: list[str]
    source: str  # the module that produced it, so a reader knows which rule speaks
    # the numbers its sentences give, for a script (report --json): forecast.decisions' recipes_below_data
    # and budget_split (decide_split's to_dict(), as `decide --total --json`); empty for the built-in rule
    numbers: dict = field(default_factory=dict)


@dataclass
class StopAdvice:
    """Continue/stop advice per run (from forecast.early_stop)."""

    # columns run_id, recipe, decision (stop/continue, or ended: a trainer's run whose folder, or the
    # table's ended column, says it ended, not advised; ended_runs), rule, reason, and shape_note and
    # late_trend_z (a run advised whose end falls away from its curve, forecast.shape_check; else None, NaN;
    # a stop past the budget, which reads no forecast, has the number and no note), and chains_say (a stop on a
    # fit that did not converge: what each chain's draws alone advise, early_stop.chains_say; else None)
    table: pd.DataFrame
    source: str


@dataclass
class ReportData:
    """Everything on the page, as plain data. Built by collect_report, rendered by render_report."""

    title: str
    budget: float
    target: float | None
    compute_unit: str
    recipe_table: pd.DataFrame  # one row per recipe, columns as builtin_recipe_table()
    recommendation: Recommendation
    diagnostics: dict  # ConvergenceReport.to_dict() plus sampler facts
    provenance: dict
    figures: dict[str, bytes] = field(default_factory=dict)  # name -> PNG bytes
    stop_advice: StopAdvice | None = None
    synthetic: bool = False
    notes: list[str] = field(default_factory=list)  # integration notes shown in a muted box
    warnings: list[str] = field(default_factory=list)  # about the question asked (a budget far from the data): a banner
    # about the runs the fit read (a recipe whose runs differ in a setting, ...): said on the terminal
    # of whoever fitted, and kept with the fit (fc.data_warnings_) for the page: a banner of its own
    data_warnings: list[str] = field(default_factory=list)
    target_chosen: bool = False  # the target was picked for the page (default_target), not asked for
    budget_chosen: bool = False  # the budget was the default (default_budget), not asked for
    honesty: dict | None = None  # a cross-validation's metrics and sentences (cross_validation_section_data)
    settings: SettingNames = PYTHON_SETTINGS  # how the page names budget, target, ... (COMMAND_SETTINGS: the CLI's flags)


# ============================================================================ numbers (pure)


def p_best_from_draws(draws: np.ndarray) -> np.ndarray:
    """P(each column is the largest), from joint draws of shape (n_draws, n_recipes).

    Draw i of every recipe comes from the same posterior draw, so shared uncertainty (pooled
    hyperparameters, noise levels) cancels in the comparison instead of inflating it.
    """
    draws = np.asarray(draws, dtype=float)
    if draws.ndim != 2 or draws.shape[1] == 0:
        raise ValueError(f"draws must be (n_draws, n_recipes), got shape {draws.shape}")
    winners = np.argmax(draws, axis=1)
    return np.bincount(winners, minlength=draws.shape[1]) / draws.shape[0]


def _type_name(value) -> str:
    """A value's type as a refusal names it: with its module unless built in, since another library's
    DataFrame said as "DataFrame" read as the very thing asked for."""
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _largest_compute_of(runs) -> float:
    """The largest compute of a run table, for default_budget; TypeError or ValueError saying what it takes.
    A path failed as "string indices must be integers", a table without the column as KeyError: 'compute'."""
    to_pandas = getattr(runs, "to_pandas", None)  # a polars DataFrame or pyarrow Table, read as validate_runs reads them
    if not isinstance(runs, (pd.DataFrame, pd.Series)) and callable(to_pandas):
        runs = to_pandas()
    if not isinstance(runs, pd.DataFrame):
        given = f"{type(runs).__name__} {runs!r}" if isinstance(runs, (str, PathLike)) else _type_name(runs)
        raise TypeError(f"default_budget takes a run table (a pandas DataFrame: load_runs('runs.csv'), or a fit's "
                        f"fc.runs_), got {given}")
    if "compute" not in runs.columns:
        raise ValueError(f"default_budget reads the run table's column 'compute', which this table lacks "
                         f"(columns: {', '.join(map(str, runs.columns)) or 'none'})")
    compute = runs["compute"]
    numeric = pd.api.types.is_numeric_dtype(compute) and not pd.api.types.is_bool_dtype(compute)
    largest = float(compute.max()) if numeric and len(compute) else float("nan")
    if not (np.isfinite(largest) and largest > 0):  # text ("1e3") was taken: max() of strings
        raise ValueError("default_budget: column 'compute' must hold at least one compute > 0 (numbers, as load_runs "
                         f"reads them), got {compute.head(3).tolist()!r}{' ...' if len(compute) > 3 else ''}")
    return largest


def default_budget(runs: pd.DataFrame) -> float:
    """A planning horizon a bit beyond the data: 4x the largest compute observed so far, rounded to
    the digits the page prints (4.08e12, not 4.0792e12). Forecasts draw their noise per compute, so
    `forecast decide --budget 4.08e12` copied from the page gave other probabilities than the page."""
    largest = _largest_compute_of(runs)
    exact = BUDGET_MULTIPLE * largest
    return float(fmt_compute(exact).replace(",", ""))


def default_target_from_asymptotes(asymptote_medians) -> float:
    """A target that is contested: the median of the recipes' forecast ceilings, rounded down to
    0.01, so roughly half the recipes are forecast to reach it and compute-to-target separates them."""
    level = float(np.median(np.asarray(asymptote_medians, dtype=float)))
    return float(np.clip(math.floor(level * 100) / 100, 0.01, 0.99))


TARGET_CHOSEN_NOTE = "chosen for the page: the median of the recipes' forecast asymptotes, rounded down to 0.01"


def default_target(fc) -> float:
    recipes = fc.asymptote().query("level == 'recipe'")
    return default_target_from_asymptotes(recipes["q50"])


# ============================================================================ collecting (reads the fit)


def budget_draws(fc, budget: float, *, kind: str = "new_run") -> np.ndarray:
    """Draws of each recipe's new run's true pass rate at `budget`: (n_draws, n_recipes), in
    fc.recipes order. No single evaluation's white noise, as forecast.decisions draws them, so
    the fallback table shows the numbers `forecast decide` shows.

    Each recipe gets its own random stream: the seed-to-seed spread and wander of two recipes'
    new runs are independent, while posterior draw i is shared (see p_best_from_draws).
    """
    columns = [fc.sample_curves([budget], recipe=r, kind=kind, rng=fc.recipe_stream(r), eval_noise=False,
                                shared_noise=True)[:, 0] for r in fc.recipes]
    return np.column_stack(columns)


def budget_table(recipes, draws: np.ndarray, target: float | None = None) -> pd.DataFrame:
    """Per recipe: P(best), metric at the budget (mean, q05/q50/q95), and P(metric >= target)."""
    table = pd.DataFrame(
        {
            "recipe": list(recipes),
            "p_best": p_best_from_draws(draws),
            "at_budget_mean": draws.mean(axis=0),
            "at_budget_q05": np.quantile(draws, 0.05, axis=0),
            "at_budget_q50": np.quantile(draws, 0.50, axis=0),
            "at_budget_q95": np.quantile(draws, 0.95, axis=0),
        }
    )
    if target is not None:
        table["p_target"] = (draws >= target).mean(axis=0)
    return table


def add_asymptotes(table: pd.DataFrame, fc) -> pd.DataFrame:
    """Join the recipe asymptote A (median and 90% interval) onto a per-recipe table."""
    asym = fc.asymptote().query("level == 'recipe'")[["recipe", "q05", "q50", "q95"]]
    asym = asym.rename(columns={"q05": "A_q05", "q50": "A_q50", "q95": "A_q95"})
    return table.merge(asym, on="recipe", how="left")


def builtin_recipe_table(fc, budget: float, target: float | None) -> pd.DataFrame:
    """The recipe table without forecast.decisions: P(best) and metric at the budget computed
    here, compute to target from the forecaster. Same columns as table_from_decision()."""
    table = budget_table(fc.recipes, budget_draws(fc, budget), target)
    if target is not None:
        ctt = fc.compute_to_target(target)[["recipe", "p_reach", "q05", "q50", "q95"]]
        ctt = ctt.rename(columns={"q05": "c_target_q05", "q50": "c_target_q50", "q95": "c_target_q95"})
        table = table.merge(ctt, on="recipe")
    table = add_asymptotes(table, fc)
    return table.sort_values(["p_best", "at_budget_q50"], ascending=False).reset_index(drop=True)


DECISION_COLUMNS = {
    "q05": "at_budget_q05",
    "q50": "at_budget_q50",
    "q95": "at_budget_q95",
    "expected": "at_budget_mean",
    "expected_mcse": "at_budget_mean_mcse",
    "p_reach_ever": "p_reach",
    "compute_q05": "c_target_q05",
    "compute_q50": "c_target_q50",
    "compute_q95": "c_target_q95",
}


def table_from_decision(decision_table: pd.DataFrame) -> pd.DataFrame:
    """forecast.decisions' rank_recipes table in this module's column names (order kept: best
    expected metric first, the order its recommendation text argues in)."""
    return decision_table.rename(columns=DECISION_COLUMNS).drop(columns=["budget"], errors="ignore")


def split_sentences(text: str, names=()) -> list[str]:
    """Sentences of a recommendation paragraph: split after a full stop followed by a capital
    (numbers such as 0.62 or 6.4e+04 have no space after their dot). `names` (the recipes') are
    kept whole: 'lr 3e-4. Big batch' was split in two, and the headline cut inside the name."""
    held = sorted({str(name) for name in names if str(name)}, key=len, reverse=True)
    text = text.strip()
    if held:  # each quoted name, as the text quotes it, for a stand-in without a full stop or a space, in one pass
        quoted = re.compile("|".join(re.escape(f"'{name}'") for name in held))
        text = quoted.sub(lambda found: f"'\0{held.index(found[0][1:-1])}\0'", text)

    def put_back(part: str) -> str:
        return re.sub(r"\0(\d+)\0", lambda found: held[int(found[1])], part)

    return [put_back(part.strip()) for part in re.split(r"(?<=[.!?])\s+(?=[A-Z'])", text) if part.strip()]


def recommendation_from_text(text: str, source: str, extra: list[str] = (), names=()) -> Recommendation:
    """First sentence as the headline, the rest (and `extra` lines) as its reasons; `names` (the
    recipes') are not split at a full stop of their own."""
    sentences = split_sentences(text, names) or ["(no recommendation)"]
    return Recommendation(sentences[0], sentences[1:] + list(extra), source=source)


def builtin_recommendation(table: pd.DataFrame, budget: float, unit: str, target: float | None) -> Recommendation:
    """A plain rule on P(best at budget), used when forecast.decisions is not available."""
    ranked = table.sort_values("p_best", ascending=False).reset_index(drop=True)
    top = ranked.iloc[0]
    at = f"{fmt_compute(budget)} {unit}"
    if top["p_best"] >= CLEAR_WINNER:
        headline = f"Scale {top['recipe']}: P(best at {at}) {prob_is(top['p_best'])}"
    elif len(ranked) > 1:
        second = ranked.iloc[1]
        headline = (
            f"No clear winner at {at}: {top['recipe']} (P(best) {fmt_prob(top['p_best'])}) vs "
            f"{second['recipe']} ({fmt_prob(second['p_best'])}); more seeds or compute before committing"
        )
    else:
        headline = f"Only one recipe ({top['recipe']}): nothing to compare"
    reasons = []
    for _, row in ranked.head(3).iterrows():
        # the expected value, as the recipe table under it and forecast.decisions' recommendation cite it
        reason = (
            f"{row['recipe']}: metric at budget {fmt_interval(row['at_budget_mean'], row['at_budget_q05'], row['at_budget_q95'])}, "
            f"asymptote {fmt_interval(row['A_q50'], row['A_q05'], row['A_q95'])}"
        )
        if target is not None and "p_target" in row:
            reason += f", P(>= {target:g} at budget) {prob_is(row['p_target'])}"
        reasons.append(reason)
    return Recommendation(headline, reasons, source="built-in rule on P(best at budget) (forecast.decisions unavailable)")


# ----------------------------------------------------------------------------- decisions
# The scale decision comes from forecast.decisions and the stop advice from forecast.early_stop,
# so the report says exactly what `forecast decide` and the watcher say. If either module is
# missing (a trimmed install), the report falls back to the built-in P(best) rule and says so.


BELOW_ALL_DATA_CONSEQUENCE = ("Each forecast at the budget extrapolates its recipe's curve backwards, before its "
                              "runs' first evaluation.")


def budget_below_all_data(fc, budget: float) -> bool:
    """The budget lies below every recipe's first evaluation: the page's banner says so, and that every
    forecast at it runs backwards, in place of the recommendation's sentence and the split line's reason."""
    from .decisions import within_data

    return not within_data(budget, float(fc.runs_["compute"].min()))


def scale_decision(fc, budget: float, target: float | None, *, target_chosen: bool = False
                   ) -> tuple[pd.DataFrame, Recommendation, list[str]]:
    """(recipe table, recommendation, notes) for the budget. A target chosen for the page fills the
    table's target columns but stays out of the recommendation: nobody asked that question. A budget
    below all the data is the page's banner's to say (collect_report), with what it does to every forecast."""
    try:
        from .decisions import CLEAR_WINNER_P, decide, decide_split
    except ImportError:
        table = builtin_recipe_table(fc, budget, target)
        note = "forecast.decisions is not installed: the recommendation uses the built-in P(best) rule."
        return table, builtin_recommendation(table, budget, fc.compute_unit, target), [note]
    # a budget below all the data is the banner's, above the recommendation: every recipe's forecast there runs
    # backwards, and the sentence saying so again here read the same fact twice
    say_below_data = not budget_below_all_data(fc, budget)
    decision = decide(fc, budget, target=target, say_below_data=say_below_data)
    if target_chosen:
        from .decisions import below_data_text, recommend_text

        decision.recommendation = recommend_text(decision.table, budget=budget, unit=fc.compute_unit)
        below = decision.extra.get("recipes_below_data")
        if below and say_below_data:  # not about the target: said as decide says it
            decision.recommendation += " " + below_data_text(budget, below, fc.compute_unit,
                                                             every=len(below) == len(fc.recipes) > 1)
    table = add_asymptotes(table_from_decision(decision.table), fc)
    extra = []
    split = None
    if len(fc.recipes) > 1:
        # one run at the budget, or several smaller runs keeping the best: a question every
        # planning meeting asks once a recipe looks good
        # the recipes forecast below their data are the recommendation's sentence above (the same one
        # run at the same budget): said again in this line, a planner read the same fact twice
        split = decide_split(fc, budget, say_below_data=False)
        note = side_by_side_note(float(decision.table["p_best"].iloc[0]), len(decision.table),
                                 split.extra["recommended_ways"], len(split.table), clear_winner=CLEAR_WINNER_P)
        extra.append("Budget split: " + split.recommendation + note)
    recommendation = recommendation_from_text(decision.recommendation, "forecast.decisions", extra, names=fc.recipes)
    # the split's choice and the recipes left out were only in its sentence: numbers for a script too
    recommendation.numbers = {"recipes_below_data": decision.extra["recipes_below_data"],
                              "budget_split": None if split is None else split.to_dict()}
    return table, recommendation, []


def side_by_side_note(top_p_best: float, n_recipes: int, recommended_ways: int, n_splits: int,
                      clear_winner: float = CLEAR_WINNER) -> str:
    """What reconciles a headline too close to call, which suggests running the leaders side by side, with a
    budget split line that puts the whole budget into one run ('' where the two do not meet). The two answer
    different questions (which recipe leads; what this one budget scores best with), and a planner read them,
    one under the other, as advice that contradicts itself."""
    too_close = n_recipes > 1 and top_p_best < clear_winner  # the headline's "Too close to call"
    if not (too_close and recommended_ways == 1 and n_splits > 1):
        return ""
    return (" The side-by-side runs suggested above are for learning which recipe leads, before a later budget; "
            "for the best score at this budget, no split compared here is expected to beat one run.")


def stop_advice(fc, budget: float, target: float | None, misshapen=()) -> tuple[StopAdvice | None, list[str]]:
    """Should each run continue to the budget? forecast.early_stop's rules, every run short of the
    budget compared with every other run: a run in flight at the budget, a run at or past it (or one
    that ended, ended_runs) at what it reached. misshapen: the fit's misshapen_runs(), as the fit
    diagnostics show them; each one advised on its forecast gets its note (shape_check.misshapen_run_note)
    beside its advice, where whoever decides to stop or continue it reads; one past the budget (its stop
    reads no forecast) or that ended (not advised) none;
    a run advised on a comparison with a flagged run is told that run's forecast is likely too high
    (early_stop.noting_misshapen_runs, as forecast watch and the trainer say it)."""
    try:
        from .early_stop import EarlyStopConfig, noting_misshapen_runs, recommend_runs
    except ImportError:
        return None, ["forecast.early_stop is not installed: no per-run stop advice."]
    last = fc.runs_.groupby("run_id")["compute"].max()
    # The runs in flight are the runs short of the budget: only they can continue to it. A run at or
    # past it has finished as far as this question goes, and is an alternative at what it reached
    # (recommend_runs' default for a run it is not asked about). Counted in flight, the finished runs
    # raised the stop cap (at most half of the runs in flight) past half of the runs that can go on:
    # with 9 of 21 runs past a budget, 8 of the other 12 were stopped on one forecast; and a finished
    # run could be the "unfinished" bar whose runner-up is kept going.
    # A trainer's run that ended (its folder's summary.json, or stopped.json from its own advisor:
    # --advisor-every) is not in flight either, whatever the budget: advised to continue or stop at a
    # budget above where it ended, it read as if it could still go on. It is an alternative at what it reached.
    ended = ended_runs(fc.runs_)
    short = {run: float(budget) for run in fc.run_ids if last[run] < budget and run not in ended}
    # the gain-per-compute rule's unit as before: the median compute each run is judged at (a run that
    # ended at what it reached: counted at the budget, it made a typical run's budget one no run went to)
    typical = float(np.median([float(last[run]) if run in ended else max(float(budget), float(last[run]))
                               for run in fc.run_ids]))
    recs = recommend_runs(fc, short, EarlyStopConfig(target=target), compute_scale=typical) if short else {}
    # the shape notes as forecast watch and the trainer give them, from the fit's one test of every run
    noting_misshapen_runs(fc, recs, flagged=list(misshapen))
    recipe_of = fc.runs_.groupby("run_id")["recipe"].first()
    rows = [
        {"run_id": run, "recipe": recipe_of[run], "decision": rec.action, "rule": rec.rule, "reason": rec.message,
         "shape_note": rec.details.get("shape_note"), "late_trend_z": rec.details.get("late_trend_z", float("nan")),
         # a stop on a fit that did not converge: what each chain alone advises (early_stop.noting_what_each_chain_says)
         "chains_say": rec.details.get("chains_say")}
        for run, rec in recs.items()
    ]
    # its own compute is not a budget anyone set: say it in the report's terms
    rows += [
        {"run_id": run, "recipe": recipe_of[run], "decision": "stop", "rule": "budget_reached",
         "reason": f"stop: already at {fmt_compute(last[run])} {fc.compute_unit}, at or past the report's budget "
                   f"({fmt_compute(budget)} {fc.compute_unit})"}
        for run in fc.run_ids if run not in short and run not in ended
    ]
    rows += [
        {"run_id": run, "recipe": recipe_of[run], "decision": "ended", "rule": rule,
         "reason": f"not advised: {how}; not in flight, so only an alternative for the others at what it reached"}
        for run, (rule, how) in ended.items() if run in recipe_of.index
    ]
    late_trend = {row["run_id"]: float(row["late_trend_z"]) for row in misshapen}
    for row in rows:
        if "shape_note" in row:  # noted with its advice above
            continue
        # past the budget: its stop reads no forecast, so no note beside it (RULES_ON_THE_FORECAST), but
        # the test's number stays in the row as in recommend_runs' details; one that ended is not advised
        advised = row["decision"] == "stop" and row["run_id"] in late_trend
        row["shape_note"], row["chains_say"] = None, None
        row["late_trend_z"] = late_trend[row["run_id"]] if advised else float("nan")
    table = pd.DataFrame(rows)
    # stops first (they are the news), then the runs that continue, then the runs that ended; by recipe within
    order = table["decision"].map({"stop": 0, "continue": 1}).fillna(2)
    table = table.assign(_order=order).sort_values(["_order", "recipe", "run_id"]).drop(columns="_order")
    return StopAdvice(table.reset_index(drop=True), source="forecast.early_stop (default rules)"), []


def names_recipe(text: str, recipe) -> bool:
    """Whether `text` names `recipe` as a whole name ('a' is not named by 'ab' or by 'a-s0')."""
    return re.search(rf"(?<![\w.-]){re.escape(str(recipe))}(?![\w.-])", text) is not None


def saturated_stops_note(table: pd.DataFrame, recommendation: Recommendation) -> str | None:
    """A reason for the recommendation when runs of a recipe it names are told to stop as
    saturated. On a sweep whose runs reached their plateau, every run of the recipe to scale was
    told to stop under a headline to scale it, and a planner read "drop this recipe"; the stop only
    says that run has nothing left to gain at the budget. None when no such run is stopped."""
    stopped = table[(table["decision"] == "stop") & (table["rule"] == "saturated")]
    named = [recipe for recipe in dict.fromkeys(stopped["recipe"]) if names_recipe(recommendation.headline, recipe)]
    if not named:
        return None
    runs = "; ".join(f"'{recipe}': {', '.join(map(str, stopped.loc[stopped['recipe'] == recipe, 'run_id']))}" for recipe in named)
    return (f"Runs of the recipe named here are told to stop as saturated in the stop advice below ({runs}): each has "
            "nothing left to gain at the budget, its curve having flattened. That stop ends those runs, not the recipe: "
            "this recommendation is about which recipe a run at the budget should use.")


def ended_runs(runs: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """{run_id: (rule, how it ended in words)} for the runs that have ended. A run read from a
    trainer's run folder (evals.jsonl, the `_source` of its rows) says it in the folder: 'advisor_stopped'
    when it holds stopped.json (the trainer's --advisor-every stopped it; a run killed before its
    summary.json stays stopped, as the trainer keeps it), 'finished' when it holds summary.json alone.
    Any other run says it in the table's `ended` column (a sweep's runs.csv, a saved fit's run table:
    forecast.data.ENDED_COLUMN); a table without it says nothing, and its runs are not listed."""
    from pathlib import Path

    from .data import RUN_LOG_NAME
    from .watch import how_it_ended, is_finished, stopped_by_advisor

    ended = {}
    for run, rows in runs.groupby("run_id"):
        sources = rows["_source"].dropna().astype(str).unique() if "_source" in rows else []
        if len(sources) != 1 or Path(sources[0]).name != RUN_LOG_NAME:
            if said := ended_as_the_table_says(rows):
                ended[str(run)] = said
            continue
        folder = Path(sources[0]).parent
        if stopped_by_advisor(folder):
            how = how_it_ended(folder, rows)
            if not how.startswith("stopped"):  # a stopped.json without the advice it should hold
                how = f"stopped by its own advisor ({folder / 'stopped.json'} names no reason it can be read for)"
            ended[str(run)] = ("advisor_stopped", how + " (stopped.json)")
        elif is_finished(folder):
            ended[str(run)] = ("finished", how_it_ended(folder, rows) + " (summary.json)")
    return ended


def ended_as_the_table_says(rows: pd.DataFrame) -> tuple[str, str] | None:
    """(rule, how it ended in words) from one run's `ended` column (forecast.data checks it holds one
    of ENDED_VALUES per run, '' for a run in flight); None when it is in flight or the table has no such column."""
    from .data import ENDED_COLUMN
    from .watch import last_evaluation

    said = rows[ENDED_COLUMN].dropna().astype(str).str.strip() if ENDED_COLUMN in rows else pd.Series(dtype=str)
    said = said[said != ""]
    if said.empty:
        return None
    rule = said.iloc[0]
    how = "stopped by its own advisor" if rule == "advisor_stopped" else "finished"
    return rule, f"{how} at {last_evaluation(rows)} (the table's {ENDED_COLUMN} column)"


# ----------------------------------------------------------------------------- figures


def figure_png(fig, *, dpi: int = 100) -> bytes:
    """A matplotlib figure as PNG bytes; the figure is closed (reports make many)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def fan_chart_png(fc, budget: float, target: float | None, recipes=None, ylim=None) -> bytes:
    """Panels in the order given (the report passes best first, matching its table)."""
    return figure_png(fan_chart_figure(fc, budget, target, recipes, ylim))


def fan_chart_figure(fc, budget: float, target: float | None, recipes=None, ylim=None):
    from .plotting import plot_fan_chart

    return plot_fan_chart(fc, recipes=recipes, budget=budget, kind="new_run", title=None, target=target, ylim=ylim)


FAN_CHART_COLUMNS = 3  # plot_fan_chart's default grid
FAN_CHART_ROWS_PER_IMAGE = 3  # three rows of panels with their key fit a printed page at its full width


def fan_chart_groups(recipes: list) -> list[list]:
    """The recipes of each fan-chart image, in order: at most FAN_CHART_ROWS_PER_IMAGE rows of
    panels each, the rows shared out evenly. One image of 24 recipes was 8 rows tall: printed, it
    was sliced through a row of panels, or shrunk to fit a page until its labels were unreadable."""
    rows = [recipes[k:k + FAN_CHART_COLUMNS] for k in range(0, len(recipes), FAN_CHART_COLUMNS)]
    n_images = max(1, math.ceil(len(rows) / FAN_CHART_ROWS_PER_IMAGE))
    groups, start = [], 0
    for k in range(n_images):
        take = len(rows) // n_images + (k < len(rows) % n_images)
        groups.append([recipe for row in rows[start:start + take] for recipe in row])
        start += take
    return [group for group in groups if group]


def fan_chart_key(k: int) -> str:
    """figures' name of the k-th fan-chart image (0-based): 'fan_chart', then 'fan_chart_2', ..."""
    return "fan_chart" if k == 0 else f"fan_chart_{k + 1}"


def fan_chart_figures(fc, budget: float, target: float | None, recipes: list) -> dict[str, bytes]:
    """The fan-chart images. Several images of one sweep share one y range (the union of their
    own): each drawn to its own, the same pass rate and target line stood at different heights in
    two parts of one page, and a recipe looked to climb further in the part with the narrower range."""
    groups = fan_chart_groups(list(recipes))
    ylim = None
    if len(groups) > 1:  # each image's own range first (matplotlib's, margins included: its panels drawn, not laid out)
        from .plotting import fan_chart_ylim

        ranges = [fan_chart_ylim(fc, recipes=group, budget=budget, target=target) for group in groups]
        ylim = (min(low for low, _ in ranges), max(high for _, high in ranges))
    return {fan_chart_key(k): fan_chart_png(fc, budget, target, recipes=group, ylim=ylim)
            for k, group in enumerate(groups)}


def forest_png(fc, target: float | None) -> bytes:
    from .plotting import plot_asymptote_forest

    return figure_png(plot_asymptote_forest(fc, reference=target))


# ----------------------------------------------------------------------------- provenance


def is_synthetic(runs: pd.DataFrame) -> bool:
    """Synthetic tables carry a `source` column saying so (forecast.synthetic writes it)."""
    return bool("source" in runs and runs["source"].astype(str).str.contains("synthetic", case=False).any())


def provenance(fc, inputs=None) -> dict:
    runs = fc.runs_
    sources = list(inputs) if inputs else sorted(runs["_source"].dropna().astype(str).unique()) if "_source" in runs else []
    info = fc.fit_info_ or {}
    return {
        "inputs": [str(s) for s in sources] or ["(in-memory table)"],
        "n_runs": int(runs["run_id"].nunique()),
        "n_recipes": int(runs["recipe"].nunique()),
        "n_evaluations": int(len(runs)),
        "compute_range": [float(runs["compute"].min()), float(runs["compute"].max())],
        "compute_unit": fc.compute_unit,
        "forecast_version": __version__,
        "generated": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        # the kept try's chains and draws, which a longer try may have doubled
        "sampler": f"{info.get('sampler', '?')}, mode {fc.mode}, {fc.posterior.sizes['chain']} chains x "
                   f"{fc.posterior.sizes['draw']} draws",
        "random_seed": info.get("random_seed"),
        "python": sys.version.split()[0],
        "mode": fc.mode,
    }


def diagnostics_dict(fc, misshapen=None) -> dict:
    """The fit's diagnostics for the page; misshapen: its misshapen_runs(), when already computed."""
    d = fc.diagnostics().to_dict()
    info = fc.fit_info_ or {}
    d["fit_seconds"] = float(info.get("compile_seconds", 0.0)) + float(info.get("sample_seconds", 0.0))
    if tries := fc.sampling_tries():
        d["sampling_tries"] = tries
    d["misshapen_runs"] = fc.misshapen_runs() if misshapen is None else list(misshapen)
    return d


def cross_validation_section_data(cv: pd.DataFrame, fc=None, source=None) -> dict:
    """What the page shows of a cross-validation (forecast.cross_validation): its metrics, its
    sentences, and a warning when it was made on runs this fit does not hold."""
    from .cross_validation import describe_cross_validation, level_of, performance_metrics
    from .plotting import plot_cross_validation

    metrics = performance_metrics(cv)
    foreign = sorted(set(cv["run_id"].astype(str)) - set(map(str, fc.run_ids))) if fc is not None else []
    warning = None
    if foreign:
        warning = (f"the cross-validation{f' ({source})' if source else ''} holds runs this fit does not "
                   f"({names_shown(foreign, 4)}): "
                   "its figures are of other runs")
    return {"source": str(source) if source is not None else None, "level": level_of(cv),
            "metrics": metrics, "summary": describe_cross_validation(cv, metrics), "warning": warning,
            "figure": figure_png(plot_cross_validation(cv))}


def collect_report(fc, *, budget=None, target=None, target_chosen: bool = False, inputs=None, title=None,
                   progress: bool = False, cross_validation: pd.DataFrame | None = None,
                   cross_validation_source=None, settings: SettingNames = PYTHON_SETTINGS) -> ReportData:
    """Everything the page shows, computed once from a fitted forecaster.

    target_chosen: the target was picked for the page (default_target) rather than asked for. It
    then shows compute to target and P(>= target), but stops no run for missing it: a stop on a
    target nobody set would be advice nobody asked for (and `forecast watch` has no such default).
    cross_validation: a forecast.cross_validation.cross_validate() result (or one read back with
    read_cross_validation) for a section on how honest the intervals were on held-out curve ends.
    settings: how the page names the settings to change (PYTHON_SETTINGS: these keyword arguments;
    COMMAND_SETTINGS: `forecast report`'s flags).
    """
    from tqdm.auto import tqdm

    fc._require_fit("collect_report()")
    budget_chosen = budget is None
    budget = float(budget) if budget is not None else default_budget(fc.runs_)
    if not budget > 0:
        raise ValueError(f"budget must be > 0, got {budget}")
    if target is not None and not 0 < target < 1:
        raise ValueError(f"target must lie in (0, 1), got {target}")
    steps = tqdm(total=5, desc="report", disable=not progress, leave=False)
    # a budget far from the data is said once, on the page and in its warnings (below), not by
    # decide(), decide_split() and plot() in turn
    with this_threads_warnings_dropped(FarFromDataWarning):
        table, recommendation, notes = scale_decision(fc, budget, target, target_chosen=target_chosen)
        steps.update()
        # one test of the runs' shapes for the fit diagnostics and the stop advice: both name the same runs
        misshapen = fc.misshapen_runs()
        advice, stop_notes = stop_advice(fc, budget, None if target_chosen else target, misshapen)
        if advice is not None and target_chosen:
            advice.source += "; no target rule: the page's target was chosen for it, not given"
        if advice is not None and (note := saturated_stops_note(advice.table, recommendation)):
            recommendation.reasons.append(note)  # beside the headline, where the two would read as a contradiction
        steps.update()
        figures = fan_chart_figures(fc, budget, target, list(table["recipe"]))
    steps.update()
    figures["forest"] = forest_png(fc, target)
    steps.update()
    diagnostics = diagnostics_dict(fc, misshapen)
    steps.update()
    steps.close()
    synthetic = is_synthetic(fc.runs_)
    from .data import far_from_data

    far = far_from_data(budget, fc.runs_["compute"], unit=fc.compute_unit, name="The budget")
    if far and budget_below_all_data(fc, budget):  # said here alone, not in the recommendation and split line too
        far += " " + BELOW_ALL_DATA_CONSEQUENCE
    honesty = None if cross_validation is None else cross_validation_section_data(cross_validation, fc, cross_validation_source)
    question_warnings = ([far] if far else []) + ([honesty["warning"]] if honesty and honesty["warning"] else [])
    return ReportData(
        title=title or ("Scaling forecast (synthetic data)" if synthetic else "Scaling forecast"),
        budget=budget,
        target=target,
        compute_unit=fc.compute_unit,
        recipe_table=table,
        recommendation=recommendation,
        diagnostics=diagnostics,
        provenance=provenance(fc, inputs),
        figures=figures,
        stop_advice=advice,
        synthetic=synthetic,
        notes=notes + stop_notes,
        warnings=question_warnings,
        target_chosen=bool(target_chosen and target is not None),
        budget_chosen=budget_chosen,
        honesty=honesty,
        settings=settings,
        # said once on the page: one the question's banner holds (the budget's, its consequence appended) is left out
        data_warnings=[w for w in fc.data_warnings_ if not any(w in said for said in question_warnings)],
    )


# ============================================================================ formatting (pure)


def fmt_metric(x) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{x:.3f}"


def fmt_interval(mid, lo, hi, fmt=fmt_metric) -> str:
    """median [5%, 95%]"""
    return f"{fmt(mid)} [{fmt(lo)}, {fmt(hi)}]"


# ============================================================================ HTML fragments (pure)

CSS = """
:root { --ink:#1f2933; --muted:#616e7c; --line:#d9e2ec; --bg:#f5f7fa; --accent:#1f77b4;
        --ok:#2f855a; --bad:#c53030; --warn:#b7791f; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
       font:15px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width:1180px; margin:0 auto; padding:24px 28px 48px; }
header h1 { margin:0 0 4px; font-size:26px; }
.meta { color:var(--muted); font-size:14px; }
section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:16px 20px;
          margin:16px 0; }
h2 { font-size:18px; margin:0 0 10px; }
.explain { color:var(--muted); font-size:13px; margin:6px 0 0; }
.banner { border-radius:8px; padding:12px 18px; margin:14px 0; font-weight:600; }
.banner.bad { background:#fff5f5; border:2px solid var(--bad); color:var(--bad); }
.banner.warn { background:#fffaf0; border:2px solid var(--warn); color:#7b341e; }
.banner ul { margin:6px 0 0; font-weight:400; }
.chip { display:inline-block; padding:1px 9px; border-radius:10px; font-size:12px; font-weight:600; }
.chip.ok { background:#e6fffa; color:var(--ok); } .chip.bad { background:#fff5f5; color:var(--bad); }
.chip.stop { background:#fff5f5; color:var(--bad); } .chip.continue { background:#e6fffa; color:var(--ok); }
.chip.ended { background:#f0f4f8; color:var(--muted); }
.chains-note { color:#9b2c2c; }  /* a stop on a fit that did not converge: what each chain alone says */
.shape-note { color:#7b341e; }  /* a run whose forecasts are likely too high (forecast.shape_check) */
.recommendation { border-left:6px solid var(--accent); }
.recommendation .headline { font-size:20px; font-weight:700; margin:0 0 8px; }
.recommendation ul { margin:0; padding-left:20px; }
table { border-collapse:collapse; width:100%; font-size:14px; }
.scroll { overflow-x:auto; }  /* a table wider than a narrow window scrolls inside its card */
th, td { padding:6px 10px; border-bottom:1px solid var(--line); text-align:left; vertical-align:middle; }
th { background:#f0f4f8; font-weight:600; font-size:13px; }
th.num { text-align:right; }
td.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
td.name, span.name { white-space:nowrap; }
span.interval { white-space:nowrap; }  /* '[0.613, 0.638]' is never split over two lines */
tr:nth-child(even) td { background:#fafbfc; }
.bar { display:inline-block; height:10px; background:var(--accent); border-radius:2px;
       vertical-align:middle; margin-right:6px; }
figure { margin:0; } figure img { max-width:100%; height:auto; display:block; margin:0 auto; }
/* on a phone a chart of several panels shrank until its labels could not be read: it keeps a
   least width (figure_html) and scrolls sideways in its box instead; a wide window is unchanged */
figure img { min-width:var(--least-width, 0); }
figcaption { color:var(--muted); font-size:13px; margin-top:6px; }
.grid2 { display:grid; grid-template-columns: 1fr 1fr; gap:16px; }
details summary { cursor:pointer; color:var(--accent); margin:6px 0; font-size:14px; }
.notes { color:var(--muted); font-size:13px; background:transparent; border-style:dashed; }
dl { display:grid; grid-template-columns: max-content minmax(0, 1fr); gap:4px 16px; margin:0; font-size:14px; }
dt { color:var(--muted); } dd { margin:0; overflow-wrap:anywhere; }  /* a long input path wraps */
@media screen and (max-width:600px) {
  /* a phone's width went a third to margins and padding, left of the scrolling tables and charts */
  main { padding:14px 8px 32px; }
  section { padding:12px; }
}
@media print {
  /* paper has no scrollbar: a table wider than the page lost its right-hand columns (P(>= target)) */
  body { background:#fff; font-size:12px; }
  main { max-width:none; padding:0; }
  section { padding:10px 12px; margin:10px 0; }
  .scroll { overflow:visible; }
  table { font-size:11px; }
  th, td { padding:3px 5px; }
  td.num { white-space:normal; }  /* an interval may go under its median rather than off the page */
  h2, header { break-after:avoid; }
  tr, figure, .banner, dl { break-inside:avoid; }
  /* a chart taller than a page was sliced through a row of panels; one fits a page instead */
  figure img { max-height:230mm; width:auto; min-width:0; }  /* paper does not scroll: a chart fits the page */
  /* the P(best) bars, chips and banners are backgrounds, which print drops by default */
  .bar, .chip, .banner { -webkit-print-color-adjust:exact; print-color-adjust:exact; }
  /* a folded table is folded on paper too, where no one can open it */
  details::details-content { content-visibility:visible; display:block; }
  details > summary { display:none; }
}
"""


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def section_html(title: str, body: str, *, css_class: str = "", anchor: str = "") -> str:
    """A titled card. `body` is already HTML; the title is escaped."""
    attrs = f' class="{esc(css_class)}"' if css_class else ""
    attrs += f' id="{esc(anchor)}"' if anchor else ""
    return f"<section{attrs}>\n<h2>{esc(title)}</h2>\n{body}\n</section>"


NAME_COLUMNS = {"recipe", "run_id"}


def table_html(rows: list[dict], columns: list[tuple[str, str]], *, numeric=(), raw=(), css_id: str = "") -> str:
    """A table from row dicts. columns: (key, header). Cells are escaped except `raw` keys, whose
    values are HTML made by this module (e.g. the P(best) bar). Recipe and run names never wrap:
    a browser would break 'scalerl-lr1e-3' at its hyphens, and '3' alone on a line is no name."""
    num = ' class="num"'
    head = "".join(f"<th{num if k in numeric else ''}>{esc(h)}</th>" for k, h in columns)
    body = []
    for row in rows:
        cells = []
        for key, _ in columns:
            value = row.get(key, "")
            text = value if key in raw else esc(value)
            cls = ' class="num"' if key in numeric else ' class="name"' if key in NAME_COLUMNS else ""
            cells.append(f"<td{cls}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    ident = f' id="{esc(css_id)}"' if css_id else ""
    return (f'<div class="scroll"><table{ident}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n' + "\n".join(body)
            + "\n</tbody>\n</table></div>")


def prob_bar_html(p: float) -> str:
    """P as a number with a proportional bar: the eye finds the winner before reading digits."""
    width = int(round(max(0.0, min(1.0, float(p))) * 80))
    return f'<span class="bar" style="width:{width}px"></span>{esc(fmt_prob(p))}'


# A chart on the page is never shown below this share of the size it was drawn at: on a phone
# (390 px) a fan chart of 3 panels a row, drawn 1250 px wide, was shrunk to 300 px, its 10-point
# tick labels (14 px at 100 dpi) to 3 px. At 0.6 they are 8 px, legible on a phone's screen (2-3
# device pixels to a CSS pixel); a chart shrinks as before down to a card of 750 px, a window of about 850.
CHART_LEAST_SCALE = 0.6


def png_width(png: bytes) -> int | None:
    """A PNG's width in pixels, from its header (IHDR, the first chunk); None if it is not a PNG."""
    if len(png) < 24 or png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        return None
    return int.from_bytes(png[16:20], "big")


def figure_html(png: bytes, alt: str, caption: str = "", *, width: int | None = None) -> str:
    """An inline PNG (base64 data URI): no file or network needed to show it. It shrinks with its
    card down to CHART_LEAST_SCALE of its drawn size (or of `width`), and a narrower card scrolls it."""
    data = base64.b64encode(png).decode("ascii")
    styles = []
    if width:  # min(): an inline max-width alone replaced the stylesheet's 100%, and a 640 px chart ran past a narrow card
        styles.append(f"max-width:min(100%, {int(width)}px)")
    drawn = png_width(png)
    if drawn:
        styles.append(f"--least-width:{round(CHART_LEAST_SCALE * min(drawn, width or drawn))}px")
    style = f' style="{"; ".join(styles)}"' if styles else ""
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure><div class="scroll"><img alt="{esc(alt)}" src="data:image/png;base64,{data}"{style}></div>{cap}</figure>'


def chosen_notes(data: ReportData) -> tuple[str, str]:
    """What follows the budget and the target where nobody gave them (the default), "" where someone did:
    the page's header and the terminal (`forecast report`) say the same, since the meeting reads the page."""
    names = data.settings
    budget = f" ({BUDGET_MULTIPLE:g}x the largest compute observed; {names.budget} sets one)" if data.budget_chosen else ""
    target = f" ({TARGET_CHOSEN_NOTE}; {names.target} sets one)" if data.target_chosen else ""
    return budget, target


def fast_fit_note(data: ReportData) -> str:
    """What a page from a fast fit says of itself, "" for a full fit: the page's header and the terminal
    (`forecast report --fast`) say the same, since a planner may read either."""
    if data.provenance.get("mode") != "fast":
        return ""
    return f"{FAST_FIT_QUICK_LOOK} ({data.settings.full_fit})"


def header_html(data: ReportData) -> str:
    chosen_budget, chosen_target = chosen_notes(data)
    target = f" · target {data.target:g}{chosen_target}" if data.target is not None else ""
    p = data.provenance
    meta = (
        f"budget {fmt_compute(data.budget)} {data.compute_unit}{chosen_budget}{target} · "
        f"{p['n_runs']} runs of {p['n_recipes']} recipes · generated {p['generated']} · "
        f"scaling-forecast {p['forecast_version']}"
    )
    if note := fast_fit_note(data):  # named at the top: the provenance at the bottom is not where a planner reads
        meta += f" · {note}"
    return f'<header><h1>{esc(data.title)}</h1><div class="meta">{esc(meta)}</div></header>'


def convergence_banner_html(diagnostics: dict, settings: SettingNames = PYTHON_SETTINGS) -> str:
    """Shown at the top when the sampler did not converge: every number below is then suspect."""
    if diagnostics.get("converged", True):
        return ""
    items = "".join(f"<li>{esc(p)}</li>" for p in diagnostics.get("problems", []))
    return (
        '<div class="banner bad" id="convergence-warning">The fit did not converge: treat every '
        "interval and probability in this report with suspicion (more draws help low ESS and R-hat; "
        f"divergences call for {esc(settings.robust)} or more data; see Fit diagnostics).<ul>{items}</ul></div>"
    )


def warnings_banner_html(warnings: list[str]) -> str:
    """About the question rather than the fit (a budget far outside the data): a planner forwards
    the page, not the terminal, so the warning has to be on it."""
    if not warnings:
        return ""
    items = "".join(f"<li>{esc(w)}</li>" for w in warnings)
    return f'<div class="banner warn" id="budget-warning">Check the question before the answer:<ul>{items}</ul></div>'


def data_warnings_banner_html(data_warnings: list[str]) -> str:
    """The data's warnings said when the fit read its runs: on the terminal of whoever ran the fit,
    days before the meeting that reads this page, so they have to be on it too."""
    if not data_warnings:
        return ""
    items = "".join(f"<li>{esc(w)}</li>" for w in data_warnings)
    return (f'<div class="banner warn" id="data-warning">Check the data behind the forecast (said when its runs '
            f"were read for the fit):<ul>{items}</ul></div>")


def synthetic_banner_html(synthetic: bool) -> str:
    if not synthetic:
        return ""
    return (
        '<div class="banner warn" id="synthetic-warning">Synthetic data: these runs were simulated '
        "from the ScaleRL paper's Table 1 curves with realistic noise. They illustrate the tool; "
        "they are not measurements.</div>"
    )


def recommendation_html(rec: Recommendation) -> str:
    reasons = "".join(f"<li>{esc(r)}</li>" for r in rec.reasons)
    body = (
        f'<p class="headline">{esc(rec.headline)}</p>'
        f"<ul>{reasons}</ul>"
        f'<p class="explain">Decision by: {esc(rec.source)}.</p>'
    )
    return section_html("Recommendation", body, css_class="recommendation", anchor="recommendation")


def interval_cell(text: str) -> str:
    """'0.625 [0.613, 0.638]' as HTML that may wrap only before its bracket: printed, where numbers
    wrap to fit the page, '0.625 [0.613,' over '0.638]' split the interval. The bracket is kept
    whole by its span's style (span.interval), not by a non-breaking space: copied from the page
    into a spreadsheet, a U+00A0 came along and the cell no longer read as numbers."""
    median, bracket, interval = text.partition("[")
    if not bracket:
        return esc(text)
    return f'{esc(median)}<span class="interval">{esc(bracket + interval)}</span>'


def recipe_table_html(table: pd.DataFrame, budget: float, unit: str, target: float | None) -> str:
    """Every recipe at the budget, best first: the table to decide from."""
    rows = []
    for _, r in table.iterrows():
        row = {
            "recipe": r["recipe"],
            "p_best": prob_bar_html(r["p_best"]),
            "at_budget": interval_cell(fmt_interval(r["at_budget_mean"], r["at_budget_q05"], r["at_budget_q95"])),
            "A": interval_cell(fmt_interval(r["A_q50"], r["A_q05"], r["A_q95"])),
        }
        if target is not None:
            interval, bracket, why = c_target_cell(r).partition("]")  # only the interval is kept on one line
            row["c_target"] = interval_cell(interval + bracket) + esc(why)
            row["p_target"] = fmt_prob(r["p_target"])
        rows.append(row)
    columns = [
        ("recipe", "recipe"),
        ("p_best", "P(best at budget)"),
        ("at_budget", f"metric at {fmt_compute(budget)} {unit}"),
        ("A", "asymptote A"),
    ]
    if target is not None:
        columns += [("c_target", f"compute to reach {target:g} ({unit})"), ("p_target", f"P(≥ {target:g} at budget)")]
    numeric = {"p_best", "at_budget", "A", "c_target", "p_target"}
    explain = (
        '<p class="explain">Metric at the budget: expected value [90% interval: 9 times in 10 the '
        "result lands in it] for a new run (a fresh seed) of each recipe, best expected metric first: its "
        "true pass rate there (its curve and its wander around it, not the noise of a single evaluation, "
        "which the fan charts' bands include, so they are a little wider); asymptote: the recipe's A, its typical "
        "run's ceiling, median [90% interval] (a new run's own ceiling spreads around it by the seed-to-seed spread). "
        "P(best): the share of posterior draws in which the recipe's new run scores highest at the budget. "
        "P(≥ target): the share in which that pass rate at the budget is at or above the target. Compute to "
        "reach the target: median [90% interval]; 'never' where so many draws have their asymptote below the "
        "target that the quantile is never reached (half of them for the median, 5% for the interval's upper "
        "end).</p>"
    )
    if any(": starts above" in row.get("c_target", "") for row in rows):
        explain = explain[:-len("</p>")] + (
            " 'starts above it': the median draw's curve starts at or above the target, so its compute to "
            "reach it is 0 (and one that ends under it at the budget does not get back there with more compute).</p>")
    body = table_html(rows, columns, numeric=numeric, raw={"p_best", "at_budget", "A", "c_target"}, css_id="recipe-table") + explain
    return section_html("Recipes at the budget", body, anchor="recipes")


def figures_html(figures: dict[str, bytes], budget: float, unit: str, target: float | None,
                 largest_observed: float | None = None) -> str:
    parts = []
    if "fan_chart" in figures:
        tgt = f", target {target:g} as the red dash-dot line" if target is not None else ""
        # the charts run to the budget or to the data's end, whichever is further: a budget within the
        # data is not what the bands are extrapolated to
        if largest_observed is not None and budget <= largest_observed:
            reach = (f"drawn to the largest compute observed ({fmt_compute(largest_observed)} {unit}), the budget "
                     f"{fmt_compute(budget)} {unit} dashed")
        else:
            reach = f"extrapolated to the budget {fmt_compute(budget)} {unit} (dashed)"
        caption = (
            f"Observed evaluations (one colour and marker per seed), posterior median for a new run (line), "
            f"50% and 90% bands of where its evaluation would land (evaluation noise included, so wider than "
            f"the table's intervals of its true pass rate), {reach}{tgt}. "
            "Dotted: the largest compute observed for that recipe; right of it is extrapolation."
        )
        keys = [fan_chart_key(k) for k in range(len(figures)) if fan_chart_key(k) in figures]
        charts = [figure_html(figures[key], "fan chart per recipe" + (f", part {k + 1} of {len(keys)}" if len(keys) > 1 else ""),
                              caption if k == len(keys) - 1 else "")  # one caption, under the last
                  for k, key in enumerate(keys)]
        parts.append(section_html("Fan charts", "\n".join(charts), anchor="fan-charts"))
    if "forest" in figures:
        tgt = f"; dashed line: target {target:g}" if target is not None else ""
        caption = f"Asymptote A per recipe (typical run): median, 50% (thick) and 90% (thin) intervals{tgt}."
        parts.append(section_html("Asymptotes", figure_html(figures["forest"], "asymptote forest plot", caption), anchor="asymptotes"))
    return "\n".join(parts)


def compute_to_target_html(table: pd.DataFrame, budget: float, unit: str, target: float | None,
                           largest_observed: float | None = None, settings: SettingNames = PYTHON_SETTINGS,
                           smallest_observed: float | None = None) -> str:
    if target is None:
        return section_html("Compute to target", f'<p class="explain">No target given (use {esc(settings.target)}).</p>',
                            anchor="compute-to-target")
    # medians of 'never' tie: the likelier to reach the target at all first (unsorted, they kept the
    # table's order, and a recipe with P(ever reaches) 0.32 was listed above one with 0.38)
    ranked = table.assign(_median=table["c_target_q50"].fillna(np.inf)).sort_values(
        ["_median", "p_reach", "c_target_q05"], ascending=[True, False, True], kind="stable").reset_index(drop=True)
    rows = [
        {
            "recipe": r["recipe"],
            "q50": fmt_compute(r["c_target_q50"]),
            "q05": fmt_compute(r["c_target_q05"]),
            "q95": fmt_compute(r["c_target_q95"]),
            "p_reach": fmt_p_reach(r["p_reach"]),  # beside a median of never, below one half
            "p_target": fmt_prob(r["p_target"]),
        }
        for _, r in ranked.iterrows()
    ]
    columns = [
        ("recipe", "recipe"),
        ("q50", f"median ({unit})"),
        ("q05", "5%"),
        ("q95", "95%"),
        ("p_reach", "P(ever reaches)"),
        ("p_target", f"P(≥ {target:g} at {fmt_compute(budget)} {unit})"),
    ]
    explain = (
        f'<p class="explain">Compute a new run needs to reach {esc(f"{target:g}")}, fastest first (where the median is never, the likeliest to reach it at all first). '
        "P(ever reaches): the share of draws in which a new run's own asymptote lies above the target (or its "
        "curve starts at or above it): the recipe's A with a seed's spread around it, so it can be lower than "
        "the asymptote column's interval suggests. P(≥ target at the "
        "budget) also counts a run's wander around its curve and the widening of forecasts far ahead, so "
        "it can exceed P(ever reaches) when a recipe's curve tops out near the target, and be below one half "
        "when the median compute lies within the budget (a run can sit under its curve there)."
        f"{far_target_sentence(ranked, largest_observed, unit)}{before_data_target_sentence(ranked, smallest_observed, unit)}"
        f"{starts_at_target_sentence(ranked, target, budget, unit)}</p>"
    )
    body = table_html(rows, columns, numeric={"q50", "q05", "q95", "p_reach", "p_target"}, css_id="compute-to-target-table")
    return section_html(f"Compute to reach {target:g}", body + explain, anchor="compute-to-target")


# Why a run continues, in a meeting's words: "continue" alone reads as "worth it", which a run
# that is merely too early to judge is not. Rules not named here continued on their own check.
CONTINUE_REASONS = {
    "too_early": "too early to judge (the budget is far beyond its compute so far)",
    "warmup": "too few evaluations to judge",
    "leader": "leads the sweep now",
    "top_at_step": "in the top runs at its step",
    "runner_up": "kept beside the unfinished best run",
    "stop_cap": "held by the stop cap, judged again later",
    "no_rule": "no rule applies",
}


def continue_reason(rule: str) -> str:
    return CONTINUE_REASONS.get(rule, "promising")


# How a run that is not in flight ended (report.ended_runs), in the stop summary's words.
ENDED_REASONS = {"advisor_stopped": "stopped by its own advisor", "finished": "finished"}


def target_notes(table: pd.DataFrame, target: float | None) -> dict:
    """{recipe: decide's words for its compute to target of 0} (forecast.decisions.starts_at_target_note):
    a "0" and P(ever reaches) 1.00 next to P(>= target at budget) 0.00 read as a target that is free,
    when the curve starts above it and falls below it."""
    from .decisions import starts_at_target_note

    if target is None or "c_target_q50" not in table or "p_target" not in table:
        return {}
    notes = {r["recipe"]: starts_at_target_note(r, target, "c_target_q50") for _, r in table.iterrows()}
    return {recipe: note for recipe, note in notes.items() if note is not None}


def c_target_cell(row) -> str:
    """A recipe's compute to target for the recipe tables: median [90% interval], and, where the
    median is 0, why (decide's target_note, short): "0 [0, 0]" beside P(>= target at budget) 0.00
    read as a target that is free, when the curve starts above it and falls below it."""
    from .decisions import _falls_below_target, _starts_at_target

    cell = fmt_interval(row["c_target_q50"], row["c_target_q05"], row["c_target_q95"], fmt_compute)
    if "p_target" not in row or not _starts_at_target(row, "c_target_q50"):
        return cell
    if _falls_below_target(row, "c_target_q50"):
        return f"{cell}: starts above it, falls below by the budget"
    return f"{cell}: starts above it"


def starts_at_target_sentence(table: pd.DataFrame, target: float, budget: float, unit: str) -> str:
    """One sentence per recipe whose median compute to target is 0, in decide's words."""
    return "".join(f" '{esc(recipe)}': {esc(note.replace('this budget', f'the budget ({fmt_compute(budget)} {unit})'))}."
                   for recipe, note in target_notes(table, target).items())


def far_target_sentence(table: pd.DataFrame, largest_observed: float | None, unit: str) -> str:
    """Names the recipes whose median compute to target lies far beyond the data (forecast.data's
    FAR_BEYOND_DATA): that far out the number is the curve prior's, not a plan."""
    from .data import FAR_BEYOND_DATA

    if not largest_observed:
        return ""
    names = _medians_named(table, lambda medians: medians > FAR_BEYOND_DATA * largest_observed)
    return (f" Medians more than {FAR_BEYOND_DATA:g}x the largest compute observed ({fmt_compute(largest_observed)} {esc(unit)}) "
            f"are the curve's extrapolation, not something the data show: {names}." if names else "")


def before_data_target_sentence(table: pd.DataFrame, smallest_observed: float | None, unit: str) -> str:
    """Names the recipes whose median compute to target lies below the data's smallest compute (but above 0,
    which starts_at_target_sentence says): the curve traced back, where no run was evaluated."""
    if not smallest_observed:
        return ""
    names = _medians_named(table, lambda medians: (medians > 0) & (medians < smallest_observed))
    return (f" Medians below the smallest compute observed ({fmt_compute(smallest_observed)} {esc(unit)}) are the curve "
            f"traced back, not something the data show: {names}." if names else "")


def _medians_named(table: pd.DataFrame, where) -> str:
    """'recipe median, ...' (escaped) of the recipes whose finite median compute to target `where` picks, or ""."""
    medians = table.set_index("recipe")["c_target_q50"]
    picked = medians[np.isfinite(medians) & where(medians)]
    return ", ".join(f"{esc(r)} {fmt_compute(c)}" for r, c in picked.items())


def name_html(name) -> str:
    """A run or recipe name kept on one line, as in the tables ('scalerl-bs8-' / 's1' is no name)."""
    return f'<span class="name">{esc(name)}</span>'


def stop_summary_html(table: pd.DataFrame) -> str:
    """Two lines a meeting reads: which runs continue and why, and how many stop by which rule."""
    lines = []
    for decision in ("continue", "stop", "ended"):
        part = table[table["decision"] == decision]
        if part.empty:
            continue
        chip = f'<span class="chip {decision}">{decision}</span>'
        if decision in ("continue", "ended"):
            why = continue_reason if decision == "continue" else (lambda rule: ENDED_REASONS.get(rule, rule))
            groups = part.groupby(part["rule"].map(why), sort=False)["run_id"]
            what = "; ".join(f"{len(runs)} {esc(reason)}: {', '.join(name_html(r) for r in runs)}" for reason, runs in groups)
        elif len(part) <= 6:
            what = ", ".join(name_html(r) for r in part["run_id"])
        else:
            counts = part["rule"].value_counts()
            what = "; ".join(f"{n} by rule {esc(rule)}" for rule, n in counts.items())
            what += f" (e.g. {esc(part['reason'].iloc[0])})"
        lines.append(f"<p>{chip} {len(part)} run{'s' if len(part) != 1 else ''}: {what}</p>")
    # a long sweep's table is folded: a run whose forecasts are likely too high is named where the meeting reads
    if {"shape_note", "late_trend_z"} <= set(table.columns):
        # the runs flagged themselves: a run noted only for the run it is compared with has no late_trend_z
        noted = table[table["shape_note"].notna() & table["late_trend_z"].notna()].sort_values("late_trend_z")
        flagged = [{"run_id": r.run_id, "late_trend_z": r.late_trend_z} for r in noted.itertuples()]
        if shape := misshapen_runs_sentence(flagged):
            where = "the note beside its advice" if len(flagged) == 1 else "the notes beside their advice"
            lines.append(f'<p class="shape-note">shape: {esc(shape)} ({where} below)</p>')
    return "\n".join(lines)


def stop_advice_html(advice: StopAdvice | None, *, open_rows: int = 12) -> str:
    if advice is None:
        body = '<p class="explain">No per-run stop advice in this report.</p>'
        return section_html("Stop or continue", body, anchor="stop-advice")
    rows = []
    for _, r in advice.table.iterrows():
        decision = str(r.get("decision", ""))
        chip = f'<span class="chip {esc(decision.lower())}">{esc(decision)}</span>'
        reason = esc(r.get("reason", ""))
        if isinstance(shape := r.get("shape_note"), str):  # beside the advice it qualifies
            reason += f'<br><span class="shape-note">{esc(shape)}</span>'
        if isinstance(chains := r.get("chains_say"), str):  # the red banner says the fit did not converge; this,
            # whether this stop rests on it (its chains disagree) or not (each chain alone says stop too)
            reason += f'<br><span class="chains-note">fit not converged: {esc(chains)}</span>'
        rows.append({"run_id": r.get("run_id", ""), "recipe": r.get("recipe", ""), "decision": chip,
                     "rule": r.get("rule", ""), "reason": reason})
    columns = [("run_id", "run"), ("recipe", "recipe"), ("decision", "advice"), ("rule", "rule"), ("reason", "reason")]
    table = table_html(rows, columns, raw={"decision", "reason"}, css_id="stop-table")
    # a long sweep's table is folded (no script needed: <details>), the summary above says it all
    opened = " open" if len(rows) <= open_rows else ""
    body = stop_summary_html(advice.table)
    body += f"<details{opened}><summary>advice and reason for every run</summary>{table}</details>"
    body += (
        '<p class="explain">Should each run continue to the budget? Each run short of it is compared with every '
        "other run: one in flight at the budget, one at or past the budget or that ended at what it reached. "
        f"Advice by: {esc(advice.source)}.</p>"
    )
    if advice.table["reason"].astype(str).str.contains(GAIN_PER_COMPUTE_WORDS, regex=False).any():
        # the reasons cite it as "= 0.0014 for 0.78 typical budgets of compute left = 0.0018 per budget < 0.002":
        # a planner was left to guess what a typical budget is and what the gain is over
        body += ('<p class="explain">Expected gain over the best of the other runs (rule gain_per_compute): how much '
                 "finishing the run is expected to raise the best result of the sweep at the budget (draw by draw; 0 "
                 "where it ends below the best of the others), per typical budget of compute it still needs (a "
                 "typical budget: the median of the compute the runs are judged at, the budget for a run in flight "
                 "and what it reached for one that ended), so a run that costs more has to promise "
                 "more. Below the threshold its reason names, the run is stopped.</p>")
    if ((advice.table["decision"] == "stop") & (advice.table["rule"] == "saturated")).any():
        body += ('<p class="explain">Stop by rule saturated: the run\'s curve has flattened, so it has nothing left to '
                 "gain between its compute now and the budget. It stops that run, not that its recipe should be dropped: "
                 "the recommendation above says which recipe a run at the budget should use.</p>")
    if (advice.table["decision"] == "ended").any():
        body += ('<p class="explain">Ended: the run\'s folder says it ended (stopped.json: stopped by its own '
                 "advisor, with the advisor's reason; summary.json alone: finished), or the table's 'ended' "
                 "column does (a sweep's runs.csv, a saved fit), so it is not in flight and is "
                 "not advised; the runs in flight are compared with it at what it reached.</p>")
    return section_html("Stop or continue", body, anchor="stop-advice")


def diagnostics_html(d: dict) -> str:
    status = '<span class="chip ok">converged</span>' if d.get("converged") else '<span class="chip bad">NOT CONVERGED</span>'
    rows = [
        ("status", None),
        # as the status line and the problems under the table show them: 1.0104, not 1.010, against 1.01
        ("max R-hat", f"{shown_against_limit(d['max_rhat'], d['rhat_limit'], 3, bad_above=True)} (limit {d['rhat_limit']})"),
        # the limit scales with the chains' length (inference.default_ess_limit)
        ("min bulk ESS", f"{shown_against_limit(d['min_ess_bulk'], d['ess_limit'], 0, bad_above=False)} "
                         f"(limit {d['ess_limit']:.0f}: 100 per chain, for short chains a quarter of the draws but at least 100)"),
        ("min tail ESS", f"{shown_against_limit(d['min_ess_tail'], d['ess_limit'], 0, bad_above=False)} (the same limit)"),
        ("divergent transitions", "unknown" if d["divergences"] is None else f"{d['divergences']}"),
        ("posterior draws", f"{d['n_draws']}"),
    ]
    if "fit_seconds" in d:
        rows.append(("fit time", f"{d['fit_seconds']:.1f} s"))
    if d.get("sampling_tries"):
        rows.append(("sampler tries", d["sampling_tries"]))
    if shape := misshapen_runs_sentence(d.get("misshapen_runs", [])):
        rows.append(("run shapes", shape))
    items = "".join(f"<dt>{esc(k)}</dt><dd>{status if v is None else esc(v)}</dd>" for k, v in rows)
    problems = "".join(f"<li>{esc(p)}</li>" for p in d.get("problems", []))
    body = f"<dl>{items}</dl>" + (f"<ul>{problems}</ul>" if problems else "")
    return section_html("Fit diagnostics", body, anchor="diagnostics")


HONESTY_COLUMNS = [("cut", "cut (share of each run's compute)"), ("reach", "reach"), ("points", "hidden evaluations"), ("coverage", "coverage"),
                   ("mean_error", "observed - forecast"), ("mae", "error, ours"),
                   ("mae_least_squares", "error, least squares"), ("mae_last_value", "error, last value")]


def honesty_html(honesty: dict | None) -> str:
    """How honest the intervals were on these runs' held-out curve ends (forecast cross-validate)."""
    if not honesty:
        return ""
    from .cross_validation import level_text

    level = honesty["level"]
    rows = []
    for row in honesty["metrics"].to_dict(orient="records"):
        rows.append({"cut": f"{row['cut']:g}", "reach": row["reach"], "points": f"{row['points']}",
                     "coverage": f"{row['coverage']:.0%}", "mean_error": f"{round(row['mean_error'], 3) or 0.0:+.3f}",  # -0.0004 as +0.000, not -0.000
                     "mae": fmt_metric(row["mae"]), "mae_least_squares": fmt_metric(row["mae_least_squares"]),
                     "mae_last_value": fmt_metric(row["mae_last_value"])})
    table = table_html(rows, HONESTY_COLUMNS, numeric=("points", "coverage", "mean_error", "mae", "mae_least_squares",
                                                        "mae_last_value"), css_id="honesty-table")
    sentences = "".join(f"<li>{esc(line)}</li>" for line in honesty["summary"])
    source = f" (read from {esc(honesty['source'])})" if honesty.get("source") else ""
    explain = (f'<p class="explain">Each cut hid every run\'s evaluations beyond that share of its compute, fitted the '
               f"rest and forecast them{source}. With honest intervals the {level_text(level)} interval holds about {level_text(level)} "
               "of them; observed - forecast above 0 means the forecasts ran low. Errors are absolute, in the metric's units.</p>")
    figure = ""
    if honesty.get("figure"):
        figure = figure_html(honesty["figure"], "held-out errors against the interval, by reach",
                             "Each dot is a hidden evaluation: observed - forecast, against how far ahead it was "
                             "forecast; the shaded band is what the interval spans there. Dots outside it are misses.",
                             width=760)
    return section_html("How honest the intervals were on these runs",
                        f"<ul>{sentences}</ul>" + figure + table + explain, anchor="cross-validation")


def provenance_html(p: dict) -> str:
    lo, hi = p["compute_range"]
    rows = [
        ("input files", ", ".join(p["inputs"])),
        ("runs / recipes / evaluations", f"{p['n_runs']} / {p['n_recipes']} / {p['n_evaluations']}"),
        ("compute observed", f"{fmt_compute(lo)} – {fmt_compute(hi)} {p['compute_unit']}"),
        ("scaling-forecast version", p["forecast_version"]),
        ("sampler", p["sampler"]),
        ("random seed", p["random_seed"]),
        ("python", p["python"]),
        ("generated", p["generated"]),
    ]
    items = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows)
    return section_html("Provenance", f"<dl>{items}</dl>", anchor="provenance")


def notes_html(notes: list[str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return f'<section class="notes" id="notes"><ul>{items}</ul></section>'


def render_report(data: ReportData) -> str:
    """The whole page. No scripts, no external resources: it opens offline, anywhere."""
    unit = data.compute_unit
    parts = [
        header_html(data),
        convergence_banner_html(data.diagnostics, data.settings),
        warnings_banner_html(data.warnings),
        data_warnings_banner_html(data.data_warnings),
        synthetic_banner_html(data.synthetic),
        recommendation_html(data.recommendation),
        recipe_table_html(data.recipe_table, data.budget, unit, data.target),
        figures_html(data.figures, data.budget, unit, data.target, data.provenance["compute_range"][1]),
        compute_to_target_html(data.recipe_table, data.budget, unit, data.target, data.provenance["compute_range"][1],
                               data.settings, smallest_observed=data.provenance["compute_range"][0]),
        stop_advice_html(data.stop_advice),
        honesty_html(data.honesty),
        diagnostics_html(data.diagnostics),
        provenance_html(data.provenance),
        notes_html(data.notes),
    ]
    body = "\n".join(p for p in parts if p)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(data.title)}</title>\n<style>{CSS}</style>\n</head>\n"
        f"<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


# ============================================================================ outputs


def report_summary(data: ReportData, path=None) -> dict:
    """The report's numbers as strict-JSON-ready data (for --json and demo_out/summary.json)."""
    table = data.recipe_table
    notes = target_notes(table, data.target)
    return json_safe({
        "report": str(path) if path is not None else None,
        "title": data.title,
        "synthetic": data.synthetic,
        "budget": data.budget,
        "target": data.target,
        "target_chosen": data.target_chosen,
        "compute_unit": data.compute_unit,
        "recommendation": {"headline": data.recommendation.headline, "reasons": data.recommendation.reasons,
                           "source": data.recommendation.source, **data.recommendation.numbers},
        "recipes": [{**record, "target_note": notes.get(record["recipe"])} if data.target is not None else record
                    for record in table.to_dict(orient="records")],
        "stop_advice": data.stop_advice.table.to_dict(orient="records") if data.stop_advice is not None else None,
        "diagnostics": data.diagnostics,
        "provenance": data.provenance,
        "notes": data.notes,
        "warnings": data.warnings,
        "data_warnings": data.data_warnings,
        "cross_validation": None if data.honesty is None else {
            "source": data.honesty["source"], "level": data.honesty["level"],
            "metrics": data.honesty["metrics"].to_dict(orient="records"), "summary": data.honesty["summary"]},
    })


def write_report(fc, path, *, budget=None, target=None, target_chosen: bool = False, inputs=None, title=None,
                 progress: bool = False, cross_validation=None, cross_validation_source=None,
                 settings: SettingNames = PYTHON_SETTINGS) -> ReportData:
    """Collect, render and write the report atomically (a reader never sees half a page).

    budget: compute for one run; None plans at default_budget (4x the largest compute observed).
    target: the metric to reach; None picks one as `forecast report` does without --target
    (default_target: the median of the recipes' forecast asymptotes), named on the page as chosen, with
    no stop rule on it. A page with no target at all: render_report(collect_report(fc)).
    """
    if target is None:
        fc._require_fit("write_report()")  # before default_target reads the fit
        target, target_chosen = default_target(fc), True
    data = collect_report(fc, budget=budget, target=target, target_chosen=target_chosen, inputs=inputs, title=title,
                          progress=progress, cross_validation=cross_validation,
                          cross_validation_source=cross_validation_source, settings=settings)
    atomic_write_text(path, render_report(data))
    return data


def recipe_table_text(data: ReportData) -> str:
    """The recipe table for a terminal: what `forecast report` and `make demo` print."""
    table = data.recipe_table
    unit = data.compute_unit
    frame = pd.DataFrame(
        {
            "recipe": table["recipe"],
            "P(best)": table["p_best"].map(fmt_prob),
            f"metric at {fmt_compute(data.budget)}": [
                fmt_interval(r.at_budget_mean, r.at_budget_q05, r.at_budget_q95) for r in table.itertuples()
            ],
            "asymptote A": [fmt_interval(r.A_q50, r.A_q05, r.A_q95) for r in table.itertuples()],
        }
    )
    if data.target is not None:
        frame[f"compute to {data.target:g} ({unit})"] = [
            c_target_cell(r) for _, r in table.iterrows()
        ]
        frame[f"P(>={data.target:g} at budget)"] = table["p_target"].map(fmt_prob)
    return frame.to_string(index=False)
