"""The model's residual likelihood (forecast/wander_filter.py: a Kalman filter along each run)
against the dense multivariate normal it must equal, its hand-written gradient against finite
differences, and the filtered wander against the dense Gaussian conditional, on hand-made runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import multivariate_normal, t

from forecast.wander_filter import filter_residuals, innovation_logpdf, kernels, residual_loglik


def two_runs(rng):
    """Residuals of a 7-point and a 3-point run at irregular compute, then one padding row; and
    each row's wander correlation with the row before (0 at a run's first row)."""
    lengths = (7, 3)
    x = np.concatenate([np.sort(rng.uniform(-1, 1, n)) for n in lengths] + [np.zeros(1)])
    has_prev = np.concatenate([np.r_[0.0, np.ones(n - 1)] for n in lengths] + [np.zeros(1)])
    white = rng.uniform(1e-5, 4e-5, len(x))
    resid = rng.normal(0, 0.01, len(x))
    weight = np.r_[np.ones(sum(lengths)), 0.0]
    return lengths, x, has_prev, white, resid, weight


def phi_of(x, has_prev, wander_scale):
    return np.exp(-(x - np.r_[x[0], x[:-1]]) * has_prev / wander_scale) * has_prev


def run_covariance(xs, white, wander_sd, wander_scale):
    return wander_sd**2 * np.exp(-np.abs(xs[:, None] - xs[None, :]) / wander_scale) + np.diag(white)


def dense_loglik(lengths, x, white, resid, wander_sd, wander_scale):
    total, start = 0.0, 0
    for n in lengths:
        span = slice(start, start + n)
        cov = run_covariance(x[span], white[span], wander_sd, wander_scale)
        total += multivariate_normal(np.zeros(n), cov).logpdf(resid[span])
        start += n
    return total


CASES = [(0.006, 0.3), (0.02, 2.0), (0.001, 0.05)]


@pytest.mark.parametrize("wander_sd,wander_scale", CASES)
def test_the_filter_equals_the_dense_gaussian(wander_sd, wander_scale):
    lengths, x, has_prev, white, resid, weight = two_runs(np.random.default_rng(3))
    phi = phi_of(x, has_prev, wander_scale)
    expected = dense_loglik(lengths, x, white, resid, wander_sd, wander_scale)
    numpy_loglik, _, _ = filter_residuals(resid, white, phi, wander_sd**2, weight)
    assert numpy_loglik == pytest.approx(expected, rel=1e-9)
    forward, _ = kernels()
    assert forward(resid, white, phi, wander_sd**2, weight, 0.0) == pytest.approx(expected, rel=1e-9)


def test_the_filter_is_vectorised_over_draws():
    lengths, x, has_prev, white, resid, weight = two_runs(np.random.default_rng(4))
    draws = [(0.006, 0.3), (0.02, 2.0)]
    phi = np.stack([phi_of(x, has_prev, scale) for _, scale in draws])
    wander_var = np.array([[sd**2] for sd, _ in draws])
    loglik, _, _ = filter_residuals(resid[None, :], white[None, :], phi, wander_var, weight)
    for got, (sd, scale) in zip(loglik, draws, strict=True):
        assert got == pytest.approx(dense_loglik(lengths, x, white, resid, sd, scale), rel=1e-9)


def test_the_filtered_wander_is_the_gaussian_conditional_on_the_runs_residuals_so_far():
    lengths, x, has_prev, white, resid, weight = two_runs(np.random.default_rng(6))
    wander_sd, wander_scale = 0.01, 0.4
    _, mean, var = filter_residuals(resid, white, phi_of(x, has_prev, wander_scale), wander_sd**2, weight)
    start = lengths[0]  # the second run: its filter must not remember the first
    for end in range(start + 1, start + lengths[1] + 1):
        xs = x[start:end]
        cov = run_covariance(xs, white[start:end], wander_sd, wander_scale)
        cross = wander_sd**2 * np.exp(-np.abs(xs - xs[-1]) / wander_scale)  # wander at xs[-1] with each residual
        assert mean[end - 1] == pytest.approx(cross @ np.linalg.solve(cov, resid[start:end]), rel=1e-9)
        assert var[end - 1] == pytest.approx(wander_sd**2 - cross @ np.linalg.solve(cov, cross), rel=1e-9)


def test_the_robust_density_is_students_t_and_nears_the_normal_for_many_degrees_of_freedom():
    v, s = np.array([-0.03, 0.0, 0.01]), np.array([1e-4, 2e-4, 4e-4])
    assert innovation_logpdf(v, s, 4.0) == pytest.approx(t.logpdf(v, 4.0, scale=np.sqrt(s)), rel=1e-12)
    assert innovation_logpdf(v, s, 1e7) == pytest.approx(innovation_logpdf(v, s), rel=1e-5)
    lengths, x, has_prev, white, resid, weight = two_runs(np.random.default_rng(3))
    phi = phi_of(x, has_prev, 0.3)
    forward, _ = kernels()
    assert forward(resid, white, phi, 1e-4, weight, 4.0) == pytest.approx(
        filter_residuals(resid, white, phi, 1e-4, weight, nu=4.0)[0], rel=1e-12)


@pytest.mark.parametrize("nu", [0.0, 4.0])
def test_the_reverse_pass_is_the_gradient(nu):
    lengths, x, has_prev, white, resid, weight = two_runs(np.random.default_rng(7))
    phi, wander_var = phi_of(x, has_prev, 0.3), 1e-4
    forward, reverse = kernels()
    inputs = {"resid": resid, "white": white, "phi": phi}

    def loglik(**changed):
        values = {**inputs, "wander_var": wander_var, **changed}
        return forward(values["resid"], values["white"], values["phi"], values["wander_var"], weight, nu)

    d_resid, d_white, d_phi, d_wander_var, d_weight = reverse(resid, white, phi, wander_var, weight, nu)
    typical = {"resid": 0.01, "white": 1e-5, "phi": 1.0}  # steps far above rounding, far below curvature
    for name, analytic in (("resid", d_resid), ("white", d_white), ("phi", d_phi)):
        for i in range(len(x) - 1):  # the padding row: phi and weight 0, nothing depends on it
            step = 1e-6 * max(abs(inputs[name][i]), typical[name])
            up, down = inputs[name].copy(), inputs[name].copy()
            up[i] += step
            down[i] -= step
            numeric = (loglik(**{name: up}) - loglik(**{name: down})) / (2 * step)
            assert analytic[i] == pytest.approx(numeric, rel=1e-5, abs=1e-6), (name, i)
    step = 1e-6 * wander_var
    numeric = (loglik(wander_var=wander_var + step) - loglik(wander_var=wander_var - step)) / (2 * step)
    assert d_wander_var == pytest.approx(numeric, rel=1e-5)
    # the weight's gradient is each row's log density: they add up to the whole
    assert d_weight @ weight == pytest.approx(loglik(), rel=1e-12)


@pytest.mark.parametrize("mode", ["FAST_COMPILE", "NUMBA"])
def test_the_pytensor_op_and_its_gradient_in_python_and_numba(mode):
    pytensor = pytest.importorskip("pytensor")
    pt = pytensor.tensor
    lengths, x, has_prev, white, resid, weight = two_runs(np.random.default_rng(5))
    phi = phi_of(x, has_prev, 0.3)
    r, w, p, q = pt.dvector("r"), pt.dvector("w"), pt.dvector("p"), pt.dscalar("q")
    loglik = residual_loglik(r, w, p, q, pt.as_tensor(weight))
    f = pytensor.function([r, w, p, q], [loglik, *pytensor.grad(loglik, [r, w, p, q])], mode=mode)
    value, *grads = f(resid, white, phi, 0.006**2)
    assert value == pytest.approx(dense_loglik(lengths, x, white, resid, 0.006, 0.3), rel=1e-9)
    expected = kernels()[1](resid, white, phi, 0.006**2, weight, 0.0)[:4]
    for got, want in zip(grads, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=0)


def test_a_runs_forecast_starts_from_the_wander_its_whole_history_implies(fitted, small_sweep):
    # the forecaster's filtered wander at a run's last evaluation, per draw, against the dense
    # Gaussian conditional built here from the run table itself
    from forecast.curves import sigmoid_curve_log
    from forecast.model import white_variance

    run_id = small_sweep["run_id"].iloc[-1]
    rows = small_sweep[small_sweep["run_id"] == run_id].sort_values("compute")
    params = fitted.curve_parameters(run_id=run_id, kind="run")
    wander_sd, wander_scale, sigma_extra = (fitted.draws(name) for name in ("wander_sd", "wander_scale", "sigma_extra"))
    mean, var = fitted._filtered_wander_at_last(fitted.data_.runs.index(run_id), params, sigma_extra[:, None],
                                                wander_sd[:, None], wander_scale[:, None])
    x = fitted.data_.to_x(rows["compute"])
    for i in (0, 7, len(wander_sd) - 1):
        mu = sigmoid_curve_log(np.log(rows["compute"].to_numpy()), params["A"][i], params["B"][i],
                               params["log_C_mid"][i], params["R0"][i])
        cov = run_covariance(x, white_variance(mu, rows["n_eval"].to_numpy(), sigma_extra[i]), wander_sd[i], wander_scale[i])
        cross = wander_sd[i] ** 2 * np.exp(-np.abs(x - x[-1]) / wander_scale[i])
        resid = rows["metric"].to_numpy() - mu
        assert mean[i, 0] == pytest.approx(cross @ np.linalg.solve(cov, resid), rel=1e-6)
        assert var[i, 0] == pytest.approx(wander_sd[i] ** 2 - cross @ np.linalg.solve(cov, cross), rel=1e-6)


@pytest.mark.parametrize("nu", [0.0, 4.0])
def test_the_one_pass_log_likelihood_is_the_forward_passs_to_the_bit(nu):
    # the model's node works out the log-likelihood and its gradients in one pass: its value must be
    # forward()'s exactly, or a fit's draws would move with the change
    from forecast._wander_kernels import forward_and_reverse

    lengths, x, has_prev, white, resid, weight = two_runs(np.random.default_rng(9))
    phi = phi_of(x, has_prev, 0.3)
    forward, reverse = kernels()
    logp, *grads = forward_and_reverse(resid, white, phi, 1e-4, weight, nu)
    assert logp == forward(resid, white, phi, 1e-4, weight, nu)
    for got, want in zip(grads, reverse(resid, white, phi, 1e-4, weight, nu), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["FAST_COMPILE", "NUMBA"])
def test_the_log_likelihood_and_its_gradient_run_the_filter_once(mode):
    # as the sampler asks for them at every step: the filter ran twice (forward, then again inside
    # the reverse pass), about a third of a fast fit's gradient time
    pytensor = pytest.importorskip("pytensor")
    pt = pytensor.tensor
    lengths, x, has_prev, white, resid, weight = two_runs(np.random.default_rng(5))
    r, w, p, q = pt.dvector("r"), pt.dvector("w"), pt.dvector("p"), pt.dscalar("q")
    loglik = residual_loglik(r, w, p, q, pt.as_tensor(weight))
    f = pytensor.function([r, w, p, q], [loglik, *pytensor.grad(loglik, [r, w, p, q])], mode=mode)
    filters = [node for node in f.maker.fgraph.apply_nodes if type(node.op).__module__ == "forecast._wander_kernels"]
    assert len(filters) == 1, filters


@pytest.mark.parametrize("mode", ["FAST_COMPILE", "NUMBA"])
def test_the_models_node_gives_each_input_its_own_gradient(mode):
    # the node's gradients are outputs matched to its inputs by position: one out of place (the
    # white variance's given to the residuals) would still compile and sample, on a wrong posterior
    pytensor = pytest.importorskip("pytensor")
    pt = pytensor.tensor
    lengths, x, has_prev, white, resid, weight = two_runs(np.random.default_rng(11))
    phi, wander_var = phi_of(x, has_prev, 0.3), 1e-4
    r, w, p, q, wt = pt.dvector("r"), pt.dvector("w"), pt.dvector("p"), pt.dscalar("q"), pt.dvector("wt")
    loglik = 2.0 * residual_loglik(r, w, p, q, wt, nu=4.0)  # a factor that the chain rule must carry
    f = pytensor.function([r, w, p, q, wt], [loglik, *pytensor.grad(loglik, [r, w, p, q, wt])], mode=mode)
    value, *grads = f(resid, white, phi, wander_var, weight)
    forward, reverse = kernels()
    assert value == pytest.approx(2.0 * forward(resid, white, phi, wander_var, weight, 4.0), rel=1e-12)
    for got, want in zip(grads, reverse(resid, white, phi, wander_var, weight, 4.0), strict=True):
        np.testing.assert_allclose(got, 2.0 * np.asarray(want), rtol=1e-12)


def plain_python_filter(resid, white, phi, q, weight):
    """The normal likelihood's filter and its reverse pass in plain Python floats, one operation at
    a time in the kernel's order: (log-likelihood, d_resid, d_white, d_phi, d_q, per-row log densities)."""
    n, m, p, total_logp = len(resid), 0.0, q, 0.0
    kept, row_logp = [], []
    for row in range(n):
        ph = float(phi[row])
        predicted = ph * ph * p + q * (1 - ph * ph)
        total = predicted + float(white[row])
        v = float(resid[row]) - ph * m
        row_logp.append(-0.5 * (math.log(2 * math.pi * total) + v * v / total))
        if weight[row] != 0:
            total_logp += float(weight[row]) * row_logp[-1]
        kept.append((m, p, predicted, total, v, -v / total, -0.5 / total + 0.5 * v * v / (total * total)))
        m = ph * m + predicted / total * v
        p = predicted * float(white[row]) / total
    d_resid, d_white, d_phi = [0.0] * n, [0.0] * n, [0.0] * n
    d_q, d_m, d_p = 0.0, 0.0, 0.0
    for row in range(n - 1, -1, -1):
        m0, p0, predicted, total, v, dv, ds = kept[row]
        ph, w, wt = float(phi[row]), float(white[row]), float(weight[row])
        gain = predicted / total
        d_v = wt * dv + d_m * gain
        d_total = wt * ds
        d_gain = d_m * v
        d_phi_t = d_m * m0
        d_m0 = d_m * ph
        d_predicted = d_p * w / total
        d_w = d_p * predicted / total
        d_total += -d_p * predicted * w / (total * total)
        d_predicted += d_gain / total
        d_total += -d_gain * predicted / (total * total)
        d_resid[row] = d_v
        d_phi_t += -d_v * m0
        d_m0 += -d_v * ph
        d_predicted += d_total
        d_w += d_total
        d_phi_t += d_predicted * 2 * ph * (p0 - q)
        d_p0 = d_predicted * ph * ph
        d_q += d_predicted * (1 - ph * ph)
        d_white[row], d_phi[row] = d_w, d_phi_t
        d_m, d_p = d_m0, d_p0
    return total_logp, d_resid, d_white, d_phi, d_q + d_p, row_logp


def test_the_kernel_is_the_plain_filter_to_the_bit():
    # a fit's draws are the same for a seed only while the kernel does these operations in this
    # order: a faster kernel (fastmath, fused multiply-adds, sums reordered, runs interleaved) must
    # still give each of these numbers to the bit, which forward() against the one-pass kernel
    # (both changed together) would not notice
    from forecast._wander_kernels import forward_and_reverse

    rng = np.random.default_rng(13)
    lengths = (40, 3, 65, 1, 27)  # rows enough that a reordered operation shows in some last digit
    x = np.concatenate([np.sort(rng.uniform(-1, 1, n)) for n in lengths] + [np.zeros(2)])
    has_prev = np.concatenate([np.r_[0.0, np.ones(n - 1)] for n in lengths] + [np.zeros(2)])
    white, resid = rng.uniform(1e-5, 4e-5, len(x)), rng.normal(0, 0.01, len(x))
    weight = np.r_[np.ones(sum(lengths)), 0.0, 0.0]
    phi = phi_of(x, has_prev, 0.3)
    expected = plain_python_filter(resid, white, phi, 1e-4, weight)
    logp, d_resid, d_white, d_phi, d_q, d_weight = forward_and_reverse(resid, white, phi, 1e-4, weight, 0.0)
    assert logp == expected[0] and kernels()[0](resid, white, phi, 1e-4, weight, 0.0) == expected[0]
    assert d_q == expected[4]
    for got, want in zip((d_resid, d_white, d_phi, d_weight), expected[1:4] + expected[5:], strict=True):
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes()


def test_the_wander_correlation_decays_with_the_step_in_compute_and_is_0_at_a_runs_first_row():
    """Kills the mutant exp(+dx / wander_scale) in wander_correlation, which the model and reweighting
    both use (so their agreement could not catch it) and this file's tests, which make their own phi,
    did not: a correlation above 1, a predicted variance below the wander's. Known answers: a step of
    0.3 at wander_scale 0.15 is e^-2; a run's first row is 0 however far it lies from the row before."""
    from forecast.wander_filter import wander_correlation

    x, x_prev, has_prev = np.array([-1.0, -0.7, 0.0, 5.0]), np.array([0.9, -1.0, -0.7, -1000.0]), np.array([0.0, 1, 1, 0])
    np.testing.assert_allclose(wander_correlation(x, x_prev, has_prev, 0.15), [0.0, np.exp(-2.0), np.exp(-0.7 / 0.15), 0.0])


def test_the_one_lag_likelihood_conditions_on_the_previous_residual_as_a_gaussian_does():
    """Kills the mutant var_here + cov^2 / var_prev in model.residual_process (the one-lag likelihood
    benchmarks/exact_likelihood.py compares the filter with): conditioning on the previous residual
    must narrow the variance, not widen it. Wander sd 0.1, correlation 0.5 (a step of ln 2 at
    wander_scale 1), white variance 0.01 at both rows: the 2x2 Gaussian gives mean 0.25 r_prev and
    variance 0.02 - 0.005^2 / 0.02 = 0.01875; a run's first row, mean 0 and variance 0.02."""
    from forecast.model import residual_process

    mean, var = residual_process(np.array([0.04, 0.04]), np.array([np.log(2), 0.3]), np.array([0.0, 0.0]),
                                 0.01, 0.01, 0.1, 1.0, np.array([1.0, 0.0]))
    np.testing.assert_allclose(mean, [0.01, 0.0], atol=1e-15)
    np.testing.assert_allclose(var, [0.01875, 0.02], rtol=1e-12)


def test_the_one_lag_likelihood_at_a_runs_first_row_is_finite_whatever_row_it_is_clamped_to():
    """A run's first row is conditioned on nothing (has_prev 0), but its `prev` is clamped to row 0, another
    run's, which can lie far later in compute: exp(-(x - x_prev) / wander_scale) overflowed to inf before
    has_prev zeroed it, and inf * 0 made the row's mean and variance NaN at a small wander_scale (the exact
    likelihood's wander_correlation already zeroed the step first)."""
    from forecast.model import residual_process

    with np.errstate(over="raise", invalid="raise"):
        mean, var = residual_process(np.array([0.04]), np.array([-3.0]), np.array([5.0]), 0.01, 0.01, 0.1, 0.001,
                                     np.array([0.0]))
    np.testing.assert_allclose(mean, [0.0], atol=0)
    np.testing.assert_allclose(var, [0.02], rtol=1e-12)
