"""The front door on a real (short-chain) fit shared by the session (tests/conftest.py)."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from forecast import NotASavedFitError, NotFittedError, SamplerSettings, ScalingForecaster
from forecast.formatting import fmt_compute
from forecast.inference import ConvergenceReport
from forecast.model import Priors
from forecast.synthetic import simulate_sweep


def test_accessors_before_fit_say_which_call_is_missing():
    fc = ScalingForecaster()
    for call in (lambda: fc.predict([1.0]), fc.asymptote, fc.parameters, lambda: fc.compute_to_target(0.5), fc.plot, lambda: fc.save("x.nc")):
        with pytest.raises(NotFittedError, match=r"fit\(\) has not been called"):
            call()


def test_every_accessor_before_fit_names_itself_as_the_call_made_too_early():
    """Mutants dropping compute_to_target()'s or diagnostics()'s own check survived: the first said
    "before recipes" (a call the user never made), the second returned None for the report."""
    fc = ScalingForecaster()
    calls = {"predict()": lambda: fc.predict([1.0]), "asymptote()": fc.asymptote, "parameters()": fc.parameters,
             "compute_to_target()": lambda: fc.compute_to_target(0.5), "plot()": fc.plot, "save()": lambda: fc.save("x.nc"),
             "diagnostics()": fc.diagnostics, "sampling_tries()": fc.sampling_tries, "misshapen_runs()": fc.misshapen_runs,
             "draws()": lambda: fc.draws("A"), "posterior": lambda: fc.posterior, "recipes": lambda: fc.recipes,
             "run_ids": lambda: fc.run_ids, "curve_parameters()": lambda: fc.curve_parameters(recipe="a"),
             "sample_new_seeds()": lambda: fc.sample_new_seeds(1.0, recipe="a", n_seeds=2)}
    for what, call in calls.items():
        with pytest.raises(NotFittedError, match=rf"fit\(\) has not been called: call fit\(runs\) before {re.escape(what)}$"):
            call()


def test_the_forecasts_draws_and_streams_before_fit_say_fit_is_missing():
    """sample_curves() (the notebooks' simulated runs), recipe_stream() and run_stream() before fit() failed as
    AttributeError: 'NoneType' object has no attribute 'recipes', naming nothing the user had done."""
    fc = ScalingForecaster()
    for call, what in ((lambda: fc.sample_curves([1e3], recipe="a"), "sample_curves"),
                       (lambda: fc.sample_curves([1e3], run_id="a-s0", paths=True), "sample_curves"),
                       (lambda: fc.recipe_stream("a"), "recipe_stream"), (lambda: fc.run_stream("a-s0"), "run_stream")):
        with pytest.raises(NotFittedError, match=rf"fit\(\) has not been called: call fit\(runs\) before {what}\(\)"):
            call()


def test_predict_is_tidy_and_ordered(fitted):
    table = fitted.predict([1e3, 1e4, 1e5], recipe="scalerl_8b", kind="new_run")
    assert list(table.columns) == ["recipe", "kind", "compute", "mean", "q05", "q25", "q50", "q75", "q95", "ahead"]
    assert len(table) == 3
    assert (table["q05"] <= table["q25"]).all() and (table["q25"] <= table["q50"]).all()
    assert (table["q50"] <= table["q75"]).all() and (table["q75"] <= table["q95"]).all()
    assert table["q50"].is_monotonic_increasing  # a rising curve


def test_the_mean_kind_is_the_recipes_typical_curve_without_noise(fitted):
    """kind="mean" is the recipe's typical curve R0 + (A - R0) / (1 + (C_mid / C)^B) over the posterior, each
    quantile column that compute's own. Mutants that gave it an evaluation's noise, a new seed's spread, or
    every compute the first compute's quantiles passed every test."""
    computes = np.array([1e3, 1e4, 1e5])
    table = fitted.predict(computes, recipe="scalerl_8b", kind="mean")
    k = fitted.recipes.index("scalerl_8b")
    a, b, r0 = fitted.draws("A")[:, k, None], fitted.draws("B")[:, k, None], fitted.draws("R0")[:, None]
    c_mid = np.exp(fitted.draws("log_C_mid")[:, k, None])
    curves = r0 + (a - r0) / (1 + (c_mid / computes[None, :]) ** b)
    np.testing.assert_allclose(table["mean"], curves.mean(axis=0), rtol=1e-9)
    for column, q in (("q05", 0.05), ("q25", 0.25), ("q50", 0.5), ("q75", 0.75), ("q95", 0.95)):
        np.testing.assert_allclose(table[column], np.quantile(curves, q, axis=0), rtol=1e-9, err_msg=column)
    assert set(table["kind"]) == {"mean"} and list(table["compute"]) == list(computes)


def test_predict_without_noise_gives_the_curves_own_spread(fitted):
    """predict(noise=False) summarises the fitted curves alone, without an evaluation's noise or wander.
    Mutant: predict() drawing with noise whatever noise= said survived."""
    computes = [1e4, 1e6]
    for kind, where in (("run", {"run_id": "scalerl_8b-s0"}), ("new_run", {"recipe": "scalerl_8b"})):
        table = fitted.predict(computes, kind=kind, noise=False, **where)
        curves = fitted.sample_curves(computes, kind=kind, noise=False, **where)
        np.testing.assert_allclose(table["mean"], curves.mean(axis=0), rtol=1e-12, err_msg=kind)
        np.testing.assert_allclose(table["q05"], np.quantile(curves, 0.05, axis=0), rtol=1e-12, err_msg=kind)
        np.testing.assert_allclose(table["q95"], np.quantile(curves, 0.95, axis=0), rtol=1e-12, err_msg=kind)


def test_predict_all_recipes_and_runs(fitted):
    assert set(fitted.predict([1e4])["recipe"]) == set(fitted.recipes)
    runs = fitted.predict([1e4], kind="run")
    assert set(runs["run_id"]) == set(fitted.run_ids)


def test_a_compute_gets_the_same_forecast_whatever_is_asked_beside_it(fitted):
    # Prophet's users complain of Monte Carlo jitter; here a budget asked alone or in a list agrees
    for kind, where in (("new_run", {"recipe": "scalerl_8b"}), ("run", {"run_id": "scalerl_8b-s0"})):
        alone = fitted.predict([3e4], kind=kind, **where).iloc[0]
        in_a_list = fitted.predict([1e3, 3e4, 1e6], kind=kind, **where).iloc[1]
        for column in ("mean", "q05", "q50", "q95"):
            assert alone[column] == in_a_list[column], (kind, column)
    # and two different computes still get independent noise, not one shared draw
    draws = fitted.sample_curves([3e4, 3.0001e4], recipe="scalerl_8b", kind="new_run", rng=5)
    residual = draws - fitted.sample_curves([3e4, 3.0001e4], recipe="scalerl_8b", kind="new_run", rng=5, noise=False)
    assert abs(np.corrcoef(residual.T)[0, 1]) < 0.2


def test_wander_paths_follow_the_models_ornstein_uhlenbeck_law():
    from forecast.forecaster import _wander_paths

    rng = np.random.default_rng(0)
    n = 40_000
    x = np.array([[0.9, 0.1, 0.5, 0.3]])  # unsorted: paths run in compute order
    sd, scale = np.full((n, 1), 0.02), np.full((n, 1), 0.4)
    paths = _wander_paths(rng, x, None, None, sd, scale)
    np.testing.assert_allclose(paths.std(axis=0), 0.02, rtol=0.03)
    corr = np.corrcoef(paths.T)
    for i, j in ((1, 3), (1, 0), (2, 0)):
        assert corr[i, j] == pytest.approx(np.exp(-abs(x[0, i] - x[0, j]) / 0.4), abs=0.02)
    # from a known start: the mean decays towards 0 and the variance grows to the stationary one
    start = (np.full((n, 1), 0.05), np.zeros((n, 1)))
    ahead = _wander_paths(rng, np.array([[0.2, 1.0]]), 0.0, start, sd, scale)
    np.testing.assert_allclose(ahead.mean(axis=0), 0.05 * np.exp(-np.array([0.2, 1.0]) / 0.4), atol=0.0005)
    np.testing.assert_allclose(ahead.std(axis=0), 0.02 * np.sqrt(1 - np.exp(-2 * np.array([0.2, 1.0]) / 0.4)), rtol=0.03)


def test_sample_curves_paths_are_evaluation_histories_with_the_same_marginals(fitted):
    """paths=True: draw i is one run's history (notebook 02 simulates an extra seed with it; with
    noise independent at every compute such a seed was noisier than any real run and averaged out
    its wander). Each compute's spread is predict()'s, and a run's forecasts ahead move together."""
    runs = fitted.runs_
    inside = np.geomspace(runs["compute"].min() * 2, runs["compute"].max() / 2, 8)
    last = runs.loc[runs["run_id"] == "scalerl_8b-s0", "compute"].max()
    ahead = last * np.array([1.5, 2.0, 4.0, 16.0])
    for compute, where in ((inside, {"recipe": "scalerl_8b", "kind": "new_run"}), (ahead, {"run_id": "scalerl_8b-s0"})):
        independent = fitted.sample_curves(compute, rng=5, **where)
        paths = fitted.sample_curves(compute, rng=5, paths=True, **where)
        np.testing.assert_allclose(paths.std(axis=0), independent.std(axis=0), rtol=0.15)
        monte_carlo_sd = independent.std(axis=0) * np.sqrt(2 / len(paths))  # of the difference of two means
        assert np.all(np.abs(paths.mean(axis=0) - independent.mean(axis=0)) < 4 * monte_carlo_sd)
    assert np.corrcoef(paths[:, :2].T)[0, 1] > 0.4 > abs(np.corrcoef(independent[:, :2].T)[0, 1])
    with pytest.raises(ValueError, match="every compute must lie beyond it"):
        fitted.sample_curves([last / 2, 2 * last], run_id="scalerl_8b-s0", paths=True)
    with pytest.raises(ValueError, match="choose one"):
        fitted.sample_curves(inside, recipe="scalerl_8b", paths=True, shared_noise=True)


def test_a_run_forecast_far_before_its_data_is_finite_and_quiet(fitted):
    """exp(-(x - x_last) / wander_scale) overflowed for a compute far below a run's last evaluation
    (a watch budget in the wrong unit): numpy's overflow warning on stderr, and inf * 0 = NaN."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        table = fitted.predict([1e-300, 1e4], run_id="scalerl_8b-s0")
    assert np.isfinite(table[["mean", "q05", "q50", "q95"]].to_numpy()).all()


def test_predicted_bands_are_smooth_along_compute(fitted):
    # a fan chart's bands are predict()'s quantiles on a fine grid: Monte Carlo noise drawn anew at
    # every compute made them saw-toothed (second differences ~0.005 a point, 0.2-0.3 summed here)
    grid = np.geomspace(1e4, 1e6, 60)
    table = fitted.predict(grid, recipe="scalerl_8b", kind="new_run")
    for column in ("q05", "q50", "q95"):
        assert np.abs(np.diff(table[column].to_numpy(), 2)).sum() < 0.05, column


def test_run_forecast_is_narrower_than_new_run_forecast(fitted):
    run = fitted.predict([2e4], run_id="scalerl_8b-s0", kind="run").iloc[0]
    new = fitted.predict([2e4], recipe="scalerl_8b", kind="new_run").iloc[0]
    assert run["q95"] - run["q05"] < new["q95"] - new["q05"]


def test_bands_widen_with_the_extrapolation_horizon(fitted):
    c_max = fitted.runs_["compute"].max()
    table = fitted.predict([c_max, 4 * c_max, 64 * c_max], run_id="scalerl_8b-s0", kind="run")
    width = (table["q95"] - table["q05"]).to_numpy()
    assert width[0] < width[1] < width[2]


def _last_and_far_draws(fitted, run, **settings):
    """Draws of `run` at its last evaluation and 64x beyond it, with forecaster attributes set to
    `settings` for the call (restored afterwards: the fit is shared by the session)."""
    c_last = fitted.runs_.loc[fitted.runs_["run_id"] == run, "compute"].max()
    saved = {name: getattr(fitted, name) for name in settings}
    try:
        for name, value in settings.items():
            setattr(fitted, name, value)
        return fitted.sample_curves([c_last, 64 * c_last], run_id=run, kind="run", rng=1)
    finally:
        for name, value in saved.items():
            setattr(fitted, name, value)


def test_level_sd_widens_forecasts_ahead_of_the_data_only(fitted):
    """level_sd: late moves of a run's level that early data cannot show. It adds nothing at the
    last evaluation and level_sd**2 * (1 - 2**-doublings) of variance ahead of it."""
    without = _last_and_far_draws(fitted, "scalerl_8b-s0", level_sd=0.0)
    with_level = _last_and_far_draws(fitted, "scalerl_8b-s0", level_sd=0.025)
    np.testing.assert_allclose(with_level[:, 0], without[:, 0])
    added = with_level[:, 1].var() - without[:, 1].var()
    assert added == pytest.approx(0.025**2 * (1 - 2.0**-6), rel=0.25)


def test_level_wander_ratio_scales_late_moves_with_the_fitted_wander(fitted):
    """level_wander_ratio: the sd of late level moves is that many times the run wander the fit
    learnt (draw by draw), so a sweep whose runs wander little around their curves is widened
    little. Nothing is added at the last evaluation; ahead of it the added variance is
    ratio**2 * E[wander_sd**2] * (1 - 2**-doublings)."""
    assert ScalingForecaster().level_wander_ratio == 2.0
    without = _last_and_far_draws(fitted, "scalerl_8b-s0", level_wander_ratio=0.0)
    with_level = _last_and_far_draws(fitted, "scalerl_8b-s0", level_wander_ratio=4.0)
    np.testing.assert_allclose(with_level[:, 0], without[:, 0])
    expected = 4.0**2 * float(np.mean(fitted.draws("wander_sd") ** 2)) * (1 - 2.0**-6)
    added = with_level[:, 1].var() - without[:, 1].var()
    assert added > 0
    assert added == pytest.approx(expected, rel=0.3)


def test_unknown_recipe_and_run_are_named(fitted):
    with pytest.raises(KeyError, match="unknown recipe 'nope'"):
        fitted.predict([1e3], recipe="nope")
    with pytest.raises(KeyError, match="unknown run_id 'nope'"):
        fitted.predict([1e3], run_id="nope", kind="run")
    with pytest.raises(ValueError, match="kind"):
        fitted.predict([1e3], recipe="scalerl_8b", kind="bogus")


def test_curve_parameters_and_sample_curves_refuse_a_recipe_that_is_not_the_runs(fitted):
    """predict refused recipe= beside a run of another recipe; curve_parameters and sample_curves used the run
    (or, for kind='new_run', the recipe) and dropped the other without a word, a typo in recipe= included."""
    for call in (lambda **kw: fitted.curve_parameters(**kw), lambda **kw: fitted.sample_curves([1e4], **kw)):
        with pytest.raises(ValueError, match="is a run of 'scalerl_8b', not of 'scalerl_8gen'"):
            call(recipe="scalerl_8gen", run_id="scalerl_8b-s0")
        with pytest.raises(KeyError, match="typo"):
            call(recipe="typo", run_id="scalerl_8b-s0")
    # the pair that agrees is taken, as predict takes it
    assert len(fitted.curve_parameters(recipe="scalerl_8b", run_id="scalerl_8b-s0")["A"]) == fitted.n_draws
    assert fitted.sample_curves([1e4], recipe="scalerl_8b", run_id="scalerl_8b-s0").shape == (fitted.n_draws, 1)


def test_predict_honours_every_argument_it_is_given(fitted):
    """An argument is used or refused, never dropped: recipe= with kind='run' picks that recipe's
    runs, a run of another recipe is refused, and quantiles name their own columns."""
    runs = fitted.predict([1e4], recipe="scalerl_8b", kind="run")
    assert set(runs["recipe"]) == {"scalerl_8b"} and sorted(runs["run_id"]) == ["scalerl_8b-s0", "scalerl_8b-s1"]
    with pytest.raises(ValueError, match="is a run of 'scalerl_8b', not of 'scalerl_8gen'"):
        fitted.predict([1e4], recipe="scalerl_8gen", run_id="scalerl_8b-s0", kind="run")
    with pytest.raises(ValueError, match="compute is empty"):
        fitted.predict([], recipe="scalerl_8b")
    table = fitted.predict([1e4], recipe="scalerl_8b", quantiles=(0.025, 0.5, 0.975))
    assert {"q2_5", "q50", "q97_5"} <= set(table.columns) and (table["q2_5"] < table["q97_5"]).all()
    assert "q90" in fitted.predict([1e4], recipe="scalerl_8b", quantiles=0.9).columns  # one level
    for bad, message in (((5, 95), r"\(0, 1\)"), ((0.1, 0.1), "repeated column names")):
        with pytest.raises(ValueError, match=message):
            fitted.predict([1e4], recipe="scalerl_8b", quantiles=bad)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        fitted.compute_to_target(0.5, quantiles=(5, 95))


def test_a_runs_forecast_is_the_same_with_its_evaluations_filtered_in_blocks(fitted, monkeypatch):
    """A run's own forecast starts from its filtered wander at its last evaluation, worked out a
    block of evaluations at a time so a long run's draws-by-evaluations arrays are never held
    whole; blocks of 1 and 3 evaluations must give the forecast of the whole run in one block."""
    from forecast import wander_filter

    whole = fitted.predict([1e4, 1e6], run_id="scalerl_8b-s0", kind="run")
    assert fitted.data_.n_obs // len(fitted.run_ids) * fitted.n_draws <= wander_filter.BLOCK_ELEMENTS  # one block
    for rows in (1, 3):
        monkeypatch.setattr(wander_filter, "BLOCK_ELEMENTS", rows * fitted.n_draws)
        in_blocks = fitted.predict([1e4, 1e6], run_id="scalerl_8b-s0", kind="run")
        pd.testing.assert_frame_equal(in_blocks, whole, check_exact=False, rtol=1e-12, atol=0)


def test_naming_a_run_forecasts_that_run_unless_another_kind_is_asked(fitted):
    """predict(run_id=X) gave the recipe's new-seed forecast (the default kind was new_run), while
    `forecast predict --run-id X` forecasts the run: one question, two answers."""
    own = fitted.predict([1e4, 1e6], run_id="scalerl_8b-s0")
    pd.testing.assert_frame_equal(own, fitted.predict([1e4, 1e6], run_id="scalerl_8b-s0", kind="run"))
    assert set(own["kind"]) == {"run"} and set(own["run_id"]) == {"scalerl_8b-s0"}
    new_seed = fitted.predict([1e4, 1e6], run_id="scalerl_8b-s0", kind="new_run")  # asked for: the run's recipe
    pd.testing.assert_frame_equal(new_seed, fitted.predict([1e4, 1e6], recipe="scalerl_8b"))
    assert not np.allclose(own["q95"] - own["q05"], new_seed["q95"] - new_seed["q05"])
    np.testing.assert_array_equal(fitted.sample_curves([1e5], run_id="scalerl_8b-s0"),
                                  fitted.sample_curves([1e5], run_id="scalerl_8b-s0", kind="run"))


def test_wrong_argument_types_are_refused_in_words(fitted, small_sweep, tmp_path):
    """Each gave numpy's or Python's own error from deep inside (a TypeError comparing str and
    float; a 2-D compute broke the table; a non-fit file an h5py OSError), or was read as
    something else (None as nan, True as a compute of 1)."""
    for bad in (None, True, "1e5"):
        with pytest.raises(ValueError, match=f"compute must be a number or a list of numbers, got {bad!r}"):
            fitted.predict(bad, recipe="scalerl_8b")
    with pytest.raises(TypeError, match=r"priors must be a Priors \(e.g. Priors\(a_sd=0.3\)\), got dict"):
        ScalingForecaster(priors={"a_sd": 0.3})
    with pytest.raises(TypeError, match="sampler must be a SamplerSettings .* got 'fast'"):
        ScalingForecaster(sampler="fast")
    for settings, message in (({"draws": 0}, "draws must be an integer >= 10, got 0"),
                              ({"chains": -1}, "chains must be an integer >= 1, got -1"),
                              ({"tune": 1.5}, "tune must be an integer >= 0, got 1.5"),
                              ({"target_accept": 2.0}, "target_accept must lie strictly between 0 and 1, got 2.0"),
                              ({"sampler": "bogus"}, "sampler must be 'auto', 'nutpie' or 'pymc', got 'bogus'")):
        with pytest.raises(ValueError, match=f"SamplerSettings.{message}"):
            SamplerSettings(**settings)
    with pytest.raises(ValueError, match="a_sd must be a number, got 'x'"):
        Priors(a_sd="x")
    for kwargs, message in (({"horizon": "4e12"}, "horizon must be a compute > 0 \\(a number\\), got '4e12'"),
                            ({"horizon": -1.0}, "horizon must be a compute > 0"),
                            ({"random_seed": "a"}, "random_seed must be an integer >= 0 or None, got 'a'")):
        with pytest.raises(ValueError, match=message):  # said before any sampling
            ScalingForecaster().fit(small_sweep, progress=False, **kwargs)
    for seed in (True, -1, "a"):  # refit() too, whether it would reweight or sample
        with pytest.raises(ValueError, match=f"random_seed must be an integer >= 0 or None, got {seed!r}"):
            fitted.refit(fitted.runs_, random_seed=seed)
    for bad, message in ((["1e4", "x"], "compute must be a number or a list of numbers"),
                         (["1e4"], "compute must be a number or a list of numbers"),  # read as 10000 before
                         ([True, False], "compute must be a number or a list of numbers"),  # as 1 and 0
                         (pd.Series(["1e4"]), "compute must be a number or a list of numbers"),
                         ([1e4, None], "compute must be a number or a list of numbers"),
                         ([[1e4, 1e5]], r"flat list of numbers, got an array of shape \(1, 2\)"),
                         ([1e4, -1.0], "compute must be finite and > 0, got 10000, -1")):
        with pytest.raises(ValueError, match=message):
            fitted.predict(bad, recipe="scalerl_8b")
        with pytest.raises(ValueError, match=message):
            fitted.sample_curves(bad, recipe="scalerl_8b")
    with pytest.raises(ValueError, match="target must lie in \\(0, 1\\), got '0.5'"):
        fitted.compute_to_target("0.5")
    for name in ("horizon_sd", "level_sd", "level_wander_ratio"):
        with pytest.raises(ValueError, match=f"{name} must be finite and >= 0, got -0.1"):
            ScalingForecaster(**{name: -0.1})
    with pytest.raises(ValueError, match="horizon_sd must be a number >= 0, got 'wide'"):
        ScalingForecaster(horizon_sd="wide")
    (tmp_path / "notes.md").write_text("# not a fit\n")
    with pytest.raises(NotASavedFitError, match="notes.md cannot be read as a saved fit"):  # a ValueError
        ScalingForecaster.load(tmp_path / "notes.md")


def test_plot_and_decide_take_one_recipe_by_name_and_refuse_what_they_cannot_draw(fitted):
    import matplotlib.pyplot as plt

    from forecast.decisions import decide, decide_split

    fig = fitted.plot(recipes="scalerl_8b")
    assert len([a for a in fig.axes if a.get_visible()]) == 1 and fig.axes[0].get_title() == "scalerl_8b"
    plt.close(fig)
    with pytest.raises(ValueError, match="kind='run'"):
        fitted.plot(kind="run")
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="ax holds 1 axes for 3 recipes"):
        fitted.plot(ax=ax)
    with pytest.raises(ValueError, match="recipes is empty: name at least one of scalerl"):
        fitted.plot(recipes=[])  # was a ZeroDivisionError laying out zero columns
    for budget in (0, -1e5, float("nan"), "1e5"):  # drawn as a budget line nowhere (a string: numpy's TypeError)
        with pytest.raises(ValueError, match="budget must be finite and > 0"):
            fitted.plot(budget=budget)
    plt.close("all")
    assert list(decide(fitted, 1e5, recipes="scalerl_8b").table["recipe"]) == ["scalerl_8b"]
    with pytest.raises(KeyError, match="unknown recipe 'ppo'; known: "):
        decide(fitted, 1e5, recipes=["ppo"])
    for ways in (0, 65):  # 65: the work grows as its square; a huge --max-ways ran for hours
        with pytest.raises(ValueError, match="max_ways must be between 1 and 64"):
            decide_split(fitted, 1e5, max_ways=ways)
    # as plot() refuses them: inf was "compute must be finite and > 0" (naming no budget), None and a
    # string a TypeError comparing them with 0, nan in decide_split "compute must be ..."
    for budget in (0, -1e5, float("nan"), float("inf"), "1e5", None, True):
        with pytest.raises(ValueError, match=f"budget must be finite and > 0 \\(compute in gpu_hours\\), got {re.escape(repr(budget))}"):
            decide(fitted, budget)
        with pytest.raises(ValueError, match=f"total must be finite and > 0 \\(compute in gpu_hours\\), got {re.escape(repr(budget))}"):
            decide_split(fitted, budget)


def test_asymptote_and_parameters_tables(fitted):
    a = fitted.asymptote()
    assert set(a["level"]) == {"recipe", "run"}
    assert (a["q05"] <= a["q95"]).all()
    p = fitted.parameters()
    assert set(p["parameter"]) == {"A", "B", "C_mid", "R0"}
    assert {"r_hat", "ess_bulk"} <= set(p.columns)
    assert p.query("parameter == 'C_mid'")["q50"].gt(0).all()


def test_compute_to_target_probabilities(fitted):
    easy = fitted.compute_to_target(0.45)
    impossible = fitted.compute_to_target(0.99)
    assert (easy["p_reach"] > 0.9).all()
    assert (impossible["p_reach"] < 0.05).all()
    assert np.isinf(impossible["q95"]).all()  # honest: never reached is infinite, not NaN
    assert (easy["q05"] <= easy["q50"]).all() and (easy["q50"] <= easy["q95"]).all()
    with pytest.raises(ValueError):
        fitted.compute_to_target(1.5)


def test_parameter_recovery_from_known_truth(fitted, small_sweep):
    """Real sampler, known truth: each recipe's true A (mean of its seeds) is inside a 99% interval
    and the posterior median is within 0.03."""
    truth = small_sweep.drop_duplicates("run_id").groupby("recipe")["true_A"].mean()
    draws = {r: fitted.draws("A")[:, k] for k, r in enumerate(fitted.recipes)}
    for recipe, true_a in truth.items():
        lo, med, hi = np.quantile(draws[recipe], [0.005, 0.5, 0.995])
        assert lo <= true_a <= hi, (recipe, lo, true_a, hi)
        assert abs(med - true_a) < 0.03
    b = fitted.parameters().query("parameter == 'B' and run_id.isna()").set_index("recipe")["q50"]
    true_b = small_sweep.drop_duplicates("recipe").set_index("recipe")["true_B"]
    assert np.all(np.abs(np.log(b / true_b[b.index])) < np.log(1.6))


def test_diagnostics_are_kept_and_readable(fitted):
    report = fitted.diagnostics()
    assert isinstance(report, ConvergenceReport)
    assert report.n_draws == fitted.n_draws
    # warm-up draws are not part of the posterior
    assert fitted.idata.posterior.sizes["draw"] == fitted.sampler.draws
    assert not fitted.idata.sample_stats["tuning"].values.any()
    assert "R-hat" in str(report)
    assert report.max_rhat < 1.1


def test_one_divergence_is_said_in_the_singular():
    one = ConvergenceReport(max_rhat=1.001, min_ess_bulk=900, min_ess_tail=900, divergences=1, n_draws=2000)
    assert "1 divergent transition: the posterior" in "; ".join(one.problems())


def test_convergence_report_flags_problems():
    bad = ConvergenceReport(max_rhat=1.5, min_ess_bulk=20, min_ess_tail=15, divergences=7, n_draws=400)
    assert not bad.converged
    text = str(bad)
    assert "NOT CONVERGED" in text and "7 divergent" in text and "R-hat up to 1.500" in text and "ESS" in text


def test_a_low_tail_ess_alone_flags_a_fit_and_short_chains_get_no_lower_limit_than_100():
    """The 5% and 95% quantiles every interval reports rest on the tail ESS: a default fit of the
    shipped sweep read "converged" at tail ESS 179 against a limit of 200. And the limit fell with
    the draws: a 2 x 20-draw fit passed at ESS 21 (limit 10)."""
    from forecast.inference import default_ess_limit

    tails_short = ConvergenceReport(max_rhat=1.005, min_ess_bulk=242, min_ess_tail=179, divergences=0, n_draws=2000, ess_limit=200)
    assert not tails_short.converged
    assert tails_short.problems() == ["tail ESS as low as 179 (< 200): the 5% and 95% quantiles are noisy"]
    assert ConvergenceReport(max_rhat=1.005, min_ess_bulk=242, min_ess_tail=201, divergences=0, n_draws=2000, ess_limit=200).converged
    assert default_ess_limit(2, 2000) == 200 and default_ess_limit(2, 600) == 150  # default and fast mode
    assert default_ess_limit(2, 40) == 100 and default_ess_limit(1, 40) == 100


def test_a_problem_just_past_its_limit_is_printed_with_the_digits_that_show_it():
    # a big sweep's fit printed "R-hat up to 1.010 (> 1.01)", which reads as no problem at all
    near = ConvergenceReport(max_rhat=1.0104, min_ess_bulk=399.6, min_ess_tail=500, divergences=0, n_draws=4000,
                             pareto_k=0.7004)
    assert near.problems() == [
        "R-hat up to 1.0104 (> 1.01): chains disagree",
        "bulk ESS as low as 399.6 (< 400): intervals are noisy",
        "Pareto k 0.7004 (> 0.7): the new data moved the posterior too far to reweight",
    ]
    far = ConvergenceReport(max_rhat=1.3, min_ess_bulk=20.4, min_ess_tail=15, divergences=0, n_draws=4000)
    assert "R-hat up to 1.300 (> 1.01)" in str(far) and "bulk ESS as low as 20 (< 400)" in str(far)


def test_save_load_round_trip(fitted, tmp_path):
    path = fitted.save(tmp_path / "fit.nc")
    again = ScalingForecaster.load(path)
    assert again.recipes == fitted.recipes and again.run_ids == fitted.run_ids
    assert again.settings() == fitted.settings()
    pd.testing.assert_frame_equal(again.predict([1e4, 1e5]), fitted.predict([1e4, 1e5]))
    assert again.idata.posterior.attrs["forecast_version"]


def test_a_saved_fit_reads_back_as_the_file_arviz_itself_writes(fitted, tmp_path):
    """save() renders fit.nc in memory (netcdf_image, so a full disk is a line, not an HDF5 crash): the file
    must hold what InferenceData.to_netcdf would have written, every group, variable, value and attribute."""
    import arviz as az
    import xarray as xr

    from forecast.forecaster import run_table_dataset

    ours = az.from_netcdf(fitted.save(tmp_path / "ours.nc"))
    as_arviz_writes = fitted.idata.copy()
    if "run_table" in as_arviz_writes.groups():
        del as_arviz_writes.run_table
    as_arviz_writes.add_groups({"run_table": run_table_dataset(fitted.runs_)})
    as_arviz_writes.to_netcdf(str(tmp_path / "theirs.nc"))
    theirs = az.from_netcdf(tmp_path / "theirs.nc")
    assert ours.groups() == theirs.groups() and "run_table" in ours.groups()
    for group in ours.groups():
        xr.testing.assert_identical(getattr(ours, group), getattr(theirs, group))
    assert ours.attrs == theirs.attrs


def test_a_run_table_with_knob_columns_netcdf_cannot_hold_as_they_are_saves_and_loads(fitted, tmp_path):
    """`forecast fit` fitted for minutes, then failed in save() on a categorical column (parquet
    gives them back), pandas' nullable columns and a "/" in a column name (eval/pass@1)."""
    import copy

    n = len(fitted.runs_)
    knobs = fitted.runs_.assign(**{
        "loss_type": pd.Categorical(["cispo", "dapo"] * (n // 2) + ["cispo"] * (n % 2)),
        "eval/pass@1": fitted.runs_["metric"].to_numpy(),
        "step": pd.array([None, *range(1, n)], dtype="Int64"),
        "fp32_head": pd.array([True, None, False] * (n // 3) + [True] * (n % 3), dtype="boolean"),
    })
    fc = copy.copy(fitted)
    fc.runs_ = knobs
    again = ScalingForecaster.load(fc.save(tmp_path / "fit.nc"))
    assert {"loss_type", "eval/pass@1", "step", "fp32_head"} <= set(again.runs_.columns)
    np.testing.assert_allclose(again.runs_["eval/pass@1"], again.runs_["metric"])
    assert set(again.runs_["loss_type"]) == {"cispo", "dapo"} and again.runs_["step"].isna().sum() == 1
    assert {"True", "False"} < set(again.runs_["fp32_head"])  # and the missing one, as text


def test_a_saved_fit_keeps_which_runs_ended(fitted, tmp_path):
    """A fit of a sweep folder knew which runs had ended (stopped.json, summary.json), but its saved
    fit lost it with the folder's paths: `forecast report FIT` advised them as if in flight. The run
    table's `ended` column is saved and read back; '' (in flight) stays ''."""
    import copy

    from forecast.report import ended_runs

    first, second = fitted.run_ids[:2]
    fc = copy.copy(fitted)
    fc.runs_ = fitted.runs_.assign(ended=fitted.runs_["run_id"].map({first: "finished", second: "advisor_stopped"}).fillna(""))
    again = ScalingForecaster.load(fc.save(tmp_path / "fit.nc"))
    assert {run: rule for run, (rule, _) in ended_runs(again.runs_).items()} == {first: "finished", second: "advisor_stopped"}
    assert (again.runs_.loc[~again.runs_["run_id"].isin([first, second]), "ended"] == "").all()


def test_a_knob_column_called_row_survives_save_and_load(fitted, tmp_path):
    """save() named the run table's row dimension "row": a column of that name became the dimension,
    which load() drops, so the column was lost without a word."""
    fc = ScalingForecaster.load(fitted.save(tmp_path / "fit.nc"))
    fc.runs_ = fc.runs_.assign(row=np.arange(len(fc.runs_)) % 3 * 1.5)  # repeated values, as a knob has
    again = ScalingForecaster.load(fc.save(tmp_path / "again.nc"))
    np.testing.assert_array_equal(again.runs_["row"], fc.runs_["row"])
    pd.testing.assert_frame_equal(again.runs_[["run_id", "compute", "metric"]], fitted.runs_[["run_id", "compute", "metric"]])


def test_load_takes_the_folder_the_cli_writes(fitted, tmp_path):
    fitted.save(tmp_path / "fit.nc")  # `forecast fit --out DIR` writes DIR/fit.nc
    assert ScalingForecaster.load(tmp_path).run_ids == fitted.run_ids
    with pytest.raises(FileNotFoundError, match="no saved fit at .*empty.fit\\.nc"):
        (tmp_path / "empty").mkdir()
        ScalingForecaster.load(tmp_path / "empty")


def test_save_to_a_folder_says_so_and_names_a_file_path(fitted, tmp_path):
    """load() reads a folder's fit.nc, so save() is handed the folder too; it failed with
    IsADirectoryError naming its own temporary file ('.out.x1y2.tmp' -> 'out')."""
    (tmp_path / "out").mkdir()
    with pytest.raises(IsADirectoryError, match="out is a folder: save\\(\\) writes one file, e.g. .*out.fit\\.nc"):
        fitted.save(tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_load_refuses_other_versions(fitted, tmp_path):
    import arviz as az

    path = fitted.save(tmp_path / "fit.nc")
    idata = az.from_netcdf(str(path))
    idata.posterior.attrs["forecast_version"] = "0.0.1"
    idata.to_netcdf(str(tmp_path / "old.nc"))
    with pytest.raises(ValueError, match="0.0.1"):
        ScalingForecaster.load(tmp_path / "old.nc")
    assert ScalingForecaster.load(tmp_path / "old.nc", allow_version_mismatch=True).recipes == fitted.recipes


def test_plot_returns_a_figure_with_one_panel_per_recipe(fitted):
    fig = fitted.plot(budget=2e5)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == len(fitted.recipes)
    assert all(ax.get_xscale() == "log" for ax in visible)


def test_fit_refuses_bad_table_before_sampling():
    from forecast import RunDataError

    table = pd.DataFrame({"run_id": ["a", "a"], "recipe": ["x", "x"], "compute": [1.0, -2.0], "metric": [0.1, 0.2]})
    with pytest.raises(RunDataError, match="compute"):
        ScalingForecaster().fit(table)


def test_too_few_draws_are_refused_before_sampling_not_after():
    """SamplerSettings(draws=5) was accepted; fit() sampled, then failed in the diagnostics with
    numpy's 'attempt to get argmax of an empty sequence' (split-chain ESS needs pairs of lags in
    each half-chain). The fewest draws that can be judged, MIN_DRAWS, are the least accepted."""
    from forecast.inference import MIN_DRAWS, diagnostics_arrays

    for draws in (1, 5, MIN_DRAWS - 1):
        with pytest.raises(ValueError, match=f"SamplerSettings.draws must be an integer >= {MIN_DRAWS}, got {draws}"):
            SamplerSettings(draws=draws)
    rng = np.random.default_rng(0)
    for chains in (1, 2):  # the least accepted can be judged, with one chain or two
        SamplerSettings(draws=MIN_DRAWS, chains=chains)
        rhat, ess_bulk, ess_tail = diagnostics_arrays(rng.normal(size=(chains, MIN_DRAWS, 3)))
        assert np.isfinite(rhat).all() and np.isfinite(ess_bulk).all() and np.isfinite(ess_tail).all()


def test_vectorised_diagnostics_match_arviz(fitted):
    import arviz as az

    from forecast.inference import diagnostics_arrays

    post = fitted.idata.posterior
    names = ["A", "A_run", "sigma_extra"]
    columns = np.concatenate([post[v].values.reshape(post.sizes["chain"], post.sizes["draw"], -1) for v in names], axis=2)
    rhat, ess_bulk, ess_tail = diagnostics_arrays(columns)

    def arviz(fn, **kw):
        result = fn(fitted.idata, var_names=names, **kw)
        return np.concatenate([result[v].values.ravel() for v in names])

    np.testing.assert_allclose(rhat, arviz(az.rhat), rtol=1e-9)
    np.testing.assert_allclose(ess_bulk, arviz(az.ess, method="bulk"), rtol=1e-9)
    np.testing.assert_allclose(ess_tail, arviz(az.ess, method="tail"), rtol=1e-9)


def test_a_refit_on_a_reused_compiled_model_draws_as_a_fresh_one(small_sweep, monkeypatch, tmp_path):
    """A compiled model is reused by every fit of the same structure in a process. Its chains must
    start from the new data's initial point, and its draws carry the new data's run names: a fit
    must not depend on what the process fitted before (a backtest's decisions did).

    Compiling leaves no files in the temp folder: PyTensor's numba backend writes the source of
    each generated function to a temporary file it never deletes (about 35 a model), and every
    `forecast fit` left them in /tmp. They go into one folder of the process's own, removed at exit."""
    import tempfile
    import types

    from forecast import inference
    from tests.conftest import small_recipe_table

    first = small_sweep
    other = simulate_sweep(small_recipe_table(), n_seeds=2, n_points=16, rng=8, r0=0.2)
    other["run_id"] = other["run_id"] + "-b"

    def fit(table):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ScalingForecaster(mode="fast").fit(table, random_seed=3, progress=False, pad_to=128)

    # the session's compiled model of this structure (the shared fits'; compiled here if this test runs alone),
    # its data now `first`'s: below it fits `other`, whose fresh fit it must then draw as
    fit(first)
    session_models = inference._COMPILED_CACHE

    at_exit = []
    monkeypatch.setattr(inference, "_GENERATED_SOURCE_DIR", None)
    # inference's own atexit alone: a library imported by the first compile of a process registers its own
    monkeypatch.setattr(inference, "atexit", types.SimpleNamespace(register=lambda *call, **kwargs: at_exit.append((call, kwargs))))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    monkeypatch.setattr(inference, "_COMPILED_CACHE", {})  # a fresh compile, the session's compiled models untouched
    fresh = fit(other)
    assert not fresh.fit_info_["compiled_model_reused"]
    assert tempfile.tempdir == str(tmp_path)  # restored for everything else in the process
    (folder,) = list(tmp_path.iterdir())  # nothing but the process's own folder
    assert folder == tmp_path / inference._GENERATED_SOURCE_DIR and len(list(folder.iterdir())) > 10
    (((remove, path), kwargs),) = at_exit
    remove(path, **kwargs)  # what happens at exit, or a /tmp cleaner's doing in a long `watch`
    assert not any(tmp_path.iterdir())
    with inference._generated_source_in_own_folder():  # the next compile's: the same folder, made anew
        assert tempfile.gettempdir() == str(folder) and folder.is_dir()
    assert tempfile.tempdir == str(tmp_path) and len(at_exit) == 1
    # not a second compile (seconds of numba) to see that: a compile goes into the folder this block gives
    monkeypatch.setattr(inference, "_COMPILED_CACHE", session_models)
    reused = fit(other)
    assert reused.fit_info_["compiled_model_reused"]
    for name in ("a_mu", "r0_mu", "A_run"):
        np.testing.assert_array_equal(reused.idata.posterior[name].values, fresh.idata.posterior[name].values)
    assert list(reused.idata.posterior["run"].values) == reused.run_ids == list(fresh.idata.posterior["run"].values)
    assert all(run.endswith("-b") for run in reused.run_ids)


# a fit in a process of its own, for the test below: the same sweep, seed and chains each time
_FIT_IN_A_NEW_PROCESS = """
import hashlib, warnings
from forecast import SamplerSettings, ScalingForecaster
from forecast.synthetic import simulate_sweep
from tests.conftest import small_recipe_table
warnings.simplefilter("ignore")
sweep = simulate_sweep(small_recipe_table(), n_seeds=2, n_points=16, rng=7)
fc = ScalingForecaster(mode="fast", sampler=SamplerSettings(draws=100, tune=100)).fit(sweep, random_seed=3, progress=False)
print(hashlib.sha256(fc.idata.posterior["A_run"].values.tobytes()).hexdigest())
"""


@pytest.mark.slow  # two processes, each compiling or loading a model and sampling it: about 35 s
def test_one_seed_draws_the_same_from_a_first_compile_as_from_numbas_disk_cache(tmp_path):
    """The first fit of a model structure on a machine compiles it; every later process loads the
    compiled Ops from numba's disk cache (PyTensor's base_compiledir). Under PyTensor's default
    fast-math the two rounded the gradient differently in its last bit, and with one seed the
    first process drew other chains than every later one: a fresh checkout's first `make demo`, or a
    backtest's decisions, differed from the same command run again. Two processes, the first on
    an empty cache, must draw the same."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    flags = ",".join(f for f in (os.environ.get("PYTENSOR_FLAGS"), f"base_compiledir={tmp_path / 'cache'}") if f)
    env = {**os.environ, "PYTENSOR_FLAGS": flags, "PYTHONPATH": str(repo)}

    def fit_in_a_new_process():
        done = subprocess.run([sys.executable, "-c", _FIT_IN_A_NEW_PROCESS], env=env, cwd=repo, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    first, later = fit_in_a_new_process(), fit_in_a_new_process()
    assert any((tmp_path / "cache" / "numba").iterdir())  # the first wrote numba's cache, which the later read
    assert first == later


def test_a_table_without_n_eval_is_fitted_twice_on_one_compiled_model(small_sweep, monkeypatch):
    """n_eval is optional. Without it the model has no n_eval node, and a second fit in the same
    process (a notebook's refit, the Optuna pruner's next trial) reuses the compiled model: it
    failed with "Unknown shared variable: n_eval" when the data still carried one."""
    from forecast import inference

    table = small_sweep.drop(columns="n_eval")
    session_models = inference._COMPILED_CACHE
    monkeypatch.setattr(inference, "_COMPILED_CACHE", {})

    def fit(seed):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ScalingForecaster(mode="fast").fit(table, random_seed=seed, progress=False)

    first, second = fit(1), fit(2)
    # the model compiled here is handed to the session's cache: a later test's fit without n_eval (this
    # structure) reuses it instead of compiling it again (seconds of numba), as a notebook's second fit would
    session_models.update(inference._COMPILED_CACHE)
    assert not first.fit_info_["compiled_model_reused"] and second.fit_info_["compiled_model_reused"]
    assert not second.data_.has_n_eval and np.isfinite(second.predict([2e5])["q50"]).all()


def test_a_fit_told_the_planned_budget_keeps_that_axis_through_refits(small_sweep, tmp_path):
    """fit(horizon=budget) sets the priors on the compute range up to the budget (model.prepare_data)
    and records it; a refit by reweighting keeps that axis, and so that prior, and so does its saved fit."""
    budget = float(small_sweep["compute"].max())
    order = small_sweep.groupby("run_id")["compute"].rank(method="first") - 1  # 0 = a run's first evaluation
    early = small_sweep[order < 8]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster(mode="fast").fit(early, random_seed=3, progress=False, pad_to=128, horizon=budget)
        assert fc.fit_info_["horizon"] == budget and fc.data_.to_x(budget) == pytest.approx(1.0)
        assert fc.data_.x[fc.data_.weight > 0].max() < 0.5  # the first 8 of 16 evaluations: the lower half
        first_run = sorted(small_sweep["run_id"].unique())[0]
        grown = small_sweep[(order < 8) | ((order == 8) & (small_sweep["run_id"] == first_run))]
        fc.refit(grown, random_seed=4, pad_to=128, horizon=budget)
    assert fc.fit_info_["reweighted"] and fc.data_.n_obs == len(early) + 1
    assert fc.fit_info_["frame"] == fc._base["data"].frame() and fc.data_.to_x(budget) == pytest.approx(1.0)
    # parameters() of the reweighted fit gives the sampled fit's R-hat, and its ESS scaled as
    # diagnostics() scales it, not R-hat and ESS of draws resampled with repeats
    base = ScalingForecaster(mode="fast")
    base._set_fit(early, fc._base["data"], fc._base["idata"], {}, fc._base["report"])
    sampled, reweighted = base.parameters(), fc.parameters()
    efficiency = fc.diagnostics().reweight_efficiency
    assert efficiency < 1
    np.testing.assert_allclose(reweighted["r_hat"], sampled["r_hat"])
    np.testing.assert_allclose(reweighted["ess_bulk"], sampled["ess_bulk"] * efficiency)
    # load() reads the axis back from the fit, not from its runs, which end below the budget (mutant: the axis
    # made again from the loaded runs survived): a run's own forecast then filtered its wander on another scale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fast fit's convergence
        loaded = ScalingForecaster.load(fc.save(tmp_path / "fit.nc"))
    assert loaded.data_.to_x(budget) == pytest.approx(1.0)
    pd.testing.assert_frame_equal(loaded.predict([budget], run_id=first_run), fc.predict([budget], run_id=first_run))


def test_a_refit_that_samples_keeps_the_last_fits_horizon(small_sweep):
    """refit() samples when it cannot reweight; it used to drop fit(horizon=...) then, so the same
    forecast moved with the path taken. The horizon is kept while it lies beyond the runs, and a
    new one wins. Sampling is replaced by a spy on fit(): what matters is the horizon it gets."""
    fc = ScalingForecaster()
    given = []
    fc.fit = lambda runs, **kwargs: given.append(kwargs["horizon"]) or fc
    reach = float(small_sweep["compute"].max())
    fc.fit_info_ = {"horizon": 8 * reach}
    fc.refit(small_sweep)
    fc.refit(small_sweep, horizon=16 * reach)
    fc.fit_info_ = {"horizon": reach / 2}  # the runs have grown past it: it would have no effect
    fc.refit(small_sweep)
    assert given == [8 * reach, 16 * reach, None]


def test_a_horizon_the_runs_already_reach_is_said_to_have_no_effect(fitted, small_sweep, monkeypatch):
    """The CLI says so for --horizon; the Python API said nothing and sampled as if it were used.
    Sampling is faked: the warning comes before it. A horizon beyond the data says nothing."""
    fake_sampling(monkeypatch, fitted, [{}, {}])
    inside = float(small_sweep["compute"].max()) / 2
    reach = fmt_compute(small_sweep["compute"].max())  # as every message writes compute: 162,688, not 1.63e+05
    with pytest.warns(UserWarning, match=f"horizon={inside:g} has no effect: the runs already reach {reach},"):
        ScalingForecaster().fit(small_sweep, random_seed=0, progress=False, horizon=inside)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ScalingForecaster().fit(small_sweep, random_seed=0, progress=False, horizon=4 * inside)


def test_a_compute_far_from_the_data_is_flagged_in_python_as_on_the_command_line(fitted, small_sweep, monkeypatch):
    """The CLI flags a --horizon, --compute or --budget 100x beyond the data (or below it) as a
    likely unit mix-up; fit(horizon=...), predict() and plot(budget=...) said nothing, and a horizon
    in the wrong unit reshaped the priors silently. One FarFromDataWarning per call, pointing at the
    caller's line. Sampling is faked: the horizon's warning comes before it."""
    import matplotlib.pyplot as plt

    from forecast import FarFromDataWarning

    largest, smallest = float(small_sweep["compute"].max()), float(small_sweep["compute"].min())

    def far(call):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = call()
        if result is not None and hasattr(result, "savefig"):
            plt.close(result)
        return [w for w in caught if issubclass(w.category, FarFromDataWarning)]

    said = far(lambda: fitted.predict([2 * largest, 1e3 * largest, 1e4 * largest], recipe="scalerl_8b"))
    assert len(said) == 1 and str(said[0].message).startswith("compute ") and "1,000x the largest" in str(said[0].message)
    assert said[0].filename == __file__  # the notebook's line, not the package's
    said = far(lambda: fitted.predict(smallest / 10, run_id=fitted.run_ids[0]))
    assert len(said) == 1 and "below the smallest compute in the data" in str(said[0].message)
    said = far(lambda: fitted.plot(recipes="scalerl_8b", budget=1e3 * largest))  # its grid's predict() stays quiet
    assert [str(w.message).split(" ")[0] for w in said] == ["budget"]
    assert far(lambda: fitted.predict([largest / 2, 4 * largest], recipe="scalerl_8b")) == []
    fake_sampling(monkeypatch, fitted, [{}, {}])
    said = far(lambda: ScalingForecaster().fit(small_sweep, random_seed=0, progress=False, horizon=1e3 * largest))
    assert len(said) == 1 and str(said[0].message).startswith("horizon ") and "Is the unit right?" in str(said[0].message)


def test_settings_that_are_no_numbers_or_no_bools_are_refused_when_made():
    """float() took horizon_sd="0.01" and True (1.0: bands a hundred times wider), and robust="False"
    is true, a Student-t fit nobody asked for; fit(horizon="4e12") was refused all along."""
    for name in ("horizon_sd", "level_sd", "level_wander_ratio"):
        for value in ("0.01", True, None):
            with pytest.raises(ValueError, match=f"{name} must be a number >= 0, got "):
                ScalingForecaster(**{name: value})
    assert ScalingForecaster(horizon_sd=np.float32(0.01), level_sd=0).level_sd == 0.0
    for robust in ("False", 1, None):
        with pytest.raises(ValueError, match="robust must be True or False, got "):
            ScalingForecaster(robust=robust)
    assert ScalingForecaster(robust=np.True_).robust is True
    for pad_to in ("256", 2.5, True, -1):  # "256" was a TypeError comparing it with the row count
        with pytest.raises(ValueError, match="pad_to must be a whole number of rows >= 0 or None, got "):
            ScalingForecaster().fit(simulate_sweep(n_seeds=1, n_points=4), pad_to=pad_to)


def test_switches_that_are_no_bools_are_refused_naming_the_argument(fitted, tmp_path):
    """A non-empty string is true: predict(noise="no") drew with noise, sample_curves(eval_noise="False")
    kept the evaluation noise, fit(progress="no") showed a bar. Each switch takes a bool, as robust= does."""
    from forecast import cross_validate

    recipe = fitted.recipes[0]
    for name in ("noise", "eval_noise", "shared_noise", "paths"):
        with pytest.raises(ValueError, match=f"^{name} must be True or False, got 'False'$"):
            fitted.sample_curves([1e3], recipe=recipe, **{name: "False"})
    with pytest.raises(ValueError, match="^noise must be True or False, got 'no'$"):
        fitted.predict([1e3], recipe=recipe, noise="no")
    with pytest.raises(ValueError, match="^noise must be True or False, got 0$"):
        fitted.predict([1e3], recipe=recipe, noise=0)
    runs = simulate_sweep(n_seeds=1, n_points=4)
    with pytest.raises(ValueError, match="^progress must be True, False or None, got 'no'$"):
        ScalingForecaster(mode="fast").fit(runs, progress="no")
    with pytest.raises(ValueError, match="^progress must be True, False or None, got 'no'$"):
        ScalingForecaster(mode="fast").refit(runs, progress="no")
    with pytest.raises(ValueError, match="^reweight must be True or False, got 'no'$"):
        ScalingForecaster(mode="fast").refit(runs, reweight="no")
    with pytest.raises(ValueError, match="^allow_version_mismatch must be True or False, got 'yes'$"):
        ScalingForecaster.load(tmp_path / "fit.nc", allow_version_mismatch="yes")
    for name in ("progress", "low_rank_mass_matrix", "extend_if_flagged"):
        with pytest.raises(ValueError, match=f"^SamplerSettings.{name} must be True"):
            SamplerSettings(**{name: "False"})
    for name in ("planned_budget", "progress"):
        with pytest.raises(ValueError, match=f"^{name} must be True"):
            cross_validate(runs, **{name: "False"})
    # bools of numpy's pass and are kept as bools
    assert SamplerSettings(extend_if_flagged=np.False_).extend_if_flagged is False
    quiet = fitted.sample_curves([1e3], recipe=recipe, noise=np.False_)
    assert np.array_equal(quiet, fitted.sample_curves([1e3], recipe=recipe, noise=False))


class Tries(list):
    """Each try as (target_accept, draws, tune, recipe level non-centred); `starts_centred` and
    `runs_centred` say, try by try, whether the runs' starts and the runs' asymptotes were centred."""

    def __init__(self):
        super().__init__()
        self.starts_centred = []
        self.runs_centred = []


def fake_sampling(monkeypatch, fitted, reports, centre_starts_below=0.0):
    """Fake the sampler and its diagnostics inside ScalingForecaster.fit: every try returns the shared
    fit's draws (idata.attrs["try"] numbers it), and its report is a converged one with the next
    entry of `reports` (dicts of made-up R-hat, ESS, divergences) laid over it. Returns the list
    that records each try (Tries). The shared fit pins its runs' starts down tightly (its
    start_uncertainty_ratio is well under 1), so the centred-starts try is left out unless
    `centre_starts_below` is raised above that ratio: the tests of the other tries keep their order."""
    import copy
    import dataclasses

    import forecast.forecaster as forecaster_module
    from forecast.inference import convergence_report

    tries, made_up = Tries(), iter(reports)
    monkeypatch.setattr(forecaster_module, "CENTRE_STARTS_BELOW", centre_starts_below)

    def fake_sample_model(build_model, settings, **kwargs):
        free = {v.name for v in build_model().free_RVs}
        tries.append((settings.target_accept, settings.draws, settings.tune, "logit_A_recipe_z" in free))
        tries.starts_centred.append("logit_R0_run" in free)
        tries.runs_centred.append("logit_A_run" in free)
        idata = copy.deepcopy(fitted.idata)
        idata.attrs["try"] = len(tries)
        return idata, {"sampler": "fake", "sample_seconds": 0.0}

    def fake_report(idata):
        converged = {"max_rhat": 1.002, "min_ess_bulk": 1000.0, "min_ess_tail": 1000.0, "divergences": 0}
        return dataclasses.replace(convergence_report(idata), **{**converged, **next(made_up)})

    monkeypatch.setattr(forecaster_module, "sample_model", fake_sample_model)
    monkeypatch.setattr(forecaster_module, "convergence_report", fake_report)
    return tries


@pytest.mark.parametrize(
    "divergences, expected_tries, kept_recipe_centred",
    [
        ([5, 3, 0], [(0.9, False), (0.97, False), (0.97, True)], False),  # the fallback fixes it
        ([5, 3, 4], [(0.9, False), (0.97, False), (0.97, True)], True),  # it does not: keep the fewest
        ([5, 0], [(0.9, False), (0.97, False)], True),  # the retry alone fixes it: no fallback
    ],
)
def test_a_fit_that_still_diverges_tries_the_recipe_level_non_centred(
    fitted, small_sweep, monkeypatch, divergences, expected_tries, kept_recipe_centred
):
    """Sampling is faked (the shared fit's draws, with made-up divergence counts), so the test
    checks what the forecaster tries in which order and which try it keeps."""
    tries = fake_sampling(monkeypatch, fitted, [{"divergences": d} for d in divergences])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # longer chains for a fit still flagged come after these tries: the next test
        fc = ScalingForecaster(sampler=SamplerSettings(extend_if_flagged=False)).fit(small_sweep, random_seed=0, progress=False)
    assert [(accept, non_centred) for accept, _, _, non_centred in tries] == expected_tries
    assert fc.fit_info_["centered"] is True
    assert fc.fit_info_["recipe_centered"] is kept_recipe_centred
    assert fc.diagnostics().divergences == min(divergences)
    assert ("recipe_noncentred_divergences" in fc.fit_info_["retry"]) is (len(divergences) == 3)
    tries = fc.sampling_tries()  # what `forecast fit`, the demo and the report print
    assert tries.startswith(f"divergences by try: {divergences[0]} at target acceptance 0.9; {divergences[1]} at 0.97")
    assert ("with the recipe level non-centred" in tries) is (len(divergences) == 3)
    assert tries.endswith("(kept)") is (kept_recipe_centred is False)


def test_a_retry_whose_draws_broke_is_not_kept_over_a_try_that_only_diverged(fitted, small_sweep, monkeypatch):
    """Tries were ranked on divergences, then max R-hat, alone: a retry with NaN draws and no divergence
    (its R-hat the other variables') beat the first try's 5 divergences and was kept, and with no divergence
    left the recipe level was never tried non-centred. A broken try now ranks behind any that is not, so the
    non-centred try runs and is kept (3 divergences). Sampling is faked as in the tests above."""
    reports = [{"divergences": 5}, {"divergences": 0, "nonfinite_draws": ["A"]}, {"divergences": 3}]
    tries = fake_sampling(monkeypatch, fitted, reports)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster(sampler=SamplerSettings(extend_if_flagged=False)).fit(small_sweep, random_seed=0, progress=False)
    assert [(accept, non_centred) for accept, _, _, non_centred in tries] == [(0.9, False), (0.97, False), (0.97, True)]
    assert fc.diagnostics().nonfinite_draws == [] and fc.diagnostics().divergences == 3
    assert fc.fit_info_["recipe_centered"] is False


@pytest.mark.parametrize(
    "reports, extend, expected_tries, longer_kept",
    [
        # flagged for R-hat alone, never divergent: twice the draws and warm-up, still centred, kept
        ([{"max_rhat": 1.03}, {"max_rhat": 1.004}], True, [(0.9, 1000, 1000, False), (0.9, 2000, 2000, False)], True),
        # the centred first try diverged: every level non-centred next (fewer divergences, kept), its retry
        # at 0.97 in that form removes them but leaves R-hat: longer chains in that form, at 0.97
        ([{"divergences": 5}, {"divergences": 1}, {"max_rhat": 1.03}, {}], True,
         [(0.9, 1000, 1000, False), (0.9, 1000, 1000, True), (0.97, 1000, 1000, True), (0.97, 2000, 2000, True)], True),
        # every level non-centred no better than the centred first try: the centred retry at 0.97, then the
        # recipe level non-centred (no better), then longer chains from the retry's target acceptance with
        # the recipe level non-centred (a centred fit that diverged sits in the funnel)
        ([{"divergences": 5}, {"divergences": 6}, {"divergences": 1}, {"divergences": 2}, {}], True,
         [(0.9, 1000, 1000, False), (0.9, 1000, 1000, True), (0.97, 1000, 1000, False), (0.97, 1000, 1000, True),
          (0.97, 2000, 2000, True)], True),
        # the longer chains diverge more: the flagged fit is kept, and says so (then the last
        # resort, every level non-centred, is no better: the next test)
        ([{"max_rhat": 1.03}, {"divergences": 3}, {"max_rhat": 1.04}], True,
         [(0.9, 1000, 1000, False), (0.9, 2000, 2000, False), (0.9, 1000, 1000, True)], False),
        ([{}], True, [(0.9, 1000, 1000, False)], None),  # converged at once: one try
        ([{"max_rhat": 1.03}], False, [(0.9, 1000, 1000, False)], None),  # extend_if_flagged=False
    ],
)
def test_a_fit_still_flagged_is_sampled_again_with_longer_chains(
    fitted, small_sweep, monkeypatch, reports, extend, expected_tries, longer_kept
):
    """Sampling and diagnostics are faked (the shared fit's draws; R-hat and divergences made up,
    every other number a converged fit's), so the test checks when longer chains are tried, in
    which form, which try is kept, and what sampling_tries() tells the user."""
    tries = fake_sampling(monkeypatch, fitted, reports)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster(sampler=SamplerSettings(extend_if_flagged=extend)).fit(small_sweep, random_seed=0, progress=False)
    assert tries == expected_tries
    longer = fc.fit_info_.get("longer")
    tried_longer = fc.sampling_tries() or ""
    if longer_kept is None:
        assert longer is None and "sampled again" not in tried_longer
        return
    assert longer["kept"] is longer_kept and (longer["draws"], longer["tune"]) == (2000, 2000)
    longer_index = next(i for i, (_, draws, _, _) in enumerate(expected_tries) if draws == 2000)
    assert fc.idata.attrs["try"] == (longer_index + 1 if longer_kept else longer_index)
    assert fc.diagnostics().converged is longer_kept
    longer_non_centred = expected_tries[longer_index][3]
    assert longer["recipe_centered"] is (not longer_non_centred)
    kept_try = expected_tries[fc.idata.attrs["try"] - 1]
    assert fc.fit_info_["recipe_centered"] is (not kept_try[3])  # the kept try's form, whichever it is
    assert fc.fit_info_["longer"]["runs_centered"] is tries.runs_centred[longer_index]
    form = ("" if not longer_non_centred else " with the recipe level non-centred" if tries.runs_centred[longer_index]
            else " with every level non-centred")
    assert f"sampled again with 2000 draws and 2000 warm-up per chain{form}:" in tried_longer
    assert ("converged (kept)" if longer_kept else "(not kept: it diverged more)") in tried_longer
    assert "(kept)." not in tried_longer  # an earlier try is not called kept when the longer one was


def test_every_level_non_centred_samples_at_the_target_acceptance_of_the_first_try(fitted, small_sweep, monkeypatch):
    # the centred first try diverged at the user's 0.95: every level non-centred at 0.95 too, which converged
    tries = fake_sampling(monkeypatch, fitted, [{"divergences": 5}, {}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster(sampler=SamplerSettings(target_accept=0.95)).fit(small_sweep, random_seed=0, progress=False)
    assert tries == [(0.95, 1000, 1000, False), (0.95, 1000, 1000, True)] and tries.runs_centred == [True, False]
    assert fc.fit_info_["noncentred"]["kept"] and fc.diagnostics().converged


@pytest.mark.parametrize("every_level, later", [
    ({}, None),  # converged at once: no retry, no longer chains
    ({"max_rhat": 1.03}, "longer"),  # kept (no divergence) but flagged: longer chains in that form, kept
    ({"divergences": 1}, "retry"),  # kept (fewer divergences): the retry at 0.97 in that form, kept
])
def test_a_centred_fit_that_diverged_tries_every_level_non_centred_next(fitted, small_sweep, monkeypatch, every_level, later):
    """A divergence of the centred first try is a funnel, which a new form leaves and smaller steps or
    longer chains do not: every level non-centred comes next, before the retry at a higher target
    acceptance and before longer chains, which then sample in the kept form. Sampling and diagnostics
    faked as above."""
    reports = [{"divergences": 5}, every_level] + ([{}] if later else [])
    tries = fake_sampling(monkeypatch, fitted, reports)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster().fit(small_sweep, random_seed=0, progress=False)
    # longer chains at the retry's target acceptance, as a try diverged: smaller steps
    then = {None: [], "longer": [(0.97, 2000, 2000, True)], "retry": [(0.97, 1000, 1000, True)]}[later]
    assert tries == [(0.9, 1000, 1000, False), (0.9, 1000, 1000, True)] + then
    assert tries.runs_centred == [True] + [False] * (len(tries) - 1)
    assert fc.fit_info_["noncentred"]["kept"] and fc.fit_info_["noncentred"]["after_first_try"]
    assert fc.fit_info_["centered"] is False and fc.fit_info_["recipe_centered"] is False
    assert fc.diagnostics().converged and fc.idata.attrs["try"] == len(tries)
    said = fc.sampling_tries()
    divergences = every_level.get("divergences", 0)
    first = f"divergences by try: 5 at target acceptance 0.9; {divergences} at 0.9 with every level non-centred"
    if later is None:
        assert said == first and "retry" not in fc.fit_info_ and "longer" not in fc.fit_info_
    elif later == "retry":
        assert said == first + "; 0 at 0.97 with every level non-centred"
        assert fc.fit_info_["retry"]["runs_centered"] is False and "longer" not in fc.fit_info_
    else:
        assert fc.fit_info_["longer"]["runs_centered"] is False and fc.fit_info_["longer"]["kept"]
        assert said == (first + ". Still flagged (R-hat up to 1.030 (> 1.01): chains disagree), so sampled again with "
                        "2000 draws and 2000 warm-up per chain with every level non-centred: converged (kept)")


def test_a_fit_non_centred_throughout_names_no_form_in_its_retries(fitted, small_sweep, monkeypatch):
    """The form is named where it changed after the first try; a fit non-centred from the start (by
    the rule or by choice) retries at 0.97 in the same form, and saying so read as if its first try
    had been centred. Sampling and diagnostics faked as above."""
    tries = fake_sampling(monkeypatch, fitted, [{"divergences": 5}, {}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster(parametrization="noncentered").fit(small_sweep, random_seed=0, progress=False)
    assert tries.runs_centred == [False, False] and "noncentred" not in fc.fit_info_
    assert fc.sampling_tries() == "divergences by try: 5 at target acceptance 0.9; 0 at 0.97"


def test_every_level_non_centred_after_the_first_try_is_not_tried_again_when_no_better(fitted, small_sweep, monkeypatch):
    """Not kept after the first try, it does not come back as the last resort: the centred retries and
    longer chains decide. Sampling and diagnostics faked as above."""
    tries = fake_sampling(monkeypatch, fitted, [{"divergences": 5}, {"divergences": 9}, {"divergences": 2},
                                                {"divergences": 3}, {"max_rhat": 1.03}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster().fit(small_sweep, random_seed=0, progress=False)
    assert tries.runs_centred == [True, False, True, True, True] and len(tries) == 5
    assert not fc.fit_info_["noncentred"]["kept"] and fc.fit_info_["centered"] is True
    said = fc.sampling_tries()
    assert said.startswith("divergences by try: 5 at target acceptance 0.9; 9 at 0.9 with every level non-centred "
                           "(not kept); 2 at 0.97; 3 at 0.97 with the recipe level non-centred. Still flagged")
    assert said.count("every level non-centred") == 1


@pytest.mark.parametrize("last_resort, kept", [({}, True), ({"max_rhat": 1.04}, False)])
def test_a_centred_fit_flagged_after_longer_chains_tries_every_level_non_centred(
    fitted, small_sweep, monkeypatch, last_resort, kept
):
    """The last resort for runs their data pin down less tightly than the seeds spread (the
    shipped trainer sweep); sampling and diagnostics faked as above."""
    tries = fake_sampling(monkeypatch, fitted, [{"max_rhat": 1.03}, {"max_rhat": 1.02}, last_resort])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster().fit(small_sweep, random_seed=0, progress=False)
    assert tries == [(0.9, 1000, 1000, False), (0.9, 2000, 2000, False), (0.9, 1000, 1000, True)]
    assert fc.fit_info_["noncentred"]["kept"] is kept
    assert fc.idata.attrs["try"] == (3 if kept else 2)
    assert fc.fit_info_["centered"] is (not kept) and fc.fit_info_["recipe_centered"] is (not kept)
    assert fc.diagnostics().converged is kept
    said = fc.sampling_tries()
    assert "so sampled again with every level non-centred: " in said
    assert said.endswith("converged (kept)" if kept else "(not kept: no better)")
    # each try after the first is a sentence of its own, read on the report's page: "... (kept). Still flagged ..."
    assert ". still flagged" not in said and ". Still flagged (" in said
    assert ("not kept: the next try did better" in said) is kept  # the longer try, replaced
    # a refit that reweights these draws sampled nothing: it tells of no tries (it told of the last
    # resort alone, without the tries before it)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc.refit(small_sweep, random_seed=1, progress=False)
    assert fc.fit_info_["reweighted"] and fc.sampling_tries() is None


def test_start_uncertainty_ratio_is_the_median_start_sd_over_the_mean_starts_spread():
    import xarray as xr

    from forecast.forecaster import start_uncertainty_ratio

    rng = np.random.default_rng(0)
    unit = rng.standard_normal((2, 4000))
    unit = (unit - unit.mean()) / unit.std()  # sd exactly 1 over chains and draws together
    starts = np.stack([0.1 * unit, 0.3 * unit + 2.0, 0.2 * unit - 1.0], axis=-1)  # sds 0.1, 0.3, 0.2: median 0.2
    spread = np.full((2, 4000), 0.5)
    spread[1] = 0.3  # mean 0.4
    posterior = xr.Dataset({"logit_R0_run": (("chain", "draw", "run"), starts), "r0_sd": (("chain", "draw"), spread)})
    assert start_uncertainty_ratio(posterior) == pytest.approx(0.2 / 0.4)


@pytest.mark.parametrize(
    "reports, expected_starts, kept_try",
    [
        # flagged; the centred starts converge: kept, and nothing more is tried
        ([{"max_rhat": 1.03}, {}], [False, True], 2),
        # flagged for ESS alone, R-hat the same: converged centred, so kept
        ([{"min_ess_tail": 100.0, "max_rhat": 1.008}, {"max_rhat": 1.008}], [False, True], 2),
        # no better (a higher R-hat): not kept, and the longer chains follow with the starts non-centred
        ([{"max_rhat": 1.03}, {"max_rhat": 1.04}, {}], [False, True, False], 3),
        # better but still flagged: not kept either. Kept, it led the longer chains into its form, where
        # they stayed flagged on a fit whose longer chains converged with the starts non-centred
        ([{"max_rhat": 1.03}, {"max_rhat": 1.02}, {}], [False, True, False], 3),
    ],
)
def test_a_flagged_fit_whose_data_pin_each_start_down_tries_the_starts_centred(
    fitted, small_sweep, monkeypatch, reports, expected_starts, kept_try
):
    """The synthetic Table-1 sweep's default fits were flagged on 4 of 6 random seeds after every try, the
    starts' spread (r0_sd) the least mixed: 16,000 graded samples an evaluation pin each run's start
    down, and its non-centred z-score then sits on a ridge with the spread. The try with the starts centred
    is kept only if it converges; otherwise the tries after it run as if it had not been made. Sampling and
    diagnostics are faked as above; the shared fit's start_uncertainty_ratio is under the threshold set here."""
    from forecast.forecaster import start_uncertainty_ratio

    ratio = start_uncertainty_ratio(fitted.idata.posterior)
    tries = fake_sampling(monkeypatch, fitted, reports, centre_starts_below=ratio * 1.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster().fit(small_sweep, random_seed=0, progress=False)
    assert tries.starts_centred == expected_starts
    assert tries[1] == tries[0]  # the same chains as the try it follows: only the starts' form differs
    starts_kept = kept_try == 2
    assert fc.idata.attrs["try"] == kept_try and fc.diagnostics().converged
    assert fc.fit_info_["centred_starts"]["kept"] is starts_kept
    assert fc.fit_info_["centred_starts"]["ratio"] == pytest.approx(ratio)
    assert fc.fit_info_["starts_centered"] is starts_kept
    said = fc.sampling_tries()
    first_problem = "tail ESS as low as 100" if "min_ess_tail" in reports[0] else "R-hat up to 1.030"
    assert said.startswith(f"still flagged ({first_problem}")
    assert (f"), with each run's start pinned down by its own evaluations (posterior sd {ratio:.2f} times the starts' "
            "spread), so sampled again with the runs' starts centred: ") in said
    if starts_kept:
        assert said.endswith("with the runs' starts centred: converged (kept)") and "longer" not in fc.fit_info_
    else:
        # the longer chains start from the first try, not from the centred-starts try that was not kept
        assert f"(not kept: still flagged). Still flagged ({first_problem}" in said
        assert fc.fit_info_["longer"]["problems_before"] == fc.fit_info_["centred_starts"]["problems_before"]
        assert said.endswith("warm-up per chain: converged (kept)")


@pytest.mark.parametrize("threshold_times_ratio, parametrization, extend, tried", [
    (1.01, "auto", True, True),
    (0.99, "auto", True, False),  # the data pin the starts down less tightly than the threshold asks
    (1.01, "noncentered", True, False),  # asked for: every level non-centred, the starts too
    (1.01, "auto", False, False),  # SamplerSettings(extend_if_flagged=False): no extra tries
])
def test_the_centred_starts_try_runs_only_where_the_data_pin_the_starts_down(
    fitted, small_sweep, monkeypatch, threshold_times_ratio, parametrization, extend, tried
):
    from forecast.forecaster import start_uncertainty_ratio

    ratio = start_uncertainty_ratio(fitted.idata.posterior)
    tries = fake_sampling(monkeypatch, fitted, [{"max_rhat": 1.03}, {}, {}, {}],
                          centre_starts_below=ratio * threshold_times_ratio)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster(parametrization=parametrization, sampler=SamplerSettings(extend_if_flagged=extend)).fit(
            small_sweep, random_seed=0, progress=False)
    assert ("centred_starts" in fc.fit_info_) is tried
    assert (True in tries.starts_centred) is tried
    assert fc.fit_info_["starts_centered"] is tried


def test_a_fit_without_n_eval_on_every_row_adds_no_binomial_term_to_its_forecasts(small_sweep):
    """The model drops the binomial term when n_eval is missing anywhere (its white noise then holds
    all the evaluation noise); forecasts must not add it back at the rows' median n_eval."""
    table = small_sweep.copy()
    table.loc[table.index[::3], "n_eval"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster(mode="fast").fit(table, random_seed=1, progress=False)
    assert not fc.data_.has_n_eval
    run = fc.run_ids[0]
    with_eval_noise = fc.sample_curves([1e5], run_id=run, kind="run", rng=3)
    without = fc.sample_curves([1e5], run_id=run, kind="run", rng=3, eval_noise=False)
    extra_var = with_eval_noise.var() - without.var()  # the white noise the forecast added
    no_binomial = float(np.mean(fc.draws("sigma_extra") ** 2))
    mu = float(np.median(without))
    binomial = mu * (1 - mu) / float(table["n_eval"].median())  # what the old code added on top
    # nearer the model's own white noise than that plus the binomial term it was fitted without
    assert abs(extra_var - no_binomial) < 0.5 * binomial


def test_the_compiled_model_cache_keeps_only_the_models_used_last(monkeypatch):
    """A long-lived process whose sweep grows (`forecast watch`, a trainer asking the advisor) makes a
    new model structure whenever a run joins or the rows pass a padding size, and never goes back to
    an old one. Each compiled model holds about 100 MB; the cache kept every one of them for good (a
    watched 8-run sweep: 9 models, 1.2 GB). It keeps the MAX_COMPILED_MODELS used last."""
    import nutpie
    import pymc

    from forecast import inference

    class Compiled:
        def with_data(self, **values):
            return self

    compiled_for = []
    monkeypatch.setattr(inference, "_COMPILED_CACHE", {})
    monkeypatch.setattr(inference, "MAX_COMPILED_MODELS", 3, raising=False)
    monkeypatch.setattr(nutpie, "compile_pymc_model", lambda model: compiled_for.append(model) or Compiled())
    monkeypatch.setattr(pymc, "set_data", lambda values, model=None: None)

    def get(key):
        return inference._compiled(lambda: key, key, {})[1]

    assert [get(k) for k in ("a", "b", "c")] == [False] * 3
    assert get("a")  # reused: now the most recently used
    for key in ("d", "e", "f", "g"):
        get(key)
    assert len(inference._COMPILED_CACHE) == 3
    assert set(inference._COMPILED_CACHE) == {"e", "f", "g"}
    assert get("g") and not get("b")  # a dropped structure is compiled again
    assert compiled_for == ["a", "b", "c", "d", "e", "f", "g", "b"]


def test_predict_says_how_far_beyond_the_data_each_forecast_reaches(fitted, small_sweep):
    recipe_max = small_sweep.groupby("recipe")["compute"].max()["scalerl_8b"]
    table = fitted.predict([recipe_max / 2, recipe_max, 4 * recipe_max], recipe="scalerl_8b")
    assert table["ahead"].tolist() == pytest.approx([0.5, 1.0, 4.0])
    run = small_sweep[small_sweep["run_id"] == "scalerl_8b-s1"]
    run_max = run["compute"].max()
    own = fitted.predict([2 * run_max], run_id="scalerl_8b-s1")
    assert own["ahead"].iloc[0] == pytest.approx(2.0)


def test_a_runs_ahead_is_counted_from_its_own_last_evaluation_not_its_recipes(fitted):
    """Mutant 'ahead of a run from its recipe's largest compute' passed every test: the shared sweep's
    runs of a recipe all end at one compute. Here one run has ended earlier than its sibling."""
    import copy

    short, sibling = "scalerl_8b-s0", "scalerl_8b-s1"
    runs = fitted.runs_
    last_three = runs[runs["run_id"] == short].nlargest(3, "compute").index
    fc = copy.deepcopy(fitted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fast fit's convergence
        fc.refit(runs.drop(index=last_three), random_seed=3)
    short_end = float(fc.runs_.loc[fc.runs_["run_id"] == short, "compute"].max())
    sibling_end = float(fc.runs_.loc[fc.runs_["run_id"] == sibling, "compute"].max())
    assert short_end < sibling_end
    table = fc.predict([2 * short_end], recipe="scalerl_8b", kind="run").set_index("run_id")
    assert table.loc[short, "ahead"] == pytest.approx(2.0)
    assert table.loc[sibling, "ahead"] == pytest.approx(2 * short_end / sibling_end)
    # a new seed of the recipe is counted from the furthest any of its runs went
    assert fc.predict([2 * short_end], recipe="scalerl_8b")["ahead"].iloc[0] == pytest.approx(2 * short_end / sibling_end)


def test_a_reweighted_refit_of_a_flagged_fit_warns_as_the_fit_did(fitted):
    """A refit that reweights keeps the sampled fit's R-hat and divergences, and says them. Mutant: the
    reweighted path without its ConvergenceWarning survived."""
    import copy
    import dataclasses

    from forecast import ConvergenceWarning

    fc = copy.deepcopy(fitted)
    fc._base["report"] = dataclasses.replace(fc._base["report"], divergences=7)
    with pytest.warns(ConvergenceWarning, match="7 divergent transitions"):
        fc.refit(fc.runs_, random_seed=3)
    assert fc.fit_info_["reweighted"] and fc.diagnostics().divergences == 7


def test_two_runs_forecasts_draw_independent_noise(fitted):
    """The stop advice compares runs on their own forecasts (early_stop.run_draws, each run on its own stream):
    one stream for every run gave all of them the same wander and extrapolation luck, draw by draw. Mutant:
    every run on one random stream survived."""
    from forecast.early_stop import run_draws

    end = float(fitted.runs_["compute"].max())
    first, second = fitted.run_ids[:2]
    for compute in (end, 8 * end):
        luck = [run_draws(fitted, run, [compute])[:, 0]
                - fitted.sample_curves([compute], run_id=run, kind="run", noise=False)[:, 0] for run in (first, second)]
        assert luck[0].std() > 0 and abs(np.corrcoef(*luck)[0, 1]) < 0.2, compute


@pytest.mark.parametrize("draws_per_chain", [(10, 3), (3, 3)])
def test_a_sample_cut_short_by_ctrl_c_is_an_interrupt_not_a_fit(monkeypatch, draws_per_chain):
    """nutpie catches KeyboardInterrupt and returns the draws so far. Chains cut at different
    lengths raised 'ValueError: all input arrays must have the same shape' (a traceback where the
    CLI says 'interrupted', exit 130); chains cut at one length made a fit of 3 draws of 5, silently."""
    import nutpie
    import pyarrow
    from arro3.core import RecordBatch  # what nutpie's raw trace is made of

    from forecast import inference

    tune, draws = 2, 10

    def chain(n_kept):
        tuning = [True] * tune + [False] * n_kept
        draw = pyarrow.RecordBatch.from_pydict({"x": np.arange(len(tuning), dtype=float)})
        stat = pyarrow.RecordBatch.from_pydict({"tuning": tuning, "diverging": [False] * len(tuning)})
        return RecordBatch.from_arrow(draw), RecordBatch.from_arrow(stat)

    class Raw:
        def get_arrow_trace(self):
            chains = [chain(n) for n in draws_per_chain]
            return [d for d, _ in chains], [s for _, s in chains]

    class Compiled:
        coords = {}

    monkeypatch.setattr(inference, "_compiled", lambda build, key, values: (Compiled(), False))
    monkeypatch.setattr(nutpie, "sample", lambda compiled, **kwargs: Raw())
    settings = SamplerSettings(draws=draws, tune=tune, chains=2, cores=1, sampler="nutpie", progress=False)
    with pytest.raises(KeyboardInterrupt, match="sampling was interrupted"):
        inference.sample_model(lambda: None, settings)
    monkeypatch.setattr(nutpie, "sample", lambda compiled, **kwargs: type("Full", (Raw,), {"get_arrow_trace": lambda self: (
        [chain(draws)[0]] * 2, [chain(draws)[1]] * 2)})())
    idata, _ = inference.sample_model(lambda: None, settings)  # a complete sample is read as before
    assert idata.posterior.sizes["draw"] == draws and idata.posterior.sizes["chain"] == 2


def test_names_given_as_numbers_find_the_runs_a_table_of_numbers_names(small_sweep):
    """A table built in Python with recipe 1, 2, 3 and run_id 10, 11, ... is read with its names as
    text ("1"), so predict(recipe=1) said "unknown recipe '1'; known: 1, 2, 3", and plot(recipes=1)
    failed. A name given as a number is the table's name as text. Same structure as `fitted`: the
    compiled model is reused."""
    import matplotlib.pyplot as plt

    recipes = {name: number for number, name in enumerate(sorted(small_sweep["recipe"].unique()), start=1)}
    runs = {name: number for number, name in enumerate(sorted(small_sweep["run_id"].unique()), start=10)}
    table = small_sweep.assign(recipe=small_sweep["recipe"].map(recipes), run_id=small_sweep["run_id"].map(runs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster(mode="fast").fit(table, random_seed=3, progress=False)
    assert fc.recipes == ["1", "2", "3"]
    pd.testing.assert_frame_equal(fc.predict([1e4], recipe=1), fc.predict([1e4], recipe="1"))
    assert fc.predict([1e4], recipe=np.int64(2))["recipe"].tolist() == ["2"]
    assert np.isfinite(fc.predict([1e4], recipe=1)["ahead"]).all()  # the recipe's runs are found for it too
    pd.testing.assert_frame_equal(fc.predict([1e4], run_id=10), fc.predict([1e4], run_id="10"))
    assert fc.predict([1e4], run_id=10, recipe=1)["run_id"].tolist() == ["10"]
    assert fc.sample_curves([1e4], recipe=1, rng=0).shape == (fc.n_draws, 1)
    with pytest.raises(KeyError, match="unknown recipe '9'; known: 1, 2, 3"):
        fc.predict([1e4], recipe=9)
    fig = fc.plot(recipes=1)
    assert len([ax for ax in fig.axes if ax.get_visible() and ax.lines]) == 1
    plt.close(fig)
    from forecast.decisions import decide

    assert sorted(decide(fc, 1e5, recipes=[1, 3]).table["recipe"]) == ["1", "3"]
    assert list(decide(fc, 1e5, recipes=2).table["recipe"]) == ["2"]


def test_refit_given_another_horizon_samples_rather_than_dropping_it(small_sweep, monkeypatch):
    """refit(runs, horizon=H) reweighted the last fit's draws whenever it could, which keeps that
    fit's compute axis and priors: a new H was dropped without a word (fit_info_ kept the old one).
    A horizon other than the sampled fit's now samples with it; the same one still reweights.
    Sampling and reweighting are spies: what matters is which path gets which horizon."""
    fc = ScalingForecaster()
    reach = float(small_sweep["compute"].max())
    paths = []
    fc.fit = lambda runs, **kwargs: paths.append(("fit", kwargs["horizon"])) or fc
    monkeypatch.setattr(fc, "_same_runs", lambda runs, data: True)
    monkeypatch.setattr(fc, "_try_reweight", lambda runs, base, **kwargs: paths.append(("reweight", None)) or True)
    monkeypatch.setattr(fc, "_warn_if_unconverged", lambda: None)
    fc._base = {"data": None}
    fc.fit_info_ = {"horizon": 8 * reach}
    fc.refit(small_sweep)
    fc.refit(small_sweep, horizon=8 * reach)
    fc.refit(small_sweep, horizon=16 * reach)
    fc.fit_info_ = {"horizon": None}
    fc.refit(small_sweep, horizon=4 * reach)
    assert paths == [("reweight", None), ("reweight", None), ("fit", 16 * reach), ("fit", 4 * reach)]
    with pytest.raises(ValueError, match="horizon must be a compute > 0"):
        fc.refit(small_sweep, horizon="4e12")


@pytest.mark.parametrize("pareto_k, kept", [(0.5, True), (float("nan"), False), (0.9, False)])
def test_a_reweighted_fit_is_kept_only_on_a_pareto_k_known_to_be_reliable(fitted, monkeypatch, pareto_k, kept):
    """refit() keeps the reweighted draws only where Pareto k <= 0.7. A NaN k (PSIS could not fit the weights'
    tail) passed the check `k > 0.7`, false for NaN: the reweighted fit was kept, then flagged, where it should
    have been sampled again. The weights are stood in for; what matters is which k is kept."""
    import copy

    import forecast.reweight as reweight

    draws = fitted.idata.posterior.sizes["chain"] * fitted.idata.posterior.sizes["draw"]
    monkeypatch.setattr(reweight, "importance_update", lambda *args, **kwargs: reweight.ImportanceUpdate(
        indices=np.arange(draws), pareto_k=pareto_k, efficiency=1.0))
    fc = copy.copy(fitted)  # a reweight that is kept sets the fit on this copy, not on the session's fit
    assert fc._try_reweight(fitted.runs_, fitted._base, pad_to=None, random_seed=0) is kept
    assert fc.fit_info_.get("reweighted", False) is kept


def test_loading_a_fit_that_did_not_converge_warns_as_fitting_it_did(fitted, tmp_path):
    """fit() warned (ConvergenceWarning) on a flagged fit, load() said nothing: a notebook that
    loaded a saved flagged fit and predicted or decided from it never heard of the flags."""
    import dataclasses
    import warnings as _warnings

    from forecast import ConvergenceWarning

    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore", ConvergenceWarning)
        flagged = ScalingForecaster.load(fitted.save(tmp_path / "fit.nc"))  # a copy: the fixture is shared
    report = dataclasses.replace(flagged.diagnostics(), divergences=7)
    flagged._set_fit(flagged.runs_, flagged.data_, flagged.idata, flagged.fit_info_, report)
    path = flagged.save(tmp_path / "flagged.nc")
    with pytest.warns(ConvergenceWarning, match="7 divergent transitions"):
        ScalingForecaster.load(path)
    converged = dataclasses.replace(report, divergences=0, max_rhat=1.0, min_ess_bulk=1e4, min_ess_tail=1e4, pareto_k=None)
    flagged._set_fit(flagged.runs_, flagged.data_, flagged.idata, flagged.fit_info_, converged)
    with _warnings.catch_warnings():
        _warnings.simplefilter("error", ConvergenceWarning)
        ScalingForecaster.load(flagged.save(tmp_path / "converged.nc"))


@pytest.mark.parametrize("draws", [2, 5])
def test_a_posterior_of_a_handful_of_draws_is_flagged_not_a_crash(draws):
    """The diagnostics of chains of 5 draws failed with "attempt to get argmax of an empty sequence"
    (Geyer's sequence needs 10 draws a chain). SamplerSettings now refuses so few draws, but a
    posterior from elsewhere (an old or hand-made fit file) still reaches convergence_report: it is
    flagged, with ArviZ's values from 4 draws and, below that, a reason instead of a silent NaN."""
    import arviz as az

    from forecast.inference import convergence_report, diagnostics_arrays

    columns = np.random.default_rng(draws).normal(size=(2, draws, 3))
    idata = az.from_dict(posterior={"A": columns}, sample_stats={"diverging": np.zeros((2, draws), dtype=bool)})
    report = convergence_report(idata, ("A",))
    assert not report.converged and report.problems()
    if draws < 4:
        assert f"could not be computed from {2 * draws} draws" in " ".join(report.problems())
    else:
        rhat, ess_bulk, ess_tail = diagnostics_arrays(columns)
        np.testing.assert_allclose(rhat, [az.rhat(columns[..., j]) for j in range(3)], rtol=1e-9)
        np.testing.assert_allclose(ess_bulk, [az.ess(columns[..., j], method="bulk") for j in range(3)], rtol=1e-9)
        np.testing.assert_allclose(ess_tail, [az.ess(columns[..., j], method="tail") for j in range(3)], rtol=1e-9)


def _with_two_learning_rates(small_sweep) -> pd.DataFrame:
    """small_sweep whose first recipe's two seeds ran at two learning rates: a data warning, same model."""
    first = small_sweep["recipe"].iloc[0]
    lr = np.where((small_sweep["recipe"] == first) & small_sweep["run_id"].str.endswith("-s1"), 1e-3, 5e-4)
    return small_sweep.assign(lr=lr)


def test_a_fit_keeps_the_data_warnings_said_when_its_runs_were_read(fitted, small_sweep, tmp_path):
    """`forecast fit` reads the runs (said on the terminal) and then fits them (checked again in silence):
    the fit knew nothing of the warnings, so neither its saved file nor its report could show them."""
    from forecast import load_runs

    _with_two_learning_rates(small_sweep).to_csv(tmp_path / "runs.csv", index=False)
    with pytest.warns(UserWarning, match="column 'lr': differs between runs of recipe") as said:
        runs = load_runs(tmp_path / "runs.csv")
    expected = [str(w.message) for w in said if "column 'lr'" in str(w.message)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fast fit's convergence
        fc = ScalingForecaster(mode="fast").fit(runs, random_seed=3, progress=False)
    assert fc.data_warnings_ == expected and str(tmp_path / "runs.csv") in expected[0]
    # a refit on the same runs without the setting column: reweighted, and the warning is gone with it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc.refit(runs.drop(columns="lr"), random_seed=3)
    assert fc.fit_info_["reweighted"] and fc.data_warnings_ == []
    assert fitted.data_warnings_ == []


def test_a_saved_fit_keeps_its_data_warnings_and_an_older_one_has_none(fitted, small_sweep, tmp_path):
    """`forecast report FIT` is run days after the fit, by someone who never saw its terminal: the saved
    fit carries the warnings said when its runs were read (naming their file, not the saved fit's). A fit
    saved before they were kept loads with none."""
    import arviz as az

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster(mode="fast").fit(_with_two_learning_rates(small_sweep), random_seed=3, progress=False)
        said = fc.data_warnings_
        again = ScalingForecaster.load(fc.save(tmp_path / "fit.nc"))
    assert len(said) == 1 and "column 'lr'" in said[0] and "fit.nc" not in said[0]
    assert again.data_warnings_ == said
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ScalingForecaster.load(again.save(tmp_path / "again.nc")).data_warnings_ == said
    idata = az.from_netcdf(str(tmp_path / "fit.nc"))
    del idata.posterior.attrs["data_warnings"]
    idata.to_netcdf(str(tmp_path / "old.nc"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ScalingForecaster.load(tmp_path / "old.nc").data_warnings_ == []


@pytest.mark.parametrize("name, damaged", [("data_warnings", '"one warning"'), ("data_warnings", "[1, 2]"),
                                           ("settings", "{cut"), ("fit_info", "[]"), ("left_out_runs", "[]"),
                                           ("left_out_runs", '{"a-s0": "in flight"}')])
def test_a_saved_fit_whose_attribute_is_damaged_is_refused_by_name(fitted, tmp_path, name, damaged):
    """A damaged JSON attribute was a bare JSONDecodeError out of load(), and a string where the list of
    data warnings belongs showed on the report as one bullet per character."""
    import arviz as az

    from forecast.forecaster import NotASavedFitError

    idata = az.from_netcdf(str(fitted.save(tmp_path / "fit.nc")))
    idata.posterior.attrs[name] = damaged
    idata.to_netcdf(str(tmp_path / "damaged.nc"))
    with pytest.raises(NotASavedFitError, match=f"damaged.nc cannot be read as a saved fit: its '{name}' attribute is damaged"):
        ScalingForecaster.load(tmp_path / "damaged.nc")


def _read_with_a_table_of_other_runs_beside(small_sweep, tmp_path):
    """small_sweep as run folders with a runs.csv beside them that also lists a run 'gone-s0': the table
    read (load_runs) and the warning said while reading it."""
    from forecast import load_runs

    sweep = tmp_path / "sweep"
    for run_id, run in small_sweep.groupby("run_id"):
        (sweep / run_id).mkdir(parents=True)
        (sweep / run_id / "evals.jsonl").write_text(run.to_json(orient="records", lines=True))
    pd.concat([small_sweep, small_sweep.head(3).assign(run_id="gone-s0")]).to_csv(sweep / "runs.csv", index=False)
    with pytest.warns(UserWarning, match=r"\(gone-s0\): left out") as said:
        runs = load_runs(sweep)
    read = [str(w.message) for w in said if "gone-s0" in str(w.message)]
    return runs, read


def test_a_fit_of_a_filtered_table_keeps_the_warnings_said_reading_its_folder(small_sweep, tmp_path):
    """runs = load_runs(folder); runs = runs[runs.recipe != "x"]; fit(runs), as notebooks do: the filtered
    table was checked again and the warning said while the folder was read (a table of other runs beside
    the run logs) was lost, so the fit, its saved file and its report did not show it."""
    runs, read = _read_with_a_table_of_other_runs_beside(small_sweep, tmp_path)
    last = sorted(runs["recipe"].unique())[-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fast fit's convergence
        fc = ScalingForecaster(mode="fast").fit(runs[runs["recipe"] != last], random_seed=3, progress=False)
    assert last not in set(fc.runs_["recipe"]) and fc.data_warnings_ == read


def test_a_loaded_fit_whose_runs_are_filtered_and_refitted_keeps_the_warnings_said_reading_its_folder(
        fitted, small_sweep, tmp_path):
    """fc = ScalingForecaster.load("fit.nc"); fc.refit(fc.runs_[fc.runs_.recipe != "x"]): the saved fit held
    the warning said while its folder was read (a table of other runs beside the run logs) among its data
    warnings, but not apart from them, so the filtered table, checked again, lost it, and the refit, its
    saved file and its report no longer showed it. It is kept, as for a table filtered before its first
    fit (a warning about a run the filter removed too, as the file said it)."""
    import copy

    runs, read = _read_with_a_table_of_other_runs_beside(small_sweep, tmp_path)
    fc = copy.deepcopy(fitted).refit(runs)  # the session's fit, told these runs (the same: reweighted, not sampled)
    assert fc.fit_info_["reweighted"] and fc.data_warnings_ == read
    fc.save(tmp_path / "fit.nc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fast fit's convergence
        loaded = ScalingForecaster.load(tmp_path / "fit.nc")
        assert loaded.data_warnings_ == read
        last = sorted(loaded.runs_["recipe"].unique())[-1]
        loaded.refit(loaded.runs_[loaded.runs_["recipe"] != last], random_seed=3, progress=False)
    assert last not in set(loaded.runs_["recipe"]) and loaded.data_warnings_ == read


def test_two_compiles_in_threads_at_once_give_the_process_its_temporary_folder_back(monkeypatch, tmp_path):
    """A fit compiles with tempfile.tempdir pointed at the process's folder for generated source. Two
    threads compiling at once each saved what they found: the first out put the user's folder back while
    the other still compiled, and the last out then put the generated-source folder back for good, so
    every later temporary file of the process went there and was removed at exit."""
    import tempfile
    import threading

    from forecast import inference

    monkeypatch.setattr(inference, "_GENERATED_SOURCE_DIR", str(tmp_path / "generated"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen_inside = []

    def first():
        with inference._generated_source_in_own_folder():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second():
        first_in.wait(10)
        with inference._generated_source_in_own_folder():
            second_in.set()
            first_out.wait(10)
            seen_inside.append(tempfile.gettempdir())  # still compiling after the first one ended

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert seen_inside == [str(tmp_path / "generated")]
    assert tempfile.tempdir == str(tmp_path)


def test_a_run_left_out_of_the_fit_is_said_to_be_when_asked_for(fitted, tmp_path, capsys):
    """A run in flight with one evaluation is left out of the fit with a warning, but fc.predict(run_id=it)
    later said only "unknown run_id 'x'" (and `forecast predict FIT --run-id x` the same), as if misspelt;
    a recipe whose runs were all left out likewise. The fit now keeps which runs it left out and why,
    saved with it, and says so where such a run or recipe is asked for."""
    import copy

    from forecast.cli import main
    from forecast.data import validate_runs

    finished = fitted.runs_.assign(ended="finished")
    recipe = fitted.recipes[0]
    first_row = finished.iloc[[0]]
    table = pd.concat([finished, first_row.assign(run_id="extra-s9", ended=""),
                       first_row.assign(run_id="newrec-s0", recipe="newrec", ended="")], ignore_index=True)
    fc = copy.deepcopy(fitted)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fc.refit(table)
    assert any("2 runs in flight have fewer than 2 evaluations so far and are left out" in str(w.message) for w in caught)
    why = "it was in flight with 1 evaluation, fewer than the 2 a curve needs; fit again once it has more"
    assert fc.left_out_runs_ == {"extra-s9": {"recipe": recipe, "reason": why},
                                 "newrec-s0": {"recipe": "newrec", "reason": why}}
    compute = float(fitted.runs_["compute"].median())
    with pytest.raises(KeyError, match=re.escape(f"run 'extra-s9' was left out of the fit: {why}; the fit's runs: ")):
        fc.predict([compute], run_id="extra-s9")
    with pytest.raises(KeyError, match=re.escape(f"recipe 'newrec' is not in the fit: its run 'newrec-s0' was left out "
                                                 f"({why}); the fit's recipes: ")):
        fc.predict([compute], recipe="newrec")
    with pytest.raises(KeyError, match="unknown run_id 'nope'"):  # a name the table never had is unknown as before
        fc.predict([compute], run_id="nope")
    # kept by the saved fit, for the command line
    again = ScalingForecaster.load(fc.save(tmp_path / "fit.nc"))
    assert again.left_out_runs_ == fc.left_out_runs_
    capsys.readouterr()
    assert main(["predict", str(tmp_path), "--compute", f"{compute:g}", "--run-id", "extra-s9"]) == 2
    assert f"run 'extra-s9' was left out of the fit: {why}; the fit's runs: " in capsys.readouterr().err
    # the table keeps it through a second check (load_runs, then fit), and forgets it once the run has its evaluations
    assert set(validate_runs(validate_runs(table)).attrs["left_out_runs"]) == {"extra-s9", "newrec-s0"}
    grown = pd.concat([table, first_row.assign(run_id="extra-s9", ended="", compute=first_row["compute"] * 2)],
                      ignore_index=True)
    assert set(validate_runs(grown).attrs["left_out_runs"]) == {"newrec-s0"}


def test_a_divergence_alone_makes_a_fit_not_converged():
    """Kills the mutant that drops `divergences == 0` from ConvergenceReport.converged: a fit with
    perfect R-hat and ESS but one divergent transition was called converged (no red banner, no
    ConvergenceWarning) while its problems said the geometry was not explored reliably."""
    one = ConvergenceReport(max_rhat=1.001, min_ess_bulk=900, min_ess_tail=900, divergences=1, n_draws=2000)
    assert not one.converged and str(one).startswith("NOT CONVERGED")
    assert ConvergenceReport(max_rhat=1.001, min_ess_bulk=900, min_ess_tail=900, divergences=0, n_draws=2000).converged


@pytest.mark.parametrize("field, at_limit, past_limit", [
    ("max_rhat", 1.01, 1.0100001),
    ("min_ess_bulk", 400.0, 399.9999),
    ("min_ess_tail", 400.0, 399.9999),
    ("pareto_k", 0.7, 0.7000001),
])
def test_a_diagnostic_exactly_at_its_limit_passes_and_converged_agrees_with_the_problems(field, at_limit, past_limit):
    """Kills the mutants that move a limit's boundary in converged (<= for <, >= for >) or in
    problems() (> for >=, < for <=): a value exactly at its limit passes both, one just past it fails
    both. Disagreeing, a fit read NOT CONVERGED with no problem listed, or converged beside a problem."""
    fine = dict(max_rhat=1.001, min_ess_bulk=900.0, min_ess_tail=900.0, divergences=0, n_draws=2000, pareto_k=0.1,
                reweight_efficiency=0.9)
    at = ConvergenceReport(**{**fine, field: at_limit})
    assert at.converged and at.problems() == []
    past = ConvergenceReport(**{**fine, field: past_limit})
    assert not past.converged and len(past.problems()) == 1


def test_the_report_counts_every_divergent_transition_and_a_constant_variable_leaves_r_hat_known():
    """Kills two mutants of convergence_report: counting whether any transition diverged (the user
    read "1 divergent transition" for 3), and taking the max R-hat over NaN values too. A variable
    that is the same in every draw has no R-hat (0 / 0); it says nothing about the chains, and the
    fit's R-hat is that of the others, not "could not be computed"."""
    import arviz as az

    from forecast.inference import convergence_report

    rng = np.random.default_rng(0)
    draws = np.concatenate([rng.normal(size=(2, 200, 2)), np.full((2, 200, 1), 0.5)], axis=2)
    diverging = np.zeros((2, 200), dtype=bool)
    diverging[0, [3, 50]] = diverging[1, 7] = True
    report = convergence_report(az.from_dict(posterior={"A": draws}, sample_stats={"diverging": diverging}), ("A",))
    assert report.divergences == 3 and "3 divergent transitions" in str(report)
    assert np.isfinite(report.max_rhat) and report.max_rhat < 1.05
    assert not any("could not be computed" in problem for problem in report.problems())


@pytest.mark.parametrize("broken", ["one NaN draw", "a NaN variable", "an infinite draw"])
def test_nan_or_infinite_draws_are_a_convergence_problem_not_skipped(broken):
    """convergence_report left NaN R-hat and ESS values out, as a constant variable's (0 / 0) are: so a
    variable with a NaN or infinite draw (a broken fit: its R-hat and ESS are NaN) was left out too, and a
    fit with one was called converged on the others' numbers. Such draws are a problem named now, with the
    variable; a constant variable still leaves R-hat known (the test above)."""
    import arviz as az

    from forecast.inference import convergence_report

    draws = np.random.default_rng(0).normal(size=(2, 200, 3))
    stats = {"diverging": np.zeros((2, 200), dtype=bool)}
    assert convergence_report(az.from_dict(posterior={"A": draws.copy()}, sample_stats=stats), ("A",)).converged
    if broken == "one NaN draw":
        draws[0, 10, 2] = np.nan
    elif broken == "a NaN variable":
        draws[..., 1] = np.nan
    else:
        draws[1, 5, 0] = np.inf
    report = convergence_report(az.from_dict(posterior={"A": draws, "B": np.ones((2, 200))}, sample_stats=stats),
                                ("A", "B"))
    assert not report.converged
    assert report.nonfinite_draws == ["A"]
    assert "NaN or infinite draws in A: the sampler failed there, so this fit's numbers cannot be trusted" in report.problems()
    assert np.isfinite(report.max_rhat) and report.max_rhat < 1.05  # the other columns' R-hat, still shown
    assert type(report).from_dict(report.to_dict()) == report  # kept in a saved fit


@pytest.mark.parametrize("case", ["every variable NaN", "every variable constant"])
def test_r_hat_not_computed_for_another_reason_than_few_draws_says_why(case):
    """A report whose R-hat was NaN said "R-hat ... could not be computed from 400 draws: too few to judge
    convergence" whatever the cause: also where every variable had NaN draws, or no variable moved. Each says its
    cause now; a variable left uncomputed is named and keeps the fit from reading as converged on the others'
    numbers. (Draws at two values about the median were one such case: R-hat is ArviZ's bulk one there now,
    test_draws_at_two_values_about_the_median_have_arvizs_r_hat.)"""
    import arviz as az

    from forecast.inference import convergence_report

    stats = {"diverging": np.zeros((2, 200), dtype=bool)}
    if case == "every variable NaN":
        posterior = {"A": np.full((2, 200, 3), np.nan)}
        expected = ["NaN or infinite draws in A: the sampler failed there, so this fit's numbers cannot be trusted"]
    else:
        posterior = {"A": np.full((2, 200), 0.5), "B": np.ones((2, 200, 2))}
        expected = ["R-hat could not be computed for A, B: whether it converged is unknown"]
    report = convergence_report(az.from_dict(posterior=posterior, sample_stats=stats), tuple(posterior))
    assert not report.converged
    assert report.problems() == expected
    assert type(report).from_dict(report.to_dict()) == report  # kept in a saved fit


def test_draws_at_two_values_about_the_median_have_arvizs_r_hat():
    """Draws at two values, one each side of the median, have no folded R-hat (every draw as far from the median
    as every other: 0 / 0), and np.maximum of the bulk and folded R-hat made theirs NaN: "R-hat could not be computed
    for B". ArviZ's rank R-hat (Python's max(bulk, folded), NaN > bulk being False) keeps the bulk one, which says all
    there is: no chain can differ from another in scale there. Ours is ArviZ's now: draws mixed between the values
    are judged on it, and split chains each at one of them read as chains that disagree (within-chain variance 0:
    infinite, where rounding made it 1e15 in ours and 1e7 in ArviZ's, printed as such), not as unknown. A variable ArviZ has no R-hat for (one value
    throughout) is still left uncomputed (test_r_hat_not_computed_for_another_reason_than_few_draws_says_why)."""
    import arviz as az

    from forecast.inference import convergence_report, diagnostics_arrays

    rng = np.random.default_rng(1)
    mixed = rng.permutation(np.repeat([0.0, 1.0], 200)).reshape(2, 200)
    halves_apart = np.stack([np.repeat([0.0, 1.0], 100), np.repeat([1.0, 0.0], 100)])  # each half-chain at one value
    ordinary = rng.normal(size=(2, 200))
    with np.errstate(divide="ignore", invalid="ignore"):  # the folded R-hat's 0 / 0, ours and ArviZ's
        rhat, _, _ = diagnostics_arrays(np.stack([ordinary, mixed, halves_apart], axis=-1))
        arviz = [float(az.rhat(draws, method="rank")) for draws in (ordinary, mixed, halves_apart)]
    np.testing.assert_allclose(rhat[:2], arviz[:2], rtol=1e-9)
    assert rhat[2] == np.inf and arviz[2] > 1e6
    stats = {"diverging": np.zeros((2, 200), dtype=bool)}
    for draws, says in ((mixed, None), (halves_apart, "chains disagree")):
        report = convergence_report(az.from_dict(posterior={"A": ordinary, "B": draws}, sample_stats=stats), ("A", "B"))
        assert report.uncomputed == {} and not any("could not be computed" in p for p in report.problems())
        if says is None:  # judged on both variables' R-hat, as ArviZ's summary is
            assert report.max_rhat == pytest.approx(max(arviz[:2]), rel=1e-9)
        else:
            assert not report.converged and report.max_rhat == np.inf
            assert "R-hat up to inf (> 1.01): chains disagree" in report.problems(), report.problems()
        assert type(report).from_dict(report.to_dict()) == report  # kept in a saved fit


@pytest.mark.parametrize("stats", ["no sample_stats", "no diverging"])
def test_draws_without_the_samplers_statistics_leave_divergences_unknown_not_a_crash_or_zero(stats):
    """convergence_report on draws without a sample_stats group (a hand-made or foreign posterior) failed with
    AttributeError: 'InferenceData' object has no attribute 'sample_stats', and statistics without `diverging`
    counted 0 divergences, so such a fit read as converged. Its divergences are unknown now: said as a problem,
    in the status line and on the report page, and the fit is not called converged."""
    import arviz as az

    from forecast.inference import convergence_report
    from forecast.report import diagnostics_html

    posterior = {"A": np.random.default_rng(0).normal(size=(2, 200, 3))}
    idata = az.from_dict(posterior=posterior) if stats == "no sample_stats" else \
        az.from_dict(posterior=posterior, sample_stats={"step_size": np.ones((2, 200))})
    report = convergence_report(idata, ("A",))
    assert report.divergences is None and not report.converged
    assert report.problems() == ["divergences unknown: the draws came without the sampler's statistics (sample_stats' "
                                 "diverging), so whether it explored the posterior reliably cannot be told"]
    assert "divergences unknown (400 draws)" in str(report)
    assert "<dt>divergent transitions</dt><dd>unknown</dd>" in diagnostics_html(report.to_dict())
    assert type(report).from_dict(report.to_dict()) == report


def test_chains_each_stuck_at_their_own_value_are_named_not_called_too_few_draws():
    """A variable whose draws never move within any chain, each chain at a value of its own (every chain
    stuck where it started), has R-hat 0 / 0: NaN. Once NaN draws were told apart from a constant
    variable's, its NaN counted, and the report said "R-hat could not be computed from 400 draws: too few to
    judge convergence", sending the user to draw more from a sampler that had not moved. It is named as
    stuck now, and R-hat is the other variables'."""
    import arviz as az

    from forecast.inference import convergence_report

    draws = np.random.default_rng(0).normal(size=(2, 200, 2))
    stuck = np.stack([np.full(200, 0.2), np.full(200, 0.7)])  # chain 0 at 0.2 throughout, chain 1 at 0.7
    stats = {"diverging": np.zeros((2, 200), dtype=bool)}
    report = convergence_report(az.from_dict(posterior={"A": draws, "B": stuck}, sample_stats=stats), ("A", "B"))
    assert not report.converged
    assert report.stuck_chains == ["B"]
    assert ("B did not move within any chain, each chain at a value of its own: the sampler failed there, so this "
            "fit's numbers cannot be trusted") in report.problems()
    assert not any("could not be computed" in problem for problem in report.problems()), report.problems()
    assert np.isfinite(report.max_rhat) and report.max_rhat < 1.05  # A's R-hat, still shown
    assert type(report).from_dict(report.to_dict()) == report  # kept in a saved fit
    saved_before = {k: v for k, v in report.to_dict().items() if k != "stuck_chains"}  # a fit saved before
    assert type(report).from_dict(saved_before).stuck_chains == []
    short = convergence_report(az.from_dict(posterior={"A": draws[:, :3]}, sample_stats={"diverging": stats["diverging"][:, :3]}),
                               ("A",))  # 3 draws a chain: too few, whether they moved or not
    assert short.stuck_chains == [] and any("too few to judge convergence" in problem for problem in short.problems())


def test_the_ess_of_anticorrelated_draws_is_capped_as_arviz_caps_it():
    """Kills the mutant that caps ESS at total * ln(total) for ArviZ's total * log10(total): draws that
    alternate in sign have an autocorrelation time below 1, and their bulk ESS (at the cap, 1041 of
    400 draws) read 2396. The shared fit's test (test_vectorised_diagnostics_match_arviz) has no such
    draws. Without a fit, this also kills the mutants of the rank offset, the split R-hat's ddof, the
    tail quantiles and the folded R-hat that only that test caught."""
    import arviz as az

    from forecast.inference import diagnostics_arrays

    rng = np.random.default_rng(1)
    alternating = np.where(np.arange(200) % 2 == 0, 1.0, -1.0)
    draws = np.stack([alternating + 0.3 * rng.normal(size=200) for _ in range(2)])[..., None]
    rhat, ess_bulk, ess_tail = diagnostics_arrays(draws)
    assert ess_bulk[0] == pytest.approx(400 * np.log10(400), rel=1e-9)
    np.testing.assert_allclose(ess_bulk, [az.ess(draws[..., 0], method="bulk")], rtol=1e-9)
    np.testing.assert_allclose(ess_tail, [az.ess(draws[..., 0], method="tail")], rtol=1e-9)
    np.testing.assert_allclose(rhat, [az.rhat(draws[..., 0])], rtol=1e-9)
