"""Runs whose last evaluations fall away from their fitted curve: a shape the sigmoid cannot follow.

The model's sigmoid rises to an asymptote; a run that declines late, or flattens while its fitted
curve still rises, leaves residuals that trend downwards over its last stretch. Each run's last
third (of its own log-compute span) is tested for such a trend: a generalised least-squares slope of
its residuals, with the covariance the fit learnt for them (Ornstein-Uhlenbeck wander plus white
evaluation noise, forecast.wander_filter), so ordinary wander is what the slope is judged against.
A slope more than LATE_TREND_Z_LIMIT standard errors below zero flags the run: its forecasts ahead
assume the curve rises or holds, and their intervals are likely too narrow (the shape, not the noise).

Measured on fast fits (scratch, 2026-12-05): of 19 late declines in four messy synthetic sweeps
(simulate_sweep, messy_fraction=0.3, seeds 12, 13, 31, 32) fitted on whole curves, 9 were flagged;
of their 20 early plateaus none (the run's own asymptote absorbs a plateau); of 324 ordinary runs
(clean synthetic sweeps, the ordinary runs of the messy ones, the shipped and tuning trainer sweeps,
whole and cut curves) one, in a fit with R-hat 1.18. Runs cut before their shape shows are not
flagged: no test of the data seen can see what comes after it. So a flag means "likely", and no
flag is no promise.
"""

from __future__ import annotations

import numpy as np

from .curves import sigmoid_curve_log
from .formatting import said_together
from .model import white_variance

__all__ = ["LATE_TREND_Z_LIMIT", "LATE_SHARE", "can_test", "late_points", "late_trend_z", "misshapen_runs",
           "misshapen_runs_sentence", "misshapen_run_note", "with_the_compared_run", "with_the_best_of_others"]

# one-sided: a run whose residuals were only wander and noise falls this far about once in 740
LATE_TREND_Z_LIMIT = -3.0
# the share of a run's own log-compute span tested: late declines in the synthetic sweeps start at
# 55-85% of it, and a shorter stretch holds too few evaluations to judge a slope
LATE_SHARE = 1 / 3
MIN_LATE_POINTS = 4


def late_points(x, late_share: float = LATE_SHARE) -> np.ndarray:
    """The indices of the evaluations in a run's last `late_share` of log-compute (x increasing)."""
    x = np.asarray(x, dtype=float)
    span = x.max() - x.min() if x.size else 0.0
    return np.flatnonzero(x >= x.max() - late_share * span) if span > 0 else np.array([], dtype=int)


def late_trend_z(x, residuals, white_var, wander_sd: float, wander_scale: float, *, late_share: float = LATE_SHARE) -> float:
    """The slope of a run's residuals over its last `late_share` of log-compute, in standard errors.

    x: the run's normalised log-compute (increasing); residuals: metric minus fitted curve;
    white_var: the white variance of each evaluation; wander_sd, wander_scale: the fit's wander
    (Ornstein-Uhlenbeck in x). Generalised least squares of the residuals on (1, x) with that
    covariance; negative when the run's end falls away from its curve. NaN when the last stretch
    holds fewer than MIN_LATE_POINTS evaluations.
    """
    x, residuals = np.asarray(x, dtype=float), np.asarray(residuals, dtype=float)
    white_var = np.broadcast_to(np.asarray(white_var, dtype=float), x.shape)
    span = x.max() - x.min() if x.size else 0.0
    late = late_points(x, late_share)
    if late.size < MIN_LATE_POINTS:
        return float("nan")
    xl = x[late]
    cov = wander_sd**2 * np.exp(-np.abs(xl[:, None] - xl[None, :]) / wander_scale) + np.diag(white_var[late])
    design = np.column_stack([np.ones(late.size), (xl - xl.mean()) / span])
    weighted = np.linalg.solve(cov, design)  # cov^-1 X
    beta_cov = np.linalg.inv(design.T @ weighted)
    slope = (beta_cov @ weighted.T @ residuals[late])[1]
    return float(slope / np.sqrt(beta_cov[1, 1]))


def can_test(fc) -> bool:
    """Whether `fc` holds what misshapen_runs reads: the evaluations it was fitted on (data_) and its
    posterior (draws, curve_parameters). A fitted ScalingForecaster does; a stand-in for the fit behind
    advice (a test's, or a caller's) may hold only what the rules read, and its advice goes without a
    note instead of failing."""
    return (getattr(fc, "data_", None) is not None and callable(getattr(fc, "draws", None))
            and callable(getattr(fc, "curve_parameters", None)))


def _run_late_trends(fc, runs=None) -> list[dict]:
    """late_trend_z of every run of a fit (or of `runs` alone), from the posterior medians of its
    curve and noise."""
    d = fc.data_
    median = lambda name: float(np.median(fc.draws(name)))  # noqa: E731
    wander_sd, wander_scale, sigma_extra = median("wander_sd"), median("wander_scale"), median("sigma_extra")
    wanted = None if runs is None else {str(run) for run in runs}
    rows = []
    for r, run in enumerate(d.runs):
        if wanted is not None and run not in wanted:
            continue
        obs = np.flatnonzero((d.obs_run == r) & (d.weight > 0))  # in compute order (prepare_data)
        x = d.x[obs]
        # late_trend_z reads the last third alone, so the curve (a median over the draws: most of the
        # cost, which `forecast watch` pays at every refit) is made there alone; NaN before it
        late = late_points(x)
        p = fc.curve_parameters(run_id=run, kind="run")
        curve = np.median(sigmoid_curve_log(d.loc + d.scale * x[None, late], p["A"][:, None], p["B"][:, None],
                                            p["log_C_mid"][:, None], p["R0"][:, None]), axis=0)
        residuals, white = np.full(x.shape, np.nan), np.full(x.shape, np.nan)
        residuals[late] = d.y[obs][late] - curve
        white[late] = white_variance(curve, d.n_eval[obs][late] if d.has_n_eval else 0.0, sigma_extra)
        z = late_trend_z(x, residuals, white, wander_sd, wander_scale)
        rows.append({"run_id": run, "recipe": fc._recipe_of(run), "late_trend_z": z})
    return rows


def misshapen_runs(fc, *, z_limit: float = LATE_TREND_Z_LIMIT, runs=None) -> list[dict]:
    """The runs of a fit whose last third falls away from their fitted curve by more than their wander
    explains (late_trend_z below z_limit), worst first: dicts of run_id, recipe, late_trend_z.
    runs: test only these (default: every run of the fit); `forecast watch` refits after every new
    evaluation and needs the test only for the runs it advises, not for those that have ended."""
    flagged = [row for row in _run_late_trends(fc, runs) if row["late_trend_z"] < z_limit]  # NaN is never flagged
    return sorted(flagged, key=lambda row: row["late_trend_z"])


def misshapen_runs_sentence(flagged: list[dict]) -> str | None:
    """What a user is told about flagged runs; None when there are none. Unlabelled: the terminal
    prints it after 'shape: ', the report in its row 'run shapes'."""
    if not flagged:
        return None
    names = ", ".join(f"{row['run_id']} (z {row['late_trend_z']:.1f})" for row in flagged)
    one = len(flagged) == 1
    return (f"the last third{'' if one else 's'} of {names} {'falls' if one else 'fall'} away from "
            f"{'its fitted curve' if one else 'their fitted curves'} by more than the fit's wander explains (a late "
            "decline, or a flattening the sigmoid cannot follow): forecasts of "
            f"{'this run' if one else 'these runs'} are likely too high and their intervals too narrow")


def misshapen_run_note(late_trend_z: float) -> str:
    """What is said beside the stop advice of a flagged run (misshapen_runs), where whoever decides to
    stop or continue it reads. It says what the shape does to the run's forecasts, not which way the
    advice should go: that depends on the rule (a continue leans on this run's forecast, a stop of
    another run on the forecast of the run it was compared with), and the rules are left as they are."""
    return (f"shape: its last third falls away from its fitted curve (z {late_trend_z:.1f}): its forecasts "
            "are likely too high and their intervals too narrow")


def with_the_compared_run(note: str | None, compared_run: str, late_trend_z: float) -> str:
    """The note beside advice decided against another run (its rule's alternative: P(beats best
    'b-s1')) when THAT run is flagged: its forecast, the bar this run is held to, is likely too high,
    so a stop on it may come too early. `note`: this run's own (misshapen_run_note), or None."""
    clause = (f"the run it is compared with, '{compared_run}', falls away from its curve (z {late_trend_z:.1f}): "
              "its forecast is likely too high")
    return f"{note}; {clause}" if note else f"shape: {clause}"


def _share_of_draws(share: float) -> str:
    """A share of the draws in percent, never 0% or 100% for one in between: '75%', '< 1%', '> 99%'."""
    if 0 < share < 0.01:
        return "< 1%"
    if 0.99 < share < 1:
        return "> 99%"
    return f"{share:.0%}"


def with_the_best_of_others(note: str | None, flagged: list[tuple[str, float, float]]) -> str:
    """The note beside advice decided against the best of all other runs, draw by draw (gain_per_compute,
    which names no single run), when runs that are that best in some draws are flagged: `flagged` holds
    (run, share of the draws in which it is the best of the others, late_trend_z), most draws first. Their
    forecasts raise the bar in those draws, so a stop on it may come too early; a flagged run that is never
    the best leaves the bar as it is and is not named. `note`: this run's own (misshapen_run_note), or None."""
    one = len(flagged) == 1
    (first, first_share, _), rest = flagged[0], flagged[1:]
    where = said_together([f"'{first}' in {_share_of_draws(first_share)} of draws",
                           *(f"'{run}' in {_share_of_draws(share)}" for run, share, _ in rest)])
    zs = said_together(f"{z:.1f}" for _, _, z in flagged)
    clause = (f"the best of the runs it is compared with is {where}, which {'falls' if one else 'fall'} away from "
              f"{'its curve' if one else 'their curves'} (z {zs}): {'its forecast is' if one else 'their forecasts are'} "
              "likely too high")
    return f"{note}; {clause}" if note else f"shape: {clause}"
