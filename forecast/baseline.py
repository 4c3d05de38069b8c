"""The paper's least-squares fit (ScaleRL, section on fitting), as a baseline and for users who
want the paper's numbers.

Per run: R0 is fixed at the run's first evaluation; a grid over A (step 0.005) and 100 values of
C_mid (log-spaced); at each grid point B is fitted by least squares; the grid point with the least
squared error wins. Point estimates only, as in the paper.

The paper's grid (A in [0.450, 0.800], C_mid in [100, 40000] GPU-hours) assumes its own scale, so
the grids here are set from each run's data: A from just above the best observed value minus a
margin up to 1, C_mid over the observed compute range widened by 10x below and 4x above. The inner
fit of B runs vectorised over the whole grid (a log-spaced scan followed by Gauss-Newton steps),
which finds the same minimum as scipy's curve_fit per grid point, thousands of times faster.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit

from .curves import sigmoid_curve

__all__ = ["fit_run_least_squares", "fit_least_squares", "predict_least_squares"]


def _best_b(log_c, y, A, log_mid, R0, b_grid):
    """Least-squares B for every (A, log C_mid) grid point at once. Shapes: A, log_mid (G,)."""
    # The scan over b_grid: the squared error of R0 + gain * s against y is
    # sum (R0 - y)^2 + 2 gain sum (R0 - y) s + gain^2 sum s^2, and s depends on C_mid and B but not
    # on A. So the sums over evaluations are taken once per (C_mid, B) pair rather than per
    # (A, C_mid, B) triple: an array of grid x b_grid x evaluations took 3.4 GB and 6 s for one
    # run of 400 evaluations, and a backtest fits every run at every checkpoint.
    mids, mid_of = np.unique(log_mid, return_inverse=True)
    s_scan = expit(b_grid[None, :, None] * (log_c[None, None, :] - mids[:, None, None]))  # (M,Bg,N)
    r0_minus_y = R0 - y
    cross, square = s_scan @ r0_minus_y, (s_scan**2).sum(-1)  # (M,Bg) each
    gain = A - R0  # (G,)
    sse = (r0_minus_y**2).sum() + 2 * gain[:, None] * cross[mid_of] + gain[:, None] ** 2 * square[mid_of]  # (G,Bg)
    b = b_grid[np.argmin(sse, axis=1)]  # (G,)
    z = log_c[None, :] - log_mid[:, None]  # (G,N)
    gain = gain[:, None]
    for _ in range(6):  # Gauss-Newton refinement of B
        s = expit(b[:, None] * z)
        resid = y - (R0 + gain * s)
        jac = gain * s * (1 - s) * z
        step = (jac * resid).sum(-1) / np.maximum((jac**2).sum(-1), 1e-12)
        b = np.clip(b + step, b_grid[0], b_grid[-1])
    s = expit(b[:, None] * z)
    sse = ((y - (R0 + gain * s)) ** 2).sum(-1)
    return b, sse


def fit_run_least_squares(compute, metric, *, min_compute=None, a_step=0.005, n_mid=100) -> dict:
    """Fit one run. Returns {A, B, C_mid, R0, sse, n}."""
    compute = np.asarray(compute, dtype=float)
    metric = np.asarray(metric, dtype=float)
    order = np.argsort(compute)
    compute, metric = compute[order], metric[order]
    R0 = float(metric[0])
    keep = compute >= min_compute if min_compute is not None else np.ones(len(compute), bool)
    if keep.sum() < 2:
        keep[:] = True
    log_c, y = np.log(compute[keep]), metric[keep]
    a_lo = max(R0 + a_step, float(y.max()) - 0.05)
    a_grid = np.arange(a_lo, 1.0 + 1e-9, a_step)
    if len(a_grid) == 0:
        a_grid = np.array([min(1.0, R0 + a_step)])
    mid_grid = np.linspace(log_c.min() - np.log(10), log_c.max() + np.log(4), n_mid)
    A, log_mid = (g.ravel() for g in np.meshgrid(a_grid, mid_grid, indexing="ij"))
    b_grid = np.geomspace(0.05, 20.0, 60)
    b, sse = _best_b(log_c, y, A, log_mid, R0, b_grid)
    best = int(np.argmin(sse))
    return {"A": float(A[best]), "B": float(b[best]), "C_mid": float(np.exp(log_mid[best])), "R0": R0, "sse": float(sse[best]), "n": int(keep.sum())}


def fit_least_squares(runs: pd.DataFrame, **kwargs) -> pd.DataFrame:
    """Fit every run of a validated run table; one row per run."""
    rows = []
    for run_id, run in runs.groupby("run_id", sort=False):
        fit = fit_run_least_squares(run["compute"], run["metric"], **kwargs)
        rows.append({"run_id": run_id, "recipe": run["recipe"].iloc[0], **fit})
    return pd.DataFrame(rows)


def predict_least_squares(params: pd.DataFrame | dict, compute) -> np.ndarray:
    """Point forecast at `compute` for one fitted run (a row of fit_least_squares or its dict)."""
    p = params if isinstance(params, dict) else params.to_dict()
    return sigmoid_curve(compute, p["A"], p["B"], p["C_mid"], p["R0"])
