"""Backtest: the replay, the baseline policies (checked against Optuna's own pruner), and
`forecast backtest --json` on a small synthetic sweep."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import optuna
import pandas as pd
import pytest

from forecast.backtest import (
    TRUTH_COLUMN,
    BacktestConfig,
    MedianRule,
    NoStopping,
    SuccessiveHalving,
    SweepView,
    backtest,
    checkpoint_schedule,
    halving_survivors,
    hindsight_ceiling,
    make_policy,
    median_should_stop,
    replay,
    resample_evaluation_noise,
    smoothed_final,
    smoothed_trajectory,
)
from forecast.cli import main
from forecast.data import RunDataError, validate_runs
from forecast.synthetic import load_table1, simulate_sweep

optuna.logging.set_verbosity(optuna.logging.WARNING)


def curve_table(finals: dict[str, float], n: int = 10, slow: tuple = ()) -> pd.DataFrame:
    """Straight-line runs from 0.2 to their final value; `slow` runs stay flat for half the run,
    then climb twice as fast to a higher final."""
    rows = []
    for run, final in finals.items():
        for i in range(n):
            frac = (i + 1) / n
            metric = 0.2 + (final - 0.2) * (max(0.0, 2 * frac - 1) if run in slow else frac)
            rows.append({"run_id": run, "recipe": run, "compute": 10.0 * (i + 1), "metric": metric})
    return pd.DataFrame(rows)


def test_smoothed_final_and_schedule():
    assert smoothed_final([0.1, 0.5, 0.6, 0.7]) == pytest.approx(0.6)
    table = curve_table({"a": 0.5, "b": 0.6}, n=10)
    assert checkpoint_schedule(table, min_evals=4, growth=2.0) == [40.0, 80.0]


@pytest.mark.parametrize("own, others", [
    ([0.1, 0.3], [0.2, 0.25, 0.4, 0.5, 0.6]),  # best so far 0.3 < median 0.4: prune
    ([0.5, 0.3], [0.2, 0.25, 0.4, 0.5, 0.6]),  # best so far 0.5 >= median: keep
    ([0.1, 0.2], [0.3, 0.4, 0.5]),  # fewer than 5 others: no verdict yet
])
def test_median_rule_agrees_with_optunas_median_pruner(own, others):
    assert median_should_stop(own, others, n_startup=5) == optuna_prunes(optuna.pruners.MedianPruner(n_startup_trials=5), own, others)


def optuna_prunes(pruner, own, others) -> bool:
    """Optuna's verdict on a trial reporting `own`. Optuna prunes against completed trials; give
    it the others as completed trials with their value at the trial's last step."""
    study = optuna.create_study(direction="maximize", pruner=pruner)
    step = len(own) - 1
    for value in others:
        study.add_trial(optuna.trial.create_trial(value=value, intermediate_values={step: value}))
    trial = study.ask()
    for s, v in enumerate(own):
        trial.report(v, s)
    return trial.should_prune()


@pytest.mark.parametrize("percentile", [10.0, 25.0, 50.0, 75.0])
@pytest.mark.parametrize("own", [[0.1, 0.3], [0.2, 0.45], [0.5, 0.52], [0.55, 0.2]])
def test_percentile_rule_agrees_with_optunas_percentile_pruner(own, percentile):
    """The median rule's knob is PercentilePruner's: keep the top `percentile`%."""
    others = [0.2, 0.25, 0.4, 0.5, 0.6, 0.35]
    pruner = optuna.pruners.PercentilePruner(percentile, n_startup_trials=5)
    assert median_should_stop(own, others, n_startup=5, percentile=percentile) == optuna_prunes(pruner, own, others)


def test_a_smaller_percentile_stops_more():
    table = curve_table({f"r{i}": 0.3 + 0.03 * i for i in range(8)})
    config = BacktestConfig(min_evals=3, check_growth=1.5)
    stopped = [replay(table, MedianRule(n_startup=5, percentile=p), config).n_stopped for p in (75.0, 50.0, 20.0)]
    assert stopped[0] <= stopped[1] <= stopped[2] and stopped[0] < stopped[2]
    with pytest.raises(ValueError, match="percentile"):
        median_should_stop([0.1], [0.2] * 5, percentile=120.0)


def test_the_median_rule_compares_runs_at_the_same_training_step_not_the_same_evaluation_number():
    """Runs evaluated at different intervals (a W&B export with gaps, a recipe evaluated half as often) were
    lined up by evaluation number: a run's 3rd evaluation, at step 30, was set beside the others' 3rd, at step
    15. Optuna compares the values trials reported at one step; so does the run format's `step` column here."""
    from forecast.backtest import SweepView

    rows = []
    for i in range(6):  # five runs evaluated every 5 steps, rising with training
        rows += [{"run_id": f"often{i}", "recipe": "often", "compute": 5.0 * k, "step": 5 * k,
                  "metric": 0.1 + 0.02 * k + 0.001 * i} for k in range(1, 7)]
    # evaluated every 10 steps: at its step 30 it stands below the others' step 30 (0.22), above their step 15 (0.16)
    rows += [{"run_id": "sparse", "recipe": "sparse", "compute": 10.0 * k, "step": 10 * k, "metric": 0.1 + 0.03 * k}
             for k in range(1, 4)]
    revealed = pd.DataFrame(rows)

    def verdict(table):
        view = SweepView(revealed=table, active=["sparse"], finished=[], stopped={}, budgets={}, checkpoint=30.0,
                         n_rows_total=len(table), index=0)
        return MedianRule(n_startup=5).decide(view)

    said = verdict(revealed)
    assert list(said) == ["sparse"] and "at step 30" in said["sparse"] and "0.2225" in said["sparse"], said
    assert verdict(revealed.drop(columns="step")) == {}  # no step column: by evaluation number, as before


def test_halving_keeps_the_top_share():
    assert halving_survivors({"a": 0.1, "b": 0.4, "c": 0.3, "d": 0.2}, eta=4) == {"b"}
    assert halving_survivors({"a": 0.1, "b": 0.4}, eta=4) == {"b"}  # always one survivor
    assert len(halving_survivors({str(i): i for i in range(9)}, eta=3)) == 3


def test_replay_scores_no_stopping_median_and_halving():
    table = curve_table({f"r{i}": 0.3 + 0.03 * i for i in range(8)} | {"late": 0.7}, slow=("late",))
    config = BacktestConfig(min_evals=3, check_growth=1.5)
    none = replay(table, NoStopping(), config)
    assert (none.compute_fraction, none.regret, none.chosen_run) == (1.0, 0.0, "late")
    median = replay(table, MedianRule(n_startup=5), config)
    assert median.compute_fraction < 0.7
    assert "late" in {s["run_id"] for s in median.stops}  # the slow starter is killed early...
    assert median.regret > 0.1  # ...and that is the regret
    assert all("median" in s["reason"] for s in median.stops)
    halving = replay(table, SuccessiveHalving(eta=3), config)
    assert halving.n_stopped == 8 and halving.regret > 0.1


def test_hindsight_ceiling_finishes_the_best_and_stops_the_rest_at_the_first_check():
    table = curve_table({"a": 0.5, "b": 0.6, "c": 0.4}, n=10)  # 3 runs, compute 10..100 each
    config = BacktestConfig(min_evals=4, check_growth=2.0)  # first checkpoint at compute 40
    # b runs to 100, a and c stop at 40: 180 of 300 used
    assert hindsight_ceiling(table, config) == pytest.approx(1 - 180 / 300)
    # no policy that keeps the best run saves more: successive halving keeping one run at the
    # first rung reaches the ceiling exactly, and only because it kept the right run
    halving = replay(table, SuccessiveHalving(eta=3), config)
    assert halving.regret == 0.0 and halving.compute_saved == pytest.approx(hindsight_ceiling(table, config))


def test_regret_counts_a_stopped_run_where_it_stopped():
    table = curve_table({"a": 0.5, "b": 0.6})

    class StopBAtOnce:
        name = "stop_b"

        def checkpoints(self, schedule, end):
            return schedule[:1]

        def decide(self, view):
            return {"b": "test"}

    result = replay(table, StopBAtOnce(), BacktestConfig(min_evals=4))
    # b stopped at its 4th evaluation: mean of evaluations 2-4 of b is what it has
    held_b = np.mean([0.2 + 0.4 * k / 10 for k in (2, 3, 4)])
    assert result.chosen_run == "a"  # a's final (0.48) beats what b has in hand
    assert result.regret == pytest.approx(smoothed_final([0.2 + 0.4 * k / 10 for k in (8, 9, 10)]) - smoothed_final([0.2 + 0.3 * k / 10 for k in (8, 9, 10)]))
    assert held_b < result.chosen_value
    assert result.compute_fraction == pytest.approx((100 + 40) / 200)


def test_smoothed_trajectory_is_a_centred_moving_mean():
    values = [0.1, 0.3, 0.2, 0.6, 0.4, 0.5]
    smooth = smoothed_trajectory(values, window=3)
    assert smooth[0] == pytest.approx(0.2)  # (0.1 + 0.3) / 2: fewer at the ends
    assert smooth[2] == pytest.approx((0.3 + 0.2 + 0.6) / 3)
    assert smooth[-1] == pytest.approx(0.45)
    np.testing.assert_allclose(smoothed_trajectory(values, window=1), values)


def test_a_replica_keeps_the_runs_and_redraws_the_noise_around_the_smoothed_truth():
    table = curve_table({"a": 0.5, "b": 0.6}, n=12)
    table["n_eval"] = 1200
    replica = resample_evaluation_noise(table, rng=3, window=5)
    assert list(replica.columns) == list(table.columns) + [TRUTH_COLUMN]
    assert len(replica) == len(table) and set(replica["run_id"]) == {"a", "b"}
    for run, g in replica.groupby("run_id"):
        original = table[table["run_id"] == run].sort_values("compute")["metric"].to_numpy()
        np.testing.assert_allclose(g[TRUTH_COLUMN], smoothed_trajectory(original, 5))
        assert not np.allclose(g["metric"], original)  # the evaluations were drawn again...
        np.testing.assert_allclose(g["metric"] * 1200, np.round(g["metric"] * 1200))  # ...as counts of 1200
    # binomial noise of 1200 samples: sd about 0.014 around the truth, not more, not none
    assert 0.007 < float((replica["metric"] - replica[TRUTH_COLUMN]).std()) < 0.025
    again = resample_evaluation_noise(table, rng=3, window=5)
    pd.testing.assert_frame_equal(replica, again)  # one seed, one replica
    assert not resample_evaluation_noise(table, rng=4)["metric"].equals(replica["metric"])
    with pytest.raises(ValueError, match="n_eval"):
        resample_evaluation_noise(table.drop(columns="n_eval"))


def test_regret_on_the_truth_when_the_measured_finals_mislead():
    # measured, a ends above b; in truth b is better. No stopping chooses a on what it sees.
    table = curve_table({"a": 0.52, "b": 0.50})
    table[TRUTH_COLUMN] = np.where(table["run_id"] == "b", table["metric"] + 0.04, table["metric"])
    seen_columns = []

    class Watcher(NoStopping):
        def checkpoints(self, schedule, end):
            return schedule[:1]

        def decide(self, view):
            seen_columns.extend(view.revealed.columns)
            return {}

    config = BacktestConfig(min_evals=4)
    result = replay(table, Watcher(), config, truth=TRUTH_COLUMN)
    assert seen_columns and TRUTH_COLUMN not in seen_columns  # the policy never sees the truth
    assert result.chosen_run == "a" and result.best_run == "b"
    true_final = lambda run: smoothed_final(table[table["run_id"] == run][TRUTH_COLUMN])  # noqa: E731
    assert result.regret == pytest.approx(true_final("b") - true_final("a"))  # 0.04 - 0.02 at the end
    assert result.notes["measured_regret"] == 0.0  # on measured finals it looked right
    plain = replay(table, NoStopping(), config)
    assert plain.regret == 0.0 and "measured_regret" not in plain.notes
    # the hindsight ceiling finishes the true best run: here b, planned for twice a's compute
    longer = pd.concat([curve_table({"a": 0.52}, n=10), curve_table({"b": 0.50}, n=20)], ignore_index=True)
    longer[TRUTH_COLUMN] = np.where(longer["run_id"] == "b", longer["metric"] + 0.04, longer["metric"])
    assert hindsight_ceiling(longer, config) == pytest.approx(1 - (100 + 40) / 300)  # finishes a
    assert hindsight_ceiling(longer, config, truth=TRUTH_COLUMN) == pytest.approx(1 - (200 + 40) / 300)  # finishes b
    with pytest.raises(ValueError, match="truth column"):
        replay(table.drop(columns=TRUTH_COLUMN), NoStopping(), config, truth=TRUTH_COLUMN)



def test_backtest_in_python_checks_the_truth_column_as_the_command_does():
    """`forecast backtest --truth` refuses a truth column that holds no pass rates; backtest(truth=)
    in a notebook took one in percent and scored a regret 100 times too large (2.2 for 0.022), and
    left a run whose true value was missing out of the scoring, without a word."""
    table = curve_table({"a": 0.52, "b": 0.50})
    table[TRUTH_COLUMN] = np.where(table["run_id"] == "b", table["metric"] + 0.04, table["metric"])
    config = BacktestConfig(min_evals=4)
    true_final = {run: smoothed_final(g[TRUTH_COLUMN]) for run, g in table.groupby("run_id")}
    regret = backtest(table, ["no_stopping"], config, truth=TRUTH_COLUMN).results[0].regret
    assert regret == pytest.approx(true_final["b"] - true_final["a"])
    percent = table.assign(**{TRUTH_COLUMN: 100 * table[TRUTH_COLUMN]})
    with pytest.raises(RunDataError, match=rf"column '{TRUTH_COLUMN}', run 'a', row 1: must lie in \[0, 1\], got 23.2 "
                                           r"\(percentages\?"):
        backtest(percent, ["no_stopping"], config, truth=TRUTH_COLUMN)
    missing = table.astype({TRUTH_COLUMN: "Float64"})
    missing.loc[19, TRUTH_COLUMN] = pd.NA
    with pytest.raises(RunDataError, match=rf"column '{TRUTH_COLUMN}', run 'b', row 20: is missing"):
        backtest(missing, ["no_stopping"], config, truth=TRUTH_COLUMN)
    assert missing[TRUTH_COLUMN].dtype == "Float64"  # the caller's table is left as it was


def test_backtest_json_on_a_small_synthetic_sweep(tmp_path, capsys):
    """Every policy, ours included (real refits: 2 runs x 32 points, the structure other advice
    tests share, so the compiled model is reused)."""
    recipes = load_table1().rename(columns={"run": "recipe"})
    recipes = recipes[recipes["recipe"].isin(["scalerl_8gen", "scalerl_32k_gen"])]
    simulate_sweep(recipes, n_seeds=1, n_points=32, rng=5).to_csv(tmp_path / "runs.csv", index=False)
    code = main(["backtest", str(tmp_path / "runs.csv"), "--json", "--growth", "10", "--min-gain", "0.003", "--max-stop-share", "0.75",
                 "--no-keep-runner-up", "--rule", "p_target_threshold=0.2", "--rule", "keep_leader=false",
                 "--out", str(tmp_path / "bt.json")])
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    assert set(payload["policies"]) == {"forecast", "median", "successive_halving", "least_squares", "no_stopping"}
    for name, result in payload["policies"].items():
        assert 0 < result["compute_fraction"] <= 1, name
        assert result["regret"] >= -0.05, name
    assert payload["policies"]["no_stopping"]["compute_fraction"] == 1.0
    assert payload["config"]["early_stop"]["min_gain_per_compute"] == 0.003  # the flag reaches the rules
    assert payload["config"]["early_stop"]["max_stop_share"] == 0.75
    assert payload["config"]["early_stop"]["keep_runner_up"] is False  # on by default
    assert payload["config"]["early_stop"]["p_target_threshold"] == 0.2  # --rule: the fields without a flag
    assert payload["config"]["early_stop"]["keep_leader"] is False
    assert "mean of the last 3" in payload["definitions"]["regret"]
    assert 0 < payload["hindsight_ceiling"] < 1  # the yardstick for compute saved comes with the scores
    assert json.loads((tmp_path / "bt.json").read_text())["policies"].keys() == payload["policies"].keys()


def test_backtest_cli_bad_input(tmp_path, capsys):
    table = curve_table({"a": 0.5, "b": 0.6})
    table.to_csv(tmp_path / "runs.csv", index=False)
    assert main(["backtest", str(tmp_path / "runs.csv"), "--policies", "forecast,coinflip"]) == 2
    assert "--policies: unknown 'coinflip'; known: forecast, median" in capsys.readouterr().err
    # a typo is pointed at its likely name, as a recipe's is, each of several
    assert main(["backtest", str(tmp_path / "runs.csv"), "--policies", "forecast,medain,halving,Least_Squares"]) == 2
    assert ("--policies: unknown 'medain' (did you mean 'median'?), 'halving', 'Least_Squares' (did you mean "
            "'least_squares'?); known: forecast, median") in capsys.readouterr().err
    # a repeated policy was replayed twice, printed twice and saved once (the JSON keys results by name)
    assert main(["backtest", str(tmp_path / "runs.csv"), "--policies", "median,no_stopping,median", "--json"]) == 2
    assert "--policies: median given more than once" in capsys.readouterr().err
    with pytest.raises(ValueError, match="given more than once: median"):
        backtest(table, ["median", "median"])
    assert main(["backtest", str(tmp_path / "runs.csv"), "--growth", "1"]) == 2
    for growth in ("1.0000001", "inf"):  # tens of millions of checks (the replay never ended); one check
        assert main(["backtest", str(tmp_path / "runs.csv"), "--growth", growth]) == 2
        assert "--growth must be finite and at least 1.01" in capsys.readouterr().err
    # an output under a file, found after the replay (FileExistsError); a saved fit as the runs
    assert main(["backtest", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "runs.csv" / "bt.json")]) == 2
    assert "runs.csv is a file, so nothing can be written under it" in capsys.readouterr().err
    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "fit.nc").write_bytes(b"")
    assert main(["backtest", str(tmp_path / "fit")]) == 2
    assert "is a saved fit; `forecast backtest` reads a run table or a folder of run logs" in capsys.readouterr().err
    assert main(["backtest", str(tmp_path / "runs.csv"), "--rule", "keep_leeder=false"]) == 2
    assert ("--rule 'keep_leeder=false': unknown name 'keep_leeder' (did you mean 'keep_leader'?); "
            "expected NAME=VALUE with NAME one of") in capsys.readouterr().err
    assert main(["backtest", str(tmp_path / "runs.csv"), "--rule", "p_target_threshold=1.5"]) == 2
    assert "p_target_threshold must lie in (0, 1), got 1.5" in capsys.readouterr().err
    assert main(["backtest", str(tmp_path / "runs.csv"), "--margin", "0.02", "--rule", "margin=0.03"]) == 2
    assert "--margin and --rule margin=... both set it" in capsys.readouterr().err
    assert main(["backtest", str(tmp_path / "runs.csv"), "--min-gain", "-0.1"]) == 2
    assert "--min-gain must be >= 0" in capsys.readouterr().err
    assert main(["backtest", str(tmp_path / "runs.csv"), "--max-stop-share", "0"]) == 2
    assert "--max-stop-share must lie in (0, 1], got 0" in capsys.readouterr().err
    assert main(["backtest", str(tmp_path / "runs.csv"), "--halving-eta", "1"]) == 2
    assert "--halving-eta must be an integer >= 2, got 1" in capsys.readouterr().err
    assert main(["backtest", str(tmp_path / "runs.csv"), "--median-percentile", "150"]) == 2
    assert "--median-percentile must lie in [0, 100], got 150" in capsys.readouterr().err
    assert main(["backtest", str(tmp_path / "runs.csv"), "--protect-top", "0"]) == 2
    assert "--protect-top must lie in (0, 100], got 0" in capsys.readouterr().err
    assert main(["backtest", str(tmp_path / "runs.csv"), "--prior", "bogus=1"]) == 2
    assert "--prior 'bogus=1'" in capsys.readouterr().err


def test_backtest_cli_priors_reach_the_config(tmp_path, capsys):
    curve_table({"a": 0.5, "b": 0.6}).to_csv(tmp_path / "runs.csv", index=False)
    code = main(["backtest", str(tmp_path / "runs.csv"), "--policies", "median,no_stopping", "--json",
                 "--prior", "b_mu=0.5", "--prior", "a_mu_offset=1"])
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    priors = payload["config"]["forecaster_kwargs"]["priors"]
    assert (priors["b_mu"], priors["a_mu_offset"], priors["m_mu"]) == (0.5, 1.0, 0.0)
    from forecast import __version__  # with the settings, what it takes to repeat it

    assert payload["forecast_version"] == __version__


def test_backtest_cli_baseline_settings_reach_the_baselines(tmp_path, capsys):
    """--median-percentile and --halving-eta change what the baselines do, and the JSON says so."""
    table = curve_table({f"r{i}": 0.3 + 0.03 * i for i in range(8)})
    table.to_csv(tmp_path / "runs.csv", index=False)

    def run(*flags):
        assert main(["backtest", str(tmp_path / "runs.csv"), "--policies", "median,successive_halving", "--json", *flags]) == 0
        return json.loads(capsys.readouterr().out)

    plain, tuned = run(), run("--median-percentile", "20", "--halving-eta", "2", "--protect-top", "10")
    assert tuned["config"]["median_percentile"] == 20 and tuned["config"]["halving_eta"] == 2
    assert tuned["config"]["early_stop"]["protect_top_percent"] == 10 and plain["config"]["early_stop"]["protect_top_percent"] is None
    assert tuned["policies"]["median"]["n_stopped"] > plain["policies"]["median"]["n_stopped"]
    assert tuned["policies"]["successive_halving"]["n_checks"] > plain["policies"]["successive_halving"]["n_checks"]


def test_a_backtest_with_nothing_to_decide_says_so(tmp_path, capsys):
    """One run: least squares "saved" 86% of its compute beside a ceiling of 0%, without a word."""
    curve_table({"a": 0.5}).to_csv(tmp_path / "one.csv", index=False)
    assert main(["backtest", str(tmp_path / "one.csv"), "--policies", "median", "--json"]) == 0
    assert "the table holds 1 run: a stopping policy needs runs to compare" in capsys.readouterr().err
    curve_table({"a": 0.5, "b": 0.6}, n=3).to_csv(tmp_path / "short.csv", index=False)
    assert main(["backtest", str(tmp_path / "short.csv"), "--policies", "median", "--json"]) == 0
    assert "no run has 4 evaluations (min_evals)" in capsys.readouterr().err
    curve_table({"a": 0.5, "b": 0.6}).to_csv(tmp_path / "fine.csv", index=False)
    assert main(["backtest", str(tmp_path / "fine.csv"), "--policies", "successive_halving", "--json"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_sweep_too_small_for_the_median_rule_is_told_so_and_its_startup_can_be_set(tmp_path, capsys):
    """A sweep of 4 runs printed 'median 0.0% saved' without a word: the rule judges a run only beside 5 others
    at its step (Optuna's n_startup_trials), and the number could not be set from the command line."""
    curve_table({f"r{i}": 0.3 + 0.05 * i for i in range(4)}).to_csv(tmp_path / "four.csv", index=False)

    def run(*flags):
        assert main(["backtest", str(tmp_path / "four.csv"), "--policies", "median", "--json", *flags]) == 0
        said = capsys.readouterr()
        return json.loads(said.out)["policies"]["median"], said.err

    default, err = run()
    assert default["n_stopped"] == 0
    assert ("the median rule judges a run only beside 5 other runs at its step, and the table holds 4 runs: it stops "
            "none here (--median-startup sets the number, Optuna's n_startup_trials)") in err
    fewer, err = run("--median-startup", "2")
    assert fewer["n_stopped"] > 0 and "median rule" not in err
    assert main(["backtest", str(tmp_path / "four.csv"), "--median-startup", "0"]) == 2
    assert "--median-startup must be an integer >= 1, got 0" in capsys.readouterr().err


def test_backtest_cli_scores_regret_on_a_truth_column(tmp_path, capsys):
    """--truth: measured, a ends ahead; in truth b does. No stopping chooses a either way; the
    regret is the truth's, and the JSON says what it was scored on."""
    table = curve_table({"a": 0.52, "b": 0.50})
    table[TRUTH_COLUMN] = np.where(table["run_id"] == "b", table["metric"] + 0.04, table["metric"])
    table.to_csv(tmp_path / "runs.csv", index=False)

    def run(*flags):
        assert main(["backtest", str(tmp_path / "runs.csv"), "--policies", "no_stopping", "--json", *flags]) == 0
        return json.loads(capsys.readouterr().out)

    measured, true = run(), run("--truth", TRUTH_COLUMN)
    assert measured["policies"]["no_stopping"]["regret"] == 0.0
    assert true["policies"]["no_stopping"]["regret"] == pytest.approx(0.04 - 0.02 * 0.9)  # at the mean of the last 3
    assert true["policies"]["no_stopping"]["notes"]["measured_regret"] == 0.0
    assert f"column '{TRUTH_COLUMN}'" in true["definitions"]["regret"]
    assert main(["backtest", str(tmp_path / "runs.csv"), "--truth", "oracle"]) == 2
    assert "--truth column 'oracle' is not in the run table" in capsys.readouterr().err
    table.loc[13, TRUTH_COLUMN] = 1.5
    table.to_csv(tmp_path / "bad.csv", index=False)
    assert main(["backtest", str(tmp_path / "bad.csv"), "--truth", TRUTH_COLUMN]) == 2
    err = capsys.readouterr().err
    assert "bad.csv, column 'true_metric', run 'b', row 15: must lie in [0, 1], got 1.5" in err


def test_a_truth_column_not_in_the_table_is_said_with_the_columns_present(tmp_path, capsys):
    """A --truth column that is not there was said without the columns that are (load_runs' missing
    columns are said with them): a misspelt true_metric left the user to open the file to find it."""
    table = curve_table({"a": 0.52, "b": 0.50})
    table[TRUTH_COLUMN] = table["metric"]
    table.to_csv(tmp_path / "runs.csv", index=False)
    assert main(["backtest", str(tmp_path / "runs.csv"), "--policies", "no_stopping", "--truth", "true_metrc"]) == 2
    err = capsys.readouterr().err
    assert "--truth column 'true_metrc' is not in the run table (columns present: run_id, " in err
    assert f", {TRUTH_COLUMN})" in err and "_line" not in err and "_source" not in err  # the reader's own are not the user's


@pytest.mark.parametrize("planned", [False, True])
def test_ours_is_told_the_sweeps_largest_budget_only_when_asked(intercept_advice_fit, planned):
    """BacktestConfig.planned_horizon: ours' fits get the largest planned budget as their horizon."""
    from conftest import FitIntercepted

    import forecast.backtest as backtest_module

    seen = intercept_advice_fit(backtest_module)
    table = curve_table({"a": 0.5, "b": 0.6}, n=10)
    table = table[(table["run_id"] == "a") | (table["compute"] <= 60)]  # b is planned to 60, a to 100
    with pytest.raises(FitIntercepted):
        replay(table, backtest_module.make_policy("forecast", BacktestConfig(planned_horizon=planned)))
    assert seen["horizon"] == (100.0 if planned else None)


def test_every_refit_of_ours_has_the_rows_of_a_fit_of_the_whole_sweep(intercept_advice_fit):
    """Ours padded each refit to the sweep's rows exactly (250 here), and a fit takes at least its own
    rows rounded up to 64: a checkpoint that revealed more than 192 of them was fitted on 256 rows
    where the earlier ones had 250, a second model compiled mid-backtest (20-40 s on two cores), and
    neither matched a fit of the whole sweep or a live advice fit of it (256 rows: `forecast watch`
    right after a backtest in a notebook compiled its own). Every refit now has the whole sweep's."""
    from conftest import FitIntercepted

    import forecast.backtest as backtest_module
    from forecast.model import prepare_data

    seen = intercept_advice_fit(backtest_module)
    sweep = curve_table({f"r{k}": 0.5 + 0.01 * k for k in range(5)}, n=50)
    policy = make_policy("forecast", BacktestConfig())
    rows = []
    for per_run in (12, 45):  # an early checkpoint and a late one
        revealed = sweep.groupby("run_id").head(per_run)
        view = SweepView(revealed=revealed, active=sorted(sweep["run_id"].unique()), finished=[], stopped={},
                         budgets=dict.fromkeys(sweep["run_id"].unique(), 500.0), checkpoint=10.0 * per_run,
                         n_rows_total=len(sweep), index=0)
        with pytest.raises(FitIntercepted):
            policy.decide(view)
        rows.append(len(prepare_data(revealed, pad_to=seen["pad_to"]).y))
    assert rows == [len(prepare_data(sweep).y)] * 2 == [256, 256]


def test_backtest_of_a_folder_warns_about_runs_still_in_flight(tmp_path, capsys):
    table = curve_table({"a": 0.5, "b": 0.6})
    for run, rows in table.groupby("run_id"):
        folder = tmp_path / "sweep" / run
        folder.mkdir(parents=True)
        rows.to_json(folder / "evals.jsonl", orient="records", lines=True)
    (tmp_path / "sweep" / table["run_id"].iloc[0] / "summary.json").write_text("{}")
    assert main(["backtest", str(tmp_path / "sweep"), "--policies", "no_stopping", "--json"]) == 0
    err = capsys.readouterr().err
    assert "1 run(s)" in err and "have no summary.json and may still be training" in err
    for folder in (tmp_path / "sweep").iterdir():
        (folder / "summary.json").write_text("{}")
    assert main(["backtest", str(tmp_path / "sweep"), "--policies", "no_stopping", "--json"]) == 0
    assert "may still be training" not in capsys.readouterr().err


def test_backtest_of_a_folder_says_which_runs_their_own_advisor_stopped(tmp_path, capsys):
    """A sweep trained with --advisor-every holds runs its advisor ended early: they have summary.json,
    so the backtest took them as finished without a word, and scored 'no_stopping' (every run to its
    end) and regret on where the advisor had stopped them."""
    table = curve_table({"a": 0.5, "b": 0.6})
    for run, rows in table.groupby("run_id"):
        folder = tmp_path / "sweep" / run
        folder.mkdir(parents=True)
        rows.to_json(folder / "evals.jsonl", orient="records", lines=True)
        (folder / "summary.json").write_text("{}")
    stopped = table["run_id"].iloc[0]
    (tmp_path / "sweep" / stopped / "stopped.json").write_text(json.dumps({"step": 8, "advice": {"rule": "beats_best"}}))
    assert main(["backtest", str(tmp_path / "sweep"), "--policies", "no_stopping", "--json"]) == 0
    err = capsys.readouterr().err
    assert f"1 run(s) in {tmp_path / 'sweep'} were stopped early by their own advisor (stopped.json: {stopped})" in err
    assert "may still be training" not in err


def test_least_squares_is_judged_by_the_same_rules_guards_included():
    """It called evaluate_rules run by run, so the stop cap, the runner-up hold and one-at-a-time
    stops never applied: `vs least_squares` compared ours with a baseline without the guards."""
    from forecast.early_stop import EarlyStopConfig

    compute = np.geomspace(1e3, 1e6, 24)

    def curve(asymptote):  # ScaleRL sigmoid, C_mid 3e4, B 1.5, R0 0.05
        return 0.05 + (asymptote - 0.05) / (1 + (3e4 / compute) ** 1.5)

    table = pd.concat([pd.DataFrame({"run_id": name, "recipe": name, "compute": compute, "metric": curve(a)})
                       for name, a in [("strong", 0.8)] + [(f"weak{i}", 0.25 + 0.01 * i) for i in range(4)]])
    runs = validate_runs(table)

    def first_check_stops(share):
        config = BacktestConfig(early_stop=EarlyStopConfig(max_stop_share=share, keep_runner_up=False))
        stops = replay(runs, make_policy("least_squares", config), config).stops
        first = min(s["checkpoint"] for s in stops)
        return sorted(s["run_id"] for s in stops if s["checkpoint"] == first)

    assert first_check_stops(0.5) == ["weak0", "weak1"]  # half of the 5 in flight, weakest first
    assert first_check_stops(1.0) == ["weak0", "weak1", "weak2", "weak3"]


def test_a_backtest_says_when_ours_stops_rest_on_fits_that_did_not_converge(tmp_path, capsys, monkeypatch):
    """Every command showing numbers from a fit warns when it did not converge; the backtest kept
    unconverged refits of ours in the JSON's notes alone (4 of 4 on the shipped sweep at --growth 2)."""
    import forecast.backtest as backtest_module

    def unconverged_decide(self, view):  # a refit that did not converge, and no stop
        self.n_unconverged += 1
        return {}

    monkeypatch.setattr(backtest_module.ForecastRule, "decide", unconverged_decide)
    curve_table({"a": 0.5, "b": 0.6}).to_csv(tmp_path / "runs.csv", index=False)
    assert main(["backtest", str(tmp_path / "runs.csv"), "--policies", "forecast,median", "--json"]) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    checks = payload["policies"]["forecast"]["n_checks"]
    assert checks > 0 and payload["policies"]["forecast"]["notes"]["unconverged_fits"] == checks
    assert f"{checks} of the {checks} refits of the forecast policy did not converge" in captured.err
    assert "(0 stops made on them; each chain alone said stop too on 0)" in captured.err  # as under the table
    assert not [line for line in captured.err.splitlines() if "median" in line and "converge" in line]


def test_a_backtest_counts_ours_stops_on_flagged_fits_and_those_each_chain_alone_made_too(monkeypatch):
    """Ours' refits are flagged nearly always, so the backtest's warning said nothing about whether the flag
    mattered to its stops: it now counts the stops made on flagged fits, and those each chain's draws alone
    made too (recommend_runs' chains_agree). Here every check stops the weakest run while two or more are in
    flight, and each chain agrees on 'a' alone; the converged check's stop is not counted, nor the flagged checks' continues."""
    import types

    import forecast.backtest as backtest_module
    from forecast.early_stop import Recommendation

    checks = []

    def fit(table, **_):  # the second check's fit converged, the others did not
        checks.append(len(checks))
        return types.SimpleNamespace(run_ids=sorted(table["run_id"].unique())), len(checks) == 2

    def recommend(fc, budgets, config, **_):
        weakest = min(budgets)
        return {run: Recommendation("stop" if run == weakest and len(budgets) > 1 else "continue", "beats_best", "m", run_id=run,
                                    details={"chains_agree": run == "a"}) for run in budgets}

    monkeypatch.setattr(backtest_module, "fit_for_advice", fit)
    monkeypatch.setattr(backtest_module, "recommend_runs", recommend)
    config = BacktestConfig(check_growth=1.25)
    result = replay(validate_runs(curve_table({"a": 0.5, "b": 0.6, "c": 0.7, "d": 0.8})), make_policy("forecast", config), config)
    stops = [s["run_id"] for s in result.stops]
    assert stops == ["a", "b", "c"] and len(checks) > 3  # one stop a check until one run is left
    assert result.notes["unconverged_fits"] == len(checks) - 1
    assert result.notes["stops_on_unconverged_fits"] == 2  # a and c: b was stopped on the converged fit
    assert result.notes["of_which_every_chain_agreed"] == 1  # a
    said = str(backtest_module.BacktestResult([result], config))
    assert (f"warning: {len(checks) - 1} of the {len(checks)} refits of the forecast policy did not converge; its stops rest on them, so treat its "
            "figures with suspicion (2 stops made on them; each chain alone said stop too on 1)") in said


@pytest.mark.parametrize("json_out", [False, True])
def test_a_terminal_is_told_once_that_ours_refits_did_not_converge(tmp_path, monkeypatch, json_out, main_said):
    """The text backtest printed the warning on stderr and in its table on stdout: a terminal, where both
    land, showed it twice, one line apart. Where they reach one place it is said once (the table's line);
    where stdout is saved apart (`> out.txt`) the file keeps it and stderr says it too; --json as before."""
    import forecast.backtest as backtest_module

    def unconverged_decide(self, view):  # a refit that did not converge, and no stop
        self.n_unconverged += 1
        return {}

    monkeypatch.setattr(backtest_module.ForecastRule, "decide", unconverged_decide)
    curve_table({"a": 0.5, "b": 0.6}).to_csv(tmp_path / "runs.csv", index=False)
    said = "refits of the forecast policy did not converge"
    argv = ["backtest", str(tmp_path / "runs.csv"), "--policies", "forecast,median", *(["--json"] if json_out else [])]
    code, shown = main_said(argv, together=True)  # stdout and stderr on one file, as on a terminal
    assert code == 0
    assert shown.count(said) == 1
    code, out, err = main_said(argv, together=False)  # `> out.txt`
    assert code == 0
    assert out.count(said) == (0 if json_out else 1)
    assert err.count(said) == 1


def test_a_printed_backtest_says_when_ours_stops_rest_on_fits_that_did_not_converge(monkeypatch):
    """The CLI warned on stderr, but backtest()'s printed result (notebook 03's print(result))
    showed ours' compute saved and regret from refits that did not converge without a word:
    the refits swallow their ConvergenceWarnings."""
    import forecast.backtest as backtest_module

    def unconverged_decide(self, view):  # a refit that did not converge, and no stop
        self.n_unconverged += 1
        return {}

    monkeypatch.setattr(backtest_module.ForecastRule, "decide", unconverged_decide)
    result = backtest(curve_table({"a": 0.5, "b": 0.6}), policies=("forecast", "median"))
    checks = next(r for r in result.results if r.policy == "forecast").n_checks
    text = str(result)
    assert checks > 0 and f"{checks} of the {checks} refits of the forecast policy did not converge" in text
    assert "median policy" not in text


def test_a_policys_stops_come_with_a_sentence_that_says_when_it_stopped_none():
    """Notebook 03 showed our policy's stops as a table alone: on a sweep where it stopped no run,
    an empty table with its column names and not a word. stops_summary() says how many of the runs
    the policy stopped, and when none, that every run ran to its end."""
    runs = curve_table({f"r{i}": 0.3 + 0.03 * i for i in range(8)} | {"late": 0.7}, slow=("late",))
    config = BacktestConfig(min_evals=3, check_growth=1.5)
    none = replay(runs, NoStopping(), config)
    assert none.stops == []
    said = none.stops_summary()
    assert said.startswith("the no_stopping policy stopped none of the 9 runs")
    assert "every run ran to its end" in said
    median = replay(runs, MedianRule(n_startup=5), config)
    assert median.stops
    assert median.stops_summary() == f"the median policy stopped {len(median.stops)} of the 9 runs:"


def test_planned_horizon_is_a_bool_and_a_numpy_bool_is_one():
    """planned_horizon="no" is true in an if: the replay's refits were told a horizon nobody asked for."""
    with pytest.raises(ValueError, match="BacktestConfig.planned_horizon must be True or False, got 'no'"):
        BacktestConfig(planned_horizon="no")
    assert BacktestConfig(planned_horizon=np.True_).planned_horizon is True


def test_backtest_of_a_run_table_says_what_its_ended_column_says(tmp_path, capsys):
    """A trainer sweep's runs.csv says how each run ended (the `ended` column): read from it, runs
    their advisor stopped early were scored as finished without the warning the folder gives."""
    table = curve_table({"a": 0.5, "b": 0.6, "c": 0.55})
    names = sorted(table["run_id"].unique())
    table["ended"] = table["run_id"].map({names[0]: "advisor_stopped", names[1]: "finished", names[2]: ""})
    table.to_csv(tmp_path / "runs.csv", index=False)
    assert main(["backtest", str(tmp_path / "runs.csv"), "--policies", "no_stopping", "--json"]) == 0
    err = capsys.readouterr().err
    assert f"1 run(s) in {tmp_path / 'runs.csv'} were stopped early by their own advisor (ended advisor_stopped: {names[0]})" in err
    assert f"1 run(s) in {tmp_path / 'runs.csv'} have an empty 'ended' column and may still be training ({names[2]})" in err
    table.drop(columns="ended").to_csv(tmp_path / "plain.csv", index=False)
    assert main(["backtest", str(tmp_path / "plain.csv"), "--policies", "no_stopping", "--json"]) == 0
    err = capsys.readouterr().err
    assert "their own advisor" not in err and "may still be training" not in err


def test_backtest_of_a_folder_of_run_tables_says_what_their_ended_column_says(tmp_path, capsys):
    """A folder of tables (each sweep's runs.csv, copied without its run folders) is read as one table,
    but the warnings looked only for run folders in it: runs the `ended` column marks as stopped by
    their advisor, or in flight, were scored as finished without a word, where the same runs.csv given
    as a file warned."""
    table = curve_table({"a": 0.5, "b": 0.6, "c": 0.55})
    names = sorted(table["run_id"].unique())
    table["ended"] = table["run_id"].map({names[0]: "advisor_stopped", names[1]: "finished", names[2]: ""})
    (tmp_path / "sweep").mkdir()
    table.to_csv(tmp_path / "sweep" / "runs.csv", index=False)
    assert main(["backtest", str(tmp_path), "--policies", "no_stopping", "--json"]) == 0
    err = capsys.readouterr().err
    assert f"1 run(s) in {tmp_path} were stopped early by their own advisor (ended advisor_stopped: {names[0]})" in err
    assert f"1 run(s) in {tmp_path} have an empty 'ended' column and may still be training ({names[2]})" in err


@pytest.mark.parametrize("setting, says", [
    ({"halving_eta": 1}, "halving_eta must be a whole number >= 2, got 1"),  # the rungs never grew: backtest() never returned
    ({"halving_eta": 0}, "halving_eta must be a whole number >= 2, got 0"),
    ({"smooth_last": 0}, "smooth_last must be a whole number >= 1, got 0"),  # values[-0:]: each final the whole run's mean
    ({"min_evals": 0}, "min_evals must be a whole number >= 1, got 0"),  # the first checkpoint at the last evaluation
    ({"min_evals": 2.5}, "min_evals must be a whole number >= 1, got 2.5"),  # an IndexError from numpy
    ({"check_growth": "1.25"}, "check_growth must be a number >= 1.01, got '1.25'"),  # a TypeError from numpy
    ({"check_growth": 1.0}, "check_growth must be a number >= 1.01, got 1.0"),
    ({"median_percentile": 150}, "median_percentile must lie in [0, 100], got 150"),
    ({"median_n_startup": -1}, "median_n_startup must be a whole number >= 0, got -1"),
])
def test_backtest_config_refuses_a_setting_out_of_range_naming_it(setting, says):
    """`forecast backtest --halving-eta 1` is refused; BacktestConfig(halving_eta=1) in Python made
    backtest() loop for ever, smooth_last=0 scored each run's mean as its final, without a word."""
    with pytest.raises(ValueError, match=re.escape(says)):
        BacktestConfig(**setting)


def test_backtest_config_keeps_whole_settings_given_as_numpy_integers():
    config = BacktestConfig(halving_eta=np.int64(3), min_evals=np.int64(4), check_growth=np.float32(1.5))
    assert (config.halving_eta, config.min_evals) == (3, 4)
    assert checkpoint_schedule(curve_table({"a": 0.5}), min_evals=config.min_evals, growth=config.check_growth) == [40.0, 60.0, 90.0]


def test_backtest_takes_one_policy_name_as_that_policy():
    """backtest(runs, policies="median") replayed the letters: "unknown policy 'm'", and
    "successive_halving" was "policies given more than once: e, i, s, v"."""
    table = curve_table({"a": 0.5, "b": 0.6, "c": 0.55})
    for name in ("median", "successive_halving", "no_stopping"):
        result = backtest(table, policies=name, config=BacktestConfig(min_evals=3))
        assert [r.policy for r in result.results] == [name]


def test_backtest_refuses_a_misspelt_policy_before_replaying_any(monkeypatch):
    """A typo after "forecast" was refused only once ours had been replayed: minutes of fits, then the error."""
    import forecast.backtest as backtest_module

    def replayed(*args, **kwargs):
        raise AssertionError("a policy was replayed before the misspelt one was refused")

    monkeypatch.setattr(backtest_module, "replay", replayed)
    with pytest.raises(ValueError, match="unknown policy 'medain'; known: forecast, median"):
        backtest(curve_table({"a": 0.5, "b": 0.6}), policies=("no_stopping", "medain"))


@pytest.mark.parametrize("setting, error, says", [
    ({"forecaster_kwargs": {"mode": "fats"}}, ValueError, "forecaster_kwargs {'mode': 'fats'}: mode must be 'nuts' or 'fast'"),
    ({"forecaster_kwargs": {"modes": "fast"}}, TypeError, "forecaster_kwargs {'modes': 'fast'}: "),
    ({"random_seed": -1}, ValueError, "BacktestConfig.random_seed must be an integer >= 0 or None, got -1"),
])
def test_backtest_config_refuses_fit_settings_ours_would_fail_on(setting, error, says):
    """They failed at ours' first checkpoint, in the forecaster's words, naming neither setting."""
    with pytest.raises(error, match=re.escape(says)):
        BacktestConfig(**setting)


def test_a_random_seed_of_none_leaves_ours_fits_unseeded(intercept_advice_fit):
    """BacktestConfig takes random_seed=None ('an integer >= 0 or None'), and ours' first checkpoint
    then failed: "unsupported operand type(s) for +: 'NoneType' and 'int'"."""
    from conftest import FitIntercepted

    import forecast.backtest as backtest_module

    seen = intercept_advice_fit(backtest_module)
    with pytest.raises(FitIntercepted):
        replay(curve_table({"a": 0.5, "b": 0.6}), backtest_module.make_policy("forecast", BacktestConfig(random_seed=None)))
    assert "random_seed" in seen and seen["random_seed"] is None


def test_backtest_config_takes_a_whole_count_written_with_a_point():
    """halving_eta=4.0 and median_n_startup=5.0 replayed as 4 and 5 before the range checks, which then
    refused them as "must be a whole number >= 2, got 4.0"; min_evals=4.0 and smooth_last=3.0 failed in
    numpy. Each is now the whole number it is, as EarlyStopConfig(min_evals=4.0) and watch(max_polls=2.0) are."""
    config = BacktestConfig(halving_eta=4.0, median_n_startup=np.float64(5.0), min_evals=4.0, smooth_last=3.0)
    counts = (config.halving_eta, config.median_n_startup, config.min_evals, config.smooth_last)
    assert counts == (4, 5, 4, 3) and all(type(count) is int for count in counts)
    result = backtest(curve_table({"a": 0.5, "b": 0.6, "c": 0.3}), policies=("median", "successive_halving"), config=config)
    assert [r.policy for r in result.results] == ["median", "successive_halving"]


# ----------------------------------------------------------------------------- mutation-test kills
# Each test below kills a hand-made mutant of forecast/backtest.py that the tests above let through;
# the tables are small enough to score by hand.


def table_of(curves: dict[str, list[float]], step: float = 10.0) -> pd.DataFrame:
    """A run table from hand-written metric lists, evaluations every `step` of compute."""
    return pd.DataFrame([{"run_id": run, "recipe": run, "compute": step * (i + 1), "metric": m}
                         for run, metrics in curves.items() for i, m in enumerate(metrics)])


def test_checkpoints_start_when_every_run_has_min_evals_and_stop_short_of_the_end():
    """Kills: the schedule starting when the *first* run has min_evals evaluations (min for max),
    and a checkpoint at the largest final compute itself (c <= end)."""
    table = pd.concat([table_of({"a": [0.3] * 10}), table_of({"b": [0.3] * 5}, step=20.0)], ignore_index=True)
    # a's 4th evaluation is at 40, b's at 80: the first checkpoint waits for b
    assert checkpoint_schedule(table, min_evals=4, growth=1.1) == pytest.approx([80.0, 88.0, 96.8])
    assert checkpoint_schedule(table, min_evals=4, growth=1.25) == [80.0]  # 100 is the end: no check there


def test_a_growth_past_the_largest_float_ends_the_schedule_without_numpy_s_overflow_warning():
    """`forecast backtest --growth 1e300` (finite, so valid) printed numpy's "overflow encountered in scalar
    multiply" as a warning of its own: one check, at the start, and no word."""
    table = table_of({"a": [0.3] * 10}, step=1e10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert checkpoint_schedule(table, min_evals=4, growth=1e300) == [4e10]


def test_halving_rungs_grow_by_eta():
    """Kills: rungs growing by a fixed factor other than eta (every rung one doubling apart)."""
    assert SuccessiveHalving(eta=3).checkpoints([10.0, 12.5, 15.6], 100.0) == [10.0, 30.0, 90.0]
    assert SuccessiveHalving(eta=4).checkpoints([10.0, 12.5], 100.0) == [10.0, 40.0]


def test_halving_ranks_runs_by_their_value_at_the_rung():
    """Kills: ranking by the best value so far, or by the first value, instead of the value
    reported at the rung (Optuna's promotion rule)."""
    table = table_of({
        "peak": [0.2, 0.7, 0.4, 0.3] + [0.3] * 6,  # best so far 0.7, but 0.3 at the rung
        "steady": [0.1, 0.3, 0.4, 0.5] + [0.55] * 6,  # lowest first value, best at the rung
        "low1": [0.3, 0.32, 0.34, 0.36] + [0.4] * 6,
        "low2": [0.25, 0.3, 0.33, 0.35] + [0.4] * 6,
    })
    result = replay(table, SuccessiveHalving(eta=4), BacktestConfig(min_evals=4))  # one rung, at 40
    assert sorted(s["run_id"] for s in result.stops) == ["low1", "low2", "peak"]
    assert result.chosen_run == "steady"


def test_a_run_that_reached_its_budget_is_not_ranked_and_compute_is_over_the_runs_own_budgets():
    """Kills: a run whose budget equals the checkpoint counted in flight (budgets > c as >=), which
    let halving 'stop' a finished run; and compute_fraction over n_runs x the largest budget."""
    table = table_of({"short": [0.1, 0.15, 0.2, 0.25]} | {f"long{i}": [0.3 + 0.05 * i] * 10 for i in range(4)})
    result = replay(table, SuccessiveHalving(eta=4), BacktestConfig(min_evals=4))  # one rung, at 40
    assert "short" not in {s["run_id"] for s in result.stops} and result.n_stopped == 3
    # short ran its 40, long3 its 100, the three other long runs 40 each: 260 of 40 + 4 x 100
    assert result.compute_fraction == pytest.approx(260 / 440)


def test_a_stopped_run_reveals_nothing_more_and_its_compute_ends_at_its_last_evaluation():
    """Kills: a stopped run still revealing evaluations to the policy, and a stopped run's compute
    counted to the checkpoint (45) rather than to its last evaluation (40)."""
    table = curve_table({"a": 0.5, "b": 0.6})
    seen_of_b = []

    class StopBAtSecondCheck:
        name = "stop_b"

        def checkpoints(self, schedule, end):
            return schedule

        def decide(self, view):
            seen_of_b.append(float(view.revealed.loc[view.revealed["run_id"] == "b", "compute"].max()))
            return {"b": "test"} if view.index == 1 else {}

    config = BacktestConfig(min_evals=3, check_growth=1.5)  # checkpoints 30, 45, 67.5
    result = replay(table, StopBAtSecondCheck(), config)
    assert seen_of_b == [30.0, 40.0, 40.0]
    assert (result.stops[0]["compute"], result.stops[0]["fraction_of_run"]) == (40.0, 0.4)
    assert result.compute_fraction == pytest.approx((100 + 40) / 200)


@pytest.mark.parametrize("truth", [None, TRUTH_COLUMN])
def test_a_run_stopped_at_its_peak_is_judged_there_and_regret_falls_below_zero(truth):
    """Kills: regret scored on the chosen run's final at its end instead of where it stopped (also
    on the truth, and in measured_regret), and the evaluation at the stop left out of what it holds."""
    table = table_of({
        "a": [0.2 + 0.03 * (i + 1) for i in range(10)],  # final: mean of 0.44, 0.47, 0.50 = 0.47
        "b": [0.2, 0.6, 0.7, 0.8, 0.7, 0.6, 0.5, 0.4, 0.35, 0.3],  # declines after its 4th evaluation
    })
    table[TRUTH_COLUMN] = table["metric"]

    class StopBAtOnce:
        name = "stop_b"

        def checkpoints(self, schedule, end):
            return schedule[:1]  # compute 40, b's 4th evaluation

        def decide(self, view):
            return {"b": "test"}

    result = replay(table, StopBAtOnce(), BacktestConfig(min_evals=4), truth=truth)
    assert (result.chosen_run, result.best_run) == ("b", "a")
    assert result.chosen_value == pytest.approx(0.7)  # mean of 0.6, 0.7, 0.8: held when stopped
    assert result.regret == pytest.approx(0.47 - 0.7)  # below 0, kept as it is
    if truth is not None:
        assert result.notes["measured_regret"] == pytest.approx(0.47 - 0.7)


def test_smooth_last_sets_the_final_everywhere_it_is_scored():
    """Kills: smooth_last ignored (the default 3 used) in the true final, in the final a policy
    holds, or in the hindsight ceiling's choice of the best run."""
    table = pd.concat([
        table_of({"a": [0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.6, 0.6, 0.6, 0.4]}),  # last 0.4, mean of 3: 0.533
        table_of({"b": [0.2, 0.25, 0.3, 0.35, 0.4, 0.4, 0.42, 0.44, 0.45, 0.45, 0.45, 0.5]}),  # last 0.5, mean of 3: 0.467
    ], ignore_index=True)
    last_only = BacktestConfig(min_evals=4, smooth_last=1)
    result = replay(table, NoStopping(), last_only)
    assert (result.best_run, result.chosen_run, result.best_value, result.regret) == ("b", "b", 0.5, 0.0)
    assert hindsight_ceiling(table, last_only) == pytest.approx(1 - (120 + 40) / 220)  # finishes b
    assert hindsight_ceiling(table, BacktestConfig(min_evals=4)) == pytest.approx(1 - (100 + 40) / 220)  # finishes a


def test_a_replica_draws_its_evaluations_around_the_truth_not_around_the_old_evaluations():
    """Kills: the binomial draw centred on the measured metric instead of the smoothed truth (a
    straight line hides it: there the two agree)."""
    table = table_of({"zigzag": [0.2, 0.8] * 6})
    table["n_eval"] = 1_000_000  # noise of a millionth: the draw sits on what it is centred on
    replica = resample_evaluation_noise(table, rng=0, window=5)
    assert float((replica["metric"] - replica[TRUTH_COLUMN]).abs().max()) < 0.005
    assert float((replica["metric"] - table["metric"]).abs().min()) > 0.1


def test_the_median_rule_compares_with_the_others_at_the_same_step_without_the_run_itself():
    """Kills: the run's own value counted among the others, and the others' latest values used
    instead of their values at the run's step."""
    others = {f"o{i}": [0.5, v, 0.1] for i, v in enumerate([0.3, 0.4, 0.6, 0.62, 0.7])}  # median 0.6 at step 1
    table = table_of({"x": [0.55, 0.45]} | others)
    budgets = {r: 30.0 for r in others} | {"x": 100.0}
    view = SweepView(table, ["x"], list(others), {}, budgets, 30.0, len(table), 0)
    decided = MedianRule(n_startup=5).decide(view)
    # best so far 0.55 < 0.6: stopped (with x's own 0.45 counted, the median is 0.525 and x is kept;
    # on the others' latest values, 0.1, x is kept too)
    assert decided == {"x": "best so far 0.5500 < median 0.6000 of 5 others at step 1"}


def test_a_replica_smooths_each_run_in_compute_order_whatever_the_row_order():
    """Kills: the truth smoothed in the table's row order, which on a shuffled table averages
    evaluations that are not neighbours in compute."""
    table = curve_table({"a": 0.5, "b": 0.7}, n=12)
    table["n_eval"] = 1200
    shuffled = table.sample(frac=1.0, random_state=1)
    replica = resample_evaluation_noise(shuffled, rng=0, window=5)
    for run, g in replica.groupby("run_id"):
        in_order = table[table["run_id"] == run].sort_values("compute")
        np.testing.assert_allclose(g.sort_values("compute")[TRUTH_COLUMN], smoothed_trajectory(in_order["metric"], 5))


def test_backtest_out_on_a_disk_that_fills_up_keeps_the_file_already_there(tmp_path):
    """--out is written atomically: a write that fails part way (a full disk) leaves the earlier result as it
    was, where a file written in place would be cut short, the old result lost and the new one half there."""
    from conftest import main_on_a_full_disk

    curve_table({f"r{i}": 0.3 + 0.03 * i for i in range(6)}).to_csv(tmp_path / "runs.csv", index=False)
    old = json.dumps({"forecast_version": "0.0", "policies": {}}) + "\n"  # an earlier backtest's, rerun over
    (tmp_path / "bt.json").write_text(old)
    argv = ["backtest", str(tmp_path / "runs.csv"), "--policies", "median,no_stopping", "--out", str(tmp_path / "bt.json")]
    done = main_on_a_full_disk(argv, room=512)  # the result is a few kB
    assert done.returncode != 0
    assert (tmp_path / "bt.json").read_text() == old
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bt.json", "runs.csv"]  # no temporary file left


@pytest.mark.parametrize("percentile", ["0", "100"])
def test_backtest_cli_takes_either_end_of_the_median_percentiles_range(tmp_path, capsys, percentile):
    """--median-percentile is refused outside [0, 100] ('must lie in [0, 100]'): both ends are taken, as said."""
    curve_table({"a": 0.5, "b": 0.6}).to_csv(tmp_path / "runs.csv", index=False)
    argv = ["backtest", str(tmp_path / "runs.csv"), "--policies", "median", "--median-percentile", percentile, "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["config"]["median_percentile"] == float(percentile)
