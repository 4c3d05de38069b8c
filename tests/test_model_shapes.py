"""The model works for one recipe and for many, for finished runs and runs still in progress."""

import warnings

import numpy as np
import pandas as pd
import pytest

from forecast import ConvergenceWarning, ScalingForecaster
from forecast.model import Priors, build_model, prepare_data
from forecast.synthetic import load_table1, simulate_sweep


def test_prepare_data_pads_and_links_observations(small_sweep):
    from forecast.data import validate_runs

    data = prepare_data(validate_runs(small_sweep))
    assert len(data.y) % 64 == 0 and data.n_obs == len(small_sweep)
    real = data.weight > 0
    assert np.all(data.prev[real][data.prev[real] >= 0] == np.flatnonzero(real & (data.prev >= 0)) - 1)
    assert data.x[real].min() == pytest.approx(-1) and data.x[real].max() == pytest.approx(1)
    # the first observation of every run has no predecessor
    firsts = [np.flatnonzero((data.obs_run == r) & real)[0] for r in range(len(data.runs))]
    assert np.all(data.prev[firsts] == -1)


def test_model_has_named_dims(small_sweep):
    from forecast.data import validate_runs

    model = build_model(prepare_data(validate_runs(small_sweep)), Priors())
    assert set(model.coords) == {"recipe", "run"}
    assert model.named_vars_to_dims["A"] == ("recipe",)
    assert model.named_vars_to_dims["A_run"] == ("run",)


@pytest.mark.parametrize("centered, recipe_centered, recipes_z, runs_z", [
    (True, None, False, False), (False, None, True, True), (True, False, True, False),
])
def test_recipe_level_can_be_non_centred_alone(small_sweep, centered, recipe_centered, recipes_z, runs_z):
    """recipe_centered=False (the forecaster's fallback for a centred fit that still diverges)
    turns the recipe level into z-scores and leaves the run level as `centered` says."""
    from forecast.data import validate_runs

    model = build_model(prepare_data(validate_runs(small_sweep)), Priors(), centered=centered,
                        recipe_centered=recipe_centered)
    free = {v.name for v in model.free_RVs}
    assert ({"logit_A_recipe_z", "log_b_z", "m_z"} <= free) is recipes_z
    assert bool(free & {"logit_A_recipe", "log_b", "m"}) is not recipes_z
    assert ("logit_A_run_z" in free) is runs_z
    assert ("logit_A_run" in free) is not runs_z


@pytest.mark.parametrize("with_n_eval", [True, False])
def test_extra_white_noise_keeps_its_half_normal_prior_and_is_sampled_where_zero_is_reachable(small_sweep, with_n_eval):
    """With n_eval known the binomial noise is a floor, so extra noise of 0 (the usual truth) fits
    as well as any small value, and a HalfNormal sampled in log space left a flat tail there that
    chains crossed slowly (a 25-recipe sweep: R-hat 1.036 after every retry). It is sampled as
    noise_sd * |z|, the same prior. Without n_eval the white noise is all the noise: log space."""
    import pymc as pm
    from scipy import stats

    from forecast.data import validate_runs

    runs = validate_runs(small_sweep if with_n_eval else small_sweep.drop(columns="n_eval"))
    priors = Priors(noise_sd=0.02, noise_sd_no_n_eval=0.07)
    model = build_model(prepare_data(runs), priors)
    free = {v.name for v in model.free_RVs}
    assert ("sigma_extra_z" in free) is with_n_eval and ("sigma_extra" in free) is not with_n_eval
    scale = priors.noise_sd if with_n_eval else priors.noise_sd_no_n_eval
    prior_draws = pm.draw(model["sigma_extra"], draws=4000, random_seed=1)
    assert stats.kstest(prior_draws, stats.halfnorm(scale=scale).cdf).pvalue > 0.01
    assert stats.kstest(prior_draws, stats.halfnorm(scale=1.3 * scale).cdf).pvalue < 0.01  # the check can tell


def test_single_short_run_in_progress_fits_and_is_uncertain():
    """One recipe, one seed, six evaluations well before the midpoint: the fit works, the
    parametrisation falls back to non-centred, and the asymptote interval is honestly wide."""
    recipe = load_table1().rename(columns={"run": "recipe"}).query("recipe == 'scalerl_8b'")
    runs = simulate_sweep(recipe, n_seeds=1, n_points=40, rng=3)
    runs = runs[runs["compute"] <= 2542.0].head(6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fc = ScalingForecaster(mode="fast").fit(runs, random_seed=0, progress=False)
    assert fc.fit_info_["centered"] is False
    a = fc.asymptote().query("level == 'recipe'").iloc[0]
    assert a["q95"] - a["q05"] > 0.1  # early data cannot pin the asymptote down
    # such a posterior is hard to sample; whatever happened must be said, never hidden
    warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    assert warned == (not fc.diagnostics().converged)


@pytest.mark.slow
def test_thirty_recipes_converge():
    t = load_table1().rename(columns={"run": "recipe"})
    rng = np.random.default_rng(0)
    many = t.sample(30, replace=True, random_state=1).reset_index(drop=True)
    many["recipe"] = [f"r{i:02d}" for i in range(30)]
    many["A"] = np.clip(many["A"] + rng.normal(0, 0.03, 30), 0.4, 0.9)
    runs = simulate_sweep(many, n_seeds=2, n_points=20, rng=2)
    fc = ScalingForecaster().fit(runs, random_seed=0, progress=False)
    report = fc.diagnostics()
    assert report.max_rhat <= 1.02 and report.divergences <= 2, str(report)
    truth = runs.drop_duplicates("run_id").groupby("recipe")["true_A"].mean()
    est = fc.asymptote().query("level == 'recipe'").set_index("recipe")
    inside = ((est["q05"] <= truth[est.index]) & (truth[est.index] <= est["q95"])).mean()
    assert inside >= 0.8


@pytest.mark.slow
def test_pymc_fallback_sampler_runs(small_sweep):
    from forecast import SamplerSettings

    # short chains: PyMC's sampler takes several times nutpie's time a draw, and its C compile over half a minute on a new machine
    fc = ScalingForecaster(sampler=SamplerSettings(draws=50, tune=50, sampler="pymc", progress=False, extend_if_flagged=False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc.fit(small_sweep, random_seed=1)
    assert fc.fit_info_["sampler"] == "pymc"
    assert fc.idata.posterior.sizes["draw"] == 50
    assert fc.predict([1e4], recipe="scalerl_8b")["q50"].between(0.3, 0.8).all()


def test_robust_likelihood_shrugs_off_an_outlier(small_sweep):
    runs = small_sweep.copy()
    idx = runs.index[(runs["run_id"] == "scalerl_8b-s0")][-1]
    runs.loc[idx, "metric"] = 0.05  # a broken evaluation at the end of a run
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster(robust=True, mode="fast").fit(runs, random_seed=0, progress=False)
    a = fc.asymptote().set_index("run_id").loc["scalerl_8b-s0"]
    assert a["q50"] > 0.55


def test_data_values_are_exactly_the_models_data_nodes(small_sweep):
    """A cached compiled model gets new data as data_values(); a missing or extra name would
    silently keep stale data."""
    from forecast.data import validate_runs
    from forecast.model import data_values

    data = prepare_data(validate_runs(small_sweep))
    model = build_model(data, Priors())
    nodes = {name: var.get_value() for name, var in model.named_vars.items() if hasattr(var, "get_value")}
    values = data_values(data, Priors())
    assert set(values) == set(nodes)
    for name, value in values.items():
        np.testing.assert_array_equal(np.asarray(value), nodes[name])


@pytest.mark.parametrize("with_n_eval, one_run", [(True, False), (False, False), (True, True)])
def test_each_field_packed_into_the_data_vectors_is_read_back_whole_and_in_place(small_sweep, with_n_eval, one_run):
    """The model's data are two packed vectors (data_layout); unpacked() must give back every field
    of data_fields exactly, ints as ints, and a one-run sweep's run-level field as a vector of one.
    A field read from its neighbour's place (an offset off by one, a field left out of the layout)
    fits other data without an error."""
    from forecast.data import validate_runs
    from forecast.model import data_fields, data_layout, data_values, unpacked

    table = small_sweep if with_n_eval else small_sweep.drop(columns=["n_eval"])
    if one_run:
        table = table[table["run_id"] == table["run_id"].iloc[0]]
    data = prepare_data(validate_runs(table))
    assert data.has_n_eval == with_n_eval
    fields, values, layout = data_fields(data, Priors()), data_values(data, Priors()), data_layout(data)
    read_back = {**unpacked(values["floats"], layout["floats"]), **unpacked(values["ints"], layout["ints"])}
    assert set(read_back) == set(fields)
    assert sum(length or 1 for parts in layout.values() for _, length in parts) == sum(len(v) for v in values.values())
    for name, value in fields.items():
        assert np.shape(read_back[name]) == np.shape(value), name
        np.testing.assert_array_equal(np.asarray(read_back[name]), value, err_msg=name)
    assert values["ints"].dtype == np.int64 and values["floats"].dtype == np.float64


def test_a_planned_horizon_stretches_the_compute_axis_to_the_budget(small_sweep):
    """With horizon (a sweep's largest planned budget) the axis, on which the midpoint and
    steepness priors live, runs from the first evaluation to the budget: x = 1 there, and the data
    seen so far sit in its lower part. A horizon inside the data changes nothing, and a kept frame
    (a refit by reweighting) wins over a new horizon."""
    from forecast.data import validate_runs

    runs = validate_runs(small_sweep)
    seen = prepare_data(runs)
    budget = 16 * float(runs["compute"].max())
    planned = prepare_data(runs, horizon=budget)
    real = planned.weight > 0
    assert planned.to_x(budget) == pytest.approx(1.0)
    assert planned.x[real].min() == pytest.approx(-1.0) and planned.x[real].max() < 0.5
    assert planned.scale > seen.scale and planned.best_metric == seen.best_metric
    inside = prepare_data(runs, horizon=float(runs["compute"].max()) / 2)
    assert np.allclose(inside.x, seen.x) and inside.frame() == seen.frame()
    kept = prepare_data(runs, horizon=budget, frame=seen.frame())
    assert kept.frame() == seen.frame()
    for bad in (0.0, -budget, float("nan")):
        with pytest.raises(ValueError, match="horizon must be a compute > 0"):
            prepare_data(runs, horizon=bad)


def _three_runs(**metrics) -> pd.DataFrame:
    """Runs a-s0, a-s1 (recipe a) and b-s0 (recipe b) at compute e^0 .. e^4, each with its metrics."""
    rows = [{"run_id": run, "recipe": run[0], "compute": float(np.exp(i)), "metric": m, "n_eval": 200}
            for run, values in metrics.items() for i, m in enumerate(values)]
    return pd.DataFrame(rows)


def test_the_compute_axis_and_prior_centres_are_the_data_s_as_documented():
    """Kills mutants of _frame_from and data_fields: loc at the start of the range instead of its
    middle, the best metric's mean over runs for its median, the start's centre from the last
    evaluations, the asymptote's offset subtracted. Each moves a prior every fit rests on."""
    from forecast.data import validate_runs
    from forecast.model import data_fields

    runs = _three_runs(**{"a-s0": [0.10, 0.30, 0.40, 0.50, 0.45], "a-s1": [0.20, 0.40, 0.50, 0.60, 0.55],
                          "b-s0": [0.30, 0.50, 0.70, 0.90, 0.85]})
    data = prepare_data(validate_runs(runs))
    assert (data.loc, data.scale) == (pytest.approx(2.0), pytest.approx(2.0))  # log-compute 0..4 onto -1..1
    assert data.best_metric == pytest.approx(0.6) and data.start_metric == pytest.approx(0.2)  # medians over runs
    values = data_fields(data, Priors(a_mu_offset=0.5))
    assert float(values["a_centre"]) == pytest.approx(np.log(0.6 / 0.4) + 0.5)
    assert float(values["r0_centre"]) == pytest.approx(np.log(0.2 / 0.8))


def test_a_sweep_at_a_perfect_score_or_of_little_compute_still_gets_finite_priors():
    """Kills the mutants that drop the clip of _clipped_logit (every run at pass rate 1.0: logit A
    centred at inf, a model that cannot be sampled) and the floor under the axis' scale (runs 1.5x
    apart in compute: a scale of 0.2, priors on midpoint and steepness made for a 30x range)."""
    from forecast.data import validate_runs
    from forecast.model import data_fields

    perfect = _three_runs(**{"a-s0": [0.5, 0.9, 1.0, 1.0, 1.0], "b-s0": [0.0, 0.8, 1.0, 1.0, 1.0]})
    values = data_fields(prepare_data(validate_runs(perfect)), Priors(a_mu_offset=0.5))
    assert float(values["a_centre"]) == pytest.approx(np.log(0.98 / 0.02) + 0.5)
    assert float(values["r0_centre"]) == pytest.approx(np.log(0.25 / 0.75))
    narrow = perfect.assign(compute=1.0 + perfect["compute"] / 100)  # 1.01 to 1.55
    assert prepare_data(validate_runs(narrow)).scale == 0.5


def test_white_variance_keeps_a_binomial_floor_at_a_pass_rate_of_0_or_1_and_none_where_n_eval_is_unknown():
    """Kills the mutant that drops white_variance's clip of mu: a curve at 1.0 (or 0.0) gave its
    evaluations no binomial noise at all, white variance sigma_extra^2 alone (0 when that is 0)."""
    from forecast.model import white_variance

    floor = 1e-4 * (1 - 1e-4) / 100
    np.testing.assert_allclose(white_variance(np.array([0.0, 1.0, 0.5]), np.array([100, 100, 100]), 0.0),
                               [floor, floor, 0.25 / 100])
    np.testing.assert_allclose(white_variance(np.array([0.5, 0.5]), np.array([0.0, 50.0]), 0.1), [0.01, 0.01 + 0.005])
