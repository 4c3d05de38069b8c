"""The model's graph against the model as documented (forecast/model.py's docstring and Priors), at
hand-chosen points, with no sampling: its log density (every prior and the likelihood) against
scipy, and its named quantities against their formulas. The likelihood is checked against the
dense multivariate normal of each run's residuals, not against the filter the model runs.

The other tests of the model compare it with the numpy likelihood of forecast/reweight.py, which
reads the same named quantities: a wrong prior, a wrong spread in the non-centred form, or A
without its sigmoid agreed with itself there."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import expit, logit

from forecast.data import validate_runs
from forecast.model import Priors, build_model, data_fields, data_values, prepare_data

# a sweep of two recipes: runs a-s0, a-s1 (recipe a) and b-s0 (recipe b) at compute e^0 .. e^4
METRICS = {"a-s0": [0.10, 0.30, 0.40, 0.50, 0.45], "a-s1": [0.20, 0.40, 0.50, 0.60, 0.55],
           "b-s0": [0.30, 0.50, 0.70, 0.90, 0.85]}
N_EVAL = 200
LOG_COMPUTE = np.arange(5.0)
LOC, SCALE = 2.0, 2.0  # log-compute 0..4 mapped onto -1..1

# Priors unlike the defaults and unlike each other, so a prior that reads the wrong setting is seen
PRIORS = Priors(a_mu_offset=0.4, a_mu_sd=0.9, a_sd=0.6, a_run_sd=0.15, b_mu=1.1, b_mu_sd=0.7, b_sd=0.35,
                m_mu=0.2, m_mu_sd=1.3, m_sd=0.45, r0_mu_sd=0.55, r0_sd=0.25, noise_sd=0.012,
                noise_sd_no_n_eval=0.04, wander_sd=0.018, wander_scale=0.22, student_nu=6.0)

# a point in the model's own units: recipe level (a, b), then runs (a-s0, a-s1, b-s0)
POINT = {
    "a_mu": 0.35, "b_mu": 1.25, "m_mu": -0.1, "a_sd": 0.4, "b_sd": 0.3, "m_sd": 0.35,
    "logit_A_recipe": np.array([0.1, 0.9]), "log_b": np.array([1.0, 1.6]), "m": np.array([-0.3, 0.2]),
    "a_run_sd": 0.12, "logit_A_run": np.array([0.05, 0.2, 1.0]),
    "r0_mu": -1.3, "r0_sd": 0.2, "logit_R0_run_z": np.array([0.5, -0.4, 1.1]),
    "sigma_extra_z": -0.8, "sigma_extra": 0.03, "wander_sd": 0.02, "wander_scale": 0.3,
}
RUN_RECIPE = np.array([0, 0, 1])


def sweep(runs=tuple(METRICS), *, n_eval=True, metrics=METRICS) -> pd.DataFrame:
    rows = [{"run_id": run, "recipe": run[0], "compute": float(np.exp(c)), "metric": m}
            for run in runs for c, m in zip(LOG_COMPUTE, metrics[run], strict=True)]
    table = pd.DataFrame(rows)
    return table.assign(n_eval=N_EVAL) if n_eval else table


def value_point(model, point=POINT) -> dict:
    """`point` as the model's free variables take it: z-scores where a level is non-centred, logs
    of the positive ones. A variable the model has and `point` cannot give fails here."""
    n_runs = len(point["logit_A_run"])
    z_of = {  # name_z: (value, its mean, its spread)
        "logit_A_recipe_z": ("logit_A_recipe", "a_mu", "a_sd"), "log_b_z": ("log_b", "b_mu", "b_sd"),
        "m_z": ("m", "m_mu", "m_sd"),
    }
    wanted = {}
    for var in model.value_vars:
        name = var.name.removesuffix("_log__")
        if name in z_of:
            value, mean, sd = z_of[name]
            value = (point[value] - point[mean]) / point[sd]
        elif name == "logit_A_run_z":
            value = (point["logit_A_run"] - point["logit_A_recipe"][RUN_RECIPE[:n_runs]]) / point["a_run_sd"]
        elif name == "logit_R0_run":  # the starts centred: the point holds them as z-scores
            value = point["r0_mu"] + point["r0_sd"] * point["logit_R0_run_z"]
        else:
            value = point[name]
        wanted[var.name] = np.log(value) if var.name.endswith("_log__") else np.asarray(value, dtype=float)
    return wanted


def curve(point, x, run):
    """The documented mean: R0_r + (A_r - R0_r) sigmoid(b_k (x - m_k)), k the recipe of run r."""
    recipe = RUN_RECIPE[run]
    A = expit(point["logit_A_run"][run])
    R0 = expit(point["r0_mu"] + point["r0_sd"] * point["logit_R0_run_z"][run])
    return R0 + (A - R0) * expit(np.exp(point["log_b"][recipe]) * (x - point["m"][recipe]))


def residuals(point, runs, *, n_eval, sigma_extra, metrics=METRICS):
    """Per run: (x, residual, white variance) of its evaluations, from the table, not from ModelData."""
    x = (LOG_COMPUTE - LOC) / SCALE
    out = []
    for run_name in runs:
        run = list(METRICS).index(run_name)
        mu = curve(point, x, run)
        white = (mu * (1 - mu) / N_EVAL if n_eval else 0.0) + sigma_extra**2
        out.append((x, np.asarray(metrics[run_name]) - mu, white * np.ones_like(x)))
    return out


def dense_loglik(per_run, wander_sd, wander_scale) -> float:
    """The exact likelihood: each run's residuals are an OU wander in x plus white noise."""
    total = 0.0
    for x, resid, white in per_run:
        cov = wander_sd**2 * np.exp(-np.abs(x[:, None] - x[None, :]) / wander_scale) + np.diag(white)
        total += stats.multivariate_normal(np.zeros(len(x)), cov).logpdf(resid)
    return total


def one_lag_loglik(per_run, wander_sd, wander_scale, nu=None) -> float:
    """Each residual given the previous one of its run, by the 2x2 Gaussian conditional."""
    total = 0.0
    for x, resid, white in per_run:
        for t in range(len(x)):
            var = white[t] + wander_sd**2
            mean = 0.0
            if t > 0:
                cov = wander_sd**2 * np.exp(-(x[t] - x[t - 1]) / wander_scale)
                mean = cov / (white[t - 1] + wander_sd**2) * resid[t - 1]
                var = var - cov**2 / (white[t - 1] + wander_sd**2)
            dist = stats.norm(mean, np.sqrt(var)) if nu is None else stats.t(nu, mean, np.sqrt(var))
            total += dist.logpdf(resid[t])
    return total


def prior_logp(point, priors, *, runs=tuple(METRICS), runs_centred=True, recipes_centred=True, n_eval=True,
               metrics=METRICS, starts_centred=False) -> float:
    """Sum of the documented priors' log densities at `point` (no Jacobians: natural units). The
    centres of logit A and logit R0: the median over runs of each run's best and first metric,
    clipped to [0.02, 0.98] (a perfect score has no logit)."""
    n_runs, recipes = len(runs), len({run[0] for run in runs})
    best = np.clip(np.median([max(metrics[run]) for run in runs]), 0.02, 0.98)
    start = np.clip(np.median([metrics[run][0] for run in runs]), 0.02, 0.98)
    norm, gamma, halfnorm = stats.norm.logpdf, stats.gamma.logpdf, stats.halfnorm.logpdf
    total = (norm(point["a_mu"], logit(best) + priors.a_mu_offset, priors.a_mu_sd)
             + norm(point["b_mu"], priors.b_mu, priors.b_mu_sd) + norm(point["m_mu"], priors.m_mu, priors.m_mu_sd))
    if recipes > 1:
        for spread, member, centre in (("a_sd", "logit_A_recipe", "a_mu"), ("b_sd", "log_b", "b_mu"), ("m_sd", "m", "m_mu")):
            total += gamma(point[spread], 2.0, scale=getattr(priors, spread) / 4.0)  # Gamma(2, rate 4 / s)
            z = (point[member] - point[centre]) / point[spread]
            total += (norm(point[member], point[centre], point[spread]) if recipes_centred else norm(z)).sum()
    total += gamma(point["a_run_sd"], 2.0, scale=priors.a_run_sd / 2.5)  # Gamma(2, rate 2.5 / s)
    run_centre = point["logit_A_recipe"][RUN_RECIPE[:n_runs]] if recipes > 1 else np.full(n_runs, point["a_mu"])
    z_run = (point["logit_A_run"] - run_centre) / point["a_run_sd"]
    total += (norm(point["logit_A_run"], run_centre, point["a_run_sd"]) if runs_centred else norm(z_run)).sum()
    total += norm(point["r0_mu"], logit(start), priors.r0_mu_sd) + halfnorm(point["r0_sd"], scale=priors.r0_sd)
    z_start = point["logit_R0_run_z"]
    start_logit = point["r0_mu"] + point["r0_sd"] * z_start
    total += (norm(start_logit, point["r0_mu"], point["r0_sd"]) if starts_centred else norm(z_start)).sum()
    if n_eval:
        total += norm(point["sigma_extra_z"])  # sigma_extra = noise_sd |z|: HalfNormal(noise_sd)
    else:
        total += halfnorm(point["sigma_extra"], scale=priors.noise_sd_no_n_eval)
    total += halfnorm(point["wander_sd"], scale=priors.wander_sd)
    total += stats.lognorm.logpdf(point["wander_scale"], 0.75, scale=priors.wander_scale)
    return float(total)


def model_logp(model, point=POINT) -> float:
    values = value_point(model, point)
    # FAST_COMPILE: each mutant of the model is a new graph, and C-compiling one took a minute
    logp = model.compile_logp(jacobian=False, mode="FAST_COMPILE")(values)
    gradient = model.compile_dlogp(jacobian=False, mode="FAST_COMPILE")(values)
    assert np.all(np.isfinite(gradient)), "the sampler needs a finite gradient at an ordinary point"
    return float(logp)


def named_values(model, point, names):
    """The model's named quantities at `point` (its random variables replaced by the point's values:
    a graph of the variables themselves would draw them at random)."""
    outs = model.replace_rvs_by_values([model[name] for name in names])
    return model.compile_fn(outs, inputs=model.value_vars, on_unused_input="ignore", mode="FAST_COMPILE")(
        value_point(model, point))


@pytest.mark.parametrize("centered, recipe_centered, starts_centered",
                         [(True, None, False), (False, None, False), (True, False, False), (True, None, True),
                          (True, False, True)])
def test_the_log_density_is_the_documented_priors_plus_the_exact_likelihood(centered, recipe_centered, starts_centered):
    """Kills mutants of every prior (a setting read for another, mu and sd swapped, a Gamma's
    shape or rate), of _hier's spread in either form, and of the curve, white variance and wander
    the likelihood is made of; in every parametrisation the forecaster uses (the runs' starts
    centred is the try for a flagged fit whose starts the data pin down)."""
    data = prepare_data(validate_runs(sweep()))
    model = build_model(data, PRIORS, centered=centered, recipe_centered=recipe_centered, starts_centered=starts_centered)
    free = {var.name for var in model.free_RVs}
    assert ("logit_R0_run" in free, "logit_R0_run_z" in free) == (starts_centered, not starts_centered)
    sigma_extra = PRIORS.noise_sd * abs(POINT["sigma_extra_z"])
    expected = prior_logp(POINT, PRIORS, runs_centred=centered,
                          recipes_centred=centered if recipe_centered is None else recipe_centered,
                          starts_centred=starts_centered)
    expected += dense_loglik(residuals(POINT, METRICS, n_eval=True, sigma_extra=sigma_extra),
                             POINT["wander_sd"], POINT["wander_scale"])
    assert model_logp(model) == pytest.approx(expected, abs=1e-6)


def test_without_n_eval_the_white_noise_is_sigma_extra_alone_with_its_own_prior():
    """Kills the mutants that give the no-n_eval model the binomial term or noise_sd's prior, and
    the one whose white variance stays a scalar there (the filter takes one per row)."""
    model = build_model(prepare_data(validate_runs(sweep(n_eval=False))), PRIORS)
    expected = prior_logp(POINT, PRIORS, n_eval=False)
    expected += dense_loglik(residuals(POINT, METRICS, n_eval=False, sigma_extra=POINT["sigma_extra"]),
                             POINT["wander_sd"], POINT["wander_scale"])
    assert model_logp(model) == pytest.approx(expected, abs=1e-6)


def test_one_recipe_drops_the_recipe_level_and_its_curve_still_takes_b_as_exp_b_mu():
    """One recipe: no recipe spreads, the recipe's logit A, log b and m are a_mu, b_mu and m_mu
    (kills b = b_mu without exp, and a recipe level kept for a single recipe)."""
    point = {**POINT, "logit_A_recipe": np.array([POINT["a_mu"]]), "log_b": np.array([POINT["b_mu"]]),
             "m": np.array([POINT["m_mu"]]), "logit_A_run": POINT["logit_A_run"][:2],
             "logit_R0_run_z": POINT["logit_R0_run_z"][:2]}
    for gone in ("a_sd", "b_sd", "m_sd"):
        point.pop(gone)
    runs = ("a-s0", "a-s1")
    model = build_model(prepare_data(validate_runs(sweep(runs))), PRIORS)
    assert {"a_sd", "b_sd", "m_sd", "logit_A_recipe", "log_b", "m"}.isdisjoint(v.name for v in model.free_RVs)
    sigma_extra = PRIORS.noise_sd * abs(point["sigma_extra_z"])
    expected = prior_logp(point, PRIORS, runs=runs)
    expected += dense_loglik(residuals(point, runs, n_eval=True, sigma_extra=sigma_extra),
                             point["wander_sd"], point["wander_scale"])
    assert model_logp(model, point) == pytest.approx(expected, abs=1e-6)
    np.testing.assert_allclose(np.concatenate(named_values(model, point, ("A", "B", "log_C_mid"))),
                               [expit(POINT["a_mu"]), np.exp(POINT["b_mu"]) / SCALE, LOC + SCALE * POINT["m_mu"]], rtol=1e-12)


def test_a_curve_near_a_perfect_score_keeps_the_documented_binomial_noise():
    """Runs at pass rates of 0.993 to 0.998: the model clips the curve only to [1e-4, 1 - 1e-4]
    for the binomial term, as white_variance does, so such a run's white noise is mu (1 - mu) /
    n_eval, not a floor of 0.99 x 0.01 (kills clip bounds of 1e-2)."""
    point = {**POINT, "a_mu": 6.0, "logit_A_recipe": np.array([5.8, 6.3]), "logit_A_run": np.array([5.5, 6.0, 6.5]),
             "r0_mu": 5.0}
    near_perfect = {run: [0.99 + 0.008 * m for m in values] for run, values in METRICS.items()}
    model = build_model(prepare_data(validate_runs(sweep(metrics=near_perfect))), PRIORS)
    sigma_extra = PRIORS.noise_sd * abs(point["sigma_extra_z"])
    expected = prior_logp(point, PRIORS, metrics=near_perfect) + dense_loglik(
        residuals(point, METRICS, n_eval=True, sigma_extra=sigma_extra, metrics=near_perfect),
        point["wander_sd"], point["wander_scale"])
    assert model_logp(model, point) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("centered", [True, False])
def test_the_named_quantities_are_the_documented_formulas_in_natural_units(centered):
    """A = sigmoid(logit A_k), B = b / scale (steepness in log-compute units), log C_mid = loc +
    scale m, A_run and R0_run the runs' sigmoids, R0 = sigmoid(r0_mu), sigma_extra = noise_sd |z|.
    forecast/reweight.py and every prediction read these, so a wrong one agreed with itself there."""
    model = build_model(prepare_data(validate_runs(sweep())), PRIORS, centered=centered)
    names = ("A", "B", "log_C_mid", "A_run", "R0_run", "R0", "sigma_extra")
    got = dict(zip(names, named_values(model, POINT, names), strict=True))
    expected = {
        "A": expit(POINT["logit_A_recipe"]), "B": np.exp(POINT["log_b"]) / SCALE, "log_C_mid": LOC + SCALE * POINT["m"],
        "A_run": expit(POINT["logit_A_run"]), "R0_run": expit(POINT["r0_mu"] + POINT["r0_sd"] * POINT["logit_R0_run_z"]),
        "R0": expit(POINT["r0_mu"]), "sigma_extra": PRIORS.noise_sd * abs(POINT["sigma_extra_z"]),
    }
    for name in names:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-12, err_msg=name)


def test_the_robust_likelihood_takes_priors_student_nu():
    """Robust: the filter's innovations are Student-t with priors.student_nu degrees of freedom
    (here 6, not the default 4). The numpy filter of forecast.wander_filter, which its own tests
    hold to the dense Gaussian and to scipy's t, scores the documented residuals; kills the mutants
    that ignore `robust` or read a fixed nu."""
    from forecast.wander_filter import filter_residuals

    model = build_model(prepare_data(validate_runs(sweep())), PRIORS, robust=True)
    sigma_extra = PRIORS.noise_sd * abs(POINT["sigma_extra_z"])
    expected = prior_logp(POINT, PRIORS)
    for x, resid, white in residuals(POINT, METRICS, n_eval=True, sigma_extra=sigma_extra):
        phi = np.r_[0.0, np.exp(-np.diff(x) / POINT["wander_scale"])]
        expected += filter_residuals(resid, white, phi, POINT["wander_sd"] ** 2, nu=PRIORS.student_nu)[0]
    assert model_logp(model) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("robust", [False, True])
def test_the_one_lag_likelihood_scores_each_residual_given_the_previous_one(robust):
    """residual_likelihood="one-lag" (kept for benchmarks/exact_likelihood.py): each real residual
    by the 2x2 Gaussian conditional on the previous one of its run, padding rows not at all, and
    Student-t with priors.student_nu when robust."""
    model = build_model(prepare_data(validate_runs(sweep())), PRIORS, robust=robust, residual_likelihood="one-lag")
    sigma_extra = PRIORS.noise_sd * abs(POINT["sigma_extra_z"])
    expected = prior_logp(POINT, PRIORS) + one_lag_loglik(
        residuals(POINT, METRICS, n_eval=True, sigma_extra=sigma_extra), POINT["wander_sd"], POINT["wander_scale"],
        nu=PRIORS.student_nu if robust else None)
    assert model_logp(model) == pytest.approx(expected, abs=1e-6)


def test_a_table_with_n_eval_on_some_rows_only_is_fitted_as_one_without_it():
    """validate_runs warns that the fit then ignores n_eval everywhere: the model has no n_eval
    node and sigma_extra keeps its own HalfNormal (kills has_n_eval on any row instead of all)."""
    table = sweep().astype({"n_eval": float})
    table.loc[3, "n_eval"] = np.nan
    with pytest.warns(UserWarning, match="ignores n_eval everywhere"):
        data = prepare_data(validate_runs(table))
    assert not data.has_n_eval
    model = build_model(data, PRIORS)
    assert "n_eval" not in model.named_vars and "sigma_extra" in {v.name for v in model.free_RVs}
    # a compiled model takes new data as data_values(): they hold no n_eval for it
    assert "n_eval" not in data_fields(data, PRIORS)
    assert len(data_values(data, PRIORS)["floats"]) == 4 * len(data.y) + 4


def test_rows_are_padded_to_the_next_whole_bucket_and_each_run_knows_its_last_row():
    """Padding: a table of 64 rows is not padded at all, 65 rows to 128 (kills a full bucket
    padded again). run_last_obs is each run's last row (the filtered wander there starts its
    forecast), prev each row's previous row of the same run."""
    from forecast.model import padded_length

    assert [padded_length(n) for n in (1, 63, 64, 65, 128)] == [64, 64, 64, 128, 128]
    data = prepare_data(validate_runs(sweep()))
    np.testing.assert_array_equal(data.run_last_obs, [4, 9, 14])
    np.testing.assert_array_equal(data.prev[:15], [-1, 0, 1, 2, 3, -1, 5, 6, 7, 8, -1, 10, 11, 12, 13])
