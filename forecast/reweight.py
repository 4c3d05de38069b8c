"""Fast refits by reweighting an earlier posterior (Pareto-smoothed importance sampling).

While runs are in flight, a refit usually differs from the last one by a few new evaluations.
The new posterior is then close to the old one, and its draws can be had without sampling:

    p(theta | all data)  is proportional to  p(theta | old data) * L_new(theta) / L_old(theta)

so each old draw gets the importance weight L_new / L_old (the likelihood of the grown table over
the likelihood of the old one, both under the same prior). Pareto smoothing (Vehtari et al.,
"Pareto Smoothed Importance Sampling", JMLR 2024) stabilises the largest weights, and its shape
estimate k says when this is trustworthy: k <= 0.7 it is, above it the new data moved the
posterior too far and a real refit is needed (the approach of Buerkner, Gabry and Vehtari's
approximate leave-future-out cross-validation, 2020). The reweighted draws are resampled to an
equally weighted set, so every table of the forecaster works on them unchanged.

The likelihood here is the model's (forecast.model.build_model: metric_loglik, the Kalman filter
of forecast.wander_filter) in numpy over all draws at once, a block of rows at a time; tests check
that the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .curves import sigmoid_curve_log
from .model import ModelData, white_variance
from .wander_filter import filter_in_blocks, wander_correlation

__all__ = ["PARAMETERS", "log_likelihood", "ImportanceUpdate", "importance_update", "systematic_resample"]

# the posterior variables the likelihood needs, in natural units
PARAMETERS = ("A_run", "R0_run", "B", "log_C_mid", "sigma_extra", "wander_sd", "wander_scale")


def log_likelihood(
    params: dict, data: ModelData, *, robust: bool = False, nu: float = 4.0, block_elements: int | None = None
) -> np.ndarray:
    """Log-likelihood of the real observations of `data` under each draw: array (n_draws,).

    params: PARAMETERS as arrays with draws first (A_run (S, runs), B (S, recipes), sigma_extra (S,)...).
    The filter runs over the rows a block at a time (wander_filter.filter_in_blocks; about
    `block_elements` values per draw-by-row array), carrying its state from block to block: the
    same numbers as all rows at once, in memory that does not grow with the number of evaluations.
    """
    has_n_eval = data.has_n_eval
    _, _, loglik = filter_in_blocks(
        lambda rows: _block_terms(params, data, rows, has_n_eval), data.n_obs,  # real observations come first
        params["wander_sd"] ** 2, nu=nu if robust else np.inf, block_elements=block_elements,
    )
    return loglik


def _block_terms(params: dict, data: ModelData, block: np.ndarray, has_n_eval: bool):
    """(residual, white variance, wander correlation phi) of rows `block` under each draw, each
    (n_draws, len(block)): the inputs of the filter, as the model computes them."""
    run = data.obs_run[block]
    recipe = data.run_recipe[run]
    x = data.x[block]
    mu = sigmoid_curve_log(
        data.loc + data.scale * x,
        params["A_run"][:, run], params["B"][:, recipe], params["log_C_mid"][:, recipe], params["R0_run"][:, run],
    )
    n_eval = data.n_eval[block] if has_n_eval else np.zeros(len(block))
    white = white_variance(mu, n_eval, params["sigma_extra"][:, None])
    prev = data.prev[block]
    has_prev = (prev >= 0).astype(float)
    phi = wander_correlation(x, data.x[np.maximum(prev, 0)], has_prev, params["wander_scale"][:, None])
    return data.y[block] - mu, white, phi


def systematic_resample(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices of an equally weighted resample (systematic: the least added noise)."""
    positions = (rng.uniform() + np.arange(len(weights))) / len(weights)
    cumulative = np.cumsum(weights)
    cumulative[-1] = 1.0
    return np.searchsorted(cumulative, positions)


@dataclass
class ImportanceUpdate:
    indices: np.ndarray  # base draws to keep (with repeats), as many as the base had
    pareto_k: float  # shape of the fitted tail of the weights; <= 0.7 is reliable
    efficiency: float  # effective sample size of the weights / number of draws


def importance_update(
    params: dict, base_loglik: np.ndarray, new_data: ModelData, *, robust: bool = False, nu: float = 4.0, rng=None
) -> ImportanceUpdate:
    """Reweight base draws (with their log-likelihood `base_loglik` of the base data) to the
    posterior given `new_data`, which must have the same runs and the same frame."""
    import arviz as az

    log_weights = log_likelihood(params, new_data, robust=robust, nu=nu) - base_loglik
    if np.ptp(log_weights) < 1e-9:  # no news: equal weights, whose tail PSIS cannot fit (it says k = inf)
        return ImportanceUpdate(indices=np.arange(len(log_weights)), pareto_k=0.0, efficiency=1.0)
    smoothed, pareto_k = az.psislw(log_weights - log_weights.max(), 1.0)
    weights = np.exp(smoothed - smoothed.max())
    weights /= weights.sum()
    efficiency = float(1.0 / np.sum(weights**2) / len(weights))
    indices = systematic_resample(weights, np.random.default_rng(rng))
    return ImportanceUpdate(indices=indices, pareto_k=float(pareto_k), efficiency=efficiency)
