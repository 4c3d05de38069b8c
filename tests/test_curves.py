import numpy as np
import pytest

from forecast.curves import compute_to_target, sigmoid_curve, sigmoid_curve_log, target_reachable


def test_midpoint_gives_half_the_gain():
    assert sigmoid_curve(2542.0, A=0.61, B=1.92, C_mid=2542.0, R0=0.3) == pytest.approx(0.455)


def test_limits_are_r0_and_a():
    assert sigmoid_curve(1e-9, 0.61, 1.92, 2542.0, 0.3) == pytest.approx(0.3, abs=1e-6)
    assert sigmoid_curve(1e15, 0.61, 1.92, 2542.0, 0.3) == pytest.approx(0.61, abs=1e-6)


def test_power_law_tail_matches_the_paper_formula():
    # For C >> C_mid: A - R ~ (A - R0) (C_mid / C)^B
    c = 1e6
    r = sigmoid_curve(c, 0.6, 1.5, 1000.0, 0.2)
    assert 0.6 - r == pytest.approx(0.4 * (1000.0 / c) ** 1.5, rel=1e-3)


def test_log_form_equals_power_form():
    c = np.geomspace(10, 1e6, 20)
    a = sigmoid_curve(c, 0.7, 1.3, 5000.0, 0.1)
    b = sigmoid_curve_log(np.log(c), 0.7, 1.3, np.log(5000.0), 0.1)
    np.testing.assert_allclose(a, b)


def test_compute_to_target_inverts_the_curve():
    A, B, C_mid, R0 = 0.645, 1.89, 11272.0, 0.25
    for target in (0.3, 0.5, 0.64):
        c_star = compute_to_target(target, A, B, C_mid, R0)
        assert sigmoid_curve(c_star, A, B, C_mid, R0) == pytest.approx(target, rel=1e-9)


def test_compute_to_target_unreachable_and_already_reached():
    assert compute_to_target(0.7, 0.6, 2.0, 1000.0, 0.3) == np.inf
    assert compute_to_target(0.2, 0.6, 2.0, 1000.0, 0.3) == 0.0
    vec = compute_to_target(0.5, np.array([0.4, 0.6]), 2.0, 1000.0, 0.3)
    assert np.isinf(vec[0]) and np.isfinite(vec[1])
    # a falling curve (a run that collapses: A < R0) already at or above the target needs no compute
    assert compute_to_target(0.35, 0.3, 1.0, 100.0, 0.5) == 0.0
    assert compute_to_target(0.6, 0.3, 1.0, 100.0, 0.5) == np.inf


def test_target_reachable():
    np.testing.assert_array_equal(target_reachable(0.5, np.array([0.4, 0.6, 0.6]), np.array([0.3, 0.3, 0.55])), [False, True, False])


def test_negative_compute_is_refused():
    with pytest.raises(ValueError):
        sigmoid_curve([-1.0, 10.0], 0.6, 1.0, 100.0, 0.2)


def test_pytensor_twin_matches_numpy():
    import pytensor.tensor as pt

    from forecast.curves import sigmoid_curve_pt

    x = np.linspace(-2, 2, 9)
    expr = sigmoid_curve_pt(pt.as_tensor(x), 0.6, 3.0, 0.2, 0.25)
    np.testing.assert_allclose(expr.eval(), sigmoid_curve_log(x, 0.6, 3.0, 0.2, 0.25))


def test_compute_to_target_refuses_a_target_that_is_no_number_and_keeps_a_nan_parameter_unknown():
    """A NaN target came back as +inf ("never reaches it") and "0.6" as numpy's TypeError; a NaN
    parameter as +inf too, counted by every summary as a curve that never gets there."""
    for target in (float("nan"), "0.6", None, True):
        with pytest.raises(ValueError, match="target must be a number, got "):
            compute_to_target(target, 0.6, 2.0, 1000.0, 0.3)
    out = compute_to_target(0.5, np.array([0.6, 0.6, np.nan]), 2.0, 1000.0, np.array([0.3, np.nan, 0.3]))
    assert np.isfinite(out[0]) and np.isnan(out[1]) and np.isnan(out[2])
    assert compute_to_target(np.float32(0.5), 0.6, 2.0, 1000.0, 0.3) == compute_to_target(0.5, 0.6, 2.0, 1000.0, 0.3)


def test_a_curve_that_starts_exactly_at_the_target_needs_no_compute():
    """target <= R0 is reached at compute 0 (the documented rule), the boundary included: a falling curve
    (A < R0) that starts exactly at the target reached it at the start, not 'never'."""
    assert compute_to_target(0.5, 0.3, 1.0, 100.0, 0.5) == 0.0  # falling from the target
    assert compute_to_target(0.3, 0.6, 2.0, 1000.0, 0.3) == 0.0  # rising from it


def test_zero_compute_is_refused_like_negative_compute():
    """C = 0 has no log: it is refused, not answered with R0 (kills the mutant checking compute < 0 only)."""
    with pytest.raises(ValueError, match="compute must be > 0"):
        sigmoid_curve(0.0, 0.6, 1.0, 100.0, 0.2)


def test_target_reachable_excludes_both_ends():
    """Strictly R0 < target < A, as documented: a target equal to R0 is reached at the start and one equal to A
    only in the limit (kills the mutants with <= on either side)."""
    np.testing.assert_array_equal(target_reachable(0.3, np.array([0.6, 0.3, 0.6]), np.array([0.3, 0.1, 0.1])),
                                  [False, False, True])


def test_compute_to_target_known_answers_and_a_nan_exponent_or_midpoint_is_unknown():
    """By hand: half the gain is reached at C_mid whatever B; at target 0.5 with A 0.6, R0 0.2,
    (A - R0) / (target - R0) - 1 = 1/3, so C* = 1000 * 3^(1/2). A NaN B or C_mid is unknown even where the
    target is below R0 or above A (kills the mutant that dropped isnan(B) and returned 0 or inf)."""
    assert compute_to_target(0.4, 0.6, 2.0, 1000.0, 0.2) == pytest.approx(1000.0)
    assert compute_to_target(0.5, 0.6, 2.0, 1000.0, 0.2) == pytest.approx(1000.0 * 3 ** 0.5)
    for target in (0.1, 0.7):
        assert np.isnan(compute_to_target(target, 0.6, np.nan, 1000.0, 0.2))
        assert np.isnan(compute_to_target(target, 0.6, 2.0, np.nan, 0.2))
