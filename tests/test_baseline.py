"""The paper's least-squares baseline (forecast.baseline): its scan over B finds what a brute-force
scan finds, and a long run is fitted without an array of grid x B x evaluations."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from scipy.special import expit

from forecast.baseline import _best_b, fit_run_least_squares
from forecast.curves import sigmoid_curve


def brute_force_best_b(log_c, y, A, log_mid, R0, b_grid):
    """The scan written out over every (A, C_mid, B) triple and evaluation, then the same
    Gauss-Newton steps: what forecast.baseline did before its scan summed over evaluations once."""
    gain = (A - R0)[:, None]
    z = log_c[None, :] - log_mid[:, None]
    pred = R0 + gain[:, :, None] * expit(b_grid[None, :, None] * z[:, None, :])
    b = b_grid[np.argmin(((pred - y) ** 2).sum(-1), axis=1)]
    for _ in range(6):
        s = expit(b[:, None] * z)
        jac = gain * s * (1 - s) * z
        b = np.clip(b + (jac * (y - (R0 + gain * s))).sum(-1) / np.maximum((jac**2).sum(-1), 1e-12), b_grid[0], b_grid[-1])
    return b, ((y - (R0 + gain * expit(b[:, None] * z))) ** 2).sum(-1)


def noisy_run(n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    compute = np.geomspace(200.0, 9e4, n)
    return compute, sigmoid_curve(compute, 0.62, 1.9, 2800.0, 0.3) + rng.normal(0, 0.01, n)


def test_scan_over_b_finds_what_a_brute_force_scan_finds(rng):
    compute, metric = noisy_run(30, rng)
    log_c, R0 = np.log(compute), float(metric[0])
    A, log_mid = (g.ravel() for g in np.meshgrid(np.arange(0.55, 0.8, 0.01), np.linspace(4.0, 12.0, 15), indexing="ij"))
    b_grid = np.geomspace(0.05, 20.0, 60)
    b, sse = _best_b(log_c, metric, A, log_mid, R0, b_grid)
    b_ref, sse_ref = brute_force_best_b(log_c, metric, A, log_mid, R0, b_grid)
    np.testing.assert_allclose(b, b_ref, rtol=1e-9)
    np.testing.assert_allclose(sse, sse_ref, rtol=1e-9)


def test_a_long_run_is_fitted_without_a_grid_by_b_by_evaluations_array(rng):
    # 150 evaluations: the old scan held about 9,000 grid points x 60 B values x 150 evaluations
    # (650 MB); a run logged every few steps has hundreds, and a backtest refits it at every checkpoint
    compute, metric = noisy_run(150, rng)
    tracemalloc.start()
    try:
        fit = fit_run_least_squares(compute, metric)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 150e6, f"peak {peak / 1e6:.0f} MB"
    assert abs(fit["A"] - 0.62) < 0.02 and abs(np.log(fit["C_mid"] / 2800.0)) < 0.3


def test_a_midpoint_up_to_10x_below_or_4x_above_the_fitted_evaluations_is_found():
    """Kills the mutants that narrow the C_mid grid (10x below the fitted range to e-fold, 4x above to
    none): a run fitted from min_compute on, past its midpoint (5x below), and a run seen only to a
    third of its midpoint, got a midpoint at the grid's edge instead of near the truth."""
    compute = np.r_[1.0, np.geomspace(1e3, 1e5, 25)]  # the first evaluation fixes R0; the fit starts at 1e3
    past = fit_run_least_squares(compute, sigmoid_curve(compute, 0.62, 1.0, 200.0, 0.2), min_compute=1e3)
    assert past["n"] == 25 and past["R0"] == pytest.approx(sigmoid_curve(1.0, 0.62, 1.0, 200.0, 0.2))
    assert abs(np.log(past["C_mid"] / 200.0)) < np.log(1.2) and past["A"] == pytest.approx(0.62, abs=0.005)
    compute = np.geomspace(1e3, 1e5, 25)
    early = fit_run_least_squares(compute, sigmoid_curve(compute, 0.62, 1.5, 3e5, 0.2))
    assert abs(np.log(early["C_mid"] / 3e5)) < np.log(1.5)


def test_r0_is_the_first_evaluation_by_compute_and_A_may_lie_below_a_noisy_best():
    """Kills two mutants of fit_run_least_squares: R0 taken as the lowest metric instead of the first
    evaluation (the paper's rule; here a later evaluation dips below it), and an asymptote grid
    starting at the best observed value instead of 0.05 under it (one evaluation 0.03 above a
    plateau of 0.6 then held A at 0.63)."""
    compute = np.geomspace(1e3, 1e5, 25)
    metric = sigmoid_curve(compute, 0.6, 3.0, 3e3, 0.2)
    metric[3] = metric[0] - 0.02  # a dip below the start
    metric[-5] += 0.03  # one lucky evaluation on the plateau
    order = np.random.default_rng(0).permutation(len(compute))  # rows in any order
    fit = fit_run_least_squares(compute[order], metric[order])
    assert fit["R0"] == metric[0]
    assert fit["A"] < metric.max() - 0.02 and fit["A"] == pytest.approx(0.6, abs=0.005)


def test_a_min_compute_that_leaves_one_evaluation_fits_them_all():
    """Kills the mutant that falls back to every evaluation only when min_compute leaves none: a
    curve through one point has no shape, and the baseline's forecast then rested on nothing."""
    compute = np.geomspace(1e3, 1e5, 25)
    fit = fit_run_least_squares(compute, sigmoid_curve(compute, 0.62, 1.5, 1e4, 0.2), min_compute=9e4)
    assert fit["n"] == 25 and abs(np.log(fit["C_mid"] / 1e4)) < np.log(1.5)
