"""ForecastPruner inside a small real Optuna study: a clearly worse trial is pruned with a stated
reason, a better one runs to the end and becomes the study's best trial."""

from __future__ import annotations

import logging
import re
import warnings

import numpy as np
import optuna
import pytest

from forecast.curves import sigmoid_curve
from forecast.optuna_pruner import ForecastPruner

optuna.logging.set_verbosity(optuna.logging.WARNING)

STEPS = [int(round(100 * 1.25**i)) for i in range(16)]  # compute at each report
N_EVAL = 1000
ASYMPTOTE = {"good": 0.66, "better": 0.72, "bad": 0.42}


def make_objective():
    def objective(trial):
        recipe = trial.suggest_categorical("recipe", list(ASYMPTOTE))
        rng = np.random.default_rng(trial.number)
        value = None
        for step in STEPS:
            p = sigmoid_curve(step, ASYMPTOTE[recipe], 1.5, 400.0, 0.2)
            value = rng.binomial(N_EVAL, p) / N_EVAL
            trial.report(value, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return value

    return objective


def study_of(pruner, recipes):
    """A small real study under `pruner`: one trial per recipe, in that order."""
    study = optuna.create_study(direction="maximize", pruner=pruner, sampler=optuna.samplers.RandomSampler(seed=0))
    for recipe in recipes:
        study.enqueue_trial({"recipe": recipe})
    study.optimize(make_objective(), n_trials=len(recipes))
    return study


def test_forecast_pruner_in_a_real_study():
    pruner = ForecastPruner(max_step=STEPS[-1], n_warmup_steps=4, interval_steps=4, n_eval=N_EVAL)
    study = study_of(pruner, ("good", "bad", "better"))
    states = [t.state for t in study.trials]
    assert states == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.COMPLETE]
    assert study.best_trial.params["recipe"] == "better"

    why = pruner.advice[1]
    assert (why.action, why.rule) == ("stop", "beats_best")
    assert why.probability < why.threshold == 0.1
    assert why.message.startswith("stop: P(beats best 'trial-0'") and "< 0.1" in why.message
    assert len(study.trials[1].intermediate_values) < len(STEPS)  # stopped early: compute saved
    assert pruner.advice[0].rule == "no_reference"  # the first trial had nothing to compare with
    assert pruner.advice[2].action == "continue"


def test_forecast_pruner_rejects_values_that_are_not_rates():
    pruner = ForecastPruner(max_step=10)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    study.add_trial(optuna.trial.create_trial(value=0.5, intermediate_values={1: 0.3, 2: 0.5}))
    trial = study.ask()
    for step in range(1, 5):
        trial.report(float(step), step)  # accuracy in percent, say: not a rate
    with pytest.raises(ValueError, match=r"rates in \[0, 1\]"):
        trial.should_prune()


def test_a_max_step_below_every_reported_step_warns_once_instead_of_never_pruning_in_silence():
    pruner = ForecastPruner(max_step=50)  # steps are reported from 100 up: a unit mix-up
    study = optuna.create_study(direction="maximize", pruner=pruner)
    for _ in range(2):
        trial = study.ask()
        for step in STEPS[:5]:
            trial.report(0.3, step)
        with pytest.warns(UserWarning, match="can never be pruned") if trial.number == 0 else _no_warning():
            assert trial.should_prune() is False
        study.tell(trial, 0.3)
    assert pruner.advice[1].rule == "at_budget" and pruner.n_fits == 0


def _no_warning():
    import contextlib
    import warnings

    @contextlib.contextmanager
    def guard():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            yield

    return guard()


@pytest.mark.parametrize("reference", [
    {0: 0.2, 3000: 0.6},  # an initial evaluation at step 0 (compute 0 is not on the curve) and a final one
    {1000: float("nan"), 3000: 0.6},  # an evaluation that failed (NaN) and a final one
])
def test_a_completed_trial_with_one_usable_report_is_not_taken_as_the_reference(reference):
    # it used to be: its one row made the fit refuse the table, so every later trial's should_prune raised
    pruner = ForecastPruner(max_step=STEPS[-1])
    study = optuna.create_study(direction="maximize", pruner=pruner)
    study.add_trial(optuna.trial.create_trial(value=0.6, intermediate_values=reference))
    trial = study.ask()
    for step in STEPS[:5]:
        trial.report(0.3, step)
    assert trial.should_prune() is False
    assert pruner.advice[trial.number].rule == "no_reference" and pruner.n_fits == 0


def test_a_completed_trial_that_reported_no_rates_is_skipped_as_the_reference_with_a_warning():
    # a trial added by hand, or reported by another objective (a loss of 1.7): it failed every later check
    pruner = ForecastPruner(max_step=STEPS[-1])
    study = optuna.create_study(direction="maximize", pruner=pruner)
    study.add_trial(optuna.trial.create_trial(value=0.6, intermediate_values={1000: 1.7, 3000: 0.6}))
    trial = study.ask()
    for step in STEPS[:5]:
        trial.report(0.3, step)
    with pytest.warns(UserWarning, match="completed trial 0 reported values outside"):
        assert trial.should_prune() is False
    assert pruner.advice[trial.number].rule == "no_reference"


def test_n_warmup_steps_given_in_steps_as_for_median_pruner_warns_once_instead_of_never_pruning_in_silence():
    # MedianPruner(n_warmup_steps=STEPS[3]) is a step; here it counts reports, so no trial reaches it
    pruner = ForecastPruner(max_step=STEPS[-1], n_warmup_steps=STEPS[3])
    study = optuna.create_study(direction="maximize", pruner=pruner)
    for number in range(2):
        trial = study.ask()
        for i, step in enumerate(STEPS):
            trial.report(0.3, step)
            last = number == 0 and i == len(STEPS) - 1
            with pytest.warns(UserWarning, match="n_warmup_steps counts reports") if last else _no_warning():
                assert trial.should_prune() is False
        study.tell(trial, 0.3)
    assert pruner.n_fits == 0


def test_the_at_budget_reason_names_steps_in_the_unit_trial_report_uses():
    # 1 training step = 2 units of compute: the reason used to say "reported step 16000 ... max_step (16000)"
    # for a trial that reported step 8000 with max_step=8000
    pruner = ForecastPruner(max_step=8000, step_to_compute=lambda step: 2.0 * step)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    trial = study.ask()
    for step, value in zip([1000, 2000, 4000, 8000], [0.2, 0.3, 0.4, 0.45], strict=True):
        trial.report(value, step)
    assert trial.should_prune() is False
    why = pruner.advice[trial.number]
    assert why.rule == "at_budget"
    assert why.message == ("continue: reported step 8000 (compute 16000) is at or past max_step 8000 (compute 16000); "
                           "nothing is left to save")
    plain = ForecastPruner(max_step=8000)  # steps are compute: said once
    trial = study.ask()
    for step, value in zip([1000, 2000, 4000, 9000], [0.2, 0.3, 0.4, 0.45], strict=True):
        trial.report(value, step)
    assert plain.prune(study, study.trials[-1]) is False
    assert plain.advice[trial.number].message == ("continue: reported step 9000 is at or past max_step 8000; "
                                                  "nothing is left to save")


def test_n_startup_trials_holds_pruning_until_that_many_trials_completed():
    """MedianPruner's argument of that name, so a study's settings carry over."""
    pruner = ForecastPruner(max_step=STEPS[-1], n_warmup_steps=4, interval_steps=4, n_eval=N_EVAL, n_startup_trials=2)
    study = study_of(pruner, ("good", "bad", "bad"))
    states = [t.state for t in study.trials]
    # the first 'bad' ran to the end (one completed trial before it, two asked for); the second was pruned
    assert states == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED]
    assert pruner.advice[1].rule == "startup" and "1 completed trial(s) of the 2" in pruner.advice[1].message
    with pytest.raises(ValueError, match="n_startup_trials must be >= 0"):
        ForecastPruner(max_step=10, n_startup_trials=-1)


def test_warmup_and_interval_are_refused_or_raised_in_words():
    """They were read as max(n, 4) and max(n, 1) in silence: 2 gave 4, -5 gave 4, 0 gave 1."""
    for kwargs, message in (({"n_warmup_steps": -5}, "n_warmup_steps must be an integer >= 0, got -5"),
                            ({"n_warmup_steps": 2.7}, "n_warmup_steps must be an integer >= 0, got 2.7"),
                            ({"interval_steps": 0}, "interval_steps must be an integer >= 1, got 0")):
        with pytest.raises(ValueError, match=message):
            ForecastPruner(max_step=10, **kwargs)
    with pytest.warns(UserWarning, match="n_warmup_steps=2 is raised to 4: the stop rules judge a curve from min_evals=4"):
        assert ForecastPruner(max_step=10, n_warmup_steps=2).n_warmup_steps == 4
    from forecast.early_stop import EarlyStopConfig

    with warnings.catch_warnings():  # the default follows min_evals, and a value nobody gave is not warned about
        warnings.simplefilter("error")
        assert ForecastPruner(max_step=10, config=EarlyStopConfig(min_evals=6)).n_warmup_steps == 6
        assert ForecastPruner(max_step=10, n_warmup_steps=5.0).n_warmup_steps == 5


def test_a_unit_mix_up_inside_the_warm_up_is_named_as_the_unit_not_the_warm_up():
    pruner = ForecastPruner(max_step=50)  # steps reported from 100 up, and the trial ends after 3 reports
    study = optuna.create_study(direction="maximize", pruner=pruner)
    trial = study.ask()
    trial.report(0.2, 0)  # an evaluation before training: compute 0 is not on the curve, nor a unit
    trial.report(0.3, STEPS[0])
    with pytest.warns(UserWarning) as said:
        trial.report(0.3, STEPS[1])
        assert trial.should_prune() is False
    assert [str(w.message) for w in said if "can never be pruned" in str(w.message)]
    assert not [w for w in said if "counts reports" in str(w.message)]


def test_a_target_of_a_minimised_study_is_in_its_own_units():
    """target=0.3 on a minimised error meant a pass rate of 0.3 on the pruner's side (error 0.7), so
    an error falling from 0.68 to 0.60 read as 'P(reaches 0.3) = 0.98'. The threshold is 0.2, far from
    both answers: P(reaches 0.7) is 0-0.06 over fit seeds (fast fits of 8 points), at 0.05 a coin toss."""
    from forecast.early_stop import EarlyStopConfig

    pruner = ForecastPruner(max_step=STEPS[-1], n_eval=N_EVAL,
                            config=EarlyStopConfig(target=0.3, saturation_epsilon=None, p_target_threshold=0.2))
    study = optuna.create_study(direction="minimize", pruner=pruner)
    trial = study.ask()
    errors = 1.0 - sigmoid_curve(np.array(STEPS[:8], dtype=float), 0.40, 1.5, 400.0, 0.30)  # an error that ends near 0.6
    for step, error in zip(STEPS[:8], errors, strict=True):
        trial.report(float(error), step)
    assert trial.should_prune() is True
    advice = pruner.advice[trial.number]
    assert advice.rule == "reach_target" and "0.7" in advice.message and "(in 1 - value: the study minimises)" in advice.message


N_EVAL_RULE = "a whole number of graded samples from 1 to 10**12"


@pytest.mark.parametrize("n_eval", [-5, 1.5, "abc", True, float("nan"), 10**30, 2**53 + 1, 10**12 + 1, float("inf")])
def test_an_n_eval_that_is_not_a_whole_number_of_samples_is_refused_up_front(n_eval):
    """It was taken in silence, and the first check after a warm-up raised RunDataError out of should_prune,
    blaming "column 'n_eval', run 'trial-0', row 1" (the reference trial's row) for the pruner's own
    argument: the trial failed after its compute was spent, and study.optimize stopped. One past 2**53
    (10**30) was taken, and fitted as another number (2**53 + 1 as 2**53): the fit reads n_eval as a float."""
    with pytest.raises(ValueError, match=re.escape(f"n_eval must be {N_EVAL_RULE}, or None; got {n_eval!r}")):
        ForecastPruner(max_step=10, n_eval=n_eval)
    assert ForecastPruner(max_step=10, n_eval=np.int64(500)).n_eval == 500 and ForecastPruner(max_step=10).n_eval is None
    assert ForecastPruner(max_step=10, n_eval=10**12).n_eval == 10**12  # the largest the rule takes
    assert ForecastPruner(max_step=10, n_eval=500.0).n_eval == 500  # a whole float, as n_warmup_steps takes one
    assert ForecastPruner(max_step=10, n_eval=0).n_eval is None  # 0 read as "not known", as it always was


@pytest.mark.parametrize("max_step", [float("nan"), float("inf"), 0, -5])
def test_a_max_step_that_is_not_a_finite_positive_number_is_refused_up_front(max_step):
    """nan and inf were accepted, and every check after the warm-up then fitted and raised
    'budget ... must be a finite compute > 0', failing the trial mid-study."""
    with pytest.raises(ValueError, match="max_step must be a finite number > 0"):
        ForecastPruner(max_step=max_step)
    assert ForecastPruner(max_step=np.int64(2000)).max_step == 2000  # a numpy number is a number


def test_a_prune_decided_on_a_fit_that_did_not_converge_says_so(caplog):
    """watch's lines and the trainer's advisor say when a stop rests on a fit that did not converge
    (with what failed); the pruner kept a bare converged=False in its advice's details and logged
    the prune at info level, which a script shows nowhere, with no word of it."""
    from forecast import SamplerSettings
    from forecast.early_stop import EarlyStopConfig

    short = SamplerSettings(draws=20, tune=10, extend_if_flagged=False)  # far too few draws: flagged
    pruner = ForecastPruner(max_step=STEPS[-1], n_eval=N_EVAL, forecaster_kwargs={"sampler": short},
                            config=EarlyStopConfig(target=0.9, saturation_epsilon=None, p_target_threshold=0.05))
    study = optuna.create_study(direction="maximize", pruner=pruner)
    trial = study.ask()
    values = sigmoid_curve(np.array(STEPS[:8], dtype=float), 0.42, 1.5, 400.0, 0.2)  # nowhere near 0.9
    for step, value in zip(STEPS[:8], values, strict=True):
        trial.report(float(value), step)
    with caplog.at_level(logging.WARNING, logger="forecast.optuna_pruner"):
        assert trial.should_prune() is True
    advice = pruner.advice[trial.number]
    assert advice.details["converged"] is False
    assert any("ESS" in problem for problem in advice.details["convergence_problems"])
    said = [r for r in caplog.records if r.levelno >= logging.WARNING and "did not converge" in r.getMessage()]
    assert len(said) == 1 and f"trial {trial.number}: stop" in said[0].getMessage()


def test_forecast_pruner_keeps_its_reasons_in_the_trials_user_attrs():
    """pruner.advice dies with the process; a study in a database (and trials_dataframe, optuna-dashboard)
    only shows why a trial was pruned if the reason is stored with the trial."""
    pruner = ForecastPruner(max_step=STEPS[-1], n_warmup_steps=4, interval_steps=4, n_eval=N_EVAL)
    study = study_of(pruner, ("good", "bad", "better"))
    pruned = study.trials[1].user_attrs
    assert pruned["forecast_pruner_action"] == "stop" and pruned["forecast_pruner_rule"] == "beats_best"
    assert pruned["forecast_pruner_reason"] == pruner.advice[1].message
    assert pruned["forecast_pruner_converged"] is pruner.advice[1].details["converged"]
    first = study.trials[0].user_attrs
    assert first["forecast_pruner_rule"] == "no_reference" and first["forecast_pruner_converged"] is None
    frame = study.trials_dataframe()
    assert frame.loc[1, "user_attrs_forecast_pruner_rule"] == "beats_best"


def test_checks_in_two_threads_leave_the_process_warnings_as_they_were(monkeypatch, recwarn):
    """Optuna's n_jobs=2 runs trials in threads. Each check's fit swaps the process's global warning
    state (warnings.catch_warnings); two fits that overlapped and ended in the order they began left
    the process recording every later warning into a list nobody reads: after such a study no
    warning was shown again, the pruner's own included. That order is forced here (the first fit
    waits, up to a bound, for the second to begin; the second, for the first check to end) so that
    the test does not rest on luck; the real fits run unchanged."""
    import threading

    from forecast.forecaster import ScalingForecaster

    first_began, second_began, first_done = threading.Event(), threading.Event(), threading.Event()
    real_fit = ScalingForecaster.fit

    def fit_in_order(self, *args, **kwargs):
        if threading.current_thread().name == "second":
            second_began.set()
            first_done.wait(timeout=60)  # the first check ends while this one is inside its fit
            return real_fit(self, *args, **kwargs)
        first_began.set()
        fitted = real_fit(self, *args, **kwargs)
        second_began.wait(timeout=3)  # held off by the pruner, the second check cannot begin: it waits its turn
        return fitted

    pruner = ForecastPruner(max_step=STEPS[-1], n_eval=N_EVAL)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    study.add_trial(optuna.trial.create_trial(value=0.6, intermediate_values={s: 0.6 * s / STEPS[-1] for s in STEPS}))
    trials = [study.ask() for _ in range(3)]
    for trial in trials:
        for step in STEPS[:5]:
            trial.report(0.3, step)
    # one check first, alone: PyTensor adds its own warning filters at its first compile in a process, which
    # this test, run by itself, took for the checks' doing
    trials[2].should_prune()
    monkeypatch.setattr(ScalingForecaster, "fit", fit_in_order)
    filters = list(warnings.filters)
    first = threading.Thread(target=lambda: (trials[0].should_prune(), first_done.set()), name="first")
    second = threading.Thread(target=lambda: first_began.wait(timeout=60) and trials[1].should_prune(), name="second")
    first.start()
    second.start()
    first.join()
    second.join()
    assert pruner.n_fits == 3 and set(pruner.advice) == {1, 2, 3}
    assert warnings.filters == filters
    warnings.warn("a warning after the study", UserWarning, stacklevel=1)
    assert [w for w in recwarn if "a warning after the study" in str(w.message)]


def test_trials_that_take_turns_each_refit_their_own_last_fit(monkeypatch):
    """Under n_jobs=2 two trials' checks alternate. The pruner kept the last fit of the last trial
    checked only, so each check of either trial sampled afresh instead of refitting its own last
    fit (a reweighting, a fraction of a second, where it is reliable)."""
    from forecast.forecaster import ScalingForecaster

    refits = []
    real_refit = ScalingForecaster.refit

    def counted_refit(self, *args, **kwargs):
        refits.append(self)
        return real_refit(self, *args, **kwargs)

    monkeypatch.setattr(ScalingForecaster, "refit", counted_refit)
    pruner = ForecastPruner(max_step=STEPS[-1], n_eval=N_EVAL)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    study.add_trial(optuna.trial.create_trial(value=0.6, intermediate_values={s: 0.6 * s / STEPS[-1] for s in STEPS}))
    trials = [study.ask() for _ in range(2)]
    for step in STEPS[:5]:
        for trial in trials:
            trial.report(0.3, step)
    for trial in trials:
        trial.should_prune()  # a first fit each
    for trial in trials:
        trial.report(0.3, STEPS[5])
        trial.should_prune()  # each refits its own
    assert len(refits) == 2 and refits[0] is not refits[1]
    study.tell(trials[0], 0.3)
    trials[1].report(0.3, STEPS[6])
    trials[1].should_prune()
    assert set(pruner._previous) == {trials[1].number}  # a finished trial's fit is let go


def test_a_trial_whose_reports_are_not_usable_is_kept_with_a_reason():
    """A trial whose evaluations failed (NaN, inf) or were made at step 0 past the warm-up ran on with
    no advice at all: nothing in pruner.advice or its user attributes said why it was never judged."""
    pruner = ForecastPruner(max_step=STEPS[-1])
    study = optuna.create_study(direction="maximize", pruner=pruner)
    study.add_trial(optuna.trial.create_trial(value=0.6, intermediate_values={s: 0.6 * s / STEPS[-1] for s in STEPS}))
    trial = study.ask()
    trial.report(0.2, 0)
    trial.report(0.3, STEPS[0])
    for step in STEPS[1:5]:
        trial.report(float("nan"), step)
    assert trial.should_prune() is False
    why = pruner.advice[trial.number]
    assert (why.action, why.rule) == ("continue", "warmup") and pruner.n_fits == 0
    assert why.message == "continue: 1 of 6 reports are usable (a finite value at compute > 0); rules start at 4"
    assert study.trials[-1].user_attrs["forecast_pruner_reason"] == why.message


def test_a_pass_rate_minimised_by_optunas_default_direction_is_warned_about_once():
    """optuna.create_study() minimises unless told otherwise. A pass rate reported there was read as
    1 - value, so the pruner kept the trials that climbed least and pruned those that climbed most,
    each message saying only '(in 1 - value: the study minimises)'."""
    rising = {s: float(v) for s, v in zip(STEPS, sigmoid_curve(np.array(STEPS, dtype=float), 0.6, 1.5, 400.0, 0.2),
                                          strict=True)}
    for direction, best, warned in (("minimize", rising, True), ("minimize", {s: 1 - v for s, v in rising.items()}, False),
                                    ("maximize", rising, False)):
        pruner = ForecastPruner(max_step=STEPS[-1], n_eval=N_EVAL)
        study = optuna.create_study(direction=direction, pruner=pruner)
        study.add_trial(optuna.trial.create_trial(value=best[STEPS[-1]], intermediate_values=best))
        for _ in range(2 if warned else 1):
            trial = study.ask()
            for step in STEPS[:5]:
                trial.report(best[step], step)
            warns = warned and trial.number == 1  # once per pruner
            with pytest.warns(UserWarning, match=r"the study minimises, yet its best completed trial 0 reported values "
                                                 r"that rose from 0\.244444 \(step 100\) to 0\.579938 \(step 2842\); a pass "
                                                 r"rate, which rises, needs optuna\.create_study\(direction='maximize'\)"
                              ) if warns else _no_warning():
                trial.should_prune()
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")  # PatientPruner is experimental
def test_a_pruner_asked_only_now_and_then_checks_once_interval_steps_reports_have_come():
    """PatientPruner asks the pruner it wraps only after `patience` reports without improvement. The
    pruner checked on a grid of report counts ((n_reports - n_warmup_steps) % interval_steps == 0),
    so only the asks that fell on the grid were checks: this trial dips at every odd report, where
    PatientPruner asks, and with interval_steps=2 it was never checked at all."""
    pruner = ForecastPruner(max_step=STEPS[-1], n_warmup_steps=4, interval_steps=2, n_eval=N_EVAL)
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.PatientPruner(pruner, patience=0))
    study.add_trial(optuna.trial.create_trial(value=0.6, intermediate_values={s: 0.6 * s / STEPS[-1] for s in STEPS}))
    asked_at = []
    real_prune = pruner.prune

    def prune(study, trial):
        asked_at.append(len(trial.intermediate_values))
        return real_prune(study, trial)

    pruner.prune = prune

    def objective(trial):
        for n, step in enumerate(STEPS[:12], start=1):
            trial.report(0.2 + 0.03 * n - (0.04 if n % 2 else 0.0), step)  # ahead of trial 0 all along: kept
            if trial.should_prune():
                raise optuna.TrialPruned()
        return 0.56

    study.optimize(objective, n_trials=1)
    assert asked_at == [3, 5, 7, 9, 11]  # the dips, as PatientPruner(patience=0) reads them
    assert pruner.n_fits == 4  # at 5, 7, 9 and 11 reports: the warm-up is 4, each ask 2 reports after the last check
    assert study.trials[1].state == optuna.trial.TrialState.COMPLETE


def test_a_trial_asked_again_on_the_same_reports_gets_the_same_answer_without_a_second_fit():
    pruner = ForecastPruner(max_step=STEPS[-1], n_eval=N_EVAL)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    good = sigmoid_curve(np.array(STEPS, dtype=float), ASYMPTOTE["good"], 1.5, 400.0, 0.2)
    study.add_trial(optuna.trial.create_trial(value=float(good[-1]), intermediate_values=dict(zip(STEPS, map(float, good), strict=True))))
    trial = study.ask()
    for step, value in zip(STEPS[:8], sigmoid_curve(np.array(STEPS[:8], dtype=float), 0.25, 1.5, 400.0, 0.1), strict=True):
        trial.report(float(value), step)  # far behind trial 0: pruned
    assert trial.should_prune() is True
    assert trial.should_prune() is True and pruner.n_fits == 1


def test_a_trial_whose_evaluation_at_max_step_failed_is_done_and_not_pruned():
    """A trial that reported max_step is done (pruning it then only discards its result), but the
    check read 'done' off its finite values alone: one whose evaluation at max_step failed (NaN, in a
    study that maximises) was judged on the values before it and pruned at its last report."""
    pruner = ForecastPruner(max_step=STEPS[-1], n_eval=N_EVAL)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    good = sigmoid_curve(np.array(STEPS, dtype=float), ASYMPTOTE["good"], 1.5, 400.0, 0.2)
    study.add_trial(optuna.trial.create_trial(value=float(good[-1]), intermediate_values=dict(zip(STEPS, map(float, good), strict=True))))
    trial = study.ask()
    bad = sigmoid_curve(np.array(STEPS, dtype=float), ASYMPTOTE["bad"], 1.5, 400.0, 0.2)
    for step, value in zip(STEPS, bad, strict=True):
        trial.report(float(value) if step < STEPS[-1] else float("nan"), step)
    assert trial.should_prune() is False
    why = pruner.advice[trial.number]
    assert why.rule == "at_budget" and pruner.n_fits == 0
    assert why.message == f"continue: reported step {STEPS[-1]} is at or past max_step {STEPS[-1]}; nothing is left to save"


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")  # RetryHeartbeatStaleTrialCallback
def test_a_trial_retried_after_a_crash_does_not_show_the_failed_trials_reason(tmp_path):
    """A study in a database resumes a crashed trial as a new one (Optuna's heartbeat and
    RetryHeartbeatStaleTrialCallback), which copies the failed trial's user attributes, this
    pruner's reasons among them: until its own first check, after the warm-up, the retried trial
    showed the failed trial's advice, for reports it never made (and kept it if it ended in the warm-up).
    Its own reason then counted its first report alone: '1 report(s) so far' for a trial that made three."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="s", storage=url, direction="maximize", pruner=ForecastPruner(max_step=STEPS[-1]))
    crashed = study.ask()
    for step in STEPS[:5]:
        crashed.report(0.3, step)
    assert crashed.should_prune() is False
    study.tell(crashed, state=optuna.trial.TrialState.FAIL)  # as the heartbeat marks a trial whose process died
    optuna.storages.RetryHeartbeatStaleTrialCallback()(study, study.trials[crashed.number])

    pruner = ForecastPruner(max_step=STEPS[-1])  # the resumed process's
    resumed = optuna.load_study(study_name="s", storage=url, pruner=pruner)

    def objective(trial):
        for step in STEPS[:3]:  # fails again in its warm-up
            trial.report(0.3, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
            assert not trial.should_prune()  # asked twice on the same reports (PatientPruner does)
        raise RuntimeError("out of memory")

    resumed.optimize(objective, n_trials=1, catch=(RuntimeError,))
    retried = optuna.load_study(study_name="s", storage=url).trials[-1]
    assert retried.system_attrs["failed_trial"] == crashed.number
    assert retried.user_attrs["forecast_pruner_rule"] == "warmup"
    assert retried.user_attrs["forecast_pruner_reason"] == "continue: 3 report(s) so far; the first check is at 4 (n_warmup_steps)"
    assert study.trials[crashed.number].user_attrs["forecast_pruner_rule"] == "no_reference"  # the failed trial's own stays


def test_a_warning_raised_in_another_trial_while_a_check_fits_is_not_lost(monkeypatch, recwarn):
    """Under Optuna's n_jobs=2 a check's fit ran inside warnings.catch_warnings(record=True), which
    swaps the warning state of every thread: what another trial's objective warned meanwhile went
    into the fit's list and was never shown (a fifth of an objective's warnings in a study of six
    trials). The fit's own warnings are now dropped in its thread alone. The order is forced (the fit
    waits, up to a bound, for the other trial to warn) so that the test does not rest on luck."""
    import threading

    from forecast.forecaster import ScalingForecaster

    fit_began, warned = threading.Event(), threading.Event()
    real_fit = ScalingForecaster.fit

    def fit_while_another_trial_warns(self, *args, **kwargs):
        fit_began.set()
        warned.wait(timeout=60)
        warnings.warn("said inside the fit", UserWarning, stacklevel=1)  # the fit's own: not shown
        return real_fit(self, *args, **kwargs)

    monkeypatch.setattr(ScalingForecaster, "fit", fit_while_another_trial_warns)
    pruner = ForecastPruner(max_step=STEPS[-1], n_eval=N_EVAL)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    study.add_trial(optuna.trial.create_trial(value=0.6, intermediate_values={s: 0.6 * s / STEPS[-1] for s in STEPS}))

    def objective(trial):
        if trial.number == 1:  # checked once: a fit
            for step in STEPS[:5]:
                trial.report(0.3, step)
            trial.should_prune()
        else:  # warns while trial 1's check fits
            fit_began.wait(timeout=60)
            warnings.warn("said by trial 2's objective", UserWarning, stacklevel=1)
            warned.set()
        return 0.3

    shown_by = warnings.showwarning
    study.optimize(objective, n_trials=2, n_jobs=2)
    assert pruner.n_fits == 1 and fit_began.is_set() and warned.is_set()
    said = [str(w.message) for w in recwarn]
    assert "said by trial 2's objective" in said
    assert "said inside the fit" not in said and not [text for text in said if "did not converge" in text]
    assert warnings.showwarning is shown_by  # the hook that tells threads apart is gone with the fit


def test_a_check_under_warnings_as_errors_does_not_raise_its_fits_convergence_warning():
    """The fit's warnings are dropped in its thread, where Python's filters (the process's) still
    apply: a ConvergenceWarning would fail the trial under -W error. The advice reads convergence
    off the fit and says it, so its fits give none."""
    from forecast import SamplerSettings

    short = SamplerSettings(draws=20, tune=10, extend_if_flagged=False)  # far too few draws: flagged
    pruner = ForecastPruner(max_step=STEPS[-1], n_eval=N_EVAL, forecaster_kwargs={"sampler": short})
    study = optuna.create_study(direction="maximize", pruner=pruner)
    study.add_trial(optuna.trial.create_trial(value=0.6, intermediate_values={s: 0.6 * s / STEPS[-1] for s in STEPS}))
    trial = study.ask()
    for step in STEPS[:6]:
        trial.report(0.3, step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trial.should_prune()
    assert pruner.advice[trial.number].details["converged"] is False


def test_a_check_under_warnings_as_errors_does_not_raise_its_tables_data_warning():
    """A check's table (this trial beside the best completed one) has data warnings of its own: a trial
    that reports log-spaced computes, checked at its fifth report, sits 2,000x below the whole curve it is
    compared with ('runs' compute differs by 2e+03x ... are they in one unit?'). The fit said them again
    after recording them, in the trial's thread, where Python's filters (the process's) apply: under -W
    error should_prune raised that UserWarning and failed the trial, which it did not before the fit's
    warnings were dropped in its thread alone. The fit keeps them in its table, unsaid."""
    steps = [2**k for k in range(4, 31)]  # compute at each report, doubling

    def curve(step, asymptote):
        return float(sigmoid_curve(np.array([step], dtype=float), asymptote, 0.8, 2.0**17, 0.0)[0])

    pruner = ForecastPruner(max_step=steps[-1], n_eval=N_EVAL)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    study.add_trial(optuna.trial.create_trial(value=curve(steps[-1], 0.7), intermediate_values={s: curve(s, 0.7) for s in steps}))
    trial = study.ask()
    for step in steps[:5]:
        trial.report(curve(step, 0.5), step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert trial.should_prune() is False
    assert pruner.n_fits == 1 and pruner.advice[trial.number].rule == "too_early"  # judged, not failed


@pytest.mark.parametrize("kwargs, error, message", [
    ({"step_to_compute": "x"}, TypeError, "step_to_compute must be a function of a trial's step, got 'x'"),
    ({"forecaster_kwargs": {"mode": "fats"}}, ValueError, "forecaster_kwargs {'mode': 'fats'}: mode must be 'nuts' or 'fast'"),
    ({"forecaster_kwargs": {"modes": "fast"}}, TypeError, "forecaster_kwargs {'modes': 'fast'}: "),
    ({"forecaster_kwargs": "fast"}, TypeError, "forecaster_kwargs must be a dict of ScalingForecaster's settings, got 'fast'"),
    ({"random_seed": -1}, ValueError, "random_seed must be an integer >= 0 or None, got -1"),
    ({"n_startup_trials": 1.5}, ValueError, "n_startup_trials must be >= 0 (a whole number), got 1.5"),  # read as 1
])
def test_settings_the_first_check_would_fail_on_are_refused_when_the_pruner_is_made(kwargs, error, message):
    """Each was taken, and failed the study's first check after a warm-up: its trial FAIL, a completed
    trial's compute spent first ('str' object is not callable, mode must be 'nuts' or 'fast')."""
    with pytest.raises(error, match=re.escape(message)):
        ForecastPruner(max_step=10, **kwargs)


def test_the_pruner_takes_numpy_settings_and_a_whole_float_of_startup_trials():
    pruner = ForecastPruner(max_step=10, random_seed=np.int64(3), n_startup_trials=2.0, step_to_compute=lambda s: 2 * s)
    assert pruner.n_startup_trials == 2 and pruner.step_to_compute(5) == 10


def test_a_random_seed_of_none_leaves_the_pruners_fits_unseeded(intercept_advice_fit):
    """The pruner takes random_seed=None ('an integer >= 0 or None'), and its first check after the
    warm-up then failed, the trial with it: "unsupported operand type(s) for +: 'NoneType' and 'int'"."""
    from conftest import FitIntercepted

    import forecast.optuna_pruner as pruner_module

    seen = intercept_advice_fit(pruner_module)
    pruner = ForecastPruner(max_step=STEPS[-1], n_eval=N_EVAL, random_seed=None)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    study.add_trial(optuna.trial.create_trial(value=0.6, intermediate_values={s: 0.6 * s / STEPS[-1] for s in STEPS}))
    trial = study.ask()
    for step in STEPS[:5]:
        trial.report(0.3, step)
    with pytest.raises(FitIntercepted):
        trial.should_prune()
    assert "random_seed" in seen and seen["random_seed"] is None


# ----------------------------------------------------------- known answers that kill hand-made mutants
# Each test below names the mutant of forecast/optuna_pruner.py it was written against (session 41's
# mutation testing): the change survived every test before it, yet changed what a user sees.


def test_n_warmup_steps_at_the_floor_is_taken_without_a_warning():
    """Mutant 'warm-up warning at the floor' (< floor read as <= floor): n_warmup_steps=4, the least
    value, was warned about as 'raised to 4'."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ForecastPruner(max_step=10, n_warmup_steps=4).n_warmup_steps == 4
    with pytest.warns(UserWarning, match="n_warmup_steps=3 is raised to 4"):
        assert ForecastPruner(max_step=10, n_warmup_steps=3).n_warmup_steps == 4


def test_n_startup_trials_counts_completed_trials_not_pruned_ones():
    """Mutant 'startup counts pruned trials': as MedianPruner's, n_startup_trials counts trials that
    completed; a pruned trial counted too, and pruning began a trial early."""
    pruner = ForecastPruner(max_step=10_000, n_startup_trials=2)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    pruned = study.ask()
    pruned.report(0.1, 100)
    study.tell(pruned, state=optuna.trial.TrialState.PRUNED)
    study.tell(study.ask(), 0.5)
    trial = study.ask()
    for step, value in zip([100, 200, 400, 800], [0.2, 0.3, 0.35, 0.4], strict=True):
        trial.report(value, step)
    assert trial.should_prune() is False
    assert pruner.advice[trial.number].rule == "startup"
    assert pruner.advice[trial.number].message.startswith("continue: 1 completed trial(s) of the 2")


class _FitReached(Exception):
    """Raised by the stand-in fit of tables_reaching_the_fit."""


def tables_reaching_the_fit(monkeypatch) -> list:
    """Replace the pruner's fit by a stand-in that records the table it is handed and raises _FitReached."""
    import forecast.optuna_pruner as pruner_module

    tables = []

    def fake_fit(table, **kwargs):
        tables.append(table)
        raise _FitReached

    monkeypatch.setattr(pruner_module, "fit_for_advice", fake_fit)
    return tables


def report_all(trial, steps, values) -> None:
    for step, value in zip(steps, values, strict=True):
        trial.report(value, step)


CHECK_STEPS = [100, 200, 400, 800]  # the steps both trials of table_at_the_first_check report at


def table_at_the_first_check(monkeypatch, direction, best_values, trial_values, **pruner_settings):
    """One trial completed with `best_values` at CHECK_STEPS, then another reporting `trial_values`: the table its
    first check hands the fit (a stand-in: tables_reaching_the_fit), with the two trials."""
    tables = tables_reaching_the_fit(monkeypatch)
    study = optuna.create_study(direction=direction, pruner=ForecastPruner(max_step=10_000, **pruner_settings))
    best = study.ask()
    report_all(best, CHECK_STEPS, best_values)
    study.tell(best, best_values[-1])
    trial = study.ask()
    report_all(trial, CHECK_STEPS, trial_values)
    with pytest.raises(_FitReached):
        trial.should_prune()
    return tables[0], best, trial


@pytest.mark.parametrize("direction, finals, best", [("maximize", (0.3, 0.6, 0.5), 1), ("minimize", (0.5, 0.3, 0.4), 1)])
def test_the_reference_is_the_best_completed_trial_in_the_studys_direction(monkeypatch, direction, finals, best):
    """Mutant 'best pick swapped' (min for max): the trial was compared with the worst completed trial,
    and kept where the best one would prune it."""
    tables = tables_reaching_the_fit(monkeypatch)
    study = optuna.create_study(direction=direction, pruner=ForecastPruner(max_step=10_000))
    for final in finals:
        done = study.ask()
        report_all(done, [100, 200], [final, final])
        study.tell(done, final)
    trial = study.ask()
    report_all(trial, [100, 200, 400, 800], [0.4, 0.4, 0.4, 0.4])
    with pytest.raises(_FitReached):
        trial.should_prune()
    assert set(tables[0]["run_id"]) == {f"trial-{best}", f"trial-{trial.number}"}


def test_a_minimising_study_fits_its_reference_in_1_minus_value_as_the_trial(monkeypatch):
    """Mutant 'reference not flipped when minimising': the best trial's errors went into the fit as
    pass rates beside the trial's 1 - error, so a trial was compared with a curve upside down."""
    table, best, trial = table_at_the_first_check(monkeypatch, "minimize", [0.8, 0.6, 0.5, 0.45], [0.9, 0.85, 0.8, 0.75])
    assert list(table.loc[table["run_id"] == f"trial-{best.number}", "metric"]) == pytest.approx([0.2, 0.4, 0.5, 0.55])
    assert list(table.loc[table["run_id"] == f"trial-{trial.number}", "metric"]) == pytest.approx([0.1, 0.15, 0.2, 0.25])


def test_a_trial_that_reaches_max_step_keeps_its_last_advice():
    """Mutant 'at_budget overwrites the last advice': the reason a trial ran on (here: no completed
    trial to compare with) was replaced by 'nothing is left to save' at its last report."""
    pruner = ForecastPruner(max_step=1000)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    trial = study.ask()
    report_all(trial, [100, 200, 400, 800], [0.2, 0.3, 0.35, 0.4])
    assert trial.should_prune() is False and pruner.advice[trial.number].rule == "no_reference"
    trial.report(0.42, 1000)
    assert trial.should_prune() is False
    assert pruner.advice[trial.number].rule == "no_reference"
    assert study.trials[trial.number].user_attrs["forecast_pruner_rule"] == "no_reference"


def test_a_continue_from_a_fit_that_did_not_converge_is_kept_in_the_advice_not_warned(caplog):
    """Mutant 'non-convergence warning on continue': a continue costs nothing, so only a prune
    decided on an unconverged fit is worth a warning; every continue was warned about at every check
    of a study whose fits fall short, burying the prunes' warnings. Its problems stay in the advice."""
    from forecast import SamplerSettings
    from forecast.early_stop import EarlyStopConfig

    short = SamplerSettings(draws=20, tune=10, extend_if_flagged=False)  # far too few draws: flagged
    pruner = ForecastPruner(max_step=STEPS[-1], n_eval=N_EVAL, forecaster_kwargs={"sampler": short},
                            config=EarlyStopConfig(target=0.1, saturation_epsilon=None, p_target_threshold=0.05))
    study = optuna.create_study(direction="maximize", pruner=pruner)
    trial = study.ask()
    values = sigmoid_curve(np.array(STEPS[:8], dtype=float), 0.42, 1.5, 400.0, 0.2)  # past 0.1 already
    report_all(trial, STEPS[:8], [float(v) for v in values])
    with caplog.at_level(logging.INFO, logger="forecast.optuna_pruner"):
        assert trial.should_prune() is False
    advice = pruner.advice[trial.number]
    assert advice.details["converged"] is False and advice.details["convergence_problems"]
    assert [r.levelno for r in caplog.records if r.name == "forecast.optuna_pruner"] == [logging.INFO]


def test_a_prune_answer_is_not_repeated_for_reports_it_did_not_judge(monkeypatch):
    """Mutant 'stale answer repeated': between checks (interval_steps) a trial told 'prune' at its
    4th report and asked at its 5th (a caller that did not prune at once: PatientPruner's wrapped
    pruner, a caller's own condition) was told 'prune' again on advice that never saw the 5th."""
    judged = []

    def judge(self, study, trial, n_reports):
        judged.append(n_reports)
        return True

    monkeypatch.setattr(ForecastPruner, "_judge", judge)
    pruner = ForecastPruner(max_step=10_000, interval_steps=3)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    trial = study.ask()
    report_all(trial, [100, 200, 400, 800], [0.2, 0.3, 0.35, 0.4])
    assert trial.should_prune() is True and trial.should_prune() is True  # the same reports: the same answer
    trial.report(0.42, 1600)
    assert trial.should_prune() is False  # not due until 3 reports have come since the check
    assert judged == [4]


@pytest.mark.parametrize("n_eval, column", [(800, [800] * 8), (None, None), (0, None)])
def test_n_eval_reaches_every_row_of_the_fit(monkeypatch, n_eval, column):
    """Mutant 'n_eval not passed': the graded samples behind each value never reached the fit, which
    then had no binomial noise term for them (n_eval=0 is 'not known', as the trainer's settings say)."""
    table, _, _ = table_at_the_first_check(monkeypatch, "maximize", [0.3, 0.4, 0.5, 0.55], [0.2, 0.3, 0.35, 0.4],
                                           n_eval=n_eval)
    assert (list(table["n_eval"]) if "n_eval" in table else None) == column


@pytest.mark.parametrize("rise, warned", [(0.03, False), (0.1, True)])
def test_a_minimised_error_that_rose_by_noise_is_not_taken_for_a_pass_rate(monkeypatch, rise, warned):
    """Mutant 'rising-metric threshold' (any rise, not one beyond a rate's evaluation noise): a study
    that really minimises an error, its best trial's last value a few hundredths above its first, was
    told it minimises a pass rate by mistake."""
    tables_reaching_the_fit(monkeypatch)
    study = optuna.create_study(direction="minimize", pruner=ForecastPruner(max_step=10_000))
    best = study.ask()
    report_all(best, [100, 200, 400, 800], [0.3, 0.2, 0.25, 0.3 + rise])
    study.tell(best, 0.3 + rise)
    trial = study.ask()
    report_all(trial, [100, 200, 400, 800], [0.5, 0.45, 0.42, 0.4])
    with pytest.warns(UserWarning, match="the study minimises, yet") if warned else warnings.catch_warnings():
        if not warned:
            warnings.simplefilter("error")
        with pytest.raises(_FitReached):
            trial.should_prune()


def test_prune_called_by_hand_on_a_finished_trial_answers_without_writing_to_it():
    """Mutant 'finished-trial attrs written': prune() asked about a completed trial (by hand, to read
    its advice) failed with Optuna's UpdateFinishedTrialError instead of answering."""
    pruner = ForecastPruner(max_step=800)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    done = study.ask()
    report_all(done, [100, 200, 400, 800], [0.2, 0.3, 0.35, 0.4])
    study.tell(done, 0.4)
    assert pruner.prune(study, study.trials[0]) is False
    assert pruner.advice[0].rule == "at_budget"
    assert not any(key.startswith("forecast_pruner_") for key in study.trials[0].user_attrs)
