"""`make demo`: the shipped example data, the end-to-end run (fast mode, on the session's small
sweep so the compiled model is reused), and the live sweep's command line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from forecast import demo, load_runs


def test_shipped_synthetic_example_is_labelled_and_reproducible(tmp_path):
    shipped = load_runs(demo.SYNTHETIC_EXAMPLE)
    assert shipped["source"].str.contains("synthetic").all()  # never mistaken for real runs
    assert shipped["recipe"].nunique() == 10 and shipped["run_id"].nunique() == 30
    again = pd.read_csv(demo.write_synthetic_example(tmp_path / "runs.csv"))
    pd.testing.assert_frame_equal(again, pd.read_csv(demo.SYNTHETIC_EXAMPLE))


def test_default_data_prefers_the_trainer_sweep(tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "TRAINER_SWEEP", tmp_path / "absent.csv")
    assert demo.default_runs_path() == demo.SYNTHETIC_EXAMPLE
    present = tmp_path / "runs.csv"
    present.write_text("run_id,recipe,compute,metric\n")
    monkeypatch.setattr(demo, "TRAINER_SWEEP", present)
    assert demo.default_runs_path() == present


def test_demo_end_to_end(fitted, small_sweep, tmp_path, capsys):
    """The whole demo on the small sweep in fast mode (same structure as `fitted`: no recompile)."""
    runs = tmp_path / "runs.csv"
    small_sweep.to_csv(runs, index=False)
    out = tmp_path / "demo_out"
    assert demo.main(["--runs", str(runs), "--out", str(out), "--fast"]) == 0
    printed = capsys.readouterr().out
    assert "P(best)" in printed and "asymptote A" in printed and "=> " in printed
    assert "scalerl_scout_moe" in printed
    for name in ("report.html", "fan_chart.png", "forest.png", "summary.json"):
        assert (out / name).stat().st_size > 1000, name
    assert (out / "fan_chart.png").read_bytes().startswith(b"\x89PNG")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["synthetic"] is True and len(summary["recipes"]) == 3
    assert summary["budget"] == pytest.approx(4 * small_sweep["compute"].max())


def test_live_sweep_command_uses_real_trainer_flags(tmp_path, monkeypatch):
    """The --live command line parses with trainer_minimal's own parser (flags not invented)."""
    trainer_cli = pytest.importorskip("trainer_minimal.cli")
    seen = {}

    def fake_run(command, check):
        seen["command"] = command
        (tmp_path / "sweep").mkdir()
        (tmp_path / "sweep" / "runs.csv").write_text("")

    monkeypatch.setattr(demo.subprocess, "run", fake_run)
    assert demo.run_live_sweep(tmp_path / "sweep") == tmp_path / "sweep" / "runs.csv"
    args = trainer_cli.build_parser().parse_args(seen["command"][3:])
    assert args.command == "sweep" and args.presets == demo.LIVE_PRESETS and args.slim
    # the presets exist and the overrides are valid (the trainer's own check, run before any compute)
    from trainer_minimal.sweep import plan_sweep

    plan = plan_sweep(args.presets, args.seeds, str(tmp_path / "plan"), trainer_cli.explicit_overrides(args, trainer_cli.SWEEP_FIXED))
    assert len(plan) == len(demo.LIVE_PRESETS.split(",")) * len(demo.LIVE_SEEDS.split(","))


def test_demo_bad_runs_file_exits_2(tmp_path, capsys):
    assert demo.main(["--runs", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "out")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_live_and_runs_together_are_refused_before_the_sweep(tmp_path, monkeypatch, capsys):
    """`--live --runs R` trained the live sweep and forecast it, silently ignoring R."""
    monkeypatch.setattr(demo.subprocess, "run", lambda *a, **k: pytest.fail("the live sweep was started"))
    with pytest.raises(SystemExit) as exit_:
        demo.main(["--live", "--runs", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_demo_refuses_to_write_into_the_folder_of_its_run_table(small_sweep, tmp_path, monkeypatch, capsys):
    """`forecast demo --runs DIR/runs.csv --out DIR` put fit.nc beside the runs: from then on
    `forecast decide DIR`/`report DIR` read that fit instead of the runs, and `forecast fit DIR` refused DIR."""
    small_sweep.to_csv(tmp_path / "runs.csv", index=False)
    monkeypatch.setattr(demo, "fit", lambda *a, **k: pytest.fail("fitted before refusing --out"))
    assert demo.main(["--runs", str(tmp_path / "runs.csv"), "--out", str(tmp_path), "--fast"]) == 2
    assert f"it holds the run table {tmp_path.resolve() / 'runs.csv'} being fitted" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv"]


@pytest.mark.parametrize("where, message", [
    ("read_only", "cannot write in"),
    ("a_file", "is a file; --out names a folder"),
    ("run_folder", "whose files (evals.jsonl, summary.json) are the trainer's"),
    ("fit.nc", "fit.nc is a folder"),
])
def test_an_output_folder_the_demo_cannot_use_exits_2_before_the_fit(small_sweep, tmp_path, monkeypatch, capsys,
                                                                      where, message):
    """The demo checked nothing about --out: a read-only folder failed with a traceback after the fit
    (minutes), a file with a FileExistsError traceback, and a trainer's run folder had its
    summary.json (which marks the run finished) replaced by the demo's. A folder where one of its
    files goes (fit.nc) was a traceback after the fit too."""
    import os

    runs = tmp_path / "runs.csv"
    small_sweep.to_csv(runs, index=False)
    out = tmp_path / "out"
    if where == "a_file":
        out.write_text("mine\n")
    else:
        out.mkdir()
    if where == "run_folder":
        (out / "evals.jsonl").write_text('{"run_id": "a-s0", "recipe": "a", "compute": 1.0, "metric": 0.1}\n')
        (out / "summary.json").write_text('{"final_metric": 0.1}\n')
    if where == "fit.nc":  # what `forecast fit R --out DIR/fit.nc` makes
        (out / "fit.nc").mkdir()
    if where == "read_only":
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: (not (mode & os.W_OK and str(path) == str(out))
                                                                    and real_access(path, mode, **kw)))
    before = {p.name: p.is_dir() or p.read_bytes() for p in out.iterdir()} if out.is_dir() else out.read_bytes()
    monkeypatch.setattr(demo, "fit", lambda *a, **k: pytest.fail("fitted before refusing --out"))
    assert demo.main(["--runs", str(runs), "--out", str(out), "--fast"]) == 2
    assert message in capsys.readouterr().err
    assert ({p.name: p.is_dir() or p.read_bytes() for p in out.iterdir()} if out.is_dir() else out.read_bytes()) == before


@pytest.mark.parametrize("flag, value, message", [
    ("--budget", "nan", "--budget must be finite and > 0, got nan"),
    ("--budget", "inf", "--budget must be finite and > 0, got inf"),
    ("--target", "1e300", "--target must lie in (0, 1), got 1e+300"),
    ("--target", "0", "--target must lie in (0, 1), got 0"),
])
def test_a_bad_budget_or_target_exits_2_naming_the_flag_before_the_fit(small_sweep, tmp_path, monkeypatch, capsys,
                                                                        flag, value, message):
    """`python -m forecast.demo --budget nan` was refused by the report after the fit (minutes; after the whole
    sweep with --live), as "budget must be > 0, got nan", naming no flag."""
    runs = tmp_path / "runs.csv"
    small_sweep.to_csv(runs, index=False)
    monkeypatch.setattr(demo, "fit", lambda *a, **k: pytest.fail("fitted before refusing " + flag))
    assert demo.main(["--runs", str(runs), "--out", str(tmp_path / "out"), "--fast", flag, value]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["-1e12", "-inf"])
def test_a_negative_budget_written_as_a_float_is_read_as_a_number(tmp_path, capsys, value):
    """`--budget -1e12` said "argument --budget: expected one argument", naming no value: the demo's parser
    took it for a flag (the CLI's NumbersParser reads it as a number)."""
    assert demo.main(["--runs", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "out"), "--budget", value]) == 2
    assert capsys.readouterr().err == f"error: --budget must be finite and > 0, got {float(value):g}\n"


def test_a_negative_seed_is_refused_by_the_parser_naming_the_flag(tmp_path, capsys):
    """`--seed -1` was refused by the fit as "random_seed must be an integer >= 0 or None, got -1", naming a
    keyword of Python's, not the flag; the parser refuses it as the CLI's commands do."""
    with pytest.raises(SystemExit) as exit_info:
        demo.main(["--runs", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "out"), "--seed", "-1"])
    assert exit_info.value.code == 2
    assert "argument --seed: must be a whole number >= 0, got -1" in capsys.readouterr().err


class _FitStarted(Exception):
    pass


def test_the_demo_says_how_long_its_quiet_parts_take_before_they_start(small_sweep, tmp_path, monkeypatch, capsys):
    """`make demo-live` trained for 4.5 minutes and fitted for 3.5 (2 shared cores) with nothing
    but the sweep's command and 'data: ...' said before either: no word of what it was doing or how
    long it would take. Now the sweep's size and time, and the fit's, are said before each starts."""
    def fake_run(command, check):
        folder = tmp_path / "out" / "live_sweep"
        folder.mkdir(parents=True)
        small_sweep.to_csv(folder / "runs.csv", index=False)

    def fit_started(runs, *, fast, seed):
        raise _FitStarted

    monkeypatch.setattr(demo.subprocess, "run", fake_run)
    monkeypatch.setattr(demo, "fit", fit_started)
    with pytest.raises(_FitStarted):
        demo.run_demo(demo.parse_args(["--live", "--out", str(tmp_path / "out")]))
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == ("live sweep: 6 runs (grpo,cispo,scalerl x seeds 0,1, 200 steps each, 2 at a time), "
                          "about 4-5 minutes on 2 CPU cores; then the fit")
    assert printed[-1].startswith("fitting: 2000 draws and 2000 warm-up per chain, about 1.5-3 minutes on 2 CPU cores")


def test_every_fan_chart_image_of_a_large_sweep_is_written(fitted, tmp_path):
    """The report splits a sweep of more than 9 recipes into fan_chart, fan_chart_2, ... (3 rows of
    panels each); the demo wrote fan_chart.png alone, which held only the first 9 recipes."""
    from test_report import hand_made_report

    data = hand_made_report()
    first = data.figures["fan_chart"]
    data.figures = {"fan_chart": first, "fan_chart_2": first + b"2", "fan_chart_3": first + b"3",
                    "forest": data.figures["forest"]}
    paths = demo.write_outputs(fitted, data, tmp_path)
    for name, png in data.figures.items():
        assert paths[name] == tmp_path / f"{name}.png"
        assert (tmp_path / f"{name}.png").read_bytes() == png, name


@pytest.mark.parametrize("happening", ["its folder deleted", "the disk full"])
def test_the_demo_whose_output_cannot_be_written_says_so_in_a_line(fitted, small_sweep, tmp_path, monkeypatch, capsys,
                                                                    happening):
    """`make demo` whose demo_out was deleted while fit.nc was saved (session 37) ended in a FileNotFoundError
    traceback naming '.fit.nc.x1y2.tmp', and on a full disk in h5py's; the demo caught bad input alone. Each
    is one line now, naming demo_out/fit.nc and what happened, exit 1, as the forecast commands say it."""
    import errno
    import pathlib
    import shutil

    runs = tmp_path / "runs.csv"
    small_sweep.to_csv(runs, index=False)
    out = tmp_path / "demo_out"

    real_write_bytes = pathlib.Path.write_bytes

    def saved_as_it_fails(self, *args, **kwargs):  # fit.nc, rendered in memory (netcdf_image), written out
        if not self.name.startswith(".fit.nc."):
            return real_write_bytes(self, *args, **kwargs)
        if happening == "its folder deleted":
            shutil.rmtree(out)
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(self))
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(demo, "fit", lambda runs, **kwargs: fitted)  # the session's fit stands in for the demo's
    monkeypatch.setattr(pathlib.Path, "write_bytes", saved_as_it_fails)
    assert demo.main(["--runs", str(runs), "--out", str(out), "--fast"]) == 1
    said = [line for line in capsys.readouterr().err.splitlines() if line]
    why = ("No such file or directory (its folder {out} was deleted or moved while it was written: make the folder "
           "again, or write elsewhere)" if happening == "its folder deleted" else
           "No space left on device (the disk is full: free some space, or write elsewhere)").format(out=out)
    assert said == [f"error: {out / 'fit.nc'}: {why}"]
    assert not out.exists() or not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_the_demo_says_what_it_read_and_why_its_budget_and_target_are_what_they_are(fitted, small_sweep, tmp_path,
                                                                                   monkeypatch, capsys):
    """The printed lines with known answers: the data line (its path as given when outside the working
    folder, the synthetic label, runs, recipes and evaluations counted), the budget (4x the largest
    compute unless --budget) and the target (the recipes' median asymptote, rounded down, unless
    --target), each with its reason only when the demo chose it; summary.json says whether it chose it."""
    from forecast.formatting import fmt_compute
    from forecast.report import default_target

    runs = tmp_path / "runs.csv"
    small_sweep.to_csv(runs, index=False)
    monkeypatch.chdir(tmp_path.parent)  # the table inside the working folder: shown relative to it
    monkeypatch.setattr(demo, "fit", lambda runs, **kwargs: fitted)  # the session's fit stands in for the demo's
    assert demo.main(["--runs", str(runs), "--out", str(tmp_path / "chosen")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == (f"data: {tmp_path.name}/runs.csv (SYNTHETIC: simulated from ScaleRL Table 1 curves): "
                          "6 runs of 3 recipes, 96 evaluations")
    target = default_target(fitted)
    assert (f"budget {fmt_compute(4 * small_sweep['compute'].max())} gpu_hours (4x the largest observed compute), "
            f"target {target:g} (median of the recipes' forecast asymptotes, rounded down to 0.01)") in printed
    assert json.loads((tmp_path / "chosen" / "summary.json").read_text())["target_chosen"] is True

    assert not any(line.startswith("     divergences") for line in printed)  # one try was enough: nothing said

    # a fit that took more than one try says so under its diagnostics (the convergence story is not hidden)
    tries = "divergences by try: 3 at target acceptance 0.9; 0 at 0.97"
    monkeypatch.setattr(type(fitted), "sampling_tries", lambda self: tries)
    assert demo.main(["--runs", str(runs), "--out", str(tmp_path / "asked"), "--budget", "2e5", "--target", "0.5"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert "budget 200,000 gpu_hours, target 0.5" in printed
    fit_line = next(i for i, line in enumerate(printed) if line.startswith("fit: "))
    assert fit_line < printed.index(f"     {tries}") < printed.index("budget 200,000 gpu_hours, target 0.5")
    assert json.loads((tmp_path / "asked" / "summary.json").read_text())["target_chosen"] is False


def test_the_demo_says_the_reports_warnings_on_the_terminal(fitted, small_sweep, tmp_path, monkeypatch, capsys):
    """A budget far beyond the data is a warning banner on the page, and `forecast report` says it on stderr:
    the demo said it nowhere on the terminal (`--budget 1e300` printed the table as for any budget)."""
    runs = tmp_path / "runs.csv"
    small_sweep.to_csv(runs, index=False)
    monkeypatch.setattr(demo, "fit", lambda runs, **kwargs: fitted)  # the session's fit stands in for the demo's
    assert demo.main(["--runs", str(runs), "--out", str(tmp_path / "plain")]) == 0
    assert "warning:" not in capsys.readouterr().err  # the default budget, 4x the data: nothing to say
    far = 1e6 * small_sweep["compute"].max()
    assert demo.main(["--runs", str(runs), "--out", str(tmp_path / "far"), "--budget", f"{far:g}"]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert len(said) == 1 and said[0].startswith("warning: The budget") and "gpu_hours" in said[0], said


def test_a_path_is_shown_relative_to_the_working_folder_when_inside_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert demo.shown_path(tmp_path / "sweep" / "runs.csv") == Path("sweep/runs.csv")
    assert demo.shown_path("sweep/runs.csv") == Path("sweep/runs.csv")
    elsewhere = tmp_path.parent / "other" / "runs.csv"
    assert demo.shown_path(elsewhere) == elsewhere


def test_the_demo_fits_with_its_documented_chains_and_the_seed_it_is_given(monkeypatch):
    """DEMO_DRAWS and DEMO_TUNE (2000 each, for the reasons given beside them) reach the sampler of
    the full fit, the fast mode's short chains reach the fast one, and --seed reaches both."""
    from forecast import forecaster
    from forecast.inference import SamplerSettings

    made = []

    class Recorded:
        def __init__(self, *, mode, sampler):
            made.append({"mode": mode, "sampler": sampler})

        def fit(self, runs, *, random_seed, progress):
            made[-1]["seed"] = random_seed
            return self

    monkeypatch.setattr(forecaster, "ScalingForecaster", Recorded)
    demo.fit("runs", fast=False, seed=11)
    demo.fit("runs", fast=True, seed=12)
    full, fast = made
    assert full["mode"] == "nuts" and (full["sampler"].draws, full["sampler"].tune) == (2000, 2000)
    assert fast["mode"] == "fast" and fast["sampler"] == SamplerSettings.fast()
    assert (full["seed"], fast["seed"]) == (11, 12)


def test_the_quick_slice_keeps_the_best_middle_and_worst_recipe_by_final_metric_and_their_first_runs():
    """subset_runs (the notebooks' test mode): recipes ranked by the mean of their last 3 evaluations
    in order of compute (rows shuffled; the first evaluations rank them otherwise), n_runs runs each."""
    rows = []
    early = {"r0": 0.3, "r1": 0.5, "r2": 0.1, "r3": 0.4, "r4": 0.2}  # would pick r1, r0 and r2
    for rank, recipe in enumerate(["r0", "r1", "r2", "r3", "r4"]):  # r0 ends best, r4 worst
        for seed in range(3):
            for step, compute in enumerate([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]):
                metric = early[recipe] if step < 3 else 0.9 - 0.1 * rank
                rows.append({"run_id": f"{recipe}-s{seed}", "recipe": recipe, "compute": compute, "metric": metric})
    runs = pd.DataFrame(rows).sample(frac=1.0, random_state=0)
    kept = demo.subset_runs(runs, n_recipes=3, n_runs=2)
    assert sorted(kept["run_id"].unique()) == ["r0-s0", "r0-s1", "r2-s0", "r2-s1", "r4-s0", "r4-s1"]
    assert len(kept) == 6 * 6
    assert sorted(demo.subset_runs(runs, n_recipes=2, n_runs=1)["run_id"].unique()) == ["r0-s0", "r4-s0"]


def test_the_help_says_how_the_demo_chooses_its_budget_and_target(capsys):
    """`--help` gives the defaults the demo uses and prints as its reasons: the target is the recipes' median
    forecast asymptote rounded down to 0.01 (the help said only "median of the recipes' asymptotes")."""
    with pytest.raises(SystemExit) as exit_:
        demo.parse_args(["--help"])
    assert exit_.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    assert "--budget BUDGET default: 4x the largest observed compute" in help_text
    assert "--target TARGET default: the median of the recipes' forecast asymptotes, rounded down to 0.01" in help_text
