"""The early-stop benchmark's bookkeeping: every seed subset of a sweep, and ours minus a baseline
sweep by sweep. The figures in the README rest on these, so they are checked on hand-made input."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import benchmark_module


@pytest.fixture(scope="module")
def bench():
    with benchmark_module("early_stop.py") as module:
        yield module


def seeds_table(seeds_per_recipe: dict[str, int]) -> pd.DataFrame:
    rows = [
        {"run_id": f"{recipe}-s{seed}", "recipe": recipe, "compute": float(step + 1), "metric": 0.1 * step}
        for recipe, n in seeds_per_recipe.items()
        for seed in range(n)
        for step in range(3)
    ]
    return pd.DataFrame(rows)


def test_every_seed_subset_is_each_choice_of_seeds_once(bench):
    runs = seeds_table({"a": 3, "b": 4, "c": 1})
    subsets = [frozenset(s["run_id"].unique()) for s in bench.every_seed_subset(runs, keep=2)]
    # a: 3 ways to keep 2 of 3, b: 6 ways to keep 2 of 4, c keeps its only run
    assert len(subsets) == bench.count_seed_subsets(runs, keep=2) == 18
    assert len(set(subsets)) == 18
    for subset in subsets:
        recipes = [run.split("-s")[0] for run in subset]
        assert recipes.count("a") == 2 and recipes.count("b") == 2 and recipes.count("c") == 1
    assert bench.count_seed_subsets(runs, keep=1) == 12
    # every evaluation of a kept run comes along
    first = next(bench.every_seed_subset(runs, keep=1))
    assert len(first) == 3 * first["run_id"].nunique()


def sweeps_with(ours: list[tuple[float, float]], baseline: list[tuple[float, float]]) -> dict:
    return {
        f"sweep_{i}": {"policies": {
            "forecast": {"compute_saved": o[0], "regret": o[1]},
            "successive_halving": {"compute_saved": b[0], "regret": b[1]},
        }}
        for i, (o, b) in enumerate(zip(ours, baseline, strict=True))
    }


def test_paired_differences_are_the_mean_and_standard_error_of_ours_minus_the_baseline(bench):
    everything = sweeps_with([(0.70, 0.004), (0.74, 0.000), (0.72, 0.010)], [(0.75, 0.000), (0.76, 0.002), (0.74, 0.006)])
    d = bench.paired_differences(everything, list(everything), "successive_halving")
    saved_diff = np.array([-0.05, -0.02, -0.02])
    assert d["n"] == 3
    assert d["compute_saved"][0] == pytest.approx(saved_diff.mean())
    assert d["compute_saved"][1] == pytest.approx(saved_diff.std(ddof=1) / np.sqrt(3))
    assert d["regret"][0] == pytest.approx(np.mean([0.004, -0.002, 0.004]))
    line = bench.paired_difference_lines(everything, list(everything), ["forecast", "successive_halving"])
    assert line == ["  ours - successive_halving, sweep by sweep (3): saved -3.0 +- 1.0 points, "
                    "regret +0.0020 +- 0.0020 (mean +- standard error)"]


def test_paired_differences_need_two_sweeps_and_both_policies(bench):
    everything = sweeps_with([(0.7, 0.0)], [(0.8, 0.0)])
    assert bench.paired_differences(everything, list(everything), "successive_halving") is None
    assert bench.paired_difference_lines(everything, list(everything), ["forecast", "successive_halving"]) == []
    two = sweeps_with([(0.7, 0.0), (0.6, 0.0)], [(0.8, 0.0), (0.5, 0.0)])
    assert bench.paired_difference_lines(two, list(two), ["successive_halving"]) == []


@pytest.mark.parametrize("flag, value", [("--p-beat-threshold", "1.5"), ("--p-beat-threshold", "0"), ("--max-stop-share", "2"),
                                         ("--min-gain-per-compute", "-0.1"), ("--protect-top-percent", "0")])
def test_out_of_range_settings_for_ours_are_refused_before_any_replay(bench, flag, value, capsys):
    # a threshold outside its range would silently never or always fire; the replays take minutes
    with pytest.raises(SystemExit) as exit_info:
        bench.main([flag, value, "--no-synthetic", "--trainer-sweep", "no/such/sweep.csv"])
    assert exit_info.value.code == 2
    assert flag in capsys.readouterr().err


def test_settings_at_the_edges_of_their_ranges_are_taken(bench, capsys, tmp_path):
    # 0 turns the expected-gain rule off and 1 lifts the cap: both are documented uses, not errors
    sweep = tmp_path / "sweep.csv"
    seeds_table({"a": 2, "b": 2}).to_csv(sweep, index=False)
    argv = ["--min-gain-per-compute", "0", "--max-stop-share", "1", "--no-keep-runner-up", "--no-synthetic",
            "--trainer-sweep", str(sweep), "--subsets", "0", "--singles", "0", "--policies", "no_stopping"]
    assert bench.main(argv) == 0
    assert "== trainer_sweep: 4 runs" in capsys.readouterr().out


@pytest.mark.parametrize("asked, replayed", [
    ([], []),  # --quick alone: the trainer sweep, no subsets, as before
    (["--subsets", "2"], ["trainer_subset_1", "trainer_subset_2"]),
    (["--singles", "1"], ["trainer_single_1"]),
    (["--subsets", "1", "--singles", "2"], ["trainer_subset_1", "trainer_single_1", "trainer_single_2"]),
])
def test_quick_replays_the_seed_subsets_it_is_asked_for(bench, capsys, tmp_path, asked, replayed):
    """`--quick --subsets 2` replayed no subset in silence, though --help offers --subsets for every run:
    --quick leaves them out by default only, and the settings it prints say how many it drew."""
    sweep = tmp_path / "sweep.csv"
    seeds_table({"a": 3, "b": 3}).to_csv(sweep, index=False)
    assert bench.main(["--quick", "--no-synthetic", "--trainer-sweep", str(sweep), "--policies", "no_stopping", *asked]) == 0
    out = capsys.readouterr().out
    assert re.findall(r"^== (trainer_s\w+):", out, flags=re.MULTILINE) == ["trainer_sweep", *replayed]
    subsets, singles = (sum(name.startswith(prefix) for name in replayed) for prefix in ("trainer_subset", "trainer_single"))
    assert f"subsets={subsets}, singles={singles}," in out


@pytest.mark.parametrize("argv, said", [
    (["--trainer-sweep", "no/such/sweep.csv"], "--trainer-sweep no/such/sweep.csv: no such file or folder"),
    (["--policies", "median,nope"], "--policies: unknown 'nope'"),
    (["--check-growth", "1.005"], "--check-growth must be at least 1.01, got 1.005"),
    (["--subsets", "-4"], "--subsets must be at least 0, got -4"),
    (["--quick", "--singles", "-1"], "--singles must be at least 0, got -1"),
    (["--resample-window", "0"], "--resample-window must be at least 1, got 0"),
])
def test_bad_benchmark_flags_exit_2_before_any_replay(bench, capsys, argv, said):
    """A named sweep that is not there ran nothing and exited 0; an unknown policy and a growth
    below the backtest's floor raised a ValueError with a traceback."""
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--no-synthetic", *argv])
    assert exit_info.value.code == 2 and said in capsys.readouterr().err


def test_a_mistyped_policy_gets_the_guess_the_forecast_cli_gives(bench, capsys):
    """--policies succesive_halving listed the known names but did not point at the one meant, as
    `forecast backtest --policies` does; a name like none of them still gets no guess."""
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--no-synthetic", "--policies", "forecast,succesive_halving,zzz"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert "--policies: unknown 'succesive_halving' (did you mean 'successive_halving'?), 'zzz'; known: " in err


def test_replicas_replace_every_trainer_sweep_and_keep_each_subsets_runs(bench):
    full = seeds_table({"x": 3, "y": 3})
    full["n_eval"] = 400
    subsets = bench.seed_subsets(full, 2)
    sweeps = {"trainer_sweep": full, **subsets, "table1": full.head(3)}
    replaced, truths = bench.with_replicas(sweeps, 3)
    expected = {f"{s}@r{k}" for s in ("trainer_sweep", *subsets) for k in (1, 2, 3)}
    assert set(replaced) == expected | {"table1"}  # a synthetic sweep is left as it is
    assert set(truths) == expected and set(truths.values()) == {"true_metric"}
    for name in subsets:
        assert set(replaced[f"{name}@r2"]["run_id"]) == set(subsets[name]["run_id"])
        # a subset of replica k is cut from replica k of the full sweep: the same redrawn evaluations
        cut = replaced["trainer_sweep@r2"][replaced["trainer_sweep@r2"]["run_id"].isin(set(subsets[name]["run_id"]))]
        np.testing.assert_array_equal(replaced[f"{name}@r2"]["metric"].to_numpy(), cut["metric"].to_numpy())
    assert not replaced["trainer_sweep@r1"]["metric"].equals(replaced["trainer_sweep@r2"]["metric"])
    assert bench.base_name("trainer_subset_2@r3") == "trainer_subset_2" and bench.base_name("table1") == "table1"


def test_resample_noise_without_n_eval_is_refused_naming_the_flag(bench, capsys, tmp_path):
    table = seeds_table({"x": 2, "y": 2})
    path = tmp_path / "runs.csv"
    table.to_csv(path, index=False)
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--trainer-sweep", str(path), "--no-synthetic", "--resample-noise", "2", "--policies", "no_stopping"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--resample-noise" in err and "n_eval" in err


def test_the_baselines_trade_off_is_replayed_at_the_main_lines_checkpoints(bench):
    """--check-growth reached only the main policy lines: the frontier and the all-subsets lines
    built BacktestConfig() afresh, so ours at 1.1 was read against baselines at 1.25."""
    from forecast import load_runs
    from forecast.backtest import BacktestConfig, make_policy, replay

    runs = load_runs(bench.TRAINER_SWEEP)
    base = BacktestConfig(check_growth=1.1)
    frontier = bench.baseline_frontier({"sweep": runs}, ["sweep"], "median", base=base)
    at_50 = BacktestConfig(check_growth=1.1, median_percentile=50)
    direct = replay(runs, make_policy("median", at_50), at_50)
    assert frontier[50] == pytest.approx((direct.compute_saved, direct.regret))
    default = replay(runs, make_policy("median", BacktestConfig()), BacktestConfig())
    assert frontier[50][0] != pytest.approx(default.compute_saved)  # the checkpoints matter on this sweep


def test_two_runs_files_of_one_name_are_both_replayed(bench, capsys, tmp_path):
    """Every example sweep is a runs.csv: `--runs a/runs.csv --runs b/runs.csv` replayed only b,
    under the name 'runs', and said nothing of a."""
    for folder, recipes in (("a", {"x": 2, "y": 2}), ("b", {"x": 3, "y": 3, "z": 1})):
        (tmp_path / folder).mkdir()
        seeds_table(recipes).to_csv(tmp_path / folder / "runs.csv", index=False)
    trainer = tmp_path / "trainer.csv"
    seeds_table({"x": 1, "y": 1}).to_csv(trainer, index=False)
    argv = ["--quick", "--no-synthetic", "--policies", "no_stopping", "--trainer-sweep", str(trainer),
            "--runs", str(tmp_path / "a" / "runs.csv"), "--runs", str(tmp_path / "b" / "runs.csv")]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "== runs: 4 runs" in out and "== b/runs: 7 runs" in out
    assert "== every sweep (3)" in out
    assert bench.runs_sweep_name(tmp_path / "a" / "runs.csv", {"runs", "a/runs"}) == "a/runs_2"
    seeds_table({"x": 1}).to_csv(tmp_path / "table1.csv", index=False)  # a synthetic sweep's name is taken too
    assert bench.runs_sweep_name(tmp_path / "table1.csv", set(bench.SYNTHETIC_NAMES)) == f"{tmp_path.name}/table1"


def test_command_latency_does_not_time_a_command_that_failed(tmp_path):
    """command_latency.py timed each command without looking at its exit status: a command that
    crashed on the way (a renamed flag, a saved fit it could not read) was printed as a fast answer."""
    with benchmark_module("command_latency.py") as latency:
        with pytest.raises(RuntimeError, match="exited 2, not 0"):
            latency.seconds_to_answer(["predict", str(tmp_path / "no_fit"), "--compute", "1e12"], preload="")
        commands = latency.commands(tmp_path)
        assert set(latency.EXPECTED_EXIT) <= set(commands)
        # the rejected table is refused as it should be, and that is timed
        assert latency.seconds_to_answer(commands["fit, rejected table"], preload="", expect=2) > 0


def test_convergence_before_side_leaves_out_every_try_after_the_retries(monkeypatch):
    """convergence.py's 'before' is a fit with extend_if_flagged=False, which skips both the longer
    chains and the try with every level non-centred; only the longer try's sampling was taken off,
    so 'before' was charged the non-centred try and the compiles of both. Its verdict is the fit's
    before whichever of the two ran first."""
    with benchmark_module("convergence.py") as convergence:
        info = {"longer": {"sample_seconds": 30.0, "compile_seconds": 5.0, "problems_before": ["R-hat 1.020"]},
                "noncentred": {"sample_seconds": 10.0, "compile_seconds": 20.0, "problems_before": ["R-hat 1.015"]}}
        assert convergence.later_tries_seconds(info) == pytest.approx(65.0)
        assert convergence.later_tries_seconds({"retry": {"sample_seconds": 9.0}}) == 0.0  # the retries are 'before'

        class Report:
            def problems(self):
                return []

            def __str__(self):
                return "converged"

        class Fitted:
            fit_info_ = info

            def __init__(self, **settings):
                pass

            def fit(self, runs, **kwargs):
                return self

            def diagnostics(self):
                return Report()

            def sampling_tries(self):
                return ""

        monkeypatch.setattr(convergence, "ScalingForecaster", Fitted)
        row = convergence.fit_once(None, seed=0, sampler=None)
        assert row["before"] == ["R-hat 1.020"] and row["after"] == []
        assert row["before_seconds"] == pytest.approx(row["seconds"] - 65.0)
        # a centred try diverged, so every level non-centred ran first: 'before' is the fit before it
        info["noncentred"]["before_longer"] = True
        assert convergence.fit_once(None, seed=0, sampler=None)["before"] == ["R-hat 1.015"]
        # the runs' starts centred comes before both, and extend_if_flagged=False skips it too
        info["centred_starts"] = {"sample_seconds": 7.0, "compile_seconds": 4.0, "problems_before": ["R-hat 1.030"]}
        row = convergence.fit_once(None, seed=0, sampler=None)
        assert row["before"] == ["R-hat 1.030"]
        assert row["before_seconds"] == pytest.approx(row["seconds"] - 76.0)
        # unless every level non-centred came straight after a diverged first try: it came first of all
        info["noncentred"]["after_first_try"] = True
        assert convergence.fit_once(None, seed=0, sampler=None)["before"] == ["R-hat 1.015"]


@pytest.mark.parametrize("steps", ["2", "3", "0"])
def test_trainer_gpu_refuses_a_step_count_it_cannot_time_before_any_run(steps, capsys):
    """--steps 2 trained on the CPU, then crashed (StatisticsError: no step after the first round
    to time) before the GPU run; an odd count failed in make_config. Both cost lent GPU time."""
    with benchmark_module("trainer_gpu.py") as trainer_gpu:
        with pytest.raises(SystemExit) as exit_info:
            trainer_gpu.main(["--steps", steps])
    assert exit_info.value.code == 2 and "--steps must be an even number of at least 4" in capsys.readouterr().err


GPU_CHECK = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.sh"


def test_gpu_check_help_prints_its_usage_and_runs_nothing(tmp_path):
    """`bash benchmarks/gpu_check.sh --help` took --help for OUT_DIR: mkdir printed its own help, then
    every part ran anyway, and tee refused to write its logs to '--help/gpu_tests.log'."""
    done = subprocess.run(["bash", str(GPU_CHECK), "--help"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "bash benchmarks/gpu_check.sh OUT_DIR [PYTHON]" in done.stdout and "mkdir" not in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_gpu_check_without_cuda_refuses_before_running_anything(tmp_path):
    """On a machine (or a Python) without CUDA it ran every part for half a minute: the GPU tests all
    skipped, which read as passing, before the timing and the sweep failed; on a lent GPU machine
    with a CPU-only torch that was device time spent on nothing."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: the refusal is for one without")
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(GPU_CHECK), str(out), sys.executable], cwd=GPU_CHECK.parents[1],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "sees no CUDA device" in done.stderr and "nothing was run" in done.stderr
    assert not out.exists() and "test session starts" not in done.stdout


def test_the_verdict_claims_only_the_baselines_it_was_compared_with(bench):
    """--policies forecast printed 'better than median and successive halving' with neither replayed."""
    ours = {"compute_saved": 0.6, "regret": 0.0}
    assert "better than" not in bench.verdict({"forecast": ours})
    one = bench.verdict({"forecast": ours, "median": {"compute_saved": 0.2, "regret": 0.0}})
    assert "better than median on compute or regret" in one and "successive" not in one
    both = bench.verdict({"forecast": ours, "median": {"compute_saved": 0.2, "regret": 0.0},
                          "successive_halving": {"compute_saved": 0.5, "regret": 0.01}})
    assert "better than median and successive halving on compute or regret" in both


def test_the_jitter_benchmark_reads_saved_fits_and_says_how_far_they_agree(small_sweep, tmp_path, capsys):
    """benchmarks/fit_jitter.py on two fast fits of one table with other seeds: it reads both at one
    budget, prints the spread beside the standard errors decide() states, and exits 0 because each
    fit gives identical numbers when asked twice."""
    import warnings

    from forecast import ScalingForecaster

    paths = []
    for seed in (0, 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fc = ScalingForecaster(mode="fast").fit(small_sweep, random_seed=seed, progress=False)
        paths.append(str(fc.save(tmp_path / f"fit{seed}.nc")))
    with benchmark_module("fit_jitter.py") as jitter:
        assert jitter.main(["--fits", *paths]) == 0
    out = capsys.readouterr().out
    assert out.count("identical when asked twice: True") == 2 and "2 fits" in out
    assert "p_best" in out and "expected" in out and "sd / mcse" in out
    assert "leaders: [" in out and "identical when asked twice: 2 of 2" in out


def _bad_outputs(tmp_path):
    """Output paths a benchmark cannot write: under a file, a folder, in a folder it may not write."""
    a_file = tmp_path / "a_file"
    a_file.write_text("x\n")
    (tmp_path / "a_folder").mkdir()
    read_only = tmp_path / "read_only"
    read_only.mkdir()
    read_only.chmod(0o500)
    cases = {"under a file": (str(a_file / "out.json"), "is a file"),
             "a folder": (str(tmp_path / "a_folder"), "is a folder")}
    if not os.access(read_only, os.W_OK):  # root writes anywhere
        cases["read-only folder"] = (str(read_only / "out.json"), "cannot write in")
    return cases


def _no_work(*args, **kwargs):
    raise AssertionError("the benchmark started its work before checking where its results go")


def test_early_stop_refuses_a_json_it_cannot_write_before_any_replay(bench, tmp_path, monkeypatch, capsys):
    """--json was written plainly at the very end: a path under a file, a folder, a read-only folder
    or the sweep it replays failed (or overwrote that sweep) only after 15-25 minutes of replays."""
    trainer, other = tmp_path / "trainer.csv", tmp_path / "other.csv"
    for sweep in (trainer, other):
        seeds_table({"x": 2, "y": 2}).to_csv(sweep, index=False)
    monkeypatch.setattr(bench, "load_runs", _no_work)
    monkeypatch.setattr(bench, "backtest", _no_work)
    cases = _bad_outputs(tmp_path)
    cases["the trainer sweep it reads"] = (str(trainer), "input read from")
    cases["a --runs sweep it reads"] = (str(other), "input read from")
    for json_path, message in cases.values():
        with pytest.raises(SystemExit) as exit_info:
            bench.main(["--quick", "--no-synthetic", "--policies", "no_stopping", "--trainer-sweep", str(trainer),
                        "--runs", str(other), "--json", json_path])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "--json" in err and message in err
    assert trainer.read_text().startswith("run_id,recipe") and other.read_text().startswith("run_id,recipe")


def _write_half_then_stop(monkeypatch):
    """Path.write_text that writes half its text, then is stopped (Ctrl-C, a kill) mid-write."""
    from pathlib import Path

    def write_half(self, data, *args, **kwargs):
        with open(self, "w", encoding="utf-8") as handle:
            handle.write(data[: len(data) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", write_half)


def test_early_stop_json_stopped_while_written_keeps_the_old_results(bench, tmp_path, monkeypatch):
    """A run stopped while writing --json left half a JSON file in place of the last results."""
    trainer = tmp_path / "trainer.csv"
    seeds_table({"x": 1, "y": 1}).to_csv(trainer, index=False)
    results = tmp_path / "results.json"
    results.write_text('{"old": 1}\n')
    _write_half_then_stop(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        bench.main(["--quick", "--no-synthetic", "--policies", "no_stopping", "--trainer-sweep", str(trainer),
                    "--json", str(results)])
    assert results.read_text() == '{"old": 1}\n'
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".results")] == []  # no temporary file left


def test_extrapolation_refuses_a_csv_it_cannot_write_before_any_fit(tmp_path, monkeypatch, capsys):
    """--csv was written at the end of the fits: a bad path failed after them, and --csv naming the
    shipped trainer sweep the benchmark reads overwrote it with the results."""
    with benchmark_module("extrapolation.py") as extrapolation:
        monkeypatch.setattr(extrapolation, "datasets", _no_work)
        cases = _bad_outputs(tmp_path)
        cases["the shipped sweep"] = (str(extrapolation.TRAINER_SWEEP), "input read from")
        for csv_path, message in cases.values():
            with pytest.raises(SystemExit) as exit_info:
                extrapolation.main(["--quick", "--csv", csv_path])
            assert exit_info.value.code == 2
            err = capsys.readouterr().err
            assert "--csv" in err and message in err


def test_extrapolation_csv_stopped_while_written_keeps_the_old_table(tmp_path, monkeypatch):
    """A run stopped while writing --csv left a truncated table in place of the last one."""
    with benchmark_module("extrapolation.py") as extrapolation:
        monkeypatch.setattr(extrapolation, "datasets", lambda quick: iter([("tiny", None)]))
        row = {"fraction": 0.25, "fit_seconds": 1.0, "verdict": "converged", "tries": ""}
        monkeypatch.setattr(extrapolation, "evaluate", lambda runs, fraction, **kwargs: pd.DataFrame([row] * 50))

        def write_half(self, path, **kwargs):
            with open(path, "w", encoding="utf-8") as handle:
                handle.write("dataset,fraction\ntiny,0.")
            raise KeyboardInterrupt

        monkeypatch.setattr(pd.DataFrame, "to_csv", write_half)
        table = tmp_path / "results.csv"
        table.write_text("old,table\n1,2\n")
        with pytest.raises(KeyboardInterrupt):
            extrapolation.main(["--quick", "--csv", str(table)])
        assert table.read_text() == "old,table\n1,2\n"


def test_fit_jitter_refuses_a_save_dir_it_cannot_write_before_any_fit(tmp_path, monkeypatch, capsys):
    """--save-dir was first used after the first fit (2-4 min): a file, a path under a file or a
    read-only folder failed there; with --fits it was ignored without a word."""
    a_file = tmp_path / "a_file"
    a_file.write_text("x\n")
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    (run_folder / "evals.jsonl").write_text("")
    read_only = tmp_path / "read_only"
    read_only.mkdir()
    read_only.chmod(0o500)
    cases = [(["--save-dir", str(a_file)], "is a file"), (["--save-dir", str(a_file / "fits")], "is a file"),
             (["--save-dir", str(run_folder)], "run folder"),
             (["--fits", str(tmp_path / "a.nc"), "--save-dir", str(tmp_path / "fits")], "nothing would be saved")]
    if not os.access(read_only, os.W_OK):
        cases.append((["--save-dir", str(read_only)], "cannot write in"))
    with benchmark_module("fit_jitter.py") as jitter:
        monkeypatch.setattr(jitter, "load_runs", _no_work)
        monkeypatch.setattr(jitter.ScalingForecaster, "load", _no_work)
        for argv, message in cases:
            with pytest.raises(SystemExit) as exit_info:
                jitter.main(["--seeds", "0,1", *argv])
            assert exit_info.value.code == 2
            assert message in capsys.readouterr().err


def test_the_honesty_lines_refit_at_the_main_lines_checkpoints(bench, monkeypatch):
    """--check-growth reached the policy lines and the baselines' trade-offs, but the honesty lines
    ("how honest ours' forecasts are where the decisions are made") refit at checkpoints 1.25x
    apart whatever the flag said, so with --check-growth 1.1 they judged forecasts at other points
    than the decisions."""
    import forecast.early_stop as early_stop_module
    from forecast import load_runs
    from forecast.backtest import BacktestConfig, checkpoint_schedule

    runs = load_runs(bench.TRAINER_SWEEP)
    refit_at = []

    class Refitted(Exception):
        pass

    def record(revealed, **kwargs):
        refit_at.append(float(revealed["compute"].max()))
        raise Refitted

    monkeypatch.setattr(early_stop_module, "fit_for_advice", record)
    config = BacktestConfig(check_growth=1.1)
    with pytest.raises(Refitted):
        bench.advice_calibration(runs, checks=(6,), config=config)
    schedule = checkpoint_schedule(runs, min_evals=config.min_evals, growth=1.1)
    default = checkpoint_schedule(runs, min_evals=config.min_evals, growth=BacktestConfig().check_growth)
    assert schedule[6] != default[6]
    assert refit_at == [float(runs.loc[runs["compute"] <= schedule[6], "compute"].max())]


def test_fit_speed_names_the_tries_a_timed_fit_took(monkeypatch):
    """A cold fit that needed the longer try (4000 draws) took 33.6 s where the record's one-try fit
    took 21.6 s, and fit_speed.py printed only the time and the verdict: nothing said the timing
    held a second sampling."""
    class Fit:
        def __init__(self, tries):
            self.tries = tries

        def sampling_tries(self):
            return self.tries

    with benchmark_module("fit_speed.py") as fit_speed:
        assert fit_speed.tries_note(Fit(None)) == ""
        note = fit_speed.tries_note(Fit("divergences by try: 4 at 0.9; 0 at 0.97. still flagged, so sampled again"))
    assert note.startswith("\n") and "tries: divergences by try: 4 at 0.9" in note


def _curve_rows(**columns) -> pd.DataFrame:
    """benchmarks/extrapolation.py's per-curve rows, one dataset and fraction, the given columns."""
    return pd.DataFrame({"dataset": "hand-made", "fraction": 0.25, "oracle": np.nan, **columns})


def test_extrapolation_summary_scores_hand_made_curves():
    """Kills the mutants: `>` at the interval's lower end, ours/ls inverted, asymptote coverage
    counting the runs whose true asymptote is not known as misses, `<` at its upper end. Three curves whose final is 0.5:
    the first two on an end of ours' interval (inside), the third outside it; ours 0.01 off, least
    squares 0.03 off, the last value 0.05 off; asymptotes known for two runs, one inside."""
    results = _curve_rows(
        y_final=[0.5, 0.5, 0.5], ours=[0.51, 0.49, 0.51], least_squares=[0.53, 0.47, 0.53], last_value=[0.45, 0.55, 0.45],
        ours_lo=[0.5, 0.4, 0.55], ours_hi=[0.6, 0.5, 0.6],
        A_true=[0.7, np.nan, 0.7], A_ours=[0.65, 0.7, 0.76], A_ours_lo=[0.6, 0.6, 0.75], A_ours_hi=[0.7, 0.8, 0.8],
        A_least_squares=[0.74, 0.7, 0.78],
    )
    with benchmark_module("extrapolation.py") as extrapolation:
        row = extrapolation.summarise(results).iloc[0]
        assert math.isnan(extrapolation.ratio(0.01, 0.0))
    assert row["curves"] == 3 and row["coverage90"] == pytest.approx(2 / 3)
    assert row["mae_ours"] == pytest.approx(0.01) and row["mae_least_squares"] == pytest.approx(0.03)
    assert row["ours/ls"] == pytest.approx(1 / 3) and row["ours/last"] == pytest.approx(0.2)
    assert row["width90"] == pytest.approx((0.1 + 0.1 + 0.05) / 3)
    assert row["A_coverage90"] == pytest.approx(0.5)  # of the two runs whose asymptote is known, the first on its upper end
    assert row["A_mae_ours"] == pytest.approx(0.055) and row["A_mae_ls"] == pytest.approx(0.06)


def test_extrapolation_keeps_runs_with_three_evaluations_up_to_the_cut():
    """Kills the mutant keeping only runs with more than 3 evaluations before the cut."""
    runs = pd.DataFrame({"run_id": ["a"] * 8 + ["b"] * 4, "compute": [*range(1, 9), 2.0, 4.0, 6.0, 8.0],
                         "metric": np.linspace(0.1, 0.5, 12)})
    with benchmark_module("extrapolation.py") as extrapolation:
        kept, final = extrapolation.truncate(runs, 0.375)  # a keeps 1, 2, 3; b only 2: left out
    assert kept["compute"].tolist() == [1.0, 2.0, 3.0] and set(kept["run_id"]) == {"a"}
    assert final.loc["a", "compute"] == 8 and final.loc["b", "compute"] == 8


class _KnownFit:
    """ScalingForecaster's stand-in for benchmarks/extrapolation.py: each run's predictive draws at
    its final compute are (0, 0.01, ..., 1) squared (5% quantile 0.0025, median 0.25, mean 0.335,
    95% quantile 0.9025) and its asymptote's quantiles 0.6, 0.7, 0.8."""

    horizon_sd = None

    def __init__(self, **settings):
        pass

    def fit(self, kept, **how):
        self.run_ids, self.fitted_with = sorted(kept["run_id"].unique()), how
        return self

    def asymptote(self):
        return pd.DataFrame({"level": "run", "run_id": self.run_ids, "q05": 0.6, "q50": 0.7, "q95": 0.8})

    def sample_curves(self, compute, **how):
        return ((np.arange(101) / 100) ** 2)[:, None]

    def diagnostics(self):
        return type("Report", (), {"converged": True, "__str__": lambda self: "converged"})()

    def sampling_tries(self):
        return ""


def test_extrapolation_reads_ours_90_percent_interval_median_and_asymptote_of_known_draws(monkeypatch):
    """Kills the mutants: the 2.5-97.5% interval, the mean as ours' point forecast, the asymptote's
    median as its lower end, the smallest final compute as the planned budget."""
    runs = pd.DataFrame({"run_id": "a", "recipe": "a", "compute": [1.0, 2.0, 3.0, 4.0, 8.0],
                         "metric": [0.1, 0.2, 0.25, 0.28, 0.3]})
    fits = []
    with benchmark_module("extrapolation.py") as extrapolation:
        monkeypatch.setattr(extrapolation, "ScalingForecaster", lambda **settings: fits.append(_KnownFit()) or fits[-1])
        row = extrapolation.evaluate(runs, 0.5).iloc[0]
        longer = pd.concat([runs, runs.assign(run_id="b", compute=2 * runs["compute"])], ignore_index=True)
        extrapolation.evaluate(longer, 0.5, planned=True)
    assert fits[0].fitted_with["horizon"] is None and fits[1].fitted_with["horizon"] == 16.0  # the largest final compute
    assert row["ours_lo"] == pytest.approx(0.0025) and row["ours_hi"] == pytest.approx(0.9025)
    assert row["ours"] == pytest.approx(0.25) and row["y_final"] == 0.3 and row["last_value"] == 0.28
    assert (row["A_ours_lo"], row["A_ours"], row["A_ours_hi"]) == pytest.approx((0.6, 0.7, 0.8))


def _jitter_measured(label, p_best, p_best_mcse):
    table = pd.DataFrame({"recipe": ["a"], "p_best": [p_best], "p_best_mcse": [p_best_mcse], "expected": [0.5],
                          "expected_mcse": [0.01], "compute_q50": [1e6]}).set_index("recipe")
    return {"label": label, "identical_twice": True, "leader": "a", "runner_up": None, "runner_up_group": (),
            "headline": "a leads", "converged": True, "diagnostics": "converged", "table": table,
            "A_q95": pd.Series({"a": 0.7})}


def test_the_jitter_spread_is_the_sample_sd_across_fits_over_the_mean_standard_error_said(monkeypatch, capsys):
    """Kills the mutants: the spread with ddof=0, sd / mcse inverted, the largest standard error said
    instead of their mean. P(best) 0.2, 0.4, 0.6 with standard errors 0.05, 0.1, 0.15: sd 0.2, said 0.1."""
    measured = iter([_jitter_measured("one", 0.2, 0.05), _jitter_measured("two", 0.4, 0.1),
                     _jitter_measured("three", 0.6, 0.15)])
    with benchmark_module("fit_jitter.py") as jitter:
        saved = type("SavedFit", (), {"runs_": None})()
        monkeypatch.setattr(jitter, "fits", lambda args: iter([(label, saved) for label in ("one", "two", "three")]))
        monkeypatch.setattr(jitter, "default_budget", lambda runs: 1e6)
        monkeypatch.setattr(jitter, "default_target", lambda fc: 0.5)
        monkeypatch.setattr(jitter, "measure", lambda label, fc, budget, target: next(measured))
        assert jitter.main(["--fits", "one.nc", "two.nc", "three.nc"]) == 0
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["a"]}
    assert rows[("a", "p_best")] == ["0.2", "0.6", "0.2", "0.1", "2"]  # min, max, sd across fits, mcse said, sd / mcse
    assert rows[("a", "expected")] == ["0.5", "0.5", "0", "0.01", "0"]
