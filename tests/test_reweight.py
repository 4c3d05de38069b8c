"""Fast refits by reweighting: the numpy likelihood is the model's, and refit() reweights only
when that is reliable, falling back to sampling otherwise."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from forecast import ScalingForecaster
from forecast.data import validate_runs
from forecast.model import build_model, prepare_data
from forecast.reweight import PARAMETERS, importance_update, log_likelihood, systematic_resample


@pytest.mark.parametrize("centered,robust", [(True, False), (False, False), (True, True)])
def test_numpy_likelihood_is_the_models_potential(small_sweep, centered, robust):
    data = prepare_data(validate_runs(small_sweep))
    model = build_model(data, robust=robust, centered=centered)
    rng = np.random.default_rng(1)
    point = {k: v + 0.2 * rng.standard_normal(np.shape(v)) for k, v in model.initial_point().items()}
    # one call: compiled functions may reuse their input buffers. The variables are replaced by their values:
    # a graph of the variables themselves draws them at random, so `point` was never used and the two agreed
    # at random draws instead
    outputs = model.replace_rvs_by_values([model.potentials[0], *[model[v] for v in PARAMETERS]])
    values = model.compile_fn(outputs, inputs=model.value_vars, on_unused_input="ignore")(point)
    assert values[PARAMETERS.index("sigma_extra") + 1] == pytest.approx(
        model.compile_fn(model.replace_rvs_by_values([model["sigma_extra"]])[0], inputs=model.value_vars,
                         on_unused_input="ignore")(point))  # the same point twice: not random draws
    params = {v: np.asarray(x)[None] for v, x in zip(PARAMETERS, values[1:], strict=True)}
    assert log_likelihood(params, data, robust=robust)[0] == pytest.approx(float(values[0]), rel=1e-6)


@pytest.mark.parametrize("robust", [False, True])
def test_the_likelihood_taken_in_blocks_of_rows_is_the_likelihood_of_all_rows_at_once(fitted, robust):
    # blocks of 1 and 7 rows cross every run boundary and split runs, so the filter's state must be
    # carried from block to block exactly; one block holds every row (the way it was computed before)
    post = fitted._base["idata"].posterior
    params = {v: post[v].values.reshape((-1,) + post[v].shape[2:]) for v in PARAMETERS}
    data = fitted._base["data"]
    n_draws = len(params["sigma_extra"])
    at_once = log_likelihood(params, data, robust=robust, block_elements=n_draws * data.n_obs)
    assert np.all(np.isfinite(at_once)) and np.ptp(at_once) > 0
    for rows in (1, 7):
        in_blocks = log_likelihood(params, data, robust=robust, block_elements=rows * n_draws)
        np.testing.assert_allclose(in_blocks, at_once, rtol=1e-12, atol=0)


def test_systematic_resample_follows_the_weights():
    weights = np.array([0.5, 0.25, 0.25, 0.0])
    counts = np.bincount(systematic_resample(np.repeat(weights, 100) / 100, np.random.default_rng(0)) // 100, minlength=4)
    assert counts.tolist() == [200, 100, 100, 0]


def test_unchanged_data_keeps_every_draw(fitted):
    base = fitted._base
    post = base["idata"].posterior
    params = {v: post[v].values.reshape((-1,) + post[v].shape[2:]) for v in PARAMETERS}
    loglik = log_likelihood(params, base["data"])
    update = importance_update(params, loglik, base["data"], rng=0)
    assert update.efficiency == pytest.approx(1.0) and update.pareto_k <= 0.7  # PSIS alone says inf here
    assert sorted(update.indices.tolist()) == list(range(len(loglik)))


def _fast_fit(table, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ScalingForecaster(mode="fast").fit(table, random_seed=seed, progress=False)


def test_refit_reweights_one_new_evaluation_and_matches_a_fresh_fit(small_sweep):
    last_of_first_run = small_sweep.index[small_sweep["run_id"] == small_sweep["run_id"].iloc[0]][-1]
    fc = _fast_fit(small_sweep.drop(index=last_of_first_run), seed=1)
    sampled_report = fc.diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc.refit(small_sweep, random_seed=2)
    assert fc.fit_info_["reweighted"] is True
    report = fc.diagnostics()
    assert report.pareto_k is not None and report.pareto_k <= 0.7 and "reweighted" in str(report)
    assert report.max_rhat == sampled_report.max_rhat  # the sampler's own diagnostics are kept
    assert fc.data_.n_obs == len(small_sweep) and len(fc.runs_) == len(small_sweep)
    # each reweighted draw keeps the chain it was resampled from (the advice's per-chain check reads it)
    base = fc._base["idata"].posterior
    base_rows = base["A_run"].values.reshape(-1, base["A_run"].shape[-1])
    sources = [np.flatnonzero((base_rows == row).all(axis=1)) for row in fc.draws("A_run")]
    assert all(len(s) and set(s // base.sizes["draw"]) == {chain} for s, chain in zip(sources, fc.chain_of_draw, strict=True))
    assert set(fc.chain_of_draw) == {0, 1} and len(fc.chain_of_draw) == fc.n_draws
    fresh = _fast_fit(small_sweep, seed=3)
    assert np.array_equal(fresh.chain_of_draw, np.repeat([0, 1], fresh.n_draws // 2))
    a = fc.predict([2e5], kind="new_run").set_index("recipe")
    b = fresh.predict([2e5], kind="new_run").set_index("recipe")
    width = (b["q95"] - b["q05"]).to_numpy()
    assert np.all(np.abs(a["q50"] - b["q50"]).to_numpy() < 0.25 * width)


def test_refit_on_the_same_table_reweights_instead_of_sampling(small_sweep):
    fc = _fast_fit(small_sweep, seed=1)
    before = fc.predict([2e5], kind="new_run")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc.refit(small_sweep.assign(note="an extra column the model does not read"), random_seed=2)
    assert fc.fit_info_["reweighted"] is True
    pd.testing.assert_frame_equal(fc.predict([2e5], kind="new_run"), before)


def test_refit_samples_again_when_the_news_are_large(small_sweep):
    first_half = small_sweep[small_sweep.groupby("run_id").cumcount() < 8]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # padded like the whole sweep: one compiled model serves both fits
        fc = ScalingForecaster(mode="fast").fit(first_half, random_seed=1, progress=False, pad_to=len(prepare_data(small_sweep).y))
        fc.refit(small_sweep, random_seed=2)  # twice the data: far too much news to reweight
    assert fc.fit_info_["reweighted"] is False and fc.diagnostics().pareto_k is None
    assert fc.data_.n_obs == len(small_sweep)


def test_only_the_same_runs_can_be_reweighted(small_sweep):
    data = prepare_data(validate_runs(small_sweep))
    first = small_sweep["run_id"].iloc[0]
    assert ScalingForecaster._same_runs(small_sweep.iloc[::-1], data)
    assert not ScalingForecaster._same_runs(small_sweep[small_sweep["run_id"] != first], data)
    moved = small_sweep.assign(recipe=np.where(small_sweep["run_id"] == first, "another_recipe", small_sweep["recipe"]))
    assert not ScalingForecaster._same_runs(moved, data)


def test_a_reweighted_fit_saves_and_loads_with_its_diagnostics(small_sweep, tmp_path):
    last = small_sweep.groupby("run_id").cumcount() == 15
    fc = _fast_fit(small_sweep[~last | (small_sweep["run_id"] != small_sweep["run_id"].iloc[0])], seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc.refit(small_sweep, random_seed=2)
    assert fc.fit_info_["reweighted"]
    again = ScalingForecaster.load(fc.save(tmp_path / "fit.nc"))
    assert again.diagnostics().pareto_k == pytest.approx(fc.diagnostics().pareto_k)
    assert again.data_.loc == pytest.approx(fc.data_.loc) and again.data_.scale == pytest.approx(fc.data_.scale)
    np.testing.assert_allclose(again.predict([2e5])["q50"], fc.predict([2e5])["q50"])


def test_a_loaded_fit_reweights_on_refit_as_before_saving(small_sweep, tmp_path):
    """refit() after load() reweights a sampled fit (the same posterior draws, so the same answer
    as refitting before saving); a saved reweighted fit holds repeated draws and samples again."""
    last_of_first_run = small_sweep.index[small_sweep["run_id"] == small_sweep["run_id"].iloc[0]][-1]
    fc = _fast_fit(small_sweep.drop(index=last_of_first_run), seed=1)
    loaded = ScalingForecaster.load(fc.save(tmp_path / "fit.nc"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc.refit(small_sweep, random_seed=2)
        loaded.refit(small_sweep, random_seed=2)
    assert loaded.fit_info_["reweighted"] is True
    np.testing.assert_allclose(loaded.predict([2e5])["q50"], fc.predict([2e5])["q50"])
    # parameters() read R-hat and ESS off the sampled fit, which for a loaded one was a _FitGroups that
    # az.summary refused (ValueError); saved, the reweighted fit's R-hat and ESS were then the resampled draws'
    columns = ["mean", "r_hat", "ess_bulk"]
    pd.testing.assert_frame_equal(loaded.parameters()[columns], fc.parameters()[columns])
    again = ScalingForecaster.load(loaded.save(tmp_path / "reweighted.nc"))
    assert again._base is None
    pd.testing.assert_frame_equal(again.parameters()[columns], fc.parameters()[columns])
    resampled = again.parameters()["r_hat"]
    again._saved_sampled_diagnostics = None  # what the loaded fit said before: the resampled draws' own
    assert not np.allclose(again.parameters()["r_hat"], resampled)


def test_draws_the_new_data_favour_are_kept_more_often_in_the_share_the_weights_give(monkeypatch):
    """Kills two mutants of importance_update that every refit test let through: the weights taken as
    old likelihood over new (refit() then moved the posterior away from the new evaluations) and the
    efficiency not divided by the number of draws (94% read 37736%, so MIN_REWEIGHT_EFFICIENCY never
    sent a refit to sampling). Half of 400 draws are e^0.5 times as likely under the new data as the
    other half: they make e^0.5 / (1 + e^0.5) = 62% of the resample, and the weights' efficiency is
    (1 + e^-0.5)^2 / (2 (1 + e^-1)) = 0.943."""
    import forecast.reweight as reweight

    favoured = np.arange(400) < 200
    noise = 0.01 * np.random.default_rng(0).standard_normal(400)  # PSIS needs a tail to fit: k is inf for two values
    base = np.full(400, -50.0)
    monkeypatch.setattr(reweight, "log_likelihood", lambda *args, **kwargs: base + np.where(favoured, 0.0, -0.5) + noise)
    update = importance_update({}, base, None, rng=0)
    assert update.pareto_k <= 0.7
    assert update.efficiency == pytest.approx((1 + np.exp(-0.5)) ** 2 / (2 * (1 + np.exp(-1))), abs=0.005)
    assert favoured[update.indices].sum() == pytest.approx(400 * np.exp(0.5) / (1 + np.exp(0.5)), abs=3)


def test_a_resample_whose_weights_sum_short_of_1_by_rounding_keeps_to_the_draws():
    """Kills the mutant that drops `cumulative[-1] = 1.0` from systematic_resample: ten weights of 0.1
    sum to 0.9999999999999999, and the last position, at the largest uniform draw, lay past it: index
    10 of 10 draws, an IndexError in refit()."""

    class LargestUniform:
        def uniform(self):
            return np.nextafter(1.0, 0.0)

    indices = systematic_resample(np.full(10, 0.1), LargestUniform())
    assert len(indices) == 10 and indices.min() == 0 and indices.max() == 9
