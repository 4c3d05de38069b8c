"""The Optuna pruner benchmark's bookkeeping: compute used, regret, means and ratios, and the
synthetic objective's noise. Checked on hand-made trials; no study is optimised here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import benchmark_module


@pytest.fixture(scope="module")
def bench():
    with benchmark_module("optuna_pruner.py") as module:
        yield module


def outcome(bench, number, state, last_step, true_final):
    return bench.TrialOutcome(number, state, last_step, true_final)


def reference_study(bench):
    """No pruning: three trials, each to step 100."""
    return [outcome(bench, 0, "COMPLETE", 100, 0.50), outcome(bench, 1, "COMPLETE", 100, 0.62),
            outcome(bench, 2, "COMPLETE", 100, 0.58)]


def double(step):
    return 2.0 * step


def test_compute_used_sums_the_compute_of_each_trials_last_step_over_no_pruning(bench):
    pruned = [outcome(bench, 0, "COMPLETE", 100, 0.50), outcome(bench, 1, "PRUNED", 25, 0.62),
              outcome(bench, 2, "PRUNED", 10, 0.58), outcome(bench, 3, "FAIL", None, math.nan)]
    assert bench.compute_spent(pruned, double) == pytest.approx(2 * (100 + 25 + 10))  # no report: no compute
    assert bench.compute_spent(reference_study(bench), double) == pytest.approx(600)
    assert bench.compute_used(pruned, reference_study(bench), double) == pytest.approx(270 / 600)
    assert bench.compute_used(reference_study(bench), reference_study(bench), double) == 1.0
    with pytest.raises(ValueError, match="no compute"):
        bench.compute_used(pruned, [outcome(bench, 0, "FAIL", None, 0.5)], double)


def test_regret_is_the_best_true_final_no_pruning_ran_minus_the_chosen_one(bench):
    ref = reference_study(bench)
    assert bench.regret(0.62, ref) == pytest.approx(0.0)
    assert bench.regret(0.58, ref) == pytest.approx(0.04)
    # a sampler that learns from pruned trials can find a better trial than no pruning did
    assert bench.regret(0.65, ref) == pytest.approx(-0.03)
    assert bench.regret(0.50, ref + [outcome(bench, 3, "FAIL", None, math.nan)]) == pytest.approx(0.12)
    with pytest.raises(ValueError, match="true final"):
        bench.regret(0.5, [outcome(bench, 0, "FAIL", None, math.nan)])


def test_study_row_scores_the_best_trial_on_its_true_final(bench):
    ref = reference_study(bench)
    # Optuna's best trial (picked by its noisy measured final) is trial 2, truly second best
    ours = [outcome(bench, 0, "COMPLETE", 100, 0.50), outcome(bench, 1, "PRUNED", 50, 0.62),
            outcome(bench, 2, "COMPLETE", 100, 0.58)]
    row = bench.study_row("forecast", 7, ours, 2, ref, double, wall_s=3.5)
    assert row == {"pruner": "forecast", "seed": 7, "compute_used": pytest.approx(250 / 300),
                   "best_true": 0.58, "regret": pytest.approx(0.04), "pruned": 1, "trials": 3, "wall_s": 3.5}
    nothing = bench.study_row("median", 7, [outcome(bench, 0, "PRUNED", 10, 0.6)], None, ref, double, wall_s=0.1)
    assert math.isnan(nothing["best_true"]) and math.isnan(nothing["regret"])
    assert nothing["compute_used"] == pytest.approx(10 / 300)


def rows():
    return [
        {"pruner": "nop", "seed": 0, "compute_used": 1.0, "best_true": 0.60, "regret": 0.01, "pruned": 0, "wall_s": 0.1},
        {"pruner": "forecast", "seed": 0, "compute_used": 0.4, "best_true": 0.61, "regret": 0.00, "pruned": 6, "wall_s": 50.0},
        {"pruner": "nop", "seed": 1, "compute_used": 1.0, "best_true": 0.64, "regret": 0.03, "pruned": 0, "wall_s": 0.2},
        {"pruner": "forecast", "seed": 1, "compute_used": 0.6, "best_true": 0.63, "regret": 0.04, "pruned": 3, "wall_s": 70.0},
    ]


def test_means_by_pruner_average_over_studies_and_sum_wall_time(bench):
    means = bench.means_by_pruner(rows())
    assert list(means) == ["nop", "forecast"]
    assert means["forecast"]["compute_used"] == pytest.approx(0.5)
    assert means["forecast"]["best_true"] == pytest.approx(0.62)
    assert means["forecast"]["regret"] == pytest.approx(0.02)
    assert means["forecast"]["pruned"] == pytest.approx(4.5)
    assert means["forecast"]["wall_s"] == pytest.approx(120.0)
    assert means["nop"]["studies"] == 2


def test_ratio_handles_a_baseline_of_zero(bench):
    assert bench.ratio(0.5, 1.0) == 0.5
    assert bench.ratio(0.0, 0.0) == 1.0
    assert bench.ratio(0.01, 0.0) == math.inf


def test_ratio_lines_put_ours_over_each_baseline(bench):
    lines = bench.ratio_lines(bench.means_by_pruner(rows()))
    assert lines == ["  forecast / nop                 compute used  0.50x   regret  1.00x   "
                     "(regret 0.0200 vs 0.0200, difference +0.0000)"]
    assert bench.ratio_lines(bench.means_by_pruner(rows()[::2])) == []  # ours not run
    table = bench.table_lines(bench.means_by_pruner(rows()))
    assert table[0].split() == ["pruner", "compute", "used", "best", "true", "regret", "pruned", "wall", "s"]
    assert table[2].split() == ["forecast", "50.0%", "0.6200", "0.0200", "4.5", "120.0"]


def test_report_steps_are_geometric_up_to_max_step_and_median_warmup_matches_ours(bench):
    setup = bench.Setup()
    steps = setup.steps()
    assert len(steps) == setup.n_steps == 10 and steps[-1] == setup.max_step
    assert np.allclose(np.diff(np.log(steps)), np.log(2) / 2, atol=2e-3)
    # ForecastPruner can first prune at its 4th report; MedianPruner at steps >= n_warmup_steps
    assert bench.median_warmup_step(setup) == steps[3]
    assert setup.step_to_compute(setup.max_step) == 32000.0


def test_measured_curve_is_fixed_by_parameters_and_seed(bench):
    setup = bench.Setup()
    recipe = {"A": 0.65, "B": 1.9, "C_mid": 11272.0}
    a = bench.measured_curve("r", recipe, 1.3, setup, seed=0)
    assert np.array_equal(a, bench.measured_curve("r", recipe, 1.3, setup, seed=0))
    assert not np.array_equal(a, bench.measured_curve("r", recipe, 1.3, setup, seed=1))
    assert not np.array_equal(a, bench.measured_curve("r", recipe, 1.3000001, setup, seed=0))
    assert np.allclose(a * setup.n_eval, np.round(a * setup.n_eval))  # binomial counts of n_eval samples
    truth = bench.true_curve(recipe, 1.3, [setup.step_to_compute(s) for s in setup.steps()])
    sd = np.sqrt(truth * (1 - truth) / setup.n_eval)
    assert np.all(np.abs(a - truth) < 5 * sd)


def test_learning_rate_trades_a_sooner_start_for_a_lower_ceiling(bench):
    recipe = {"A": 0.65, "B": 1.9, "C_mid": 4000.0}
    early, late = 2000.0, 32000.0
    assert bench.true_curve(recipe, 4.0, early) > bench.true_curve(recipe, 1.0, early)  # faster start
    assert bench.true_curve(recipe, 4.0, late) < bench.true_curve(recipe, 1.0, late)  # lower ceiling
    assert bench.true_curve(recipe, 0.25, late) < bench.true_curve(recipe, 1.0, late)


def test_outcomes_from_study_read_last_step_state_and_true_final(bench):
    import optuna

    study = optuna.create_study(direction="maximize")
    study.add_trial(optuna.trial.create_trial(value=0.5, intermediate_values={10: 0.3, 40: 0.5},
                                              user_attrs={"true_final": 0.52}))
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.PRUNED, intermediate_values={10: 0.2},
                                              user_attrs={"true_final": 0.61}))
    got = bench.outcomes_from_study(study)
    assert got == [bench.TrialOutcome(0, "COMPLETE", 40, 0.52), bench.TrialOutcome(1, "PRUNED", 10, 0.61)]


def test_unknown_pruner_is_refused(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--pruners", "forecast,hyperband"])
    assert "unknown" in capsys.readouterr().err


def test_a_mistyped_pruner_gets_the_guess_the_forecast_cli_gives(bench, capsys):
    """--pruners succesive_halving listed the known names as a Python tuple but did not point at the
    one meant, as the forecast CLI does for its names; a name like none of them gets no guess."""
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--pruners", "forecast,succesive_halving,hyperband"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert ("--pruners: unknown 'succesive_halving' (did you mean 'successive_halving'?), 'hyperband'; "
            "known: forecast, median, median_warmup, successive_halving, nop") in err


def test_paired_differences_are_taken_study_by_study(bench):
    # seed 0: -0.6 compute, -0.01 regret; seed 1: -0.4, +0.01 -> mean -0.5 +- 0.1, 0.0 +- 0.01
    mean, se, n = bench.paired_difference(rows(), "compute_used", "forecast", "nop")
    assert (mean, se, n) == (pytest.approx(-0.5), pytest.approx(0.1), 2)
    mean, se, _ = bench.paired_difference(rows(), "regret", "forecast", "nop")
    assert mean == pytest.approx(0.0) and se == pytest.approx(0.01)
    # a seed only one of them ran is left out
    extra = rows() + [{"pruner": "forecast", "seed": 2, "compute_used": 0.1, "best_true": 0.6, "regret": 0.0,
                       "pruned": 9, "wall_s": 1.0}]
    assert bench.paired_difference(extra, "compute_used", "forecast", "nop")[2] == 2
    assert bench.paired_lines(rows()) == ["  forecast - nop                 compute used  -50.0 +- 10.0 points   "
                                          "regret +0.0000 +- 0.0100   (2 studies)"]


def test_a_json_that_cannot_be_written_is_refused_before_any_study(bench, tmp_path, monkeypatch, capsys):
    """--json was written at the end of the studies: a path under a file or a folder failed only then."""
    def no_work(*args, **kwargs):
        raise AssertionError("the studies ran before --json was checked")

    monkeypatch.setattr(bench, "run_study", no_work)
    monkeypatch.setattr(bench, "load_table1", no_work)
    a_file = tmp_path / "a_file"
    a_file.write_text("x\n")
    for json_path, message in ((a_file / "out.json", "is a file"), (tmp_path, "is a folder")):
        with pytest.raises(SystemExit) as exit_info:
            bench.main(["--studies", "1", "--trials", "1", "--json", str(json_path)])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_a_json_stopped_while_written_keeps_the_old_results(bench, tmp_path, monkeypatch):
    """A run stopped while writing --json left half a JSON file in place of the last results."""
    from pathlib import Path

    def write_half(self, data, *args, **kwargs):
        with open(self, "w", encoding="utf-8") as handle:
            handle.write(data[: len(data) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "run_study", lambda *args, **kwargs: ([], None, 0.0, None, None))
    row = {"compute_used": 1.0, "best_true": 0.5, "regret": 0.0, "pruned": 0, "trials": 1}
    monkeypatch.setattr(bench, "study_row", lambda name, seed, *args: {"pruner": name, "seed": seed, **row})
    monkeypatch.setattr(bench, "means_by_pruner", lambda rows: {})
    monkeypatch.setattr(bench, "table_lines", lambda means: [])
    monkeypatch.setattr(Path, "write_text", write_half)
    results = tmp_path / "results.json"
    with open(results, "w", encoding="utf-8") as handle:
        handle.write('{"old": 1}\n')
    with pytest.raises(KeyboardInterrupt):
        bench.main(["--studies", "1", "--trials", "1", "--pruners", "median", "--json", str(results)])
    with open(results, encoding="utf-8") as handle:
        assert handle.read() == '{"old": 1}\n'


def fake_forecast_study(bench, monkeypatch):
    """run_study as a ForecastPruner study says its advice: a stop on a fit that did not converge at
    warning level (printed by Python where nothing is set up), each check's advice at info level."""
    import logging

    def run_study(name, *args, **kwargs):
        logger = logging.getLogger("forecast.optuna_pruner")
        logger.warning("trial 2: stop: P(beats best 'trial-1') = 0.04 < 0.1 (warning: the fit behind this advice "
                       "did not converge: R-hat up to 1.032)")
        logger.info("trial 3: continue: too early")
        return [], None, 1.0, 4, 1

    monkeypatch.setattr(bench, "run_study", run_study)
    row = {"compute_used": 1.0, "best_true": 0.5, "regret": 0.0, "pruned": 1, "trials": 2, "wall_s": 1.0}
    monkeypatch.setattr(bench, "study_row", lambda name, seed, *args: {"pruner": name, "seed": seed, **row})


def test_the_pruners_advice_is_kept_out_of_the_table_and_its_unconverged_stops_counted(bench, monkeypatch, capsys,
                                                                                      caplog):
    """ForecastPruner's long 'trial N: stop: ...' lines (its logger's warnings, which Python prints to
    stderr in a script that sets up no logging) came in among the results table. They are kept out,
    the study's line counts them, and --verbose shows each check's advice; the logger is left as it was."""
    import logging

    logger = logging.getLogger("forecast.optuna_pruner")
    before = (logger.level, logger.propagate, list(logger.handlers))
    fake_forecast_study(bench, monkeypatch)
    with caplog.at_level(logging.INFO):
        bench.main(["--studies", "1", "--trials", "2", "--pruners", "forecast"])
    out, err = capsys.readouterr()
    assert not [r for r in caplog.records if r.name == "forecast.optuna_pruner"]  # nothing reaches a handler above
    assert "trial 2: stop" not in out + err
    study_lines = [line for line in out.splitlines() if line.startswith("  forecast ")]
    assert study_lines[0].endswith("fits 4, 1 stop on a fit that did not converge (--verbose: each)")
    assert (logger.level, logger.propagate, list(logger.handlers)) == before

    bench.main(["--studies", "1", "--trials", "2", "--pruners", "forecast", "--verbose"])
    out, err = capsys.readouterr()
    assert "    trial 2: stop: P(beats best" in err and "    trial 3: continue: too early" in err
    assert "trial 2: stop" not in out and "fits 4, 1 stop on a fit that did not converge\n" in out
    assert (logger.level, logger.propagate, list(logger.handlers)) == before


def test_unconverged_stops_counts_the_forecast_pruners_stops_on_fits_that_did_not_converge(bench):
    from types import SimpleNamespace

    def rec(stop, converged):
        return SimpleNamespace(stop=stop, details={"converged": converged})

    pruner = SimpleNamespace(advice={0: rec(True, False), 1: rec(True, True), 2: rec(False, False), 3: rec(True, False)})
    assert bench.unconverged_stops(pruner) == 2
    assert bench.unconverged_stops(SimpleNamespace()) is None  # Optuna's own pruners keep no advice
