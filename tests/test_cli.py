import json
import os
import subprocess
import sys
import warnings

import pytest

from forecast.cli import main, prior_overrides
from forecast.formatting import fmt_compute


@pytest.fixture(scope="module")
def fit_dir(tmp_path_factory, small_sweep):
    folder = tmp_path_factory.mktemp("cli")
    small_sweep.to_csv(folder / "runs.csv", index=False)
    rc = main(["fit", str(folder / "runs.csv"), "--out", str(folder / "fit"), "--fast", "--seed", "3", "--target", "0.55", "--no-progress"])
    assert rc == 0
    return folder


def _strict_json(text: str):
    """json.loads as JSON.parse and jq read it: NaN and Infinity are not JSON."""
    def refuse(token):
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_fit_writes_fit_and_summary(fit_dir):
    summary = _strict_json((fit_dir / "fit" / "summary.json").read_text())
    assert summary["n_runs"] == 6 and len(summary["recipes"]) == 3
    assert "max_rhat" in summary["diagnostics"] and "converged" in summary["diagnostics"]
    assert {row["recipe"] for row in summary["compute_to_target"]} == set(summary["recipes"])
    assert (fit_dir / "fit" / "fit.nc").stat().st_size > 0
    assert summary["input"] == str((fit_dir / "runs.csv").resolve())  # found from any folder a report runs in
    assert summary["misshapen_runs"] == []  # the small sweep's runs follow their sigmoids


def test_predict_json(fit_dir, capsys):
    rc = main(["predict", str(fit_dir / "fit"), "--compute", "1e4,1e5", "--recipe", "scalerl_8b", "--json"])
    assert rc == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["compute"] for r in records] == [1e4, 1e5]
    assert all(r["q05"] <= r["q50"] <= r["q95"] for r in records)


def test_predict_run_kind_table(fit_dir, capsys):
    assert main(["predict", str(fit_dir / "fit"), "--compute", "2e4", "--run-id", "scalerl_8b-s1"]) == 0
    out = capsys.readouterr().out
    assert "scalerl_8b-s1" in out and "q95" in out


def test_predict_says_a_mixed_up_name_as_its_flag(fit_dir, capsys):
    """`forecast predict FIT --run-id scalerl_8b` answered "(it is a recipe: give recipe='scalerl_8b')",
    Python a terminal cannot take; it now names the flag, and quotes a name as a shell reads it back."""
    assert main(["predict", str(fit_dir / "fit"), "--compute", "2e4", "--run-id", "scalerl_8b"]) == 2
    assert "unknown run_id 'scalerl_8b' (it is a recipe: give --recipe scalerl_8b); known: " in capsys.readouterr().err
    assert main(["predict", str(fit_dir / "fit"), "--compute", "2e4", "--recipe", "scalerl_8b-s1"]) == 2
    assert "unknown recipe 'scalerl_8b-s1' (it is a run: give --run-id scalerl_8b-s1); known: " in capsys.readouterr().err
    from forecast.cli import _shell_word

    assert [_shell_word(name) for name in ("dapo", "dapo big", "it's grpo", "it's $x")] == [
        "dapo", "'dapo big'", '"it\'s grpo"', "'it'\"'\"'s $x'"]


@pytest.mark.parametrize("name, said", [
    ("runs\\a", "give --run-id 'runs\\a')"),  # KeyError's str() is its repr: it read 'runs\\\\a'
    ("-s0", "give --run-id=-s0)"),  # '--run-id -s0' is refused by argparse: -s0 reads as a flag
])
def test_predict_writes_the_flag_hint_for_a_name_as_a_shell_takes_it(fit_dir, capsys, monkeypatch, name, said):
    from forecast.forecaster import ScalingForecaster

    def raising(self, *args, **kwargs):
        raise KeyError(f"unknown recipe '{name}' (it is a run: give run_id='{name}'); known: a, b")

    monkeypatch.setattr(ScalingForecaster, "predict", raising)
    assert main(["predict", str(fit_dir / "fit"), "--compute", "2e4", "--recipe", "x"]) == 2
    assert said in capsys.readouterr().err


def test_predict_names_the_compute_at_fault(fit_dir, capsys):
    """`forecast predict FIT --compute 1e12,-1 2e12` said 'got 1e+12, -1, 2e+12', the good values beside
    the bad one and in another spelling of compute than every other message; it names the bad ones."""
    assert main(["predict", str(fit_dir / "fit"), "--compute", "1e12,-1", "2e12"]) == 2
    assert "error: --compute values must be finite and > 0, got -1 (of 3 values)\n" in capsys.readouterr().err
    assert main(["predict", str(fit_dir / "fit"), "--compute", "inf,-1e20", "nan"]) == 2
    assert "got inf, -1e20, nan (of 3 values)" in capsys.readouterr().err


def test_predict_table_writes_compute_as_every_other_command_does(fit_dir, capsys):
    # the table printed 1.5e+06 where decide, report and watch write 1.5e6
    assert main(["predict", str(fit_dir / "fit"), "--compute", "2e4", "1.5e6", "--recipe", "scalerl_8b"]) == 0
    out = capsys.readouterr().out
    assert " 1.5e6 " in out and "20,000" in out and "e+" not in out


def test_predict_table_names_its_compute_unit_as_decide_does(fit_dir, capsys):
    """`forecast predict` printed compute 4e12 with no unit, where fit, decide and report name it
    (decide's table opens with "compute in flops"): a forecast pasted alone read in no unit."""
    unit = json.loads((fit_dir / "fit" / "summary.json").read_text())["compute_unit"]
    assert main(["predict", str(fit_dir / "fit"), "--compute", "2e4", "--recipe", "scalerl_8b"]) == 0
    predicted = capsys.readouterr().out.splitlines()
    assert main(["decide", str(fit_dir / "fit"), "--budget", "2e4"]) == 0
    decided = capsys.readouterr().out.splitlines()
    assert predicted[0] == decided[0] == f"compute in {unit}"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["predict", "{d}/fit", "--compute", "abc"], "not a number"),
        (["predict", "{d}/fit", "--compute", "-5"], "> 0"),
        (["predict", "{d}/fit", "--compute", "-1e5"], "> 0"),  # a negative number, not an unknown flag
        (["decide", "{d}/fit", "--budget", "-2.5E+4"], "--budget must be finite and > 0"),
        (["predict", "{d}/fit", "--compute", "10", "--recipe", "nope"], "unknown recipe"),
        (["predict", "{d}/nofit", "--compute", "10"], "no saved fit"),
        (["fit", "{d}/missing.csv", "--out", "{d}/x"], "does not exist"),
        (["fit", "{d}/runs.csv", "--out", "{d}/x", "--prior", "bogus=1"], "NAME one of"),
        (["fit", "{d}/runs.csv", "--out", "{d}/x", "--prior", "b_mu=x"], "'x' is not a number"),
        (["fit", "{d}/runs.csv", "--out", "{d}/x", "--horizon", "-1"], "--horizon must be a compute > 0"),
        (["fit", "{d}/runs.csv", "--out", "{d}/x", "--horizon", "nan"], "--horizon must be a compute > 0"),
        (["decide", "{d}/fit", "--budget", "1e5", "--prior", "b_mu=0.5"], "is a saved fit"),
        (["report", "{d}/fit", "--prior", "b_mu=0.5"], "is a saved fit"),
        (["predict", "{d}/runs.csv", "--compute", "10"], "is not a saved fit"),
        (["predict", "{d}/not_a_fit.nc", "--compute", "10"], "is not a scaling-forecast fit (no posterior and run table in it); run `forecast fit RUNS --out DIR` to make one"),
        (["predict", "{d}/garbage.nc", "--compute", "10"], "cannot be read as a saved fit (OSError: not the netCDF file save() writes); run `forecast fit"),
        (["fit", "{d}/missing.csv", "--out", "{d}/runs.csv"], "is a file; --out names a folder"),  # before reading
        (["report", "{d}/fit", "-o", "{d}"], "is a folder; give a file name"),
        (["backtest", "{d}/runs.csv", "--out", "{d}"], "is a folder; give a file name"),
        # an existing data file of another kind: a report over the runs a saved fit came from
        (["report", "{d}/fit", "-o", "{d}/runs.csv"], "-o {d}/runs.csv: exists, and is a .csv file (run data, or a "
                                                      "fit) that this .html output would replace; name the output e.g. "
                                                      "{d}/report.html"),
        # a fit written into the folder of run logs it reads: from then on the folder reads as that fit
        (["fit", "{d}/logs", "--out", "{d}/logs"], "its fit.nc is, or would become, an input read from"),
        # or into one run's folder, over the summary.json that marks the run finished
        (["fit", "{d}/logs", "--out", "{d}/logs/a-s0"], "its fit.nc is in the run folder"),
        (["report", "{d}/fit", "-o", "{d}/logs/a-s0/report.html"], "whose files (evals.jsonl, summary.json) are the trainer's"),
        # the place suggested instead is not in a run folder either (it was {d}/logs/a-s0/fit)
        (["fit", "{d}/logs/a-s0/evals.jsonl", "--out", "{d}/logs/a-s0"], "write the fit elsewhere, e.g. {d}/logs/fit\n"),
        (["backtest", "{d}/logs/a-s0/evals.jsonl", "--out", "{d}/logs/a-s0/b.json"],
         "write it elsewhere, e.g. {d}/logs/backtest.json\n"),
        # an output under an existing file: a traceback after the whole fit or replay
        (["fit", "{d}/runs.csv", "--out", "{d}/runs.csv/fit"], "runs.csv is a file, so nothing can be written under it"),
        (["report", "{d}/fit", "-o", "{d}/runs.csv/r.html"], "runs.csv is a file, so nothing can be written under it"),
        # a saved fit where runs are read (failed on its summary.json); a folder named fit.nc
        (["fit", "{d}/fit", "--out", "{d}/refit"], "is a saved fit; `forecast fit` reads a run table"),
        (["predict", "{d}/dir_fit", "--compute", "10"], "fit.nc: is a folder, not a saved fit"),
        (["fit", "{d}/runs.csv", "--out", "{d}/x", "--prior", "b_mu=nan"], "--prior b_mu must lie in [-20, 20]"),
        (["fit", "{d}/runs.csv", "--out", "{d}/x", "--prior", "b_mu=0.5", "--prior", "b_mu=2"],
         "--prior 'b_mu=2': b_mu is set twice (also 'b_mu=0.5'); give it once"),
        (["watch", "{d}/logs", "--once", "--rule", "margin=0.05", "--rule", "margin=0.02"],
         "--rule 'margin=0.02': margin is set twice (also 'margin=0.05'); give it once"),
        (["backtest", "{d}/runs.csv", "--rule", "margin=-1"], "--rule margin must"),
        (["backtest", "{d}/runs.csv", "--margin", "-1"], "--margin must"),
    ],
)
def test_bad_input_exits_2_with_message(fit_dir, capsys, argv, message):
    import xarray as xr

    xr.Dataset({"x": ("i", [1.0, 2.0])}).to_netcdf(fit_dir / "not_a_fit.nc")  # netCDF, but no fit in it
    (fit_dir / "garbage.nc").write_text("not netCDF at all\n")
    (fit_dir / "dir_fit" / "fit.nc").mkdir(parents=True, exist_ok=True)
    run_folder = fit_dir / "logs" / "a-s0"  # a trainer's run folder: its log and the summary of a finished run
    run_folder.mkdir(parents=True, exist_ok=True)
    (run_folder / "evals.jsonl").write_text("".join(
        json.dumps({"run_id": "a-s0", "recipe": "a", "compute": 10.0 * (i + 1), "metric": 0.1 + 0.01 * i}) + "\n"
        for i in range(5)))
    (run_folder / "summary.json").write_text('{"final_metric": 0.14}')
    argv = [a.format(d=fit_dir) for a in argv]
    assert main(argv) == 2
    assert message.format(d=fit_dir.resolve()) in capsys.readouterr().err
    assert (run_folder / "summary.json").read_text() == '{"final_metric": 0.14}' and not (fit_dir / "logs" / "fit.nc").exists()


def test_bad_table_exits_2_without_traceback_and_keeps_old_results(fit_dir, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("run_id,recipe,compute,metric\na,x,1,0.2\na,x,2,1.7\n")
    before = (fit_dir / "fit" / "summary.json").read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "forecast.cli", "fit", str(bad), "--out", str(fit_dir / "fit")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "column 'metric'" in proc.stderr and "run 'a'" in proc.stderr and "row 3" in proc.stderr
    assert (fit_dir / "fit" / "summary.json").read_bytes() == before  # nothing already written is lost


def test_prior_overrides_reads_name_value_pairs():
    assert prior_overrides(["b_mu=0.5", "a_mu_offset=1"]) == {"b_mu": 0.5, "a_mu_offset": 1.0}
    assert prior_overrides([]) == {}
    with pytest.raises(ValueError, match="expected NAME=VALUE"):
        prior_overrides(["b_mu"])


def test_fit_with_priors_from_the_command_line_saves_them_with_the_fit(fit_dir, small_sweep, capsys):
    from forecast.forecaster import ScalingForecaster

    out = fit_dir / "fit_priors"
    inside = small_sweep["compute"].max() / 2  # a horizon the runs have already passed changes nothing
    argv = ["fit", str(fit_dir / "runs.csv"), "--out", str(out), "--fast", "--no-progress",
            "--prior", "b_mu=0.5", "--prior", "a_mu_offset=1.0", "--horizon", str(inside)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
    assert not [w for w in caught if "has no effect" in str(w.message)]  # fit's own warning: said once, below
    priors = ScalingForecaster.load(out / "fit.nc").priors
    assert (priors.b_mu, priors.a_mu_offset, priors.m_mu) == (0.5, 1.0, 0.0)  # m_mu: the default, untouched
    err = capsys.readouterr().err
    assert f"--horizon has no effect: the runs already reach {fmt_compute(small_sweep['compute'].max())} " in err
    assert "horizon=" not in err and "UserWarning" not in err  # said once, in the CLI's words


def test_a_run_table_a_saved_fit_cannot_hold_is_refused_before_the_fit(fit_dir, capsys, monkeypatch):
    """save() failed after minutes of fitting, on a column netCDF cannot hold; forecast fit now
    writes the table to a scratch file first (the columns known to fail are converted: see
    test_forecaster), so whatever is still refused is refused before the fit."""
    import forecast.forecaster as forecaster_module

    def refuse(runs):
        raise ValueError("Invalid name 'odd' for DataArray or Dataset key")

    def no_fit(*args, **kwargs):
        raise AssertionError("the fit ran before the table was found unsavable")

    monkeypatch.setattr(forecaster_module, "run_table_dataset", refuse)
    monkeypatch.setattr(forecaster_module.ScalingForecaster, "fit", no_fit)
    assert main(["fit", str(fit_dir / "runs.csv"), "--out", str(fit_dir / "never"), "--fast"]) == 2
    err = capsys.readouterr().err
    assert "the run table cannot be saved with the fit (Invalid name 'odd'" in err and "drop or rename the column" in err
    assert not (fit_dir / "never").exists()


def test_a_negative_seed_is_refused_by_the_parser(fit_dir, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["decide", str(fit_dir / "fit"), "--budget", "1e5", "--seed", "-1"])
    assert exit_info.value.code == 2 and "whole number >= 0" in capsys.readouterr().err


@pytest.mark.parametrize("prior", ["a_mu_sd=1e-300", "noise_sd=1e-7", "student_nu=1e-300"])
def test_a_prior_scale_too_small_to_sample_is_refused_before_the_run_table_is_read(tmp_path, capsys, prior):
    """`--prior a_mu_sd=1e-300` (> 0, so taken) failed every initialisation point of the sampler: a RuntimeError
    traceback from nutpie after the model was compiled. Refused first, naming the prior and the value; 1e-6 samples."""
    assert main(["fit", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "fit"), "--prior", prior]) == 2
    name, value = prior.split("=")
    assert capsys.readouterr().err == (f"error: --prior {name} must be at least 1e-06 (a scale, spread or degree of "
                                       f"freedom that small leaves the sampler nowhere to start), got {float(value)!r}\n")


@pytest.mark.parametrize("value", ["-inf", "-Infinity", "-nan"])
def test_minus_inf_is_read_as_a_number_not_as_a_flag(tmp_path, capsys, value):
    """`--budget -inf` said "argument --budget: expected one argument", naming no value: argparse took "-inf",
    which float() reads, for a flag. It reaches the range check, which names the flag and the value (no fit:
    the budget is checked before the run table is read)."""
    assert main(["decide", str(tmp_path / "runs.csv"), "--budget", value]) == 2
    err = capsys.readouterr().err
    assert f"--budget must be finite and > 0, got {float(value):g}" in err and "expected one argument" not in err


@pytest.mark.parametrize("argv, named", [
    (["decide", "FIT", "--budget", "1e5", "--budget", "1e6"], "--budget is given more than once"),
    (["decide", "FIT", "--budget=1e5", "--seed", "1", "--budget", "1e6"], "--budget is given more than once"),
    (["report", "FIT", "-o", "a.html", "--out", "b.html"], "-o/--out is given more than once"),
    (["decide", "FIT", "--bud", "1e5", "--budget", "1e6"], "--bud/--budget is given more than once"),  # argparse's prefix
    (["predict", "FIT", "--compute", "1e12", "--rec", "dapo", "--recipe", "grpo"], "--rec/--recipe is given more than once"),
])
def test_a_value_flag_given_twice_is_refused_not_settled_by_the_last(fit_dir, capsys, argv, named):
    with pytest.raises(SystemExit) as exit_info:
        main([str(fit_dir / "fit") if a == "FIT" else a for a in argv])
    assert exit_info.value.code == 2 and named in capsys.readouterr().err


@pytest.mark.parametrize("argv, said", [
    (["fitt", "RUNS"], "argument COMMAND: invalid choice: 'fitt' (did you mean 'fit'?); choose from 'fit', 'predict'"),
    (["predict", "FIT", "--compute", "1e12", "--kind", "rn"], "invalid choice: 'rn' (did you mean 'run'?)"),
    (["predict", "FIT", "--compute", "1e12", "--kind", "nope"], "invalid choice: 'nope' (choose from 'run', 'new_run', 'mean')"),
    (["fit", "RUNS", "--out", "OUT", "--prior", "b_muu=0.5"], "--prior 'b_muu=0.5': unknown name 'b_muu' (did you mean 'b_mu'"),
    (["decide", "RUNS", "--budget", "1e5", "--prior", "noise_sdd=0.1"], "(did you mean 'noise_sd'"),
    (["watch", "RUNS", "--once", "--rule", "p_beat_treshold=0.2"], "unknown name 'p_beat_treshold' (did you mean 'p_beat_threshold'"),
    (["backtest", "RUNS", "--policies", "median,sucessive_halving"], "unknown 'sucessive_halving' (did you mean 'successive_halving'?)"),
])
def test_a_mistyped_name_from_a_fixed_set_is_pointed_at_its_likely_name(tmp_path, capsys, argv, said):
    """--recipe, --run-id and the trainer's presets said "did you mean ...?" for a typo; the other flags that
    take names from a fixed set (commands, --kind, --prior, --rule, --policies) listed the names alone."""
    paths = {"RUNS": str(tmp_path / "runs.csv"), "FIT": str(tmp_path / "fit"), "OUT": str(tmp_path / "out")}
    try:
        code = main([paths.get(arg, arg) for arg in argv])
    except SystemExit as exit_info:  # argparse's own refusals
        code = exit_info.code
    assert code == 2 and said in capsys.readouterr().err


def test_a_short_flag_with_its_value_attached_counts_when_given_twice():
    """`report RUNS -oa.html -o b.html` wrote b.html without a word: `-oa.html` was not seen as -o."""
    from forecast.cli import build_parser, repeated_flag

    report = build_parser().commands["report"]
    assert repeated_flag(report, ["RUNS", "-oa.html", "-o", "b.html"]) == "-o"
    assert repeated_flag(report, ["RUNS", "-oa.html", "--out", "b.html"]) == "-o/--out"
    assert repeated_flag(report, ["RUNS", "-oa.html", "--budget", "-1e5"]) is None


def test_a_reader_that_closes_early_gets_the_pipe_exit_not_a_traceback(fit_dir, monkeypatch, capsys):
    """`forecast backtest ... --json | head` printed a BrokenPipeError traceback."""
    import io

    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["decide", str(fit_dir / "fit"), "--budget", "1e5", "--json"]) == 141
    assert "Traceback" not in capsys.readouterr().err


def test_switches_and_repeatable_flags_may_be_given_twice(fit_dir, capsys):
    assert main(["decide", str(fit_dir / "fit"), "--budget", "1e5", "--json", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["recommendation"]


def test_an_unknown_flag_is_named_by_the_command_it_was_given_to(fit_dir, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", str(fit_dir / "fit"), "--compute", "1e5", "--bogus"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "forecast predict: error: unrecognized arguments: --bogus" in err
    assert "usage: forecast predict" in err  # the flags predict does take, not the list of commands


def test_no_command_is_a_usage_error_on_stderr_not_help_on_stdout(capsys):
    """`forecast` with no command exits 2, as a usage error, but printed the help on stdout: a script's
    `forecast $CMD --json > out.json` with $CMD empty wrote the help into the file it meant for JSON
    (trainer-minimal, and every other usage error here, says it on stderr)."""
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "usage: forecast" in err and "cross-validate" in err  # the commands it takes


def test_fit_summary_keeps_the_priors_and_version_flag(fit_dir, capsys):
    summary = json.loads((fit_dir / "fit" / "summary.json").read_text())
    assert summary["settings"]["priors"]["b_mu"] is not None and summary["settings"]["mode"] == "fast"
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and "scaling-forecast" in capsys.readouterr().out


@pytest.fixture
def unconverged_fit(fit_dir, monkeypatch):
    """The saved fit, flagged as a sampler with 7 divergences would flag it."""
    import dataclasses

    from forecast import cli
    from forecast.forecaster import ScalingForecaster

    fc = ScalingForecaster.load(fit_dir / "fit" / "fit.nc")
    fc._report = dataclasses.replace(fc._report, divergences=7)
    monkeypatch.setattr(cli, "load_fit", lambda _path: fc)
    return fc


def test_decide_and_predict_on_an_unconverged_fit_say_so(fit_dir, unconverged_fit, capsys):
    assert main(["decide", str(fit_dir / "fit"), "--budget", "1e5", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["diagnostics"]["divergences"] == 7
    assert "did not converge" in captured.err and "7 divergent transitions" in captured.err
    assert main(["predict", str(fit_dir / "fit"), "--compute", "1e5"]) == 0
    assert "did not converge" in capsys.readouterr().err


def test_a_terminal_is_told_the_problems_of_an_unconverged_fit_once(fit_dir, unconverged_fit, tmp_path, monkeypatch,
                                                                   main_said):
    """fit's text printed the diagnostics, problems and all, and the warning after them listed the problems
    again: a terminal showed them twice. Where stdout and stderr reach one place the warning points at the
    diagnostics above; where stdout is saved apart (`> out.txt`) stderr lists them as before."""
    from forecast.forecaster import ScalingForecaster

    def flagged_fit(self, runs, **kwargs):  # the saved fit, with 7 divergences, as this fit's outcome
        self.__dict__.update(unconverged_fit.__dict__)
        return self

    monkeypatch.setattr(ScalingForecaster, "fit", flagged_fit)
    argv = ["fit", str(fit_dir / "runs.csv"), "--fast", "--no-progress"]
    code, shown = main_said([*argv, "--out", str(tmp_path / "fit_a")], together=True)
    assert code == 0
    assert shown.count("7 divergent transitions") == 1 and "NOT CONVERGED" in shown
    assert "warning: the fit did not converge (its diagnostics above say how), so treat these intervals with suspicion" in shown
    code, out, err = main_said([*argv, "--out", str(tmp_path / "fit_b")], together=False)
    assert code == 0
    assert "7 divergent transitions" in out
    assert "so treat these intervals with suspicion: " in err and "7 divergent transitions" in err


def test_fit_fast_says_quick_look_on_the_terminal_as_report_fast_does(fit_dir, tmp_path, monkeypatch, capsys):
    """`forecast fit --fast` printed its diagnostics and table as a full fit's, while `forecast report
    --fast` says "a quick look, not a decision" (page and terminal). The fit says it too, in the same
    words, under its first line; --json keeps its mode in the summary instead."""
    from forecast.forecaster import ScalingForecaster
    from forecast.formatting import FAST_FIT_QUICK_LOOK

    saved = ScalingForecaster.load(fit_dir / "fit" / "fit.nc")  # a fast fit, as --fast makes it

    def fast_fit(self, runs, **kwargs):
        self.__dict__.update(saved.__dict__)
        return self

    monkeypatch.setattr(ScalingForecaster, "fit", fast_fit)
    assert main(["fit", str(fit_dir / "runs.csv"), "--fast", "--no-progress", "--out", str(tmp_path / "fit")]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"{FAST_FIT_QUICK_LOOK} (without --fast)"
    saved.mode = "nuts"  # a full fit's output says nothing of it
    assert main(["fit", str(fit_dir / "runs.csv"), "--no-progress", "--out", str(tmp_path / "full")]) == 0
    assert "quick look" not in capsys.readouterr().out


def test_a_saved_output_of_an_unconverged_fit_has_its_diagnostics_above_the_warning(fit_dir, unconverged_fit,
                                                                                      tmp_path, monkeypatch):
    """`forecast fit ... > out.txt 2>&1` (or `2>&1 | tee`): stdout, a file or pipe, is buffered apart from stderr,
    and the warning 'the fit did not converge (its diagnostics above say how)' was the file's first line, above
    the diagnostics it points at. The printed text is out before it now."""
    from forecast.forecaster import ScalingForecaster

    def flagged_fit(self, runs, **kwargs):  # the saved fit, with 7 divergences, as this fit's outcome
        self.__dict__.update(unconverged_fit.__dict__)
        return self

    monkeypatch.setattr(ScalingForecaster, "fit", flagged_fit)
    shared = os.open(tmp_path / "out.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)  # as the shell's 2>&1 shares it
    with open(os.dup(shared), "w") as out, open(shared, "w", buffering=1) as err:  # as Python buffers each
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        assert main(["fit", str(fit_dir / "runs.csv"), "--fast", "--no-progress", "--out", str(tmp_path / "fit")]) == 0
    shown = (tmp_path / "out.txt").read_text()
    warning = "warning: the fit did not converge (its diagnostics above say how)"
    assert warning in shown and shown.index("NOT CONVERGED") < shown.index(warning), shown


def test_decide_on_a_converged_fit_warns_only_about_what_it_should(fit_dir, capsys):
    from forecast.forecaster import ScalingForecaster

    converged = ScalingForecaster.load(fit_dir / "fit" / "fit.nc").diagnostics().converged
    assert main(["decide", str(fit_dir / "fit"), "--budget", "1e5"]) == 0
    err = capsys.readouterr().err
    assert ("did not converge" in err) == (not converged)
    assert "Is the unit right?" not in err and "no effect" not in err
    # fit and report call a fast fit a quick look; decide, which the plan is read from, said nothing of it
    assert err.endswith("warning: fast fit (short chains): a quick look, not a decision; plan on a full fit "
                        "(`forecast fit` without --fast)\n")


def test_warnings_for_a_budget_far_beyond_the_data_and_for_ignored_flags(fit_dir, capsys):
    assert main(["decide", str(fit_dir / "fit"), "--budget", "1e12", "--fast", "--max-ways", "2"]) == 0
    err = capsys.readouterr().err
    assert "--budget 1e12 is" in err and err.count("Is the unit right?") == 1  # not again by decide() in Python
    assert "--fast has no effect" in err and "--max-ways has no effect" in err
    assert main(["predict", str(fit_dir / "fit"), "--compute", "1e12", "1e13"]) == 0
    err = capsys.readouterr().err
    assert "--compute 1e12 is" in err and err.count("Is the unit right?") == 1  # not again by predict() in Python
    assert main(["decide", str(fit_dir / "fit"), "--budget", "1e5", "--max-ways", "4"]) == 0  # the default, given
    assert "--max-ways has no effect" in capsys.readouterr().err
    assert main(["decide", str(fit_dir / "fit"), "--budget", "1e5", "--total", "--max-ways", "1000"]) == 2
    assert "--max-ways must be between 1 and 64, got 1000" in capsys.readouterr().err
    assert main(["decide", str(fit_dir / "fit"), "--budget", "1e5", "--total", "--max-ways", "5", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "more than the 3 recipe(s)" not in err  # more runs than recipes are seeds of one
    assert [row["ways"] for row in json.loads(out)["table"]] == [1, 2, 3, 4, 5]
    from forecast import __version__

    # a forwarded decision names the package that made it, and its fit's
    assert json.loads(out)["forecast_version"] == __version__ and json.loads(out)["fit_forecast_version"] == __version__
    assert main(["predict", str(fit_dir / "fit"), "--compute", "1e5", "--run-id", "scalerl_8b-s1", "--recipe", "scalerl_8gen"]) == 2
    assert "is a run of 'scalerl_8b', not of 'scalerl_8gen'" in capsys.readouterr().err
    assert main(["predict", str(fit_dir / "fit"), "--compute", "1e5", "--run-id", "scalerl_8b-s1", "--kind", "new_run"]) == 0
    assert "forecasts the recipe of run 'scalerl_8b-s1'" in capsys.readouterr().err


def test_a_package_warning_reaches_the_terminal_in_the_clis_words(tmp_path, small_sweep, capsys):
    table = small_sweep.copy()
    table["n_eval"] = 512.0
    table.loc[3, "n_eval"] = None  # said as a warning while the table is checked...
    table.loc[5, "compute"] = table.loc[4, "compute"]  # ...then refused, so no fit is run
    table.to_csv(tmp_path / "runs.csv", index=False)
    assert main(["fit", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "fit"), "--fast"]) == 2
    err = capsys.readouterr().err
    assert "warning: file " in err and "column 'n_eval'" in err and "row 5" in err
    assert "UserWarning" not in err and "data.py" not in err  # not Python's file:line format
    assert "error: " in err and "duplicate run_id, compute" in err


def test_backtest_with_the_measured_metric_as_truth(fit_dir, capsys):
    argv = ["backtest", str(fit_dir / "runs.csv"), "--policies", "median,no_stopping", "--truth", "metric", "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["policies"]) == {"median", "no_stopping"}


def test_decide_prints_its_table_with_never_for_an_unreachable_target(fit_dir, capsys):
    """Some recipes reach the target in every draw and some not in all: the columns mix finite
    compute with inf, which the text table says as 'never' (it once raised instead)."""
    assert main(["decide", str(fit_dir / "fit"), "--budget", "1e5", "--target", "0.6"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("compute in ") and "p_reach_ever" in out and "never" in out and "inf" not in out


def test_fit_says_never_for_a_target_out_of_reach_and_its_json_is_strict(fit_dir, tmp_path, capsys):
    args = ["fit", str(fit_dir / "runs.csv"), "--out", str(tmp_path / "fit"), "--fast", "--target", "0.99", "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "never" in out.split("compute to reach 0.99")[1] and " inf" not in out
    assert main([*args, "--json"]) == 0
    summary = _strict_json(capsys.readouterr().out)
    assert any(row["q95"] is None for row in summary["compute_to_target"])


SAMPLING_LIBRARIES = ("pymc", "pytensor", "arviz", "nutpie")


def _libraries_loaded_by(code: str, *args) -> tuple[list[str], list[str]]:
    """(what `code` printed, the sampling libraries imported) in a fresh interpreter."""
    probe = f"{code}; import sys; print('loaded:', *[m for m in {SAMPLING_LIBRARIES!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", probe, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    *printed, loaded = done.stdout.strip().splitlines()
    return printed, loaded.split()[1:]


def test_the_command_line_answers_help_and_bad_tables_without_loading_pymc(tmp_path):
    # PyMC takes about 5 s to import and ArviZ 3: `forecast --help` and a rejected table took 5 s, now under 1
    assert _libraries_loaded_by("import forecast.cli, forecast; from forecast import load_runs, ScalingForecaster, Priors")[1] == []
    bad = tmp_path / "bad.csv"
    bad.write_text("run_id,recipe,compute,metric\na,x,1,0.2\na,x,2,1.7\n")
    code = "import sys; from forecast.cli import main; print(main(['fit', sys.argv[1], '--out', sys.argv[2]]))"
    assert _libraries_loaded_by(code, bad, tmp_path / "out") == (["2"], [])


def test_commands_on_a_saved_fit_read_it_without_the_sampling_libraries(fit_dir):
    # `forecast predict` on a saved fit took 6.1 s, most of it importing PyMC and ArviZ; now about 2
    fit = fit_dir / "fit"
    for command in (["predict", fit, "--compute", "5e3", "--json"], ["decide", fit, "--budget", "5e3", "--json"]):
        code = f"import sys; from forecast.cli import main; assert main({[str(c) for c in command]!r}) == 0"
        assert _libraries_loaded_by(code)[1] == [], command
    # a user who asks for the InferenceData still gets one
    code = f"from forecast import ScalingForecaster; fc = ScalingForecaster.load({str(fit / 'fit.nc')!r}); print(type(fc.idata).__name__)"
    printed, loaded = _libraries_loaded_by(code)
    assert printed == ["InferenceData"] and "arviz" in loaded


def test_a_column_a_saved_fit_cannot_hold_is_named(tmp_path, capsys, monkeypatch):
    """netCDF's own error ("VLEN strings do not support embedded NULLs") names no column, and the
    message asked to drop "the column it names"."""
    import forecast.forecaster as forecaster_module

    def no_fit(*args, **kwargs):
        raise AssertionError("the fit ran before the table was found unsavable")

    monkeypatch.setattr(forecaster_module.ScalingForecaster, "fit", no_fit)
    rows = ["run_id,recipe,compute,metric,loss,note"] + [f"r{i},x,{c},0.{c},dapo,a\0b" for i in (0, 1) for c in (1, 2, 3)]
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    assert main(["fit", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "fit")]) == 2
    # renaming the column does not take the NUL out of its values: the message names the first cell that holds one
    assert (f"file {tmp_path / 'runs.csv'}, column 'note', run 'r0', row 2: holds a NUL character (a corrupted byte?), "
            "which a saved fit cannot hold: remove it") in capsys.readouterr().err
    # found by fuzzing: one NUL in one value, rows below the header and another column's values fine
    rows = ["run_id,recipe,compute,metric,note"] + [f"r{i},x,{c},0.{c},{'a' if (i, c) != (1, 2) else 'a' + chr(0)}"
                                                    for i in (0, 1) for c in (1, 2, 3)]
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    assert main(["fit", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "fit")]) == 2
    assert "column 'note', run 'r1', row 6: holds a NUL character" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["fit", "{d}/runs.csv", "--out", "{ro}", "--fast"], "--out {ro}: cannot write in {ro}"),
        (["fit", "{d}/runs.csv", "--out", "{ro}/new/fit", "--fast"], "--out {ro}/new/fit: cannot write in {ro}"),
        (["report", "{d}/runs.csv", "-o", "{ro}/r.html", "--fast"], "-o {ro}/r.html: cannot write in {ro}"),
        (["cross-validate", "{d}/runs.csv", "--cuts", "0.5", "--fast", "--out", "{ro}/cv.csv"], "cannot write in {ro}"),
        (["backtest", "{d}/runs.csv", "--out", "{ro}/b.json"], "--out {ro}/b.json: cannot write in {ro}"),
        (["watch", "{d}/logs", "--once", "--out", "{ro}/advice.json"], "cannot write in {ro}"),
        (["watch", "{ro}", "--once"], "{ro}: cannot write recommendations.json in it"),
    ],
)
def test_an_output_in_a_folder_that_cannot_be_written_exits_2_before_any_work(fit_dir, tmp_path, monkeypatch, capsys,
                                                                               argv, shown):
    """A read-only folder (or another user's) was found only when the result was written: a traceback
    (exit 1) after the whole fit, replay or cross-validation, whose result was lost."""
    import os

    import forecast.backtest
    import forecast.watch
    from forecast.forecaster import ScalingForecaster

    read_only = tmp_path / "ro"
    read_only.mkdir()
    (fit_dir / "logs").mkdir(exist_ok=True)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (not (mode & os.W_OK and str(path) == str(read_only.absolute()))
                                                                and real_access(path, mode, **kw)))

    def no_work(*args, **kwargs):
        raise AssertionError("worked before refusing the output")

    monkeypatch.setattr(ScalingForecaster, "fit", no_work)
    monkeypatch.setattr(forecast.backtest, "backtest", no_work)
    monkeypatch.setattr(forecast.watch, "watch", no_work)
    assert main([a.format(d=fit_dir, ro=read_only.absolute()) for a in argv]) == 2
    assert shown.format(ro=read_only.absolute()) in capsys.readouterr().err
    assert list(read_only.iterdir()) == []


@pytest.mark.parametrize("name", ["fit.nc", "summary.json"])
def test_fit_into_a_folder_whose_fit_nc_or_summary_is_a_folder_exits_2_before_the_fit(fit_dir, tmp_path, monkeypatch,
                                                                                        capsys, name):
    """`forecast fit R --out fits/fit.nc` makes a folder fits/fit.nc; a later `--out fits` fitted and
    then died in save() (IsADirectoryError, or in os.replace for summary.json), exit 1, fit lost."""
    from forecast.forecaster import ScalingForecaster

    (tmp_path / "fits" / name).mkdir(parents=True)
    monkeypatch.setattr(ScalingForecaster, "fit", lambda *a, **k: pytest.fail("fitted before refusing --out"))
    assert main(["fit", str(fit_dir / "runs.csv"), "--out", str(tmp_path / "fits"), "--fast"]) == 2
    assert f"{tmp_path / 'fits' / name} is a folder" in capsys.readouterr().err


def test_fit_into_the_folder_of_its_runs_or_of_run_logs_exits_2_before_the_fit(small_sweep, tmp_path, monkeypatch, capsys):
    """`forecast fit DIR/runs.csv --out DIR` put fit.nc beside the runs: from then on `decide DIR` and
    `report DIR` silently used that frozen fit instead of the runs, and `fit DIR`/`backtest DIR`
    refused the folder as a saved fit. The same for a sweep folder holding run logs."""
    from forecast.forecaster import ScalingForecaster

    monkeypatch.setattr(ScalingForecaster, "fit", lambda *a, **k: pytest.fail("fitted before refusing --out"))
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    small_sweep.to_csv(sweep / "runs.csv", index=False)
    assert main(["fit", str(sweep / "runs.csv"), "--out", str(sweep), "--fast"]) == 2
    err = capsys.readouterr().err
    assert f"it holds the run table {sweep.resolve() / 'runs.csv'} being fitted" in err
    assert f"write the fit elsewhere, e.g. {sweep.resolve() / 'fit'}\n" in err
    monkeypatch.chdir(sweep)  # the same folder, spelt relatively
    assert main(["fit", "runs.csv", "--out", ".", "--fast"]) == 2
    assert "it holds the run table" in capsys.readouterr().err
    logs = tmp_path / "logs"
    (logs / "a-s0").mkdir(parents=True)
    (logs / "a-s0" / "evals.jsonl").write_text('{"run_id": "a-s0", "recipe": "a", "compute": 1.0, "metric": 0.1}\n')
    assert main(["fit", str(sweep / "runs.csv"), "--out", str(logs), "--fast"]) == 2
    assert f"it holds run logs ({logs.resolve() / 'a-s0' / 'evals.jsonl'})" in capsys.readouterr().err
    assert not (sweep / "fit.nc").exists() and not (logs / "fit.nc").exists()
    # the places suggested instead, and a fits folder beside the runs, are taken
    from forecast.cli import _holds_runs

    assert _holds_runs(sweep / "fit", sweep / "runs.csv") is None
    (sweep / "fit").mkdir()
    assert _holds_runs(sweep / "fit", sweep / "runs.csv") is None
    (logs / "fit").mkdir()
    assert _holds_runs(logs / "fit", logs) is None
    assert _holds_runs(tmp_path / "fits", sweep / "runs.csv") is None
    (logs / "fit.nc").write_text("")  # a saved fit already, with its sweep below (forecast demo --live's folder)
    assert _holds_runs(logs, sweep / "runs.csv") is None


def test_a_fit_stopped_while_its_summary_is_computed_keeps_the_old_pair(fit_dir, tmp_path, monkeypatch):
    """`forecast fit --out DIR` replaced fit.nc, then computed the summary (seconds) and wrote
    summary.json: a Ctrl-C or kill in between left the new fit beside the old fit's summary, whose
    numbers a reader of summary.json took for the new fit's. The summary is now computed first and the
    two files are replaced back to back."""
    import shutil

    import forecast.cli as cli_module

    shutil.copytree(fit_dir / "fit", tmp_path / "fit")
    import hashlib

    def digests():
        return {name: hashlib.sha256((tmp_path / "fit" / name).read_bytes()).hexdigest()
                for name in ("fit.nc", "summary.json")}

    before = digests()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_module, "fit_summary", interrupted)
    argv = ["fit", str(fit_dir / "runs.csv"), "--out", str(tmp_path / "fit"), "--fast", "--seed", "4", "--no-progress"]
    assert main(argv) == 130
    assert digests() == before  # the old fit and its own summary, not a new fit beside the old summary


def test_a_path_under_the_home_folder_is_checked_where_it_is_read(fit_dir, tmp_path, monkeypatch, capsys):
    """load_runs reads "~/..." (quoted, or after '=', the shell leaves it), but the command's own checks
    took "~" for a folder of the working directory: a saved fit given to `fit` as "~/fit" was read as
    a folder of runs ('holds no run files') instead of refused as a saved fit, and a fit's summary.json
    recorded its input as WORKDIR/~/runs.csv."""
    import shutil

    home = tmp_path / "home"
    shutil.copytree(fit_dir / "fit", home / "fit")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    assert main(["fit", "~/fit", "--out=~/refit", "--fast", "--no-progress"]) == 2
    assert f"{home / 'fit'}: is a saved fit" in capsys.readouterr().err
    assert not (tmp_path / "~").exists()


def test_an_output_under_a_run_tables_own_suffix_does_not_replace_a_run_table(tmp_path):
    """`watch --out lines.json` (or backtest's) wrote its advice over a JSON run table: the guard looked
    only at files of another suffix than the output's. A run table (an array of rows, a JSONL log, a CSV of
    runs) is refused; the command's own earlier output, or any other file of that suffix, is replaced."""
    from forecast.cli import BadInput, _check_output_file

    said = r"exists, and holds run data \(rows with run_id, compute and metric\) that this .{suffix} output would replace"
    table = tmp_path / "lines.json"
    for rows in ('[{"run_id": "a", "recipe": "r", "compute": 1, "metric": 0.1}]',
                 '{"run_id": "a", "recipe": "r", "compute": 1, "metric": 0.1}\n{"run_id": "a", "compute": 2, "metric": 0.2}\n'):
        table.write_text(rows)
        for example in ("recommendations.json", "backtest.json"):
            with pytest.raises(BadInput, match="lines.json: " + said.format(suffix="json")):
                _check_output_file(table, "--out", example)
    runs = tmp_path / "other_runs.csv"
    runs.write_text("run_id,recipe,compute,metric\na,r,1,0.1\n")
    with pytest.raises(BadInput, match=said.format(suffix="csv")):
        _check_output_file(runs, "--out", "cv.csv")
    for other in ('{"forecast_version": "0.1.0", "recommendations": {}}', '{"old": 1}', "", "[1, 2]", "not json"):
        table.write_text(other)
        _check_output_file(table, "--out", "recommendations.json")  # its rerun, or another file of the user's
    runs.write_text("cut,run_id,compute,observed\n")  # an earlier benchmark's table: no metric column
    _check_output_file(runs, "--out", "extrapolation.csv")


def test_an_output_named_with_another_suffix_is_replaced_on_its_own_rerun(tmp_path):
    """The overwrite guard refused `backtest --out results.csv` on its second run: the file it wrote
    the first time has a data suffix. Its own earlier output is replaced; run data is still refused."""
    from forecast.cli import BadInput, _check_output_file

    own = {"backtest.json": '{"forecast_version": "0.1.0", "policies": []}',
           "report.html": "<!DOCTYPE html>\n<html><body>report</body></html>",
           "cv.csv": "cut,run_id,compute,observed,forecast,lower,upper,covered,fit_converged\n0.5,a,1,0.1,0.1,0,1,True,True\n"}
    runs = "run_id,recipe,compute,metric\na,r,1,0.1\na,r,2,0.2\n"
    for example, text in own.items():
        path = tmp_path / (example.split('.')[0] + '_out.jsonl')
        path.write_text(text)
        _check_output_file(path, "--out", example)  # its own rerun: allowed
        path.write_text(runs)
        with pytest.raises(BadInput, match="exists, and is a .jsonl file"):
            _check_output_file(path, "--out", example)


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["fit", "{d}/runs.csv", "--out", "-", "--fast"], "--out -"),
        (["report", "{d}/runs.csv", "-o", "-", "--fast"], "-o -"),
        (["cross-validate", "{d}/runs.csv", "--cuts", "0.5", "--fast", "--out", "-"], "--out -"),
        (["backtest", "{d}/runs.csv", "--out", "-"], "--out -"),
        (["watch", "{d}/logs", "--once", "--out", "-"], "--out -"),
    ],
)
def test_a_dash_for_standard_output_is_refused_not_written_as_a_file_named_dash(fit_dir, tmp_path, monkeypatch,
                                                                               capsys, argv, flag):
    """`report -o -` (many tools' standard output) wrote a file named '-' in the working folder."""
    import forecast.backtest
    import forecast.watch
    from forecast.forecaster import ScalingForecaster

    def no_work(*args, **kwargs):
        raise AssertionError("worked before refusing the output")

    monkeypatch.setattr(ScalingForecaster, "fit", no_work)
    monkeypatch.setattr(forecast.backtest, "backtest", no_work)
    monkeypatch.setattr(forecast.watch, "watch", no_work)
    (fit_dir / "logs").mkdir(exist_ok=True)
    monkeypatch.chdir(tmp_path)
    assert main([a.format(d=fit_dir) for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"{flag}: this command writes a file, not standard output" in err
    assert list(tmp_path.iterdir()) == []


def test_saved_fit_with_damaged_internal_structure_exits_2_without_traceback(tmp_path):
    # found by fuzzing: a fit.nc with a damaged HDF5 object header (a copy corrupted on the way) made
    # h5py raise KeyError or RuntimeError, a traceback out of predict, decide and report, then a second
    # one ("Exception ignored in File.close") at exit
    import numpy as np
    import xarray as xr

    from forecast import NotASavedFitError, ScalingForecaster

    intact = tmp_path / "intact.nc"
    xr.Dataset({"A": ("draw", np.arange(4.0))}).to_netcdf(intact, engine="h5netcdf")
    xr.Dataset({"x": ("row", np.arange(3.0))}).to_netcdf(intact, engine="h5netcdf", group="run_table", mode="a")
    raw = intact.read_bytes()
    headers = [at for at in range(len(raw)) if raw.startswith(b"OHDR", at)]  # HDF5's checksummed object headers
    assert len(headers) >= 2
    for number, at in enumerate(headers[:2]):
        damaged = bytearray(raw)
        damaged[at + 8] ^= 0xFF  # inside the header, before its checksum
        folder = tmp_path / f"fit{number}"
        folder.mkdir()
        (folder / "fit.nc").write_bytes(bytes(damaged))
        with pytest.raises(NotASavedFitError, match="cannot be read as a saved fit: the file is damaged"):
            ScalingForecaster.load(folder)
        proc = subprocess.run([sys.executable, "-m", "forecast", "predict", str(folder), "--compute", "10"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
        assert f"{folder / 'fit.nc'} cannot be read as a saved fit: the file is damaged" in proc.stderr


def test_fit_on_a_full_disk_says_so_in_a_line_and_keeps_the_fit_already_there(fitted, small_sweep, tmp_path, monkeypatch, capsys):
    """`forecast fit --out` on a full disk ended, after minutes of sampling, in an h5py traceback
    ('Unable to synchronously create file (file write failed: time = ..., errno = 28 ...') naming
    a temporary file. It is one line now, naming fit.nc and the full disk, exit 1; the fit already
    there (fit.nc and its summary.json) is as it was. (A real full disk under HDF5 crashed the process:
    test_a_result_larger_than_the_process_may_write_is_one_line_and_the_old_one_stays.)"""
    import errno
    import pathlib

    from forecast.forecaster import ScalingForecaster

    small_sweep.to_csv(tmp_path / "runs.csv", index=False)
    out = tmp_path / "fit"
    out.mkdir()
    fitted.save(out / "fit.nc")
    (out / "summary.json").write_text('{"the": "old fit"}\n')
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def fit_as_before(self, runs, **kwargs):  # the session's fit stands in for minutes of sampling
        self.__dict__.update(fitted.__dict__)
        return self

    real_write_bytes = pathlib.Path.write_bytes

    def full_disk(self, *args, **kwargs):  # fit.nc, rendered in memory (netcdf_image), meets the full disk
        if self.name.startswith(".fit.nc."):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real_write_bytes(self, *args, **kwargs)

    monkeypatch.setattr(ScalingForecaster, "fit", fit_as_before)
    monkeypatch.setattr(pathlib.Path, "write_bytes", full_disk)
    assert main(["fit", str(tmp_path / "runs.csv"), "--out", str(out), "--fast", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err == f"error: {out / 'fit.nc'}: No space left on device (the disk is full: free some space, or write elsewhere)\n"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nor a temporary file left


@pytest.mark.parametrize("command, room, named", [
    ("report", 20_000, "report.html"),
    ("fit", 100_000, "fit.nc"),  # room for summary.json, not for fit.nc
    ("fit", 3_000, "summary.json"),  # less than the run table the fit checks it can save, before fitting
])
def test_a_result_larger_than_the_process_may_write_is_one_line_and_the_old_one_stays(fit_dir, tmp_path, command, room,
                                                                                     named):
    """Under `ulimit -f` (a real file-size limit here, RLIMIT_FSIZE), a report larger than the limit ended in a
    traceback ('OSError: [Errno 27] File too large'), and `forecast fit` crashed (segmentation fault, exit 139,
    after pages of HDF5 tracebacks) writing fit.nc, or before fitting, writing the run table to a scratch file
    to check it can be saved: HDF5 failing a write part way broke its library. It is one line now naming the
    user's file, exit 1, and the results already there stay as they were."""
    from conftest import main_on_a_full_disk

    saved = fit_dir / "fit"
    out = tmp_path / "out"
    out.mkdir()
    if command == "report":
        argv = ["report", str(saved), "-o", str(out / named)]
        before = ""
    else:  # the saved fit stands in for the sampling
        argv = ["fit", str(fit_dir / "runs.csv"), "--out", str(out), "--fast", "--no-progress"]
        before = ("import warnings\nfrom forecast.forecaster import ScalingForecaster\n"
                  "warnings.simplefilter('ignore')  # the saved fit's own warning, said when it was made\n"
                  f"saved = ScalingForecaster.load({str(saved)!r})\n"
                  "warnings.resetwarnings()\n"
                  "ScalingForecaster.fit = lambda self, runs, **kwargs: self.__dict__.update(saved.__dict__) or self")
    old = {name: f"the old {name}\n" for name in ([named] if command == "report" else ["fit.nc", "summary.json"])}
    for name, text in old.items():
        (out / name).write_text(text)
    done = main_on_a_full_disk(argv, room=room, before=before)
    assert done.returncode == 1, done.stderr
    said = [line for line in done.stderr.splitlines() if not line.startswith("warning: ")]
    assert said == [f"error: {out / named}: File too large (larger than this process may write (ulimit -f) or the "
                    "file system holds: raise the limit, or write elsewhere)"]
    assert {p.name: p.read_text() for p in out.iterdir()} == old  # nor a temporary file left


def test_a_disk_too_full_for_the_summary_leaves_the_old_fit_not_a_new_fit_beside_old_numbers(
        fitted, small_sweep, tmp_path, monkeypatch, capsys):
    """fit.nc was replaced first and summary.json after it: a disk that filled up in between (a sweep's
    checkpoints beside it) left the new fit beside the old fit's summary, whose numbers scripts read.
    The summary's room is taken before fit.nc is replaced now, so its failure leaves the old pair."""
    import errno
    import pathlib

    from forecast.forecaster import ScalingForecaster

    small_sweep.to_csv(tmp_path / "runs.csv", index=False)
    out = tmp_path / "fit"
    out.mkdir()
    (out / "fit.nc").write_bytes(b"the old fit")
    (out / "summary.json").write_text('{"the": "old fit"}\n')
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def fit_as_before(self, runs, **kwargs):  # the session's fit stands in for minutes of sampling
        self.__dict__.update(fitted.__dict__)
        return self

    real_write_text = pathlib.Path.write_text

    def full_for_the_summary(self, *args, **kwargs):
        if self.name.startswith(".summary.json."):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(ScalingForecaster, "fit", fit_as_before)
    monkeypatch.setattr(pathlib.Path, "write_text", full_for_the_summary)
    assert main(["fit", str(tmp_path / "runs.csv"), "--out", str(out), "--fast", "--no-progress"]) == 1
    assert f"error: {out / 'summary.json'}: No space left on device" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("command", [["fit", "--out", "{tmp}/fit", "--fast"], ["decide", "--budget", "1e3", "--fast"],
                                     ["report", "-o", "{tmp}/report.html", "--fast"], ["backtest"], ["watch", "--once"]])
@pytest.mark.parametrize("name", ["runs.csv", "sweep"])
def test_a_path_in_a_folder_that_cannot_be_entered_is_named_not_a_traceback(tmp_path, make_unenterable, capsys, command,
                                                                             name):
    # found by fuzzing the folder structure: RUNS below another user's folder without execute permission
    # was a PermissionError traceback out of every command (pathlib's exists() and is_dir() raise it)
    locked = tmp_path / "locked"
    (locked / "sweep" / "a-s0").mkdir(parents=True)
    (locked / "runs.csv").write_text("run_id,recipe,compute,metric\na-s0,a,1,0.1\na-s0,a,2,0.2\n")
    (locked / "sweep" / "a-s0" / "evals.jsonl").write_text('{"run_id": "a-s0", "recipe": "a", "compute": 1, "metric": 0.1}\n')
    make_unenterable(locked)
    verb, *flags = command
    assert main([verb, str(locked / name), *(flag.format(tmp=tmp_path) for flag in flags)]) == 2
    err = capsys.readouterr().err
    assert f"{locked / name}: " in err and "permission denied" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["fit", "{runs}", "--out", "{tmp}/fit"], ["report", "{runs}", "-o", "{tmp}/r.html"],
                                     ["decide", "{runs}", "--budget", "1e3"], ["backtest", "{runs}"],
                                     ["watch", "{runs}", "--once"], ["fit", "{tmp}/runs.csv", "--out", "{runs}"]])
@pytest.mark.parametrize("bad", ["loop", "long"])
def test_a_path_that_loops_or_is_too_long_is_named_not_a_traceback(tmp_path, capsys, command, bad):
    # found by fuzzing the folder structure: a link that loops given as RUNS was 'RuntimeError: Symlink
    # loop' out of fit and report (pathlib's resolve()), and a name too long an OSError traceback
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "runs.csv").write_text("run_id,recipe,compute,metric\na-s0,a,1,0.1\na-s0,a,2,0.2\n")
    path = str(tmp_path / "loop") if bad == "loop" else str(tmp_path / ("x" * 300) / "runs.csv")
    assert main([arg.format(runs=path, tmp=tmp_path) for arg in command]) == 2
    err = capsys.readouterr().err
    reason = "too many levels of symbolic links" if bad == "loop" else "file name too long"
    assert f"{path}: {reason}" in err and "Traceback" not in err


def test_decide_json_carries_the_datas_warnings_as_fit_and_report_do(fit_dir, small_sweep, tmp_path, capsys):
    """`forecast fit --json` and `forecast report --json` kept the data's warnings said when the runs were
    read (a recipe whose runs differ in a setting), `forecast decide --json` had no such key: a decision
    forwarded as JSON lost them, from a saved fit and from a fresh fit alike."""
    import numpy as np

    assert main(["decide", str(fit_dir / "fit"), "--budget", "1e5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["data_warnings"] == []  # none said: the key is there, empty
    first = small_sweep["recipe"].iloc[0]
    lr = np.where((small_sweep["recipe"] == first) & small_sweep["run_id"].str.endswith("-s1"), 1e-3, 5e-4)
    small_sweep.assign(lr=lr).to_csv(tmp_path / "runs.csv", index=False)
    assert main(["fit", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "fit"), "--fast", "--json", "--no-progress"]) == 0
    said = json.loads(capsys.readouterr().out)["data_warnings"]
    assert len(said) == 1 and "column 'lr': differs between runs of recipe" in said[0]
    assert main(["decide", str(tmp_path / "fit"), "--budget", "1e5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["data_warnings"] == said
    assert main(["decide", str(tmp_path / "runs.csv"), "--budget", "1e5", "--fast", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["data_warnings"] == said and captured.err.count("column 'lr'") == 1


def test_fit_whose_out_folder_is_replaced_by_a_file_meanwhile_says_so_in_a_line(fitted, small_sweep, tmp_path,
                                                                                  monkeypatch, capsys):
    """`forecast fit --out fits/sweep` whose fits/sweep became a file during the minutes of sampling
    (after the checks before the fit) ended in mkdir's FileExistsError traceback; it is one line now, the
    atomic write's (WriteFailed), exit 2, the file left as it is."""
    from forecast.forecaster import ScalingForecaster

    small_sweep.to_csv(tmp_path / "runs.csv", index=False)
    out = tmp_path / "fit"

    def fit_then_a_file_in_its_place(self, runs, **kwargs):
        self.__dict__.update(fitted.__dict__)
        out.write_text("notes\n")
        return self

    monkeypatch.setattr(ScalingForecaster, "fit", fit_then_a_file_in_its_place)
    code = main(["fit", str(tmp_path / "runs.csv"), "--out", str(out), "--fast", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: {out / 'summary.json'}: ") and "Traceback" not in err
    assert err.count("\n") == 1 and out.read_text() == "notes\n"


@pytest.mark.parametrize("happening", ["its folder deleted", "its folder read-only"])
def test_fit_whose_folder_is_deleted_or_made_read_only_meanwhile_says_so_in_a_line(fitted, small_sweep, tmp_path,
                                                                                   monkeypatch, capsys, happening):
    """`forecast fit --out fits/sweep` whose folder was deleted while fit.nc was saved (session 37 saw it of
    `make demo`) ended in a FileNotFoundError traceback naming '.fit.nc.x1y2.tmp'; one made read-only during
    the minutes of sampling (after the checks before the fit) said 'permission denied' of
    '.summary.json.x1y2.tmp', a file the user never named. Each is one line naming the user's file and
    what happened now: exit 1 for the folder deleted (the machine's, as a full disk), 2 for the read-only
    folder (as the check before the fit says it); a fit already there stays as it was."""
    import errno
    import pathlib
    import shutil
    import tempfile

    from forecast.forecaster import ScalingForecaster

    small_sweep.to_csv(tmp_path / "runs.csv", index=False)
    out = tmp_path / "fit"
    out.mkdir()
    fitted.save(out / "fit.nc")
    before = (out / "fit.nc").read_bytes()

    def fit_as_before(self, runs, **kwargs):  # the session's fit stands in for minutes of sampling
        self.__dict__.update(fitted.__dict__)
        return self

    real_write_bytes = pathlib.Path.write_bytes

    def deleted_while_saved(self, *args, **kwargs):  # fit.nc, rendered in memory (netcdf_image), written out
        if not self.name.startswith(".fit.nc."):
            return real_write_bytes(self, *args, **kwargs)
        shutil.rmtree(out)
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(self))

    real_mkstemp = tempfile.mkstemp

    def read_only(*args, dir=None, prefix="", suffix="", **kwargs):  # a chmod 500 folder, to a user who is not root
        if dir is not None and os.path.samefile(dir, out):
            raise PermissionError(errno.EACCES, "Permission denied", os.path.join(dir, f"{prefix}x1y2{suffix}"))
        return real_mkstemp(*args, dir=dir, prefix=prefix, suffix=suffix, **kwargs)

    monkeypatch.setattr(ScalingForecaster, "fit", fit_as_before)
    if happening == "its folder deleted":
        monkeypatch.setattr(pathlib.Path, "write_bytes", deleted_while_saved)
    else:
        monkeypatch.setattr(tempfile, "mkstemp", read_only)
    code = main(["fit", str(tmp_path / "runs.csv"), "--out", str(out), "--fast", "--no-progress"])
    err = capsys.readouterr().err
    if happening == "its folder deleted":
        assert code == 1 and not out.exists()
        assert err == (f"error: {out / 'fit.nc'}: No such file or directory (its folder {out} was deleted or moved while "
                       "it was written: make the folder again, or write elsewhere)\n")
    else:
        assert code == 2
        assert err == (f"error: {out / 'summary.json'}: Permission denied (this process may not write in {out} "
                       "(read-only, or not yours): write elsewhere)\n")
        assert sorted(p.name for p in out.iterdir()) == ["fit.nc"] and (out / "fit.nc").read_bytes() == before



def _code_defaults() -> dict[str, object]:
    """The setting each value flag falls back on when it is left out, as the code applies it: argparse's
    own default where it has one, else the default of the setting the flag is None for."""
    import dataclasses
    import inspect

    from forecast.backtest import BacktestConfig
    from forecast.cli import RULE_FLAGS
    from forecast.decisions import decide_split
    from forecast.early_stop import EarlyStopConfig
    from forecast.watch import DEFAULT_OUT_NAME

    rules = {field.name: field.default for field in dataclasses.fields(EarlyStopConfig)}
    backtest = BacktestConfig()
    return {**{flag: rules[field] for field, flag in RULE_FLAGS.items()},
            "--growth": backtest.check_growth, "--halving-eta": backtest.halving_eta,
            "--median-percentile": backtest.median_percentile, "--median-startup": backtest.median_n_startup,
            "--max-ways": inspect.signature(decide_split).parameters["max_ways"].default,
            "--out": f"RUNS_DIR/{DEFAULT_OUT_NAME}"}  # watch's advice, beside the runs it follows


def _same_default(said: str, value) -> bool:
    if said in ("on", "off"):
        return value is (said == "on") or (said == "off" and value is None)
    try:
        return float(said) == float(value)
    except (TypeError, ValueError):
        return said == str(value)


def test_every_default_the_help_names_is_the_one_the_code_uses():
    """`--help` is where a user reads what a flag left out means: '(default 30)' beside an interval of 60, or
    '(default report.html)' beside a page written to out.html, would mislead every reader without a test
    failing. Each '(default X)' is checked against argparse's default or, for a flag whose argparse default
    is None, the setting the code falls back on (the stop rules, the backtest's baselines, decide's split)."""
    import re

    from forecast.cli import build_parser
    from forecast.report import BUDGET_MULTIPLE

    code_defaults = _code_defaults()
    checked = 0
    for command, parser in build_parser().commands.items():
        for action in parser._actions:
            said = re.search(r"\(default ([^;)\s]+)", action.help or "")
            if not action.option_strings or said is None:
                continue
            flag = next(option for option in action.option_strings if option.startswith("--"))
            value = action.default if action.default is not None else code_defaults.get(flag)
            assert _same_default(said[1], value), f"{command} {flag}: help says default {said[1]}, the code uses {value!r}"
            checked += 1
    # the report's budget is said as a multiple of the data, not a number argparse holds
    budget_help = build_parser().commands["report"]._option_string_actions["--budget"].help
    assert f"(default: {BUDGET_MULTIPLE:g}x the largest observed)" in budget_help
    assert checked >= 30  # every command's seed, the rule flags, the baselines', watch's interval, ...


def test_decide_total_without_max_ways_splits_into_as_many_ways_as_its_help_says(fit_dir, capsys):
    """--max-ways says '(default 4)': a total left to the default is split into up to 4 runs."""
    import re

    from forecast.cli import build_parser

    said = re.search(r"\(default (\d+)\)", build_parser().commands["decide"]._option_string_actions["--max-ways"].help)
    assert main(["decide", str(fit_dir / "fit"), "--budget", "1e5", "--total", "--json"]) == 0
    assert [row["ways"] for row in json.loads(capsys.readouterr().out)["table"]] == list(range(1, int(said[1]) + 1))


@pytest.mark.parametrize("argv, settings", [
    (["fit", "RUNS", "--out", "OUT", "--no-progress"], {"mode": "nuts", "robust": False, "random_seed": 0}),
    (["fit", "RUNS", "--out", "OUT", "--fast", "--seed", "7"], {"mode": "fast", "robust": False, "random_seed": 7}),
    (["fit", "RUNS", "--out", "OUT", "--robust"], {"mode": "nuts", "robust": True, "random_seed": 0}),
    (["report", "RUNS", "-o", "OUT.html", "--no-progress"], {"mode": "nuts", "robust": False, "random_seed": 0}),
    (["report", "RUNS", "-o", "OUT.html", "--fast", "--seed", "7"], {"mode": "fast", "robust": False, "random_seed": 7}),
    (["report", "RUNS", "-o", "OUT.html", "--robust"], {"mode": "nuts", "robust": True, "random_seed": 0}),
    (["decide", "RUNS", "--budget", "1e5"], {"mode": "nuts", "robust": False, "random_seed": 0}),
    (["decide", "RUNS", "--budget", "1e5", "--fast", "--seed", "7"], {"mode": "fast", "robust": False, "random_seed": 7}),
])
def test_the_fit_settings_given_on_the_command_line_reach_the_fit(small_sweep, tmp_path, monkeypatch, argv, settings):
    """--fast, --robust and --seed of each command that fits a run table are what its fit is made with (a
    --seed dropped on the way, or --fast given to robust=, is a fit other than the one asked for, without
    a word). The fit is stopped as it starts, as a Ctrl-C would (exit 130)."""
    from forecast.forecaster import ScalingForecaster

    seen = {}

    def record_and_stop(self, runs, **kwargs):
        seen.update(mode=self.mode, robust=self.robust, random_seed=kwargs.get("random_seed"))
        raise KeyboardInterrupt

    monkeypatch.setattr(ScalingForecaster, "fit", record_and_stop)
    small_sweep.to_csv(tmp_path / "runs.csv", index=False)
    paths = {"RUNS": str(tmp_path / "runs.csv"), "OUT": str(tmp_path / "out"), "OUT.html": str(tmp_path / "out.html")}
    assert main([paths.get(arg, arg) for arg in argv]) == 130
    assert seen == settings


@pytest.mark.parametrize("flags, settings", [
    ([], {"cuts": (0.25, 0.5), "level": 0.9, "random_seed": 0, "planned_budget": True, "mode": "nuts", "robust": False}),
    (["--cuts", "0.5", "--level", "0.8", "--seed", "3", "--unknown-budget", "--fast", "--robust"],
     {"cuts": (0.5,), "level": 0.8, "random_seed": 3, "planned_budget": False, "mode": "fast", "robust": True}),
])
def test_cross_validate_hands_its_flags_to_the_cross_validation(small_sweep, tmp_path, monkeypatch, flags, settings):
    """--unknown-budget fits as if the runs' final compute were unknown: the flag inverted, or --cuts'
    default other than the help's 0.25,0.5, would cross-validate something else under the same words."""
    import forecast.cross_validation

    seen = {}

    def record_and_stop(runs, *, cuts, level, forecaster, random_seed, planned_budget, **kwargs):
        seen.update(cuts=cuts, level=level, random_seed=random_seed, planned_budget=planned_budget,
                    mode=forecaster.mode, robust=forecaster.robust)
        raise KeyboardInterrupt

    monkeypatch.setattr(forecast.cross_validation, "cross_validate", record_and_stop)
    small_sweep.to_csv(tmp_path / "runs.csv", index=False)
    assert main(["cross-validate", str(tmp_path / "runs.csv"), *flags]) == 130
    assert seen == settings


@pytest.mark.parametrize("argv, said", [
    (["fit", "RUNS", "--out", "OUT", "--target", "1.5"], "--target must lie in (0, 1), got 1.5"),
    (["fit", "RUNS", "--out", "OUT", "--target", "-0.5"], "--target must lie in (0, 1), got -0.5"),
    (["fit", "RUNS", "--out", "OUT", "--target", "0"], "--target must lie in (0, 1), got 0"),
    (["decide", "RUNS", "--budget", "1e5", "--target", "1.5"], "--target must lie in (0, 1), got 1.5"),
    (["decide", "RUNS", "--budget", "1e5", "--target", "nan"], "--target must lie in (0, 1), got nan"),
    (["report", "RUNS", "-o", "OUT.html", "--target", "-0.2"], "--target must lie in (0, 1), got -0.2"),
    (["report", "RUNS", "-o", "OUT.html", "--budget", "0"], "--budget must be finite and > 0, got 0"),
])
def test_a_target_or_budget_out_of_range_is_refused_before_the_fit(small_sweep, tmp_path, monkeypatch, capsys, argv, said):
    """A pass rate of 1.5 (a percentage typed as 150/100?) is no target: refused in words, exit 2, before
    minutes of sampling, by every command that fits, not after the fit by a traceback or an answer for it."""
    from forecast.forecaster import ScalingForecaster

    monkeypatch.setattr(ScalingForecaster, "fit", lambda *a, **k: pytest.fail("fitted before refusing the flag"))
    small_sweep.to_csv(tmp_path / "runs.csv", index=False)
    paths = {"RUNS": str(tmp_path / "runs.csv"), "OUT": str(tmp_path / "out"), "OUT.html": str(tmp_path / "out.html")}
    assert main([paths.get(arg, arg) for arg in argv]) == 2
    assert f"error: {said}\n" in capsys.readouterr().err
    assert [path.name for path in tmp_path.iterdir()] == ["runs.csv"]  # nothing written


def test_predict_names_a_saved_fit_in_a_folder_that_cannot_be_entered(fit_dir, tmp_path, make_unenterable, capsys):
    """As every other command's path: one line naming it and what to do, exit 2."""
    import shutil

    locked = tmp_path / "locked"
    shutil.copytree(fit_dir / "fit", locked / "fit")
    make_unenterable(locked)
    assert main(["predict", str(locked / "fit"), "--compute", "2e4"]) == 2
    err = capsys.readouterr().err
    assert f"error: {locked / 'fit'}: permission denied" in err and "Traceback" not in err


def test_predict_reads_a_saved_fit_under_the_home_folder_as_the_other_commands_do(fit_dir, tmp_path, monkeypatch, capsys):
    """`forecast predict "~/fit" --compute ...` (quoted, or from a script, the shell leaves "~") answered 'no
    saved fit at ~/fit' while `decide "~/fit"` and `report "~/fit"` read that very fit: predict's FIT
    argument was not among the paths whose "~" is expanded."""
    import shutil

    home = tmp_path / "home"
    shutil.copytree(fit_dir / "fit", home / "fit")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    assert main(["predict", "~/fit", "--compute", "2e4", "--recipe", "scalerl_8b", "--json"]) == 0
    assert [record["compute"] for record in json.loads(capsys.readouterr().out)] == [2e4]


def test_decide_total_says_a_target_has_no_effect(fit_dir, capsys):
    """decide_split ranks splits by their expected best metric and takes no target: a --target given
    with --total is said to do nothing, on stderr, and the JSON on stdout stays parseable."""
    assert main(["decide", str(fit_dir / "fit"), "--budget", "1e5", "--total", "--target", "0.6", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "warning: --target has no effect: --total compares splits of the budget by their expected best metric" in err
    assert json.loads(out)["table"]


@pytest.mark.parametrize("as_json", [False, True])
def test_report_on_an_unconverged_fit_says_so_on_stderr(fit_dir, unconverged_fit, tmp_path, capsys, as_json):
    """`forecast report` shows numbers from a fit, so it says on stderr when that fit did not converge,
    with --json too, whose stdout stays the JSON alone; its diagnostics carry the 7 divergences."""
    out = tmp_path / "r.html"
    args = ["report", str(fit_dir / "fit"), "--budget", "1e5", "--target", "0.6", "-o", str(out), "--no-progress"]
    assert main(args + (["--json"] if as_json else [])) == 0
    captured = capsys.readouterr()
    assert "did not converge" in captured.err and "7 divergent transitions" in captured.err
    if as_json:
        assert _strict_json(captured.out)["diagnostics"]["divergences"] == 7
    assert "NOT CONVERGED" in out.read_text(encoding="utf-8")


def test_report_says_a_budget_far_from_the_data_on_stderr_too(fit_dir, capsys, tmp_path):
    """The page's banner is for whoever reads it; whoever ran the command reads the terminal."""
    out = tmp_path / "r.html"
    assert main(["report", str(fit_dir / "fit"), "--budget", "1e12", "--target", "0.6", "-o", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "The budget 1e12 is" in err and "Is the unit right?" in err


@pytest.mark.parametrize("argv, said", [
    (["predict", "{fit}", "--compute", ""], "--compute is empty: give at least one compute value, e.g. --compute 4e12"),
    (["predict", "{fit}", "--compute", " , "], "--compute is empty: give at least one compute value, e.g. --compute 4e12"),
    (["predict", "{fit}", "--compute", "4e3", ""], "--compute is empty: give at least one compute value, e.g. --compute 4e12"),
    (["fit", "{runs}", "--out", "{tmp}/fit", "--prior", ""], "--prior is empty: give NAME=VALUE, e.g. --prior b_mu=0.5"),
    (["backtest", "{runs}", "--rule", ","], "--rule is empty: give NAME=VALUE, e.g. --rule p_beat_threshold=0.05"),
    (["backtest", "{runs}", "--policies", ""], "--policies is empty: give a comma list of policies, e.g. --policies "
                                               "forecast,median (or leave it out for the default)"),
    (["cross-validate", "{runs}", "--cuts", ""], "--cuts is empty: give at least one fraction of each run's compute, "
                                                 "e.g. --cuts 0.5 (or leave it out for the default)"),
])
def test_an_empty_list_value_is_refused_naming_its_flag(fit_dir, tmp_path, capsys, monkeypatch, argv, said):
    """`forecast predict FIT --compute ""` (an unset shell variable) said 'compute is empty', naming no flag;
    `--prior ""` and `--rule ""` were no setting at all, and the fit ran on the defaults without a word. Each
    empty value of a flag that takes a list is refused before any work now, naming the flag, exit 2."""
    from forecast.forecaster import ScalingForecaster

    def no_fit(*args, **kwargs):
        raise AssertionError("the command ran with an empty value")

    monkeypatch.setattr(ScalingForecaster, "fit", no_fit)
    values = {"fit": str(fit_dir / "fit"), "runs": str(fit_dir / "runs.csv"), "tmp": str(tmp_path)}
    assert main([arg.format(**values) for arg in argv]) == 2
    assert capsys.readouterr().err == f"error: {said}\n"


@pytest.mark.parametrize("argv, said", [
    (["fit", "{runs}", "--out", ""], "--out is empty: give a path (an empty one is read as the current folder)"),
    (["decide", "", "--budget", "1e3"], "RUNS_OR_FIT is empty: give a path (an empty one is read as the current folder)"),
    # named as the usage line names it (argparse shows a positional without a metavar by its own name, lower case)
    (["fit", "", "--out", "{tmp}/fit"], "runs is empty: give a path (an empty one is read as the current folder)"),
    (["predict", "", "--compute", "1e3"], "fit_dir is empty: give a path (an empty one is read as the current folder)"),
    (["watch", "", "--once"], "RUNS_DIR is empty: give a path (an empty one is read as the current folder)"),
    (["report", "{fit}", "-o", ""], "--out is empty: give a path (an empty one is read as the current folder)"),
    (["watch", "{tmp}", "--once", "--reference", " "],
     "--reference is empty: give a path (an empty one is read as the current folder)"),
])
def test_an_empty_path_is_refused_not_read_as_the_current_folder(fit_dir, tmp_path, capsys, monkeypatch, argv, said):
    """`forecast fit RUNS --out "$OUT"` with OUT unset wrote fit.nc and summary.json into the current folder,
    and `forecast decide "" ...` read whatever fit or run table was there: an empty path is the current folder
    to the file system. `watch --reference ""` said 'file .: folder holds no run files'. Refused now, exit 2."""
    from forecast.forecaster import ScalingForecaster

    def no_fit(*args, **kwargs):
        raise AssertionError("the command ran with an empty path")

    monkeypatch.setattr(ScalingForecaster, "fit", no_fit)
    monkeypatch.chdir(tmp_path)
    values = {"fit": str(fit_dir / "fit"), "runs": str(fit_dir / "runs.csv"), "tmp": str(tmp_path)}
    assert main([arg.format(**values) for arg in argv]) == 2
    assert capsys.readouterr().err == f"error: {said}\n"
    assert list(tmp_path.iterdir()) == []
