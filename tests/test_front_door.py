"""The front door as an analyst meets it in a notebook: what a cell shows for the forecaster and its
results, and the paths, names and arguments typed there."""

import copy

from forecast.inference import ConvergenceReport


def _with_report(fc, report):
    """A shallow copy of the shared fit with another convergence report (the fit itself untouched)."""
    other = copy.copy(fc)
    other._report = report
    return other


def test_the_forecasters_repr_says_whether_its_fit_converged(fitted):
    flagged = ConvergenceReport(max_rhat=1.04, min_ess_bulk=79, min_ess_tail=40, divergences=1, n_draws=600)
    fine = ConvergenceReport(max_rhat=1.002, min_ess_bulk=900, min_ess_tail=800, divergences=0, n_draws=600)
    shown = repr(_with_report(fitted, flagged))
    assert f"{len(fitted.recipes)} recipes, {len(fitted.run_ids)} runs" in shown
    assert "NOT CONVERGED" in shown and "diagnostics()" in shown
    assert repr(_with_report(fitted, fine)).endswith(", converged)")


def test_result_objects_show_their_summary_in_a_notebook():
    """IPython shows an object through _repr_pretty_ when it has one, else repr(): for these
    dataclasses that was every raw field, without "NOT CONVERGED" or the recommendation's sentence."""
    import pandas as pd
    from IPython.lib.pretty import pretty

    from forecast.backtest import BacktestConfig, BacktestResult, PolicyResult
    from forecast.decisions import ScaleDecision

    report = ConvergenceReport(max_rhat=1.04, min_ess_bulk=79, min_ess_tail=40, divergences=1, n_draws=600)
    table = pd.DataFrame({"recipe": ["a", "b"], "budget": [1e4, 1e4], "expected": [0.61, 0.55], "p_best": [0.9, 0.1]})
    decision = ScaleDecision(table=table, recommendation="Scale 'a'.", budget=1e4, unit="gpu_hours")
    policy = PolicyResult(policy="forecast", compute_fraction=0.4, regret=0.01, chosen_run="a-s0", chosen_value=0.6,
                          best_run="a-s0", best_value=0.6, n_runs=4, n_stopped=2, n_checks=5, seconds=1.0,
                          notes={"unconverged_fits": 2})
    backtest = BacktestResult(results=[policy], config=BacktestConfig())
    for result in (report, decision, backtest):
        assert pretty(result) == str(result)
    assert pretty(report).startswith("NOT CONVERGED")
    assert "Scale 'a'." in pretty(decision) and "gpu_hours" in pretty(decision)
    assert "2 of the 5 refits of the forecast policy did not converge" in pretty(backtest)
