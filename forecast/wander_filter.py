"""The exact likelihood of a run's residuals around its curve: slow wander plus white noise.

A residual (metric minus curve) is the run's wander, an Ornstein-Uhlenbeck process in
log-compute (stationary variance q, correlation phi = exp(-dx / wander_scale) from one evaluation
to the next), plus white evaluation noise of variance w_t. Its exact Gaussian likelihood is a
scalar Kalman filter along each run:

    predicted variance  V_t = phi_t^2 P_{t-1} + q (1 - phi_t^2)
    innovation          v_t = r_t - phi_t m_{t-1},   variance S_t = V_t + w_t
    log-likelihood      log N(v_t; 0, S_t)            (Student-t of scale sqrt(S_t) if robust)
    filtered wander     m_t = phi_t m_{t-1} + (V_t / S_t) v_t,   P_t = V_t w_t / S_t

Runs lie one after another; a run's first evaluation has phi = 0 (it forgets the previous run),
so one pass covers a whole sweep. Scoring each residual given only the previous *noisy* one, as
the model did before, makes each run's asymptote interval about 1.5x too narrow
(benchmarks/RESULTS.md, "Each run's own asymptote"); this is the fix.

Three users, one recursion: the model's likelihood (a PyTensor Op whose gradient is the filter's
hand-written reverse pass, compiled by Numba: a prefix-scan graph of the same filter took 90 s to
compile, this takes seconds), reweighting (numpy, all posterior draws at once) and predictions
from a run's last evaluation (the filtered wander there, not the last noisy residual).
"""

from __future__ import annotations

import math
import sys

import numpy as np
from scipy.special import gammaln

__all__ = ["BLOCK_ELEMENTS", "filter_block", "filter_in_blocks", "filter_residuals", "filter_start", "innovation_logpdf", "residual_loglik", "wander_correlation"]


def array_module_of(value):
    """pytensor.tensor for a symbolic value, numpy otherwise. Looked up without importing PyTensor
    (1.6 s): if it has not been imported, no value can be one of its tensors."""
    tensor = sys.modules.get("pytensor.tensor")
    if tensor is not None and isinstance(value, tensor.variable.TensorVariable):
        return tensor
    return np


def wander_correlation(x, x_prev, has_prev, wander_scale):
    """phi: the wander's correlation with the previous evaluation of the same run, exp(-dx /
    wander_scale), and 0 at a run's first evaluation (has_prev 0). dx is zeroed there first, so
    exp() cannot overflow to inf before has_prev zeroes it (inf * 0 is NaN). Numpy or PyTensor."""
    exponent = -(x - x_prev) * has_prev / wander_scale  # symbolic if any input is
    return array_module_of(exponent).exp(exponent) * has_prev


def innovation_logpdf(v, s, nu: float = math.inf):
    """Log density of innovations v of variance s: normal, or Student-t (nu degrees of freedom)
    of scale sqrt(s) when nu is finite."""
    if math.isinf(nu):
        return -0.5 * (np.log(2 * np.pi * s) + v**2 / s)
    const = gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * np.log(nu * np.pi)
    return const - 0.5 * np.log(s) - (nu + 1) / 2 * np.log1p(v**2 / (nu * s))


def filter_residuals(resid, white, phi, wander_var, weight=None, nu: float = math.inf):
    """The filter over the last axis, vectorised over any leading ones (posterior draws).

    resid, white, phi: (..., n); wander_var: broadcastable to (...,) + (1,).
    Returns (log-likelihood (...,), filtered wander mean (..., n), its variance (..., n)).
    """
    resid, white, phi = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (resid, white, phi)))
    q = np.broadcast_to(np.asarray(wander_var, dtype=float), resid.shape[:-1] + (1,))[..., 0]
    weight = np.ones(resid.shape[-1]) if weight is None else np.asarray(weight, dtype=float)
    mean, var = np.empty(resid.shape), np.empty(resid.shape)
    _, _, loglik = filter_block(resid, white, phi, q, weight, filter_start(q), nu=nu, mean=mean, var=var)
    return loglik, mean, var


def filter_start(q):
    """The filter's state (wander mean m, its variance p, log-likelihood so far) before the first
    row, for wander variance q of shape (...,): a run's first row resets it anyway (phi = 0)."""
    q = np.asarray(q, dtype=float)
    return np.zeros(q.shape), q.copy(), np.zeros(q.shape)


def filter_block(resid, white, phi, q, weight, state, nu: float = math.inf, mean=None, var=None):
    """Advance the filter from `state` (filter_start's, or the one a previous block returned) over
    the last axis of one block of rows; returns the state after it. A table taken block by block
    gives the log-likelihood of the whole table at once to the bit (the same operations in the
    same order), holding only one block's per-draw arrays. Writes the filtered wander into
    `mean` and `var` where given (arrays shaped like resid).

    resid, white, phi: (..., rows); q: (...,); weight: (rows,).
    """
    m, p, loglik = state
    for t in range(resid.shape[-1]):
        ph = phi[..., t]
        predicted = ph**2 * p + q * (1 - ph**2)
        total = predicted + white[..., t]
        innovation = resid[..., t] - ph * m
        if weight[t] != 0:
            loglik = loglik + weight[t] * innovation_logpdf(innovation, total, nu)
        m = ph * m + predicted / total * innovation
        p = predicted * white[..., t] / total
        if mean is not None:
            mean[..., t], var[..., t] = m, p
    return m, p, loglik


# Per-draw, per-row values the filter holds at once when it runs over rows in blocks
# (filter_in_blocks): each array of a block is this many float64s (512 kB, which stays in cache:
# blocks 16x larger took 1.5x as long). All rows at once held about ten arrays of draws x rows,
# 0.9 GB for refit()'s reweighting of a fast fit (600 draws) of 8 runs x 3000 evaluations
# (benchmarks/fit_speed.py --long).
BLOCK_ELEMENTS = 2**16


def filter_in_blocks(block_terms, n_rows: int, q, *, nu: float = math.inf, score: bool = True, block_elements=None):
    """The filter's final state (m, p, log-likelihood), each (n_draws,), over rows 0..n_rows-1
    taken a block at a time: block_terms(rows), for an index array of rows, gives their (resid,
    white, phi), each (n_draws, len(rows)). A block holds about `block_elements` (default
    BLOCK_ELEMENTS) values per array, at least one row, so memory does not grow with the number
    of rows. score=False skips the log-likelihood (left 0) for callers that want the wander alone.
    """
    q = np.asarray(q, dtype=float)
    per_block = max(1, (block_elements or BLOCK_ELEMENTS) // max(q.size, 1))
    state = filter_start(q)
    for start in range(0, n_rows, per_block):
        rows = np.arange(start, min(start + per_block, n_rows))
        resid, white, phi = block_terms(rows)
        weight = np.ones(len(rows)) if score else np.zeros(len(rows))
        state = filter_block(resid, white, phi, q, weight, state, nu=nu)
    return state


# ---------------------------------------------------------------- the model's Op (Numba kernels)

def kernels():
    """The Numba forward and reverse passes (forecast/_wander_kernels.py), compiled on first use."""
    from ._wander_kernels import forward, reverse

    return forward, reverse


def residual_loglik(resid, white, phi, wander_var, weight, nu: float = math.inf):
    """The filter's log-likelihood as a PyTensor scalar, for the model (nu: Student-t degrees of
    freedom, inf for normal). Its node's other outputs are the gradients that differentiating it
    reads, worked out in the same pass."""
    from ._wander_kernels import ResidualLoglik

    return ResidualLoglik(0.0 if math.isinf(nu) else nu)(resid, white, phi, wander_var, weight)[0]
