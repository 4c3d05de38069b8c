"""Runs whose end falls away from their fitted curve (forecast.shape_check), on hand-made residuals
whose answer is known, and on a fitted sweep with one run made to decline."""

import numpy as np
import pytest

from forecast.shape_check import (
    LATE_TREND_Z_LIMIT,
    late_trend_z,
    misshapen_runs,
    misshapen_runs_sentence,
)

WANDER_SD, WANDER_SCALE, WHITE_VAR = 0.01, 0.25, 0.004**2


def ou_wander(rng, x, sd=WANDER_SD, scale=WANDER_SCALE):
    """Ornstein-Uhlenbeck wander along x, as the model has it, plus white noise of WHITE_VAR."""
    path = np.empty(len(x))
    path[0] = sd * rng.standard_normal()
    for i in range(1, len(x)):
        corr = np.exp(-(x[i] - x[i - 1]) / scale)
        path[i] = corr * path[i - 1] + sd * np.sqrt(1 - corr**2) * rng.standard_normal()
    return path + np.sqrt(WHITE_VAR) * rng.standard_normal(len(x))


def test_wander_alone_is_rarely_flagged():
    # residuals that are exactly the wander and noise the fit learnt: about 1 in 740 below the limit
    rng = np.random.default_rng(0)
    x = np.linspace(-1, 1, 40)
    z = np.array([late_trend_z(x, ou_wander(rng, x), WHITE_VAR, WANDER_SD, WANDER_SCALE) for _ in range(400)])
    assert abs(z.mean()) < 0.2 and 0.8 < z.std() < 1.2  # a standard normal
    assert (z < LATE_TREND_Z_LIMIT).sum() <= 2


def test_a_late_decline_is_flagged_and_a_late_rise_is_not():
    rng = np.random.default_rng(1)
    x = np.linspace(-1, 1, 40)
    ramp = 0.08 * np.clip(x - 0.3, 0, None) / 0.7  # falls 0.08 over the last 35% of the run: 8 wander sds
    flagged = [late_trend_z(x, ou_wander(rng, x) - ramp, WHITE_VAR, WANDER_SD, WANDER_SCALE) < LATE_TREND_Z_LIMIT
               for _ in range(50)]
    assert np.mean(flagged) > 0.9  # 98.5% of 200 such runs in a scratch check
    rises = [late_trend_z(x, ou_wander(rng, x) + ramp, WHITE_VAR, WANDER_SD, WANDER_SCALE) for _ in range(50)]
    assert min(rises) > LATE_TREND_Z_LIMIT  # one-sided: a run that ends above its curve is not misshapen


def test_the_same_decline_is_ordinary_wander_for_a_fit_that_learnt_large_wander():
    x = np.linspace(-1, 1, 40)
    decline = -0.08 * np.clip(x - 0.3, 0, None) / 0.7
    assert late_trend_z(x, decline, WHITE_VAR, WANDER_SD, WANDER_SCALE) < LATE_TREND_Z_LIMIT
    assert late_trend_z(x, decline, WHITE_VAR, 0.05, 1.0) > LATE_TREND_Z_LIMIT


def test_too_few_late_evaluations_are_not_judged():
    assert np.isnan(late_trend_z(np.linspace(0, 1, 5), -np.arange(5.0), WHITE_VAR, WANDER_SD, WANDER_SCALE))
    assert np.isnan(late_trend_z([0.0], [0.0], WHITE_VAR, WANDER_SD, WANDER_SCALE))


def test_the_sentence_names_the_runs_and_says_intervals_are_too_narrow():
    assert misshapen_runs_sentence([]) is None
    text = misshapen_runs_sentence([{"run_id": "a-s1", "recipe": "a", "late_trend_z": -4.2}])
    assert "a-s1 (z -4.2)" in text and "too narrow" in text


@pytest.mark.slow
def test_a_fitted_run_made_to_decline_is_flagged_and_no_other(late_decline_fit, late_decline_sweep):
    fc, (_, victim) = late_decline_fit, late_decline_sweep
    assert [row["run_id"] for row in fc.misshapen_runs()] == [victim]
    assert misshapen_runs(fc) == fc.misshapen_runs()
    # asked about some runs (forecast watch asks about the runs it advises), only those are tested
    others = [run for run in fc.run_ids if run != victim]
    assert misshapen_runs(fc, runs=others) == [] and misshapen_runs(fc, runs=[victim]) == fc.misshapen_runs()


def test_a_share_of_draws_near_none_or_all_is_never_said_as_0_or_100_percent():
    """Kills the mutants that narrow _share_of_draws' bounds (0.01 to 0.001, 0.99 to 0.999): a flagged
    run that is the best of the others in 0.5% of draws read "in 0% of draws", a run named for a
    share it does not have; one best in 99.5% read "in 100%", as if in every draw."""
    from forecast.shape_check import _share_of_draws

    assert [_share_of_draws(s) for s in (0.005, 0.0099, 0.01, 0.75, 0.99, 0.995, 1.0)] == [
        "< 1%", "< 1%", "1%", "75%", "99%", "> 99%", "100%"]


def test_the_last_third_includes_the_evaluation_exactly_at_its_start():
    """Kills the mutant that tests x > start for x >= start in late_points: with evaluations at 0, 1,
    2 and 3 the last third of the span (2 to 3) holds two of them, both ends included."""
    from forecast.shape_check import late_points

    np.testing.assert_array_equal(late_points([0.0, 1.0, 2.0, 3.0]), [2, 3])
    assert late_points([1.0, 1.0]).size == 0  # no span, no stretch to judge


def test_a_last_third_of_three_evaluations_is_not_judged_and_one_of_four_is():
    """Kills the mutant MIN_LATE_POINTS = 3: a slope through three evaluations, one of them free to
    wander, flagged a run on a stretch too short to tell a decline from wander."""
    early = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    three, four = np.array(early + [0.8, 0.9, 1.0]), np.array(early + [0.7, 0.8, 0.9, 1.0])
    assert np.isnan(late_trend_z(three, -three, WHITE_VAR, WANDER_SD, WANDER_SCALE))
    assert late_trend_z(four, -four, WHITE_VAR, WANDER_SD, WANDER_SCALE) < LATE_TREND_Z_LIMIT


def test_flagged_runs_are_listed_worst_first_and_a_run_not_judged_is_not_flagged(monkeypatch):
    """Kills the mutant that sorts misshapen_runs best first: the sentence and the report name the
    runs in this order, the run that falls away furthest first."""
    import forecast.shape_check as shape_check

    rows = [{"run_id": run, "recipe": run[0], "late_trend_z": z}
            for run, z in (("a-s0", -3.5), ("b-s0", -6.0), ("c-s0", -1.0), ("d-s0", float("nan")))]
    monkeypatch.setattr(shape_check, "_run_late_trends", lambda fc, runs=None: rows)
    assert [row["run_id"] for row in misshapen_runs(object())] == ["b-s0", "a-s0"]
