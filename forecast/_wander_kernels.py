"""The model's side of forecast.wander_filter: the filter's log-likelihood and its reverse pass
as Numba kernels, and the PyTensor Op that runs them (in Numba under nutpie, from Python under
PyMC's own sampler).

A module of its own, imported only when the model is built: Numba and PyTensor take seconds to
import. Everything is at module level so that Numba can cache its machine code between processes
and the Op can be pickled (PyMC's sampler sends the model to worker processes).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph import Apply, Op
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key


@numba.njit(cache=True, fastmath=False)
def terms(v, s, nu):
    """(log density, d/dv, d/ds) of an innovation; nu <= 0 means normal."""
    if nu <= 0:
        return -0.5 * (math.log(2 * math.pi * s) + v * v / s), -v / s, -0.5 / s + 0.5 * v * v / (s * s)
    const = math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2) - 0.5 * math.log(nu * math.pi)
    logp = const - 0.5 * math.log(s) - (nu + 1) / 2 * math.log1p(v * v / (nu * s))
    denominator = nu * s + v * v
    return logp, -(nu + 1) * v / denominator, -0.5 / s + 0.5 * (nu + 1) * v * v / (s * denominator)


@numba.njit(cache=True, fastmath=False)
def forward(resid, white, phi, q, weight, nu):
    m, p, total_logp = 0.0, q, 0.0
    for t in range(resid.shape[0]):
        ph = phi[t]
        predicted = ph * ph * p + q * (1 - ph * ph)
        total = predicted + white[t]
        innovation = resid[t] - ph * m
        if weight[t] != 0:
            total_logp += weight[t] * terms(innovation, total, nu)[0]
        m = ph * m + predicted / total * innovation
        p = predicted * white[t] / total
    return total_logp


@numba.njit(cache=True, fastmath=False)
def forward_and_reverse(resid, white, phi, q, weight, nu):
    """forward()'s log-likelihood and its gradients with respect to resid, white, phi, q and
    weight, in one pass along the rows and one back. The sampler needs both at every step: run
    as forward() then reverse(), the filter went along the rows twice (about a third of a fast
    fit's gradient time). The same operations in the same order as forward(), so the value is
    forward()'s to the bit; the backward pass reads what the forward one kept."""
    n = resid.shape[0]
    m_before, p_before = np.empty(n), np.empty(n)  # the state each step starts from
    predicted_at, total_at, innovation_at = np.empty(n), np.empty(n), np.empty(n)
    d_weight, dlogp_dv_at, dlogp_ds_at = np.empty(n), np.empty(n), np.empty(n)
    m, p, total_logp = 0.0, q, 0.0
    for t in range(n):
        m_before[t], p_before[t] = m, p
        ph = phi[t]
        predicted = ph * ph * p + q * (1 - ph * ph)
        total = predicted + white[t]
        innovation = resid[t] - ph * m
        logp, dlogp_dv, dlogp_ds = terms(innovation, total, nu)
        if weight[t] != 0:
            total_logp += weight[t] * logp
        predicted_at[t], total_at[t], innovation_at[t] = predicted, total, innovation
        d_weight[t], dlogp_dv_at[t], dlogp_ds_at[t] = logp, dlogp_dv, dlogp_ds
        m = ph * m + predicted / total * innovation
        p = predicted * white[t] / total
    d_resid, d_white, d_phi = np.empty(n), np.empty(n), np.empty(n)
    d_q = 0.0
    d_m, d_p = 0.0, 0.0  # adjoints of the state a step leaves behind
    for t in range(n - 1, -1, -1):
        ph, w, m0, p0 = phi[t], white[t], m_before[t], p_before[t]
        predicted, total, innovation = predicted_at[t], total_at[t], innovation_at[t]
        gain = predicted / total
        d_innovation = weight[t] * dlogp_dv_at[t] + d_m * gain  # from the log density and m = ph m0 + gain v
        d_total = weight[t] * dlogp_ds_at[t]
        d_gain = d_m * innovation
        d_phi_t = d_m * m0
        d_m0 = d_m * ph
        # p = predicted w / total
        d_predicted = d_p * w / total
        d_w = d_p * predicted / total
        d_total += -d_p * predicted * w / (total * total)
        # gain = predicted / total
        d_predicted += d_gain / total
        d_total += -d_gain * predicted / (total * total)
        # innovation = r - ph m0
        d_resid[t] = d_innovation
        d_phi_t += -d_innovation * m0
        d_m0 += -d_innovation * ph
        # total = predicted + w
        d_predicted += d_total
        d_w += d_total
        # predicted = ph^2 p0 + q (1 - ph^2)
        d_phi_t += d_predicted * 2 * ph * (p0 - q)
        d_p0 = d_predicted * ph * ph
        d_q += d_predicted * (1 - ph * ph)
        d_white[t], d_phi[t] = d_w, d_phi_t
        d_m, d_p = d_m0, d_p0
    d_q += d_p  # the first step starts from p = q
    return total_logp, d_resid, d_white, d_phi, d_q, d_weight


@numba.njit(cache=True, fastmath=False)
def reverse(resid, white, phi, q, weight, nu):
    """Gradients of forward() with respect to resid, white, phi, q and weight."""
    _, d_resid, d_white, d_phi, d_q, d_weight = forward_and_reverse(resid, white, phi, q, weight, nu)
    return d_resid, d_white, d_phi, d_q, d_weight


class ResidualLoglik(Op):
    """Log-likelihood of residuals (resid, white variance, phi, wander variance q, weight), and as
    further outputs its gradients with respect to each input: one node works out both, once."""

    __props__ = ("nu",)

    def __init__(self, nu: float):
        self.nu = float(nu)  # <= 0: normal

    def make_node(self, resid, white, phi, q, weight):
        inputs = [pt.as_tensor_variable(a, dtype="float64") for a in (resid, white, phi, q, weight)]
        outputs = [pt.dscalar(), pt.dvector(), pt.dvector(), pt.dvector(), pt.dscalar(), pt.dvector()]
        return Apply(self, inputs, outputs)

    def perform(self, node, inputs, output_storage):
        resid, white, phi, q, weight = inputs
        values = forward_and_reverse(resid, white, phi, float(q), weight, self.nu)
        for storage, value in zip(output_storage, values, strict=True):
            storage[0] = np.asarray(value, dtype=float)

    def L_op(self, inputs, outputs, output_grads):
        if any(not isinstance(g.type, DisconnectedType) for g in output_grads[1:]):
            raise NotImplementedError("the filter's gradients have no gradient of their own here (no second derivatives)")
        return [output_grads[0] * d for d in outputs[1:]]


@register_funcify_default_op_cache_key(ResidualLoglik)
def _numba_loglik(op, node, **kwargs):
    nu = op.nu

    @numba.njit
    def loglik_and_grad(resid, white, phi, q, weight):
        logp, d_resid, d_white, d_phi, d_q, d_weight = forward_and_reverse(resid, white, phi, q.item(), weight, nu)
        return np.array(logp), d_resid, d_white, d_phi, np.array(d_q), d_weight

    return loglik_and_grad
