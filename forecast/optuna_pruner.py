"""An Optuna pruner built on the forecaster: a drop-in for MedianPruner with readable reasons.

    import optuna
    from forecast.optuna_pruner import ForecastPruner

    study = optuna.create_study(direction="maximize", pruner=ForecastPruner(max_step=2000))
    # in the objective, as with any pruner:
    #     trial.report(pass_rate, step=compute_so_far)
    #     if trial.should_prune():
    #         raise optuna.TrialPruned()

What it does at each check: fit the ScaleRL model to this trial's reported values together with
the best completed trial's (so the fit borrows noise and shape from a whole curve), forecast this
trial at `max_step`, and prune when P(it beats the best completed trial by the margin) < the
threshold, or when the gain it is expected to add over that trial, per budget of compute left,
is below min_gain_per_compute (forecast.early_stop's beats_best and gain_per_compute rules and
defaults; plus the target rule when a target is set). A trial that is ahead of the best completed
trial where it stands now is not pruned by those two comparisons (keep_leader). The first trial
has nothing to compare with and is never pruned (unless a target is set: the target rule judges
it on its own). Unlike MedianPruner it compares forecasts at the planned budget, not values at the
same step, so a slow starter with a higher ceiling survives.

Steps are compute (`step_to_compute` maps other step units to compute; steps <= 0 are ignored,
the curve needs compute > 0). Optuna stores a reported step as an integer, so report compute in
whole units (or report a step count and map it with `step_to_compute`). Unlike MedianPruner's, `n_warmup_steps` and `interval_steps` count
reports, not steps (a trial that reaches max_step inside the warm-up is warned about once);
`n_startup_trials` is MedianPruner's (no pruning until that many trials completed; default 0). Values
must be rates in [0, 1]; for a minimised error rate the pruner works on 1 - value (so the numbers
in `advice[...].details`, e.g. expected_at_budget, are in 1 - value units there, and each message
says so). A minimising study whose best trial's values rose (a pass rate under Optuna's
default direction, 'minimize') is warned about once. A `config.target` is in the study's own units: for a minimised error, the error to get
down to (target=0.3: an error of 0.3, a pass rate of 0.7 on the pruner's side). Why each trial
was (or was not) pruned is kept in `pruner.advice` (trial number -> Recommendation), logged, and stored
in the trial's user attributes (`forecast_pruner_action`, `_rule`, `_reason`, `_converged`), so it
outlives the process in the study's storage and shows in `study.trials_dataframe()`. Under
`study.optimize(n_jobs=N)` (threads) checks run one at a time in the process, so a trial's
`should_prune` may wait for another trial's check (a fit, about a second) to end. A check's fit
shows no warnings of its own (the advice says its convergence); what other trials' code warns
meanwhile is shown as ever, but for a warning that falls in the few milliseconds the fit checks its
table (validate_runs records every thread's UserWarnings there: Python 3.11's warning state is the
process's, one for all threads) or in the model's compile (the first check, once per model size).

The saturation rule is off by default here: Optuna never makes a pruned trial the study's best
trial, so pruning a leader because it has flattened would throw the leader away.
"""

from __future__ import annotations

import dataclasses
import logging
import numbers
import threading
import warnings
from collections.abc import Callable

import numpy as np
import optuna
import pandas as pd
from optuna.pruners import BasePruner
from optuna.study import StudyDirection
from optuna.trial import TrialState

from .data import N_EVAL_RULE, is_usable_n_eval
from .early_stop import (
    CONTINUE,
    EarlyStopConfig,
    Recommendation,
    check_random_seed,
    checked_forecaster_kwargs,
    checked_rules,
    fit_for_advice,
    recommend_runs,
    seed_of_fit,
    what_did_not_converge,
)
from .inference import is_whole_number

__all__ = ["ForecastPruner", "trial_table"]

logger = logging.getLogger(__name__)

# trial.user_attrs keys holding the latest advice: forecast_pruner_action, _rule, _reason, _converged
USER_ATTR_PREFIX = "forecast_pruner_"

# A best trial of a minimising study whose values rose by more than this (a rate's evaluation noise is a
# few hundredths) was minimising a metric that rises: a pass rate, with Optuna's default direction.
RISE_OF_A_MINIMISED_METRIC = 0.05

# One check at a time in this process. Optuna's n_jobs runs trials in threads, and a check's fit
# may enter warnings.catch_warnings (the libraries under the fit: PyMC's, ArviZ's), which swaps
# the process's global warning state: two fits overlapping in threads restored each other's state
# out of order and left the process recording every later warning into a list nobody reads (a study
# with n_jobs=2 silenced all warnings after it, this pruner's own included). Module-wide, not per
# pruner, since two studies' pruners in two threads share that state too. The fit's own warnings
# are dropped in its thread alone (fit_for_advice, forecast.thread_warnings), so other trials' code is heard.
_CHECK_LOCK = threading.RLock()  # re-entrant: a pruner that wraps this one in the same thread does not deadlock


def trial_table(trial, *, minimize: bool, step_to_compute: Callable[[float], float], n_eval: int | None) -> pd.DataFrame:
    """A trial's intermediate values as a run table (one run, its own recipe)."""
    steps = sorted(trial.intermediate_values)
    rows = []
    for step in steps:
        value = float(trial.intermediate_values[step])
        compute = float(step_to_compute(step))
        if compute <= 0 or not np.isfinite(value):
            continue
        metric = 1.0 - value if minimize else value
        if not 0.0 <= metric <= 1.0:
            raise ValueError(
                f"ForecastPruner needs rates in [0, 1]; trial {trial.number} reported {value!r} at step {step}"
            )
        row = {"run_id": f"trial-{trial.number}", "recipe": f"trial-{trial.number}", "compute": compute, "metric": metric}
        if n_eval:
            row["n_eval"] = n_eval
        rows.append(row)
    return pd.DataFrame(rows)


class ForecastPruner(BasePruner):
    """Prune a trial when the forecaster says it will not beat the best completed trial.

    Parameters
    ----------
    max_step : the step (compute) every trial is planned to reach; forecasts are made there. One
        for the study: a trial planned to end earlier is judged at a budget it will not reach, so
        it can be kept where its own end would prune it (studies of unequal lengths: the step the
        trials are to be compared at).
    config : EarlyStopConfig; default: EarlyStopConfig's defaults with the saturation rule off.
    n_warmup_steps : reports a trial needs before it can be pruned (the curve must show a trend);
        default and least value config.min_evals (4): a smaller value is raised to it, with a warning.
    interval_steps : check again once this many reports have come since the trial's last check (each
        check is a refit, about a second). Counted from the last check, not on a grid of report counts,
        so a caller that asks only now and then (optuna.pruners.PatientPruner, which asks only after
        `patience` reports without improvement; should_prune every few reports) still gets its checks.
    A trial that has reported a step at or past max_step is done: it is not pruned after that,
    even if it reports smaller steps later.
    step_to_compute : maps a reported step to compute (default: the step is compute).
    n_eval : graded samples behind each value, if known (enables the binomial noise term).
    random_seed : seed of the advice fits (None: unseeded).
    forecaster_kwargs : passed to each advice fit's ScalingForecaster (e.g. {"priors": Priors(b_mu=0.5)});
        what ScalingForecaster refuses is refused here.
    n_startup_trials : no trial is pruned until this many trials have completed, as MedianPruner's
        argument of that name (default 0 here: one completed trial is enough to compare with).
    """

    def __init__(
        self,
        max_step: float,
        *,
        config: EarlyStopConfig | None = None,
        n_warmup_steps: int | None = None,
        interval_steps: int = 1,
        step_to_compute: Callable[[float], float] | None = None,
        n_eval: int | None = None,
        random_seed: int = 0,
        forecaster_kwargs: dict | None = None,
        n_startup_trials: int = 0,
    ):
        # nan or inf passed here and failed every check after the warm-up, fit and all (the trial failed)
        if isinstance(max_step, bool) or not isinstance(max_step, numbers.Real) or not (np.isfinite(max_step) and max_step > 0):
            raise ValueError(f"max_step must be a finite number > 0, got {max_step!r}")
        if not (is_whole_number(n_startup_trials) and n_startup_trials >= 0):  # 1.5 was read as 1
            raise ValueError(f"n_startup_trials must be >= 0 (a whole number), got {n_startup_trials!r}")
        # each was taken and failed the study's first check after a warm-up, its trial FAIL, a completed
        # trial's compute spent first ('str' object is not callable; mode must be 'nuts' or 'fast')
        if step_to_compute is not None and not callable(step_to_compute):
            raise TypeError(f"step_to_compute must be a function of a trial's step, got {step_to_compute!r}")
        if forecaster_kwargs is not None:
            checked_forecaster_kwargs(forecaster_kwargs)
        check_random_seed(random_seed)
        # refused as Optuna's MedianPruner refuses them, instead of read as something else in silence
        if n_warmup_steps is not None and not (is_whole_number(n_warmup_steps) and n_warmup_steps >= 0):
            raise ValueError(f"n_warmup_steps must be an integer >= 0, got {n_warmup_steps!r}")
        if not (is_whole_number(interval_steps) and interval_steps >= 1):
            raise ValueError(f"interval_steps must be an integer >= 1, got {interval_steps!r}")
        # else the first check after a warm-up raised RunDataError blaming the reference trial's n_eval column
        # 0 is taken as not known, as it always was (the trainer's settings say it so)
        if n_eval is not None and not (is_usable_n_eval(n_eval) or (is_whole_number(n_eval) and n_eval == 0)):
            raise ValueError(f"n_eval must be {N_EVAL_RULE}, or None; got {n_eval!r}")
        self.n_startup_trials = int(n_startup_trials)
        self.max_step = max_step
        self.config = checked_rules(config, EarlyStopConfig(saturation_epsilon=None))
        floor = max(self.config.min_evals, 2)
        if n_warmup_steps is not None and n_warmup_steps < floor:
            warnings.warn(f"ForecastPruner: n_warmup_steps={n_warmup_steps} is raised to {floor}: the stop rules "
                          f"judge a curve from min_evals={self.config.min_evals} reports on", UserWarning, stacklevel=2)
        self.n_warmup_steps = max(int(n_warmup_steps or 0), floor)
        self.interval_steps = int(interval_steps)
        self.step_to_compute = step_to_compute or float
        self.n_eval = int(n_eval) if n_eval else None  # 0: not known, as the trainer's settings say it
        self.random_seed = random_seed
        self.forecaster_kwargs = forecaster_kwargs or {}
        self.advice: dict[int, Recommendation] = {}
        self.n_fits = 0
        self._previous = {}  # trial number -> its last fit, refitted at its next report
        self._last_check: dict[int, tuple[int, bool]] = {}  # trial number -> (its reports then, the answer)
        self._warned_max_step = False
        self._warned_warmup = False
        self._warned_direction = False
        self._not_rates: set[int] = set()  # completed trials whose reports are not rates, warned about once
        self._copied_reasons_replaced: set[int] = set()  # retried trials whose warm-up reason this pruner writes

    def _usable_reports(self, trial) -> int:
        """How many of a trial's reports a fit can use: compute > 0 and a finite value (trial_table's
        rows); 0 when any is not a rate in [0, 1] (a trial reported by another objective or added by
        hand), which would fail every later check as a reference instead of the trial it is."""
        usable = [value for step, value in trial.intermediate_values.items()
                  if value is not None and np.isfinite(value) and float(self.step_to_compute(step)) > 0]
        if any(not 0.0 <= value <= 1.0 for value in usable):
            if trial.number not in self._not_rates:
                self._not_rates.add(trial.number)
                warnings.warn(f"ForecastPruner: completed trial {trial.number} reported values outside [0, 1]; it is "
                              "not used as the reference (the pruner compares rates)", UserWarning, stacklevel=5)
            return 0
        return len(usable)

    def _best_completed(self, study):
        complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.value is not None]
        # a curve needs two points: a trial whose other reports were at step 0 or NaN cannot be a reference
        # (its one row would make every later check's fit refuse the table, failing the trial being checked)
        complete = [t for t in complete if self._usable_reports(t) >= 2]
        if not complete:
            return None
        pick = min if study.direction == StudyDirection.MINIMIZE else max
        best = pick(complete, key=lambda t: t.value)
        if study.direction == StudyDirection.MINIMIZE:
            self._warn_if_minimising_a_rising_metric(best)
        return best

    def _warn_if_minimising_a_rising_metric(self, best) -> None:
        """Once: Optuna's default direction is 'minimize', so a study made without direction='maximize'
        minimises a pass rate, and the pruner (which then works on 1 - value) keeps the trials that
        climb least and prunes the ones that climb most, each message saying only '(in 1 - value: the
        study minimises)'. The best trial of a study that really minimises an error has an error that
        fell; one whose reported values rose by more than noise is a pass rate minimised by mistake."""
        if self._warned_direction:
            return
        on_curve = sorted((step, value) for step, value in best.intermediate_values.items()
                          if np.isfinite(value) and float(self.step_to_compute(step)) > 0)
        (first_step, first), (last_step, last) = on_curve[0], on_curve[-1]
        if last - first <= RISE_OF_A_MINIMISED_METRIC:
            return
        self._warned_direction = True
        warnings.warn(f"ForecastPruner: the study minimises, yet its best completed trial {best.number} reported "
                      f"values that rose from {first:g} (step {first_step:g}) to {last:g} (step {last_step:g}); a pass "
                      "rate, which rises, needs optuna.create_study(direction='maximize') (Optuna's default is "
                      "'minimize'): minimised, the trials that climb most are the ones pruned", UserWarning, stacklevel=6)

    def _warn_if_warmup_outlasts_trial(self, trial, n_reports: int) -> None:
        """Warn once when a trial reaches max_step still inside the warm-up: n_warmup_steps counts reports,
        where MedianPruner's counts steps, so MedianPruner's value (say 1000 training steps) would mean
        1000 reports here and the pruner would never prune, in silence."""
        if self._warned_warmup or not trial.intermediate_values:
            return
        budget = float(self.step_to_compute(self.max_step))
        if float(self.step_to_compute(max(trial.intermediate_values))) < budget:
            return
        on_curve = [c for c in map(float, map(self.step_to_compute, trial.intermediate_values)) if c > 0]
        if on_curve and min(on_curve) >= budget:  # as prune() reads it: compute 0 is not on the curve
            self._warn_steps_in_another_unit(trial, budget)  # the cause, not the warm-up
            return
        self._warned_warmup = True
        warnings.warn(f"ForecastPruner: trial {trial.number} reached max_step after {n_reports} report(s), fewer than "
                      f"n_warmup_steps={self.n_warmup_steps}, so it could never be pruned; n_warmup_steps counts "
                      "reports (unlike MedianPruner's, which is a step)", UserWarning, stacklevel=4)

    def _warn_steps_in_another_unit(self, trial, budget: float) -> None:
        """Once: every report at or past max_step from the first, a step unit mix-up; the pruner would never prune."""
        if self._warned_max_step:
            return
        self._warned_max_step = True
        warnings.warn(f"ForecastPruner: trial {trial.number} reported its first steps at or past max_step "
                      f"({budget:g} compute), so it can never be pruned; max_step should be the step (in the "
                      "unit trial.report uses, or mapped by step_to_compute) trials are planned to reach",
                      UserWarning, stacklevel=5)

    def _keep(self, study, trial, rec: Recommendation) -> None:
        """Keep the advice in `pruner.advice` and in the trial's user attributes (USER_ATTR_PREFIX), which
        outlive this process: a study in a database, `study.trials_dataframe()` and optuna-dashboard
        show why a trial was pruned long after `pruner.advice` is gone. Optuna hands a pruner a
        FrozenTrial, so the attributes go through the study's storage, as Optuna's own
        SuccessiveHalvingPruner stores its rungs."""
        self.advice[trial.number] = rec
        if trial.state != TrialState.RUNNING:  # a finished trial cannot be written to (prune() called by hand)
            return
        # converged is None where the advice needed no fit (no reference yet, at the budget, startup)
        attrs = {"action": rec.action, "rule": rec.rule, "reason": rec.message, "converged": rec.details.get("converged")}
        for key, value in attrs.items():
            study._storage.set_trial_user_attr(trial._trial_id, f"{USER_ATTR_PREFIX}{key}", value)

    def _replace_a_copied_reason(self, study, trial, n_reports: int) -> None:
        """A study in a database resumes a crashed trial as a new one (Optuna's heartbeat with
        RetryHeartbeatStaleTrialCallback), a copy of the failed trial's user attributes, this pruner's
        reasons among them: until its own first check the new trial showed the failed trial's advice
        ('continue: P(beats best ...) = 0.12, 6.0x now') for reports it never made, and kept it if it
        ended in the warm-up. Replaced from its first report, and again at each report of its warm-up, so
        that the reason counts the reports the trial has made (one kept from the first said '1 report(s)
        so far' of a trial that ended after three); a trial this pruner advised otherwise is left alone."""
        if trial.number in self._copied_reasons_replaced:
            if self.advice[trial.number].message.startswith(f"continue: {n_reports} report(s)"):
                return  # asked again on the same reports
        elif trial.number in self.advice or not any(key.startswith(USER_ATTR_PREFIX) for key in trial.user_attrs):
            return
        self._copied_reasons_replaced.add(trial.number)
        self._keep(study, trial, Recommendation(
            CONTINUE, "warmup", f"continue: {n_reports} report(s) so far; the first check is at {self.n_warmup_steps} "
            "(n_warmup_steps)", run_id=f"trial-{trial.number}"))

    def prune(self, study: optuna.study.Study, trial: optuna.trial.FrozenTrial) -> bool:
        with _CHECK_LOCK:  # the pruner's own warnings too: not said inside another thread's catch_warnings
            return self._check(study, trial)

    def _check(self, study: optuna.study.Study, trial: optuna.trial.FrozenTrial) -> bool:
        n_reports = len(trial.intermediate_values)
        if n_reports < self.n_warmup_steps:
            self._warn_if_warmup_outlasts_trial(trial, n_reports)
            self._replace_a_copied_reason(study, trial, n_reports)
            return False
        # Due once interval_steps reports have come since this trial's last check. A grid of report
        # counts ((n_reports - n_warmup_steps) % interval_steps == 0) checked only the asks that fell on
        # it: under PatientPruner(patience=2), interval_steps=4, 2.3 checks a trial of the 4.0 due, the
        # first at the 28th report instead of the 9th; none at all where every ask fell off the grid.
        last = self._last_check.get(trial.number)
        if last is not None and n_reports - last[0] < self.interval_steps:
            reports_then, answer = last
            return answer if n_reports == reports_then else False  # asked again on the same reports: the same answer
        answer = self._judge(study, trial, n_reports)
        self._last_check[trial.number] = (n_reports, answer)
        return answer

    def _judge(self, study: optuna.study.Study, trial: optuna.trial.FrozenTrial, n_reports: int) -> bool:
        """One check of a trial past its warm-up: advice kept (_keep), and whether to prune it."""
        if self.n_startup_trials:
            completed = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
            if completed < self.n_startup_trials:
                self._keep(study, trial, Recommendation(
                    CONTINUE, "startup", f"continue: {completed} completed trial(s) of the {self.n_startup_trials} "
                    "n_startup_trials asks for before pruning", run_id=f"trial-{trial.number}"))
                return False
        minimize = study.direction == StudyDirection.MINIMIZE
        convert = dict(minimize=minimize, step_to_compute=self.step_to_compute, n_eval=self.n_eval)
        table = trial_table(trial, **convert)
        run_id = f"trial-{trial.number}"
        if len(table) < 2:  # evaluations that failed (NaN, inf) or at compute 0: said, not passed over in silence
            self._keep(study, trial, Recommendation(
                CONTINUE, "warmup", f"continue: {len(table)} of {n_reports} reports are usable (a finite value at "
                f"compute > 0); rules start at {max(self.config.min_evals, 2)}", run_id=run_id))
            return False
        budget = float(self.step_to_compute(self.max_step))
        # every reported step, a failed evaluation's (NaN) too: one at max_step ends the trial all the same
        if max(map(float, map(self.step_to_compute, trial.intermediate_values))) >= budget:
            # the trial is done: pruning now would only discard its result (the last advice before it stands)
            # in the unit trial.report uses (the compute beside it where step_to_compute maps steps to another unit)
            last = max(s for s in trial.intermediate_values if float(self.step_to_compute(s)) >= budget)
            mapped = (float(self.step_to_compute(last)), budget) != (float(last), float(self.max_step))
            at = f" (compute {float(self.step_to_compute(last)):g})" if mapped else ""
            planned = f" (compute {budget:g})" if mapped else ""
            if trial.number not in self.advice:
                self._keep(study, trial, Recommendation(
                    CONTINUE, "at_budget", f"continue: reported step {last:g}{at} is at or past max_step "
                    f"{self.max_step:g}{planned}; nothing is left to save", run_id=run_id))
            if table["compute"].min() >= budget:
                self._warn_steps_in_another_unit(trial, budget)
            return False
        best = self._best_completed(study)
        no_rule = best is None and self.config.target is None and self.config.saturation_epsilon is None
        if no_rule:  # nothing to compare with and no other rule on: no need to fit
            self._keep(study, trial, Recommendation(
                CONTINUE, "no_reference", "continue: no completed trial to compare with yet", run_id=run_id
            ))
            return False
        alternatives = []
        if best is not None:
            reference = trial_table(best, **convert)
            table = pd.concat([reference, table], ignore_index=True)
            alternatives = [f"trial-{best.number}"]
        pad = int(np.ceil(len(table) / 64) * 64)
        fc, converged = fit_for_advice(
            table, random_seed=seed_of_fit(self.random_seed, self.n_fits), pad_to=pad, previous=self._previous.get(trial.number),
            **self.forecaster_kwargs,  # the fit's warnings are dropped in this thread alone, not other trials'
        )
        # the next check of this trial refits this fit. Kept for every trial still running, not only the
        # last one checked: under n_jobs > 1 trials take turns, and one slot made every check a full fit
        running = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
        self._previous = {number: fit for number, fit in self._previous.items() if number in running}
        self._previous[trial.number] = fc
        self.n_fits += 1
        # the best completed trial is judged where it ended: that is the value it already has
        config = self.config
        if minimize and config.target is not None:  # the target is an error to get down to: 1 - it on this side
            config = dataclasses.replace(config, target=1.0 - config.target)
        rec = recommend_runs(fc, {run_id: budget}, config, alternatives=alternatives)[run_id]
        if minimize:
            rec.message += " (in 1 - value: the study minimises)"
        rec.details["converged"] = converged
        rec.details["trial"] = trial.number
        if not converged:  # what failed (R-hat, ESS, divergences), as watch and the trainer's advisor keep it
            rec.details["convergence_problems"] = fc.diagnostics().problems()
        self._keep(study, trial, rec)
        if rec.stop and not converged:
            # a prune decided on a fit that did not converge deserves a second look (a continue costs
            # nothing): said at warning level, which a script without logging set up still shows
            logger.warning("trial %d: %s (warning: the fit behind this advice did not converge: %s)", trial.number,
                           rec.message, what_did_not_converge(rec.details))
        else:
            logger.info("trial %d: %s", trial.number, rec.message)
        return rec.stop
