"""Scale decisions on hand-made posteriors with known answers, and the thin wrappers on a real fit."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from forecast.cli import main
from forecast.decisions import (
    ScaleDecision,
    decide,
    decide_split,
    mcse_of_mean,
    probability_best,
    probability_reach,
    rank_recipes,
    recipe_draws_at,
    recommend_split_text,
    recommend_text,
    recommended_split,
    smallest_compute_by_recipe,
    split_budget,
    summarize_compute_to_target,
)


def test_probability_best_counts_draws_and_splits_ties():
    draws = {"a": np.array([1.0, 1.0, 0.0, 0.5]), "b": np.array([0.0, 0.0, 1.0, 0.5])}
    p = probability_best(draws)
    assert p == {"a": pytest.approx(0.625), "b": pytest.approx(0.375)}  # 2 + 0.5 of 4 draws
    assert sum(p.values()) == pytest.approx(1.0)


def test_probability_best_needs_aligned_draws():
    with pytest.raises(ValueError, match="same number of draws"):
        probability_best({"a": np.zeros(3), "b": np.zeros(4)})


def test_rank_recipes_known_answer(rng):
    # a: clearly higher mean; c: lower mean but tight, so its downside beats b's
    draws = {
        "a": rng.normal(0.70, 0.01, 4000),
        "b": rng.normal(0.60, 0.05, 4000),
        "c": rng.normal(0.58, 0.002, 4000),
    }
    table = rank_recipes(draws, target=0.65, budget=1e4)
    assert list(table["recipe"]) == ["a", "b", "c"]
    row = table.set_index("recipe")
    # P(b > a) = P(N(-0.1, sqrt(0.01^2 + 0.05^2)) > 0) = 0.025; c never wins
    assert row.loc["a", "p_best"] == pytest.approx(norm.cdf(0.1 / np.hypot(0.01, 0.05)), abs=0.01)
    assert row.loc["c", "p_best"] < 0.01
    assert row.loc["a", "expected"] == pytest.approx(0.70, abs=0.002)
    assert row.loc["a", "q05"] == pytest.approx(0.70 - 1.645 * 0.01, abs=0.002)
    assert row.loc["a", "p_target"] == pytest.approx(1.0)
    assert row.loc["b", "p_target"] == pytest.approx(1 - 0.8413, abs=0.02)  # P(N(.6,.05) >= .65)
    assert row.loc["c", "q05"] > row.loc["b", "q05"]


def test_probability_reach():
    assert probability_reach({"a": np.array([0.1, 0.5, 0.7, 0.9])}, 0.6) == {"a": 0.5}


def test_compute_to_target_summary_is_honest_about_never():
    c = np.array([1.0, 2.0, 3.0, np.inf, np.inf] * 20)
    s = summarize_compute_to_target(c)
    assert s["p_reach_ever"] == pytest.approx(0.6)
    assert s["compute_q50"] == 3.0
    assert np.isinf(s["compute_q95"])


def test_compute_to_target_summary_names_each_quantile_as_predict_does():
    """Names were rounded to whole percents: 0.025 came out as compute_q02 and 0.975 as compute_q98,
    and of quantiles (0.02, 0.025) only one column was left, holding the 2.5% quantile as q02."""
    c = np.arange(1.0, 1001.0)
    s = summarize_compute_to_target(c, quantiles=(0.025, 0.5, 0.975))
    assert s == {"p_reach_ever": 1.0, "compute_q2_5": 25.0, "compute_q50": 500.0, "compute_q97_5": 975.0}
    s = summarize_compute_to_target(c, quantiles=(0.02, 0.025))
    assert s["compute_q02"] == 20.0 and s["compute_q2_5"] == 25.0
    with pytest.raises(ValueError, match="quantiles must lie in"):
        summarize_compute_to_target(c, quantiles=(5, 95))  # percents, not levels


def test_a_compute_to_target_below_the_data_is_said_to_be_the_curve_traced_back(rng):
    """`decide --target 0.3` on runs whose first evaluations already pass 0.3 gave '4.69e8 flops' beside data
    from 7.55e9 on, as if it were a plan; the far side of the data was said, this side was not."""
    draws = {"a": rng.normal(0.70, 0.01, 2000), "b": rng.normal(0.60, 0.01, 2000)}
    c_star = {"a": np.full(2000, 5e3), "b": np.full(2000, np.inf)}
    table = rank_recipes(draws, target=0.65, compute_to_target=c_star, budget=1e5)
    said = recommend_text(table, budget=1e5, target=0.65, unit="gpu_hours", smallest_observed=1e4)
    assert ("compute to reach 0.65: 5,000 gpu_hours, below the smallest compute observed (10,000 gpu_hours): the "
            "curve traced back, not something the data show (") in said
    assert "traced back" not in recommend_text(table, budget=1e5, target=0.65, unit="gpu_hours", smallest_observed=1e3)


def test_recommendation_cites_its_numbers(rng):
    draws = {"a": rng.normal(0.70, 0.01, 2000), "b": rng.normal(0.60, 0.01, 2000)}
    c_star = {"a": np.full(2000, 5e3), "b": np.full(2000, np.inf)}
    table = rank_recipes(draws, target=0.65, compute_to_target=c_star, budget=1e4)
    text = recommend_text(table, budget=1e4, target=0.65, unit="gpu_hours")
    top = table.iloc[0]
    assert text.startswith("Scale 'a'")
    assert f"{top.expected:.3f}" in text and f"P(best) = {top.p_best:.2f}" in text
    assert f"{top.q05:.3f}" in text  # the downside
    assert "Runner-up 'b'" in text
    assert "at 10,000 gpu_hours" in text and "compute to reach 0.65: 5,000 gpu_hours" in text  # as the report prints compute


def test_recommendation_explains_p_target_above_p_reach_ever(rng):
    """A curve topping out just below the target: the metric at the budget (with wander) can still
    clear it, so P(target at budget) > P(ever reaches it), and the text says why."""
    draws = {"a": rng.normal(0.64, 0.02, 2000)}  # P(>= 0.65) about 0.31
    c_star = {"a": np.where(np.arange(2000) < 200, 5e3, np.inf)}  # the curve reaches it in 10% of draws
    table = rank_recipes(draws, target=0.65, compute_to_target=c_star, budget=1e4)
    assert table.loc[0, "p_target"] > table.loc[0, "p_reach_ever"]
    assert "so the two can disagree" in recommend_text(table, budget=1e4, target=0.65)
    agree = rank_recipes({"a": rng.normal(0.70, 0.01, 2000)}, target=0.65, compute_to_target={"a": np.full(2000, 5e3)}, budget=1e4)
    assert agree.loc[0, "p_target"] == agree.loc[0, "p_reach_ever"] == 1.0
    assert "so the two can disagree" not in recommend_text(agree, budget=1e4, target=0.65)


def test_recommendation_says_too_close_to_call(rng):
    draws = {"a": rng.normal(0.601, 0.02, 2000), "b": rng.normal(0.600, 0.02, 2000)}
    text = recommend_text(rank_recipes(draws, budget=1.0), budget=1.0)
    assert text.startswith("Too close to call")


def test_a_runner_up_within_monte_carlo_noise_of_others_is_said_to_be_level(rng):
    """examples/trainer_sweep at the page's budget, fitted with random_seed 0-3: the runner-up was
    'scalerl-bs8' or 'cispo' by turns, on expected metrics 0.0001-0.0011 apart (printed 0.527 for
    both) while each moved about 0.001 from fit to fit: the text named a second place the sampler
    chose. Recipes within 2 Monte Carlo standard errors of the runner-up are now named as level."""

    def draws_with_mean(mean, sd):
        d = rng.normal(0.0, sd, 2000)
        return d - d.mean() + mean

    draws = {"a": draws_with_mean(0.569, 0.05), "b": draws_with_mean(0.5271, 0.04),
             "c": draws_with_mean(0.5270, 0.04), "d": draws_with_mean(0.5020, 0.04)}
    table = rank_recipes(draws, budget=1.0)
    assert table.loc[1, "expected_mcse"] == pytest.approx(0.04 / np.sqrt(2000), rel=0.1)
    p = table.loc[0, "p_best"]
    assert table.loc[0, "p_best_mcse"] == pytest.approx(np.sqrt(p * (1 - p) / 2000), rel=0.2)
    assert table.loc[0, "p_best_mcse"] >= np.sqrt(p * (1 - p) / 2000) - 1e-15  # never below independent draws
    text = recommend_text(table, budget=1.0)
    assert "Runner-up 'b': expected 0.527" in text
    assert "(level with 'c' within Monte Carlo noise: which of them comes second can change from fit to fit)" in text
    # a runner-up clear of the rest by many standard errors is named alone
    draws["c"] = draws_with_mean(0.5170, 0.04)
    clear = recommend_text(rank_recipes(draws, budget=1.0), budget=1.0)
    assert "Runner-up 'b': expected 0.527, P(best)" in clear and "Monte Carlo noise" not in clear


def test_a_runner_up_level_with_many_recipes_names_a_few_and_counts_the_rest(rng):
    """A sweep of 200 near-equal recipes (an analyst's grid over learning rate and batch size) named
    every recipe level with the runner-up in one sentence: ten 50-character names there, and as many
    as the grid holds in a wider one. Three are named, the rest counted."""
    draws = {"lead": rng.normal(0.6, 0.01, 2000)}
    for k in range(40):
        d = rng.normal(0.0, 0.04, 2000)
        draws[f"grid-{k:02d}"] = d - d.mean() + 0.5
    text = recommend_text(rank_recipes(draws, budget=1.0), budget=1.0)
    level = re.search(r"\(level with (.*) within Monte Carlo noise", text).group(1)
    assert re.fullmatch(r"'grid-\d\d', 'grid-\d\d', 'grid-\d\d' and 36 more recipes in the table", level), level


def test_a_p_best_just_under_the_bar_is_printed_so_it_reads_below_it(rng):
    """P(best) 0.7983 was printed "= 0.80, below 0.80 (the bar for a clear winner)"."""
    draws = {"a": rng.normal(0.62, 0.02, 2000), "b": rng.normal(0.60, 0.02, 2000)}
    table = rank_recipes(draws, budget=1.0)
    table.loc[0, "p_best"], table.loc[1, "p_best"] = 0.7983, 0.2017
    text = recommend_text(table, budget=1.0)
    assert "P(best) = 0.798, below 0.80 (the bar for a clear winner" in text


@pytest.mark.parametrize("p_best, verdict, near", [(0.79, "Too close to call", True), (0.815, "Scale 'a'", True),
                                                  (0.70, "Too close to call", False), (0.90, "Scale 'a'", False)])
def test_a_p_best_within_monte_carlo_noise_of_the_bar_says_a_refit_can_call_it_the_other_way(rng, p_best, verdict, near):
    """Whether the text says "Scale" or "Too close to call" turns on P(best) >= 0.80; within two
    Monte Carlo standard errors of the bar that is the sampler's luck, and the text says so."""
    draws = {"a": rng.normal(0.62, 0.02, 2000), "b": rng.normal(0.60, 0.02, 2000)}
    table = rank_recipes(draws, budget=1.0)
    table.loc[0, "p_best"], table.loc[1, "p_best"] = p_best, 1 - p_best
    table.loc[0, "p_best_mcse"] = 0.01
    text = recommend_text(table, budget=1.0)
    assert text.startswith(verdict)
    said = "standard error 0.010: a refit with another random seed can call it the other way)"
    assert (said in text) is near
    if near:  # inside the verdict's own sentence, which the report takes as its headline
        assert ("(the bar for a clear winner; within Monte Carlo noise of it, " + said if verdict.startswith("Too")
                else "(within Monte Carlo noise of the 0.80 bar for a clear winner, " + said) in text.split(". ")[0] + ")"


def test_recommendation_names_the_risk_averse_choice(rng):
    draws = {"risky": rng.normal(0.66, 0.06, 4000), "safe": rng.normal(0.64, 0.003, 4000)}
    text = recommend_text(rank_recipes(draws, budget=1.0), budget=1.0)
    assert "Risk-averse choice: 'safe'" in text


def test_split_budget_known_answers():
    # flat curves and two equally uncertain recipes: splitting buys the best of two at no cost
    rng = np.random.default_rng(1)
    noise = {"a": rng.normal(0, 0.05, 4000), "b": rng.normal(0, 0.05, 4000)}
    flat = split_budget(lambda r, c, n: 0.6 + noise[r][:, None], ["a", "b"], 100.0, max_ways=2)  # seeds alike
    assert flat.loc[1, "expected_best"] > flat.loc[0, "expected_best"] + 0.02  # E[max] of two N(0, .05)
    assert sorted(flat.loc[1, "recipes"]) == ["a", "b"]  # a second seed of one adds nothing: the other recipe
    # steep curves and no doubt about the best: one run at the whole budget wins
    steep = split_budget(lambda r, c, n: np.full((10, n), (0.7 if r == "a" else 0.5) * c / 100.0), ["a", "b"], 100.0)
    assert steep.loc[steep["expected_best"].idxmax(), "ways"] == 1
    assert steep.loc[0, "recipes"] == ["a"]
    assert len(steep) == 4, "up to max_ways runs, more than the recipes: seeds of one"


def test_split_budget_runs_more_seeds_of_one_recipe_when_seeds_spread():
    """One recipe, flat curves: a second seed at half the compute is worth its E[max] when seeds
    spread independently, and nothing when they do not."""
    rng = np.random.default_rng(2)
    own = rng.normal(0, 0.05, (4000, 3))
    spread = split_budget(lambda r, c, n: 0.6 + own[:, :n], ["a"], 100.0, max_ways=3)
    assert list(spread["recipes"]) == [["a"], ["a", "a"], ["a", "a", "a"]]
    assert spread.loc[1, "expected_best"] == pytest.approx(0.6 + 0.05 / np.sqrt(np.pi), abs=0.003)  # E[max] of two
    shared = split_budget(lambda r, c, n: np.repeat(0.6 + own[:, :1], n, axis=1), ["a"], 100.0, max_ways=3)
    assert shared["expected_best"].nunique() == 1
    assert list(spread["level_with"]) == [1, 2, 3] and list(shared["level_with"]) == [1, 1, 1]
    assert recommend_split_text(spread, total=100.0).startswith("Split 100 compute units into 3 runs of 33 ('a' (3 seeds))")
    assert "Put the whole" in recommend_split_text(shared, total=100.0)
    # a recipe well ahead gets its second seed before a weaker recipe's first
    ahead = split_budget(lambda r, c, n: (0.7 if r == "a" else 0.5) + own[:, :n], ["b", "a"], 100.0, max_ways=2)
    assert ahead.loc[1, "recipes"] == ["a", "a"]


def test_new_seeds_share_their_recipes_extrapolation_error(fitted):
    """Column 0 is what every decision reads for the recipe; the other seeds are drawn alike within
    the data; beyond it, where a recipe's extrapolation error grows, its seeds move together."""
    recipe = fitted.recipes[0]
    c_max = float(fitted.runs_.loc[fitted.runs_["recipe"] == recipe, "compute"].max())
    within = fitted.sample_new_seeds(c_max, recipe=recipe, n_seeds=3)
    assert within.shape == (len(recipe_draws_at(fitted, recipe, c_max)), 3)
    np.testing.assert_array_equal(within[:, 0], recipe_draws_at(fitted, recipe, c_max))
    assert abs(within[:, 0].mean() - within[:, 1].mean()) < 0.01 and abs(within[:, 1].mean() - within[:, 2].mean()) < 0.01
    assert within[:, 1].std() == pytest.approx(within[:, 0].std(), rel=0.15)
    far = fitted.sample_new_seeds(64 * c_max, recipe=recipe, n_seeds=2)
    np.testing.assert_array_equal(far[:, 0], recipe_draws_at(fitted, recipe, 64 * c_max))
    assert far[:, 1].std() == pytest.approx(far[:, 0].std(), rel=0.15)
    corr_within, corr_far = (np.corrcoef(d[:, 0], d[:, 1])[0, 1] for d in (within, far))
    assert corr_far > corr_within + 0.1
    np.testing.assert_array_equal(fitted.sample_new_seeds(c_max, recipe=recipe, n_seeds=3), within)  # reproducible
    with pytest.raises(ValueError, match="n_seeds must be a whole number"):
        fitted.sample_new_seeds(c_max, recipe=recipe, n_seeds=0)


def test_a_split_that_gains_less_than_the_digits_shown_is_not_recommended():
    table = pd.DataFrame({"ways": [1, 2], "compute_per_run": [100.0, 50.0], "recipes": [["a"], ["a", "b"]],
                          "expected_best": [0.696387, 0.696397], "q05": [0.6, 0.6], "q95": [0.8, 0.8]})
    text = recommend_split_text(table, total=100.0)
    assert text.startswith("Put the whole 100 compute units into one run of 'a'")
    table.loc[1, "expected_best"] = 0.6990  # a gain that shows
    assert recommend_split_text(table, total=100.0).startswith("Split 100 compute units into 2 runs")
    # across a rounding boundary: 0.6964 prints 0.696 and 0.6968 prints 0.697, so the split shows higher
    table["expected_best"] = [0.6964, 0.6968]
    assert recommend_split_text(table, total=100.0).startswith("Split 100 compute units into 2 runs")
    # a gain that shows in the digits but lies within two Monte Carlo standard errors of it is noise
    table["gain_mcse"] = [0.0, 0.0003]
    text = recommend_split_text(table, total=100.0)
    assert text.startswith("Put the whole 100 compute units into one run of 'a'")
    assert "a gain of 0.0004 within Monte Carlo noise (standard error 0.0003)" in text
    table["gain_mcse"] = [0.0, 0.0001]
    assert recommend_split_text(table, total=100.0).startswith("Split 100 compute units into 2 runs")


def test_a_split_that_gains_for_real_is_recommended_beside_a_higher_one_within_noise():
    """Only the highest split was judged against its Monte Carlo error: a 3-way split within noise
    made the text say "one run" beside a 2-way split that gains 5 standard errors over it."""
    table = pd.DataFrame({"ways": [1, 2, 3], "compute_per_run": [90.0, 45.0, 30.0],
                          "recipes": [["a"], ["a", "b"], ["a", "b", "a"]], "expected_best": [0.600, 0.610, 0.612],
                          "q05": [0.5] * 3, "q95": [0.7] * 3, "gain_mcse": [0.0, 0.002, 0.007]})
    text = recommend_split_text(table, total=90.0)
    assert text.startswith("Split 90 compute units into 2 runs of 45 ('a', 'b')"), text
    assert "expected 0.610" in text and "0.600 for one run of 'a'" in text
    table["gain_mcse"] = [0.0, 0.006, 0.007]  # both within noise: one run, the highest split named as noise
    text = recommend_split_text(table, total=90.0)
    assert text.startswith("Put the whole 90 compute units into one run of 'a'")
    assert "3 runs of 30 ('a' (2 seeds), 'b') give 0.612, a gain of 0.0120 within Monte Carlo noise" in text


def test_decide_on_a_fitted_model(fitted):
    budget = 4 * float(fitted.runs_["compute"].max())
    decision = decide(fitted, budget, target=0.6)
    table = decision.table
    assert set(table["recipe"]) == set(fitted.recipes)
    assert table["p_best"].sum() == pytest.approx(1.0)
    assert table["expected"].is_monotonic_decreasing
    # scout (A = 0.71 in Table 1) is far ahead of the others in the shared sweep
    assert table.iloc[0]["recipe"] == "scalerl_scout_moe"
    assert "scalerl_scout_moe" in decision.recommendation
    payload = json.loads(json.dumps(decision.to_dict(), default=str))
    assert payload["table"][0]["recipe"] == "scalerl_scout_moe"
    # one question, one answer: compute to target as decide and as the forecaster give it
    ctt = fitted.compute_to_target(0.6).set_index("recipe")
    for row in table.itertuples():
        assert row.p_reach_ever == ctt.loc[row.recipe, "p_reach"]
        assert row.compute_q50 == ctt.loc[row.recipe, "q50"] and row.compute_q95 == ctt.loc[row.recipe, "q95"]
    split = decide_split(fitted, budget, max_ways=2)
    assert list(split.table["ways"]) == [1, 2]
    assert split.table.loc[0, "expected_best"] == pytest.approx(table.set_index("recipe").loc[split.table.loc[0, "recipes"][0], "expected"])
    one = decide_split(fitted, budget, max_ways=3, recipes=[fitted.recipes[0]])  # seeds of one recipe: still a question
    assert list(one.table["recipes"]) == [[fitted.recipes[0]] * k for k in (1, 2, 3)]
    assert "Nothing was compared" not in one.recommendation


def test_decide_cli_on_a_saved_fit(fitted, tmp_path, capsys):
    fitted.save(tmp_path / "fit.nc")
    budget = 4 * float(fitted.runs_["compute"].max())
    assert main(["decide", str(tmp_path), "--budget", f"{budget}", "--target", "0.6", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["recommendation"] and payload["table"][0]["recipe"] == "scalerl_scout_moe"
    assert main(["decide", str(tmp_path), "--budget", "-1"]) == 2
    assert "--budget must be finite and > 0" in capsys.readouterr().err
    assert main(["decide", str(tmp_path), "--budget", "inf"]) == 2
    assert "--budget must be finite and > 0, got inf" in capsys.readouterr().err


def test_a_decision_prints_never_where_a_column_mixes_finite_compute_and_inf(rng):
    from forecast.decisions import ScaleDecision

    c_star = {"a": np.where(np.arange(2000) < 1500, 5e3, np.inf), "b": np.full(2000, np.inf)}
    draws = {"a": rng.normal(0.64, 0.02, 2000), "b": rng.normal(0.60, 0.02, 2000)}
    table = rank_recipes(draws, target=0.65, compute_to_target=c_star, budget=1e4)
    text = str(ScaleDecision(table=table, recommendation="r", budget=1e4, target=0.65, unit="gpu_hours"))
    assert text.startswith("compute in gpu_hours") and "5,000" in text and "never" in text and "inf" not in text
    # in JSON "never" is null, as report --json writes it, and the text is strict JSON (no Infinity)
    payload = json.loads(json.dumps(ScaleDecision(table=table, recommendation="r").to_dict(), allow_nan=False))
    rows = {row["recipe"]: row for row in payload["table"]}
    assert rows["b"]["compute_q50"] is None and rows["a"]["compute_q50"] == pytest.approx(5e3)


def test_a_small_probability_reads_as_the_report_table_prints_it(rng):
    # 3 draws in 1000 where 'b' is best: two decimals would say P(best) = 0.00, the report's table
    # says <0.01; the sentence must say what the table says
    from forecast.formatting import fmt_prob

    a = np.full(1000, 0.70)
    b = np.full(1000, 0.60)
    b[:3] = 0.75
    table = rank_recipes({"a": a, "b": b}, budget=1e4)
    text = recommend_text(table, budget=1e4)
    assert table.set_index("recipe").loc["b", "p_best"] == pytest.approx(0.003)
    assert "Runner-up 'b': expected 0.600, P(best) < 0.01." in text
    assert "P(best) > 0.99" in text and "= 0.00" not in text and "= 1.00" not in text
    assert fmt_prob(0.003) == "<0.01" and fmt_prob(0.997) == ">0.99" and fmt_prob(0.0) == "0.00"


def test_a_share_of_draws_on_a_rounding_tie_reads_in_two_decimals_as_its_longer_form_rounds():
    """129 of 600 draws at the target: decide's table and summary.json say p_target 0.215 and p_reach
    0.495, and the sentence under the table and the report's page said 0.21 and 0.49 (the binary
    value of 0.215 lies just below it, and f"{p:.2f}" rounds that), where a reader of the table
    rounds to 0.22 and 0.50. Every two-decimal probability is now rounded as it is written."""
    from forecast.early_stop import _probability_against
    from forecast.formatting import fmt_prob, shown_so_it_reads_true

    a = np.r_[np.full(129, 0.65), np.full(471, 0.55)]  # P(>= 0.6) = 129/600 = 0.215
    b = np.full(600, 0.50)
    table = rank_recipes({"a": a, "b": b}, target=0.6, budget=1e4,
                         compute_to_target={"a": np.r_[np.full(375, 5e3), np.full(225, np.inf)], "b": np.full(600, np.inf)})
    row = table.set_index("recipe").loc["a"]
    assert (f"{row.p_target:.4g}", f"{row.p_reach_ever:.4g}") == ("0.215", "0.625")  # decide's table
    text = recommend_text(table, budget=1e4, target=0.6)
    assert "P(>= 0.6 at this budget) = 0.22 for 'a'" in text and "P(ever reaches it) = 0.63" in text
    assert (fmt_prob(0.215), fmt_prob(0.495), fmt_prob(0.125), fmt_prob(0.2149)) == ("0.22", "0.50", "0.13", "0.21")
    assert (fmt_prob(0.005), fmt_prob(0.995), fmt_prob(1.0)) == ("0.01", ">0.99", "1.00")  # 1.00 is all of the draws
    assert shown_so_it_reads_true(0.215, lambda v: v > 0.2, 2) == "0.22"
    assert _probability_against(0.215, 0.1, False) == "= 0.22 >= 0.1"  # a run's stop advice, as the page


def test_p_ever_reaches_reads_below_one_half_beside_a_median_of_never():
    """297 of 600 draws reach the target: the median compute is never, and the sentence beside it said
    "P(ever reaches it) = 0.50" (as did the report's compute-to-target table beside its 'never'): fewer
    than half of the draws reaching it reads as half. It is 0.495 there, as many digits as it takes."""
    from forecast.report import compute_to_target_html

    a = np.r_[np.full(129, 0.65), np.full(471, 0.55)]
    reach = np.r_[np.full(297, 5e3), np.full(303, np.inf)]
    table = rank_recipes({"a": a, "b": np.full(600, 0.5)}, target=0.6, budget=1e4,
                         compute_to_target={"a": reach, "b": np.r_[np.full(300, 5e3), np.full(300, np.inf)]})
    assert not np.isfinite(table.set_index("recipe").loc["a", "compute_q50"])
    assert "never, in the median draw (90% interval 5,000-never; P(ever reaches it) = 0.495)" in recommend_text(
        table, budget=1e4, target=0.6)
    page = pd.DataFrame({"recipe": ["a", "b"], "c_target_q50": [np.inf, 5e3], "c_target_q05": [5e3, 5e3],
                         "c_target_q95": [np.inf, np.inf], "p_reach": [297 / 600, 0.5], "p_target": [0.215, 0.2]})
    html = compute_to_target_html(page, 1e4, "flops", 0.6)
    assert ">0.495<" in html and ">0.50<" in html  # exactly half reach it: the median is finite, and 0.50 stands


def test_a_target_no_recipe_reaches_at_the_budget_is_said_first(rng):
    draws = {"a": rng.normal(0.60, 0.01, 4000), "b": rng.normal(0.55, 0.01, 4000)}
    text = recommend_text(rank_recipes(draws, target=0.7, budget=1e4), budget=1e4, target=0.7)
    assert text.startswith("No recipe is likely to reach 0.7 at 10,000 compute units: the best chance is P = 0.00 for every recipe")
    reachable = recommend_text(rank_recipes(draws, target=0.6, budget=1e4), budget=1e4, target=0.6)
    assert reachable.startswith("Scale 'a'")


def test_the_two_target_measures_are_explained_when_they_point_different_ways(rng):
    # the median compute to target lies within the budget, yet fewer than half the draws are at the target there
    draws = {"a": rng.normal(0.595, 0.02, 4000)}
    c_star = {"a": np.full(4000, 5e3)}
    table = rank_recipes(draws, target=0.6, compute_to_target=c_star, budget=1e4)
    assert table.loc[0, "p_target"] < 0.5 and table.loc[0, "p_reach_ever"] == 1.0
    assert "so the two can disagree" in recommend_text(table, budget=1e4, target=0.6)
    table = rank_recipes({"a": rng.normal(0.62, 0.01, 4000)}, target=0.6, compute_to_target=c_star, budget=1e4)
    assert "so the two can disagree" not in recommend_text(table, budget=1e4, target=0.6)


def test_the_likeliest_other_winner_and_the_runner_up_are_printed_apart(rng):
    """'the likeliest other winner, P(best) = 0.12' beside 'Runner-up ..., P(best) = 0.12' (0.125
    against 0.118) called one likelier while printing the same number for both."""
    draws = {"a": rng.normal(0.62, 0.02, 2000), "b": rng.normal(0.61, 0.001, 2000), "c": rng.normal(0.55, 0.08, 2000)}
    table = rank_recipes(draws, budget=1.0)
    assert list(table["recipe"]) == ["a", "b", "c"]
    table["p_best"] = [0.758, 0.118, 0.124]  # 0.125 is 0.13 in two decimals (a tie rounds up), 0.124 is 0.12
    text = recommend_text(table, budget=1.0)
    assert "(the likeliest other winner, P(best) = 0.124)" in text and "P(best) = 0.118." in text


def test_a_decision_table_writes_compute_as_its_recommendation_does(rng):
    """`forecast decide` printed compute_q50 '2.954e+12' and budget '4.08e+12' in its table, and
    '2.95e12' and '4.08e12' in the recommendation under it: compute one way, as the report writes it."""
    from forecast.decisions import ScaleDecision, recommend_text, split_budget

    c_star = {"a": np.full(2000, 2.954e12), "b": np.where(np.arange(2000) < 1500, 9.91e11, np.inf)}
    draws = {"a": rng.normal(0.64, 0.02, 2000), "b": rng.normal(0.60, 0.02, 2000)}
    table = rank_recipes(draws, target=0.62, compute_to_target=c_star, budget=4.08e12)
    text = recommend_text(table, budget=4.08e12, target=0.62, unit="flops")
    shown = str(ScaleDecision(table=table, recommendation=text, budget=4.08e12, target=0.62, unit="flops"))
    assert "e+" not in shown and "4.08e12" in shown.split("\n\n")[0] and "2.95e12" in shown.split("\n\n")[0]
    assert "2.95e12" in text  # the sentence cites the number the table shows
    split = split_budget(lambda r, c, n: draws[r], ["a", "b"], 4.08e12, max_ways=2)
    shown = str(ScaleDecision(table=split, recommendation="r", budget=4.08e12, unit="flops"))
    assert "e+" not in shown and "2.04e12" in shown


def test_another_recipe_is_called_likelier_to_reach_the_target_only_where_the_printed_numbers_say_so():
    """'P(>= 0.6 at this budget) = 0.57 for 'a'. For the target alone, 'b' is likelier to get there
    (P = 0.57).': 0.574 against 0.571, a difference the sentence's digits do not show (and well within
    Monte Carlo noise), called a difference in words. A tie in the digits shown is none, as for the
    risk-averse choice; a difference that shows is still said."""
    n = 2000
    a = np.where(np.arange(n) < 1142, 0.70, 0.50)  # P(>= 0.6) 0.571, expected 0.614: ranked first
    for b_reach, said in [(1148, False), (1180, True)]:  # 0.574 (prints as 0.57), 0.590 (0.59)
        b = np.roll(np.where(np.arange(n) < b_reach, 0.66, 0.52), 500)
        table = rank_recipes({"a": a, "b": b}, target=0.6, budget=1e4)
        assert list(table["recipe"]) == ["a", "b"] and table.loc[1, "p_target"] > table.loc[0, "p_target"]
        text = recommend_text(table, budget=1e4, target=0.6)
        assert ("For the target alone, 'b' is likelier" in text) is said, text
        if said:
            assert "(P = 0.59)" in text and "= 0.57 for 'a'" in text


def test_no_recipe_likely_to_reach_the_target_cites_a_chance_that_reads_below_the_bar():
    """'the best chance is P = 0.05 for 'a' (below 0.05)': P(>= target) 0.0495 printed with two
    decimals contradicted the bar it was said to be below; it gets the digits its comparison needs."""
    n = 2000
    a = np.where(np.arange(n) < 99, 0.70, 0.55)  # P(>= 0.65) = 0.0495
    b = np.full(n, 0.50)
    table = rank_recipes({"a": a, "b": b}, target=0.65, budget=1e4)
    text = recommend_text(table, budget=1e4, target=0.65)
    assert text.startswith("No recipe is likely to reach 0.65") and "P = 0.0495 for 'a' (below 0.05)" in text, text


def _far_warnings(call):
    """The FarFromDataWarning messages a call gives, every one of them (not once per location)."""
    import warnings

    from forecast import FarFromDataWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in caught if issubclass(w.category, FarFromDataWarning)]


def test_a_budget_far_from_the_data_is_flagged_in_python_as_forecast_decide_flags_it(fitted):
    """`forecast decide --budget` says a budget 100x beyond the data (or below it) is likely in
    another unit; decide() and decide_split() in a notebook said nothing. Once per call."""
    from forecast.formatting import fmt_compute

    largest, smallest = float(fitted.runs_["compute"].max()), float(fitted.runs_["compute"].min())
    far = _far_warnings(lambda: decide(fitted, 1e3 * largest, target=0.6))
    assert len(far) == 1 and far[0].startswith(f"budget {fmt_compute(1e3 * largest)} is 1,000x the largest compute")
    assert "Is the unit right?" in far[0]
    below = _far_warnings(lambda: decide_split(fitted, smallest / 10, max_ways=2))
    assert len(below) == 1 and below[0].startswith("total ") and "below the smallest compute" in below[0]
    assert _far_warnings(lambda: decide(fitted, 4 * largest)) == []  # an ordinary plan says nothing


class _HandMadeFit:
    """What decide_split reads of a fit: its runs' compute and unit, its recipes, and draws of new seeds
    (a curve that climbs with log compute, seeds spread about it)."""

    compute_unit = "flops"
    recipes = ["a", "b"]
    runs_ = pd.DataFrame({"recipe": ["a", "a", "a", "b", "b", "b"], "compute": [270.0, 1e3, 2e3] * 2})

    def sample_new_seeds(self, compute, *, recipe, n_seeds):
        rng = np.random.default_rng(self.recipes.index(recipe))
        return rng.normal(0.3 + 0.05 * np.log10(compute), 0.03, (500, n_seeds))


def test_splits_whose_runs_fall_below_the_data_are_left_out_saying_why():
    """decide --total 1e4 --max-ways 64 on data from 270 flops up split the total into runs of down to
    156 flops, forecast before any run's first evaluation, and only the total was checked against the
    data. Such splits are now left out, and the recommendation says which and why."""
    from forecast.data import FarFromDataWarning

    fc = _HandMadeFit()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FarFromDataWarning)  # the total itself lies within the data
        split = decide_split(fc, 1e4, max_ways=64)
    assert list(split.table["ways"]) == list(range(1, 38))  # 1e4 / 37 = 270.3; 1e4 / 38 = 263
    assert split.table["compute_per_run"].min() >= 270
    assert split.extra["ways_left_out"] == list(range(38, 65))
    assert split.recommendation.endswith(
        "Splits into 38 to 64 runs are left out: each run would get 263 flops or less, below the smallest "
        "compute in the data (270 flops), where the forecast would extrapolate the curves backwards, before "
        "any run's first evaluation.")
    assert decide_split(fc, 1e4, max_ways=38).recommendation.endswith("A split into 38 runs is left out: each "
                                                                      "run would get 263 flops, below the "
                                                                      "smallest compute in the data (270 flops), where "
                                                                      "the forecast would extrapolate the curves "
                                                                      "backwards, before any run's first evaluation.")
    within = decide_split(fc, 1e4, max_ways=4)  # runs of 2,500 and more: all within the data
    assert list(within.table["ways"]) == [1, 2, 3, 4] and within.extra["ways_left_out"] == []
    assert "left out" not in within.recommendation
    with pytest.warns(FarFromDataWarning, match="total 100 is below the smallest compute"):
        below = decide_split(fc, 100, max_ways=3)  # the total is said to be below the data; its splits are left out
    assert list(below.table["ways"]) == [1] and below.extra["ways_left_out"] == [2, 3]


def test_a_split_whose_runs_get_exactly_the_smallest_compute_is_kept():
    """A total of three times the data's smallest compute, 0.3 GPU-hours on data from 0.1 up, split
    three ways gives each run 0.1, within the data; in floats 0.3 / 3 is 0.09999999999999999, and the
    split was left out saying 'each run would get 0.1 GPU-hours, below the smallest compute in the
    data (0.1 GPU-hours)', a sentence that contradicts itself."""
    class SmallUnits(_HandMadeFit):
        compute_unit = "GPU-hours"
        runs_ = pd.DataFrame({"recipe": ["a", "a", "a", "b", "b", "b"], "compute": [0.1, 0.2, 0.4] * 2})

    split = decide_split(SmallUnits(), 0.3, max_ways=4)
    assert list(split.table["ways"]) == [1, 2, 3] and split.extra["ways_left_out"] == [4]
    assert "A split into 4 runs is left out: each run would get 0.075 GPU-hours" in split.recommendation


class _LaterStart(_HandMadeFit):
    """Recipe 'b', the better one, first evaluated at 2,000 flops; 'a' from 270."""

    runs_ = pd.DataFrame({"recipe": ["a", "a", "a", "b", "b"], "compute": [270.0, 1e3, 2e3, 2e3, 4e3]})

    def sample_new_seeds(self, compute, *, recipe, n_seeds):
        rng = np.random.default_rng(self.recipes.index(recipe))
        return rng.normal(0.3 + 0.05 * np.log10(compute) + 0.05 * (recipe == "b"), 0.03, (500, n_seeds))


def test_a_split_leaves_out_a_recipe_whose_runs_would_fall_below_its_own_data():
    """decide --total judged splits against the smallest compute of all recipes, so a recipe first
    evaluated later ('b' from 2,000 flops, 'a' from 270) was forecast backwards below its own data
    and picked for runs of 1,250 flops, with nothing said. Each recipe is now judged against its own
    smallest compute: it takes no part in the splits below it, and the sentence and JSON name it."""
    split = decide_split(_LaterStart(), 1e4, max_ways=8)
    runs = dict(zip(split.table["ways"], split.table["recipes"], strict=True))
    assert list(runs) == list(range(1, 9))  # 'a''s data reach every split: none is left out whole
    assert all("b" in runs[k] for k in range(1, 6))  # the better recipe, while its data reach (1e4 / 5 = 2,000)
    assert all(set(runs[k]) == {"a"} for k in range(6, 9))  # 1,667 flops a run and less: below 'b''s data
    assert split.extra["ways_left_out"] == []
    assert split.extra["recipes_left_out"] == [{"recipe": "b", "smallest_compute": 2000.0, "ways": [6, 7, 8]}]
    assert split.recommendation.endswith(
        "'b' takes no part in splits into 6 to 8 runs: each run would get 1,667 flops or less, below its smallest "
        "compute in the data (2,000 flops), where its forecast would extrapolate its curve backwards, before its "
        "runs' first evaluation.")
    assert json.loads(json.dumps(split.to_dict()))["recipes_left_out"][0]["ways"] == [6, 7, 8]
    # compared alone, 'b''s own data end the table: its splits below 2,000 are left out whole, said as such
    alone = decide_split(_LaterStart(), 1e4, max_ways=8, recipes=["b"])
    assert list(alone.table["ways"]) == [1, 2, 3, 4, 5] and alone.extra["ways_left_out"] == [6, 7, 8]
    assert alone.extra["recipes_left_out"] == []
    assert "below the smallest compute of the recipes compared (2,000 flops)" in alone.recommendation
    assert "takes no part" not in alone.recommendation


def test_recipes_left_out_of_the_same_splits_share_a_sentence_and_later_ones_give_their_numbers():
    """Three recipes starting at three computes: the first group's sentence says why, the next only its numbers."""
    from forecast.decisions import recipes_left_out_text

    text = recipes_left_out_text(1e4, {"b": [6, 7, 8], "c": [6, 7, 8], "d": [8]}, {"b": 2e3, "c": 2e3, "d": 1.3e3},
                                 "flops")
    assert text == ("'b' and 'c' take no part in splits into 6 to 8 runs: each run would get 1,667 flops or less, below "
                    "their smallest computes in the data (2,000 flops each), where their forecasts would extrapolate "
                    "their curves backwards, before their runs' first evaluation. 'd' takes no part in the split into 8 "
                    "runs (1,250 flops a run, below 1,300 flops).")


def test_a_run_left_out_reads_below_the_data_in_the_digits_shown():
    """On the GPU sweep (grpo from 1.0648e12 flops), decide --budget 5e13 --total --max-ways 64 said
    'each run would get 1.06e12 flops or less, below its smallest compute in the data (1.06e12
    flops)', which contradicts itself in three digits; the two now take the digits it takes to differ."""
    class Close(_HandMadeFit):
        runs_ = pd.DataFrame({"recipe": ["a", "a", "b", "b"], "compute": [1.0648e12, 2e13, 4.9e11, 2e13]})

    split = decide_split(Close(), 5e13, max_ways=64)
    assert ("'a' takes no part in splits into 47 to 64 runs: each run would get 1.064e12 flops or less, below its "
            "smallest compute in the data (1.065e12 flops)") in split.recommendation
    whole = decide_split(Close(), 5e13, max_ways=64, recipes=["a"])
    assert ("Splits into 47 to 64 runs are left out: each run would get 1.064e12 flops or less, below the smallest "
            "compute of the recipes compared (1.065e12 flops)") in whole.recommendation

    class Hundreds(_HandMadeFit):  # compute written with thousands' commas: decimals where they tell apart
        runs_ = pd.DataFrame({"recipe": ["a", "b"], "compute": [1000.0, 1000.0]})

    assert "each run would get 999.6 flops, below the smallest compute in the data (1,000 flops)" in (
        decide_split(Hundreds(), 1999.2, max_ways=2).recommendation)


@pytest.fixture(scope="module")
def later_start_fit():
    """A real fast fit of two recipes, the better one (scout, A = 0.71) first evaluated at 4,298 gpu_hours,
    the other from 381."""
    from forecast import ScalingForecaster
    from forecast.synthetic import simulate_sweep
    from tests.conftest import small_recipe_table

    sweep = simulate_sweep(small_recipe_table(2), n_seeds=2, n_points=16, rng=7)
    sweep = sweep[(sweep["recipe"] == "scalerl_8b") | (sweep["compute"] > 4e3)].reset_index(drop=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ScalingForecaster(mode="fast").fit(sweep, random_seed=0, progress=False)


def test_decide_total_on_a_fit_judges_each_recipe_by_its_own_first_evaluation(later_start_fit, tmp_path, capsys):
    """The same on a real fit: `forecast decide --total 4e4 --max-ways 16` weighed scout for runs down
    to 2,500 gpu_hours, 1.7x before its first evaluation, with nothing said. It now takes no part in
    those splits, which the sentence and the JSON say, and the report's budget split line says too."""
    from forecast.report import scale_decision

    fc = later_start_fit
    scout_from = float(fc.runs_.loc[fc.runs_["recipe"] == "scalerl_scout_moe", "compute"].min())
    split = decide_split(fc, 4e4, max_ways=16)
    for row in split.table.itertuples():  # no run of scout below its data
        assert row.compute_per_run >= scout_from or "scalerl_scout_moe" not in row.recipes
    assert "scalerl_scout_moe" in split.table.loc[0, "recipes"]  # the better recipe, where its data reach
    assert split.extra["recipes_left_out"] == [{"recipe": "scalerl_scout_moe", "smallest_compute": scout_from,
                                                "ways": list(range(10, 17))}]  # 4e4 / 10 = 4,000
    sentence = ("'scalerl_scout_moe' takes no part in splits into 10 to 16 runs: each run would get 4,000 gpu_hours or "
                "less, below its smallest compute in the data (4,298 gpu_hours)")
    assert sentence in split.recommendation and split.extra["ways_left_out"] == []
    fc.save(tmp_path / "fit.nc")
    assert main(["decide", str(tmp_path), "--budget", "4e4", "--total", "--max-ways", "16", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert sentence in payload["recommendation"]
    assert [entry["recipe"] for entry in payload["recipes_left_out"]] == ["scalerl_scout_moe"]
    # the report splits its budget 4 ways: at 1.6e4 the fourth run would get 4,000
    _, recommendation, _ = scale_decision(fc, 1.6e4, None)
    (line,) = [reason for reason in recommendation.reasons if reason.startswith("Budget split: ")]
    assert "'scalerl_scout_moe' takes no part in the split into 4 runs: each run would get 4,000 gpu_hours" in line


def test_decide_refuses_a_target_or_ways_that_are_not_numbers_in_words(fitted):
    """decide(fc, budget, target="0.6") failed as a TypeError comparing a str with 0, and
    decide_split(max_ways="3") likewise; True was taken as one way."""
    budget = 4 * float(fitted.runs_["compute"].max())
    for target in ("0.6", True, float("nan"), 1.0, [0.6]):
        with pytest.raises(ValueError, match="target must lie in \\(0, 1\\), got "):
            decide(fitted, budget, target=target)
    assert decide(fitted, budget, target=np.float32(0.6)).target == pytest.approx(0.6)
    for ways in ("3", True, 2.5, float("nan"), None):
        with pytest.raises(ValueError, match="max_ways must be between 1 and 64 \\(a whole number\\), got "):
            decide_split(fitted, budget, max_ways=ways)
    assert list(decide_split(fitted, budget, max_ways=np.int64(2)).table["ways"]) == [1, 2]



def test_a_decimal_or_a_0d_array_is_taken_as_the_number_it_holds(fitted):
    """A budget or target worked out from a database's numeric column is a Decimal, and one from a
    numpy reduction can be a 0-d array: decide(), decide_split(), compute_to_target(), plot() and
    fit(horizon=) refused them as "budget must be finite and > 0, got Decimal('6.5E+5')", which it is."""
    from decimal import Decimal

    import matplotlib.pyplot as plt

    from forecast.forecaster import _optional_horizon

    budget = 4 * float(fitted.runs_["compute"].max())
    expected = decide(fitted, budget, target=0.6).table
    for given_budget, given_target in ((Decimal(repr(budget)), Decimal("0.6")), (np.array(budget), np.array(0.6))):
        pd.testing.assert_frame_equal(decide(fitted, given_budget, target=given_target).table, expected)
        pd.testing.assert_frame_equal(fitted.compute_to_target(given_target), fitted.compute_to_target(0.6))
        assert decide_split(fitted, given_budget, max_ways=2).budget == budget
        plt.close(fitted.plot(budget=given_budget, target=given_target))
        assert _optional_horizon(given_budget) == budget
    for bad in (Decimal("NaN"), Decimal("sNaN"), Decimal("-1")):
        with pytest.raises(ValueError, match="budget must be finite and > 0"):
            decide(fitted, bad)


@pytest.mark.parametrize("several", [[3000.0], (3000.0, 6000.0), np.array([3000.0]), pd.Series([3000.0, 6000.0])])
def test_several_budgets_at_once_are_named_as_such_not_as_a_bad_number(fitted, several):
    """decide(fc, [3000]) said "budget must be finite and > 0, got [3000]", and the user looked for a bad
    number in a list that had none. It answers for one budget: the error says so, and how many it was given."""
    n = len(several)
    with pytest.raises(ValueError, match=rf"^budget is one compute \(in .*\), got {n} values: .*; ask for one budget at a time$"):
        decide(fitted, several)
    with pytest.raises(ValueError, match=rf"^total is one compute \(in .*\), got {n} values"):
        decide_split(fitted, several)


def test_a_curve_that_starts_above_the_target_and_falls_below_it_is_not_said_to_reach_it(rng):
    """A falling curve (A < R0) whose start is above the target: the documented rule counts the
    target as reached at compute 0 (P(ever) = 1), while at the budget it is below it (P = 0). The
    text said "compute to reach 0.6: 0", blamed the wander for the disagreement and advised a
    larger budget, which takes the curve further down."""
    from forecast.curves import compute_to_target

    n = 2000
    draws = {"a": rng.normal(0.30, 0.02, n), "b": rng.normal(0.35, 0.02, n)}
    c_star = {r: compute_to_target(0.6, rng.normal(a, 0.01, n), 1.0, 1e3, rng.normal(0.7, 0.01, n))
              for r, a in (("a", 0.30), ("b", 0.35))}
    table = rank_recipes(draws, target=0.6, compute_to_target=c_star, budget=1e5)
    assert (table["compute_q50"] == 0).all() and (table["p_reach_ever"] == 1).all()  # the rule stands
    text = recommend_text(table, budget=1e5, target=0.6, unit="flops")
    assert "a larger budget" not in text and "a lower target or a smaller budget" in text
    assert "compute to reach 0.6: 0 flops, as its curve starts at or above 0.6 in the median draw" in text
    assert "falls below 0.6 by this budget" in text and "wander" not in text
    # a rising curve that starts above a low target: reached at 0, and nothing falls
    c_low = {"a": compute_to_target(0.2, rng.normal(0.6, 0.01, n), 1.0, 1e3, rng.normal(0.3, 0.01, n))}
    rising = rank_recipes({"a": rng.normal(0.6, 0.02, n)}, target=0.2, compute_to_target=c_low, budget=1e5)
    text = recommend_text(rising, budget=1e5, target=0.2, unit="flops")
    assert "as its curve starts at or above 0.2" in text and "falls" not in text


def test_the_rules_over_draws_refuse_a_target_total_or_ways_that_are_no_number(rng):
    """The pure layer's own checks: a target "0.6" was numpy's TypeError in rank_recipes and
    probability_reach; split_budget took a NaN total (a table of NaN compute), "1e5" as a
    TypeError and max_ways=0 as an empty table, on which recommend_split_text failed."""
    draws = {"a": rng.normal(0.6, 0.02, 100)}
    for call in (lambda t: rank_recipes(draws, target=t, budget=1e4), lambda t: probability_reach(draws, t),
                 lambda t: recommend_text(rank_recipes(draws, budget=1e4), budget=1e4, target=t)):
        for target in ("0.6", True, float("nan"), 1.5):
            with pytest.raises(ValueError, match="target must lie in \\(0, 1\\), got "):
                call(target)
    with pytest.raises(ValueError, match="target must lie in"):
        probability_reach(draws, None)

    def sample(recipe, compute, n_seeds):
        return rng.normal(0.6, 0.02, (100, n_seeds))

    for total in (float("nan"), "1e5", 0.0, float("inf"), None):
        with pytest.raises(ValueError, match="total budget must be finite and > 0, got "):
            split_budget(sample, ["a"], total)
    for ways in (0, "2", 1.5, True):
        with pytest.raises(ValueError, match="max_ways must be a whole number >= 1, got "):
            split_budget(sample, ["a"], 1e4, max_ways=ways)
    assert list(split_budget(sample, ["a"], 1e4, max_ways=2)["ways"]) == [1, 2]


def test_more_runs_level_with_fewer_within_noise_give_way_to_the_fewer():
    """The 3-digit rule compared each split with one run only: 5 runs were recommended over 4 for
    0.6185 against 0.6183 (0.619 and 0.618 printed), a difference far inside Monte Carlo noise."""
    table = pd.DataFrame({"ways": [1, 2, 3], "compute_per_run": [100.0, 50.0, 33.3], "recipes": [["a"], ["a", "b"], ["a", "b", "a"]],
                          "expected_best": [0.600, 0.6183, 0.6185], "q05": [0.5, 0.55, 0.56], "q95": [0.7, 0.7, 0.7],
                          "gain_mcse": [0.0, 0.001, 0.001], "level_with": [1, 2, 2]})
    text = recommend_split_text(table, total=100.0)
    assert text.startswith("Split 100 compute units into 2 runs of 50 ('a', 'b')")
    assert "3 runs give 0.619, level with 2 within Monte Carlo noise: the fewer runs are the simpler plan." in text
    table["level_with"] = [1, 2, 3]  # a gain beyond noise: the more runs are the plan
    assert recommend_split_text(table, total=100.0).startswith("Split 100 compute units into 3 runs")


def test_a_split_gives_way_to_fewer_runs_only_where_their_gain_is_beyond_noise():
    """3 runs gained 3 standard errors over one run, 2 runs 1.5 and level with 3: '2 runs' was
    recommended, a split whose own gain a refit could turn round."""
    table = pd.DataFrame({"ways": [1, 2, 3], "compute_per_run": [100.0, 50.0, 33.3], "recipes": [["a"], ["a", "b"], ["a", "b", "a"]],
                          "expected_best": [0.600, 0.6015, 0.603], "q05": [0.5, 0.55, 0.56], "q95": [0.7, 0.7, 0.7],
                          "gain_mcse": [0.0, 0.001, 0.001], "level_with": [1, 1, 2]})
    text = recommend_split_text(table, total=100.0)
    assert text.startswith("Split 100 compute units into 3 runs") and "level with" not in text


def test_a_split_table_names_its_runs_as_its_sentence_does():
    """64 ways printed a list of 64 names per row (lines of about 250 characters); the table now
    counts seeds as the recommendation does."""
    table = split_budget(lambda r, c, n: np.full((100, n), 0.6), ["a", "b"], 100.0, max_ways=3)
    table.loc[2, "recipes"] = ["a", "a", "b"]
    shown = str(ScaleDecision(table=table, recommendation="", budget=100.0, unit="flops"))
    assert "a (2 seeds), b" in shown and "[" not in shown


def test_a_median_compute_to_target_far_beyond_the_data_is_called_an_extrapolation(rng):
    """decide said "compute to reach 0.6: 3.32e14 flops" for a sweep whose largest compute was 1.02e12,
    as if it were a plan; the report's page calls such a median the curve's extrapolation."""
    draws = {"a": rng.normal(0.55, 0.02, 2000)}
    table = rank_recipes(draws, target=0.6, compute_to_target={"a": np.full(2000, 3.32e14)}, budget=4e12)
    text = recommend_text(table, budget=4e12, target=0.6, unit="flops", largest_observed=1.02e12)
    assert ("compute to reach 0.6: 3.32e14 flops, 325x the largest compute observed: the curve's extrapolation, "
            "not something the data show (90% interval") in text
    near = recommend_text(table, budget=4e12, target=0.6, unit="flops", largest_observed=1e13)  # 33x: a plan
    assert "extrapolation" not in near and "compute to reach 0.6: 3.32e14 flops (90% interval" in near


def test_monte_carlo_errors_count_correlated_draws_as_fewer():
    """Draws from a chain are correlated; sd / sqrt(n) understated the error of a mean over them (1.4x
    on a fast fit), so a difference inside the noise could be called real. An AR(1) chain with
    coefficient 0.9 carries about n / 19 independent draws' worth: its error is about 4.4x the naive."""
    gen = np.random.default_rng(3)
    n, rho = 4000, 0.9
    chain = np.empty(n)
    chain[0] = gen.normal()
    for i in range(1, n):
        chain[i] = rho * chain[i - 1] + np.sqrt(1 - rho**2) * gen.normal()
    naive = chain.std() / np.sqrt(n)
    assert 3.0 < mcse_of_mean(chain) / naive < 6.0
    shuffled = gen.permutation(chain)  # the same values, independent order: the naive error stands
    assert mcse_of_mean(shuffled) == pytest.approx(naive, rel=0.25)
    table = rank_recipes({"a": chain + 0.6, "b": shuffled + 0.5}, budget=1.0)
    assert table.set_index("recipe").loc["a", "expected_mcse"] > 3 * table.set_index("recipe").loc["b", "expected_mcse"]



def test_predict_of_a_new_run_is_decides_forecast_plus_one_evaluations_noise(fitted):
    """`forecast predict` and `forecast decide` (and the report's fan chart beside its table) forecast
    a new run of a recipe at one budget from the same draws: predict adds one evaluation's noise and
    nothing else. Its mean is decide's expected metric, and its 90% interval holds decide's. predict
    drew a new run's seed luck from one stream for every recipe and decide from each recipe's own, so
    on the shipped sweep predict's mean differed by up to 0.003 (grpo 0.498 against decide's 0.494,
    which ranked recipes another way) and its interval, said to be wider, ended below decide's."""
    budget = 8 * float(fitted.runs_["compute"].max())
    decision = decide(fitted, budget).table.set_index("recipe")
    predicted = fitted.predict([budget]).set_index("recipe")
    for recipe in fitted.recipes:
        expected, forecast = decision.loc[recipe], predicted.loc[recipe]
        assert forecast["mean"] == expected["expected"], recipe
        assert forecast["q05"] <= expected["q05"] and forecast["q95"] >= expected["q95"], recipe


def test_predict_decide_and_the_report_print_one_number_for_one_question(fitted, tmp_path, capsys):
    """The same saved fit, recipe and budget through the three commands: predict's mean, decide's
    expected and the report's at_budget_mean are one number, not three draws of it. predict's mean
    was the mean of its evaluation draws, whose noise did not average to zero over the draws: on the
    shipped sweep (fast fit, 8e11 flops) predict printed gspo 0.4673 beside decide's 0.468, 0.6 of
    decide's own Monte Carlo error, and the README said they were the same number."""
    path = tmp_path / "fit.nc"
    fitted.save(path)
    budget = 8 * float(fitted.runs_["compute"].max())

    def answer(*argv):
        capsys.readouterr()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert main([*argv]) == 0
        return json.loads(capsys.readouterr().out)

    predicted = {row["recipe"]: row for row in answer("predict", str(path), "--compute", str(budget), "--json")}
    decided = {row["recipe"]: row for row in answer("decide", str(path), "--budget", str(budget), "--target", "0.6",
                                                    "--json")["table"]}
    reported = {row["recipe"]: row for row in answer("report", str(path), "--budget", str(budget), "--target", "0.6",
                                                     "-o", str(tmp_path / "r.html"), "--json")["recipes"]}
    assert set(predicted) == set(decided) == set(reported) == set(fitted.recipes)
    for recipe in fitted.recipes:
        said = (predicted[recipe]["mean"], decided[recipe]["expected"], reported[recipe]["at_budget_mean"])
        assert said[0] == said[1] == said[2], (recipe, said)
        for ours, theirs in (("q05", "at_budget_q05"), ("q50", "at_budget_q50"), ("q95", "at_budget_q95"),
                             ("p_best", "p_best"), ("p_target", "p_target"), ("p_reach_ever", "p_reach"),
                             ("compute_q50", "c_target_q50")):
            assert decided[recipe][ours] == reported[recipe][theirs], (recipe, ours)


def test_a_runs_predicted_mean_is_the_expected_metric_its_stop_advice_reads(fitted):
    """predict(run_id=..., kind="run") and the stop advice (forecast watch's recommendations.json,
    the trainer's stopped.json: details.expected_at_budget) forecast one run at its budget; they drew
    its noise from two streams (2024 and the run's own), so the run's expected metric at the budget
    came out as two numbers."""
    from forecast.early_stop import recommend_runs

    run = fitted.run_ids[0]
    budget = 8 * float(fitted.runs_.loc[fitted.runs_["run_id"] == run, "compute"].max())
    advice = recommend_runs(fitted, {run: budget})[run]
    predicted = fitted.predict([budget], run_id=run, kind="run").iloc[0]
    assert predicted["mean"] == advice.details["expected_at_budget"]


def test_forecasts_below_data_before_fit_says_fit_is_missing():
    """forecasts_below_data(fc, table) on a forecaster not yet fitted failed as TypeError: 'NoneType' object
    is not subscriptable."""
    from forecast import NotFittedError, ScalingForecaster
    from forecast.decisions import forecasts_below_data

    table = pd.DataFrame({"recipe": ["a"], "compute": [1e3]})
    with pytest.raises(NotFittedError, match=r"fit\(\) has not been called: call fit\(runs\) before forecasts_below_data\(\)"):
        forecasts_below_data(ScalingForecaster(), table)


def test_new_seeds_of_two_recipes_get_independent_seed_luck(fitted):
    """P(best) compares fresh seeds of each recipe: one shared random stream gave every recipe the same
    seed luck, so seed-to-seed spread never changed a ranking. Mutant: every recipe on one stream survived."""
    compute = float(fitted.runs_["compute"].max())
    luck = {}
    for recipe in fitted.recipes[:2]:
        curve = fitted.sample_curves([compute], recipe=recipe, kind="mean")[:, 0]  # the recipe's typical curve
        luck[recipe] = recipe_draws_at(fitted, recipe, compute) - curve  # a new seed's own deviation, draw by draw
    first, second = luck.values()
    assert first.std() > 0 and abs(np.corrcoef(first, second)[0, 1]) < 0.2


def test_a_split_is_valued_at_the_best_of_its_seeds(fitted):
    """decide_split values k runs of total/k at the best of k fresh seeds, draw by draw (sample_new_seeds).
    Mutant: every seed of a split given the first seed's draws (no gain from splitting, ever) survived."""
    recipe = fitted.recipes[0]
    per_run = float(fitted.runs_.loc[fitted.runs_["recipe"] == recipe, "compute"].max())
    split = decide_split(fitted, 2 * per_run, max_ways=2, recipes=[recipe]).table.set_index("ways")
    seeds = fitted.sample_new_seeds(per_run, recipe=recipe, n_seeds=2)
    assert split.loc[2, "compute_per_run"] == per_run and split.loc[2, "recipes"] == [recipe, recipe]
    assert split.loc[2, "expected_best"] == pytest.approx(seeds.max(axis=1).mean(), rel=1e-12)
    assert split.loc[2, "expected_best"] > seeds[:, 0].mean()
    assert split.loc[1, "expected_best"] == pytest.approx(recipe_draws_at(fitted, recipe, 2 * per_run).mean(), rel=1e-12)


def test_a_split_table_keeps_the_quotes_in_a_recipes_name():
    """The split table wrote each recipe's name without its quotes by stripping every ' from the
    sentence's text, so a recipe called "it's" was listed as "its", a name the fit does not know."""
    table = split_budget(lambda r, c, n: np.full((100, n), 0.6), ["it's 'v2'", "b"], 100.0, max_ways=3)
    table.loc[2, "recipes"] = ["it's 'v2'", "it's 'v2'", "b"]
    shown = str(ScaleDecision(table=table, recommendation="", budget=100.0, unit="flops"))
    assert "it's 'v2' (2 seeds), b" in shown and "its v2" not in shown


def test_a_target_no_curve_ever_reaches_is_not_said_to_need_a_larger_budget(rng):
    """A target above every recipe's asymptote (compute to reach it 'never' in every draw): the text
    advised "a larger budget or a lower target" beside P(ever reaches it) = 0.00. More compute does
    not take a curve past its asymptote; only a lower target helps."""
    n = 2000
    draws = {"a": rng.normal(0.50, 0.01, n), "b": rng.normal(0.40, 0.01, n)}
    never = {"a": np.full(n, np.inf), "b": np.where(np.arange(n) < 20, 5e6, np.inf)}  # b: 1% of draws
    table = rank_recipes(draws, target=0.9, compute_to_target=never, budget=1e4)
    text = recommend_text(table, budget=1e4, target=0.9)
    assert text.startswith("No recipe is likely to reach 0.9 at 10,000 compute units")
    assert "a larger budget" not in text
    assert ("no recipe's curve is likely ever to reach it (P(ever reaches it) = 0.01 at most, for 'b'): "
            "a lower target, or the ranking at this budget below.") in text
    never["b"] = np.full(n, np.inf)  # none reaches it in any draw: a tie, no one's
    table = rank_recipes(draws, target=0.9, compute_to_target=never, budget=1e4)
    assert "(P(ever reaches it) = 0.00 for every recipe): a lower target" in recommend_text(table, budget=1e4, target=0.9)
    # one curve that reaches it beyond the budget: a larger budget is advice again
    never["b"] = np.full(n, 5e6)
    table = rank_recipes(draws, target=0.9, compute_to_target=never, budget=1e4)
    assert "a larger budget or a lower target" in recommend_text(table, budget=1e4, target=0.9)


def test_recipes_tied_for_the_lead_are_said_to_be_tied(rng):
    """Three recipes with one posterior (P(best) 1/3 each, equal expected metric): the text said
    "Too close to call, leaning 'c'", a lean on nothing but the order the recipes were given in, while
    it called the runner-up level with the third. And with a target none reaches, "the best chance is
    P = 0.00 for 'c'" named one recipe for a chance every recipe shares. The order stays the one
    given (a stable tie-break); the words say it is a tie."""
    d = rng.normal(0.6, 0.02, 2000)
    table = rank_recipes({"c": d, "b": d.copy(), "a": d.copy()}, target=0.9, budget=1e4)
    assert list(table["recipe"]) == ["c", "b", "a"] and table["p_best"].tolist() == pytest.approx([1 / 3] * 3)
    text = recommend_text(table, budget=1e4, target=0.9)
    assert "leaning" not in text
    assert ("Too close to call between 'c', 'b' and 'a', level within Monte Carlo noise (which of them leads can "
            "change from fit to fit): at 10,000 compute units a new run of 'c' is expected to reach") in text
    assert "the best chance is P = 0.00 for every recipe (below 0.05)" in text
    # constant draws tie with no Monte Carlo error at all
    flat = rank_recipes({"y": np.full(100, 0.6), "x": np.full(100, 0.6)}, budget=1e4)
    assert recommend_text(flat, budget=1e4).startswith("Too close to call between 'y' and 'x', level")
    # a lead beyond noise keeps its lean
    ahead = recommend_text(rank_recipes({"a": d + 0.01, "b": rng.normal(0.6, 0.02, 2000)}, budget=1e4), budget=1e4)
    assert ahead.startswith("Too close to call, leaning 'a'")


def test_a_single_recipe_is_not_said_to_be_best_with_certainty(rng):
    """decide on a fit of one recipe (or recipes=[one]) said "Scale 'a': ..., P(best) = 1.00", a
    certainty that compares it with nothing; the report's own fallback rule says "Only one recipe:
    nothing to compare". The sentence now says so and still cites the forecast the table holds."""
    table = rank_recipes({"a": rng.normal(0.6, 0.02, 2000)}, target=0.62, budget=1e4)
    top = table.iloc[0]
    assert top.p_best == 1.0  # the table's number stands: the share of draws in which it is best
    text = recommend_text(table, budget=1e4, target=0.62)
    assert text.startswith(f"Only one recipe, 'a', so nothing is compared (its P(best) is 1 by definition): at 10,000 "
                           f"compute units a new run of 'a' is expected to reach {top.expected:.3f} "
                           f"(90% interval {top.q05:.3f}-{top.q95:.3f}).")
    assert "P(best) = 1.00" not in text and "Scale 'a'" not in text


def test_a_compute_interval_of_never_to_never_reads_as_one_never():
    """Fewer than 5% of draws reach the target: the sentence said '(90% interval never-never; ...'."""
    a = np.full(600, 0.55)
    table = rank_recipes({"a": a, "b": np.full(600, 0.5)}, target=0.6, budget=1e4,
                         compute_to_target={"a": np.r_[np.full(20, 5e3), np.full(580, np.inf)],
                                            "b": np.full(600, np.inf)})
    text = recommend_text(table, budget=1e4, target=0.6)
    assert "never-never" not in text
    assert "never, in the median draw (90% interval: never; P(ever reaches it) = 0.03)" in text


def test_a_compute_far_from_the_data_reads_beyond_it_in_the_digits_shown():
    """`forecast decide FIT --budget 6.05e9` on the trainer sweep (data from 6.0512e9 flops) warned
    '--budget 6.05e9 is below the smallest compute in the data (6.05e9 flops)', and 1.0205e14 on data to
    1.02e12 was '100x the largest compute' against a bar of more than 100x: each now with the digits
    it takes to read true. The report's banner and predict's --compute say the same sentence."""
    from forecast.data import far_from_data

    observed = [6.051221e9, 1.02e12]
    assert far_from_data(6.05e9, observed, unit="flops", name="--budget") == (
        "--budget 6.05e9 is below the smallest compute in the data (6.051e9 flops). Is the unit right?")
    assert far_from_data(1.0205e14, observed, unit="flops", name="--budget").startswith(
        "--budget 1.02e14 is 100.05x the largest compute in the data (1.02e12 flops)")
    assert far_from_data(1e9, observed, unit="flops", name="--budget") == (  # 3 digits where they read apart
        "--budget 1e9 is below the smallest compute in the data (6.05e9 flops). Is the unit right?")
    assert far_from_data(1e15, observed, unit="flops", name="--budget").startswith("--budget 1e15 is 980x the largest")


def test_decide_says_which_recipes_it_forecasts_before_their_own_data(later_start_fit, capsys, tmp_path):
    """`forecast decide --budget 2e3` on runs where scout's data start at 4,298 gpu_hours and 8b's at
    381 ranked scout at 2,000, its curve run backwards before its first evaluation, with nothing said
    (the far-from-data warning judges the budget against all recipes' data). decide, its JSON, the
    split's one run and the report's recommendation (also with a target it chose) now say so."""
    from forecast.report import scale_decision

    fc = later_start_fit
    scout_from = float(fc.runs_.loc[fc.runs_["recipe"] == "scalerl_scout_moe", "compute"].min())
    sentence = ("'scalerl_scout_moe' is forecast at 2,000 gpu_hours, below its smallest compute in the data (4,298 "
                "gpu_hours), where its forecast extrapolates its curve backwards, before its runs' first evaluation.")
    decision = decide(fc, 2e3)
    assert decision.recommendation.endswith(sentence)
    assert decision.extra["recipes_below_data"] == [{"recipe": "scalerl_scout_moe", "smallest_compute": scout_from}]
    assert decide(fc, 5e3).extra["recipes_below_data"] == [] and "backwards" not in decide(fc, 5e3).recommendation
    assert ("For one run, " + sentence) in decide_split(fc, 2e3, max_ways=2).recommendation
    for target, chosen in ((None, False), (0.5, True)):
        _, recommendation, _ = scale_decision(fc, 2e3, target, target_chosen=chosen)
        assert sentence in recommendation.reasons
    fc.save(tmp_path / "fit.nc")
    assert main(["decide", str(tmp_path), "--budget", "2e3", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["recommendation"].endswith(sentence)
    assert [entry["recipe"] for entry in payload["recipes_below_data"]] == ["scalerl_scout_moe"]
    with pytest.warns(UserWarning, match="below the smallest compute"):  # below both: said as every recipe
        assert decide(fc, 100).recommendation.endswith(
            "Every recipe is forecast at 100 gpu_hours, below the smallest compute of any recipe's runs (381 "
            "gpu_hours), where the forecasts extrapolate the curves backwards, before any run's first evaluation.")


def test_predict_says_which_recipes_and_runs_it_forecasts_before_their_own_data(later_start_fit):
    """`fc.predict(2e3)` on runs where scout's data start at 4,298 gpu_hours and 8b's at 381 gave scout's
    curve run backwards before its first evaluation with nothing said, where decide at that budget
    says it (2,000 lies within the whole data, so the far-from-data warning is silent). predict now says
    it as decide does, in a FarFromDataWarning: once per recipe (or run) concerned, naming its smallest
    compute, and not for a recipe whose data cover the compute."""
    fc = later_start_fit
    sentence = ("'scalerl_scout_moe' is forecast at 2,000 gpu_hours, below its smallest compute in the data (4,298 "
                "gpu_hours), where its forecast extrapolates its curve backwards, before its runs' first evaluation.")
    assert _far_warnings(lambda: fc.predict([2e3, 5e3])) == [sentence]  # not 8b, whose data start at 381
    assert _far_warnings(lambda: fc.predict([5e3, 1e5])) == []
    # once, at the largest compute asked below its data
    assert _far_warnings(lambda: fc.predict([1e3, 2e3], recipe="scalerl_scout_moe")) == [sentence]
    assert _far_warnings(lambda: fc.predict([2e3], recipe="scalerl_8b", kind="mean")) == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fc.predict([2e3])
    assert [w.filename for w in caught] == [__file__]  # the caller's line, as the far-from-data warning
    # a run is judged by its own first evaluation
    assert _far_warnings(lambda: fc.predict([2e3], kind="run")) == [
        "Runs 'scalerl_scout_moe-s0' and 'scalerl_scout_moe-s1' are forecast at 2,000 gpu_hours, below their "
        "smallest computes in the data (4,298 gpu_hours each), where their forecasts extrapolate their curves "
        "backwards, before their first evaluations."]
    assert _far_warnings(lambda: fc.predict([3e3], run_id="scalerl_scout_moe-s1")) == [
        "Run 'scalerl_scout_moe-s1' is forecast at 3,000 gpu_hours, below its smallest compute in the data "
        "(4,298 gpu_hours), where its forecast extrapolates its curve backwards, before its first evaluation."]
    # below every recipe's data it is said once, by the far-from-data warning (a likely unit mix-up)
    (said,) = _far_warnings(lambda: fc.predict([100]))
    assert said.startswith("compute 100 is below the smallest compute in the data (381 gpu_hours)")


def test_forecast_predict_says_and_marks_the_forecasts_before_their_own_data(later_start_fit, tmp_path, capsys):
    """`forecast predict FIT --compute 2e3 5e3` printed scout's forecast at 2,000 gpu_hours, 2.1x before its
    first evaluation, with nothing said on the terminal or in --json. It now warns on stderr as decide
    says it, once per recipe, and each JSON record has below_data."""
    fc = later_start_fit
    fc.save(tmp_path / "fit.nc")
    assert main(["predict", str(tmp_path), "--compute", "2e3", "5e3", "--json"]) == 0
    out, err = capsys.readouterr()
    records = json.loads(out)
    assert [(r["recipe"], r["compute"], r["below_data"]) for r in records] == [
        ("scalerl_8b", 2e3, False), ("scalerl_8b", 5e3, False),
        ("scalerl_scout_moe", 2e3, True), ("scalerl_scout_moe", 5e3, False)]
    assert "'scalerl_8b'" not in err and err.count("is forecast at") == 1 and err.count(
        "warning: 'scalerl_scout_moe' is forecast at 2,000 gpu_hours, below its smallest compute in the data "
        "(4,298 gpu_hours), where its forecast extrapolates its curve backwards, before its runs' first "
        "evaluation.\n") == 1
    assert main(["predict", str(tmp_path), "--compute", "3e3", "--run-id", "scalerl_scout_moe-s1", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [r["below_data"] for r in json.loads(out)] == [True]
    assert "warning: Run 'scalerl_scout_moe-s1' is forecast at 3,000 gpu_hours, below its smallest compute" in err
    # below all the data: the far-from-data warning names --compute, and the records are marked
    assert main(["predict", str(tmp_path), "--compute", "100", "5e3", "--recipe", "scalerl_8b", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [r["below_data"] for r in json.loads(out)] == [True, False]
    assert "is forecast at" not in err and "warning: --compute 100 is below the smallest compute in the data" in err
    assert main(["predict", str(tmp_path), "--compute", "2e3"]) == 0  # the table says it on stderr too
    assert "warning: 'scalerl_scout_moe' is forecast at 2,000 gpu_hours" in capsys.readouterr().err


def test_the_report_says_once_which_recipes_it_forecasts_before_their_own_data(later_start_fit):
    """`forecast report --budget 2e3` said that scout is forecast before its first evaluation twice: in the
    recommendation, and again in its budget split line ("For one run, 'scalerl_scout_moe' is forecast at
    2,000 ..."), the same one run at the same budget. It is now said once, in the recommendation, which a
    planner reads first; the split line keeps the splits the recipe takes no part in."""
    from forecast.report import scale_decision

    fc = later_start_fit
    sentence = ("'scalerl_scout_moe' is forecast at 2,000 gpu_hours, below its smallest compute in the data (4,298 "
                "gpu_hours), where its forecast extrapolates its curve backwards, before its runs' first evaluation.")
    for target, chosen in ((None, False), (0.5, True)):
        _, recommendation, _ = scale_decision(fc, 2e3, target, target_chosen=chosen)
        text = " ".join([recommendation.headline, *recommendation.reasons])
        assert text.count("is forecast at 2,000 gpu_hours, below") == 1 and sentence in recommendation.reasons
        split = next(reason for reason in recommendation.reasons if reason.startswith("Budget split: "))
        assert "'scalerl_scout_moe' takes no part in splits into 2 to 4 runs" in split
    assert ("For one run, " + sentence) in decide_split(fc, 2e3).recommendation  # decide --total alone still says it


def _ways_said(recommendation: str) -> int:
    """The number of runs a split's recommendation puts the budget into, read from its first sentence."""
    if recommendation.startswith("Put the whole "):
        return 1
    return int(re.match(r"Split .+? into (\d+) runs of ", recommendation).group(1))


def test_the_recommended_split_is_the_one_its_sentence_names():
    """The split recommended was only in the sentence; recommended_split() gives its row, the one the
    sentence names: more runs level with fewer give way to them, and a gain within noise to one run."""
    level = pd.DataFrame({"ways": [1, 2, 3], "compute_per_run": [100.0, 50.0, 33.3], "recipes": [["a"], ["a", "b"], ["a", "b", "a"]],
                          "expected_best": [0.600, 0.6183, 0.6185], "q05": [0.5, 0.55, 0.56], "q95": [0.7, 0.7, 0.7],
                          "gain_mcse": [0.0, 0.001, 0.001], "level_with": [1, 2, 2]})
    noise = level.assign(expected_best=[0.600, 0.610, 0.612], gain_mcse=[0.0, 0.006, 0.007], level_with=[1, 1, 1])
    real = noise.assign(gain_mcse=[0.0, 0.002, 0.007])
    beyond = level.assign(level_with=[1, 2, 3])
    for table, ways in ((level, 2), (noise, 1), (real, 2), (beyond, 3)):
        assert recommended_split(table)["ways"] == ways == _ways_said(recommend_split_text(table, total=100.0))


def test_decide_total_and_the_report_give_the_split_and_the_recipes_it_leaves_out_as_numbers(later_start_fit, tmp_path,
                                                                                              capsys):
    """`decide --total --json` said which split it recommends only in its sentence, and `report --json`'s
    budget split and the recipes it forecasts below their data were sentences alone. decide's JSON now
    has recommended_ways, and the report's recommendation recipes_below_data and budget_split (the keys
    of decide --total --json); each holds what its sentence says."""
    from forecast.formatting import fmt_compute
    from forecast.report import ReportData, report_summary, scale_decision

    fc = later_start_fit
    scout_from = float(fc.runs_.loc[fc.runs_["recipe"] == "scalerl_scout_moe", "compute"].min())
    fc.save(tmp_path / "fit.nc")
    for total in ("4e4", "2e3"):
        assert main(["decide", str(tmp_path), "--budget", total, "--total", "--max-ways", "16", "--json"]) == 0
        payload = json.loads(capsys.readouterr().out)
        assert payload["recommended_ways"] == _ways_said(payload["recommendation"])
        assert payload["recommended_ways"] in [row["ways"] for row in payload["table"]]
    table, recommendation, _ = scale_decision(fc, 2e3, None)
    summary = report_summary(ReportData(title="t", budget=2e3, target=None, compute_unit=fc.compute_unit,
                                        recipe_table=table, recommendation=recommendation, diagnostics={}, provenance={}))
    said = summary["recommendation"]
    assert said["recipes_below_data"] == [{"recipe": "scalerl_scout_moe", "smallest_compute": scout_from}]
    assert (f"'scalerl_scout_moe' is forecast at 2,000 gpu_hours, below its smallest compute in the data "
            f"({fmt_compute(scout_from)} gpu_hours)") in " ".join(said["reasons"])
    split = said["budget_split"]
    assert "Budget split: " + split["recommendation"] in said["reasons"]
    assert split["recommended_ways"] == _ways_said(split["recommendation"]) and split["budget"] == 2e3
    assert split["recipes_left_out"] == [{"recipe": "scalerl_scout_moe", "smallest_compute": scout_from, "ways": [2, 3, 4]}]
    assert "'scalerl_scout_moe' takes no part in splits into 2 to 4 runs" in split["recommendation"]
    json.dumps(summary, allow_nan=False)  # strict JSON, as --json prints it


def test_one_recipe_beyond_the_named_ones_is_counted_in_the_singular(rng):
    """On the shipped sweep at a budget of 5e9 flops the report's headline read "Too close to call between
    'dapo', 'scalerl-g4', 'scalerl' and 1 more recipes in the table": one recipe is "1 more recipe", in the
    leader's verdict and beside the runner-up alike."""

    def level_draws(names, mean):
        out = {}
        for name in names:
            d = rng.normal(0.0, 0.04, 2000)
            out[name] = d - d.mean() + mean
        return out

    draws = {"lead": rng.normal(0.7, 0.01, 2000), **level_draws(["b", "c", "d", "e", "f"], 0.5)}
    runner_up = recommend_text(rank_recipes(draws, budget=1.0), budget=1.0)
    level = re.search(r"\(level with (.*) within Monte Carlo noise", runner_up).group(1)
    assert re.fullmatch(r"'[c-f]', '[c-f]', '[c-f]' and 1 more recipe in the table", level), level
    leaders = recommend_text(rank_recipes(level_draws(["a", "b", "c", "d"], 0.5), budget=1.0), budget=1.0)
    verdict = re.search(r"Too close to call between (.*), level within Monte Carlo noise", leaders).group(1)
    assert re.fullmatch(r"'[a-d]', '[a-d]', '[a-d]' and 1 more recipe in the table", verdict), verdict


def test_the_report_says_once_that_its_budget_lies_below_all_the_data(later_start_fit):
    """`forecast report --budget 5e9` on the shipped sweep (data from 6.05e9 flops) said the budget lay below the
    data three times: in the banner ("The budget 5e9 is below the smallest compute in the data (6.05e9 flops). Is
    the unit right?"), in the recommendation ("Every recipe is forecast at 5e9 flops, below the smallest compute of
    any recipe's runs (6.05e9 flops), where the forecasts extrapolate the curves backwards, ...") and in the budget
    split line ("Splits into 2 to 4 runs are left out: each run would get 2.5e9 flops or less, below the smallest
    compute in the data (6.05e9 flops), where the forecast would extrapolate the curves backwards, ..."). The
    banner, read first, now says it once, with the forecasts run backwards; the split line keeps which splits are
    left out and why, and the JSON each recipe's smallest compute."""
    from forecast import report as rp
    from forecast.report import scale_decision

    fc = later_start_fit
    banner = ("The budget 100 is below the smallest compute in the data (381 gpu_hours). Is the unit right? Each "
              "forecast at the budget extrapolates its recipe's curve backwards, before its runs' first evaluation.")
    split = ("Splits into 2 to 4 runs are left out: each run would get 50 gpu_hours or less, further below the data "
             "than one run.")
    data = rp.collect_report(fc, budget=100, target=0.5, target_chosen=True)
    page = rp.html.unescape(rp.render_report(data))
    assert data.warnings == [banner] and page.count(banner) == 1 and page.index(banner) < page.index('id="recommendation"')
    assert page.count("(381 gpu_hours)") == 1 and page.count("backwards") == 1 and page.count(split) == 1
    numbers = rp.report_summary(data)["recommendation"]
    assert numbers["recipes_below_data"] == [{"recipe": r, "smallest_compute": s} for r, s in
                                             smallest_compute_by_recipe(fc, fc.recipes).items()]
    assert numbers["budget_split"]["ways_left_out"] == [2, 3, 4]
    for target in (None, 0.5):  # the recommendation decide() words, a target asked for or none
        with pytest.warns(UserWarning, match="below the smallest compute"):  # alone, outside the page
            _, recommendation, _ = scale_decision(fc, 100, target)
        assert "backwards" not in " ".join([recommendation.headline, *recommendation.reasons])
    # decide --total alone says it in its one-run sentence, and its split line gives only its own numbers
    with pytest.warns(UserWarning, match="below the smallest compute"):
        alone = decide_split(fc, 100).recommendation
    assert alone.count("(381 gpu_hours)") == 1 and alone.endswith(split)


def test_forecasts_below_data_says_what_a_table_needs():
    """forecasts_below_data on a hand-made table of computes alone raised KeyError: 'recipe', and on one
    naming a recipe the fit lacks, KeyError: 'c'. It now says what the table needs (predict()'s columns),
    and names an unknown recipe or run with the fit's own names."""
    from forecast.decisions import forecasts_below_data

    fc = _LaterStart()
    with pytest.raises(ValueError, match=r"^forecasts_below_data reads a table as fc\.predict\(\) gives it: it needs the "
                                         r"columns 'compute' and 'recipe' \(or 'run_id', for kind='run' forecasts\); "
                                         r"this table has compute$"):
        forecasts_below_data(fc, pd.DataFrame({"compute": [1e3]}))
    with pytest.raises(ValueError, match=r"this table has recipe$"):
        forecasts_below_data(fc, pd.DataFrame({"recipe": ["a"]}))
    with pytest.raises(KeyError, match=r"unknown recipe 'c'; known: a, b"):
        forecasts_below_data(fc, pd.DataFrame({"recipe": ["a", "c"], "compute": [1e3, 1e3]}))
    with pytest.raises(TypeError, match=r"takes fc\.predict\(\)'s table \(a DataFrame\), got list"):
        forecasts_below_data(fc, [1e3])
    # a table with its columns, hand-made or predict()'s: each row judged by its recipe's first evaluation
    assert forecasts_below_data(fc, pd.DataFrame({"recipe": ["a", "b", "b"], "compute": [1e3, 1e3, 3e3]})) == [
        False, True, False]


def test_a_draw_exactly_at_the_target_counts_as_reaching_it():
    """P(target) is P(metric at the budget >= target): a draw on the target has reached it."""
    draws = {"a": np.array([0.6, 0.6, 0.5, 0.7]), "b": np.array([0.5, 0.5, 0.5, 0.5])}
    assert probability_reach(draws, 0.6) == {"a": 0.75, "b": 0.0}
    table = rank_recipes(draws, target=0.6, budget=1.0)
    assert table.set_index("recipe").loc["a", "p_target"] == 0.75


def test_recipes_are_ranked_by_expected_metric_not_by_p_best():
    """'best expected metric first': a sure 0.60 comes before two wide recipes that each win half the
    draws (P(best) 0.5) but are expected to reach only 0.575; the text leans to it and names the likeliest
    other winner."""
    first = np.random.default_rng(5).permutation(np.arange(4000) < 2000)  # wide1 wins these draws, wide2 the rest
    draws = {"wide1": np.where(first, 0.85, 0.30), "sure": np.full(4000, 0.60), "wide2": np.where(first, 0.30, 0.85)}
    table = rank_recipes(draws, budget=1.0)
    assert table.loc[0, "recipe"] == "sure" and sorted(table.loc[1:, "recipe"]) == ["wide1", "wide2"]
    assert list(table["p_best"]) == [0.0, 0.5, 0.5]
    text = recommend_text(table, budget=1.0)
    assert text.startswith("Too close to call, leaning 'sure'") and "Consider running 'sure' and 'wide" in text


def test_recipes_with_equal_expected_metrics_are_ranked_by_p_best():
    """A tie in the expected metric goes to the recipe likelier to be the best, whatever the order given."""
    draws = {"steady": np.full(4, 0.5), "b": np.array([0.75, 0.25, 0.625, 0.375]),
             "c": np.array([0.25, 0.75, 0.375, 0.625])}
    table = rank_recipes(draws, budget=1.0)
    assert list(table["expected"]) == [0.5, 0.5, 0.5]
    assert list(table["recipe"]) == ["b", "c", "steady"] and list(table["p_best"]) == [0.5, 0.5, 0.0]


def test_a_p_best_exactly_at_the_bar_is_a_clear_winner():
    """'Scale' from P(best) >= 0.80: a leader best in exactly 800 of 1,000 draws is scaled, not called too close."""
    a = np.where(np.arange(1000) < 800, 0.7, 0.5)
    table = rank_recipes({"a": a, "b": np.full(1000, 0.6)}, budget=1.0)
    assert table.loc[0, "p_best"] == 0.8
    assert recommend_text(table, budget=1.0).startswith("Scale 'a'")


def test_the_downside_sentence_cites_each_recipes_own_5_percent_quantile(rng):
    draws = {"a": rng.normal(0.70, 0.01, 4000), "b": rng.normal(0.60, 0.05, 4000)}
    table = rank_recipes(draws, budget=1.0)
    a, b = table.set_index("recipe").loc["a"], table.set_index("recipe").loc["b"]
    assert a.q05 == pytest.approx(np.quantile(draws["a"], 0.05)) and b.q05 == pytest.approx(np.quantile(draws["b"], 0.05))
    assert f"Downside (5% quantile): {a.q05:.3f} for 'a' vs {b.q05:.3f} for 'b'." in recommend_text(table, budget=1.0)


def test_a_best_chance_of_exactly_the_bar_is_not_said_to_be_below_it():
    """'No recipe is likely to reach it ... (below 0.05)' is said when every P(target) is under 0.05;
    a recipe with P = 0.05 exactly is not below it."""
    a = np.where(np.arange(20) == 0, 0.7, 0.5)  # 1 of 20 draws at or above 0.65
    table = rank_recipes({"a": a, "b": np.full(20, 0.4)}, target=0.65, budget=1e4)
    assert table["p_target"].max() == 0.05
    assert "No recipe is likely" not in recommend_text(table, budget=1e4, target=0.65)
    below = rank_recipes({"a": np.full(20, 0.5), "b": np.full(20, 0.4)}, target=0.65, budget=1e4)
    assert recommend_text(below, budget=1e4, target=0.65).startswith("No recipe is likely to reach 0.65")


def test_a_splits_interval_is_the_5_and_95_percent_quantiles_of_its_best_run():
    x = np.linspace(0.5, 0.7, 1001)
    table = split_budget(lambda r, c, n: x, ["a"], 100.0, max_ways=2)  # seeds alike: the best of two is one
    for k in (0, 1):
        assert table.loc[k, "q05"] == pytest.approx(np.quantile(x, 0.05))
        assert table.loc[k, "q95"] == pytest.approx(np.quantile(x, 0.95))
    assert "(90% interval 0.510-0.690)" in recommend_split_text(table, total=100.0)


def test_the_compute_to_target_interval_is_its_5_and_95_percent_quantiles(rng):
    c_star = {"a": np.arange(1, 2001) * 10.0}  # q05 1,000; q50 10,000; q95 19,000
    table = rank_recipes({"a": rng.normal(0.7, 0.01, 2000)}, target=0.65, compute_to_target=c_star, budget=1e5)
    text = recommend_text(table, budget=1e5, target=0.65)
    assert "compute to reach 0.65: 10,000 compute units (90% interval 1,000-19,000;" in text


def test_anticorrelated_draws_are_not_counted_as_more_than_there_are():
    """The effective sample size is capped at the number of draws: alternating draws (an ESS estimate of
    3n) keep the error sd / sqrt(n), never below it, so noise is not called a difference."""
    x = np.tile([0.0, 1.0], 500)
    assert mcse_of_mean(x) == pytest.approx(0.5 / np.sqrt(1000))


def test_decide_splits_recommended_ways_is_the_split_its_sentence_names_not_the_highest(fitted):
    """extra['recommended_ways'] is the split the sentence recommends (recommended_split): where more runs
    give a higher expected best only within Monte Carlo noise, that is fewer runs than the highest row."""
    for total in (1.6e5, 3.2e5, 1e6):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # far beyond the data: the point here is the choice, not the warning
            decision = decide_split(fitted, total, max_ways=8)
        ways = decision.extra["recommended_ways"]
        assert ways == _ways_said(decision.recommendation) == recommended_split(decision.table)["ways"]


def test_the_risk_averse_choice_is_set_against_the_leaders_downside(rng):
    """'Risk-averse choice: 'c' has the best downside (its q05 vs the leader's)': with three recipes the
    number it is set against is the leader's, not the runner-up's."""
    draws = {"a": rng.normal(0.70, 0.06, 4000), "b": rng.normal(0.65, 0.06, 4000), "c": rng.normal(0.62, 0.003, 4000)}
    table = rank_recipes(draws, budget=1.0)
    row = table.set_index("recipe")
    assert list(table["recipe"]) == ["a", "b", "c"] and row["q05"].idxmax() == "c"
    text = recommend_text(table, budget=1.0)
    assert f"Risk-averse choice: 'c' has the best downside ({row.loc['c', 'q05']:.3f} vs {row.loc['a', 'q05']:.3f})." in text


def test_the_recipe_likeliest_to_reach_the_target_is_named_whatever_its_rank():
    """'For the target alone, 'b' is likelier': the recipe with the highest P(target), here second by
    expected metric, not the last row (c, whose P(target) is also above the leader's)."""
    n = 2000
    index = np.arange(n)
    draws = {"a": np.where(index < 800, 0.9, 0.5),  # expected 0.66, P(>= 0.6) 0.40
             "b": np.where(index < 1800, 0.62, 0.3),  # expected 0.588, P 0.90
             "c": np.where(index < 1000, 0.61, 0.5)}  # expected 0.555, P 0.50
    table = rank_recipes(draws, target=0.6, budget=1e4)
    assert list(table["recipe"]) == ["a", "b", "c"]
    text = recommend_text(table, budget=1e4, target=0.6)
    assert "For the target alone, 'b' is likelier to get there (P = 0.90)." in text
