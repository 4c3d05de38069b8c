"""Backtest of early-stop policies: replay finished runs as if they were live.

All runs of a sweep start together. Evaluations are revealed in compute order: at each checkpoint
(compute frontier c) every run in flight shows its evaluations with compute <= c, the policy
decides which runs stop, and a stopped run reveals nothing more. Checkpoints grow geometrically
(each `check_growth` times the last), starting when every run has `min_evals` evaluations, and
every policy decides at the same checkpoints (successive halving at its own rungs), so no policy
gets more chances to be wrong than another.

Policies:
  forecast            ours: refit the hierarchical model on everything revealed, apply the stop
                      rules of forecast.early_stop to every run in flight.
  median              Optuna's MedianPruner rule in a parallel sweep: stop a run when its best
                      value so far is below the median of the other runs' values at the same step
                      (Optuna compares with completed trials only, which never prunes when all
                      trials run at once; here every other run that has reached the step counts).
                      With median_percentile p it is Optuna's PercentilePruner(p): stop when the
                      best value so far is below the (100 - p)th percentile of the others, i.e.
                      keep the top p% (50 = MedianPruner; smaller = stops more).
  successive_halving  synchronous successive halving (ASHA when all workers reach a rung
                      together): rungs at c0 * eta^k in compute; at each rung keep the best
                      max(1, n // eta) runs by their value at the rung (Optuna's promotion rule).
  least_squares       the paper's least-squares point forecast per run (forecast.baseline) under
                      the same stop rules as ours; a point forecast makes every probability 0 or 1.
  no_stopping         every run to its end.

Scores:
  compute_fraction    compute used / compute of no_stopping (sum over runs of the compute of each
                      run's last revealed evaluation).
  regret              true best final - final of the run the policy ends up choosing. "True final"
                      is smoothed: the mean of a run's last 3 evaluations. The policy chooses the run
                      with the best mean of its last 3 *revealed* evaluations, and gets that value:
                      a run stopped early is judged where it stopped, not where it would have ended.
                      So regret can fall below 0 on runs that decline late: a run stopped near its
                      peak can hold more than the best final (kept as it is, not clipped at 0).
  hindsight ceiling   compute saved by finishing the true best run and stopping every other run
                      at the first checkpoint: the most a policy saves without paying in regret.

Regret against a known truth. A measured final has evaluation noise (with 1200 graded samples a
mean of 3 evaluations has an sd of about 0.008), so on a real sweep "the true best" is partly the
luckiest final, and which of two near-tied runs a policy finishes decides its regret.
`resample_evaluation_noise` makes a replica of a finished sweep whose truth is known: each run's
trajectory smoothed over neighbouring evaluations is its true pass rate (`true_metric`), and every
evaluation is drawn again around it with the binomial noise of its n_eval graded samples. Replayed
with `truth="true_metric"`, policies see only the redrawn evaluations and regret is scored on the
truth: true best final - true final of the chosen run (the choice is still made on what the policy
saw). Many replicas give regret an honest standard error: one real sweep is one draw of noise.
"""

from __future__ import annotations

import numbers
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from .data import compute_unit_of
from .early_stop import (
    EarlyStopConfig,
    check_random_seed,
    checked_forecaster_kwargs,
    checked_rules,
    count_comparison_stops,
    evaluate_in_turn,
    fit_for_advice,
    metrics_by_step,
    recent_comparison_stops,
    recommend_runs,
    seed_of_fit,
    top_at_step,
    values_at_latest_step,
)
from .formatting import fmt_compute, pretty_as_str
from .inference import check_bool, is_whole_number
from .model import padded_length

__all__ = [
    "BacktestConfig",
    "PolicyResult",
    "BacktestResult",
    "SweepView",
    "checkpoint_schedule",
    "smoothed_final",
    "median_should_stop",
    "halving_survivors",
    "replay",
    "hindsight_ceiling",
    "backtest",
    "resample_evaluation_noise",
    "smoothed_trajectory",
    "POLICIES",
    "TRUTH_COLUMN",
]

POLICIES = ("forecast", "median", "successive_halving", "least_squares", "no_stopping")
TRUTH_COLUMN = "true_metric"  # a run's true pass rate at each evaluation, where a sweep knows it


@dataclass
class BacktestConfig:
    """How the replay runs and the baselines' settings. Ours is configured by `early_stop`."""

    min_evals: int = 4  # first checkpoint: when every run has this many evaluations
    # next checkpoint at this multiple of the last one's compute: about 3 checks per doubling, at a
    # replay cost of ~10 fits. Live advice (forecast watch) comes after every evaluation; the stop
    # cap counts over EarlyStopConfig.stop_cap_window of compute so that it holds at either cadence
    # (counted per check, replays 1.1x apart lost 0.055-0.065 on a sweep of two held-out families)
    check_growth: float = 1.25
    smooth_last: int = 3  # "true final" = mean of this many last evaluations
    early_stop: EarlyStopConfig = field(default_factory=EarlyStopConfig)
    median_n_startup: int = 5  # MedianPruner's n_startup_trials (here: other runs at the step)
    # PercentilePruner's percentile: keep runs in the top this-% at the step (50 = MedianPruner)
    median_percentile: float = 50.0
    halving_eta: int = 4  # successive halving's reduction factor (Optuna's and Ray's default)
    random_seed: int = 0
    forecaster_kwargs: dict = field(default_factory=dict)
    # ours' fits told the sweep's largest planned budget (ScalingForecaster.fit(horizon=...)): less
    # biased forecasts from far ahead, but on the trainer sweeps' replicas 1-2 points less compute
    # saved at no lower regret, with the stop rules tuned without it; off (benchmarks/RESULTS.md)
    planned_horizon: bool = False

    def __post_init__(self):
        # planned_horizon="no" is true in an if: every refit would be told a horizon nobody asked for
        self.planned_horizon = check_bool("BacktestConfig.planned_horizon", self.planned_horizon)
        self.early_stop = checked_rules(self.early_stop)
        # ours' first checkpoint failed on them, in the forecaster's words, naming neither setting (none given
        # is not checked: the check imports forecast.forecaster, most of a second, which a replay of the baselines alone never needs)
        if self.forecaster_kwargs:
            checked_forecaster_kwargs(self.forecaster_kwargs)
        check_random_seed(self.random_seed, "BacktestConfig.random_seed")
        # `forecast backtest` checks its flags; in Python, halving_eta=1 kept the rungs at one compute and
        # backtest() never returned, smooth_last=0 scored each run's mean over all of it as its final
        # (values[-0:]), and check_growth="1.25" or min_evals=2.5 failed deep in numpy
        for name, least in (("min_evals", 1), ("smooth_last", 1), ("median_n_startup", 0), ("halving_eta", 2)):
            setattr(self, name, _whole_at_least(name, getattr(self, name), least))
        growth = self.check_growth
        if isinstance(growth, (bool, np.bool_)) or not isinstance(growth, numbers.Real) or not (
                np.isfinite(growth) and growth >= MIN_CHECK_GROWTH):
            raise ValueError(f"BacktestConfig.check_growth must be a number >= {MIN_CHECK_GROWTH:g}, got {growth!r}")
        percentile = self.median_percentile
        if isinstance(percentile, (bool, np.bool_)) or not isinstance(percentile, numbers.Real) or not 0 <= percentile <= 100:
            raise ValueError(f"BacktestConfig.median_percentile must lie in [0, 100], got {percentile!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def _whole_at_least(name: str, value, least: int) -> int:
    """A BacktestConfig count as an int (4.0 as 4: halving_eta=4.0 replayed as 4 before it was checked);
    ValueError naming it for a fraction, a string or one below `least`."""
    if not is_whole_number(value) or value < least:
        raise ValueError(f"BacktestConfig.{name} must be a whole number >= {least}, got {value!r}")
    return int(value)


# ----------------------------------------------------------------------------- small pure pieces


def smoothed_final(metrics, last: int = 3) -> float:
    """Mean of the last `last` values: a final value that one noisy evaluation cannot swing."""
    values = np.asarray(metrics, dtype=float)
    return float(values[-last:].mean())


# checks closer than 1% of compute apart decide nothing new (evaluations are further apart than
# that), and 1.0000001 made tens of millions of them: the replay never ended
MIN_CHECK_GROWTH = 1.01


def checkpoint_schedule(runs: pd.DataFrame, *, min_evals: int, growth: float) -> list[float]:
    """Compute levels at which policies decide: from when every run has `min_evals` evaluations,
    growing geometrically, up to (not including) the largest final compute."""
    if not (np.isfinite(growth) and growth >= MIN_CHECK_GROWTH):
        raise ValueError(f"check_growth must be finite and at least {MIN_CHECK_GROWTH:g}, got {growth}")
    start = runs.groupby("run_id")["compute"].apply(lambda c: float(np.sort(c.to_numpy())[min(min_evals, len(c)) - 1])).max()
    end = float(runs["compute"].max())
    points = []
    # a Python float: numpy's (the groupby's max) said "overflow encountered in scalar multiply" on the terminal
    # when a growth as large as --growth 1e300 carries it past the largest float (it ends the schedule as inf)
    c = float(start)
    while c < end * (1 - 1e-12):
        points.append(c)
        c *= growth
    return points


def median_should_stop(own_values, others_at_step, *, n_startup: int = 5, percentile: float = 50.0) -> bool:
    """Optuna PercentilePruner's test (maximising): best value so far < the (100 - percentile)th
    percentile of the others' values at this step; no verdict with fewer than `n_startup` others.
    percentile 50 is MedianPruner."""
    if not 0.0 <= percentile <= 100.0:
        raise ValueError(f"percentile must be in [0, 100], got {percentile}")
    others = np.asarray(others_at_step, dtype=float)
    if len(others) < max(n_startup, 1) or len(own_values) == 0:
        return False
    return float(np.max(own_values)) < float(np.percentile(others, 100.0 - percentile))


def halving_survivors(values: dict[str, float], eta: int) -> set[str]:
    """Successive halving at one rung: the best max(1, n // eta) runs by value survive."""
    keep = max(1, len(values) // eta)
    ranked = sorted(values, key=lambda r: -values[r])
    return set(ranked[:keep])


def smoothed_trajectory(metrics, window: int = 5) -> np.ndarray:
    """Centred moving mean over `window` evaluations (fewer at the ends): a run's trajectory with
    most of the evaluation noise averaged out and its rises, jumps and plateaus kept."""
    values = np.asarray(metrics, dtype=float)
    half = window // 2
    return np.array([values[max(0, i - half): i + half + 1].mean() for i in range(len(values))])


def resample_evaluation_noise(runs: pd.DataFrame, rng=0, *, window: int = 5) -> pd.DataFrame:
    """A replica of a finished sweep with a known truth (see the module docstring).

    Per run, in compute order: true_metric = smoothed_trajectory(metric, window); metric = a fresh
    Binomial(n_eval, true_metric) / n_eval. The truth is model-free (a moving mean, not a fitted
    sigmoid), so it does not favour a policy built on the sigmoid. It keeps what is left of the
    noise after averaging `window` evaluations (sd about 0.006 for 1200 samples), so a replica is a
    little noisier than the sweep it copies. Needs n_eval, the graded samples behind each metric.
    """
    if "n_eval" not in runs or runs["n_eval"].isna().any():
        raise ValueError("resample_evaluation_noise needs an n_eval column (graded samples per evaluation) on every row")
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    rng = np.random.default_rng(rng)
    out = runs.sort_values(["run_id", "compute"], kind="stable").reset_index(drop=True).copy()
    out[TRUTH_COLUMN] = out.groupby("run_id", sort=False)["metric"].transform(lambda m: smoothed_trajectory(m.to_numpy(), window))
    n = out["n_eval"].astype(int).to_numpy()
    out["metric"] = rng.binomial(n, out[TRUTH_COLUMN].clip(0.0, 1.0).to_numpy()) / n
    return out


# ----------------------------------------------------------------------------- the replay


@dataclass
class SweepView:
    """What a policy sees at one checkpoint."""

    revealed: pd.DataFrame  # every evaluation revealed so far (stopped runs: up to their stop)
    active: list[str]  # runs in flight, to decide on
    finished: list[str]  # runs that reached their planned budget
    stopped: dict[str, float]  # run -> compute of its last evaluation when stopped
    budgets: dict[str, float]  # run -> planned compute (its final compute)
    checkpoint: float
    n_rows_total: int  # rows of the whole sweep (ours pads its refits to one structure by it)
    index: int  # checkpoint number

    @property
    def typical_budget(self) -> float:
        """The median planned budget: the stop rules' unit of compute (EarlyStopConfig.min_gain_per_compute)."""
        return float(np.median(list(self.budgets.values())))


@dataclass
class PolicyResult:
    policy: str
    compute_fraction: float
    regret: float
    chosen_run: str
    chosen_value: float
    best_run: str
    best_value: float
    n_runs: int
    n_stopped: int
    n_checks: int
    seconds: float
    stops: list = field(default_factory=list)  # {run_id, compute, fraction_of_run, reason, checkpoint}
    notes: dict = field(default_factory=dict)

    @property
    def compute_saved(self) -> float:
        return 1.0 - self.compute_fraction

    def stops_summary(self) -> str:
        """The sentence over a table of the policy's stops, so that an empty table does not speak
        for itself: 'the forecast policy stopped 2 of the 6 runs:' or, when it stopped none, 'the
        forecast policy stopped none of the 6 runs at its 4 checkpoints: every run ran to its end.'"""
        if not self.stops:
            return (f"the {self.policy} policy stopped none of the {self.n_runs} runs at its {self.n_checks} "
                    "checkpoints: every run ran to its end.")
        return f"the {self.policy} policy stopped {len(self.stops)} of the {self.n_runs} runs:"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["compute_saved"] = self.compute_saved
        return d


class NoStopping:
    name = "no_stopping"

    def checkpoints(self, schedule, end):
        return []

    def decide(self, view: SweepView) -> dict:
        return {}


class MedianRule:
    name = "median"

    def __init__(self, n_startup: int = 5, percentile: float = 50.0):
        self.n_startup = n_startup
        self.percentile = percentile

    def checkpoints(self, schedule, end):
        return schedule

    def decide(self, view: SweepView) -> dict:
        by_run = metrics_by_step(view.revealed)
        bar = "median" if self.percentile == 50 else f"{100 - self.percentile:g}th percentile"
        out = {}
        for run in view.active:
            step, own, others = values_at_latest_step(run, by_run)
            if median_should_stop(own, others, n_startup=self.n_startup, percentile=self.percentile):
                out[run] = (f"best so far {own.max():.4f} < {bar} {np.percentile(others, 100 - self.percentile):.4f} "
                            f"of {len(others)} others at step {step:g}")
        return out


class SuccessiveHalving:
    name = "successive_halving"

    def __init__(self, eta: int = 4):
        self.eta = eta

    def checkpoints(self, schedule, end):
        if not schedule:
            return []
        rungs, c = [], schedule[0]
        while c < end * (1 - 1e-12):
            rungs.append(c)
            c *= self.eta
        return rungs

    def decide(self, view: SweepView) -> dict:
        values = {}
        for run, g in view.revealed.groupby("run_id", sort=False):
            if run in view.active:
                values[run] = float(g["metric"].iloc[-1])  # the value reported at the rung
        survivors = halving_survivors(values, self.eta)
        return {r: f"not in the best {len(survivors)} of {len(values)} at rung {fmt_compute(view.checkpoint)}" for r in values if r not in survivors}


class LeastSquaresRule:
    """The paper's least-squares fit per run, judged by our stop rules on its point forecasts:
    the same rules, guards included (one stop at a time, the stop cap, the runner-up hold), so
    the difference from ours is the forecast alone."""

    name = "least_squares"

    def __init__(self, config: EarlyStopConfig):
        self.config = config
        self._cache = {}
        self._comparison_stops = []  # (checkpoint, runs stopped on comparisons there): the stop cap's window

    def checkpoints(self, schedule, end):
        return schedule

    def _fit(self, run, g):
        from .baseline import fit_run_least_squares

        key = (run, len(g))
        if key not in self._cache:
            self._cache[key] = fit_run_least_squares(g["compute"].to_numpy(), g["metric"].to_numpy())
        return self._cache[key]

    def decide(self, view: SweepView) -> dict:
        from .baseline import predict_least_squares

        fits, last, by_run = {}, {}, metrics_by_step(view.revealed)
        for run, g in view.revealed.groupby("run_id", sort=False):
            fits[run], last[run] = self._fit(run, g), float(g["compute"].max())

        def point(run, compute):  # a point forecast: one "draw", so every probability is 0 or 1
            return np.atleast_1d(predict_least_squares(fits[run], [compute]))

        finals = {run: point(run, view.budgets[run] if run in view.active else last[run]) for run in fits}
        in_flight = {}
        for run in view.active:
            in_flight[run] = {"at_budget": finals[run], "now": point(run, last[run]), "budget": view.budgets[run],
                              "compute_now": last[run], "n_evals": len(by_run[run])}
            if self.config.protect_top_percent is not None:
                in_flight[run]["protected"] = top_at_step(run, by_run, self.config.protect_top_percent)
        recent = recent_comparison_stops(self._comparison_stops, view.checkpoint, self.config.stop_cap_window)
        recs = evaluate_in_turn(in_flight, finals, self.config, compute_scale=view.typical_budget, recent_stops=recent,
                                unit=compute_unit_of(view.revealed))
        self._comparison_stops.append((view.checkpoint, count_comparison_stops(recs)))
        return {run: rec.message for run, rec in recs.items() if rec.stop}


class ForecastRule:
    """Ours: one joint refit of every revealed evaluation per checkpoint, then the stop rules."""

    name = "forecast"

    def __init__(self, config: EarlyStopConfig, *, random_seed: int = 0, forecaster_kwargs=None,
                 planned_horizon: bool = False):
        self.config = config
        self.random_seed = random_seed
        self.forecaster_kwargs = forecaster_kwargs or {}
        self.planned_horizon = planned_horizon  # fits told the sweep's largest planned budget
        self.n_unconverged = 0
        self.flagged_stops = 0  # stops made on fits that did not converge
        self.flagged_stops_chains_agree = 0  # ... of which each chain alone said stop too
        self.fit_seconds = 0.0
        self._previous = None  # the last checkpoint's fit, refitted at the next one
        self._comparison_stops = []  # (checkpoint, runs stopped on comparisons there): the stop cap's window

    def checkpoints(self, schedule, end):
        return schedule

    def decide(self, view: SweepView) -> dict:
        start = time.perf_counter()
        # padded to the whole sweep's rows rounded up as a fit rounds its own: to the sweep's rows exactly, a
        # checkpoint that revealed more than they round down to (a fit takes its rows rounded up to 64) was a
        # second model compiled mid-backtest, and neither matched a later fit of the sweep or a live advice fit
        fc, converged = fit_for_advice(
            view.revealed, random_seed=seed_of_fit(self.random_seed, view.index), pad_to=padded_length(view.n_rows_total),
            previous=self._previous, horizon=max(view.budgets.values()) if self.planned_horizon else None,
            **self.forecaster_kwargs
        )
        self._previous = fc
        self.fit_seconds += time.perf_counter() - start
        self.n_unconverged += not converged
        last = view.revealed.groupby("run_id")["compute"].max()
        compare_at = {r: (view.budgets[r] if r in view.active else float(last[r])) for r in fc.run_ids}
        recent = recent_comparison_stops(self._comparison_stops, view.checkpoint, self.config.stop_cap_window)
        recs = recommend_runs(fc, {r: view.budgets[r] for r in view.active}, self.config, compare_at=compare_at,
                              compute_scale=view.typical_budget, recent_stops=recent)
        self._comparison_stops.append((view.checkpoint, count_comparison_stops(recs)))
        stops = {r: rec for r, rec in recs.items() if rec.stop}
        if not converged:
            self.flagged_stops += len(stops)
            self.flagged_stops_chains_agree += sum(bool(rec.details.get("chains_agree")) for rec in stops.values())
        return {r: rec.message for r, rec in stops.items()}


def make_policy(name: str, config: BacktestConfig):
    if name == "forecast":
        return ForecastRule(config.early_stop, random_seed=config.random_seed, forecaster_kwargs=config.forecaster_kwargs,
                            planned_horizon=config.planned_horizon)
    if name == "median":
        return MedianRule(config.median_n_startup, config.median_percentile)
    if name == "successive_halving":
        return SuccessiveHalving(config.halving_eta)
    if name == "least_squares":
        return LeastSquaresRule(config.early_stop)
    if name == "no_stopping":
        return NoStopping()
    raise ValueError(f"unknown policy '{name}'; known: {', '.join(POLICIES)}")


def replay(runs: pd.DataFrame, policy, config: BacktestConfig | None = None, *, truth: str | None = None) -> PolicyResult:
    """Replay a validated run table under one policy; see the module docstring for the rules.

    truth: a column of `runs` holding each evaluation's true pass rate (TRUTH_COLUMN in a replica
    from resample_evaluation_noise). The policy never sees it; regret is scored on it, and the
    regret on measured finals is kept in notes["measured_regret"]."""
    config = config or BacktestConfig()
    runs = runs.sort_values(["run_id", "compute"], kind="stable").reset_index(drop=True)
    true_values = None
    if truth is not None:
        if truth not in runs:
            raise ValueError(f"truth column '{truth}' is not in the run table")
        true_values = runs[truth].astype(float)
        if truth != "metric":  # the measured metric as its own truth: scored as without one
            runs = runs.drop(columns=[truth])
    budgets = runs.groupby("run_id")["compute"].max().to_dict()
    schedule = checkpoint_schedule(runs, min_evals=config.min_evals, growth=config.check_growth)
    stopped: dict[str, float] = {}
    stops = []
    start = time.perf_counter()
    checks = policy.checkpoints(schedule, float(runs["compute"].max()))
    n_checks = 0
    for index, c in enumerate(checks):
        limit = runs["run_id"].map(lambda r, c=c: min(c, stopped.get(r, np.inf)))
        revealed = runs[runs["compute"] <= limit]
        active = [r for r in budgets if r not in stopped and budgets[r] > c]
        if not active:
            break
        finished = [r for r in budgets if r not in stopped and budgets[r] <= c]
        view = SweepView(revealed, active, finished, dict(stopped), budgets, c, len(runs), index)
        decisions = policy.decide(view)
        n_checks += 1
        last = revealed.groupby("run_id")["compute"].max()
        for run, reason in decisions.items():
            stopped[run] = float(last[run])
            stops.append({"run_id": run, "compute": float(last[run]), "fraction_of_run": float(last[run] / budgets[run]), "checkpoint": c, "reason": reason})
    seconds = time.perf_counter() - start

    full = runs.groupby("run_id")["metric"].apply(lambda m: smoothed_final(m, config.smooth_last))
    in_hand = runs[runs["compute"] <= runs["run_id"].map(lambda r: stopped.get(r, np.inf))]
    held = in_hand.groupby("run_id")["metric"].apply(lambda m: smoothed_final(m, config.smooth_last))
    used = sum(stopped.get(r, b) for r, b in budgets.items())
    chosen = held.idxmax()  # chosen on what the policy saw, whatever regret is scored on
    notes = {}
    if isinstance(policy, ForecastRule):
        notes = {"fit_seconds": policy.fit_seconds, "unconverged_fits": policy.n_unconverged,
                 "stops_on_unconverged_fits": policy.flagged_stops,
                 "of_which_every_chain_agreed": policy.flagged_stops_chains_agree}
    if true_values is not None:
        notes["measured_regret"] = float(full.max() - held[chosen])
        notes["regret_scored_on"] = truth
        full = true_values.groupby(runs["run_id"]).apply(lambda m: smoothed_final(m, config.smooth_last))
        held = true_values.loc[in_hand.index].groupby(in_hand["run_id"]).apply(lambda m: smoothed_final(m, config.smooth_last))
    best = full.idxmax()
    return PolicyResult(
        policy=policy.name,
        compute_fraction=float(used / sum(budgets.values())),
        regret=float(full[best] - held[chosen]),
        chosen_run=str(chosen),
        chosen_value=float(held[chosen]),
        best_run=str(best),
        best_value=float(full[best]),
        n_runs=len(budgets),
        n_stopped=len(stopped),
        n_checks=n_checks,
        seconds=seconds,
        stops=stops,
        notes=notes,
    )


def hindsight_ceiling(runs: pd.DataFrame, config: BacktestConfig | None = None, *, truth: str | None = None) -> float:
    """Compute saved by a policy that knows the answer: it finishes the true best run and stops
    every other run at the first checkpoint (regret 0). No policy deciding at these checkpoints
    saves more without giving up on the best run, so this is the yardstick for compute saved:
    a policy above it has bought its savings with regret."""
    config = config or BacktestConfig()
    runs = runs.sort_values(["run_id", "compute"], kind="stable")
    budgets = runs.groupby("run_id")["compute"].max()
    first = checkpoint_schedule(runs, min_evals=config.min_evals, growth=config.check_growth)
    if not first:
        return 0.0
    finals = runs.groupby("run_id")[truth or "metric"].apply(lambda m: smoothed_final(m, config.smooth_last))
    best = finals.idxmax()
    at_first = runs[runs["compute"] <= first[0]].groupby("run_id")["compute"].max()
    used = sum(budgets[r] if r == best else min(float(at_first.get(r, 0.0)), budgets[r]) for r in budgets.index)
    return float(1.0 - used / budgets.sum())


@dataclass
class BacktestResult:
    results: list[PolicyResult]
    config: BacktestConfig
    source: str | None = None
    hindsight_ceiling: float | None = None  # see hindsight_ceiling()
    truth: str | None = None  # the column of true pass rates regret was scored on, if any

    @property
    def table(self) -> pd.DataFrame:
        rows = [
            {"policy": r.policy, "compute_fraction": r.compute_fraction, "compute_saved": r.compute_saved,
             "regret": r.regret, "stopped": f"{r.n_stopped}/{r.n_runs}", "checks": r.n_checks,
             "chosen_run": r.chosen_run, "seconds": r.seconds}
            for r in self.results
        ]
        return pd.DataFrame(rows)

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "definitions": {
                "compute_fraction": "compute used / compute of running every run to its end",
                "regret": f"true best final - final of the chosen run; final = mean of the last {self.config.smooth_last} evaluations (revealed ones for the chosen run)"
                + (f", of the true pass rates in column '{self.truth}'" if self.truth else ""),
            },
            "config": self.config.to_dict(),
            "hindsight_ceiling": self.hindsight_ceiling,
            "policies": {r.policy: r.to_dict() for r in self.results},
        }

    def __str__(self) -> str:
        table = self.table.copy()
        table["compute_fraction"] = table["compute_fraction"].map("{:.3f}".format)
        table["compute_saved"] = table["compute_saved"].map("{:.1%}".format)
        table["regret"] = table["regret"].map("{:.4f}".format)
        table["seconds"] = table["seconds"].map("{:.1f}".format)
        text = table.to_string(index=False)
        if self.hindsight_ceiling is not None:
            text += (f"\nhindsight ceiling: {self.hindsight_ceiling:.1%} saved at regret 0 (finish the true best run, "
                     "stop every other run at the first checkpoint)")
        # the replay's refits swallow their ConvergenceWarnings (fit_for_advice), so the table is
        # the only place a notebook's print(result) can say its figures rest on flagged fits
        for r in self.results:
            if r.notes.get("unconverged_fits"):
                text += f"\nwarning: {unconverged_refits_said(r)}"
        return text

    _repr_pretty_ = pretty_as_str


def unconverged_refits_said(result: PolicyResult) -> str:
    """'3 of the 9 refits of the forecast policy did not converge; ... (2 stops made on them; each chain
    alone said stop too on 2)': under the backtest's table, and on stderr where stdout goes elsewhere."""
    notes = result.notes
    text = (f"{notes['unconverged_fits']} of the {result.n_checks} refits of the {result.policy} policy did not converge; "
            "its stops rest on them, so treat its figures with suspicion")
    if (n := notes.get("stops_on_unconverged_fits")) is not None:
        text += (f" ({n} stop{'' if n == 1 else 's'} made on them; each chain alone said stop too on "
                 f"{notes.get('of_which_every_chain_agreed', 0)})")
    return text


def repeated_policies(policies) -> list[str]:
    """The policies named more than once, sorted: results are keyed by policy name (to_dict(),
    the JSON), so a repeat would be replayed twice and kept once."""
    policies = list(policies)
    return sorted({p for p in policies if policies.count(p) > 1})


def backtest(runs, policies=POLICIES, config: BacktestConfig | None = None, *, truth: str | None = None) -> BacktestResult:
    """Replay `runs` (a run table, or a path load_runs reads) under each policy (names from POLICIES,
    or one name); with `truth` (a column of true pass rates), regret is scored on it (replay)."""
    from .data import load_runs, require_rates, validate_runs

    config = config or BacktestConfig()
    if isinstance(policies, str):  # one name: its letters were replayed, "unknown policy 'm'"
        policies = (policies,)
    if repeated := repeated_policies(policies):
        raise ValueError(f"policies given more than once: {', '.join(repeated)}")
    # every name checked before the first replay: a typo after "forecast" was said only after its fits
    made = [make_policy(name, config) for name in policies]
    source = None
    if isinstance(runs, (str,)) or hasattr(runs, "__fspath__"):
        source = str(runs)
        runs = load_runs(runs)
    else:
        runs = validate_runs(runs)
    if truth is not None and truth in runs:
        # as `forecast backtest --truth` checks it: a column in percent scored a regret 100x too large, and a
        # missing value left its run's true final out of the scoring, without a word
        require_rates(runs, truth)
    results = [replay(runs, policy, config, truth=truth) for policy in made]
    return BacktestResult(results=results, config=config, source=source,
                          hindsight_ceiling=hindsight_ceiling(runs, config, truth=truth), truth=truth)
