"""Early-stop rules on hand-made posteriors (known answers), and the wrappers on a real fit."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from forecast.early_stop import (
    EarlyStopConfig,
    Recommendation,
    check_beats_best,
    check_gain_per_compute,
    check_reach_target,
    check_remaining_gain,
    evaluate_rules,
    noting_misshapen_runs,
    recommend_runs,
    trainer_advice,
)
from forecast.formatting import fmt_compute


def spread(centre: float, n: int = 1000) -> np.ndarray:
    """Draws evenly spread over [centre - 0.05, centre + 0.05): exact, seed-free probabilities."""
    return centre - 0.05 + 0.1 * (np.arange(n) + 0.5) / n


def test_check_beats_best_picks_the_best_alternative_and_counts_draws():
    this = spread(0.50)
    alternatives = {"weak": np.full(1000, 0.30), "strong": np.full(1000, 0.54)}
    p, best, best_mean = check_beats_best(this, alternatives)
    assert best == "strong" and best_mean == pytest.approx(0.54)
    assert p == pytest.approx(0.10)  # 0.50 +- 0.05 uniform above 0.54: 1/10 of the draws
    p_margin, _, _ = check_beats_best(this, alternatives, margin=0.03)
    assert p_margin == pytest.approx(0.0, abs=1e-9)  # needs > 0.57: impossible


def test_point_forecasts_broadcast():
    p, best, _ = check_beats_best(np.array([0.6]), {"x": np.array([0.5])})
    assert (p, best) == (1.0, "x")


def test_target_and_gain():
    assert check_reach_target(spread(0.50), 0.52) == pytest.approx(0.30)
    assert check_remaining_gain(spread(0.60), spread(0.58)) == pytest.approx(0.02)
    assert check_remaining_gain(spread(0.60), spread(0.58), doublings=4.0) == pytest.approx(0.005)


def test_gain_per_compute_is_the_expected_improvement_over_the_best_other_draw():
    # U(0.45, 0.55) above a sure 0.54: E[max(0, U - 0.54)] = 0.01^2 / 2 / 0.1 = 0.0005
    gain, per = check_gain_per_compute(spread(0.50), {"weak": np.full(1000, 0.30), "strong": np.full(1000, 0.54)}, 0.5)
    assert gain == pytest.approx(0.0005, rel=1e-3) and per == pytest.approx(0.001, rel=1e-3)
    # the best alternative is taken draw by draw: this run gains only where it beats both others
    this = np.array([0.6, 0.6, 0.6, 0.6])
    gain, _ = check_gain_per_compute(this, {"x": np.array([0.7, 0.5, 0.5, 0.5]), "y": np.array([0.5, 0.7, 0.55, 0.5])}, 1.0)
    assert gain == pytest.approx((0.0 + 0.0 + 0.05 + 0.1) / 4)
    # a point forecast broadcasts against draws
    assert check_gain_per_compute(spread(0.50), {"p": np.array([0.54])}, 1.0)[0] == pytest.approx(0.0005, rel=1e-3)


def test_gain_per_compute_keeps_a_cheap_chance_and_stops_a_dear_one():
    # the same 10% chance of ending above the best alternative; only the compute it costs differs
    config = EarlyStopConfig(margin=0.0, p_beat_threshold=0.05, min_gain_per_compute=0.001, saturation_epsilon=None)
    cheap = evaluate_rules("cheap", spread(0.50), spread(0.45), {"b": np.full(1000, 0.54)}, config,
                           budget=4.0, compute_now=3.0, n_evals=8, compute_scale=4.0)
    assert cheap.action == "continue"  # 0.0005 for a quarter of a typical budget = 0.002 per budget
    assert {c["rule"]: c["value"] for c in cheap.details["checks"]}["gain_per_compute"] == pytest.approx(0.002, rel=1e-3)
    dear = evaluate_rules("dear", spread(0.50), spread(0.45), {"b": np.full(1000, 0.54)}, config,
                          budget=40.0, compute_now=10.0, n_evals=8, compute_scale=4.0)
    assert (dear.action, dear.rule) == ("stop", "gain_per_compute")  # 0.0005 for 7.5 budgets
    assert dear.value == pytest.approx(0.0005 / 7.5, rel=1e-3) and dear.threshold == 0.001
    assert dear.message == ("stop: expected gain over the best of 1 other run(s) = 0.0005 for 7.50 typical budgets "
                            "of compute left = 0.0001 per budget < 0.001")
    off = evaluate_rules("dear", spread(0.50), spread(0.45), {"b": np.full(1000, 0.54)},
                         EarlyStopConfig(margin=0.0, p_beat_threshold=0.05, min_gain_per_compute=None, saturation_epsilon=None),
                         budget=40.0, compute_now=10.0, n_evals=8, compute_scale=4.0)
    assert off.action == "continue" and "gain_per_compute" not in {c["rule"] for c in off.details["checks"]}


def test_stop_when_it_cannot_beat_the_best():
    rec = evaluate_rules(
        "a-s0", spread(0.50), spread(0.45), {"b-s1": np.full(1000, 0.548)},
        EarlyStopConfig(margin=0.0, p_beat_threshold=0.05), budget=4e4, compute_now=1e4, n_evals=8,
    )
    assert rec.action == "stop" and rec.stop
    assert rec.rule == "beats_best"
    assert rec.probability == pytest.approx(0.02) and rec.value == rec.probability
    assert rec.threshold == 0.05
    assert rec.message == "stop: P(beats best 'b-s1' at 40,000 compute units, 4.0x now) = 0.02 < 0.05"
    assert rec.details["alternative"] == "b-s1"


def test_the_gain_and_compute_left_printed_divide_as_the_rule_decided():
    # a run 6% of a budget short of its end, with an expected gain of 0.000121: 0.00201 per budget,
    # just over 0.002. With four decimals the message read "0.0001 for 0.06 typical budgets ... =
    # 0.0020 per budget >= 0.002", and 0.0001 / 0.06 is 0.0017, under the threshold it says it is over
    this = np.where(np.arange(1000) < 200, 0.500605, 0.5)
    rec = evaluate_rules("a", this, np.full(1000, 0.40), {"b": np.full(1000, 0.5)}, EarlyStopConfig(),
                         budget=1 / (1 - 0.0602), compute_now=1.0, n_evals=8)
    check = {c["rule"]: c for c in rec.details["checks"]}["gain_per_compute"]
    assert not check["fired"] and check["value"] == pytest.approx(0.00201, rel=1e-3)
    assert "= 0.00012 for 0.06 typical budgets of compute left = 0.0020 per budget >= 0.002" in rec.message


def test_the_default_margin_asks_for_a_real_gain():
    # 0.50 +- 0.05 (uniform) against 0.53: P(beats) = 0.20, P(beats by 0.01) = 0.10, by 0.04: 0
    config = EarlyStopConfig()
    assert config.margin == 0.01 and config.p_beat_threshold == 0.1
    rec = evaluate_rules("a", spread(0.50), spread(0.45), {"b": np.full(1000, 0.53)}, config,
                         budget=4.0, compute_now=1.0, n_evals=8)
    assert (rec.action, rec.probability) == ("continue", pytest.approx(0.10))
    assert "P(beats best 'b' by 0.01 at 4 compute units, 4.0x now) = 0.10 >= 0.1" in rec.message
    rec = evaluate_rules("a", spread(0.50), spread(0.45), {"b": np.full(1000, 0.53)}, EarlyStopConfig(margin=0.04),
                         budget=4.0, compute_now=1.0, n_evals=8)
    assert rec.stop and rec.message == "stop: P(beats best 'b' by 0.04 at 4 compute units, 4.0x now) = 0.00 < 0.1"
    # the run expected to lead is compared without the margin: near-tied leaders must not stop each other
    rec = evaluate_rules("a", spread(0.54), spread(0.45), {"b": np.random.default_rng(1).permutation(spread(0.535))},
                         config, budget=4.0, compute_now=1.0, n_evals=8)
    assert rec.action == "continue" and rec.details["checks"][0]["margin"] == 0.0


def test_stop_when_the_target_is_out_of_reach():
    config = EarlyStopConfig(target=0.60, p_target_threshold=0.05)
    rec = evaluate_rules("a", spread(0.50), spread(0.40), {}, config, budget=2.0, compute_now=1.0, n_evals=5)
    assert (rec.action, rec.rule, rec.probability, rec.threshold) == ("stop", "reach_target", 0.0, 0.05)
    assert "P(reaches 0.6 by 2 compute units) = 0.00 < 0.05" in rec.message


def test_a_tiny_or_near_certain_probability_is_written_as_the_page_writes_it():
    # 3 draws in 1000 above the bar: P = 0.003, which two decimals would print as "0.00", the
    # share of none of the draws; the report writes it "<0.01" (fmt_prob), and so does the message
    three_in_1000 = np.r_[np.full(997, 0.30), np.full(3, 0.90)]
    rec = evaluate_rules("a", three_in_1000, np.full(1000, 0.20), {"b": np.full(1000, 0.60)}, EarlyStopConfig(),
                         budget=4.0, compute_now=1.0, n_evals=8)
    assert (rec.action, rec.rule, rec.probability) == ("stop", "beats_best", pytest.approx(0.003))
    assert rec.message == "stop: P(beats best 'b' by 0.01 at 4 compute units, 4.0x now) < 0.01 < 0.1"
    # and a share just short of all of the draws is "> 0.99", not "= 1.00"
    rec = evaluate_rules("a", 1.5 - three_in_1000, np.full(1000, 0.20), {"b": np.full(1000, 0.60)}, EarlyStopConfig(),
                         budget=4.0, compute_now=1.0, n_evals=8)
    assert rec.action == "continue" and rec.probability == pytest.approx(0.997)
    assert "P(beats best 'b' at 4 compute units, 4.0x now) > 0.99 >= 0.1" in rec.message
    # a threshold at or under 0.01, where "< 0.01" would not say the probability is below it:
    # the digits it takes, never 0.00 for a share of some of the draws
    config = EarlyStopConfig(target=0.6, p_target_threshold=0.005, saturation_epsilon=None)
    rec = evaluate_rules("a", three_in_1000, np.full(1000, 0.20), {}, config, budget=4.0, compute_now=1.0, n_evals=8)
    assert rec.stop and rec.message == "stop: P(reaches 0.6 by 4 compute units) = 0.003 < 0.005"
    config = EarlyStopConfig(target=0.6, p_target_threshold=0.002, saturation_epsilon=None)
    rec = evaluate_rules("a", three_in_1000, np.full(1000, 0.20), {}, config, budget=4.0, compute_now=1.0, n_evals=8)
    assert not rec.stop and rec.message == "continue: P(reaches 0.6 by 4 compute units) = 0.003 >= 0.002"


def test_stop_when_saturated():
    config = EarlyStopConfig(saturation_epsilon=0.005)
    rec = evaluate_rules("a", spread(0.601), spread(0.60), {"b": spread(0.55)}, config, budget=2.0, compute_now=1.0, n_evals=9)
    assert (rec.action, rec.rule) == ("stop", "saturated")
    assert rec.value == pytest.approx(0.001) and rec.probability is None and rec.threshold == 0.005
    assert rec.message == "stop: expected gain per doubling to 2 compute units (1.0 doublings left) = 0.0010 < 0.005"


def test_saturation_is_per_doubling_so_a_run_near_its_budget_is_not_saturated_by_default():
    config = EarlyStopConfig(saturation_epsilon=0.002)
    # 0.001 more with 6% of the budget left: still climbing at 0.012 per doubling
    near_end = evaluate_rules("a", spread(0.501), spread(0.50), {}, config, budget=1.06, compute_now=1.0, n_evals=9)
    assert near_end.action == "continue" and near_end.value == pytest.approx(0.001 / np.log2(1.06))
    # 0.003 more over two doublings: flat (0.0015 per doubling < 0.002)
    flat = evaluate_rules("a", spread(0.503), spread(0.50), {}, config, budget=4.0, compute_now=1.0, n_evals=9)
    assert (flat.action, flat.rule) == ("stop", "saturated") and flat.value == pytest.approx(0.0015)
    assert "(2.0 doublings left) = 0.0015 < 0.002" in flat.message


def test_saturation_uses_the_curve_gain_when_given():
    # the predicted metric falls back towards the curve (wander reverting), but the curve still climbs
    config = EarlyStopConfig(saturation_epsilon=0.002)
    rec = evaluate_rules("a", spread(0.49), spread(0.50), {}, config, budget=2.0, compute_now=1.0, n_evals=9, curve_gain=0.01)
    assert rec.action == "continue" and rec.details["checks"][0]["value"] == pytest.approx(0.01)
    without = evaluate_rules("a", spread(0.49), spread(0.50), {}, config, budget=2.0, compute_now=1.0, n_evals=9)
    assert (without.action, without.rule) == ("stop", "saturated")


def test_continue_names_the_check_closest_to_firing():
    other = np.random.default_rng(0).permutation(spread(0.62, 4000))  # independent of this run's draws
    config = EarlyStopConfig(margin=0.0, p_beat_threshold=0.05)
    rec = evaluate_rules("a", spread(0.60, 4000), spread(0.50, 4000), {"b": other}, config, budget=8.0, compute_now=1.0, n_evals=6)
    assert rec.action == "continue"
    assert rec.rule == "beats_best"
    # two independent uniforms of width 0.1, 0.02 apart: P(U1 > U2 + 0.02) = 0.08^2 / 2 / 0.01 = 0.32
    assert rec.probability == pytest.approx(0.32, abs=0.03) and rec.threshold == 0.05
    assert rec.message.startswith("continue: P(beats best 'b' at 8 compute units, 8.0x now) = ")
    assert "expected gain per doubling" in rec.message  # every check is listed
    assert {c["rule"] for c in rec.details["checks"]} == {"beats_best", "gain_per_compute", "saturated"}
    # E[max(0, U1 - U2)] = 0.08^3 / 6 / 0.01 = 0.00853, for 7/8 of this run's budget left
    gain = next(c for c in rec.details["checks"] if c["rule"] == "gain_per_compute")
    assert gain["gain"] == pytest.approx(0.00853, rel=0.05) and gain["value"] == pytest.approx(0.00853 / 0.875, rel=0.05)


def test_rules_in_order_first_fired_wins():
    config = EarlyStopConfig(target=0.9)
    rec = evaluate_rules("a", spread(0.50), spread(0.50), {"b": np.full(1000, 0.7)}, config, budget=2.0, compute_now=1.0, n_evals=9)
    assert rec.rule == "beats_best"
    assert [c["rule"] for c in rec.details["checks"]] == ["beats_best", "gain_per_compute", "reach_target", "saturated"]
    assert [c["fired"] for c in rec.details["checks"]] == [True, True, True, True]


def test_a_stated_probability_has_the_digits_its_comparison_needs():
    # 97 of 1000 draws beat the bar: "0.10 < 0.1" would read as false; the reason must be checkable
    at_budget = np.where(np.arange(1000) < 97, 0.8, 0.5)
    rec = evaluate_rules("a", at_budget, spread(0.45), {"b": np.full(1000, 0.6)}, EarlyStopConfig(), budget=2.0,
                         compute_now=1.0, n_evals=9)
    assert rec.rule == "beats_best" and rec.stop and "= 0.097 < 0.1" in rec.message
    clear = evaluate_rules("a", np.where(np.arange(1000) < 20, 0.8, 0.5), spread(0.45), {"b": np.full(1000, 0.6)},
                           EarlyStopConfig(), budget=2.0, compute_now=1.0, n_evals=9)
    assert "= 0.02 < 0.1" in clear.message  # two digits where they suffice


def test_a_gain_a_rounding_error_under_its_threshold_is_printed_so_it_reads_under_it():
    """A gain per doubling of 0.006 over 3 doublings, less one unit in the last place: 0.0019999999999999996
    < 0.002 stops the run, and the message read "= 0.002 < 0.002" (after four extra decimals the
    number fell back to 6 significant digits, which round it up to the threshold again)."""
    import re

    rec = evaluate_rules("a", np.full(10, 0.5), np.full(10, 0.5), {}, EarlyStopConfig(), budget=800.0,
                         compute_now=100.0, n_evals=9, curve_gain=0.006 - 1e-18)
    assert rec.stop and rec.rule == "saturated" and rec.value < 0.002
    shown = re.search(r"= (\S+) < 0.002", rec.message).group(1)
    assert float(shown) < 0.002, rec.message
    # the gain per compute, and the gain and compute left that divide to it
    this = np.where(np.arange(1000) < 10, 0.6, 0.4)  # 1% of draws beat 0.5 by 0.1: 0.001 for half a budget
    rec = evaluate_rules("a", this, this - 0.05, {"b": np.full(1000, 0.5)}, EarlyStopConfig(p_beat_threshold=1e-9,
                         saturation_epsilon=None), budget=100.0, compute_now=50.0, n_evals=9, compute_scale=100.0)
    assert rec.stop and rec.rule == "gain_per_compute" and rec.value < 0.002
    gain, left, per = re.search(r"= (\S+) for (\S+) typical budgets of compute left = (\S+) per budget < 0.002",
                                rec.message).groups()
    assert float(per) < 0.002 and float(gain) / float(left) < 0.002, rec.message


def test_no_decision_from_a_far_extrapolation():
    rec = evaluate_rules("a", spread(0.1), spread(0.1), {"b": spread(0.9)}, EarlyStopConfig(max_extrapolation=8),
                         budget=100.0, compute_now=1.0, n_evals=9)
    assert (rec.action, rec.rule, rec.value, rec.threshold) == ("continue", "too_early", 100.0, 8.0)
    assert "100.0x the compute so far > 8x" in rec.message
    # just above the limit: the printed ratio reads above it too, not "8.0x ... > 8x"
    rec = evaluate_rules("a", spread(0.1), spread(0.1), {"b": spread(0.9)}, EarlyStopConfig(max_extrapolation=8),
                         budget=8.04, compute_now=1.0, n_evals=9)
    assert rec.rule == "too_early" and "8.04x the compute so far > 8x" in rec.message


def test_warmup_and_budget_reached():
    rec = evaluate_rules("a", spread(0.5), spread(0.5), {}, EarlyStopConfig(min_evals=4), budget=2.0, compute_now=1.0, n_evals=3)
    assert (rec.action, rec.rule, rec.value, rec.threshold) == ("continue", "warmup", 3.0, 4.0)
    rec = evaluate_rules("a", spread(0.5), spread(0.5), {}, EarlyStopConfig(), budget=2.0, compute_now=2.0, n_evals=9)
    assert (rec.action, rec.rule) == ("stop", "budget_reached")


def without_units(payload, unit: str):
    """A recommendation's dict with ' UNIT' taken out of its prose (the message, each check's text)."""
    if isinstance(payload, dict):
        return {k: without_units(v, unit) for k, v in payload.items()}
    if isinstance(payload, list):
        return [without_units(v, unit) for v in payload]
    return payload.replace(f" {unit}", "") if isinstance(payload, str) else payload


def test_every_compute_in_a_message_says_its_unit_and_nothing_else_changes():
    """'stop: compute 428,800 >= planned budget 400,000' gave no unit, where the report beside it and
    `forecast decide` write '400,000 gpu_hours': a planner could not tell FLOPs from GPU-hours or steps.
    Each compute in a message is followed by the run table's unit now; the JSON fields (rule,
    action, value, threshold, details' numbers) are the same whatever the unit."""
    config = EarlyStopConfig(target=0.95)

    def advice(unit, **kwargs):
        return evaluate_rules("a", spread(0.5), spread(0.3), {"b": spread(0.6)}, config, budget=400_000.0,
                              compute_now=100_000.0, n_evals=9, unit=unit, **kwargs)

    rec = advice("gpu_hours")
    assert rec.message == "stop: P(beats best 'b' by 0.01 at 400,000 gpu_hours, 4.0x now) = 0.00 < 0.1"
    texts = {c["rule"]: c["text"] for c in rec.details["checks"]}
    assert texts["reach_target"].startswith("P(reaches 0.95 by 400,000 gpu_hours) ")
    assert texts["saturated"].startswith("expected gain per doubling to 400,000 gpu_hours (2.0 doublings left) ")
    assert without_units(rec.to_dict(), "gpu_hours") == without_units(advice("flops").to_dict(), "flops")
    reached = evaluate_rules("a", spread(0.5), spread(0.5), {}, config, budget=400_000.0, compute_now=428_800.0,
                             n_evals=9, unit="flops")
    assert reached.message == "stop: compute 428,800 flops >= planned budget 400,000 flops"
    assert (reached.value, reached.threshold) == (428_800.0, 400_000.0)
    # a table without a compute_unit column: the words the rest of the project uses for it
    unnamed = evaluate_rules("a", spread(0.5), spread(0.5), {}, config, budget=2e12, compute_now=4e12, n_evals=9)
    assert unnamed.message == "stop: compute 4e12 compute units >= planned budget 2e12 compute units"


def test_saturation_rule_can_be_switched_off():
    config = EarlyStopConfig(saturation_epsilon=None)
    rec = evaluate_rules("a", spread(0.5), spread(0.5), {}, config, budget=2.0, compute_now=1.0, n_evals=9)
    assert (rec.action, rec.rule) == ("continue", "no_rule")


def test_to_dict_is_json():
    rec = evaluate_rules("a", spread(0.5), spread(0.4), {"b": spread(0.6)}, EarlyStopConfig(), budget=2.0, compute_now=1.0, n_evals=9)
    payload = json.loads(json.dumps(rec.to_dict()))
    assert set(payload) >= {"action", "rule", "message", "probability", "value", "threshold", "run_id", "details"}
    assert isinstance(Recommendation(**{k: payload[k] for k in ("action", "rule", "message")}), Recommendation)


def test_recommend_runs_on_a_fitted_model(fitted):
    last = fitted.runs_.groupby("run_id")["compute"].max()
    budgets = {r: 4 * float(last[r]) for r in fitted.run_ids}
    recs = recommend_runs(fitted, budgets, EarlyStopConfig(target=0.68))
    assert set(recs) == set(fitted.run_ids)
    for rec in recs.values():
        assert rec.action in ("continue", "stop")
        assert rec.threshold is not None and rec.value is not None
        assert f"{rec.threshold:g}" in rec.message
        # compute in the fit's unit, as the report and `forecast decide` write it
        assert f"{fmt_compute(budgets[rec.run_id])} {fitted.compute_unit}" in rec.message, rec.message
    # the 8-generation recipe (A = 0.585) cannot catch the Scout MoE (A = 0.71)
    weak = [r for r in fitted.run_ids if r.startswith("scalerl_8gen")]
    assert all(recs[r].stop for r in weak)
    assert {recs[r].rule for r in weak} <= {"beats_best", "reach_target", "saturated"}
    best = [r for r in fitted.run_ids if r.startswith("scalerl_scout_moe")]
    assert any(not recs[r].stop or recs[r].rule == "saturated" for r in best)
    # the saturation rule reads the fitted curve's rise, per doubling (here 2 doublings to the budget)
    run = best[0]
    curve = fitted.sample_curves([last[run], budgets[run]], run_id=run, kind="run", noise=False)
    saturated = next(c for c in recs[run].details["checks"] if c["rule"] == "saturated")
    assert saturated["value"] == pytest.approx((curve[:, 1].mean() - curve[:, 0].mean()) / 2.0)


def test_only_the_runs_advised_are_tested_for_their_shape_and_a_flagged_one_is_noted(monkeypatch):
    """noting_misshapen_runs asks forecast.shape_check about the runs it is handed (forecast watch
    refits after every evaluation, and the runs that ended get no advice) and notes the flagged one."""
    import forecast.shape_check as shape_check

    asked = []

    def flag_a_s0(fc, *, runs=None, **_):
        asked.append(runs)
        return [{"run_id": "a-s0", "recipe": "a", "late_trend_z": -5.04}]

    monkeypatch.setattr(shape_check, "misshapen_runs", flag_a_s0)
    recs = {run: Recommendation("continue", "beats_best", "continue: P(beats best) = 0.4 >= 0.1", run_id=run)
            for run in ("a-s0", "b-s0")}
    assert noting_misshapen_runs(object(), recs) is recs
    assert asked == [["a-s0", "b-s0"]]
    assert recs["a-s0"].details == {"shape_note": shape_check.misshapen_run_note(-5.04), "late_trend_z": -5.04}
    assert "(z -5.0)" in recs["a-s0"].details["shape_note"] and recs["b-s0"].details == {}
    assert recs["a-s0"].message == "continue: P(beats best) = 0.4 >= 0.1"  # the advice itself is the rules'


def test_a_flagged_runs_advice_that_reads_no_forecast_carries_no_shape_note(monkeypatch):
    """The shape note says a run's forecasts are likely too high: beside a stop at the planned budget
    (certain whatever the forecast), or a continue before any rule judged the forecast (too_early,
    warmup), it only made a reader doubt advice it cannot touch. Those keep the test's number
    (late_trend_z) for a program reading the advice, and no note; advice on the forecast, stop or
    continue (a held stop too: the run's own rules judged its forecast), keeps the note."""
    import forecast.shape_check as shape_check

    rules = {"budget_reached": "stop", "too_early": "continue", "warmup": "continue", "saturated": "stop",
             "reach_target": "continue", "beats_best": "continue", "stop_cap": "continue"}
    recs = {rule: Recommendation(action, rule, f"{action}: ...", run_id=rule) for rule, action in rules.items()}
    monkeypatch.setattr(shape_check, "misshapen_runs", lambda fc, *, runs=None, **_: [
        {"run_id": run, "recipe": "r", "late_trend_z": -5.04} for run in runs])
    noting_misshapen_runs(object(), recs)
    assert all(rec.details["late_trend_z"] == -5.04 for rec in recs.values())
    noted = {rule for rule, rec in recs.items() if "shape_note" in rec.details}
    assert noted == {"saturated", "reach_target", "beats_best", "stop_cap"}
    assert all(recs[rule].details["shape_note"] == shape_check.misshapen_run_note(-5.04) for rule in noted)


@pytest.mark.slow
def test_the_advice_of_a_fitted_run_made_to_decline_notes_it_and_is_otherwise_unchanged(late_decline_fit,
                                                                                       late_decline_sweep):
    from forecast.shape_check import LATE_TREND_Z_LIMIT, misshapen_run_note

    fc, (_, victim) = late_decline_fit, late_decline_sweep
    last = fc.runs_.groupby("run_id")["compute"].max()
    budgets = {r: 4 * float(last[r]) for r in fc.run_ids}
    recs = recommend_runs(fc, budgets)
    before = {run: rec.to_dict() for run, rec in recs.items()}
    noting_misshapen_runs(fc, recs)
    z = recs[victim].details["late_trend_z"]
    assert z < LATE_TREND_Z_LIMIT and recs[victim].details["shape_note"] == misshapen_run_note(z)
    assert not any("shape_note" in rec.details for run, rec in recs.items() if run != victim)
    for run, rec in recs.items():
        after = rec.to_dict()
        after["details"] = {k: v for k, v in after["details"].items() if k not in ("shape_note", "late_trend_z")}
        assert after == before[run]
    json.dumps(recs[victim].to_dict(), allow_nan=False)


def test_recommend_runs_protects_runs_at_the_top_of_their_step(fitted):
    """With protect_top_percent, a run whose best evaluation is in the top share at its step is not
    stopped on a comparison; the weak recipe, at the bottom, still is."""
    from forecast.early_stop import top_at_step

    last = fitted.runs_.groupby("run_id")["compute"].max()
    budgets = {r: 4 * float(last[r]) for r in fitted.run_ids}
    recs = recommend_runs(fitted, budgets, EarlyStopConfig(protect_top_percent=50.0))
    by_run = {r: g.sort_values("compute")["metric"].to_numpy() for r, g in fitted.runs_.groupby("run_id")}
    protected = {r for r in fitted.run_ids if top_at_step(r, by_run, 50.0)}
    assert protected and protected != set(fitted.run_ids)
    for run, rec in recs.items():
        if run in protected:
            assert rec.rule not in ("beats_best", "gain_per_compute", "stop_cap")  # no comparison reached it
    assert any(recs[r].stop for r in fitted.run_ids if r.startswith("scalerl_8gen") and r not in protected)


def test_trainer_advice_warms_up_without_fitting():
    rows = pd.DataFrame({"run_id": ["x"] * 3, "recipe": ["r"] * 3, "compute": [1.0, 2.0, 3.0], "metric": [0.1, 0.2, 0.3]})
    rec = trainer_advice(evals=rows, reference_path=None, planned_compute=10.0)
    assert (rec.action, rec.rule) == ("continue", "warmup")
    assert rec.to_dict()["run_id"] == "x"


def test_trainer_advice_reports_an_unusable_reference(tmp_path):
    rows = pd.DataFrame({"run_id": ["x"] * 5, "recipe": ["r"] * 5, "compute": [1.0, 2, 3, 4, 5], "metric": [0.1] * 5,
                         "compute_unit": ["flops"] * 5})
    ref = pd.DataFrame({"run_id": ["y"] * 3, "recipe": ["q"] * 3, "compute": [1.0, 2, 3], "metric": [0.5] * 3,
                        "compute_unit": ["gpu_hours"] * 3})
    ref.to_csv(tmp_path / "ref.csv", index=False)
    rec = trainer_advice(evals=rows, reference_path=tmp_path / "ref.csv", planned_compute=10.0)
    assert (rec.action, rec.rule) == ("continue", "advisor_error")
    assert "mixes compute units" in rec.message


def test_stops_are_committed_in_turn_and_a_stopped_run_counts_where_it_stands():
    from forecast.early_stop import evaluate_in_turn

    # three near-tied leaders with independent uncertainty, U(0.55, 0.65) each, and a weak fourth.
    # Against the best of the other two, each adds E[max of 3] - E[max of 2] = 0.1/12 = 0.0083 for
    # 3/4 of a budget: 0.011 per budget < 0.015, so judged all at once all three would stop and
    # leave only the weak run. In turn, the weakest leader (a) stops first and then counts where it
    # stands now (0.2 lower); b and d each face one rival: 0.1/6 = 0.0167 for 3/4 = 0.022, continue.
    rng = np.random.default_rng(1)
    a, b, d = spread(0.5995, 6000), rng.permutation(spread(0.60, 6000)), rng.permutation(spread(0.60, 6000))
    c = spread(0.30, 6000)
    config = EarlyStopConfig(margin=0.0, min_gain_per_compute=0.015, saturation_epsilon=None)
    draws = {"a": a, "b": b, "c": c, "d": d}
    in_flight = {name: {"at_budget": x, "now": x - 0.2, "budget": 4.0, "compute_now": 1.0, "n_evals": 8} for name, x in draws.items()}
    at_once = {name: evaluate_rules(name, x, x - 0.2, {o: y for o, y in draws.items() if o != name}, config,
                                    budget=4.0, compute_now=1.0, n_evals=8) for name, x in draws.items()}
    assert all(rec.stop for name, rec in at_once.items() if name != "c") and at_once["b"].rule == "gain_per_compute"
    recs = evaluate_in_turn(in_flight, draws, config)
    assert {name: rec.action for name, rec in recs.items()} == {"a": "stop", "b": "continue", "c": "stop", "d": "continue"}
    gain_b = next(ch for ch in recs["b"].details["checks"] if ch["rule"] == "gain_per_compute")
    assert gain_b["value"] == pytest.approx(0.1 / 6 / 0.75, rel=0.1)


def test_a_long_run_is_held_back_only_as_long_as_a_typical_one():
    # planned for 100x its compute; a typical run of the sweep for 4x: the guard counts the latter
    config = EarlyStopConfig(max_extrapolation=8)
    long_run = evaluate_rules("long", spread(0.1), spread(0.1), {"b": spread(0.9)}, config,
                              budget=100.0, compute_now=1.0, n_evals=9, compute_scale=4.0)
    assert (long_run.action, long_run.rule) == ("stop", "beats_best")
    assert "100.0x now" in long_run.message  # the forecast is still at the run's own budget
    # a typical budget 20x away: held back, and the message says which budget held it
    held = evaluate_rules("long", spread(0.1), spread(0.1), {"b": spread(0.9)}, config,
                          budget=100.0, compute_now=1.0, n_evals=9, compute_scale=20.0)
    assert (held.action, held.rule, held.value) == ("continue", "too_early", 20.0)
    assert "a typical run's budget is 20.0x the compute so far > 8x" in held.message


def test_the_leader_is_not_stopped_on_another_runs_forecast():
    # "lead" is ahead now (0.48) but "long" is forecast to end far above it (0.60 vs 0.50 at budget)
    lead = evaluate_rules("lead", spread(0.50), spread(0.48), {"long": spread(0.60)}, EarlyStopConfig(),
                          budget=4.0, compute_now=2.0, n_evals=9, leading=True)
    assert (lead.action, lead.rule) == ("continue", "leader")
    assert "leads the sweep now" in lead.message and "P(beats best 'long' by 0.01" in lead.message
    # which run leads and which is "best" say what each is, so the two names do not contradict
    assert "leads the sweep now (the highest fitted metric where the runs stand); the forecast that 'long' " \
           "ends higher does not stop it" in lead.message
    assert lead.threshold == 0.1 and lead.probability < 0.1  # the check that would have fired, with its numbers
    # the same run, not leading (or with keep_leader off), is stopped by that forecast
    for leading, keep in ((False, True), (True, False)):
        rec = evaluate_rules("lead", spread(0.50), spread(0.48), {"long": spread(0.60)}, EarlyStopConfig(keep_leader=keep),
                             budget=4.0, compute_now=2.0, n_evals=9, leading=leading)
        assert (rec.action, rec.rule) == ("stop", "beats_best")
    # saturation still stops a leader that has flattened
    flat = evaluate_rules("lead", spread(0.48), spread(0.48), {"long": spread(0.60)}, EarlyStopConfig(),
                          budget=4.0, compute_now=2.0, n_evals=9, leading=True, curve_gain=0.0001)
    assert (flat.action, flat.rule) == ("stop", "saturated")


def test_top_at_step_is_the_percentile_pruners_test_turned_round():
    from forecast.backtest import median_should_stop
    from forecast.early_stop import top_at_step

    field = {f"o{i}": np.array([0.30, 0.32 + 0.02 * i, 0.40]) for i in range(6)}  # values at step 1: 0.32..0.42
    for own, percent in [([0.31, 0.43], 10.0), ([0.31, 0.40], 10.0), ([0.31, 0.40], 50.0), ([0.45, 0.30], 20.0)]:
        metrics = {**field, "me": np.array(own)}
        others = [v[1] for r, v in field.items()]
        kept = not median_should_stop(np.array(own), others, n_startup=5, percentile=percent)
        why = top_at_step("me", metrics, percent)
        assert (why is not None) == kept
    why = top_at_step("me", {**field, "me": np.array([0.31, 0.43])}, 10.0)
    assert why.startswith("best so far 0.4300 >= ") and "top 10% of 6 other runs at step 1" in why
    # too few others at the step: no verdict, no protection
    assert top_at_step("me", {"me": np.array([0.5, 0.6]), "a": np.array([0.1, 0.2])}, 50.0) is None


def test_a_run_in_the_top_at_its_step_is_not_stopped_on_another_runs_forecast():
    # "mid" is forecast to end well below "long", but it is doing as well as the field now
    config = EarlyStopConfig(protect_top_percent=10.0)
    why = "best so far 0.4800 >= 0.4700, the top 10% of 20 other runs at step 11"
    held = evaluate_rules("mid", spread(0.50), spread(0.48), {"long": spread(0.60)}, config,
                          budget=4.0, compute_now=2.0, n_evals=9, protected=why)
    assert (held.action, held.rule) == ("continue", "top_at_step")
    assert why in held.message and "P(beats best 'long' by 0.01" in held.message and held.probability < 0.1
    # unprotected, the same forecast stops it; protected, saturation still does
    assert evaluate_rules("mid", spread(0.50), spread(0.48), {"long": spread(0.60)}, config,
                          budget=4.0, compute_now=2.0, n_evals=9).rule == "beats_best"
    flat = evaluate_rules("mid", spread(0.48), spread(0.48), {"long": spread(0.60)}, config,
                          budget=4.0, compute_now=2.0, n_evals=9, protected=why, curve_gain=0.0001)
    assert (flat.action, flat.rule) == ("stop", "saturated")


def one_ahead_of_the_rest(name: str, n_behind: int):
    """(in_flight, finals) for evaluate_in_turn: `name` forecast to end at 0.80, and runs w1..wN
    far behind it (0.32, 0.34, ...), all halfway to the same budget."""
    ahead = {"at_budget": spread(0.80), "now": spread(0.70), "budget": 4.0, "compute_now": 2.0, "n_evals": 9}
    behind = {f"w{i}": {"at_budget": spread(0.30 + 0.02 * i), "now": spread(0.25), "budget": 4.0, "compute_now": 2.0,
                        "n_evals": 9} for i in range(1, n_behind + 1)}
    in_flight = {name: ahead, **behind}
    return in_flight, {r: v["at_budget"] for r, v in in_flight.items()}


def test_a_stop_against_a_bar_too_far_from_its_own_budget_says_so():
    """The planning report stopped seven runs against 'dapo-s2', whose own line read "too early to
    judge" (9.7x short of the budget): the stop stands, but its line says what the bar rests on."""
    from forecast.early_stop import evaluate_in_turn

    in_flight, finals = one_ahead_of_the_rest("lead", 4)
    in_flight["lead"] = {**in_flight["lead"], "compute_now": 4.0 / 10}  # 10x short of its budget: > 8x
    recs = evaluate_in_turn(in_flight, finals, EarlyStopConfig(keep_runner_up=False))
    assert (recs["lead"].action, recs["lead"].rule) == ("continue", "too_early")
    stopped = [rec for rec in recs.values() if rec.stop]
    assert stopped and all(rec.rule == "beats_best" for rec in stopped)
    for rec in stopped:
        assert rec.message.startswith("stop: P(beats best 'lead' by 0.01 at 4 compute units, 2.0x now) = ")
        assert rec.message.endswith("< 0.1; 'lead' is 10.0x short of its budget, too early for its own stop rules")
        assert rec.details["alternative_too_early"] == pytest.approx(10.0)
    # just past the guard: the ratio is printed so that it reads past it ("8.04x", not "8.0x")
    in_flight["lead"] = {**in_flight["lead"], "compute_now": 4.0 / 8.04}
    recs = evaluate_in_turn(in_flight, finals, EarlyStopConfig(keep_runner_up=False))
    assert "planned budget is 8.04x the compute so far > 8x" in recs["lead"].message
    assert all(rec.message.endswith("'lead' is 8.04x short of its budget, too early for its own stop rules")
               for rec in recs.values() if rec.stop)
    # a bar within the guard: no note
    in_flight, finals = one_ahead_of_the_rest("lead", 4)
    recs = evaluate_in_turn(in_flight, finals, EarlyStopConfig(keep_runner_up=False))
    assert not any("too early for its own" in rec.message for rec in recs.values())


def test_max_stop_share_holds_comparison_stops_beyond_the_share_for_the_next_check():
    from forecast.early_stop import evaluate_in_turn

    # one clear leader and four runs far behind it: every one of the four fails beats_best
    in_flight, finals = one_ahead_of_the_rest("lead", 4)
    uncapped = evaluate_in_turn(in_flight, finals, EarlyStopConfig(max_stop_share=None, keep_runner_up=False))
    assert sorted(r for r, rec in uncapped.items() if rec.stop) == ["w1", "w2", "w3", "w4"]
    # at most half of the 5 runs in flight (2) stop on comparisons at one check: the weakest two
    recs = evaluate_in_turn(in_flight, finals, EarlyStopConfig(max_stop_share=0.5))
    assert {r: (rec.action, rec.rule) for r, rec in recs.items()} == {
        "lead": ("continue", recs["lead"].rule), "w1": ("stop", "beats_best"), "w2": ("stop", "beats_best"),
        "w3": ("continue", "stop_cap"), "w4": ("continue", "stop_cap")}
    held = recs["w4"]
    assert held.message.startswith("continue: P(beats best 'lead' by 0.01")
    assert "but 2 of 5 runs in flight were already stopped on comparisons at this check" in held.message
    assert held.details["held_by_cap"] == "beats_best" and held.value == 0.0 and held.threshold == 0.1
    assert EarlyStopConfig().max_stop_share == 0.5


def test_the_stop_cap_counts_the_comparison_stops_of_recent_checks():
    """With checks closer together than stop_cap_window, runs stopped at the last checks count
    against this one's share; a check a whole window earlier no longer does."""
    from forecast.early_stop import (
        count_comparison_stops,
        evaluate_in_turn,
        recent_comparison_stops,
    )

    history = [(1.0, 2), (1.1, 1)]  # (compute at the check, runs stopped on comparisons there)
    assert recent_comparison_stops(history, 1.2, 1.25) == 3
    assert recent_comparison_stops(history, 1.0 * 1.25, 1.25) == 1  # exactly a window later: out
    assert recent_comparison_stops(history, 1.1 * 1.25, 1.25) == 0
    assert recent_comparison_stops(history, 1.2, None) == 0  # None: per check, as before

    in_flight, finals = one_ahead_of_the_rest("lead", 4)
    config = EarlyStopConfig(max_stop_share=0.5)
    one_earlier = evaluate_in_turn(in_flight, finals, config, recent_stops=1)
    assert count_comparison_stops(one_earlier) == 1 and one_earlier["w1"].stop  # the weakest, then the cap
    held = evaluate_in_turn(in_flight, finals, config, recent_stops=2)
    assert count_comparison_stops(held) == 0
    assert all(held[r].rule == "stop_cap" for r in ("w1", "w2", "w3", "w4"))
    assert "0 of 5 runs in flight were already stopped on comparisons at this check and 2 in the last 1.25x" in held["w1"].message
    assert count_comparison_stops(evaluate_in_turn(in_flight, finals, config)) == 2  # nothing recent: the share
    # share 1 is documented as no cap: recent stops held runs there too (live advice, checks < 1.25x apart)
    no_cap = EarlyStopConfig(max_stop_share=1.0, keep_runner_up=False)
    assert count_comparison_stops(evaluate_in_turn(in_flight, finals, no_cap, recent_stops=3)) == 4


def test_the_guards_do_not_keep_a_run_its_own_rule_stops():
    """The stop cap and the runner-up hold keep runs that a comparison with other runs' forecasts
    would stop. A run that also fails its own test (here: it cannot reach the target) is stopped on
    that, and is not counted against the cap."""
    from forecast.early_stop import count_comparison_stops, evaluate_in_turn

    in_flight, finals = one_ahead_of_the_rest("lead", 4)  # w1..w4 end near 0.32-0.38; 'lead' near 0.80
    without_target = evaluate_in_turn(in_flight, finals, EarlyStopConfig(max_stop_share=0.5))
    assert [without_target[r].rule for r in ("w3", "w4")] == ["stop_cap", "stop_cap"]
    recs = evaluate_in_turn(in_flight, finals, EarlyStopConfig(max_stop_share=0.5, target=0.6))
    assert {r: (recs[r].action, recs[r].rule) for r in ("w1", "w2", "w3", "w4")} == {
        r: ("stop", "reach_target") for r in ("w1", "w2", "w3", "w4")}
    assert count_comparison_stops(recs) == 0 and "alternative" not in recs["w4"].details
    assert recs["w4"].message.startswith("stop: P(reaches 0.6 by 4 compute units) = 0.00") and recs["w4"].threshold == 0.05
    assert not recs["lead"].stop
    # the runner-up hold: with the cap off, the strongest run beside the unfinished 'lead' goes on,
    # unless it cannot reach the target either
    held = evaluate_in_turn(in_flight, finals, EarlyStopConfig(max_stop_share=None))
    assert held["w4"].rule == "runner_up"
    recs = evaluate_in_turn(in_flight, finals, EarlyStopConfig(max_stop_share=None, target=0.6))
    assert (recs["w4"].action, recs["w4"].rule) == ("stop", "reach_target")


def test_keep_runner_up_keeps_the_best_run_beside_an_unfinished_bar():
    from forecast.early_stop import evaluate_in_turn

    # "bar" is forecast to end far above three runs; nothing else is in flight
    in_flight, finals = one_ahead_of_the_rest("bar", 3)
    off = evaluate_in_turn(in_flight, finals, EarlyStopConfig(max_stop_share=None, keep_runner_up=False))
    assert sorted(r for r, rec in off.items() if rec.stop) == ["w1", "w2", "w3"]
    assert EarlyStopConfig().keep_runner_up  # on by default
    recs = evaluate_in_turn(in_flight, finals, EarlyStopConfig(max_stop_share=None))
    # the strongest of the three goes on, named as the runner-up, with the check that would stop it
    assert {r: rec.action for r, rec in recs.items()} == {"bar": "continue", "w1": "stop", "w2": "stop", "w3": "continue"}
    kept = recs["w3"]
    assert kept.rule == "runner_up" and kept.details["bar"] == "bar" and kept.details["held_as_runner_up"] == "beats_best"
    assert kept.message.startswith("continue: P(beats best 'bar' by 0.01") and "'bar' is still in flight" in kept.message
    assert kept.value == 0.0 and kept.threshold == 0.1
    # once the bar has finished, its final is a result, not a forecast: no runner-up is kept
    ended = {r: v for r, v in in_flight.items() if r != "bar"}
    recs = evaluate_in_turn(ended, finals, EarlyStopConfig(max_stop_share=None, keep_runner_up=True))
    assert all(rec.stop for rec in recs.values())
    # another run that goes on beside the bar (here one held back by the extrapolation guard) is
    # already something to fall back on
    early = {"at_budget": spread(0.30), "now": spread(0.20), "budget": 40.0, "compute_now": 1.0, "n_evals": 9}
    recs = evaluate_in_turn({**in_flight, "early": early}, {**finals, "early": early["at_budget"]},
                            EarlyStopConfig(max_stop_share=None, keep_runner_up=True))
    assert recs["early"].rule == "too_early" and all(recs[r].stop for r in ("w1", "w2", "w3"))


def test_sweep_leader_and_evaluate_in_turn_keep_the_run_ahead_now():
    from forecast.early_stop import evaluate_in_turn, sweep_leader

    in_flight = {
        "lead": {"at_budget": spread(0.50), "now": spread(0.48), "budget": 4.0, "compute_now": 2.0, "n_evals": 9},
        "long": {"at_budget": spread(0.60), "now": spread(0.40), "budget": 16.0, "compute_now": 2.0, "n_evals": 9},
        "weak": {"at_budget": spread(0.30), "now": spread(0.25), "budget": 4.0, "compute_now": 2.0, "n_evals": 9},
    }
    assert sweep_leader({r: v["now"] for r, v in in_flight.items()}, {}) == "lead"
    assert sweep_leader({r: v["now"] for r, v in in_flight.items()}, {"done": spread(0.55)}) is None  # a finished run is ahead
    finals = {r: v["at_budget"] for r, v in in_flight.items()}
    recs = evaluate_in_turn(in_flight, finals, EarlyStopConfig())
    assert {r: (rec.action, rec.rule) for r, rec in recs.items()} == {
        "lead": ("continue", "leader"), "long": ("continue", recs["long"].rule), "weak": ("stop", "beats_best")}
    # (no stop cap here: with 3 runs in flight it would hold "lead" for the next check; nor the
    # runner-up, which keeps "lead", the best run left beside "long", until "long" has finished)
    recs = evaluate_in_turn(in_flight, {**finals, "done": spread(0.55)},
                            EarlyStopConfig(max_stop_share=None, keep_runner_up=False))
    assert recs["lead"].stop
    recs = evaluate_in_turn(in_flight, {**finals, "done": spread(0.55)}, EarlyStopConfig(max_stop_share=None))
    assert (recs["lead"].action, recs["lead"].rule, recs["lead"].details["bar"]) == ("continue", "runner_up", "long")


def test_recommend_runs_names_unknown_runs_and_wants_a_mapping(fitted):
    from forecast.early_stop import recommend_runs

    with pytest.raises(KeyError, match="unknown run_id 'nope'; the fit has: scalerl_8b-s0"):
        recommend_runs(fitted, {"nope": 1e5})
    with pytest.raises(TypeError, match="budgets must map run_id -> planned compute"):
        recommend_runs(fitted, [1e5])
    from decimal import Decimal

    for good in (np.array(1e6), Decimal("1e6"), np.float32(1e6)):
        assert recommend_runs(fitted, {"scalerl_8b-s0": good})["scalerl_8b-s0"].action in ("stop", "continue")
    for bad in (-1.0, float("nan"), float("inf"), "1e6", None):
        with pytest.raises(ValueError, match="budget for run 'scalerl_8b-s0' must be a finite compute > 0"):
            recommend_runs(fitted, {"scalerl_8b-s0": bad})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "Mean of empty slice" from numpy
        assert recommend_runs(fitted, {}) == {}
    rec = recommend_runs(fitted, {"scalerl_8b-s0": 1e6})["scalerl_8b-s0"]
    assert repr(rec) == f"Recommendation('scalerl_8b-s0': {rec.message})"  # one line, not the details


def test_an_advice_fit_reads_its_convergence_from_the_fit_not_from_a_warning(small_sweep, monkeypatch):
    """Under Optuna's n_jobs > 1, warnings.catch_warnings (not thread-safe) can hand one trial's
    ConvergenceWarning to another's; an advice fit whose warning went elsewhere was called converged."""
    from forecast.early_stop import fit_for_advice
    from forecast.forecaster import ScalingForecaster
    from forecast.inference import SamplerSettings

    monkeypatch.setattr(ScalingForecaster, "_warn_if_unconverged", lambda self: None)  # the warning went elsewhere
    short = SamplerSettings(draws=15, tune=15, chains=2, extend_if_flagged=False)  # too short to converge
    fc, converged = fit_for_advice(small_sweep, random_seed=0, sampler=short)
    assert not fc.diagnostics().converged and converged is False


@pytest.mark.parametrize("name", ["keep_leader", "keep_runner_up"])
def test_a_switch_of_the_stop_rules_is_a_bool_and_numpy_bools_are_one(name):
    """keep_leader="no" is true in an if: it kept the guard on, as predict(noise="no") drew noise.
    A numpy bool (read from a table, computed with numpy) is a bool, stored as one for the JSON."""
    with pytest.raises(ValueError, match=f"{name} must be True or False, got 'no'"):
        EarlyStopConfig(**{name: "no"})
    with pytest.raises(ValueError, match=f"{name} must be True or False, got 0"):
        EarlyStopConfig(**{name: 0})
    config = EarlyStopConfig(**{name: np.False_})
    assert getattr(config, name) is False and json.dumps(config.to_dict())


def test_recommend_runs_takes_a_tables_numbered_runs_by_their_numbers(fitted, small_sweep):
    """A table whose run ids are numbers (1, 2, ...) is fitted with them as text ("1"), as predict()
    reads run_id=1. recommend_runs refused budgets={1: ...} as "unknown run_id 1; the fit has: 1, 2,
    ...", and took compare_at={3: ...} without a word while judging run 3 where it ended."""
    from forecast import ScalingForecaster
    from forecast.early_stop import recommend_runs

    numbers = {run: k + 1 for k, run in enumerate(sorted(small_sweep["run_id"].unique()))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains: convergence is not what this test is about
        fc = ScalingForecaster(mode="fast").fit(small_sweep.assign(run_id=small_sweep["run_id"].map(numbers)),
                                                random_seed=3, progress=False)
    assert fc.run_ids == ["1", "2", "3", "4", "5", "6"]
    budget = 4 * float(small_sweep["compute"].max())
    by_text = recommend_runs(fc, {"1": budget}, compare_at={"3": 2 * budget}, alternatives=["2", "3"])
    by_number = recommend_runs(fc, {np.int64(1): budget}, compare_at={3: 2 * budget}, alternatives=[2, 3])
    assert list(by_number) == ["1"]
    assert by_number["1"].to_dict() == by_text["1"].to_dict()
    assert by_number["1"].to_dict() != recommend_runs(fc, {"1": budget}, alternatives=["2", "3"])["1"].to_dict()
    with pytest.raises(KeyError, match="unknown run_id '9'; the fit has: 1, 2, 3, 4, 5, 6"):
        recommend_runs(fc, {1: budget}, compare_at={9: budget})


def test_a_showwarning_wrapped_while_an_advice_fit_ran_does_not_make_every_warning_a_recursion_error(small_sweep, monkeypatch):
    """fit_for_advice(threaded=True) puts a hook on warnings.showwarning that passes other threads'
    warnings on to the showwarning it found. A trial that wrapped the showwarning it found while another
    trial's check fitted (loguru's recipe: log, then call the one before) wrapped that hook, and the next
    check's hook passed on to the wrapper, which passed back to the hook: every warning of the process,
    any thread's, raised RecursionError from then on, the study's trials failing with it."""
    import threading

    from forecast.early_stop import fit_for_advice
    from forecast.forecaster import ScalingForecaster
    from forecast.inference import SamplerSettings

    shown, logged, errors = [], [], []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *args: shown.append(str(message)))

    def log_warnings():  # another trial's set-up: its warnings logged, then shown as before
        before = warnings.showwarning

        def logged_then_shown(message, *args):
            logged.append(str(message))
            before(message, *args)

        warnings.showwarning = logged_then_shown

    def warn():
        try:
            warnings.warn("said by another trial during a check", UserWarning, stacklevel=1)
        except RecursionError as err:
            errors.append(err)

    real_fit = ScalingForecaster.fit

    def fit_while(in_another_trial):
        def fit(self, *args, **kwargs):
            other = threading.Thread(target=in_another_trial)
            other.start()
            other.join()
            return real_fit(self, *args, **kwargs)

        return fit

    short = SamplerSettings(draws=15, tune=15, chains=2, extend_if_flagged=False)
    for in_another_trial in (log_warnings, warn):  # two checks
        monkeypatch.setattr(ScalingForecaster, "fit", fit_while(in_another_trial))
        fit_for_advice(small_sweep, random_seed=0, sampler=short, threaded=True)
    warnings.warn("said after the checks", UserWarning, stacklevel=1)
    assert not errors
    assert shown == logged == ["said by another trial during a check", "said after the checks"]


def test_a_run_compared_with_a_flagged_run_is_told_that_runs_forecast_is_likely_too_high(monkeypatch):
    """A stop on P(beats best 'b-s1') leans on b-s1's forecast: when b-s1's last third falls away from
    its curve, that forecast is likely too high and the stop may come too early. The advice of a run
    whose rule names an alternative (details 'alternative') says so when the alternative is flagged;
    a run whose rule compares with no run (saturated) does not, whatever is flagged. The alternatives
    are tested beside the runs advised (an ended run is one), and nothing the rules decided changes."""
    import forecast.shape_check as shape_check

    asked = []

    def flag(fc, *, runs=None, **_):
        asked.append(runs)
        return [{"run_id": "b-s1", "recipe": "b", "late_trend_z": -5.04},
                {"run_id": "a-s1", "recipe": "a", "late_trend_z": -3.6}]

    monkeypatch.setattr(shape_check, "misshapen_runs", flag)
    compared = Recommendation("stop", "beats_best", "stop: P(beats best 'b-s1') = 0.02 < 0.1", run_id="a-s0",
                              details={"alternative": "b-s1"})
    both = Recommendation("continue", "runner_up", "continue: P(beats best 'b-s1') = 0.02 < 0.1 would stop it, but ...",
                          run_id="a-s1", details={"alternative": "b-s1", "bar": "b-s1"})
    on_its_own = Recommendation("stop", "saturated", "stop: flat", run_id="c-s0", details={"checks": []})
    recs = {rec.run_id: rec for rec in (compared, both, on_its_own)}
    before = {run: rec.to_dict() for run, rec in recs.items()}
    noting_misshapen_runs(object(), recs)
    assert asked == [["a-s0", "a-s1", "c-s0", "b-s1"]]
    clause = "the run it is compared with, 'b-s1', falls away from its curve (z -5.0): its forecast is likely too high"
    assert compared.details["shape_note"] == f"shape: {clause}"
    assert compared.details["alternative_late_trend_z"] == -5.04 and "late_trend_z" not in compared.details
    assert both.details["shape_note"] == f"{shape_check.misshapen_run_note(-3.6)}; {clause}"
    assert (both.details["late_trend_z"], both.details["alternative_late_trend_z"]) == (-3.6, -5.04)
    assert on_its_own.details == {"checks": []}
    for run, rec in recs.items():
        after = rec.to_dict()
        after["details"] = {k: v for k, v in after["details"].items()
                            if k not in ("shape_note", "late_trend_z", "alternative_late_trend_z")}
        assert after == before[run]
    # the report hands in the fit's own test of every run: nothing is tested again
    recs = {"a-s0": Recommendation("stop", "beats_best", "stop: ...", run_id="a-s0", details={"alternative": "b-s1"})}
    noting_misshapen_runs(object(), recs, flagged=[{"run_id": "b-s1", "recipe": "b", "late_trend_z": -4.0}])
    assert len(asked) == 1 and recs["a-s0"].details["alternative_late_trend_z"] == -4.0


def test_an_ordinary_continue_is_not_told_the_run_it_is_compared_with_falls_away(monkeypatch):
    """'continue: P(beats best 'b-s1') = 0.45 >= 0.1' was followed by 'the run it is compared with,
    'b-s1', falls away from its curve: its forecast is likely too high'. A bar too high makes that P too
    low, so the continue only stands firmer: the clause read as a doubt about advice it supports. It is
    said where the comparison stopped the run, or would have but for a guard (a held stop); the JSON keeps
    alternative_late_trend_z on every such advice."""
    import forecast.shape_check as shape_check

    monkeypatch.setattr(shape_check, "misshapen_runs", lambda fc, *, runs=None, **_: [
        {"run_id": "b-s1", "recipe": "b", "late_trend_z": -5.04}])
    advice = {"a-s0": ("continue", "beats_best"), "a-s1": ("stop", "beats_best"), "a-s2": ("continue", "stop_cap"),
              "a-s3": ("continue", "leader")}
    recs = {run: Recommendation(action, rule, f"{action}: P(beats best 'b-s1') ...", run_id=run,
                                details={"alternative": "b-s1"}) for run, (action, rule) in advice.items()}
    noting_misshapen_runs(object(), recs)
    assert all(rec.details["alternative_late_trend_z"] == -5.04 for rec in recs.values())
    assert "shape_note" not in recs["a-s0"].details
    clause = "the run it is compared with, 'b-s1', falls away from its curve (z -5.0): its forecast is likely too high"
    assert all(recs[run].details["shape_note"] == f"shape: {clause}" for run in ("a-s1", "a-s2", "a-s3"))


def test_a_showwarning_wrapped_with_functools_wraps_while_an_advice_fit_ran_stays_in_place(small_sweep, monkeypatch):
    """A trial's log of its warnings made with functools.wraps around the showwarning it found (the hook
    of a check fitting meanwhile) took that hook's mark along with its __dict__: the check, ending, took
    the wrapper for its own hook and put back the showwarning the hook had found, so the trial's log
    was removed in silence and no warning of the process was logged from then on."""
    import functools
    import threading
    from types import SimpleNamespace

    from forecast.early_stop import fit_for_advice
    from forecast.forecaster import ScalingForecaster

    shown, logged = [], []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *args: shown.append(str(message)))

    def log_warnings():  # another trial's set-up, while the check fits
        before = warnings.showwarning

        @functools.wraps(before)
        def logged_then_shown(message, *args):
            logged.append(str(message))
            before(message, *args)

        warnings.showwarning = logged_then_shown

    def fit(self, *args, **kwargs):  # no sampling: only what the check does to showwarning matters here
        other = threading.Thread(target=log_warnings)
        other.start()
        other.join()
        return SimpleNamespace(diagnostics=lambda: SimpleNamespace(converged=True))

    monkeypatch.setattr(ScalingForecaster, "fit", fit)
    fit_for_advice(small_sweep, random_seed=0, threaded=True)
    warnings.warn("said after the check", UserWarning, stacklevel=1)
    assert logged == shown == ["said after the check"]


def _stopped_on_gain_per_compute():
    """A stop on gain_per_compute with beats_best short of firing: the run beats 'b-s1' by the margin in a
    fifth of the draws (P = 0.2 >= 0.1), but that gain of 0.004 costs 8 typical budgets. The best of the
    other runs, draw by draw, is 'b-s1' in 75 of 100 draws and 'c-s0' in the other 25; 'd-s0' is never it."""
    this = np.where(np.arange(100) < 20, 0.62, 0.45)
    others = {"b-s1": np.where(np.arange(100) < 75, 0.60, 0.50), "c-s0": np.full(100, 0.55), "d-s0": np.full(100, 0.30)}
    rec = evaluate_rules("a-s0", this, this - 0.05, others, budget=1e4, compute_now=2e3, n_evals=20, compute_scale=1e3)
    assert (rec.action, rec.rule) == ("stop", "gain_per_compute") and "alternative" not in rec.details
    return rec


def test_a_stop_on_gain_per_compute_is_told_which_flagged_runs_its_bar_rests_on(monkeypatch):
    """gain_per_compute holds a run to the best of all the other runs, draw by draw, and names none of them, so a
    stop on it said nothing when that best was a run whose last third falls away (its forecast likely too high,
    the stop likely too early), where a stop on P(beats best 'b-s1') says it of b-s1. It now names the flagged
    runs that are that best in some draws, with their share of the draws; a flagged run that is never the best
    leaves the bar as it is and is not named. The rule's decision is unchanged."""
    import forecast.shape_check as shape_check
    from forecast.early_stop import _held_by_cap

    flagged = {"b-s1": -5.04, "c-s0": -3.6, "d-s0": -4.0}
    asked = []

    def flag(fc, *, runs=None, **_):
        asked.append(runs)
        return [{"run_id": run, "recipe": run[0], "late_trend_z": z} for run, z in flagged.items() if run in runs]

    monkeypatch.setattr(shape_check, "misshapen_runs", flag)
    stopped, before = _stopped_on_gain_per_compute(), _stopped_on_gain_per_compute().to_dict()
    assert stopped.details["checks"][1]["best_of_others"] == {"b-s1": 0.75, "c-s0": 0.25}
    noting_misshapen_runs(object(), {"a-s0": stopped})
    assert asked == [["a-s0", "b-s1", "c-s0"]]  # the runs that are the bar in some draws are tested too
    assert stopped.details["shape_note"] == (
        "shape: the best of the runs it is compared with is 'b-s1' in 75% of draws and 'c-s0' in 25%, which fall away "
        "from their curves (z -5.0 and -3.6): their forecasts are likely too high")
    assert stopped.details["alternatives_late_trend_z"] == {"b-s1": -5.04, "c-s0": -3.6}
    after = stopped.to_dict()
    after["details"] = {k: v for k, v in after["details"].items() if k not in ("shape_note", "alternatives_late_trend_z")}
    assert after == before
    # one flagged, and a stop held by the stop cap: said as well; the run's own note comes first
    del flagged["c-s0"]
    flagged["a-s0"] = -3.2
    held = _held_by_cap(_stopped_on_gain_per_compute(), 1, 2)
    noting_misshapen_runs(object(), {"a-s0": held})
    assert held.details["shape_note"] == (
        f"{shape_check.misshapen_run_note(-3.2)}; the best of the runs it is compared with is 'b-s1' in 75% of draws, "
        "which falls away from its curve (z -5.0): its forecast is likely too high")
    # the flagged run never the best: nothing said of it
    del flagged["b-s1"], flagged["a-s0"]
    quiet = _stopped_on_gain_per_compute()
    noting_misshapen_runs(object(), {"a-s0": quiet})
    assert "shape_note" not in quiet.details and "alternatives_late_trend_z" not in quiet.details


def test_a_gain_checks_best_of_others_keeps_the_largest_shares_alone():
    """Every gain_per_compute check of every run kept each other run's share of being the best, and forecast
    watch rewrites them all after each refit: its recommendations.json grew with the square of the runs (2.3 MB
    for 300 close runs). The largest shares alone are kept, most first; what the shape note reads is among them."""
    from forecast.early_stop import BEST_OF_OTHERS_KEPT, best_of_others_shares

    rng = np.random.default_rng(0)
    alternatives = {f"r{i}-s0": 0.5 + 0.001 * i + 0.01 * rng.standard_normal(2000) for i in range(40)}
    shares = best_of_others_shares(alternatives)
    every = {name: float(np.mean(np.argmax(np.stack(list(alternatives.values())), axis=0) == i))
             for i, name in enumerate(alternatives)}
    largest = sorted((share for share in every.values() if share > 0), reverse=True)[:BEST_OF_OTHERS_KEPT]
    assert len(shares) == BEST_OF_OTHERS_KEPT < sum(share > 0 for share in every.values())
    assert list(shares.values()) == largest and all(every[name] == share for name, share in shares.items())


def _entry_points_given(config):
    """Each front door that takes the stop rules, called with `config`."""
    from forecast.backtest import BacktestConfig
    from forecast.early_stop import trainer_advice
    from forecast.optuna_pruner import ForecastPruner
    from forecast.watch import watch

    evals = pd.DataFrame({"run_id": "a", "recipe": "a", "compute": [1.0, 2.0, 3.0, 4.0, 5.0], "metric": 0.3})
    return {
        "recommend_runs": lambda: recommend_runs(None, {"a": 10.0}, config),
        "trainer_advice": lambda: trainer_advice(evals, None, 10.0, config=config),
        "ForecastPruner": lambda: ForecastPruner(100, config=config),
        "BacktestConfig": lambda: BacktestConfig(early_stop=config),
        "watch": lambda: watch("no-such-folder", interval=0, config=config, max_polls=1, sleep=lambda _: None,
                               say=lambda _: None),
    }


@pytest.mark.parametrize("entry", ["recommend_runs", "trainer_advice", "ForecastPruner", "BacktestConfig", "watch"])
def test_stop_rules_given_as_a_dict_are_refused_naming_what_is_wanted(entry):
    """config={"margin": 0.02} was an AttributeError from deep inside ("'dict' object has no attribute
    'protect_top_percent'"), or taken by watch() and BacktestConfig until the first fit used it."""
    with pytest.raises(TypeError, match=r"config must be a forecast.early_stop.EarlyStopConfig \(e.g. "
                                        r"EarlyStopConfig\(margin=0.02\)\), got dict"):
        _entry_points_given({"margin": 0.02})[entry]()


def test_a_forecast_exactly_at_the_target_reaches_it():
    """reach_target is P(metric at the budget >= target): a draw on the target has reached it.
    (Counted with >, draws exactly at the target were counted as missing it.)"""
    assert check_reach_target(np.array([0.6, 0.6, 0.5, 0.7]), 0.6) == pytest.approx(0.75)
    config = EarlyStopConfig(target=0.6, saturation_epsilon=None)
    rec = evaluate_rules("a", np.full(1000, 0.6), spread(0.5), {}, config, budget=4.0, compute_now=2.0, n_evals=9)
    assert (rec.action, rec.rule, rec.probability) == ("continue", "reach_target", 1.0)


def test_the_rules_start_at_exactly_min_evals_evaluations():
    """'rules start at 4': a run with 4 evaluations is judged; with 3 it is warming up."""
    config = EarlyStopConfig(min_evals=4, margin=0.0)
    judged = evaluate_rules("a", spread(0.30), spread(0.25), {"b": spread(0.60)}, config,
                            budget=4.0, compute_now=2.0, n_evals=4)
    assert (judged.action, judged.rule) == ("stop", "beats_best")
    warming = evaluate_rules("a", spread(0.30), spread(0.25), {"b": spread(0.60)}, config,
                             budget=4.0, compute_now=2.0, n_evals=3)
    assert (warming.action, warming.rule) == ("continue", "warmup")


def test_a_run_level_with_a_finished_run_still_leads():
    """sweep_leader: the run in flight leads when it is at least as high as every ended run, a tie included."""
    from forecast.early_stop import sweep_leader

    assert sweep_leader({"a": spread(0.55), "b": spread(0.40)}, {"done": spread(0.55)}) == "a"
    assert sweep_leader({"a": spread(0.55), "b": spread(0.40)}, {"done": spread(0.56)}) is None


def test_a_comparison_stop_that_fails_both_own_rules_is_named_for_the_first_of_them():
    """A run stopped on a comparison that also cannot reach the target and has flattened is stopped on
    its own rule, the first in the rules' order (reach_target before saturated), as evaluate_rules names
    the first rule that fires."""
    from forecast.early_stop import evaluate_in_turn

    in_flight, finals = one_ahead_of_the_rest("lead", 4)
    for run in ("w1", "w2", "w3", "w4"):
        in_flight[run] = {**in_flight[run], "curve_gain": 0.0}  # flat: saturated fires too
    recs = evaluate_in_turn(in_flight, finals, EarlyStopConfig(target=0.6))
    for run in ("w1", "w2", "w3", "w4"):
        fired = [c["rule"] for c in recs[run].details["checks"] if c["fired"]]
        assert fired == ["beats_best", "gain_per_compute", "reach_target", "saturated"]
        assert (recs[run].action, recs[run].rule) == ("stop", "reach_target")
        assert recs[run].message.startswith("stop: P(reaches 0.6 by 4 compute units) = 0.00 < 0.05")


def test_a_bar_exactly_at_the_extrapolation_guard_is_not_called_too_early():
    """The guard holds a run whose budget is MORE than max_extrapolation times its compute; at exactly
    8x its own rules run, so a stop against it must not say it is too early for them."""
    from forecast.early_stop import evaluate_in_turn

    in_flight, finals = one_ahead_of_the_rest("lead", 4)
    in_flight["lead"] = {**in_flight["lead"], "compute_now": 4.0 / 8}  # exactly 8x short
    recs = evaluate_in_turn(in_flight, finals, EarlyStopConfig(keep_runner_up=False))
    assert recs["lead"].rule != "too_early"
    stopped = [rec for rec in recs.values() if rec.stop]
    assert stopped and all(rec.rule == "beats_best" for rec in stopped)
    assert not any("too early for its own" in rec.message or "alternative_too_early" in rec.details for rec in stopped)


def test_recommend_runs_judges_runs_in_flight_at_their_budgets_and_the_rest_where_they_ended(fitted):
    """The bar of a run in flight is each other run's final: a run in flight at its planned budget, a
    finished run at its last evaluation. Compute left is counted in typical budgets, the median of the
    planned ones (2x, 3x and 7x the compute so far: median 3x, mean 4x)."""
    from forecast.early_stop import run_draws

    last = fitted.runs_.groupby("run_id")["compute"].max()
    in_flight = [r for r in fitted.run_ids if r.startswith("scalerl_scout_moe")] + [fitted.run_ids[0]]
    budgets = {r: k * float(last[r]) for r, k in zip(in_flight, (2, 3, 7), strict=True)}
    finals = {r: run_draws(fitted, r, budgets.get(r, float(last[r])))[:, 0].mean() for r in fitted.run_ids}
    # thresholds no rule reaches: nothing is stopped, so every run is compared with every other's final
    config = EarlyStopConfig(p_beat_threshold=1e-9, min_gain_per_compute=0.0, saturation_epsilon=None)
    recs = recommend_runs(fitted, budgets, config)
    typical = float(np.median(list(budgets.values())))
    for run, rec in recs.items():
        checks = {c["rule"]: c for c in rec.details["checks"]}
        others = {r: m for r, m in finals.items() if r != run}
        bar = max(others, key=others.get)
        assert checks["beats_best"]["alternative"] == bar
        assert checks["beats_best"]["alternative_expected"] == pytest.approx(others[bar], rel=1e-12)
        assert checks["gain_per_compute"]["compute_left"] == pytest.approx((budgets[run] - last[run]) / typical)


def test_trainer_advice_fits_from_exactly_min_evals_evaluations(intercept_advice_fit):
    """'rules start at 4': the trainer's 4th evaluation reaches the fit; its 3rd is a warmup."""
    from conftest import FitIntercepted

    import forecast.early_stop as early_stop

    intercept_advice_fit(early_stop)
    rows = pd.DataFrame({"run_id": ["x"] * 4, "recipe": ["r"] * 4, "compute": [1.0, 2, 3, 4], "metric": [0.1, 0.2, 0.3, 0.35]})
    with pytest.raises(FitIntercepted):
        trainer_advice(evals=rows, planned_compute=10.0, config=EarlyStopConfig(min_evals=4))
    rec = trainer_advice(evals=rows.iloc[:3], planned_compute=10.0, config=EarlyStopConfig(min_evals=4))
    assert (rec.action, rec.rule, rec.value, rec.threshold) == ("continue", "warmup", 3.0, 4.0)


def test_a_dear_run_expected_highest_is_held_as_the_runner_up_to_the_other_not_to_itself():
    """A long run expected to end highest (0.50) but only by 0.001 over a cheap run in flight (0.499) is
    stopped by gain_per_compute: 0.001 for 7.5 typical budgets of compute. Its bar is the cheap run, still
    in flight, and nothing else goes on beside that, so it is kept as the runner-up (keep_runner_up) until
    the cheap run has a final; its own forecast is never its bar."""
    from forecast.early_stop import evaluate_in_turn

    in_flight = {
        "dear": {"at_budget": np.full(1000, 0.50), "now": np.full(1000, 0.40), "budget": 40.0, "compute_now": 10.0,
                 "n_evals": 9},
        "cheap": {"at_budget": np.full(1000, 0.499), "now": np.full(1000, 0.45), "budget": 4.0, "compute_now": 2.0,
                  "n_evals": 9},
    }
    finals = {r: v["at_budget"] for r, v in in_flight.items()}
    recs = evaluate_in_turn(in_flight, finals, EarlyStopConfig(), compute_scale=4.0)
    assert (recs["cheap"].action, recs["cheap"].rule) == ("continue", "leader")
    dear = recs["dear"]
    assert (dear.action, dear.rule, dear.details["held_as_runner_up"], dear.details["bar"]) == (
        "continue", "runner_up", "gain_per_compute", "cheap")
    assert "'cheap' is still in flight" in dear.message
    off = evaluate_in_turn(in_flight, finals, EarlyStopConfig(keep_runner_up=False), compute_scale=4.0)
    assert (off["dear"].action, off["dear"].rule) == ("stop", "gain_per_compute")


class _TwoChainFit:
    """A fit made by hand, flagged as not converged, with 2 chains of 500 draws: run 'a-s0' (10 evaluations,
    planned for twice its compute) is compared with the finished 'b-s0', which ends at 0.55. In chain 1's draws
    'a-s0' ends near 0.45, in chain 2's near `second_chain` (spread 0.05 either side)."""

    run_ids = ["a-s0", "b-s0"]
    compute_unit = "flops"

    def __init__(self, second_chain: float, converged: bool = False):
        self.runs_ = pd.DataFrame({"run_id": ["a-s0"] * 10 + ["b-s0"] * 20,
                                   "compute": [1e9 * (i + 1) for i in range(10)] + [1e9 * (i + 1) for i in range(20)]})
        self.at_budget = np.concatenate([spread(0.45, 500), spread(second_chain, 500)])
        self.chain_of_draw = np.repeat([0, 1], 500)
        self.converged = converged

    def diagnostics(self):
        from types import SimpleNamespace

        return SimpleNamespace(converged=self.converged)

    def run_stream(self, run_id):
        return 0

    def sample_curves(self, compute, *, run_id, **_):
        if run_id == "b-s0":
            return np.full((1000, len(compute)), 0.55)
        return np.column_stack([np.full(1000, 0.40) if c < 1.5e10 else self.at_budget for c in compute])


def test_the_advice_of_a_fit_that_did_not_converge_says_what_each_chain_alone_advises():
    """Fast advice fits are flagged nearly always, so the warning on a stop could not say whether the flag
    mattered to it. Each chain's draws are now judged alone as well: here the pooled draws stop 'a-s0' (P 0.075 <
    0.1 of ending above 0.55 + the margin), chain 1 alone stops it (P 0) and chain 2 alone would not (P 0.15).
    The advice itself is the pooled draws', and a converged fit's advice carries none of this."""
    from forecast.early_stop import what_did_not_converge

    config = EarlyStopConfig(min_gain_per_compute=None)
    rec = recommend_runs(_TwoChainFit(0.525), {"a-s0": 2e10}, config)["a-s0"]
    assert (rec.action, rec.rule, rec.value) == ("stop", "beats_best", pytest.approx(0.075))
    assert rec.details["by_chain"] == [
        {"chain": 1, "action": "stop", "rule": "beats_best", "value": 0.0, "threshold": 0.1},
        {"chain": 2, "action": "continue", "rule": "beats_best", "value": pytest.approx(0.15), "threshold": 0.1},
    ]
    assert rec.details["chains_agree"] is False
    said = ("its 2 chains alone disagree (chain 1 stop: beats_best 0 < 0.1; chain 2 continue: beats_best 0.15 >= 0.1), "
            "so this advice rests on how they mix")
    assert rec.details["chains_say"] == said
    assert what_did_not_converge({**rec.details, "convergence_problems": ["R-hat up to 1.2 (> 1.01)"]}) == (
        f"R-hat up to 1.2 (> 1.01); {said}")
    json.dumps(rec.to_dict())  # stopped.json and recommendations.json keep it

    both = recommend_runs(_TwoChainFit(0.45), {"a-s0": 2e10}, config)["a-s0"]
    assert both.stop and both.details["chains_agree"] is True
    assert both.details["chains_say"] == "each of its 2 chains alone says stop (chain 1: beats_best 0 < 0.1; chain 2: beats_best 0 < 0.1)"

    converged = recommend_runs(_TwoChainFit(0.525, converged=True), {"a-s0": 2e10}, config)["a-s0"]
    assert {"by_chain", "chains_agree", "chains_say"}.isdisjoint(converged.details)
    assert what_did_not_converge({}) == "see its diagnostics"
    unflagged = rec.to_dict()
    unflagged["details"] = {k: v for k, v in unflagged["details"].items() if k not in ("by_chain", "chains_agree", "chains_say")}
    assert unflagged == converged.to_dict()
