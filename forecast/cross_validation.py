"""Cross-validation on held-out curve ends: are the forecasts honest on *your* runs?

Prophet made this a habit (cross_validation, then performance_metrics): before trusting a
forecaster's intervals, hide the ends of curves you already have, forecast them, and count how
often the intervals hold the truth. Here the curves are cut at a fraction of each run's final
compute (every run at once, as when a sweep is forecast in flight), the model is fitted to what is
left, and every hidden evaluation is forecast as that run's own future (kind="run"), beside the
paper's least-squares point forecast and the last value carried forward.

    from forecast import cross_validate, performance_metrics
    cv = cross_validate(runs, cuts=(0.25, 0.5), random_seed=0)   # one fit per cut
    performance_metrics(cv)          # coverage, error and bias by how far ahead the forecast reaches

Coverage is the share of hidden evaluations inside the central `level` interval; with honest
intervals it is near `level`. Evaluations of one run are correlated (a run above its curve stays
above it for a while), so the count that says how far chance moves coverage is the runs, not the
points: `describe_cross_validation` states the range chance gives for that many runs.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd

from .baseline import fit_run_least_squares, predict_least_squares
from .data import compute_unit_of, validate_runs
from .inference import check_bool
from .model import padded_length
from .thread_warnings import this_threads_warnings_dropped

__all__ = ["cross_validate", "performance_metrics", "describe_cross_validation", "read_cross_validation", "DEFAULT_CUTS"]

DEFAULT_CUTS = (0.25, 0.5)
MIN_POINTS_BEFORE_CUT = 3  # a sigmoid and its noise from fewer is the prior alone; least squares fails
# how far ahead a forecast reaches (compute / the run's last seen compute), the bins of
# benchmarks/RESULTS.md's honesty table: the stop rules read forecasts from all three
REACH_BINS = ((0.0, 2.0, "up to 2x"), (2.0, 4.0, "2-4x"), (4.0, math.inf, "beyond 4x"))
# Each cut's fit is padded to the rows a fit of the whole table has, where those are at most this many
# (cut_padding). Padding rows weigh nothing, so the posterior is the same, and the cuts (and a fit of the
# whole table made before, as in the quickstart notebook) then share one compiled model: one numba
# compile, 20-80 s on 2 cores, instead of one per cut. A padding row costs about 9 ms of a default fit's
# sampling (3 ms in fast mode), so below this the padding costs less than the compile it saves; beyond
# it, each cut keeps its own rows (benchmarks/cross_validation_speed.py measures both).
SHARED_PADDING_MAX_ROWS = 2048


def checked_cuts(cuts) -> tuple[float, ...]:
    """Cut fractions, each in (0, 1), sorted and without repeats."""
    try:
        values = [float(c) for c in np.atleast_1d(np.asarray(cuts, dtype=object))]
    except (TypeError, ValueError):
        raise ValueError(f"cuts must be numbers in (0, 1), e.g. (0.25, 0.5); got {cuts!r}") from None
    if not values:
        raise ValueError("cuts is empty: give at least one fraction of each run's compute, e.g. 0.5")
    bad = [c for c in values if not 0 < c < 1]
    if bad:
        raise ValueError(f"each cut is a fraction of a run's final compute, in (0, 1); got {bad[0]:g}")
    return tuple(sorted(set(values)))


def checked_level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float, np.number)) or not 0 < level < 1:
        raise ValueError(f"level is the interval's probability, in (0, 1), e.g. 0.9; got {level!r}")
    return float(level)


def split_at(runs: pd.DataFrame, cut: float) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(seen, hidden, left_out): each run's evaluations up to `cut` x its final compute, those after,
    and the runs left out because fewer than MIN_POINTS_BEFORE_CUT evaluations come before the cut."""
    final = runs.groupby("run_id")["compute"].transform("max")
    # the tolerance keeps an evaluation at the cut seen despite rounding; the final evaluation is
    # hidden at any cut below 1 (0.9999999999 within the tolerance hid nothing, and the fit that
    # preceded the empty table ended in a traceback)
    before = (runs["compute"] <= cut * final * (1 + 1e-9)) & (runs["compute"] < final)
    counts = before.groupby(runs["run_id"]).sum()
    left_out = sorted(str(r) for r in counts.index[counts < MIN_POINTS_BEFORE_CUT])
    keep = ~runs["run_id"].isin(counts.index[counts < MIN_POINTS_BEFORE_CUT])
    seen = runs[keep & before].reset_index(drop=True)
    hidden = runs[keep & ~before].reset_index(drop=True)
    return seen, hidden, left_out


def splits_at(runs: pd.DataFrame, cuts) -> list[tuple[pd.DataFrame, pd.DataFrame, list[str]]]:
    """split_at for each cut; ValueError naming the first cut before which no run has enough evaluations."""
    splits = [split_at(runs, cut) for cut in cuts]
    for cut, (seen, _, _) in zip(cuts, splits, strict=True):
        if seen.empty:
            raise ValueError(f"cut {cut:g}: no run has {MIN_POINTS_BEFORE_CUT} evaluations up to {cut:g} of its final "
                             "compute; give a larger cut")
    return splits


def reach_bin(ahead: float) -> str:
    for low, high, name in REACH_BINS:
        if low < ahead <= high:
            return name
    raise ValueError(f"a forecast reaches {ahead:g}x the compute seen; expected > 0")


def fresh_like(forecaster):
    """An unfitted forecaster with the same settings (priors, likelihood, sampler, noise terms)."""
    from .forecaster import ScalingForecaster

    if forecaster is None:
        return ScalingForecaster()
    if not isinstance(forecaster, ScalingForecaster):
        raise TypeError(f"forecaster must be a ScalingForecaster (its settings are used), got {type(forecaster).__name__}")
    return ScalingForecaster(
        priors=forecaster.priors, robust=forecaster.robust, parametrization=forecaster.parametrization,
        mode=forecaster.mode, sampler=forecaster.sampler, horizon_sd=forecaster.horizon_sd,
        level_sd=forecaster.level_sd, level_wander_ratio=forecaster.level_wander_ratio,
    )


def cut_padding(forecaster, runs: pd.DataFrame, seen: pd.DataFrame, left_out) -> int | None:
    """The rows a cut's fit of `seen` is padded to: those of `forecaster`'s fit of the whole table `runs`
    (SHARED_PADDING_MAX_ROWS at most), or None, its own, where the two fits' models differ in more than
    their rows: runs left out, or another parametrization (a run left under 8 evaluations). Such a fit
    compiles a model of its own anyway, and padded it would only sample more rows."""
    rows = padded_length(len(runs))
    alike = not left_out and forecaster._centered_for(seen) == forecaster._centered_for(runs)
    return rows if alike and rows <= SHARED_PADDING_MAX_ROWS else None


def forecast_hidden(fc, seen: pd.DataFrame, hidden: pd.DataFrame, *, cut: float, level: float) -> pd.DataFrame:
    """One row per hidden evaluation: ours (median and central interval of this run's posterior
    predictive), least squares and the last value, each fitted to or read from the seen part."""
    tail = (1 - level) / 2
    rows = []
    for run_id, ahead_of in hidden.groupby("run_id", sort=False):
        past = seen[seen["run_id"] == run_id].sort_values("compute")
        compute = ahead_of["compute"].to_numpy(float)
        draws = fc.sample_curves(compute, run_id=run_id, kind="run", shared_noise=True)
        lower, median, upper = np.quantile(draws, [tail, 0.5, 1 - tail], axis=0)
        mean, sd = draws.mean(axis=0), draws.std(axis=0)
        least_squares = predict_least_squares(fit_run_least_squares(past["compute"], past["metric"]), compute)
        seen_until = float(past["compute"].iloc[-1])
        observed = ahead_of["metric"].to_numpy(float)
        final = compute == compute.max()
        for j, c in enumerate(compute):
            rows.append({
                "cut": cut, "run_id": run_id, "recipe": past["recipe"].iloc[0], "compute_seen": seen_until,
                "compute": float(c), "ahead": float(c) / seen_until, "observed": observed[j],
                "forecast": float(median[j]), "lower": float(lower[j]), "upper": float(upper[j]),
                "covered": bool(lower[j] <= observed[j] <= upper[j]),
                # standardised error: a root mean square of 1 across points when the spread is honest
                "z": float((observed[j] - mean[j]) / sd[j]) if sd[j] > 0 else math.nan,
                "least_squares": float(least_squares[j]), "last_value": float(past["metric"].iloc[-1]),
                "final": bool(final[j]),
            })
    return pd.DataFrame(rows)


def cross_validate(runs, *, cuts=DEFAULT_CUTS, level: float = 0.9, forecaster=None, random_seed=0,
                   planned_budget: bool = True, progress: bool = False, say=None) -> pd.DataFrame:
    """Hide each run's evaluations beyond `cut` x its final compute, fit to the rest, forecast them.

    runs: a run table (DataFrame or a path load_runs reads). cuts: fractions in (0, 1); one fit
    each. level: the central interval checked. forecaster: a ScalingForecaster whose settings
    (priors, likelihood, parametrization, mode, sampler, noise terms: fresh_like) are used; the
    defaults otherwise. random_seed: each cut's fit's seed. progress: each fit's progress bar. planned_budget: tell each fit
    the compute the runs went on to reach (fit(horizon=...)), as a sweep in flight knows its
    planned budget; False fits as if it were not known. say: a function given one line of progress
    per fit (e.g. print). Each cut's fit is padded to the rows of a fit of the whole table (cut_padding), rows
    that weigh nothing: its draws are those of a fit on its own rows, and it reuses the compiled model of a
    fit of the whole table made before in the process, or of an earlier cut, instead of compiling its own.

    Returns one row per hidden evaluation: cut, run_id, recipe, compute_seen (the run's last
    compute before the cut), compute, ahead (compute / compute_seen), observed, forecast (median),
    lower, upper, covered, z (standardised error), least_squares, last_value, final (the run's last
    evaluation), level, and the fit's diagnostics (fit_converged, fit_problems, fit_left_out: a JSON list of
    the runs left out). attrs["fits"] holds each
    cut's fit: runs used, runs left out (fewer than 3 evaluations before the cut), diagnostics.
    """
    from .data import load_runs

    cuts = checked_cuts(cuts)
    level = checked_level(level)
    planned_budget = check_bool("planned_budget", planned_budget)
    progress = check_bool("progress", progress, none_ok=True)
    if say is not None and not callable(say):  # it failed at the first cut, a bare "'int' object is not callable"
        raise TypeError(f"say must be a function given one line of text (e.g. print), got {say!r}")
    candidate = fresh_like(forecaster)  # a wrong type fails before the table is read
    runs = load_runs(runs) if isinstance(runs, (str, os.PathLike)) else validate_runs(runs)  # a dict of columns too
    horizon = float(runs["compute"].max()) if planned_budget else None
    splits = splits_at(runs, cuts)  # every cut checked before the first fit, which takes minutes
    tables, fits = [], []
    for cut, (seen, hidden, left_out) in zip(cuts, splits, strict=True):
        if say is not None:
            n_runs = seen["run_id"].nunique()
            say(f"cut {cut:g}: fitting {n_runs} run{'s' if n_runs != 1 else ''} on their first {cut:g} of compute "
                f"({len(seen)} evaluations), forecasting {len(hidden)} hidden ones")
        fc = fresh_like(candidate)
        # said once per cut in the result (fit_converged, attrs["fits"]), not as it happens; and the
        # horizon is the runs' own reach: far beyond an early cut, but in their unit
        from .forecaster import ConvergenceWarning, FarFromDataWarning

        with this_threads_warnings_dropped(ConvergenceWarning, FarFromDataWarning):
            fc.fit(seen, random_seed=random_seed, progress=progress, horizon=horizon,
                   pad_to=cut_padding(fc, runs, seen, left_out))
        report = fc.diagnostics()
        table = forecast_hidden(fc, seen, hidden, cut=cut, level=level)
        table["level"] = level  # a saved table (--out cv.csv) says which interval it checked
        table["fit_converged"] = bool(report.converged)
        table["fit_problems"] = "; ".join(report.problems())
        # JSON, not joined by "; ": a run id may hold any character; a report from cv.csv names these runs
        table["fit_left_out"] = json.dumps(list(left_out))
        tables.append(table)
        fits.append({"cut": cut, "runs": int(seen["run_id"].nunique()), "left_out": left_out,
                     "converged": bool(report.converged), "problems": list(report.problems()),
                     "diagnostics": str(report).splitlines()[0], "tries": fc.sampling_tries() or ""})
    result = pd.concat(tables, ignore_index=True)
    result.attrs.update({"level": level, "fits": fits, "compute_unit": compute_unit_of(runs),
                         "planned_budget": horizon})
    return result


def _summary(group: pd.DataFrame) -> dict:
    absolute = lambda column: float((group[column] - group["observed"]).abs().mean())  # noqa: E731
    return {
        "runs": int(group["run_id"].nunique()), "points": len(group),
        "coverage": float(group["covered"].mean()), "width": float((group["upper"] - group["lower"]).mean()),
        "mae": absolute("forecast"), "mae_least_squares": absolute("least_squares"),
        "mae_last_value": absolute("last_value"),
        "mean_error": float((group["observed"] - group["forecast"]).mean()),  # > 0: forecasts run low
        # about 0, not about the mean: a bias counts against the spread, as it does against coverage
        "z_rms": float(np.sqrt((group["z"] ** 2).mean())) if group["z"].notna().any() else math.nan,
    }


def as_cross_validation(cv, what: str) -> pd.DataFrame:
    """cross_validate()'s table as given, or the CSV file `forecast cross-validate --out` wrote, read
    (`forecast report --cross-validation` takes the file: a path here was "'str' object has no
    attribute 'columns'"). TypeError naming `what` for anything else."""
    if isinstance(cv, (str, os.PathLike)):
        return read_cross_validation(cv)
    if not isinstance(cv, pd.DataFrame):
        raise TypeError(f"{what} takes cross_validate()'s table or the CSV file `forecast cross-validate --out` "
                        f"wrote, got {type(cv).__name__}")
    return cv


def performance_metrics(cv: pd.DataFrame) -> pd.DataFrame:
    """Per cut and reach ("up to 2x", "2-4x", "beyond 4x", then "all" and "final evaluations"):
    runs, points, coverage (of the central interval), width, mae (ours, median), mae_least_squares,
    mae_last_value, mean_error (observed - forecast: above 0, forecasts run low) and z_rms (root mean square of
    standardised errors: above 1, intervals narrower than the errors; below 1, wider). cv: cross_validate()'s
    table, or the path of the CSV file `forecast cross-validate --out` wrote."""
    cv = as_cross_validation(cv, "performance_metrics()")
    missing = [c for c in ("cut", "ahead", "covered", "observed", "forecast", "final") if c not in cv.columns]
    if missing:
        raise ValueError(f"not a cross_validate() result: no column {missing[0]!r}")
    rows = []
    for cut, at_cut in cv.groupby("cut", sort=True):
        reach = at_cut["ahead"].map(reach_bin)
        for _, _, name in REACH_BINS:
            if (reach == name).any():
                rows.append({"cut": cut, "reach": name, **_summary(at_cut[reach == name])})
        rows.append({"cut": cut, "reach": "all", **_summary(at_cut)})
        rows.append({"cut": cut, "reach": "final evaluations", **_summary(at_cut[at_cut["final"]])})
    return pd.DataFrame(rows)


CHANCE_TAIL = 0.025  # each end of the chance range: 1 time in 40, 1 in 20 in all


def chance_range(level: float, n: int) -> tuple[float, float]:
    """The coverages of n independent runs' finals that chance alone gives 19 times in 20 (each
    end holds back 1 time in 40), counted exactly from the binomial. Two normal standard errors
    are no such band for a few runs or a level near 1: they called 0 of 1 run (1 time in 10 at
    90%) and 7 of 10 (1 in 14) beyond chance, and reached below 0% and above 100%."""
    if n <= 0:
        return 0.0, 1.0
    from scipy.stats import binom

    counts = np.arange(n + 1)
    plausible = (binom.cdf(counts, n, level) >= CHANCE_TAIL) & (binom.sf(counts - 1, n, level) >= CHANCE_TAIL)
    return float(counts[plausible].min() / n), float(counts[plausible].max() / n)


def level_text(level: float) -> str:
    """'90%', '97.5%': whole percents rounded 0.975 to '98%' and 0.999 to '100% intervals'."""
    return f"{100 * level:.4g}%"


def level_of(cv: pd.DataFrame) -> float:
    """The interval level a cross-validation checked: its 'level' column where it has one (attrs do
    not survive pd.concat of two results, and 0.9 then stood in for an 0.8 table's level), else
    attrs["level"], else 0.9. ValueError when the rows checked several levels."""
    if "level" in cv.columns and cv["level"].notna().any():
        levels = sorted(cv["level"].dropna().unique())
        if len(levels) > 1:
            raise ValueError(f"the table checks intervals at several levels ({', '.join(f'{v:g}' for v in levels)}); "
                             "describe the rows of each level on their own")
        return float(levels[0])
    return float(cv.attrs.get("level", 0.9))


def fits_of(cv: pd.DataFrame) -> list[dict]:
    """Each cut's fit: attrs["fits"], or where the attrs are gone (pd.concat of two results, each
    with its own, keeps none) what the rows' fit_converged and fit_problems columns say of it, so
    a flagged fit is still said first."""
    if cv.attrs.get("fits"):
        return cv.attrs["fits"]
    if "fit_converged" not in cv.columns:
        return []
    fits = []
    for cut, at_cut in cv.groupby("cut", sort=True):
        problems = at_cut["fit_problems"].iloc[0] if "fit_problems" in at_cut.columns else ""
        fits.append({"cut": float(cut), "runs": int(at_cut["run_id"].nunique()), "left_out": _left_out_of(at_cut),
                     "converged": bool(at_cut["fit_converged"].astype(bool).all()),
                     "problems": [p for p in (problems if isinstance(problems, str) else "").split("; ") if p]})
    return fits


def _left_out_of(at_cut: pd.DataFrame) -> list[str]:
    """The runs a cut's fit left out, from its fit_left_out column (a JSON list); [] for a table
    written before the column existed, or one whose cell is blank or not such a list."""
    if "fit_left_out" not in at_cut.columns:
        return []
    cell = at_cut["fit_left_out"].iloc[0]
    try:
        names = json.loads(cell) if isinstance(cell, str) else []
    except ValueError:
        return []
    return [str(name) for name in names] if isinstance(names, list) else []


def describe_cross_validation(cv: pd.DataFrame, metrics: pd.DataFrame | None = None) -> list[str]:
    """Plain sentences per cut, each citing its numbers: coverage of the runs' final evaluations
    against the range chance gives for that many runs, the bias, and ours' error against least
    squares'. Fits that did not converge are said first. cv: as performance_metrics() takes it."""
    cv = as_cross_validation(cv, "describe_cross_validation()")
    metrics = performance_metrics(cv) if metrics is None else metrics
    level = level_of(cv)
    lines = []
    for fit in fits_of(cv):
        if not fit["converged"]:
            lines.append(f"cut {fit['cut']:g}: the fit did not converge ({'; '.join(fit['problems'])}); "
                         "treat its figures with suspicion")
        if fit["left_out"]:
            lines.append(f"cut {fit['cut']:g}: left out {len(fit['left_out'])} run(s) with fewer than "
                         f"{MIN_POINTS_BEFORE_CUT} evaluations before the cut: {', '.join(fit['left_out'])}")
    for cut, rows in metrics.groupby("cut", sort=True):
        finals = rows[rows["reach"] == "final evaluations"].iloc[0]
        every = rows[rows["reach"] == "all"].iloc[0]
        n = int(finals["runs"])
        low, high = chance_range(level, n)
        runs = "1 run" if n == 1 else f"{n} runs"
        finals_of = "the 1 run's final evaluation" if n == 1 else f"the {n} runs' final evaluations"
        if finals["coverage"] < low - 1e-9:
            verdict = "below what chance allows: the intervals are too narrow on these runs"
        elif finals["coverage"] > high + 1e-9:
            verdict = "above what chance allows: the intervals are wider than these runs need"
        else:
            verdict = "within what chance allows"
        bias = abs(every["mean_error"])
        direction = "off" if bias < 0.0005 else "low" if every["mean_error"] > 0 else "high"  # 0.000 is neither
        lines.append(
            f"cut {cut:g}: {level_text(level)} intervals held {finals['coverage']:.0%} of {finals_of} ({low:.0%} to "
            f"{high:.0%} is chance for {runs}: {verdict}) and "
            f"{every['coverage']:.0%} of all {int(every['points'])} hidden ones; forecasts ran {bias:.3f} "
            f"{direction} on average, with an absolute error {every['mae']:.3f} against least squares' "
            f"{every['mae_least_squares']:.3f} and the last value's {every['mae_last_value']:.3f}"
        )
    return lines


CSV_COLUMNS = ("cut", "run_id", "ahead", "observed", "forecast", "lower", "upper", "covered", "z", "least_squares",
               "last_value", "final", "level", "fit_converged", "fit_problems")


NUMERIC_CSV_COLUMNS = ("cut", "ahead", "observed", "forecast", "lower", "upper", "z", "least_squares", "last_value",
                       "level")
# the chart's reach axis is logarithmic, padded a few percent and ticked by decades: a reach near the largest
# float (1e308) overflowed matplotlib's tick locator, a traceback after the report's fit. No run's compute
# grows within a hundred decades of it, so a reach past this is a typo, not a forecast
MAX_AHEAD = 1e300


def read_cross_validation(path) -> pd.DataFrame:
    """A table `forecast cross-validate --out` wrote, with what cross_validate keeps in attrs
    (level, each cut's fit) restored from its columns. ValueError naming the file and what is
    wrong when it is not such a table."""
    try:
        cv = pd.read_csv(path, dtype={"run_id": str}, keep_default_na=False, na_values={"z": ["", "nan", "NaN"]})
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise ValueError(f"{path}: cannot be read as a cross-validation table ({err})") from None
    missing = [c for c in CSV_COLUMNS if c not in cv.columns]
    if missing == ["level"]:  # the first `forecast cross-validate` (a6b928e) wrote every column but this
        raise ValueError(f"{path}: has no column 'level', so which interval it checked is not known (an older "
                         "`forecast cross-validate` wrote it); run `forecast cross-validate RUNS --out` again")
    if missing:
        raise ValueError(f"{path}: not a table written by `forecast cross-validate --out` (no column {missing[0]!r})")
    if cv.empty:
        raise ValueError(f"{path}: holds no hidden evaluations")
    for column in NUMERIC_CSV_COLUMNS:
        # a cell emptied or typed over in a spreadsheet failed only after the report's fit, in a traceback
        values = pd.to_numeric(cv[column], errors="coerce")
        bad = (values.isna() & cv[column].notna()) if column == "z" else values.isna()  # z is blank where sd was 0
        bad |= ((values <= 0) | (values > MAX_AHEAD)) if column == "ahead" else False
        # 'inf' (or 1e400) reads as a number, which cross_validate never writes: an infinite reach failed the
        # report's chart after its fit, a traceback
        bad |= np.isinf(values)
        if bad.any():
            row = int(bad.idxmax())
            number = "a finite number" if np.isinf(values[row]) else "a number"
            raise ValueError(f"{path}: column {column!r} holds '{cv.at[row, column]}' on line {row + 2}, "
                             f"not {f'a compute ratio > 0 and at most {MAX_AHEAD:g}' if column == 'ahead' else number}")
        cv[column] = values
    for column in ("covered", "final", "fit_converged"):
        cv[column] = cv[column].map(_as_bool(path, column))
    levels = cv["level"].unique()
    if len(levels) != 1 or not 0 < float(levels[0]) < 1:
        raise ValueError(f"{path}: column 'level' must hold one interval probability in (0, 1), found {list(levels)[:3]}")
    cv.attrs["level"] = float(levels[0])
    cv.attrs["fits"] = fits_of(cv)  # from the columns: a CSV keeps no attrs
    return cv


def _as_bool(path, column: str):
    def read(value):
        text = str(value).strip().lower()
        if text in ("true", "1", "1.0"):
            return True
        if text in ("false", "0", "0.0"):
            return False
        raise ValueError(f"{path}: column {column!r} holds {value!r}, not True or False")

    return read
