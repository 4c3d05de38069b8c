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
