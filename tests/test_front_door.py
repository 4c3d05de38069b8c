"""The front door as an analyst meets it in a notebook: what a cell shows for the forecaster and its
results, and the paths, names and arguments typed there."""

import copy
import warnings

from forecast import ConvergenceWarning
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


def test_a_path_from_the_home_folder_is_read_and_written_there(fitted, tmp_path, monkeypatch):
    """"~/..." as pandas and xarray take it: load_runs said it did not exist, and save() wrote into a
    folder named "~" under the working directory, where load() did not look."""
    from forecast import ScalingForecaster, load_runs

    home, elsewhere = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    elsewhere.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(elsewhere)
    fitted.runs_.drop(columns=["_source", "_line"], errors="ignore").to_csv(home / "runs.csv", index=False)
    assert len(load_runs("~/runs.csv")) == len(fitted.runs_)
    assert fitted.save("~/fit.nc") == home / "fit.nc"
    assert (home / "fit.nc").is_file() and not (elsewhere / "~").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the shared short-chain fit may be flagged
        assert ScalingForecaster.load("~/fit.nc").run_ids == fitted.run_ids


def test_the_usage_examples_in_help_ask_for_computes_within_reach_of_their_sweep():
    """help(forecast) and help(forecast.forecaster) open with four lines to paste. The second asked
    the shipped sweep (evaluated up to 1e12 FLOPs) for 1e15 and 1e16, which warned of a unit
    mix-up on the first call a reader made; the first asked 'runs.csv' for 1e3 and 1e4.
    help(ScalingForecaster), what `ScalingForecaster?` shows in a notebook, had no example at all."""
    import re
    from pathlib import Path

    import forecast
    import forecast.forecaster
    from forecast import load_runs
    from forecast.data import far_from_data

    root = Path(__file__).resolve().parents[1]
    for module in (forecast, forecast.forecaster, forecast.ScalingForecaster):
        doc = module.__doc__
        path = re.search(r'load_runs\("([^"]+)"\)', doc).group(1)
        runs = load_runs(root / path)
        call = re.search(r'predict\(compute=\[([^\]]+)\], recipe="([^"]+)"\)', doc)
        assert call.group(2) in set(runs["recipe"]), module.__name__
        for value in call.group(1).split(","):
            assert far_from_data(float(value), runs["compute"], unit="flops", name="compute") is None, module.__name__


def test_several_names_where_one_is_asked_for_are_refused_as_such(fitted):
    """recipe=["a", "b"] was read as the one name "['a', 'b']" and called an unknown recipe."""
    import numpy as np
    import pandas as pd
    import pytest

    two = fitted.recipes[:2]
    for given in (two, tuple(two), np.array(two), pd.Series(two)):
        with pytest.raises(TypeError, match=r"recipe= takes one name, got \[.*\]: ask once per name"):
            fitted.predict([1e4], recipe=given)
    with pytest.raises(TypeError, match="run_id= takes one name"):
        fitted.predict([1e4], run_id=fitted.run_ids[:2])
    with pytest.raises(TypeError, match="recipe= takes one name"):
        fitted.sample_curves([1e4], recipe=two)
    assert len(fitted.predict([1e4], recipe=np.array(two)[0])) == 1  # one name from an array is a name


def test_an_unknown_name_is_answered_with_the_one_it_was_likely_meant_as(fitted):
    """A sweep of many runs buried the intended name in a list of all of them; a run's name given
    as a recipe (or a recipe's as a run) was only "unknown"."""
    import pytest

    from forecast.decisions import decide

    recipe, run = fitted.recipes[0], fitted.run_ids[0]
    with pytest.raises(KeyError, match=f"unknown recipe '{recipe.upper()}' \\(did you mean '{recipe}'\\?\\); known: "):
        fitted.predict([1e4], recipe=recipe.upper())
    with pytest.raises(KeyError, match=f"unknown recipe '{recipe[:-1]}' \\(did you mean '{recipe}'"):
        fitted.plot(recipes=recipe[:-1])
    with pytest.raises(KeyError, match=f"unknown recipe '{recipe}x' \\(did you mean '{recipe}'"):
        decide(fitted, 1e4, recipes=[f"{recipe}x"])
    with pytest.raises(KeyError, match=f"unknown recipe '{run}' \\(it is a run: give run_id='{run}'\\)"):
        fitted.predict([1e4], recipe=run)
    with pytest.raises(KeyError, match=f"unknown run_id '{recipe}' \\(it is a recipe: give recipe='{recipe}'\\)"):
        fitted.predict([1e4], run_id=recipe)
    with pytest.raises(KeyError, match=r"unknown recipe 'zzz'; known: "):  # no guess where none is close
        fitted.predict([1e4], recipe="zzz")
    from forecast.formatting import close_names

    assert sorted(close_names("dapo-s9", ["dapo-s0", "dapo-s1", "grpo-s0"])[:2]) == ["dapo-s0", "dapo-s1"]


def test_a_name_that_differs_only_in_its_spaces_is_the_one_named(small_sweep, tmp_path, capsys):
    """A table's recipe '  g4 ' (spaces a CSV kept around the name): `forecast predict --recipe g4` said
    "unknown recipe 'g4'; known:   g4 , dapo", the list showing the name as if it were the one given,
    and no guess (difflib finds 'g4' too far from '  g4 ')."""
    from forecast.cli import main
    from forecast.formatting import close_names, unknown_name_message

    assert close_names("g4", ["  g4 ", "dapo"]) == ["  g4 "]
    assert close_names("Dapo  Big batch", ["dapo big batch", "dapo"]) == ["dapo big batch"]
    assert close_names(" dapo", ["dapo", "grpo"]) == ["dapo"]
    assert unknown_name_message("recipe", "g4", ["  g4 ", "dapo"]).startswith("unknown recipe 'g4' (did you mean '  g4 '?)")
    fit = tmp_path / "fit"
    fit.mkdir()
    fitted_with_spaces(small_sweep, fit)
    assert main(["predict", str(fit), "--compute", "1e4", "--recipe", "g4"]) == 2
    assert "unknown recipe 'g4' (did you mean '  g4 '?)" in capsys.readouterr().err
    assert main(["predict", str(fit), "--compute", "1e4", "--recipe", "  g4 "]) == 0


def fitted_with_spaces(small_sweep, folder):
    """A fast fit saved in `folder` of the session's small sweep, one recipe renamed with spaces around it
    ('  g4 '). The sweep's shape is the session fit's, so the fit reuses that compiled model (a sweep of
    another shape compiled one of its own, some 17 s of numba, for this test alone)."""
    import warnings

    from forecast import ScalingForecaster

    sweep = small_sweep.copy()
    sweep["recipe"] = sweep["recipe"].map({"scalerl_8b": "  g4 ", "scalerl_scout_moe": "dapo", "scalerl_8gen": "cispo"})
    sweep["run_id"] = sweep["recipe"].str.strip() + "-" + sweep["seed"].astype(str)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ScalingForecaster(mode="fast").fit(sweep, random_seed=0, progress=False).save(folder / "fit.nc")


def test_plot_names_every_setting_it_takes(fitted):
    """help(fc.plot) showed **kwargs, not the target= the README's example passes, and a misspelt
    setting was refused as an argument of plot_fan_chart(), a function the caller never called."""
    import inspect

    import pytest

    parameters = inspect.signature(fitted.plot).parameters
    assert {"recipes", "budget", "kind", "target", "ax", "ncols", "title"} <= set(parameters)
    assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    with pytest.raises(TypeError, match=r"ScalingForecaster\.plot\(\) got an unexpected keyword argument 'traget'"):
        fitted.plot(traget=0.6)


def test_examples_assign_the_figures_they_draw():
    """A figure-returning call as a notebook cell's last line is shown twice under the inline backend
    (drawn, then again as the cell's value), so the README's `fc.plot(...)` line pasted as written
    drew its fan chart twice. Every example that draws assigns the figure, as the notebooks do."""
    import re
    from pathlib import Path

    from forecast import ScalingForecaster

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    code = "\n".join(re.findall(r"```python\n(.*?)```", readme, flags=re.S)) + "\n" + ScalingForecaster.__doc__
    drawing = [line.split("#")[0].strip() for line in code.splitlines()
               if re.search(r"(\.plot|\bplot_\w+)\(", line.split("#")[0])]
    assert drawing, "no example draws a figure"
    unassigned = [line for line in drawing if not re.match(r"\w+\s*=\s*", line)]
    assert not unassigned, f"examples that draw without assigning the figure: {unassigned}"


def test_a_table_given_as_compute_is_refused_naming_the_column_to_give(fitted):
    """predict(future) with a table of future points (Prophet's habit) said "compute must be a
    number or a flat list of numbers, got an array of shape (2, 1)"."""
    import pandas as pd
    import pytest

    future = pd.DataFrame({"compute": [1e4, 2e4]})
    with pytest.raises(ValueError, match=r"not a table \(columns: compute\); give one column, e.g. compute=table\['compute'\]"):
        fitted.predict(future)
    assert list(fitted.predict(future["compute"], recipe=fitted.recipes[0])["compute"]) == [1e4, 2e4]
