"""Pure ScaleRL curve functions: numbers in, numbers out (numpy), plus PyTensor twins.

The curve (ScaleRL, Khatri et al. 2025):

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)
         = R0 + (A - R0) * sigmoid(B * (log C - log C_mid))

A is the asymptote, B the exponent (steepness in log-compute), C_mid the compute at which half
of the gain A - R0 is reached, R0 the pass rate at zero RL compute. Nothing here knows about
PyMC: these functions are tested on numbers and reused by the model, the baseline and plots.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.special import expit

__all__ = [
    "sigmoid_curve",
    "sigmoid_curve_log",
    "compute_to_target",
    "target_reachable",
    "sigmoid_curve_pt",
]


def sigmoid_curve_log(log_compute, A, B, log_c_mid, R0):
    """The curve as a function of log-compute (numerically safer than powers of C)."""
    return R0 + (A - R0) * expit(B * (np.asarray(log_compute) - log_c_mid))


def sigmoid_curve(compute, A, B, C_mid, R0):
    """R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B). Broadcasts over all arguments."""
    compute = np.asarray(compute, dtype=float)
    if np.any(compute <= 0):
        raise ValueError("compute must be > 0")
    return sigmoid_curve_log(np.log(compute), A, B, np.log(C_mid), R0)


def target_reachable(target, A, R0):
    """True where the curve ever reaches `target`: R0 < target < A (a rising curve)."""
    A = np.asarray(A, dtype=float)
    R0 = np.asarray(R0, dtype=float)
    return (R0 < target) & (target < A)


def compute_to_target(target, A, B, C_mid, R0):
    """Compute needed to reach `target`: C* = C_mid * ((A - R0) / (target - R0) - 1)^(-1/B).

    Where the target is never reached (target <= R0 means it is reached at C -> 0 and is
    returned as 0, also on a falling curve; otherwise target >= A means never, returned as +inf) the answer is explicit rather
    than NaN, so quantiles over posterior draws stay meaningful. A NaN parameter gives NaN, and a
    target that is not a number (a string, None, a bool, NaN) a ValueError: a NaN target came back
    as +inf, "never", and "0.6" as numpy's TypeError.
    """
    if isinstance(target, (bool, np.bool_)) or not isinstance(target, numbers.Real) or np.isnan(target):
        raise ValueError(f"target must be a number, got {target!r}")
    A, B, C_mid, R0 = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (A, B, C_mid, R0)))
    out = np.full(A.shape, np.inf)
    already = target <= R0
    ok = target_reachable(target, A, R0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (A - R0) / (target - R0) - 1.0
        log_c = np.log(C_mid) - np.log(ratio) / B
    out[ok] = np.exp(log_c[ok])
    out[already] = 0.0  # at or above the target from the start, a falling curve (A < R0) included
    out[np.isnan(A) | np.isnan(B) | np.isnan(C_mid) | np.isnan(R0)] = np.nan  # not "never": unknown
    return out if out.ndim else float(out)


def sigmoid_curve_pt(x, A, b, x_mid, R0):
    """PyTensor twin of `sigmoid_curve_log` in normalised log-compute x (slope b = B * scale)."""
    import pytensor.tensor as pt

    return R0 + (A - R0) * pt.sigmoid(b * (x - x_mid))
