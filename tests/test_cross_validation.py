"""Cross-validation on held-out curve ends: the split, the metrics on hand-made tables with known
answers, the plain-words summary, and one real (short-chain) run through the command line."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from forecast.cli import main
from forecast.cross_validation import (
    checked_cuts,
    describe_cross_validation,
    forecast_hidden,
    performance_metrics,
    reach_bin,
    read_cross_validation,
    split_at,
    splits_at,
)


def _runs(points: dict[str, int], final: float = 100.0) -> pd.DataFrame:
    """Runs with the given number of evaluations, evenly spaced up to `final` compute."""
    rows = []
    for run_id, n in points.items():
        for c in np.linspace(final / n, final, n):
            rows.append({"recipe": run_id.split("-")[0], "run_id": run_id, "compute": c, "metric": 0.3 + c / 1000})
    return pd.DataFrame(rows)


def test_split_hides_each_run_beyond_its_own_fraction_and_leaves_out_short_beginnings():
    runs = pd.concat([_runs({"a-s0": 10}), _runs({"b-s0": 4}, final=400.0)], ignore_index=True)
    seen, hidden, left_out = split_at(runs, 0.5)
    assert sorted(seen.groupby("run_id").size().to_dict().items()) == [("a-s0", 5)]  # b has 2 before its 200
    assert left_out == ["b-s0"]
    assert set(hidden["run_id"]) == {"a-s0"} and hidden["compute"].min() > 50 and len(hidden) == 5
    assert len(seen) + len(hidden) == 10


def test_a_cut_just_below_one_still_hides_each_runs_final_evaluation():
    runs = _runs({"a-s0": 10, "b-s0": 6})
    seen, hidden, left_out = split_at(runs, 1 - 1e-12)
    assert sorted(hidden["run_id"]) == ["a-s0", "b-s0"] and (hidden["compute"] == 100.0).all()
    assert len(seen) == 14 and not left_out


def test_a_cut_no_run_has_three_evaluations_before_is_refused_before_any_fit():
    with pytest.raises(ValueError, match="cut 0.1: no run has 3 evaluations"):
        splits_at(_runs({"a-s0": 10, "b-s0": 10}), (0.5, 0.1))


def test_a_say_that_is_not_a_function_is_refused_naming_it_before_any_fit():
    """say=5 failed at the first cut's line, after the table was read, as "'int' object is not callable"."""
    from forecast.cross_validation import cross_validate

    with pytest.raises(TypeError, match=r"^say must be a function given one line of text \(e.g. print\), got 5$"):
        cross_validate(_runs({"a-s0": 10, "b-s0": 10}), cuts=(0.5,), say=5)


@pytest.mark.parametrize("cuts", [(0.0,), (1.0,), (-0.2,), (), ("abc",), (0.5, 1.5)])
def test_cuts_outside_zero_one_are_refused(cuts):
    with pytest.raises(ValueError, match="cut"):
        checked_cuts(cuts)


def test_cuts_are_sorted_without_repeats():
    assert checked_cuts([0.5, 0.25, 0.5]) == (0.25, 0.5)
    assert checked_cuts(0.3) == (0.3,)


@pytest.mark.parametrize("ahead, name", [(1.1, "up to 2x"), (2.0, "up to 2x"), (2.01, "2-4x"), (4.0, "2-4x"), (9.0, "beyond 4x")])
def test_reach_bins(ahead, name):
    assert reach_bin(ahead) == name


def _hand_made(n_runs: int, covered_runs: int, *, error: float = 0.01) -> pd.DataFrame:
    """Each run: two hidden points (1.5x and 3x ahead), the final one covered for the first
    `covered_runs` runs; forecasts `error` below the observed value; least squares twice as far off."""
    rows = []
    for i in range(n_runs):
        for ahead, final in ((1.5, False), (3.0, True)):
            inside = not final or i < covered_runs
            rows.append({"cut": 0.5, "run_id": f"r{i}", "recipe": "x", "compute_seen": 10.0, "compute": 10 * ahead,
                         "ahead": ahead, "observed": 0.5, "forecast": 0.5 - error, "lower": 0.48 if inside else 0.40,
                         "upper": 0.52 if inside else 0.45, "covered": inside, "z": 1.0 if inside else 3.0,
                         "least_squares": 0.5 - 2 * error, "last_value": 0.45, "final": final})
    cv = pd.DataFrame(rows)
    cv.attrs.update({"level": 0.9, "fits": [{"cut": 0.5, "runs": n_runs, "left_out": [], "converged": True, "problems": []}]})
    return cv


def test_metrics_on_a_hand_made_table():
    metrics = performance_metrics(_hand_made(10, 5)).set_index("reach")
    assert list(metrics.index) == ["up to 2x", "2-4x", "all", "final evaluations"]
    assert metrics.loc["up to 2x", "coverage"] == 1.0 and metrics.loc["final evaluations", "coverage"] == 0.5
    assert metrics.loc["all", "coverage"] == 0.75 and metrics.loc["all", "points"] == 20
    assert metrics.loc["all", "runs"] == 10
    assert metrics.loc["all", "mae"] == pytest.approx(0.01)
    assert metrics.loc["all", "mae_least_squares"] == pytest.approx(0.02)
    assert metrics.loc["all", "mae_last_value"] == pytest.approx(0.05)
    assert metrics.loc["all", "mean_error"] == pytest.approx(0.01)  # observed above the forecast: ran low
    # about 0, not the mean: z of 1 everywhere is no spread about its mean, but a root mean square of 1
    assert metrics.loc["up to 2x", "z_rms"] == 1.0 and metrics.loc["2-4x", "z_rms"] == pytest.approx(math.sqrt(5))


def test_metrics_refuse_a_table_that_is_not_a_cross_validation():
    with pytest.raises(ValueError, match="not a cross_validate"):
        performance_metrics(pd.DataFrame({"cut": [0.5]}))


def test_summary_calls_narrow_intervals_narrow_only_beyond_chance():
    narrow = describe_cross_validation(_hand_made(20, 12))  # 60% of 20 finals: chance gives 75% to 100%
    assert any("too narrow" in line and "60% of the 20 runs' final evaluations" in line for line in narrow)
    assert "ran 0.010 low" in narrow[-1] and "0.010 against least squares' 0.020" in narrow[-1]
    fine = describe_cross_validation(_hand_made(20, 17))  # 85%: within 75% to 100%
    assert "within what chance allows" in fine[-1]
    few = describe_cross_validation(_hand_made(4, 3))  # 75% of 4 runs: within 50% to 100%
    assert "50% to 100% is chance for 4 runs: within what chance allows" in few[-1]


@pytest.mark.parametrize(
    "n_runs, covered",
    [(1, 0), (5, 3), (10, 7), (21, 16)],  # each happens more often than 1 time in 20 with honest 90% intervals
)
def test_a_miss_chance_gives_more_often_than_1_in_20_is_not_called_too_narrow(n_runs, covered):
    from scipy.stats import binom

    assert binom.cdf(covered, n_runs, 0.9) > 0.05
    line = describe_cross_validation(_hand_made(n_runs, covered))[-1]
    assert "within what chance allows" in line and "too narrow" not in line


def test_a_level_between_whole_percents_is_said_as_it_was_asked():
    cv = _hand_made(10, 10).assign(level=0.975)
    assert describe_cross_validation(cv)[-1].startswith("cut 0.5: 97.5% intervals held 100%")
    assert describe_cross_validation(cv.assign(level=0.999))[-1].startswith("cut 0.5: 99.9% intervals")


def test_one_run_is_said_as_one():
    line = describe_cross_validation(_hand_made(1, 1))[-1]
    assert "100% of the 1 run's final evaluation (0% to 100% is chance for 1 run: within" in line


def test_summary_reads_the_level_from_the_table_when_attrs_are_lost():
    at_80 = []
    for cut in (0.25, 0.5):  # two cross_validate(level=0.8) calls, one cut each
        cv = _hand_made(20, 12).assign(cut=cut, level=0.8)
        cv.attrs.update({"level": 0.8, "fits": [{**cv.attrs["fits"][0], "cut": cut}]})
        at_80.append(cv)
    together = pd.concat(at_80, ignore_index=True)  # attrs differ (each cut's fit), so concat drops them
    assert "level" not in together.attrs
    line = describe_cross_validation(together)[-1]
    assert line.startswith("cut 0.5: 80% intervals held 60%") and "within what chance allows" in line
    with pytest.raises(ValueError, match="several levels \\(0.8, 0.9\\)"):
        describe_cross_validation(pd.concat([at_80[0], _hand_made(20, 12).assign(level=0.9)]))


def test_a_fit_that_did_not_converge_is_said_first_when_attrs_are_lost():
    """Two cross_validate() results put together with pd.concat keep no attrs (each has its own
    fits), and the summary, and the report's section made from it, then said nothing of a fit
    that did not converge, although every row's fit_converged column says it."""
    parts = []
    for cut, converged in ((0.25, True), (0.5, False)):
        problems = [] if converged else ["R-hat up to 1.05 (> 1.01): chains disagree", "3 divergent transitions"]
        cv = _hand_made(10, 9).assign(cut=cut, level=0.9, fit_converged=converged, fit_problems="; ".join(problems))
        cv.attrs.update({"fits": [{"cut": cut, "runs": 10, "left_out": [], "converged": converged, "problems": problems}]})
        parts.append(cv)
    together = pd.concat(parts, ignore_index=True)
    assert "fits" not in together.attrs
    lines = describe_cross_validation(together)
    assert lines[0] == ("cut 0.5: the fit did not converge (R-hat up to 1.05 (> 1.01): chains disagree; 3 divergent "
                        "transitions); treat its figures with suspicion")
    assert not any("cut 0.25: the fit did not converge" in line for line in lines)


def test_summary_says_an_unconverged_fit_and_left_out_runs_first():
    cv = _hand_made(10, 9)
    cv.attrs["fits"] = [{"cut": 0.5, "runs": 10, "left_out": ["z-s0"], "converged": False, "problems": ["R-hat up to 1.05"]}]
    lines = describe_cross_validation(cv)
    assert lines[0].startswith("cut 0.5: the fit did not converge (R-hat up to 1.05)")
    assert "z-s0" in lines[1]


def test_hidden_points_get_ordered_intervals_and_the_baselines(fitted, small_sweep):
    seen, hidden, left_out = split_at(small_sweep, 0.5)
    table = forecast_hidden(fitted, seen, hidden, cut=0.5, level=0.8)
    assert len(table) == len(hidden) and not left_out
    assert (table["lower"] <= table["forecast"]).all() and (table["forecast"] <= table["upper"]).all()
    assert (table["ahead"] > 1).all() and table.groupby("run_id")["final"].sum().eq(1).all()
    assert table["covered"].eq((table["observed"] >= table["lower"]) & (table["observed"] <= table["upper"])).all()
    last_seen = seen.sort_values("compute").groupby("run_id")["metric"].last()
    assert table["last_value"].eq(table["run_id"].map(last_seen)).all()
    wider = forecast_hidden(fitted, seen, hidden, cut=0.5, level=0.95)
    assert ((wider["upper"] - wider["lower"]) > (table["upper"] - table["lower"])).all()


def test_each_cuts_fit_is_padded_to_the_whole_tables_rows_and_reuses_the_compiled_model_of_its_fit(
        fitted, small_sweep, monkeypatch):
    """The quickstart notebook fits the table, then cross-validates it. Each cut's fit is padded to the rows
    of a fit of the whole table (padding rows weigh nothing), so it reuses that fit's compiled model instead
    of a numba compile of its own, 20-80 s on 2 cores (benchmarks/cross_validation_speed.py)."""
    from forecast import cross_validate, inference
    from forecast.model import prepare_data

    compiled_here = []
    original = inference._compiled

    def noting(build_model, key, data_values):
        compiled, reused = original(build_model, key, data_values)
        compiled_here.append(not reused)
        return compiled, reused

    monkeypatch.setattr(inference, "_compiled", noting)
    cv = cross_validate(small_sweep, cuts=(0.1, 0.5), forecaster=fitted, random_seed=1)
    assert compiled_here == [False, False]
    assert [fit["runs"] for fit in cv.attrs["fits"]] == [small_sweep["run_id"].nunique()] * 2
    # on its own rows the first cut's fit would have another structure: 10 evaluations of each run seen
    assert len(prepare_data(small_sweep).y) == 128 > len(prepare_data(split_at(small_sweep, 0.1)[0]).y) == 64


def test_a_cut_whose_model_differs_from_the_whole_tables_in_more_than_its_rows_keeps_its_own_rows(small_sweep):
    """Padding a cut's fit to the whole table's rows pays where the two fits can share a compiled model. One
    that leaves runs out, or leaves a run under 8 evaluations (fitted non-centred), compiles its own anyway:
    padded, it would only sample more rows. Nor is a table padded past SHARED_PADDING_MAX_ROWS, where the
    padding's sampling costs more than the compile it saves."""
    from forecast import ScalingForecaster
    from forecast.cross_validation import SHARED_PADDING_MAX_ROWS, cut_padding

    forecaster = ScalingForecaster()
    runs = _runs({"a-s0": 16, "a-s1": 16, "b-s0": 16, "b-s1": 16, "c-s0": 40})  # evenly spaced in compute
    padding = {cut: cut_padding(forecaster, runs, seen, left_out)
               for cut, (seen, _, left_out) in zip((0.25, 0.5), splits_at(runs, (0.25, 0.5)), strict=True)}
    assert padding == {0.25: None, 0.5: 128}  # 4 evaluations of 16 seen at 0.25: fitted non-centred; 8 at 0.5
    assert cut_padding(ScalingForecaster(parametrization="centered"), runs, split_at(runs, 0.25)[0], []) == 128
    assert cut_padding(forecaster, runs, split_at(runs, 0.5)[0], ["a-s0"]) is None
    many = pd.concat([small_sweep.assign(run_id=small_sweep["run_id"] + f"-{i}") for i in range(22)], ignore_index=True)
    assert len(many) == 2112 > SHARED_PADDING_MAX_ROWS
    assert cut_padding(forecaster, many, split_at(many, 0.5)[0], []) is None
    assert cut_padding(forecaster, many.iloc[:1920], split_at(many.iloc[:1920], 0.5)[0], []) == 1920


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--cuts", "0.5,1"], "--cuts 0.5,1: each cut is a fraction"),
        (["--cuts", "x"], "--cuts x"),
        (["--level", "1.5"], "--level must lie in (0, 1)"),
        (["--cuts", "0.5"], "cut 0.5: no run has 3 evaluations"),
    ],
)
def test_cli_refuses_bad_flags_before_fitting(tmp_path, capsys, flags, message):
    _runs({"a-s0": 4, "b-s0": 5}).to_csv(tmp_path / "runs.csv", index=False)  # 2 evaluations before half
    assert main(["cross-validate", str(tmp_path / "runs.csv"), *flags]) == 2
    assert message in capsys.readouterr().err


def test_cli_names_the_cuts_flag_and_what_it_was_given_where_a_cut_leaves_too_few_evaluations(tmp_path, capsys):
    """Said as "cut 0.5: no run has 3 evaluations ...", naming the table but not the flag, where every other refusal
    of --cuts names it and the value given; the cut at fault is still named, one of several given."""
    runs = tmp_path / "runs.csv"
    _runs({"a-s0": 4, "b-s0": 5}).to_csv(runs, index=False)  # 3 evaluations up to 0.9, 2 up to 0.5
    assert main(["cross-validate", str(runs), "--cuts", "0.9,0.5"]) == 2
    assert capsys.readouterr().err == (f"error: --cuts 0.9,0.5: {runs}: cut 0.5: no run has 3 evaluations up to 0.5 "
                                       "of its final compute; give a larger cut\n")


def test_cli_cross_validates_a_sweep_and_writes_every_hidden_evaluation(tmp_path, small_sweep, capsys):
    """One real short-chain fit: every hidden evaluation is forecast, the file and JSON agree."""
    small_sweep.to_csv(tmp_path / "runs.csv", index=False)
    out = tmp_path / "cv.csv"
    rc = main(["cross-validate", str(tmp_path / "runs.csv"), "--cuts", "0.5", "--fast", "--seed", "1", "--json", "--out", str(out)])
    assert rc == 0
    payload = json.loads(capsys.readouterr().out)
    table = pd.read_csv(out)
    _, hidden, _ = split_at(small_sweep, 0.5)
    assert len(table) == len(hidden) and set(table["run_id"]) == set(hidden["run_id"])
    everything = next(m for m in payload["metrics"] if m["reach"] == "all")
    assert everything["points"] == len(hidden)
    assert everything["coverage"] == pytest.approx(table["covered"].mean())
    assert payload["fits"][0]["runs"] == small_sweep["run_id"].nunique()
    assert read_cross_validation(out).attrs["fits"][0]["left_out"] == payload["fits"][0]["left_out"] == []
    assert payload["summary"][-1].startswith("cut 0.5: 90% intervals held")
    # the synthetic curves are the model's own family: its forecasts beat least squares' from half the compute
    assert everything["mae"] < everything["mae_least_squares"]
    assert everything["coverage"] >= 0.6 and not math.isnan(everything["z_rms"])


def _saved(cv: pd.DataFrame, path) -> None:
    cv.assign(level=cv.attrs["level"], fit_converged=True, fit_problems="").to_csv(path, index=False)


def test_a_saved_table_reads_back_with_its_level_and_fits(tmp_path):
    cv = _hand_made(10, 5)
    cv["level"] = 0.8
    cv["fit_converged"] = False
    cv["fit_problems"] = "R-hat up to 1.03; 2 divergent transitions"
    cv.to_csv(tmp_path / "cv.csv", index=False)
    back = read_cross_validation(tmp_path / "cv.csv")
    assert back.attrs["level"] == 0.8
    assert back.attrs["fits"] == [{"cut": 0.5, "runs": 10, "left_out": [], "converged": False,
                                   "problems": ["R-hat up to 1.03", "2 divergent transitions"]}]
    assert back["covered"].dtype == bool and back["covered"].sum() == 15
    pd.testing.assert_frame_equal(performance_metrics(back), performance_metrics(cv))


def test_a_saved_table_names_the_runs_its_fit_left_out(tmp_path):
    """A report from cv.csv said nothing of runs left out of a cut (too few evaluations before it):
    attrs do not survive a CSV, so the table carries them in fit_left_out."""
    cv = _hand_made(10, 5)
    _saved(cv.assign(fit_left_out=json.dumps(["z; s0", "y-s1"])), tmp_path / "cv.csv")
    back = read_cross_validation(tmp_path / "cv.csv")
    assert back.attrs["fits"][0]["left_out"] == ["z; s0", "y-s1"]
    assert any("left out 2 run(s)" in line and "z; s0, y-s1" in line for line in describe_cross_validation(back))
    _saved(cv.assign(fit_left_out="not json"), tmp_path / "old.csv")  # a hand-edited cell: nothing named, no crash
    assert read_cross_validation(tmp_path / "old.csv").attrs["fits"][0]["left_out"] == []


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda f: f.drop(columns="lower"), "no column 'lower'"),
        (lambda f: f.assign(covered="maybe"), "column 'covered' holds 'maybe'"),
        (lambda f: f.assign(level=1.5), "column 'level' must hold one interval probability"),
        (lambda f: f.iloc[:0], "holds no hidden evaluations"),
        (lambda f: f.drop(columns="level"), "no column 'level', so which interval it checked is not known"),
        (lambda f: f.assign(observed=["", *f["observed"][1:]]), "column 'observed' holds '' on line 2, not a number"),
        (lambda f: f.assign(ahead=[*f["ahead"][:-1], "x"]), "column 'ahead' holds 'x' on line 9"),
        (lambda f: f.assign(ahead=[0.0, *f["ahead"][1:]]), "column 'ahead' holds '0.0' on line 2, not a compute ratio"),
        (lambda f: f.assign(z=["big", *f["z"][1:]]), "column 'z' holds 'big'"),
        # found by fuzzing: 'inf' read as a number, and an infinite reach failed the report's chart after its fit
        (lambda f: f.assign(ahead=[*f["ahead"][:-1], "inf"]), "column 'ahead' holds 'inf' on line 9, not a compute ratio"),
        # a reach near the largest float failed matplotlib's log axis on the report's chart, after its fit
        (lambda f: f.assign(ahead=[*f["ahead"][:-1], "1e308"]), r"column 'ahead' holds '1e\+308' on line 9, not a compute ratio > 0 and at most 1e\+300"),
        (lambda f: f.assign(observed=["1e400", *f["observed"][1:]]), "column 'observed' holds 'inf' on line 2, not a finite number"),
        (lambda f: f.assign(z=["-inf", *f["z"][1:]]), "column 'z' holds '-inf' on line 2, not a finite number"),
    ],
)
def test_a_table_that_is_not_a_saved_cross_validation_is_refused_naming_the_file(tmp_path, edit, message):
    cv = _hand_made(4, 4)
    frame = cv.assign(level=0.9, fit_converged=True, fit_problems="")
    edit(frame).to_csv(tmp_path / "cv.csv", index=False)
    with pytest.raises(ValueError, match=message) as err:
        read_cross_validation(tmp_path / "cv.csv")
    assert "cv.csv" in str(err.value)


def test_the_report_shows_the_cross_validation_and_warns_when_it_is_of_other_runs(fitted, tmp_path):
    from forecast import report as rp

    seen, hidden, _ = split_at(fitted.runs_, 0.5)
    cv = forecast_hidden(fitted, seen, hidden, cut=0.5, level=0.9)
    cv.attrs.update({"level": 0.9, "fits": [{"cut": 0.5, "runs": 6, "left_out": [], "converged": True, "problems": []}]})
    data = rp.collect_report(fitted, target=0.6, cross_validation=cv, cross_validation_source="cv.csv")
    page = rp.render_report(data)
    assert 'id="cross-validation"' in page and 'id="honesty-table"' in page and "(read from cv.csv)" in page
    section = page.split('id="cross-validation"')[1].split("</section>")[0]
    assert 'alt="held-out errors against the interval, by reach"' in section and "data:image/png;base64," in section
    assert data.honesty["summary"][-1] in page.replace("&#x27;", "'")
    assert not any("other runs" in w for w in data.warnings)
    summary = rp.report_summary(data)
    assert summary["cross_validation"]["metrics"][0]["cut"] == 0.5 and summary["cross_validation"]["level"] == 0.9
    elsewhere = cv.assign(run_id="someone-else")
    data = rp.collect_report(fitted, target=0.6, cross_validation=elsewhere)
    assert any("holds runs this fit does not (someone-else)" in w for w in data.warnings)
    assert 'id="cross-validation"' not in rp.render_report(rp.collect_report(fitted, target=0.6))


def _save_fit_and_cross_validation(fitted, folder) -> None:
    """folder/fit.nc and folder/cv.csv: the fit, and its forecasts of the halves it hides at cut 0.5."""
    fitted.save(folder / "fit.nc")
    seen, hidden, _ = split_at(fitted.runs_, 0.5)
    cv = forecast_hidden(fitted, seen, hidden, cut=0.5, level=0.9)
    cv.attrs["level"] = 0.9
    _saved(cv, folder / "cv.csv")


def test_cli_report_reads_a_saved_cross_validation_and_refuses_a_bad_one_before_fitting(fitted, tmp_path, capsys):
    _save_fit_and_cross_validation(fitted, tmp_path)
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "fit.nc"), "--cross-validation", str(tmp_path / "cv.csv"), "-o", str(out),
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "how honest the intervals were on these runs" in printed and "cut 0.5: 90% intervals held" in printed
    assert 'id="honesty-table"' in out.read_text(encoding="utf-8")
    (tmp_path / "runs.csv").write_text("run_id,recipe,compute,metric\na,r,1,0.1\na,r,2,0.2\n")
    assert main(["report", str(tmp_path / "runs.csv"), "--cross-validation", str(tmp_path / "runs.csv"), "-o",
                 str(tmp_path / "x.html")]) == 2
    assert "--cross-validation" in capsys.readouterr().err and not (tmp_path / "x.html").exists()
    assert main(["report", str(tmp_path / "fit.nc"), "--cross-validation", str(tmp_path), "-o", str(out)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_cli_report_refuses_to_write_its_page_over_the_cross_validation_it_reads(fitted, tmp_path, capsys):
    """`-o cv.csv --cross-validation cv.csv` read the table and then replaced it with the HTML page."""
    _save_fit_and_cross_validation(fitted, tmp_path)
    before = (tmp_path / "cv.csv").read_bytes()
    assert main(["report", str(tmp_path / "fit.nc"), "--cross-validation", str(tmp_path / "cv.csv"),
                 "-o", str(tmp_path / "cv.csv"), "--no-progress"]) == 2
    assert "is, or would become, an input read from" in capsys.readouterr().err
    assert (tmp_path / "cv.csv").read_bytes() == before


def test_python_dash_m_forecast_is_the_forecast_command():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "forecast", "cross-validate", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "usage: forecast cross-validate" in done.stdout


def test_the_cross_validation_chart_draws_every_hidden_evaluation_beside_its_band():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from forecast.plotting import plot_cross_validation

    cv = pd.concat([_hand_made(10, 5), _hand_made(6, 6).assign(cut=0.25)], ignore_index=True)
    cv["level"] = 0.8
    fig = plot_cross_validation(cv)
    ax = fig.axes[0]
    dots = [c for c in ax.collections if c.get_offsets().shape[0] > 0 and type(c).__name__ == "PathCollection"]
    assert sorted(len(c.get_offsets()) for c in dots) == [12, 20]
    first = next(c for c in dots if len(c.get_offsets()) == 20)
    # y is observed - forecast: 0.01 for every hand-made evaluation
    assert np.allclose(first.get_offsets()[:, 1], 0.01)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["cut 0.25: 100% of 12 inside", "cut 0.5: 75% of 20 inside"]
    assert ax.get_legend().get_title().get_text() == "bands: the 80% interval"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1.5x", "2x", "3x"]  # reaches 1.5x and 3x, one label each
    plt.close(fig)
    with pytest.raises(ValueError, match="no column 'lower'"):
        plot_cross_validation(cv.drop(columns="lower"))


def test_cli_table_writes_a_mean_error_that_rounds_to_zero_without_a_minus_sign(tmp_path, capsys, monkeypatch):
    """The printed table said mean_error -0.000 for a bias of -0.0004 (the report already said +0.000)."""
    import forecast.cross_validation as cv_module

    runs = _runs({"a-s0": 8, "b-s0": 8})
    runs.to_csv(tmp_path / "runs.csv", index=False)

    def fake_cross_validate(runs, *, cuts, level, **kwargs):
        _, hidden, _ = split_at(runs, cuts[0])
        table = hidden.assign(cut=cuts[0], ahead=1.5, observed=hidden["metric"], forecast=hidden["metric"] + 0.0004,
                              lower=hidden["metric"] - 0.05, upper=hidden["metric"] + 0.05, covered=True, z=0.1,
                              least_squares=hidden["metric"], last_value=hidden["metric"], level=level,
                              fit_converged=True, fit_problems="")
        table["final"] = table.groupby("run_id")["compute"].transform("max") == table["compute"]
        table.attrs.update(level=level, compute_unit="compute units",
                           fits=[{"cut": cuts[0], "runs": 2, "left_out": [], "converged": True, "problems": []}])
        return table

    monkeypatch.setattr(cv_module, "cross_validate", fake_cross_validate)
    assert main(["cross-validate", str(tmp_path / "runs.csv"), "--cuts", "0.5"]) == 0
    table = capsys.readouterr().out.split("\n\ncoverage:")[0]
    assert "mean_error" in table and "-0.000" not in table and "0.000" in table


def test_a_terminal_is_told_once_that_a_cuts_fit_did_not_converge(tmp_path, monkeypatch, main_said):
    """The text cross-validation said a cut's unconverged fit first in its summary on stdout and again on
    stderr: a terminal showed its problems twice. Where stdout and stderr reach one place it is said once;
    where stdout is saved apart (`> out.txt`) the file keeps it and stderr says it too."""
    import forecast.cross_validation as cv_module

    runs = _runs({"a-s0": 8, "b-s0": 8})
    runs.to_csv(tmp_path / "runs.csv", index=False)

    def fake_cross_validate(runs, *, cuts, level, **kwargs):  # a cut whose fit did not converge
        _, hidden, _ = split_at(runs, cuts[0])
        table = hidden.assign(cut=cuts[0], ahead=1.5, observed=hidden["metric"], forecast=hidden["metric"],
                              lower=hidden["metric"] - 0.05, upper=hidden["metric"] + 0.05, covered=True, z=0.1,
                              least_squares=hidden["metric"], last_value=hidden["metric"], level=level,
                              fit_converged=False, fit_problems="7 divergent transitions")
        table["final"] = table.groupby("run_id")["compute"].transform("max") == table["compute"]
        table.attrs.update(level=level, compute_unit="compute units",
                           fits=[{"cut": cuts[0], "runs": 2, "left_out": [], "converged": False,
                                  "problems": ["7 divergent transitions"]}])
        return table

    monkeypatch.setattr(cv_module, "cross_validate", fake_cross_validate)
    argv = ["cross-validate", str(tmp_path / "runs.csv"), "--cuts", "0.5"]
    code, shown = main_said(argv, together=True)
    assert code == 0
    assert shown.count("7 divergent transitions") == 1
    code, out, err = main_said(argv, together=False)
    assert code == 0
    assert "cut 0.5: the fit did not converge (7 divergent transitions)" in out
    assert "cut 0.5: the fit did not converge, so treat" in err


@pytest.mark.parametrize("on_callers_axes", [False, True])
def test_the_cross_validation_chart_of_a_cut_whose_fit_did_not_converge_says_so_on_the_image(on_callers_axes):
    """The fan chart and forest of a flagged fit carry a red line, but the cross-validation chart
    (the report's section 6 image, notebook 01's last chart) of a cut whose fit did not converge
    looked like a converged one's once pasted alone. It now names the cut and what failed; a
    table whose fits all converged draws no such line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from forecast.plotting import plot_cross_validation

    problems = ["R-hat up to 1.121 (> 1.01): chains disagree",
                "8 divergent transitions: the posterior geometry was not explored reliably"]
    cv = pd.concat([_hand_made(6, 5).assign(cut=0.25), _hand_made(6, 6)], ignore_index=True)
    cv.attrs = {"level": 0.9, "fits": [{"cut": 0.25, "runs": 6, "left_out": [], "converged": True, "problems": []},
                                       {"cut": 0.5, "runs": 6, "left_out": [], "converged": False, "problems": problems}]}
    converged = cv.copy()
    converged.attrs = {"level": 0.9, "fits": [{**fit, "converged": True, "problems": []} for fit in cv.attrs["fits"]]}

    def marks_of(table):
        fig = plot_cross_validation(table, ax=plt.subplots()[1] if on_callers_axes else None)
        texts = [*fig.texts, *(t for ax in fig.axes for t in ax.texts)]
        found = [t for t in texts if "did not converge" in t.get_text()]
        plt.close("all")
        return found

    marks = marks_of(cv)
    assert len(marks) == 1 and to_hex(marks[0].get_color()) == "#c53030"
    said = marks[0].get_text().replace("\n", " ")
    assert "cut 0.5" in said and "cut 0.25" not in said
    assert "R-hat up to 1.121 (> 1.01)" in said and "8 divergent transitions" in said
    assert "chains disagree" not in said  # the short form, as on the fan chart's line
    assert marks_of(converged) == []


def test_the_summaries_and_chart_read_the_file_cross_validate_out_wrote(tmp_path):
    """`forecast report --cross-validation cv.csv` reads the file; performance_metrics("cv.csv"),
    describe_cross_validation and plot_cross_validation failed on it with "'str' object has no
    attribute 'columns'"."""
    import matplotlib.pyplot as plt

    from forecast.plotting import plot_cross_validation

    cv = _hand_made(10, 5)
    _saved(cv, tmp_path / "cv.csv")
    for path in (tmp_path / "cv.csv", str(tmp_path / "cv.csv")):
        pd.testing.assert_frame_equal(performance_metrics(path), performance_metrics(cv))
        assert describe_cross_validation(path) == describe_cross_validation(cv)
        plt.close(plot_cross_validation(path))


@pytest.mark.parametrize("given", [{"cut": [0.5]}, [0.5], None])
def test_the_summaries_refuse_what_is_not_a_cross_validation_table_in_words(given):
    from forecast.plotting import plot_cross_validation

    for summary in (performance_metrics, describe_cross_validation, plot_cross_validation):
        with pytest.raises(TypeError, match="takes cross_validate\\(\\)'s table or the CSV file"):
            summary(given)


class _KnownDraws:
    """A fitted forecaster's stand-in whose posterior predictive draws are given: the intervals,
    medians and z scores forecast_hidden makes of them are then known by hand."""

    def __init__(self, draws: np.ndarray):
        self.draws, self.asked = draws, []

    def sample_curves(self, compute, **how):
        self.asked.append(how)
        assert len(compute) == self.draws.shape[1]
        return self.draws


def _hidden_with_known_draws(level: float = 0.9):
    runs = _runs({"a-s0": 10})  # compute 10, 20, ..., 100
    seen, hidden, _ = split_at(runs, 0.3)  # seen 10, 20, 30; hidden 40 ... 100
    # observed: at the 5% and 95% quantiles exactly, just outside each, inside; the final one at a skewed column's median
    hidden["metric"] = [0.05, 0.95, 0.04, 0.96, 0.5, 0.5, 0.5]
    draws = np.tile((np.arange(101) / 100)[:, None], (1, 7))  # quantile q of each column is q itself
    draws[:, 6] = np.where(np.arange(101) < 90, 0.5, 1.5)  # median 0.5, mean above it
    fc = _KnownDraws(draws)
    return fc, seen, forecast_hidden(fc, seen, hidden, cut=0.3, level=level), draws


def test_forecast_hidden_reads_the_central_interval_median_and_z_of_known_draws():
    """Kills the mutants: interval from (1 - level) instead of its half in each tail, `<` at the
    interval's ends, z about the median, the mean as the forecast, shared_noise=False, ahead
    over the first seen compute, the first evaluation as final, the first seen value as the last."""
    fc, seen, table, draws = _hidden_with_known_draws()
    assert fc.asked == [{"run_id": "a-s0", "kind": "run", "shared_noise": True}]
    assert table["lower"].iloc[:6].tolist() == pytest.approx([0.05] * 6)
    assert table["upper"].iloc[:6].tolist() == pytest.approx([0.95] * 6)
    # an observation on either end of the interval is inside it
    assert table["covered"].tolist() == [True, True, False, False, True, True, True]
    assert table["forecast"].tolist() == pytest.approx([0.5] * 7)  # the median, not the skewed column's mean
    expected_z = (table["observed"].to_numpy() - draws.mean(axis=0)) / draws.std(axis=0)
    assert table["z"].to_numpy() == pytest.approx(expected_z)
    assert table["z"].iloc[6] < 0  # the skewed column's mean lies above the observed median
    assert table["ahead"].tolist() == pytest.approx([c / 30 for c in (40, 50, 60, 70, 80, 90, 100)])
    assert table["final"].tolist() == [False] * 6 + [True]
    assert (table["last_value"] == seen["metric"].iloc[-1]).all() and (table["compute_seen"] == 30).all()


def test_forecast_hidden_at_level_80_reads_the_10_and_90_percent_quantiles():
    _, _, table, _ = _hidden_with_known_draws(level=0.8)
    assert table["lower"].iloc[0] == pytest.approx(0.1) and table["upper"].iloc[0] == pytest.approx(0.9)
    assert table["covered"].tolist() == [False, False, False, False, True, True, True]


def test_metrics_count_points_not_runs_and_absolute_errors_of_either_sign():
    """Kills the mutants: coverage as the mean of each run's coverage, and the MAE as the absolute
    mean error. r0 has three hidden points, all covered, forecasts 0.02 high and low; r1 has one, missed."""
    rows = []
    for run_id, error, covered in (("r0", 0.02, True), ("r0", -0.02, True), ("r0", 0.02, True), ("r1", -0.02, False)):
        rows.append({"cut": 0.5, "run_id": run_id, "ahead": 1.5, "observed": 0.5, "forecast": 0.5 + error,
                     "lower": 0.4, "upper": 0.6, "covered": covered, "z": 1.0, "least_squares": 0.5 - 2 * error,
                     "last_value": 0.5 + 3 * error, "final": run_id == "r1"})
    metrics = performance_metrics(pd.DataFrame(rows)).set_index("reach")
    assert metrics.loc["all", "coverage"] == 0.75  # 3 of 4 points; the mean over runs would say 50%
    assert metrics.loc["all", "mae"] == pytest.approx(0.02)
    assert metrics.loc["all", "mae_least_squares"] == pytest.approx(0.04)
    assert metrics.loc["all", "mae_last_value"] == pytest.approx(0.06)
    assert metrics.loc["all", "mean_error"] == pytest.approx(0.0, abs=1e-12)  # the errors cancel; their sizes do not
    assert metrics.loc["all", "width"] == pytest.approx(0.2)


def test_an_evaluation_at_the_cut_is_seen_though_the_cut_times_the_final_compute_rounds_below_it():
    """12 evaluations up to 100: the 4th is at 33.333333333333336, a third of 100 is 33.33333333333333.
    Kills the mutant without the rounding tolerance, which hid the 4th evaluation."""
    seen, hidden, _ = split_at(_runs({"a-s0": 12}), 1 / 3)
    assert len(seen) == 4 and len(hidden) == 8


@pytest.mark.parametrize("level", [1.0, 0.0, True])
def test_a_level_of_one_or_zero_is_refused_before_any_fit(level):
    """Kills the mutant taking level=1, whose 'interval' is the draws' whole range."""
    from forecast.cross_validation import cross_validate

    with pytest.raises(ValueError, match="level is the interval's probability, in \\(0, 1\\)"):
        cross_validate(_runs({"a-s0": 10}), level=level)


def test_a_hand_made_table_without_a_level_is_read_as_90_percent_intervals():
    """Kills the mutant taking 95% where neither a level column nor attrs say the level."""
    cv = _hand_made(10, 9)
    cv.attrs.pop("level")
    assert describe_cross_validation(cv)[-1].startswith("cut 0.5: 90% intervals held 90%")


def test_forecasts_off_by_a_few_thousandths_are_said_to_run_low_not_off():
    """Kills the mutant calling a bias under 0.005 'off': only what rounds to 0.000 is neither."""
    assert "forecasts ran 0.003 low" in describe_cross_validation(_hand_made(10, 9, error=0.003))[-1]
    assert "forecasts ran 0.000 off" in describe_cross_validation(_hand_made(10, 9, error=0.0001))[-1]


def test_cli_out_on_a_disk_that_fills_up_keeps_the_table_already_there(tmp_path, small_sweep):
    """--out is written atomically: a table cut short by a full disk leaves the earlier one as it was (the
    cross-validation itself stands in for minutes of fits: a hand-made table of hidden evaluations)."""
    from conftest import main_on_a_full_disk

    small_sweep.to_csv(tmp_path / "runs.csv", index=False)
    _saved(_hand_made(10, 5), tmp_path / "made.csv")
    old = (tmp_path / "made.csv").read_text()
    (tmp_path / "cv.csv").write_text(old)  # the table an earlier cross-validation wrote
    before = ("import forecast.cross_validation as cv_module\n"
              f"made = cv_module.read_cross_validation({str(tmp_path / 'made.csv')!r})\n"
              "cv_module.cross_validate = lambda runs, **kwargs: made")
    argv = ["cross-validate", str(tmp_path / "runs.csv"), "--cuts", "0.5", "--fast", "--out", str(tmp_path / "cv.csv")]
    done = main_on_a_full_disk(argv, room=len(old) // 2, before=before)
    assert done.returncode != 0, done.stdout
    assert (tmp_path / "cv.csv").read_text() == old
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cv.csv", "made.csv", "runs.csv"]


def test_cli_refuses_a_saved_fit_in_words(tmp_path, capsys):
    """cross-validate fits run tables: a saved fit given to it is named as one, as fit and backtest name it,
    not left to the reader of its folder ('holds no run files')."""
    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "fit.nc").write_bytes(b"")
    for given in (tmp_path / "fit", tmp_path / "fit" / "fit.nc"):
        assert main(["cross-validate", str(given)]) == 2
        assert (f"{given}: is a saved fit; `forecast cross-validate` reads a run table or a folder of run logs"
                in capsys.readouterr().err)
