"""The synthetic sweeps (forecast/synthetic.py) with known answers: the compute grid, the truth
columns, the parameters a caller passes, and the noise and messy shapes they ask for."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecast.curves import sigmoid_curve
from forecast.synthetic import load_table1, simulate_sweep


def recipes(**columns) -> pd.DataFrame:
    """Made-up recipes: name -> (A, B, C_mid)."""
    return pd.DataFrame([{"recipe": name, "A": a, "B": b, "C_mid": c_mid} for name, (a, b, c_mid) in columns.items()])


def test_the_compute_grid_is_shared_and_spans_multiples_of_the_smallest_c_mid_the_last_4x_further():
    """compute_span=(0.1, 2.5) with the smallest C_mid 1000: from 100 to 2.5 x 1000 x 4 = 10,000, evenly in
    log-compute, the same grid for every run of every recipe."""
    sweep = simulate_sweep(recipes(early=(0.6, 2.0, 1000.0), late=(0.6, 2.0, 5000.0)), n_seeds=2, n_points=3,
                           compute_span=(0.1, 2.5), rng=0)
    for _, run in sweep.groupby("run_id"):
        np.testing.assert_allclose(run["compute"], [100.0, 1000.0, 10_000.0])
    assert list(sweep.groupby("run_id")["step"].apply(list)) == [[100, 200, 300]] * 4


def test_without_noise_the_metric_is_the_sigmoid_of_the_recipe_half_way_at_c_mid():
    """No seed spread, no wander and an evaluation set too large for binomial noise to show: every run's
    metric is R0 + (A - R0) / (1 + (C_mid / C)^B), half way from R0 to A at C = C_mid."""
    sweep = simulate_sweep(recipes(a=(0.6, 2.0, 1000.0), b=(0.5, 1.0, 2000.0)), n_seeds=2, n_points=3,
                           compute_span=(0.1, 2.5), seed_sd_A=0.0, wander_sd=0.0, n_eval=10**12, rng=1)
    assert (sweep["shape"] == "clean").all()
    truth = sigmoid_curve(sweep["compute"], sweep["true_A"], sweep["true_B"], sweep["true_C_mid"], sweep["true_R0"])
    np.testing.assert_allclose(sweep["true_metric"], truth, rtol=1e-12)
    np.testing.assert_allclose(sweep["metric"], truth, atol=1e-5)
    at_c_mid = sweep[(sweep["recipe"] == "a") & (sweep["compute"].round(6) == 1000.0)]
    assert len(at_c_mid) == 2
    np.testing.assert_allclose(at_c_mid["true_metric"], (0.6 + at_c_mid["true_R0"]) / 2, rtol=1e-12)
    assert set(sweep["true_A"]) == {0.6, 0.5} and set(sweep["true_B"]) == {2.0, 1.0}  # seed_sd_A=0: no spread


def test_the_asymptote_and_start_are_kept_in_range_and_the_seed_spread_is_the_one_asked_for():
    """A is clipped to [0.02, 0.99] and R0 to [0, A - 0.01] (a curve that rises); seed_sd_A is the
    spread of A between seeds."""
    clipped = simulate_sweep(recipes(high=(1.3, 2.0, 1000.0), low=(0.0, 2.0, 1000.0)), n_seeds=1, n_points=2,
                             seed_sd_A=0.0, r0=0.9, rng=2)
    first = clipped.groupby("recipe").first()
    assert first.loc["high", "true_A"] == 0.99 and first.loc["low", "true_A"] == 0.02
    assert first.loc["high", "true_R0"] == pytest.approx(0.9, abs=0.05)  # below 0.98: kept, with its own spread
    assert first.loc["low", "true_R0"] == pytest.approx(0.01)  # 0.02 - 0.01
    below_zero = simulate_sweep(recipes(a=(0.6, 2.0, 1000.0)), n_seeds=1, n_points=2, r0=-0.5, rng=2)
    assert (below_zero["true_R0"] == 0.0).all()
    spread = simulate_sweep(recipes(a=(0.6, 2.0, 1000.0)), n_seeds=400, n_points=2, seed_sd_A=0.05, rng=3)
    assert spread.groupby("run_id")["true_A"].first().std() == pytest.approx(0.05, rel=0.15)


def test_the_evaluation_noise_is_that_of_a_validation_set_of_n_eval_samples():
    """Without wander, metric - true_metric is binomial noise: sd sqrt(p (1 - p) / n_eval)."""
    sweep = simulate_sweep(recipes(a=(0.6, 2.0, 1000.0)), n_seeds=200, n_points=10, wander_sd=0.0, n_eval=400, rng=4)
    z = (sweep["metric"] - sweep["true_metric"]) / np.sqrt(sweep["true_metric"] * (1 - sweep["true_metric"]) / 400)
    assert z.std() == pytest.approx(1.0, rel=0.1) and abs(z.mean()) < 0.1
    assert (sweep["n_eval"] == 400).all() and ((sweep["metric"] * 400).round(9) % 1 == 0).all()


def test_the_callers_names_unit_and_seed_are_kept():
    """Table 1 as loaded (its `run` column) names the recipes; compute_unit is the caller's; the same rng
    gives the same sweep and another rng another."""
    table = load_table1()
    sweep = simulate_sweep(table.head(2), n_seeds=2, n_points=3, compute_unit="flops", rng=5)
    assert sorted(sweep["run_id"].unique()) == sorted(f"{run}-s{s}" for run in table["run"].head(2) for s in (0, 1))
    assert set(sweep["recipe"]) == set(table["run"].head(2)) and set(sweep["seed"]) == {0, 1}
    assert (sweep["compute_unit"] == "flops").all()
    assert sweep["source"].str.contains("synthetic").all()
    pd.testing.assert_frame_equal(sweep, simulate_sweep(table.head(2), n_seeds=2, n_points=3, compute_unit="flops",
                                                        rng=5))
    assert not sweep["metric"].equals(simulate_sweep(table.head(2), n_seeds=2, n_points=3, rng=6)["metric"])


def test_messy_runs_flatten_early_or_decline_late_as_documented():
    """messy_fraction=1: every run is messy, about half of each kind. A plateau run follows its sigmoid up to a
    ceiling 60-85% of the way from R0 to A and then rises at 0.3 of its slope; a declining run follows its
    sigmoid over the first 55% of the log-compute span at least, then falls below it."""
    sweep = simulate_sweep(recipes(a=(0.6, 2.0, 1000.0)), n_seeds=200, n_points=12, compute_span=(0.1, 2.5),
                           seed_sd_A=0.0, messy_fraction=1.0, rng=8)
    shapes = sweep.groupby("run_id")["shape"].first()
    assert set(shapes) == {"plateau", "decline"} and 0.35 < (shapes == "plateau").mean() < 0.65
    for _, run in sweep.groupby("run_id"):
        A, R0 = run["true_A"].iloc[0], run["true_R0"].iloc[0]
        clean = sigmoid_curve(run["compute"].to_numpy(), A, 2.0, 1000.0, R0)
        truth = run["true_metric"].to_numpy()
        assert (truth <= clean + 1e-12).all()
        bent = truth < clean - 1e-12
        if run["shape"].iloc[0] == "plateau":
            ceilings = (truth[bent] - 0.3 * clean[bent]) / 0.7
            assert bent.any() and np.ptp(ceilings) < 1e-9
            assert 0.6 - 1e-9 <= (ceilings[0] - R0) / (A - R0) <= 0.85 + 1e-9
        else:
            log_span = np.log(run["compute"] / run["compute"].iloc[0]) / np.log(100.0)  # 100 to 10,000
            np.testing.assert_allclose(truth[log_span <= 0.55], clean[log_span <= 0.55], rtol=1e-12)
    assert (simulate_sweep(recipes(a=(0.6, 2.0, 1000.0)), n_seeds=20, n_points=3, rng=8)["shape"] == "clean").all()


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"compute_span": (2.5, 0.1)}, "compute_span must be (first, last) with 0 < first < last, got (2.5, 0.1)"),
        ({"compute_span": (0.1, 0.1)}, "compute_span must be (first, last) with 0 < first < last"),
        ({"compute_span": (0.0, 2.5)}, "compute_span must be (first, last) with 0 < first < last"),
        ({"compute_span": (-1.0, 2.5)}, "compute_span must be (first, last) with 0 < first < last"),
        ({"compute_span": (0.1, float("inf"))}, "compute_span must be (first, last) with 0 < first < last"),
        ({"compute_span": (0.1,)}, "compute_span must be (first, last) with 0 < first < last, got (0.1,)"),
        ({"compute_span": 2.5}, "compute_span must be (first, last)"),
        ({"compute_span": ("0.1", "2.5")}, "compute_span must be (first, last)"),
        ({"messy_fraction": -0.1}, "messy_fraction must lie in [0, 1], got -0.1"),
        ({"messy_fraction": 1.5}, "messy_fraction must lie in [0, 1], got 1.5"),
        ({"messy_fraction": float("nan")}, "messy_fraction must lie in [0, 1], got nan"),
        ({"n_seeds": 0}, "n_seeds must be a whole number >= 1, got 0"),
        ({"n_seeds": 1.5}, "n_seeds must be a whole number >= 1, got 1.5"),
        ({"n_points": 0}, "n_points must be a whole number >= 1, got 0"),
        ({"n_eval": 0}, "n_eval must be a whole number >= 1, got 0"),
        ({"n_eval": 100.5}, "n_eval must be a whole number >= 1, got 100.5"),
        ({"seed_sd_A": -0.01}, "seed_sd_A must be a finite number >= 0, got -0.01"),
        ({"wander_sd": -0.01}, "wander_sd must be a finite number >= 0, got -0.01"),
        ({"wander_sd": float("nan")}, "wander_sd must be a finite number >= 0, got nan"),
        ({"wander_corr": 1.2}, "wander_corr must lie in [-1, 1], got 1.2"),
        ({"r0": float("nan")}, "r0 must be a finite number, got nan"),
    ],
)
def test_an_argument_out_of_range_is_refused_by_name(arguments, said):
    """Each argument that would have crashed deep inside numpy ("scale < 0", "p is NaN", "Geometric sequence
    cannot include zero"), or quietly made a sweep that is not the one asked for (a reversed compute grid,
    messy_fraction 1.5 as 1, no runs at all), is a ValueError that names it and what it got."""
    with pytest.raises(ValueError, match="^simulate_sweep: ") as err:
        simulate_sweep(recipes(a=(0.6, 2.0, 1000.0)), **{"n_points": 3, **arguments})
    assert said in str(err.value)


@pytest.mark.parametrize(
    ("table", "said"),
    [
        (pd.DataFrame({"recipe": ["a"], "A": [0.6], "B": [2.0]}), "recipes has no column C_mid (it needs A, B, C_mid"),
        (pd.DataFrame({"recipe": ["a"], "B": [2.0], "c_mid": [1000.0]}), "recipes has no columns A, C_mid"),
        (pd.DataFrame({"name": ["a"], "A": [0.6], "B": [2.0], "C_mid": [1000.0]}),
         "recipes has no column recipe (or run) to name the recipes"),
        (pd.DataFrame({"recipe": ["a"], "run": ["b"], "A": [0.6], "B": [2.0], "C_mid": [1000.0]}),
         "recipes has both a recipe and a run column"),
        (pd.DataFrame(columns=["recipe", "A", "B", "C_mid"]), "recipes has no rows"),
        ({"recipe": "a", "A": 0.6, "B": 2.0, "C_mid": 1000.0}, "recipes must be a DataFrame with columns recipe (or "
                                                               "run), A, B, C_mid, got dict"),
        (recipes(a=(0.6, 2.0, 1000.0), b=(0.6, 2.0, 0.0)), "recipes row 1 (recipe b): C_mid must be > 0, got 0"),
        (recipes(a=(0.6, 2.0, 1000.0), b=(0.6, float("nan"), 10.0)), "recipes row 1 (recipe b): B must be a finite "
                                                                      "number, got nan"),
        (pd.DataFrame({"recipe": ["a"], "A": ["high"], "B": [2.0], "C_mid": [1000.0]}),
         "recipes row 0 (recipe a): A must be a finite number, got 'high'"),
    ],
)
def test_a_recipes_table_without_the_curve_parameters_is_refused_by_column_and_row(table, said):
    with pytest.raises(ValueError, match="^simulate_sweep: ") as err:
        simulate_sweep(table, n_points=3)
    assert said in str(err.value)


def test_the_edges_of_each_range_are_accepted():
    """messy_fraction 0 and 1, no noise at all, a wander that never decays, one seed and one point, and counts given
    as whole floats (16000.0, as a config file gives them) all still make a sweep."""
    for arguments in ({"messy_fraction": 0.0}, {"messy_fraction": 1}, {"seed_sd_A": 0, "wander_sd": 0.0},
                      {"wander_corr": 1.0}, {"wander_corr": -1.0}, {"n_seeds": 1, "n_points": 1},
                      {"n_eval": 16000.0, "n_seeds": np.int64(2)}, {"compute_span": [0.1, 2.5]}):
        assert len(simulate_sweep(recipes(a=(0.6, 2.0, 1000.0)), **{"n_points": 3, **arguments})) > 0
