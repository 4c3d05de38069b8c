"""Early-stop recommendations for runs in flight: continue or stop, with the rule that decided.

After each new evaluation the model is refitted (fast mode; a refit of the same data structure
reuses the compiled model) and four stop rules are checked for every run in flight, in order:

  beats_best    P(this run, at its planned budget, beats the best alternative by `margin`)
                < p_beat_threshold. The best alternative is the other run with the highest
                expected final metric (a run in flight at its planned budget, a finished or
                stopped run at what it reached). Domhan et al.'s rule, with the alternative's
                uncertainty included instead of treating "best so far" as exact.
  gain_per_compute
                E[max(0, this run at its budget - best of the other runs, draw by draw)] per
                planned budget of a typical run (the sweep's median) still to spend on it
                < min_gain_per_compute. What finishing the run adds to the sweep's best result,
                weighed by what it costs: a run 2.3x as expensive as its peers needs 2.3x the
                expected gain, so a cheap run close to the lead is finished while a long run
                with the same small chance is stopped. Successive halving gets its savings by
                ranking at equal compute, which cannot tell a dear run from a cheap one; this
                rule prices the difference.
  reach_target  P(this run reaches `target` within its planned budget) < p_target_threshold
                (only with a target).
  saturated     expected gain of the run's fitted curve per doubling of compute from here to
                the planned budget, (E[curve at budget] - E[curve now]) / log2(budget / compute
                now), < saturation_epsilon: the curve has flattened; the rest of the budget buys
                (almost) nothing. Per doubling, because the plain remaining gain shrinks to zero
                near the budget for every run, flat or not: a run with 6% of its budget left
                would be "saturated" however steeply it still climbed. The curve, not the run's
                predicted metric: the wander around the curve reverts, so a run whose last
                evaluations sat above its curve shows a negative "gain" that says nothing about
                flattening (in the benchmark such a reversion stopped a leading run at 92% of
                its budget, just after a lucky evaluation).

Two guards come first: no decision before `min_evals` evaluations, and none while the planned
budget is more than `max_extrapolation` times the compute so far (that far out the curve prior
decides, not the data; in the tuning sweeps the only early stops of eventual winners were made
at 100x+ extrapolations). A run planned for more than a typical run of the sweep (the median
budget) is held only until that typical budget is within `max_extrapolation` of its compute:
it has then seen as much compute as its peers, and waiting for 1/8 of its own long budget would
cost more than a whole short run. A run at or past its planned budget gets "stop: budget_reached".

The run that leads the sweep now (the highest fitted metric where it stands, ahead of every
finished or stopped run too) is not stopped by beats_best or gain_per_compute (`keep_leader`): a
forecast that another run will overtake it is an extrapolation, and stopping the leader on it bets
the sweep's best result. Its recommendation names the rule "leader" and the check that would have
fired. Saturation and the target rule still stop it.

At one check at most `max_stop_share` (half) of the runs in flight are stopped by those two
comparison rules, weakest first; the rest get "continue" with rule "stop_cap" and are judged again
at the next check, with more data on the run they were compared with. Without it, one run's
over-high forecast at the first checkpoint stopped every other run of a sweep at once, the
eventual best among them. The share counts over the last `stop_cap_window` (1.25x) of compute, not per
check: advice comes after every evaluation, and counted per check the cap let nearly every run be
stopped within 1.25x of compute (replays with checks 1.1x apart lost 0.055 on a held-out sweep).
A run that a comparison would stop and that also fails its own test (reach_target, saturated) is
stopped on that test instead: the cap does not count it and the guards here do not hold it.

While the run the others are compared with (the alternative with the highest expected final) is
itself in flight, its final is a forecast. With `keep_runner_up` (on by default) the strongest other
run in flight is not stopped by those two comparison rules once every other run is stopped or being stopped: it
goes on, with rule "runner_up", until that run has finished and is then judged against what it
reached. Without it, in a held-out one-seed trainer sweep every run was stopped against a short
run's forecast of 0.44, that run fell back in its last evaluations to a final of 0.36, and the
sweep was left 0.08 below its best run.

Optionally (`protect_top_percent`, off by default), a run whose best evaluation so far is in the
top share of the runs at the same step (Optuna's PercentilePruner test, turned round: `top_at_step`)
is not stopped by those two rules either; its recommendation names the rule "top_at_step". Their
bar is one run's forecast at its budget, and where the regret target failed in held-out sweeps
that bar was one short run's over-high forecast; where the field stands at equal progress is a bar
no single forecast can move.

Every Recommendation names a rule with its number and threshold: the rule that fired for a stop
("stop: P(beats best 'b-s1' by 0.01 at 40,000 gpu_hours, 4.0x now) = 0.02 < 0.1", each compute in
the run table's compute_unit, as the report writes it), or the check closest to firing for a
continue, so a user can always see how near the run is to being stopped.

"Metric" here is a run's true pass rate at a compute (its curve plus its persisting wander, with
extrapolation uncertainty), not one noisy evaluation: see `run_draws`.

Layers: `evaluate_rules` works on posterior draws (testable on hand-made posteriors);
`recommend_runs` draws them from a fitted ScalingForecaster; `trainer_advice` is the entry point
trainer_minimal calls every N evaluations.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from .data import UNSPECIFIED_UNIT
from .formatting import (
    GAIN_PER_COMPUTE_WORDS,
    fmt_compute,
    fmt_prob,
    name_of,
    shown_so_it_reads_true,
)
from .inference import check_bool, is_whole_number
from .thread_warnings import this_threads_warnings_dropped

__all__ = [
    "EarlyStopConfig",
    "Recommendation",
    "check_beats_best",
    "check_reach_target",
    "check_remaining_gain",
    "check_gain_per_compute",
    "evaluate_rules",
    "evaluate_in_turn",
    "recent_comparison_stops",
    "count_comparison_stops",
    "sweep_leader",
    "top_at_step",
    "recommend_runs",
    "noting_misshapen_runs",
    "fit_for_advice",
    "advice_pad",
    "trainer_advice",
]

STOP, CONTINUE = "stop", "continue"


# EarlyStopConfig's fields that hold a number, and those of them that None turns off
NUMBER_RULES = ("p_beat_threshold", "margin", "target", "p_target_threshold", "saturation_epsilon",
                "min_gain_per_compute", "max_extrapolation", "max_stop_share", "stop_cap_window", "protect_top_percent")
RULES_THAT_MAY_BE_OFF = ("target", "saturation_epsilon", "min_gain_per_compute", "max_extrapolation", "max_stop_share",
                         "stop_cap_window", "protect_top_percent")


@dataclass
class EarlyStopConfig:
    """Stop-rule settings; override any of them in one call: EarlyStopConfig(margin=0.0).

    Defaults were tuned by replaying synthetic Table-1 sweeps made with other seeds (101-104)
    than the ones benchmarks/early_stop.py reports (11-14), plus one scratch trainer sweep that
    is not the shipped one. They sit inside a region where every neighbouring setting also kept
    regret near 0.001; what broke it was extrapolating 8-16x with a threshold of 0.2 or a margin
    of 0.02. In words: stop a run when there is less than a 10% chance that it ends more than
    0.01 above the best alternative (a gain under 0.01 is not worth a run's compute), when
    finishing it is expected to add less than 0.002 to the sweep's best per typical run's budget
    of compute, or when it has flattened; but never from more than 8x extrapolation.

    min_gain_per_compute 0.002 was chosen on the same tuning sweeps plus a trainer sweep with
    seeds 3 and 4 (not the shipped one): 0.004 stopped a slow-starting winner of a synthetic sweep
    (regret 0.04); replayed again with today's guards on the nine held-out trainer families, 0.004
    saved 1.5 points more and raised regret on four of them (11-13: 0.0021 to 0.0201;
    benchmarks/RESULTS.md, "Ours along its own trade-off"). Raising max_extrapolation to 10 or 12
    stopped the same winner (0.026); holding
    long runs back only as long as a typical run (see evaluate_rules) gets the trainer's long runs
    decided early without touching sweeps whose runs share one budget.

    keep_leader was added after a trainer sweep with seeds 5-7 (not the shipped one, not used for
    the thresholds above): without it, the run ahead at the time was stopped because a long run was
    forecast, from 4x extrapolation, to end above it, and that long run ended 0.03 below it.

    max_stop_share 0.5 was added after a trainer sweep with seeds 11-13 (then held out): at its first
    checkpoint a short run led with a forecast 2x ahead that was too high (it ended at 0.432), and
    every other run, the eventual best (0.497) among them, was stopped against it in one go (full
    sweep and 2-seed subsets: mean regret 0.024; with the cap 0.0021, at 74.0% saved instead of
    79.9%; its one-seed sweeps did not change). On the tuning sweep with seeds
    14-16 it changed no regret and cost 1.6 points of compute saved; on the held-out seeds 5-7 it
    lowered the family's mean regret from 0.0101 to 0.0051, and on the synthetic sweeps it raised
    it from 0.0023 to 0.0070 (one sweep took another path, to 0.019). Seeds 17-19, made after it
    was set, are the clean check (benchmarks/early_stop.py --trainer-sweep): it barely changed them.
    Two ways to make it cheaper were tried and left out (benchmarks/RESULTS.md): counting it per recipe,
    and holding past the share only the stops that rest on the bar's recipe; each raised regret on
    a family where the cap had kept it low (11-13; 29-31). stop_cap_window 1.25 is the backtest's
    check spacing, on which the cap was set: replays with checks 1.1x apart and the cap counted per
    check lost 0.055 and 0.065 on a sweep of 11-13 and 29-31; counted over 1.25x of compute they
    gave the 1.25x-apart figures again (benchmarks/RESULTS.md).

    keep_runner_up was written after a one-seed sweep of seeds 29-31 lost 0.08: every run was
    stopped against a short run's forecast, and that run fell back in its last evaluations. Tried
    on the shipped, 17-19 and 29-31 sweeps and the synthetic ones, it lowered regret on each at
    1-4 points of compute saved; seeds 32-34, made then, decided it (benchmarks/RESULTS.md: 0.0128
    to under 0.01 on both its families, for 1-1.5 points).
    """

    p_beat_threshold: float = 0.1  # stop when P(beats best alternative by margin) < this
    margin: float = 0.01  # how much better than the best alternative a run must end to count as "beats"
    target: float | None = None  # metric to reach within the planned budget; None = rule off
    p_target_threshold: float = 0.05  # stop when P(reaching target within budget) < this
    saturation_epsilon: float | None = 0.002  # stop when expected gain per doubling of compute < this; None = rule off
    # stop when the expected gain this run adds to the sweep's best final metric, per planned
    # budget of a typical run still to spend, is below this; None = rule off (see check_gain_per_compute)
    min_gain_per_compute: float | None = 0.002
    # never stop the run that leads the sweep now (highest fitted metric at its current compute)
    # on a comparison with other runs' forecasts: only the saturation and target rules stop it
    keep_leader: bool = True
    min_evals: int = 4  # no decision before a run has this many evaluations
    # no decision while the planned budget is more than this many times the compute so far: that
    # far out the curve prior, not the data, decides (and on a log-compute grid waiting is cheap)
    max_extrapolation: float | None = 8.0
    # at most this share of the runs in flight is stopped on comparisons with other runs'
    # forecasts (beats_best, gain_per_compute) at one check, weakest first; the rest are judged
    # again at the next check, with more data on the run they were compared with. None or 1 = no cap
    max_stop_share: float | None = 0.5
    # the cap counts the runs stopped on comparisons over the last this-times growth of compute, not
    # per check: with checks closer together than this (live advice after every evaluation), the
    # runs it held would otherwise be stopped at the next check before the run they were compared
    # with has shown more (replayed with checks 1.1x apart, the cap then held almost nothing).
    # Checks this far apart or more (the backtest's) count per check, as before. None = per check
    stop_cap_window: float | None = 1.25
    # never stop a run on a comparison with other runs' forecasts while its best evaluation so far
    # is in the top this-% of the other runs' evaluations at the same step (the test of Optuna's
    # PercentilePruner, turned round): a run doing as well as the field at equal progress is not
    # stopped on an extrapolation. None = off (the default; see top_at_step)
    protect_top_percent: float | None = None
    # while the run the others are compared with (the best alternative) is still in flight, keep
    # the strongest other run going: its stop would rest on that run's forecast alone, and nothing
    # would be left to fall back on if that run ended below its forecast (see evaluate_in_turn)
    keep_runner_up: bool = True

    def __post_init__(self):
        # every front door (CLI flags, the trainer's advisor_rules, Python) gets the same refusal,
        # naming the field; a threshold outside its range would silently never or always fire
        def refuse(name, requirement):
            raise ValueError(f"{name} {requirement}, got {getattr(self, name)!r}")

        # a string (a setting read from a config file as text) failed in the range checks below as "'<' not
        # supported between instances of 'str' and 'int'"; `--rule` and advisor_rules type their text first
        for name in NUMBER_RULES:
            value = getattr(self, name)
            if value is None and name in RULES_THAT_MAY_BE_OFF:
                continue
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
                refuse(name, "must be a number" + (", or None (off)" if name in RULES_THAT_MAY_BE_OFF else ""))
        # 2.5 was taken: a warm-up that ends between evaluations
        if not (is_whole_number(self.min_evals) and self.min_evals >= 2):
            refuse("min_evals", "must be >= 2 (a whole number)")
        self.min_evals = int(self.min_evals)
        for name in ("p_beat_threshold", "p_target_threshold"):
            if not 0 < getattr(self, name) < 1:
                refuse(name, "must lie in (0, 1)")
        if self.target is not None and not 0 < self.target < 1:
            refuse("target", "must lie in (0, 1)")
        for name in ("margin", "saturation_epsilon", "min_gain_per_compute"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                refuse(name, "must be >= 0")
            if value is not None and math.isinf(value):  # a bar no run clears: every run stopped, but for the guards
                refuse(name, "must be finite and >= 0")
        if self.max_extrapolation is not None and not self.max_extrapolation > 1:
            refuse("max_extrapolation", "must be > 1")
        if self.max_stop_share is not None and not 0 < self.max_stop_share <= 1:
            refuse("max_stop_share", "must lie in (0, 1]")
        if self.stop_cap_window is not None and not self.stop_cap_window > 1:
            refuse("stop_cap_window", "must be > 1")
        if self.protect_top_percent is not None and not 0 < self.protect_top_percent <= 100:
            refuse("protect_top_percent", "must lie in (0, 100]")
        for name in ("keep_leader", "keep_runner_up"):  # "no" is true in an if: the guard stayed on
            setattr(self, name, check_bool(name, getattr(self, name)))

    def to_dict(self) -> dict:
        return asdict(self)


def checked_rules(config, default: EarlyStopConfig | None = None) -> EarlyStopConfig:
    """The stop rules given to a front door (None: `default`, else the defaults). A dict of settings,
    config={"margin": 0.02}, was an AttributeError from deep inside ("'dict' object has no attribute
    'protect_top_percent'"), or kept by watch() and BacktestConfig until the first fit read it."""
    if config is None:
        return default if default is not None else EarlyStopConfig()
    if not isinstance(config, EarlyStopConfig):
        raise TypeError("config must be a forecast.early_stop.EarlyStopConfig (e.g. EarlyStopConfig(margin=0.02)), "
                        f"got {type(config).__name__}")
    return config


@dataclass
class Recommendation:
    """continue or stop for one run, the rule behind it, and its numbers."""

    action: str  # "continue" or "stop"
    rule: str  # beats_best | gain_per_compute | reach_target | saturated; leader (a comparison would stop it, but it leads); top_at_step (the same, but it is in the top share at its step: protect_top_percent); runner_up (the same, but it is the best run left beside an unfinished bar: keep_runner_up); stop_cap (a comparison would stop it, but max_stop_share runs were stopped at this check); or why no rule ran: warmup, too_early, ...
    message: str  # one line a person can read, citing the number and the threshold
    run_id: str | None = None
    probability: float | None = None  # the probability the rule compared (probability rules)
    value: float | None = None  # the number compared with the threshold (= probability, or a gain)
    threshold: float | None = None
    # every check, the alternative, budget, compute now; late_trend_z where the run's end falls away
    # from its curve (and shape_note where the advice rests on its forecast), alternative_late_trend_z
    # where the alternative's does (and shape_note where that comparison stopped it, or a guard held the
    # stop), alternatives_late_trend_z for the flagged runs a gain_per_compute stop's bar rests on (and
    # shape_note) (noting_misshapen_runs: the advice of forecast watch, the report and the trainer)
    details: dict = field(default_factory=dict)

    @property
    def stop(self) -> bool:
        return self.action == STOP

    def to_dict(self) -> dict:
        return _plain(asdict(self))

    def __repr__(self) -> str:  # one line; every number behind it is in .details and to_dict()
        return f"Recommendation({self.run_id!r}: {self.message})"


def _plain(obj):
    """JSON-friendly copy: numpy scalars to Python, inf/nan to strings."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return str(obj)
    return obj


# ----------------------------------------------------------------------------- the rules, on draws


def _draws(x) -> np.ndarray:
    return np.asarray(x, dtype=float).ravel()


def check_beats_best(this: np.ndarray, alternatives: Mapping[str, np.ndarray], margin: float = 0.0):
    """P(this > best alternative + margin), draw by draw. Returns (p, best_name, best_mean).

    The best alternative is the one with the highest posterior mean. A single-draw array (a point
    forecast, as the least-squares baseline gives) broadcasts against many draws.
    """
    this = _draws(this)
    means = {name: float(_draws(d).mean()) for name, d in alternatives.items()}
    best = max(means, key=means.get)
    other = _draws(alternatives[best])
    if len(other) not in (1, len(this)) and len(this) != 1:
        raise ValueError(f"draw counts differ: {len(this)} for this run, {len(other)} for '{best}'")
    p = float(np.mean(this > other + margin))
    return p, best, means[best]


def check_reach_target(this_at_budget: np.ndarray, target: float) -> float:
    """P(metric at the planned budget >= target)."""
    return float(np.mean(_draws(this_at_budget) >= target))


def check_remaining_gain(this_at_budget: np.ndarray, this_now: np.ndarray, doublings: float = 1.0) -> float:
    """Expected gain from here to the planned budget per doubling of compute (`doublings` =
    log2(budget / compute now)); can be negative for a declining run."""
    return float(_draws(this_at_budget).mean() - _draws(this_now).mean()) / doublings


def check_gain_per_compute(this: np.ndarray, alternatives: Mapping[str, np.ndarray], compute_left: float) -> tuple[float, float]:
    """Expected improvement of the best final metric from letting this run finish, per unit of
    compute left (`compute_left`, in planned budgets of a typical run). Returns (gain, gain per unit).

    gain = E[max(0, this - best of the alternatives)], draw by draw: what keeping the run adds to
    the sweep's best in expectation (the expected-improvement of Bayesian optimisation). Unlike
    P(beats best), it weighs how much compute the chance costs: a cheap run near the lead is
    worth finishing, a long run with the same small chance is not.
    """
    this = _draws(this)
    others = [_draws(d) for d in alternatives.values()]
    n = max([len(this), *map(len, others)])
    best_other = np.max(np.stack([np.broadcast_to(d, n) if len(d) == 1 else d for d in others]), axis=0)
    gain = float(np.mean(np.maximum(0.0, this - best_other)))
    return gain, gain / max(float(compute_left), 1e-12)


# the alternatives whose share of being the best is kept in a gain_per_compute check: every check of every run
# holds them, rewritten after each refit (forecast watch's recommendations.json), and with every other run
# kept that file grew with the square of the runs (2.3 MB for 300 close runs, against 0.6 MB without)
BEST_OF_OTHERS_KEPT = 5


def best_of_others_shares(alternatives: Mapping[str, np.ndarray]) -> dict[str, float]:
    """The share of draws in which each alternative is the best of them, the bar check_gain_per_compute
    holds a run to draw by draw: those that are it in any draw, most first, the BEST_OF_OTHERS_KEPT largest.
    A flagged run's forecast (shape_check) raises that bar in its share of the draws alone
    (noting_misshapen_runs)."""
    names = list(alternatives)
    draws = [_draws(alternatives[name]) for name in names]
    n = max(map(len, draws))
    best = np.argmax(np.stack([np.broadcast_to(d, n) if len(d) == 1 else d for d in draws]), axis=0)
    counts = np.bincount(best, minlength=len(names))
    order = sorted(np.flatnonzero(counts), key=lambda i: -counts[i])[:BEST_OF_OTHERS_KEPT]
    return {names[i]: float(counts[i] / n) for i in order}


# the rules that stop a run because another run is forecast to do better (see keep_leader)
COMPARISON_RULES = ("beats_best", "gain_per_compute")
# the continues a comparison stop was turned into (evaluate_rules, evaluate_in_turn)
HELD_STOP_RULES = ("leader", "top_at_step", "runner_up", "stop_cap")
# the advice that rests on the run's forecast: the four rules, stop or continue, and the held stops (the
# run's own rules judged its forecast and did not fire). The rest decide without one: warmup and too_early
# judge nothing yet, budget_reached compares compute with the budget, no_rule, no_budget and advisor_error
# had nothing to judge with. A shape note beside those reads as a doubt about advice it cannot touch.
RULES_ON_THE_FORECAST = ("beats_best", "gain_per_compute", "reach_target", "saturated", *HELD_STOP_RULES)


def _shown_against(value: float, threshold: float, fired: bool, digits: int) -> str:
    """`value` printed so that its comparison with the threshold reads as the rule decided."""
    return shown_so_it_reads_true(value, lambda shown: (shown < threshold) == fired, digits)


def _shown_above(ratio: float, limit: float) -> str:
    """A compute ratio the extrapolation guard found above `limit`, printed so that it reads above
    it: 8.04 against 8 is '8.04', not '8.0' ('8.0x ... > 8x')."""
    return shown_so_it_reads_true(ratio, lambda shown: shown > limit, 1)


def _probability_against(p: float, threshold: float, fired: bool) -> str:
    """'= 0.06 < 0.1': a probability and its comparison with the threshold, the probability written
    as the rest of the page writes one (fmt_prob): a share of draws that two decimals would round to
    0.00 or 1.00 is '< 0.01' or '> 0.99' ('P(...) < 0.01 < 0.1'); only none or all of the draws is
    0.00 or 1.00. Where that bound would not read true against the threshold (a threshold of 0.01
    or less), as many decimals as it takes, still never 0.00 or 1.00 for a share in between."""
    sign = "<" if fired else ">="
    shown = fmt_prob(p)
    if shown.startswith("<") and fired and 0.01 < threshold:
        return f"< 0.01 {sign} {threshold:g}"
    if shown.startswith(">") and not fired and 0.99 >= threshold:
        return f"> 0.99 {sign} {threshold:g}"

    def reads_true(value):
        return (value < threshold) == fired and (value != 0 or p == 0) and (value != 1 or p == 1)

    return f"= {shown_so_it_reads_true(p, reads_true, 2)} {sign} {threshold:g}"


def _beats_text(check: dict, unit: str) -> str:
    by = f" by {check['margin']:g}" if check["margin"] else ""
    value = _probability_against(check["value"], check["threshold"], check["fired"])
    return (f"P(beats best '{check['alternative']}'{by} at {fmt_compute(check['budget'])} {unit}, "
            f"{check['budget_ratio']:.1f}x now) {value}")


def _describe(check: dict, unit: str) -> str:
    """A check in words, its compute in `unit` as the report and `forecast decide` write it
    ('at 4.08e12 flops'): a bare '428,800' could be FLOPs, GPU-hours or steps."""
    if check["rule"] == "beats_best":
        return _beats_text(check, unit)
    if check["rule"] == "reach_target":
        value = _probability_against(check["value"], check["threshold"], check["fired"])
        return f"P(reaches {check['target']:g} by {fmt_compute(check['budget'])} {unit}) {value}"
    if check["rule"] == "gain_per_compute":
        value = _shown_against(check["value"], check["threshold"], check["fired"], 4)
        # the gain and the compute left are printed so that their quotient reads as the rule decided too:
        # "0.0001 for 0.06 typical budgets = 0.0020 per budget >= 0.002" reads as 0.0017 < 0.002
        threshold, fired = check["threshold"], check["fired"]
        left = shown_so_it_reads_true(check["compute_left"], lambda shown: shown > 0, 2)
        gain = shown_so_it_reads_true(check["gain"], lambda shown: (shown / float(left) < threshold) == fired, 4)
        text = (f"expected gain over the best of {check['n_alternatives']} other run(s) = {gain} "
                f"for {left} {GAIN_PER_COMPUTE_WORDS} = {value} per budget")
    else:
        value = _shown_against(check["value"], check["threshold"], check["fired"], 4)
        text = (f"expected gain per doubling to {fmt_compute(check['budget'])} {unit} "
                f"({check['doublings']:.1f} doublings left) = {value}")
    sign = "<" if check["fired"] else ">="
    return f"{text} {sign} {check['threshold']:g}"


def evaluate_rules(
    run_id: str,
    at_budget: np.ndarray,
    now: np.ndarray,
    alternatives: Mapping[str, np.ndarray],
    config: EarlyStopConfig | None = None,
    *,
    budget: float,
    compute_now: float,
    n_evals: int | None = None,
    curve_gain: float | None = None,
    compute_scale: float | None = None,
    leading: bool = False,
    protected: str | None = None,
    unit: str = UNSPECIFIED_UNIT,
) -> Recommendation:
    """Check the stop rules for one run from posterior draws; the first rule that fires wins.

    at_budget: draws of this run's metric at its planned budget; now: at its current compute;
    alternatives: name -> draws of each other candidate's final metric (may be empty).
    curve_gain: expected rise of the run's fitted curve from now to the budget, for the
        saturation rule; default: mean(at_budget) - mean(now).
    compute_scale: the planned budget of a typical run (recommend_runs: the median over the
        sweep), the unit of compute for the gain-per-compute rule; the extrapolation guard holds
        a longer run back only until a typical budget is within max_extrapolation of its compute.
        Default: this run's budget.
    leading: this run leads the sweep now (evaluate_in_turn decides); with config.keep_leader the
        rules that compare it with other runs' forecasts (beats_best, gain_per_compute) do not stop it.
    protected: why those two rules may not stop this run either (top_at_step's reason), or None.
    unit: what compute is counted in (the run table's compute_unit), written after each compute in
        the message; the numbers in `details` are unchanged.
    """
    config = checked_rules(config)
    base = {"budget": float(budget), "compute_now": float(compute_now), "n_evals": n_evals}
    if n_evals is not None and n_evals < config.min_evals:
        return Recommendation(
            CONTINUE, "warmup", f"continue: {n_evals} evaluation(s) so far; rules start at {config.min_evals}",
            run_id=run_id, value=float(n_evals), threshold=float(config.min_evals), details=base,
        )
    if compute_now >= budget:
        return Recommendation(
            STOP, "budget_reached",
            f"stop: compute {fmt_compute(compute_now)} {unit} >= planned budget {fmt_compute(budget)} {unit}",
            run_id=run_id, value=float(compute_now), threshold=float(budget), details=base,
        )
    ratio = budget / compute_now
    # A run planned for far more compute than a typical run of the sweep is held back only as
    # long as a typical run would be: by then it has seen as much compute as its peers, and the
    # rules price what is still unknown about its long tail (wider draws, a larger expected gain).
    # Waiting for 1/8 of its own budget would spend more on it than on a whole short run.
    held = min(budget, compute_scale) / compute_now if compute_scale else ratio
    if config.max_extrapolation is not None and held > config.max_extrapolation:
        what = "planned budget" if held == ratio else "a typical run's budget"
        return Recommendation(
            CONTINUE, "too_early",
            f"continue: {what} is {_shown_above(held, config.max_extrapolation)}x the compute so far > "
            f"{config.max_extrapolation:g}x; rules start below",
            run_id=run_id, value=float(held), threshold=float(config.max_extrapolation), details=base,
        )
    checks = []
    if alternatives:
        # The margin asks the runs behind the leader for a real gain. The run expected to be the
        # best is compared without it: otherwise two near-tied leaders would stop each other and
        # leave only worse runs going.
        expected = float(_draws(at_budget).mean())
        best_mean = max(float(_draws(d).mean()) for d in alternatives.values())
        margin = config.margin if best_mean >= expected else 0.0
        p, best, best_mean = check_beats_best(at_budget, alternatives, margin)
        checks.append({"rule": "beats_best", "value": p, "threshold": config.p_beat_threshold,
                       "alternative": best, "alternative_expected": best_mean, "margin": margin,
                       "budget": budget, "budget_ratio": ratio, "probability": True})
    if alternatives and config.min_gain_per_compute is not None:
        left = (budget - compute_now) / float(compute_scale or budget)
        gain, per = check_gain_per_compute(at_budget, alternatives, left)
        checks.append({"rule": "gain_per_compute", "value": per, "threshold": config.min_gain_per_compute,
                       "gain": gain, "compute_left": left, "n_alternatives": len(alternatives),
                       "best_of_others": best_of_others_shares(alternatives),
                       "budget": budget, "probability": False})
    if config.target is not None:
        p = check_reach_target(at_budget, config.target)
        checks.append({"rule": "reach_target", "value": p, "threshold": config.p_target_threshold,
                       "target": config.target, "budget": budget, "probability": True})
    if config.saturation_epsilon is not None:
        doublings = float(np.log2(ratio))
        gain = check_remaining_gain(at_budget, now, doublings) if curve_gain is None else curve_gain / doublings
        checks.append({"rule": "saturated", "value": gain, "threshold": config.saturation_epsilon,
                       "budget": budget, "doublings": doublings, "probability": False})
    if not checks:
        return Recommendation(
            CONTINUE, "no_rule", "continue: no rule applies (no alternative, no target, saturation rule off)",
            run_id=run_id, details=base,
        )
    for check in checks:
        check["fired"] = check["value"] < check["threshold"]
        check["text"] = _describe(check, unit)
    as_leader = leading and config.keep_leader
    holds = as_leader or protected is not None
    kept_for_leader = [c for c in checks if c["fired"] and holds and c["rule"] in COMPARISON_RULES]
    for check in kept_for_leader:
        check["fired"], check["held_for_leader"] = False, True

    fired = [c for c in checks if c["fired"]]
    if kept_for_leader and not fired:
        # A forecast of another run says this one will be overtaken, but nothing has overtaken it
        # yet. Stopping the leader on a forecast bets the sweep's best result on an extrapolation:
        # in a held-out trainer sweep it stopped the eventual winner for a long run whose forecast
        # at 4x its compute was 0.03 too high. The saturation and target rules still apply.
        decisive, action = kept_for_leader[0], CONTINUE
        # "leads the sweep now" beside "beats best 'b'" read as two runs called the best at once:
        # the leader is the highest where the runs stand now, 'b' the highest forecast at the budget
        why = "leads the sweep now (the highest fitted metric where the runs stand)" if as_leader else protected
        forecast = (f"the forecast that '{decisive['alternative']}' ends higher" if "alternative" in decisive
                    else "the forecasts of other runs")
        message = (f"continue: {why}; {forecast} does not stop it "
                   f"({decisive['text']} would stop it otherwise)")
    elif fired:
        decisive, action = fired[0], STOP
        message = f"stop: {decisive['text']}"
    else:
        # nothing fired: name the check closest to firing, so the margin to a stop is visible
        decisive, action = min(checks, key=_closeness), CONTINUE
        message = "continue: " + "; ".join(c["text"] for c in sorted(checks, key=_closeness))
    details = {**base, "expected_at_budget": float(_draws(at_budget).mean()),
               "q05_at_budget": float(np.quantile(_draws(at_budget), 0.05)),
               "q95_at_budget": float(np.quantile(_draws(at_budget), 0.95)),
               "expected_now": float(_draws(now).mean()), "checks": checks}
    if "alternative" in decisive:
        details["alternative"] = decisive["alternative"]
    held_as = "leader" if as_leader else "top_at_step"
    return Recommendation(
        action, held_as if decisive.get("held_for_leader") else decisive["rule"], message, run_id=run_id,
        probability=decisive["value"] if decisive["probability"] else None,
        value=decisive["value"], threshold=decisive["threshold"], details=details,
    )


def _closeness(check: dict) -> float:
    """How far a check is from firing, comparable across rules (smaller = closer)."""
    if check["probability"]:
        return (check["value"] - check["threshold"]) / max(check["threshold"], 1e-9) / 10
    return (check["value"] - check["threshold"]) / max(abs(check["threshold"]), 1e-3)


# ----------------------------------------------------------------------------- on a fitted model


def _run_stream(fc, run_id: str) -> int:
    """A random stream per run: with one shared stream, every run would get the same noise draws
    and comparisons between runs would ignore their independent evaluation noise. The forecaster's
    own (run_stream), from which predict()'s mean of the run is drawn too."""
    return fc.run_stream(run_id)


def run_draws(fc, run_id: str, compute) -> np.ndarray:
    """Draws of one run's true pass rate at each compute: (n_draws, len(compute)).

    Its own curve, its persisting wander and the extrapolation uncertainty, but not the white
    noise of a future evaluation: the question is which run *is* better at the budget, not which
    one's next noisy evaluation scores higher (with 800 graded samples that noise alone has an sd
    of 0.016, and would keep every run of a close sweep alive).
    """
    return fc.sample_curves(np.atleast_1d(compute), run_id=run_id, kind="run", rng=_run_stream(fc, run_id), eval_noise=False)


def _checked_budget(run: str, budget) -> float:
    """A planned budget as a float: any number float() takes (a 0-d array, a torch scalar, a
    Decimal, as an Optuna step_to_compute may return), finite and > 0; not a string."""
    try:
        value = float(budget) if not isinstance(budget, (str, bytes)) else float("nan")
    except (TypeError, ValueError):
        value = float("nan")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"budget for run '{run}' must be a finite compute > 0, got {budget!r}")
    return value


def recommend_runs(
    fc,
    budgets: Mapping[str, float],
    config: EarlyStopConfig | None = None,
    *,
    compare_at: Mapping[str, float] | None = None,
    alternatives: list[str] | None = None,
    compute_scale: float | None = None,
    recent_stops: int = 0,
) -> dict[str, Recommendation]:
    """Recommend continue/stop for every run in `budgets` (run_id -> planned compute).

    compare_at: run_id -> compute at which each candidate alternative is judged (a run in flight at
        its planned budget, a finished or stopped run where it ended). Default: the budget for
        runs in `budgets`, the last evaluation for every other run.
    alternatives: which runs count as alternatives (default: every other run in the fit).
    compute_scale: a typical run's planned budget, the gain-per-compute rule's unit of compute
        (default: the median of `budgets`).
    recent_stops: runs already stopped on comparisons within config.stop_cap_window of compute
        (recent_comparison_stops); they count against this check's max_stop_share.
    """
    from .forecaster import as_name

    config = checked_rules(config)
    if not isinstance(budgets, Mapping):
        raise TypeError(f"budgets must map run_id -> planned compute (a dict), got {type(budgets).__name__}")
    # a table's run names are text (validate_runs): its run 7 is "7", as predict(run_id=7) reads it. A key 7
    # was refused as "unknown run_id 7; the fit has: 1, ..., 7", and one in compare_at was ignored in silence
    budgets = {as_name(run, "run_id"): budget for run, budget in budgets.items()}
    compare_at = {as_name(run, "run_id"): compute for run, compute in (compare_at or {}).items()}
    alternatives = None if alternatives is None else [as_name(run, "run_id") for run in alternatives]
    known = set(fc.run_ids)
    unknown = [r for r in [*budgets, *(alternatives or []), *compare_at] if r not in known]
    if unknown:
        raise KeyError(f"unknown run_id {', '.join(map(repr, unknown))}; the fit has: {', '.join(fc.run_ids)}")
    if not budgets:
        return {}
    budgets = {run: _checked_budget(run, budget) for run, budget in budgets.items()}
    runs = fc.runs_
    last = runs.groupby("run_id")["compute"].max()
    counts = runs.groupby("run_id").size()
    candidates = list(alternatives) if alternatives is not None else list(fc.run_ids)
    for run in candidates:
        compare_at.setdefault(run, budgets.get(run, float(last[run])))
    finals = {run: run_draws(fc, run, compare_at[run])[:, 0] for run in candidates}
    typical_budget = float(compute_scale or np.median(list(budgets.values())))
    by_run = None
    if config.protect_top_percent is not None:  # evaluations by step, only when the option is on
        by_run = metrics_by_step(runs)
    in_flight = {}
    for run, budget in budgets.items():
        now_c = float(last[run])
        span = [now_c, max(budget, now_c)]
        both = run_draws(fc, run, span)
        curve = fc.sample_curves(span, run_id=run, kind="run", noise=False)
        rise = curve[:, 1] - curve[:, 0]
        in_flight[run] = {"at_budget": both[:, 1], "now": both[:, 0], "budget": budget, "compute_now": now_c,
                          "n_evals": int(counts[run]), "curve_gain": float(rise.mean()), "curve_rise": rise}
        if by_run is not None:
            in_flight[run]["protected"] = top_at_step(run, by_run, config.protect_top_percent)
    # a fit that did not converge: each stop is judged on each chain's draws alone as well
    chain_of_draw = None if fc.diagnostics().converged else fc.chain_of_draw
    return evaluate_in_turn(in_flight, finals, config, compute_scale=typical_budget, recent_stops=recent_stops,
                            unit=fc.compute_unit, chain_of_draw=chain_of_draw)


def noting_what_each_chain_says(rec: Recommendation, alone: list[Recommendation]) -> None:
    """Beside a stop decided on a fit that did not converge, what the rules say on each chain's draws alone.

    Fast advice fits are flagged nearly always (short chains, few evaluations), so the warning on a
    stop said nothing about whether the flag matters to it: where every chain alone stops the run
    too, the stop does not rest on how the chains mix; where they disagree, it does. The advice
    itself is the one the pooled draws give, unchanged. details gain by_chain (each chain's action,
    rule, value and threshold), chains_agree, and chains_say, the words the warnings append."""
    if len(alone) < 2:
        return
    rec.details["by_chain"] = [{"chain": i + 1, "action": a.action, "rule": a.rule, "value": a.value,
                                "threshold": a.threshold} for i, a in enumerate(alone)]
    rec.details["chains_agree"] = all(a.action == rec.action for a in alone)
    rec.details["chains_say"] = chains_say(alone)


def rests_on_an_unconverged_fit(rec: Recommendation) -> bool:
    """Whether `rec` is a stop decided on a fit that did not converge, which deserves a second look (a
    continue costs nothing). Not a stop that reads no forecast (budget_reached compares compute with the
    budget): `forecast watch` labelled those too, each line with the fit's problems and its chains' say."""
    return rec.stop and rec.details.get("converged") is False and rec.rule in RULES_ON_THE_FORECAST


def what_did_not_converge(details: Mapping) -> str:
    """The words after 'did not converge: ' in a warning on advice: the fit's problems, then what
    each chain alone advises where that is known (noting_what_each_chain_says)."""
    problems = "; ".join(details.get("convergence_problems") or []) or "see its diagnostics"
    return f"{problems}; {details['chains_say']}" if details.get("chains_say") else problems


def chains_say(alone: list[Recommendation]) -> str:
    """'each of its 2 chains alone says stop (chain 1: beats_best 0.012 < 0.1; chain 2: ...)', or
    'its 2 chains alone disagree (chain 1 stop: ...; chain 2 continue: ...), so this advice rests on how they mix'."""
    def what(i, a, with_action):
        said = f"chain {i + 1}" + (f" {a.action}" if with_action else "")
        if a.value is None or a.threshold is None:
            return f"{said}: {a.rule}"
        sign = "<" if a.value < a.threshold else ">="
        return f"{said}: {a.rule} {a.value:.3g} {sign} {a.threshold:g}"

    actions = {a.action for a in alone}
    if len(actions) == 1:
        parts = "; ".join(what(i, a, False) for i, a in enumerate(alone))
        return f"each of its {len(alone)} chains alone says {alone[0].action} ({parts})"
    parts = "; ".join(what(i, a, True) for i, a in enumerate(alone))
    return f"its {len(alone)} chains alone disagree ({parts}), so this advice rests on how they mix"


def noting_misshapen_runs(fc, recs: Mapping[str, Recommendation], flagged: list[dict] | None = None
                          ) -> Mapping[str, Recommendation]:
    """The recommendations of runs whose last third falls away from their fitted curve
    (forecast.shape_check) say so in their details: 'late_trend_z' (the test's number, for a program
    reading the advice, whatever the rule), and 'shape_note' (a sentence for the advice's line,
    shape_check.misshapen_run_note) where the advice rests on the run's forecast (RULES_ON_THE_FORECAST:
    not beside budget_reached, too_early or warmup, which no forecast decides). A recommendation whose rule compares the run
    with another (details 'alternative': P(beats best 'b-s1')) has 'alternative_late_trend_z' when THAT
    run is flagged, and, where the comparison stopped it (or would have: the continues held from such a
    stop), a clause in 'shape_note' (shape_check.with_the_compared_run): the bar it is held to is likely
    too high, so the stop may come too early. Not on an ordinary continue whose closest check is that
    comparison: a bar too high makes its P(beats best) too low, so the continue only stands firmer, and
    the clause read as a doubt about it. A stop on gain_per_compute (or held from one), whose bar is the
    best of all the other runs draw by draw, names the flagged runs that are that best in some draws (of the
    BEST_OF_OTHERS_KEPT most often best), with
    their share of the draws (shape_check.with_the_best_of_others; 'alternatives_late_trend_z': run -> z);
    a flagged run never that best leaves the bar as it is.
    The action, rule and message are unchanged: what decides is the rules', and this says only that
    a forecast they read is likely too high.
    flagged: the fit's misshapen_runs(), when already made for every run (the report's diagnostics);
    by default only the runs advised here and the runs they are compared with are tested (about 7 ms
    for 21 runs of a fast fit, beside 60-120 ms for a reweighted refit and 70 ms for recommend_runs),
    and those gain_per_compute stopped them on, since `forecast watch` refits after every evaluation. Returns `recs`."""
    from .shape_check import (
        misshapen_run_note,
        misshapen_runs,
        with_the_best_of_others,
        with_the_compared_run,
    )

    compared = {run: rec.details["alternative"] for run, rec in recs.items() if rec.details.get("alternative") is not None}
    # gain_per_compute names no alternative: its bar is the best of all the others, draw by draw
    bars = {run: check.get("best_of_others", {}) for run, rec in recs.items()
            if (check := _comparison_that_stopped(rec)) is not None and check["rule"] == "gain_per_compute"}
    if flagged is None:
        flagged = misshapen_runs(fc, runs=list(dict.fromkeys([*recs, *compared.values(),
                                                             *(other for shares in bars.values() for other in shares)])))
    z_of = {row["run_id"]: float(row["late_trend_z"]) for row in flagged}
    for run, rec in recs.items():
        note = None
        if run in z_of:
            rec.details["late_trend_z"] = z_of[run]
            if rec.rule in RULES_ON_THE_FORECAST:
                note = misshapen_run_note(z_of[run])
        if (other := compared.get(run)) in z_of:
            rec.details["alternative_late_trend_z"] = z_of[other]
            if stopped_on_the_comparison(rec):
                note = with_the_compared_run(note, other, z_of[other])
        if on_flagged := [(other, share, z_of[other]) for other, share in bars.get(run, {}).items() if other in z_of]:
            rec.details["alternatives_late_trend_z"] = {other: z for other, _, z in on_flagged}
            note = with_the_best_of_others(note, on_flagged)
        if note is not None:
            rec.details["shape_note"] = note
    return recs


def stopped_on_the_comparison(rec: Recommendation) -> bool:
    """Whether a comparison with other runs' forecasts stopped this run, or would have but for a guard
    (HELD_STOP_RULES); not an ordinary continue whose closest check is a comparison."""
    return (rec.stop and rec.rule in COMPARISON_RULES) or rec.rule in HELD_STOP_RULES


def _comparison_that_stopped(rec: Recommendation) -> dict | None:
    """The check of the comparison that stopped this run, or would have but for a guard (a held stop keeps the
    rule it was held from, or marks the check held_for_leader); None where none did (stopped_on_the_comparison)."""
    if not stopped_on_the_comparison(rec):
        return None
    checks = rec.details.get("checks", [])
    if rec.rule in ("leader", "top_at_step"):
        return next((check for check in checks if check.get("held_for_leader")), None)
    rule = rec.details.get("held_by_cap") or rec.details.get("held_as_runner_up") or rec.rule
    return next((check for check in checks if check["rule"] == rule), None)


def metrics_by_step(runs: pd.DataFrame) -> dict[str, pd.Series]:
    """Each run's metric in compute order, indexed by each evaluation's training step where every row gives one
    (the run format's `step`), else by its evaluation number (0, 1, ...). The tests at equal progress compare
    runs at one step: counted by evaluation number, a run evaluated half as often was set beside the others at
    twice its training (Optuna compares the values trials reported at the same step)."""
    steps = pd.to_numeric(runs["step"], errors="coerce") if "step" in runs else None
    by_step = steps is not None and bool(steps.notna().all())
    out = {}
    for run, rows in runs.groupby("run_id", sort=False):
        order = np.argsort(rows["compute"].to_numpy(dtype=float), kind="stable")
        index = steps.loc[rows.index].to_numpy(dtype=float)[order] if by_step else np.arange(len(rows))
        out[run] = pd.Series(rows["metric"].to_numpy(dtype=float)[order], index=index)
    return out


def values_at_latest_step(run: str, metrics_by_run: Mapping) -> tuple[float, np.ndarray, list[float]]:
    """(the step of `run`'s latest evaluation, its values so far, each other run's value at that same step,
    for the runs that have one there). `metrics_by_run`: metrics_by_step's Series, or arrays in compute order
    (indexed by evaluation number)."""
    own = _indexed_by_step(metrics_by_run[run])
    step = own.index[-1]
    others = []
    for other, values in metrics_by_run.items():
        values = _indexed_by_step(values)
        at_step = values[values.index == step]
        if other != run and len(at_step):
            others.append(float(at_step.iloc[-1]))
    return step, own.to_numpy(dtype=float), others


def _indexed_by_step(values) -> pd.Series:
    return values if isinstance(values, pd.Series) else pd.Series(np.asarray(values, dtype=float))


def top_at_step(run: str, metrics_by_run: Mapping, percent: float, *, n_startup: int = 5) -> str | None:
    """Why `run` is in the top `percent`% of the sweep at its current step, or None.

    The step is the run's latest evaluation's (metrics_by_step); the others are the values of the
    other runs at that step. This is Optuna's PercentilePruner test (forecast.backtest.
    median_should_stop) turned round: a run it would keep at `percent` is protected from the rules
    that compare it with other runs' forecasts. Their bar is one run's forecast at its budget; this
    one is where the field stands at equal progress, which no single over-high forecast can move.
    """
    from .backtest import median_should_stop  # backtest imports this module

    step, own, others = values_at_latest_step(run, metrics_by_run)
    if len(others) < max(n_startup, 1) or median_should_stop(own, others, n_startup=n_startup, percentile=percent):
        return None
    bar = float(np.percentile(others, 100.0 - percent))
    return f"best so far {own.max():.4f} >= {bar:.4f}, the top {percent:g}% of {len(others)} other runs at step {step:g}"


def sweep_leader(in_flight_now: Mapping[str, np.ndarray], ended: Mapping[str, np.ndarray]) -> str | None:
    """The run in flight with the highest expected metric where it stands now, if it is at least as
    high as every ended (finished or stopped) run where it ended; None when an ended run is ahead."""
    if not in_flight_now:
        return None
    leader = max(in_flight_now, key=lambda r: float(_draws(in_flight_now[r]).mean()))
    best_ended = max((float(_draws(d).mean()) for d in ended.values()), default=-np.inf)
    return leader if float(_draws(in_flight_now[leader]).mean()) >= best_ended else None


def evaluate_in_turn(
    in_flight: Mapping[str, dict],
    finals: Mapping[str, np.ndarray],
    config: EarlyStopConfig | None = None,
    *,
    compute_scale: float | None = None,
    recent_stops: int = 0,
    unit: str = UNSPECIFIED_UNIT,
    chain_of_draw: np.ndarray | None = None,
) -> dict[str, Recommendation]:
    """evaluate_rules for every run in flight, committing stops one at a time, weakest run first.

    in_flight: run -> {at_budget, now (draws), budget, compute_now, n_evals, curve_gain, protected;
        curve_rise: the curve's rise draw by draw, whose mean is curve_gain}.
    finals: run -> draws of each candidate alternative's final metric (runs in flight included).
    unit: what compute is counted in, for the messages (evaluate_rules).
    chain_of_draw: the sampler's chain behind each draw, for a fit that did not converge: each stop,
        when it is committed, is judged on each chain's draws alone as well, against the same
        alternatives (noting_what_each_chain_says). None: not done.

    A stopped run stays an alternative only where it stands now (its `now` draws), and the runs
    still undecided are judged again against that. Judged all at once, every run of a close sweep
    is compared with "the best of the others" while those others are being stopped in the same
    breath: in a replayed one-seed trainer sweep that stopped six of seven runs at one check and
    left a run that ended 0.06 below the best. With config.keep_runner_up, the last run that such a
    comparison would stop beside an unfinished bar goes on instead (runner_up_bar).
    """
    config = checked_rules(config)
    finals = dict(finals)
    leader = sweep_leader({run: r["now"] for run, r in in_flight.items()},
                          {run: d for run, d in finals.items() if run not in in_flight})

    def recommend(run, keep=None):  # keep: the draws to judge on (one chain's), all by default
        r = in_flight[run]
        cut = (lambda d: d) if keep is None else (lambda d: _draws(d)[keep])
        curve_gain = r.get("curve_gain")
        if keep is not None and "curve_rise" in r:
            curve_gain = float(r["curve_rise"][keep].mean())
        return evaluate_rules(
            run, cut(r["at_budget"]), cut(r["now"]), {o: cut(d) for o, d in finals.items() if o != run}, config,
            budget=r["budget"], compute_now=r["compute_now"], n_evals=r.get("n_evals"),
            curve_gain=curve_gain, compute_scale=compute_scale, leading=run == leader,
            protected=r.get("protected"), unit=unit,
        )

    out = {run: recommend(run) for run in in_flight}
    committed: set = set()
    stopped: set = set()
    share = config.max_stop_share
    # share 1 is no cap: every run in flight may go, whatever went within the window before
    cap = max(1, int(share * len(in_flight))) - recent_stops if share is not None and share < 1 else None
    n_compared = 0
    while True:
        fired = [run for run, rec in out.items() if rec.stop and run not in committed]
        if not fired:
            return {run: _noting_a_far_bar(rec, in_flight, config, compute_scale) for run, rec in out.items()}
        weakest = min(fired, key=lambda r: float(_draws(in_flight[r]["at_budget"]).mean()))
        committed.add(weakest)
        if out[weakest].rule in COMPARISON_RULES and (own := _stop_on_its_own_rule(out[weakest])) is not None:
            # the guards below hold stops on other runs' forecasts, and the cap counts those; a run
            # that fails its own test too (it cannot reach the target, its curve has flattened) is
            # stopped on that, held by neither guard and not counted
            out[weakest] = own
        if out[weakest].rule in COMPARISON_RULES:
            if cap is not None and n_compared >= cap:
                out[weakest] = _held_by_cap(out[weakest], n_compared, len(in_flight), recent_stops, config.stop_cap_window)
                continue
            bar = runner_up_bar(weakest, in_flight, finals, out, stopped) if config.keep_runner_up else None
            if bar is not None:
                out[weakest] = _held_as_runner_up(out[weakest], bar)
                continue
            n_compared += 1
        stopped.add(weakest)
        if chain_of_draw is not None:
            noting_what_each_chain_says(out[weakest], [recommend(weakest, chain_of_draw == chain)
                                                       for chain in np.unique(chain_of_draw)])
        if weakest in finals:
            finals[weakest] = in_flight[weakest]["now"]
        out.update({run: recommend(run) for run in in_flight if run not in committed})


def _noting_a_far_bar(rec: Recommendation, in_flight: Mapping[str, dict], config: EarlyStopConfig,
                      compute_scale: float | None) -> Recommendation:
    """A beats_best stop whose bar is a run in flight too far from its budget for the rules to judge
    it (max_extrapolation) says so: the bar is that run's forecast from there. The stop stands:
    that forecast's spread is in the probability, and such forecasts have run low, not high
    (README, the model), but a person checking the stop should see what it rests on."""
    bar = rec.details.get("alternative")
    if not (rec.stop and rec.rule == "beats_best" and bar in in_flight and config.max_extrapolation is not None):
        return rec
    r = in_flight[bar]
    held = min(r["budget"], compute_scale or r["budget"]) / r["compute_now"]  # as evaluate_rules' guard
    if held <= config.max_extrapolation:
        return rec
    note = f"; '{bar}' is {_shown_above(held, config.max_extrapolation)}x short of its budget, too early for its own stop rules"
    return replace(rec, message=rec.message + note, details={**rec.details, "alternative_too_early": float(held)})


def recent_comparison_stops(history, compute_now: float, window: float | None) -> int:
    """Runs stopped on comparisons at checks within `window` times of compute before `compute_now`:
    history holds (compute at the check, runs stopped on comparisons there). A check exactly
    `window` times earlier no longer counts, so checks that far apart count per check."""
    if window is None:
        return 0
    return sum(n for compute, n in history if compute_now < compute * window * (1 - 1e-9))


def count_comparison_stops(recs: Mapping[str, Recommendation]) -> int:
    """How many of these recommendations stop a run on a comparison with other runs (the cap's count)."""
    return sum(rec.stop and rec.rule in COMPARISON_RULES for rec in recs.values())


def runner_up_bar(run: str, in_flight: Mapping[str, dict], finals: Mapping[str, np.ndarray],
                  recs: Mapping[str, Recommendation], stopped: set) -> str | None:
    """The run in flight that `run` is compared with, if `run` is its runner-up; else None.

    The bar is the alternative with the highest expected final. While it is in flight its final is
    a forecast, and `run` is its runner-up when no other run besides the bar would go on: every
    other run in flight is stopped or being stopped, and `run` has the highest expected final
    among them. Stopping it would stake the sweep on the bar's forecast with nothing to fall back
    on; in held-out trainer sweeps the bar was a short run that fell back in its last evaluations
    (0.44 to a final of 0.36) after every run above it had been stopped against it.
    """
    others = {o: float(_draws(d).mean()) for o, d in finals.items() if o != run}
    if not others:
        return None
    bar = max(others, key=others.get)
    if bar not in in_flight or bar in stopped:
        return None
    rest = [o for o in in_flight if o not in (run, bar) and o not in stopped]
    if any(not recs[o].stop for o in rest):
        return None  # another run goes on beside the bar
    expected = float(_draws(in_flight[run]["at_budget"]).mean())
    if any(float(_draws(in_flight[o]["at_budget"]).mean()) > expected for o in rest):
        return None  # a stronger run is the runner-up
    return bar


def _held(rec: Recommendation, rule: str, why_not: str, detail: dict) -> Recommendation:
    """A comparison stop turned into a continue under `rule`, saying what would have stopped it."""
    why = rec.message.removeprefix("stop: ")
    return Recommendation(
        CONTINUE, rule, f"continue: {why} would stop it, but {why_not}",
        run_id=rec.run_id, probability=rec.probability, value=rec.value, threshold=rec.threshold,
        details={**rec.details, **detail},
    )


def _stop_on_its_own_rule(rec: Recommendation) -> Recommendation | None:
    """A comparison stop restated as a stop by the first rule that judges the run on its own
    (reach_target, saturated) when that fired too; None when only comparisons fired."""
    own = [c for c in rec.details.get("checks", []) if c.get("fired") and c["rule"] not in COMPARISON_RULES]
    if not own:
        return None
    check = own[0]
    details = {k: v for k, v in rec.details.items() if k != "alternative"}  # the run it was compared with no longer decides
    return Recommendation(
        STOP, check["rule"], f"stop: {check['text']}", run_id=rec.run_id,
        probability=check["value"] if check["probability"] else None, value=check["value"],
        threshold=check["threshold"], details=details,
    )


def _held_as_runner_up(rec: Recommendation, bar: str) -> Recommendation:
    """A comparison stop turned into a continue: the run is the runner-up to an unfinished bar."""
    return _held(rec, "runner_up", f"'{bar}' is still in flight and this is the best run left beside it; it goes on "
                 f"until '{bar}' has a final, not a forecast (keep_runner_up)", {"held_as_runner_up": rec.rule, "bar": bar})


def _held_by_cap(rec: Recommendation, n_now: int, n_in_flight: int, recent: int = 0, window: float | None = None) -> Recommendation:
    """A comparison stop turned into a continue: max_stop_share runs were already stopped on
    comparisons, `n_now` at this check and `recent` at checks within `window` times of compute before it."""
    earlier = f" and {recent} in the last {window:g}x of compute" if recent else ""
    return _held(rec, "stop_cap", f"{n_now} of {n_in_flight} runs in flight were already stopped on comparisons at "
                 f"this check{earlier} (max_stop_share); judged again at the next", {"held_by_cap": rec.rule})


def advice_pad(n_rows: int) -> int:
    """Rows to pad an advice fit of `n_rows` to: 256, then 1.5 times the last size (a multiple of 64).

    Every padded size is a model structure of its own, compiled once per process (about 25 s on two
    cores, about 100 MB held for the rest of the process). Advice fits come from long-lived
    processes whose table only grows (`forecast watch` over a sweep, a trainer asking every few
    evaluations), so a fixed bucket compiled again every 64 or 256 rows, without end: 40 models by
    10,000 rows. Growing geometrically, the sizes up to 1,000 rows are as few as with 256-row
    buckets (4), 10,000 rows take 10, and the padding is at most half the rows (sampling time
    grows with the padded length)."""
    size = 256
    while size < n_rows:
        size = int(np.ceil(size * 1.5 / 64) * 64)
    return size


def checked_forecaster_kwargs(forecaster_kwargs) -> None:
    """Refuse settings the advisor's fit would refuse (a misspelt name, a value of the wrong kind) by
    making the forecaster as fit_for_advice makes it, without fitting: else the mistake surfaced at the
    first ask, a traceback out of trainer.train() (or a failed Optuna trial) after that compute was spent."""
    from .forecaster import ScalingForecaster

    if not isinstance(forecaster_kwargs, dict):
        raise TypeError(f"forecaster_kwargs must be a dict of ScalingForecaster's settings, got {forecaster_kwargs!r}")
    try:
        ScalingForecaster(**{"mode": "fast", "parametrization": "noncentered", **forecaster_kwargs})
    except (TypeError, ValueError) as err:
        raise type(err)(f"forecaster_kwargs {forecaster_kwargs!r}: {err}") from None


def check_random_seed(random_seed, name: str = "random_seed") -> None:
    """The seed of a front door's advice fits (ForecastCallback, ForecastPruner, watch(), BacktestConfig):
    an integer >= 0, or None (unseeded: seed_of_fit), refused where it is given, in the words of
    ScalingForecaster.fit's own check, not at the first fit after compute was spent."""
    if random_seed is not None and (isinstance(random_seed, (bool, np.bool_)) or not isinstance(random_seed, numbers.Integral)
                                    or random_seed < 0):
        raise ValueError(f"{name} must be an integer >= 0 or None, got {random_seed!r}")


def seed_of_fit(random_seed, n: int):
    """The seed of a front door's n-th advice fit: random_seed + n, so that each fit draws afresh and a
    rerun draws the same; None, which BacktestConfig, watch() and ForecastPruner take, leaves every fit
    unseeded (their first fit was "unsupported operand type(s) for +: 'NoneType' and 'int'")."""
    return None if random_seed is None else random_seed + n


def fit_for_advice(table: pd.DataFrame, *, random_seed=0, pad_to: int | None = None, previous=None,
                   horizon: float | None = None, threaded: bool = False, **forecaster_kwargs):
    """A fast refit for advice. Non-centred always, so that the compiled model does not switch
    parametrisation (and recompile) when runs pass 8 evaluations. With `previous` (the forecaster
    of the last advice) this is previous.refit(table): a few new evaluations of the same runs are
    absorbed by reweighting its posterior instead of sampling again. horizon: the largest planned
    budget (ScalingForecaster.fit). The fit's warnings are not shown: the advice says the fit's
    flags itself, in its message: this thread's alone are dropped, whatever threads run beside it
    (Optuna's n_jobs, a trainer's), whose warnings stay theirs (forecast.thread_warnings). threaded:
    kept for callers that pass it; it changes nothing since every advice fit drops its thread's alone.
    Returns (forecaster, converged)."""
    from .forecaster import (
        CONVERGENCE_SAID_BY_CALLER,
        DATA_WARNINGS_SAID_BY_CALLER,
        ScalingForecaster,
    )

    kwargs = {"mode": "fast", "parametrization": "noncentered", **forecaster_kwargs}
    said_by_caller = CONVERGENCE_SAID_BY_CALLER.set(True)  # no ConvergenceWarning, which a filter 'error' would raise
    data_said_by_caller = DATA_WARNINGS_SAID_BY_CALLER.set(True)  # nor the data's warnings, said again after their check
    try:
        with this_threads_warnings_dropped():
            if previous is not None:
                fc = previous.refit(table, random_seed=random_seed, progress=False, pad_to=pad_to, horizon=horizon)
            else:
                fc = ScalingForecaster(**kwargs).fit(table, random_seed=random_seed, progress=False, pad_to=pad_to,
                                                     horizon=horizon)
    finally:
        DATA_WARNINGS_SAID_BY_CALLER.reset(data_said_by_caller)
        CONVERGENCE_SAID_BY_CALLER.reset(said_by_caller)
    # read from the fit, not from the warning: catch_warnings is not thread-safe, so under Optuna's
    # n_jobs > 1 another trial's advice fit could take this one's ConvergenceWarning
    return fc, fc.diagnostics().converged


# ----------------------------------------------------------------------------- trainer entry point

# The last advice fit of each live run in this process: the trainer asks every few evaluations,
# and the next fit starts from this one (ScalingForecaster.refit).
_ADVICE_FITS: dict = {}


REFERENCE_PREFIX = "ref:"


def reference_rows(reference: pd.DataFrame, live: pd.DataFrame) -> pd.DataFrame:
    """The reference table, kept apart from the live runs. The trainer names runs recipe-s{seed},
    so an earlier sweep's runs share names with this one's: a reference run named like a live
    run is the same run when the evaluations both hold (at the same computes) agree, and is left
    out for the live log (the reference is this sweep's own folder or table); otherwise it is
    another run and is renamed 'ref:NAME' (one run of two logs would be judged as finished, or
    refused as duplicated rows)."""
    if reference.empty or live.empty:
        return reference
    # named as validate_runs names them: a raw table's float run 3.0 is the live run '3' (formatting.name_of)
    ids = reference["run_id"].map(name_of).astype(str)
    live_ids = live["run_id"].map(name_of).astype(str)
    same, other = set(), set()
    for run in set(ids) & set(live_ids):
        mine = live.loc[live_ids == run, ["compute", "metric"]].astype(float)
        theirs = reference.loc[ids == run, ["compute", "metric"]].astype(float)
        both = mine.merge(theirs, on="compute", suffixes=("_live", "_ref"))
        agree = len(both) > 0 and np.allclose(both["metric_live"], both["metric_ref"])
        (same if agree else other).add(run)
    kept = reference[~ids.isin(same)].copy()
    kept_ids = ids[~ids.isin(same)]
    kept["run_id"] = kept_ids.where(~kept_ids.isin(other), REFERENCE_PREFIX + kept_ids)
    return kept


def _reference_table(reference_path, live: pd.DataFrame) -> pd.DataFrame | None:
    """Reference runs from a run table or folder, kept apart from the live run as `forecast watch`
    keeps them (reference_rows: a sweep folder given as reference usually holds this run's own log,
    an earlier sweep a run of the same name), and without runs too short to fit."""
    if reference_path is None or str(reference_path) == "":
        return None
    from .data import read_table

    table = read_table(Path(reference_path))
    if "run_id" in table:
        table = reference_rows(table, live)
        sizes = table.groupby("run_id")["run_id"].transform("size")
        table = table[sizes >= 2]
    return table if len(table) else None


def trainer_advice(
    evals: pd.DataFrame,
    reference_path=None,
    planned_compute: float = 0.0,
    *,
    target: float | None = None,
    config: EarlyStopConfig | None = None,
    random_seed: int = 0,
    forecaster_kwargs: dict | None = None,
) -> Recommendation:
    """Continue or stop for the run whose evaluation rows so far are `evals` (run format).

    reference_path: a run table or folder of other runs (finished or in flight) to compare with;
    None: only the target and saturation rules can apply. Reference runs are judged at the same
    planned budget, i.e. "would that run be better at this budget".
    planned_compute: the compute this run is planned to reach; 0 or less gives "continue" (rule
    no_budget), as there is nothing to forecast to. target: the metric the target rule asks for
    (config's target otherwise). config: the stop rules (EarlyStopConfig or a dict of its fields).
    random_seed: the advice fit's seed.
    forecaster_kwargs: passed to the fit (e.g. {"priors": Priors(b_mu=0.5)}); the trainer's
    advisor_priors.
    """
    from .data import validate_runs

    config = checked_rules(config)
    if target is not None:
        config = EarlyStopConfig(**{**config.to_dict(), "target": target})
    evals = pd.DataFrame(evals)
    # named as validate_runs names it in the fit: a float run_id 3.0 is '3' (formatting.name_of)
    run_id = name_of(evals["run_id"].iloc[-1]) if len(evals) and "run_id" in evals else "run"
    n = len(evals)
    if n < max(config.min_evals, 2):
        return Recommendation(
            CONTINUE, "warmup", f"continue: {n} evaluation(s) so far; rules start at {max(config.min_evals, 2)}",
            run_id=run_id, value=float(n), threshold=float(max(config.min_evals, 2)),
        )
    if not planned_compute or planned_compute <= 0:
        return Recommendation(
            CONTINUE, "no_budget", "continue: no planned budget given, so nothing to forecast to",
            run_id=run_id,
        )
    from .data import RunDataError, data_warnings_of
    from .shape_check import can_test

    # the data's warnings (a reference recipe named like this run's at another setting, pooled with it
    # as seeds) go into the advice, where the trainer says them and stopped.json keeps them
    def with_the_reference(live):
        reference = _reference_table(reference_path, live)
        return live if reference is None else validate_runs(pd.concat([reference, live], ignore_index=True))

    live, data_warnings = data_warnings_of(validate_runs, evals)  # a bad row of the run's own is not the reference's
    try:
        table, reference_warnings = data_warnings_of(with_the_reference, live)
        data_warnings = list(dict.fromkeys([*data_warnings, *reference_warnings]))
    except RunDataError as err:
        # a misconfigured reference must not kill a training run: say so, and keep training
        return Recommendation(
            CONTINUE, "advisor_error", f"continue: reference runs unusable ({err})", run_id=run_id,
            details={"error": str(err)},
        )
    forecaster_kwargs = forecaster_kwargs or {}
    # a refit keeps the settings of the fit it starts from, so the last fit is reused only for the
    # same run under the same settings (a process may train the same run id again with others)
    key = (run_id, repr(sorted(forecaster_kwargs.items())))
    fc, converged = fit_for_advice(table, random_seed=random_seed, pad_to=advice_pad(len(table)), previous=_ADVICE_FITS.get(key),
                                   **forecaster_kwargs)
    _ADVICE_FITS[key] = fc
    others = [r for r in fc.run_ids if r != run_id]
    compare_at = {r: float(planned_compute) for r in others}
    rec = recommend_runs(fc, {run_id: float(planned_compute)}, config, compare_at=compare_at, alternatives=others)[run_id]
    rec.details["converged"] = converged
    if not converged:  # what failed (R-hat, ESS, divergences), for the trainer's line and stopped.json
        rec.details["convergence_problems"] = fc.diagnostics().problems()
    rec.details["n_reference_runs"] = len(others)
    if can_test(fc):  # a run whose end falls away from its curve says so beside its advice, as forecast watch does
        noting_misshapen_runs(fc, {run_id: rec})
    if data_warnings:
        rec.details["data_warnings"] = data_warnings
    for text in data_warnings:  # for a caller of this function; the trainer says them in its own words
        warnings.warn(text, UserWarning, stacklevel=2)
    return rec
