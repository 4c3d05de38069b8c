"""The exact residual likelihood benchmarked in benchmarks/exact_likelihood.py (a Kalman filter
written as a prefix scan) against the dense multivariate normal it must equal, on hand-made runs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import benchmark_module
from scipy.stats import multivariate_normal


@pytest.fixture(scope="module")
def bench():
    with benchmark_module("exact_likelihood.py") as module:
        yield module


def two_runs(rng):
    """Residuals of a 7-point and a 3-point run, irregular compute, and one padding row."""
    lengths = (7, 3)
    x = np.concatenate([np.sort(rng.uniform(-1, 1, n)) for n in lengths] + [np.zeros(1)])
    has_prev = np.concatenate([np.r_[0.0, np.ones(n - 1)] for n in lengths] + [np.zeros(1)])
    x_prev = np.r_[x[0], x[:-1]]
    white = rng.uniform(1e-5, 4e-5, len(x))
    resid = rng.normal(0, 0.01, len(x))
    weight = np.r_[np.ones(sum(lengths)), 0.0]
    return lengths, x, x_prev, has_prev, white, resid, weight


def dense_loglik(lengths, x, white, resid, wander_sd, wander_scale):
    total, start = 0.0, 0
    for n in lengths:
        xs = x[start:start + n]
        cov = wander_sd**2 * np.exp(-np.abs(xs[:, None] - xs[None, :]) / wander_scale) + np.diag(white[start:start + n])
        total += multivariate_normal(np.zeros(n), cov).logpdf(resid[start:start + n])
        start += n
    return total


@pytest.mark.parametrize("wander_sd,wander_scale", [(0.006, 0.3), (0.02, 2.0), (0.001, 0.05)])
def test_prefix_scan_equals_the_dense_gaussian(bench, wander_sd, wander_scale):
    lengths, x, x_prev, has_prev, white, resid, weight = two_runs(np.random.default_rng(3))
    got = bench.exact_residual_loglik(np, resid, x, x_prev, has_prev, white, wander_sd, wander_scale, weight, span=7)
    assert got == pytest.approx(dense_loglik(lengths, x, white, resid, wander_sd, wander_scale), rel=1e-9)


def test_a_span_shorter_than_the_longest_run_is_not_exact(bench):
    # the scan looks back 2^steps observations; too few steps lose the start of the 7-point run
    lengths, x, x_prev, has_prev, white, resid, weight = two_runs(np.random.default_rng(3))
    exact = dense_loglik(lengths, x, white, resid, 0.02, 2.0)
    short = bench.exact_residual_loglik(np, resid, x, x_prev, has_prev, white, 0.02, 2.0, weight, span=2)
    assert short != pytest.approx(exact, rel=1e-6)


def test_the_pytensor_graph_computes_the_same(bench):
    pt = pytest.importorskip("pytensor.tensor")
    lengths, x, x_prev, has_prev, white, resid, weight = two_runs(np.random.default_rng(5))
    graph = bench.exact_residual_loglik(pt, pt.as_tensor(resid), pt.as_tensor(x), pt.as_tensor(x_prev),
                                        pt.as_tensor(has_prev), pt.as_tensor(white), 0.006, 0.3,
                                        pt.as_tensor(weight), span=7)
    assert float(graph.eval()) == pytest.approx(dense_loglik(lengths, x, white, resid, 0.006, 0.3), rel=1e-9)
