"""Layer 2: turn a validated run table into a PyMC model with named dims.

The model, per observation i of run r (recipe k = recipe[r]) at compute C_i:

    x_i        = (log C_i - loc) / scale                 compute normalised by its own log-range
    mu_i       = R0_r + (A_r - R0_r) * sigmoid(b_k * (x_i - m_k))
    resid_i    = metric_i - mu_i = wander (OU process in x, per run) + white noise,
                 white variance = mu_i (1 - mu_i) / n_eval_i + sigma_extra^2
                 likelihood: exact, by a Kalman filter along each run (forecast/wander_filter.py;
                 Normal innovations, or Student-t if robust)

    logit A_k  ~ Normal(a_mu, a_sd)            recipe asymptotes, partially pooled
    log   b_k  ~ Normal(b_mu, b_sd)            recipe steepness; B = b / scale in log-compute units
    m_k        ~ Normal(m_mu, m_sd)            recipe midpoint; log C_mid = loc + scale * m
    logit A_r  ~ Normal(logit A_k, a_run_sd)   seed-to-seed spread of the asymptote
    logit R0_r = r0_mu + r0_sd * z_R0[r]       start of each run, learnt (not fixed by hand)

Parametrisation: recipe and run asymptotes are centred when every run has enough evaluations
to pin itself down (`centered=True`, chosen by the forecaster), non-centred (z-scores) otherwise;
`recipe_centered=False` makes the recipe level alone non-centred, the forecaster's first fallback
when a centred fit still diverges (a sweep of alike recipes: the recipe spreads' funnel);
R0 is always non-centred, because runs of a sweep usually share their start checkpoint and a
near-zero spread is exactly the centred form's funnel. The recipe spreads and the seed-to-seed
spread of the asymptote get zero-avoiding Gamma priors for the same reason. Extra white noise keeps its HalfNormal prior, whose mode at 0
is the common truth, but is sampled as noise_sd * |z| where n_eval is known (see build_model).
With a single recipe the recipe level is dropped. Priors are on the scale of the data: logit A
is centred on the best observed pass rates, R0 on the first evaluations, midpoints on the
normalised compute axis (the observed range, or up to a planned `horizon` for a sweep in flight).
Everything is overridable via `Priors`.
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.special import logit

from .curves import sigmoid_curve_pt
from .wander_filter import residual_loglik, wander_correlation

if TYPE_CHECKING:
    import pymc as pm

__all__ = ["Priors", "ModelData", "prepare_data", "build_model", "residual_process", "white_variance", "data_values",
           "data_fields", "data_layout"]


@dataclass
class Priors:
    """Prior settings (documented defaults; override any of them in one call: Priors(a_sd=0.5)).

    Units: logit for asymptotes and starts, log for the steepness b (normalised axis), and the
    normalised compute axis (observed log-compute range mapped to [-1, 1]) for midpoints.
    """

    a_mu_offset: float = 0.5  # centre of logit A: logit(best observed) + this (A lies above the data)
    a_mu_sd: float = 1.0  # uncertainty of that centre, logit units
    a_sd: float = 0.5  # recipe-to-recipe spread of logit A: Gamma(2, 4 / a_sd) prior, mean a_sd / 2
    a_run_sd: float = 0.1  # seed-to-seed spread of logit A: Gamma(2, 2.5 / a_run_sd) prior, mean 0.8 a_run_sd
    b_mu: float = 1.0  # centre of log b; b = B * scale, so exp(1) ~ 2.7 ~ B of 1.5 over a 30x range
    b_mu_sd: float = 0.75
    b_sd: float = 0.3  # recipe spread of log b: Gamma(2, 4 / b_sd) prior
    m_mu: float = 0.0  # centre of the midpoint on the normalised axis (0 = middle of the data)
    m_mu_sd: float = 1.0
    m_sd: float = 0.5  # recipe spread of midpoints: Gamma(2, 4 / m_sd) prior
    r0_mu_sd: float = 0.5  # uncertainty of the pooled start around logit(first evaluations)
    r0_sd: float = 0.3  # half-normal scale of run-to-run spread of logit R0
    noise_sd: float = 0.01  # half-normal scale of extra white noise beyond binomial evaluation noise
    noise_sd_no_n_eval: float = 0.05  # the same when n_eval is unknown (it is then all the noise)
    wander_sd: float = 0.02  # half-normal scale of slow wander of a run around its curve
    wander_scale: float = 0.15  # median correlation length of the wander, normalised log-compute
    student_nu: float = 4.0  # degrees of freedom of the robust likelihood

    # the centres may be negative; every other setting is a scale, a spread or a degree of freedom
    CENTRES = ("a_mu_offset", "b_mu", "m_mu")
    # Every setting lives on a logit, log or normalised scale, where 20 is already absurd (a logit
    # offset of 20; b = e^20). Far larger values, or inf and NaN, overflow inside the sampler: it
    # crashed (a segfault for b_mu=nan or 1e300) after a minute of compiling, instead of saying so.
    LIMIT = 20.0
    STUDENT_NU_LIMIT = 1e4  # a large nu is a normal likelihood: allowed far higher
    # and far smaller: a scale of 1e-300 (a_mu_sd, a_sd) failed every initialisation point of the sampler, a
    # RuntimeError traceback from nutpie after the model was compiled; 1e-6, a millionth of a unit, samples
    MIN_SCALE = 1e-6

    def __post_init__(self):
        for name, value in self.to_dict().items():
            if isinstance(value, bool) or not isinstance(value, numbers.Real):  # "x" < 20 is a TypeError deep down
                raise ValueError(f"{name} must be a number, got {value!r}")
            limit = self.STUDENT_NU_LIMIT if name == "student_nu" else self.LIMIT
            if name in self.CENTRES and not -limit <= value <= limit:  # also refuses NaN
                raise ValueError(f"{name} must lie in [-{limit:g}, {limit:g}] (a logit, log or normalised-axis centre), got {value!r}")
            if name not in self.CENTRES and not 0 < value <= limit:
                raise ValueError(f"{name} must be > 0 and at most {limit:g}, got {value!r}")
            if name not in self.CENTRES and value < self.MIN_SCALE:
                raise ValueError(f"{name} must be at least {self.MIN_SCALE:g} (a scale, spread or degree of freedom "
                                 f"that small leaves the sampler nowhere to start), got {value!r}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ModelData:
    """Arrays and coordinates derived from a validated run table (the only input of the model).

    Observations are sorted by run then compute and padded with weight-0 rows to a multiple of 64, or
    to `pad_to` where that is more (prepare_data), so that a refit after a few new evaluations has the
    same shapes and reuses the compiled model.
    """

    recipes: list[str]
    runs: list[str]
    run_recipe: np.ndarray  # (n_runs,) recipe index of each run
    obs_run: np.ndarray  # (n_pad,) run index of each observation
    x: np.ndarray  # (n_pad,) normalised log-compute
    y: np.ndarray  # (n_pad,) metric
    n_eval: np.ndarray  # (n_pad,) graded samples behind each metric, or 0 where unknown
    weight: np.ndarray  # (n_pad,) 1 for real observations, 0 for padding
    prev: np.ndarray  # (n_pad,) index of the previous observation of the same run, or -1
    loc: float  # log-compute mapped to x = 0
    scale: float  # half the observed log-compute range
    best_metric: float  # median over runs of each run's best metric (centre of the A prior)
    start_metric: float  # median over runs of each run's first metric (centre of the R0 prior)
    run_last_obs: np.ndarray  # (n_runs,) index of each run's last observation

    @property
    def n_obs(self) -> int:
        return int(self.weight.sum())

    @property
    def has_n_eval(self) -> bool:
        real = self.weight > 0
        return bool(np.all(self.n_eval[real] > 0))

    def frame(self) -> dict:
        """The data-dependent constants of the model (compute axis and prior centres). A refit
        that keeps the frame keeps the prior, which reweighting an earlier posterior needs."""
        return {"loc": self.loc, "scale": self.scale, "best_metric": self.best_metric, "start_metric": self.start_metric}

    def to_x(self, compute) -> np.ndarray:
        return (np.log(np.asarray(compute, dtype=float)) - self.loc) / self.scale

    def coords(self) -> dict:
        # no "obs": the evaluations enter the model packed in one data vector (data_layout), not as a dimension
        return {"recipe": self.recipes, "run": self.runs}

    def structure_key(self) -> tuple:
        """Everything that fixes the compiled model's shapes; data with the same key can reuse it."""
        return (len(self.recipes), len(self.runs), len(self.y), self.has_n_eval)


def padded_length(n: int, bucket: int = 64) -> int:
    """The rows a fit of n evaluations has (prepare_data without pad_to): n rounded up to a bucket, so
    that a table grown by a few rows keeps its structure and its compiled model."""
    return int(np.ceil(n / bucket) * bucket)


def _frame_from(log_c: np.ndarray, per_run, horizon: float | None = None) -> dict:
    """Compute axis: the log-compute range from the first evaluation to the last one, or to
    `horizon` where that is further, mapped to [-1, 1]. Prior centres: the median over runs of each
    run's best and of its first metric."""
    lo, hi = float(log_c.min()), float(log_c.max())
    if horizon is not None:
        hi = max(hi, float(np.log(horizon)))
    return {
        "loc": 0.5 * (lo + hi),
        "scale": max(0.5 * (hi - lo), 0.5),  # a table spanning little compute still gets a sane axis
        "best_metric": float(per_run.max().median()),
        "start_metric": float(per_run.first().median()),
    }


def prepare_data(
    runs: pd.DataFrame, *, pad_to: int | None = None, frame: dict | None = None, horizon: float | None = None
) -> ModelData:
    """Arrays for the model from a validated run table (see data.validate_runs).

    frame: keep the compute axis and prior centres of an earlier fit (ModelData.frame()) instead
    of deriving them from this table.
    horizon: the largest compute the fit will be asked about (a sweep's largest planned budget).
    The compute axis then spans the planned range, not only the range seen so far, so the priors
    on the midpoint and the steepness, which live on that axis, are the same for a sweep a tenth
    of the way through as for the finished sweep. Ignored when `frame` is given.
    """
    if horizon is not None and not (np.isfinite(horizon) and horizon > 0):
        raise ValueError(f"horizon must be a compute > 0, got {horizon!r}")
    runs = runs.sort_values(["recipe", "run_id", "compute"], kind="stable").reset_index(drop=True)
    recipes = sorted(runs["recipe"].unique())
    run_table = runs.drop_duplicates("run_id")[["run_id", "recipe"]]
    run_ids = list(run_table["run_id"])
    recipe_index = {r: i for i, r in enumerate(recipes)}
    run_index = {r: i for i, r in enumerate(run_ids)}
    log_c = np.log(runs["compute"].to_numpy(float))
    n = len(runs)
    n_pad = max(pad_to or 0, padded_length(n))
    pad = n_pad - n

    obs_run = runs["run_id"].map(run_index).to_numpy(int)
    prev = np.arange(n) - 1
    prev[np.r_[True, obs_run[1:] != obs_run[:-1]]] = -1
    run_last = np.array([np.flatnonzero(obs_run == r).max() for r in range(len(run_ids))])
    n_eval = runs["n_eval"].fillna(0).to_numpy(float) if "n_eval" in runs else np.zeros(n)
    per_run = runs.groupby("run_id")["metric"]
    frame = frame or _frame_from(log_c, per_run, horizon)
    loc, scale = frame["loc"], frame["scale"]
    return ModelData(
        recipes=recipes,
        runs=run_ids,
        run_recipe=run_table["recipe"].map(recipe_index).to_numpy(int),
        obs_run=np.r_[obs_run, np.zeros(pad, int)],
        x=np.r_[(log_c - loc) / scale, np.zeros(pad)],
        y=np.r_[runs["metric"].to_numpy(float), np.full(pad, 0.5)],
        n_eval=np.r_[n_eval, np.ones(pad)],
        weight=np.r_[np.ones(n), np.zeros(pad)],
        prev=np.r_[prev, np.full(pad, -1)],
        loc=loc,
        scale=scale,
        best_metric=frame["best_metric"],
        start_metric=frame["start_metric"],
        run_last_obs=run_last,
    )


def _clipped_logit(p: float) -> float:
    return float(logit(np.clip(p, 0.02, 0.98)))


def _hier(name, mu, sd, dim, centered):
    """A partially pooled vector: centred when the data pin each member down (long runs), else
    non-centred (z-scores), which avoids the funnel when members are weakly informed."""
    import pymc as pm

    if centered:
        return pm.Normal(name, mu, sd, dims=dim)
    z = pm.Normal(f"{name}_z", 0.0, 1.0, dims=dim)
    return pm.Deterministic(name, mu + sd * z, dims=dim)


def white_variance(mu, n_eval, sigma_extra):
    """Numpy twin of the model's white variance: binomial evaluation noise of n_eval graded
    samples (no binomial term where n_eval is 0, i.e. unknown) plus extra white noise."""
    mu = np.clip(mu, 1e-4, 1 - 1e-4)
    n_eval = np.asarray(n_eval, dtype=float)
    binomial = np.where(n_eval > 0, mu * (1 - mu) / np.where(n_eval > 0, n_eval, 1.0), 0.0)
    return binomial + sigma_extra**2


def residual_process(resid_prev, x, x_prev, white_var, white_var_prev, wander_sd, wander_scale, has_prev):
    """Mean and variance of a residual given the previous residual of the same run.

    Residuals are slow "wander" (an Ornstein-Uhlenbeck process in log-compute: real curves drift
    around the sigmoid for a while) plus white evaluation noise. This conditions on the previous
    residual only, with the exact lag-one covariance: the "one-lag" likelihood, an approximation
    kept for comparison (the model's own is exact: forecast/wander_filter.py). Works on numpy
    arrays and PyTensor tensors alike.
    """
    # wander_correlation zeroes the step at a run's first row before exp(): exp(-(x - x_prev) / scale) of
    # the row it is clamped to could overflow to inf there (a small wander_scale), and inf * 0 is NaN
    cov = wander_sd**2 * wander_correlation(x, x_prev, has_prev, wander_scale)
    var_here = white_var + wander_sd**2
    var_prev = white_var_prev + wander_sd**2
    mean = cov / var_prev * resid_prev
    var = var_here - cov**2 / var_prev
    return mean, var


def data_fields(data: ModelData, priors: Priors) -> dict:
    """Every data-dependent number of the model, by name: per observation, per run, or one value."""
    fields = {
        "x": data.x,
        "y": data.y,
        "weight": data.weight,
        "prev": np.maximum(data.prev, 0),
        "has_prev": (data.prev >= 0).astype(float),
        "obs_run": data.obs_run,
        "run_recipe": data.run_recipe,
        "loc": np.asarray(data.loc),
        "scale": np.asarray(data.scale),
        "a_centre": np.asarray(_clipped_logit(data.best_metric) + priors.a_mu_offset),
        "r0_centre": np.asarray(_clipped_logit(data.start_metric)),
    }
    if data.has_n_eval:
        # only then does the model use it: a table without n_eval has no such column in the data
        fields["n_eval"] = data.n_eval
    return fields


def data_layout(data: ModelData) -> dict:
    """Where each of data_fields' values lies in the model's two pm.Data vectors: {"floats": [(name,
    length), ...], "ints": [...]}, end to end in that order; a length of None is one value read as a
    scalar (a run-level field of a one-run sweep is still a vector of 1). The lengths are fixed by the
    structure key.

    Two vectors instead of a node per field because every pm.Data node is one more argument that
    nutpie's compiled log density unpacks and checks: with the twelve nodes of before, a cold compile
    took about a fifth longer (benchmarks/RESULTS.md, Fit speed), paid by every `forecast fit`."""
    n_obs, n_run = len(data.y), len(data.runs)
    per_obs = ["x", "y", "weight", "has_prev"] + (["n_eval"] if data.has_n_eval else [])
    floats = [(name, n_obs) for name in per_obs] + [(name, None) for name in ("loc", "scale", "a_centre", "r0_centre")]
    ints = [("prev", n_obs), ("obs_run", n_obs), ("run_recipe", n_run)]
    return {"floats": floats, "ints": ints}


def data_values(data: ModelData, priors: Priors) -> dict:
    """The values of the model's pm.Data nodes ("floats" and "ints", laid out by data_layout). A
    compiled model takes new data as exactly this dict, so a refit of the same structure need not
    build the PyMC model again."""
    fields = data_fields(data, priors)
    return {node: np.concatenate([np.ravel(fields[name]) for name, _ in parts]).astype(float if node == "floats" else np.int64)
            for node, parts in data_layout(data).items()}


def unpacked(vector, parts) -> dict:
    """The fields of one packed pm.Data vector (laid out as data_layout's `parts`), by name."""
    fields, start = {}, 0
    for name, length in parts:
        fields[name] = vector[start] if length is None else vector[start:start + length]
        start += 1 if length is None else length
    return fields


def build_model(
    data: ModelData, priors: Priors | None = None, *, robust: bool = False, centered: bool = True,
    recipe_centered: bool | None = None, residual_likelihood: str = "exact", starts_centered: bool = False,
) -> pm.Model:
    """The hierarchical ScaleRL model for `data`. Pure construction: no sampling here.

    centered: both partially pooled levels (recipes, runs) centred, else non-centred.
    recipe_centered: the recipe level's form when it differs from `centered` (None: as centered).
    starts_centered: the runs' starts (logit R0) centred; non-centred by default (below). The
        forecaster tries them centred for a flagged fit whose data pin each start down
        (forecaster.start_uncertainty_ratio).
    residual_likelihood: "exact" (the Kalman filter of forecast.wander_filter) or "one-lag" (each
        residual given only the previous noisy one: the model before 2026-12-04, whose run
        asymptote intervals were too narrow; kept for benchmarks/exact_likelihood.py).

    Every data-dependent number is in one of its two pm.Data vectors (data_layout), so a compiled
    model is reused for new data of the same structure (`ModelData.structure_key`).
    """
    # PyMC is imported here, not with the module: reading a saved fit needs this module's data
    # preparation and noise formulas but no model, and importing PyMC takes 5 s
    import pymc as pm
    import pytensor.tensor as pt

    if residual_likelihood not in ("exact", "one-lag"):
        raise ValueError(f"residual_likelihood must be 'exact' or 'one-lag', got {residual_likelihood!r}")
    priors = priors or Priors()
    has_n_eval = data.has_n_eval
    values = data_values(data, priors)
    with pm.Model(coords=data.coords()) as model:
        layout = data_layout(data)
        fields = {}
        for node, parts in layout.items():
            fields.update(unpacked(pm.Data(node, values[node]), parts))
        x, y, weight, prev, has_prev, obs_run = (fields[name] for name in ("x", "y", "weight", "prev", "has_prev", "obs_run"))
        n_eval = fields["n_eval"] if has_n_eval else None
        run_recipe = fields["run_recipe"]
        loc, scale, a_centre, r0_centre = (fields[name] for name in ("loc", "scale", "a_centre", "r0_centre"))

        # recipe level, partially pooled
        a_mu = pm.Normal("a_mu", a_centre, priors.a_mu_sd)
        b_mu = pm.Normal("b_mu", priors.b_mu, priors.b_mu_sd)
        m_mu = pm.Normal("m_mu", priors.m_mu, priors.m_mu_sd)
        if len(data.recipes) > 1:
            # Zero-avoiding Gamma(2, 4/s) priors (mean s/2) on the recipe spreads: with centred
            # recipe effects, a spread near zero is a funnel NUTS cannot enter (divergences on
            # sweeps whose recipes are alike); a few recipes cannot tell 0 from small anyway.
            a_sd = pm.Gamma("a_sd", alpha=2.0, beta=4.0 / priors.a_sd)
            b_sd = pm.Gamma("b_sd", alpha=2.0, beta=4.0 / priors.b_sd)
            m_sd = pm.Gamma("m_sd", alpha=2.0, beta=4.0 / priors.m_sd)
            recipes_centred = centered if recipe_centered is None else recipe_centered
            logit_A_recipe = _hier("logit_A_recipe", a_mu, a_sd, "recipe", recipes_centred)
            b = pt.exp(_hier("log_b", b_mu, b_sd, "recipe", recipes_centred))
            m = _hier("m", m_mu, m_sd, "recipe", recipes_centred)
        else:
            # One recipe: a spread across recipes means nothing, and its redundant scale
            # parameters would only add ridges for the sampler to slide along.
            logit_A_recipe = pm.Deterministic("logit_A_recipe", a_mu[None], dims="recipe")
            b = pt.exp(b_mu)[None]
            m = m_mu[None]

        # run level: seed-to-seed asymptote and start
        # Zero-avoiding too, with the mean of the HalfNormal(a_run_sd) it replaced: a few seeds per
        # recipe cannot tell no spread from a small one, and with the exact residual likelihood a
        # run's asymptote is no longer pinned far tighter than the spread, so a spread near 0 was a
        # funnel (synthetic sweep rng 21: R-hat 1.072 centred, 13 divergences non-centred).
        a_run_sd = pm.Gamma("a_run_sd", alpha=2.0, beta=2.5 / priors.a_run_sd)
        r0_mu = pm.Normal("r0_mu", r0_centre, priors.r0_mu_sd)
        r0_sd = pm.HalfNormal("r0_sd", priors.r0_sd)
        logit_A_run = _hier("logit_A_run", logit_A_recipe[run_recipe], a_run_sd, "run", centered)
        # Non-centred by default: runs of one sweep usually start from the same checkpoint, so the
        # spread of R0 is near zero, exactly where the centred form has its funnel. Centred where
        # each run's evaluations pin its start down more tightly than the starts spread (thousands
        # of graded samples an evaluation): there the z-scores sit on a ridge with the spread.
        logit_R0_run = _hier("logit_R0_run", r0_mu, r0_sd, "run", starts_centered)
        A_run = pm.math.sigmoid(logit_A_run)
        R0_run = pm.math.sigmoid(logit_R0_run)

        # named, interpretable quantities (natural units) for users and for predictions
        pm.Deterministic("A", pm.math.sigmoid(logit_A_recipe), dims="recipe")
        pm.Deterministic("B", b / scale, dims="recipe")
        pm.Deterministic("log_C_mid", loc + scale * m, dims="recipe")
        pm.Deterministic("A_run", A_run, dims="run")
        pm.Deterministic("R0_run", R0_run, dims="run")
        pm.Deterministic("R0", pm.math.sigmoid(r0_mu))

        # noise: binomial evaluation noise (known n_eval) + extra white noise + slow wander
        if has_n_eval:
            # The same HalfNormal(noise_sd) prior, sampled as noise_sd * |z| with z ~ Normal(0, 1):
            # the binomial term is a floor under the white noise, so extra noise of 0 (common: a
            # fixed problem set) fits as well as any value well under the binomial noise, and a
            # HalfNormal sampled in log space then has a long flat left tail that chains cross
            # slowly (a 25-recipe sweep: bulk ESS 89-162, R-hat 1.036 after every retry). The
            # likelihood depends on z only through z**2, so z's posterior is smooth through 0.
            sigma_extra_z = pm.Normal("sigma_extra_z", 0.0, 1.0)
            sigma_extra = pm.Deterministic("sigma_extra", priors.noise_sd * pt.abs(sigma_extra_z))
        else:
            # without n_eval the white noise is all the noise and cannot be near 0: log space is right
            sigma_extra = pm.HalfNormal("sigma_extra", priors.noise_sd_no_n_eval)
        wander_sd = pm.HalfNormal("wander_sd", priors.wander_sd)
        wander_scale = pm.LogNormal("wander_scale", np.log(priors.wander_scale), 0.75)

        mu = sigmoid_curve_pt(x, A_run[obs_run], b[run_recipe][obs_run], m[run_recipe][obs_run], R0_run[obs_run])
        mu_c = pt.clip(mu, 1e-4, 1 - 1e-4)
        white_var = (mu_c * (1 - mu_c) / n_eval if has_n_eval else 0.0) + sigma_extra**2
        white_var = white_var * pt.ones_like(mu)
        resid = y - mu
        if residual_likelihood == "exact":
            phi = wander_correlation(x, x[prev], has_prev, wander_scale)
            nu = priors.student_nu if robust else np.inf
            loglik = residual_loglik(resid, white_var, phi, wander_sd**2, weight, nu)
        else:
            cond_mean, cond_var = residual_process(
                resid[prev], x, x[prev], white_var, white_var[prev], wander_sd, wander_scale, has_prev
            )
            if robust:
                dist = pm.StudentT.dist(nu=priors.student_nu, mu=cond_mean, sigma=pt.sqrt(cond_var))
            else:
                dist = pm.Normal.dist(mu=cond_mean, sigma=pt.sqrt(cond_var))
            loglik = (weight * pm.logp(dist, resid)).sum()
        pm.Potential("metric_loglik", loglik)
    return model
