"""`make demo`: the whole planning loop on shipped data, end to end, in a few minutes on a laptop.

    python -m forecast.demo            # fit the shipped sweep, print the table, write the report
    python -m forecast.demo --live     # first run a short live trainer sweep, then forecast it

Data: the shipped trainer sweep (examples/trainer_sweep/runs.csv) when it is there, else the
synthetic sweep built from the ScaleRL paper's Table 1 (examples/synthetic_table1/runs.csv),
which every output labels as synthetic. Outputs go to demo_out/: report.html (one
self-contained page), fan_chart.png (and fan_chart_2.png, ... for a sweep of more than 9
recipes), forest.png, summary.json and fit.nc (the saved fit).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAINER_SWEEP = ROOT / "examples" / "trainer_sweep" / "runs.csv"
SYNTHETIC_EXAMPLE = ROOT / "examples" / "synthetic_table1" / "runs.csv"

# How examples/synthetic_table1/runs.csv was made (`python -m forecast.demo --write-synthetic`):
# every Table 1 recipe, 3 seeds, 24 evaluations from 100 to 16,080 GPU-hours (the paper compared
# recipes at ~16k GPU-hours), binomial noise of a 16k-sample validation set, seed-to-seed spread
# and slow wander; one run in ten declines late, as real runs sometimes do.
SYNTHETIC_SPEC = dict(n_seeds=3, n_points=24, compute_span=(0.06, 2.4), messy_fraction=0.1, rng=2025)

# The live sweep: recipes that differ in loss and aggregation, 2 seeds, short runs on CPU.
LIVE_PRESETS = "grpo,cispo,scalerl"
LIVE_SEEDS = "0,1"
LIVE_FLAGS = ("--max-steps", "200", "--eval-every", "10")
# What the live sweep took on 2 shared CPU cores (2026-12-05: 4.5 minutes, then a 3.5-minute fit), said
# before it starts, since nothing else says how long `make demo-live` will be quiet.
LIVE_SWEEP_MINUTES = "4-5"
FULL_FIT_MINUTES = "1.5-3"  # the demo's fit took 87-139 s for random seeds 0-3 (benchmarks/convergence.py --demo-chains)

# The late recipes of the synthetic sweep (C_mid near the end of the data) trade A against C_mid
# in the posterior, which cuts the effective sample size to ~15% of the draws; with the default
# 1000 draws per chain R-hat sat at the 1.01 limit. 2000 draws per chain gave R-hat 1.004 and bulk
# ESS ~600, so the demo's intervals are not noise. Sampling costs ~10 s more than the default.
DEMO_DRAWS = 2000
# Warm-up draws per chain. The shipped trainer sweep's recipes are so alike that its centred fit
# diverges at any target acceptance, and the forecaster falls back to non-centred forms
# (ScalingForecaster.fit). With the default 1000 warm-up draws that fit, with random seeds 0-5,
# was still flagged in 3 of 6 (two with 1 and 6 divergences): the step size and mass matrix were
# not yet adapted. With 2000, all 6 converged without a divergence (2026-12-02, with the recipe
# level non-centred; since the likelihood became exact, with every level non-centred).
DEMO_TUNE = 2000
# How the demo chooses what it is not told, said both by --help and beside the chosen numbers, so the two
# cannot drift apart (the help once left out the rounding the printed reason gave).
BUDGET_RULE = "4x the largest observed compute"
TARGET_RULE = "median of the recipes' forecast asymptotes, rounded down to 0.01"  # report.default_target


# ----------------------------------------------------------------------------- data


def write_synthetic_example(path=SYNTHETIC_EXAMPLE) -> Path:
    """Regenerate the shipped synthetic sweep (deterministic: fixed seed)."""
    from .data import ENDED_COLUMN
    from .io import atomic_write_text
    from .synthetic import simulate_sweep

    runs = simulate_sweep(**SYNTHETIC_SPEC)
    # Rounded so the committed CSV stays small; metric keeps its binomial resolution (1/16000).
    runs = runs.round({"compute": 1, "metric": 6, "true_metric": 5, "true_A": 5, "true_R0": 5})
    # Every simulated run has all its evaluations: it has ended, as the table says where a trainer's
    # sweep says it (after the run-format columns). Without it the demo's stop advice took the 30
    # runs for runs in flight that could go on to the budget.
    runs.insert(runs.columns.get_loc("step") + 1, ENDED_COLUMN, "finished")
    atomic_write_text(path, runs.to_csv(index=False))
    return Path(path)


def shown_path(path) -> Path:
    """Relative to the working directory when inside it: provenance that reads the same on
    every machine that runs `make demo` from the repository root."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def subset_runs(runs, n_recipes: int = 3, n_runs: int = 2):
    """A small slice of a sweep for quick looks and the notebooks' test mode: the best, a middle
    and the worst recipe by final metric (so the slice still has a spread), n_runs runs each."""
    import numpy as np

    final = runs.sort_values("compute").groupby("recipe")["metric"].apply(lambda m: m.tail(3).mean())
    ranked = list(final.sort_values(ascending=False).index)
    picks = [ranked[int(i)] for i in np.unique(np.linspace(0, len(ranked) - 1, min(n_recipes, len(ranked))).round())]
    keep = [run for recipe in picks for run in sorted(runs.loc[runs["recipe"] == recipe, "run_id"].unique())[:n_runs]]
    return runs[runs["run_id"].isin(keep)].reset_index(drop=True)


def default_runs_path() -> Path:
    """The trainer's shipped sweep if it is there (real runs beat synthetic ones), else Table 1."""
    return TRAINER_SWEEP if TRAINER_SWEEP.exists() else SYNTHETIC_EXAMPLE


def run_live_sweep(folder: Path, *, workers: int = 2) -> Path:
    """A short real sweep with trainer_minimal (a subprocess, as a user would run it)."""
    command = [
        sys.executable, "-m", "trainer_minimal", "sweep",
        "--presets", LIVE_PRESETS, "--seeds", LIVE_SEEDS, "--out", str(folder),
        "--workers", str(workers), "--slim", *LIVE_FLAGS,
    ]  # fmt: skip
    # said first: the sweep prints nothing while a run trains (over a minute each), and then the fit is silent too
    n_runs = len(LIVE_PRESETS.split(",")) * len(LIVE_SEEDS.split(","))
    print(f"live sweep: {n_runs} runs ({LIVE_PRESETS} x seeds {LIVE_SEEDS}, {LIVE_FLAGS[1]} steps each, {workers} at a "
          f"time), about {LIVE_SWEEP_MINUTES} minutes on 2 CPU cores; then the fit", flush=True)
    print("live sweep:", shlex.join(command), flush=True)  # the interpreter too, so the line can be pasted
    subprocess.run(command, check=True)
    table = folder / "runs.csv"
    if not table.exists():
        raise SystemExit(f"the live sweep finished but wrote no {table}")
    return table


# ----------------------------------------------------------------------------- the demo


def fit(runs, *, fast: bool, seed: int):
    """Full NUTS with DEMO_DRAWS and DEMO_TUNE (or the fast mode for tests); non-convergence goes on the page."""
    from .forecaster import ScalingForecaster
    from .inference import SamplerSettings

    sampler = SamplerSettings.fast() if fast else SamplerSettings(draws=DEMO_DRAWS, tune=DEMO_TUNE)
    fc = ScalingForecaster(mode="fast" if fast else "nuts", sampler=sampler)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the report and the printed summary show convergence
        fc.fit(runs, random_seed=seed, progress=sys.stderr.isatty())
    return fc


def write_outputs(fc, data, out: Path) -> dict[str, Path]:
    """report.html (written by write_report), the chart PNGs, summary.json and the fit itself
    (fit.nc, so `forecast report/decide demo_out` can reuse it without refitting), all atomically."""
    from .io import atomic_path, atomic_write_json
    from .report import report_summary

    paths = {"report": out / "report.html"}
    # every fan-chart image the report holds (a sweep of more than 9 recipes gets fan_chart_2, ...),
    # as the page shows them: fan_chart.png alone held only the first 9 recipes' panels
    for name in [key for key in data.figures if key.startswith("fan_chart")] + ["forest"]:
        paths[name] = out / f"{name}.png"
        with atomic_path(paths[name]) as tmp:
            tmp.write_bytes(data.figures[name])
    paths["summary"] = out / "summary.json"
    atomic_write_json(paths["summary"], report_summary(data, paths["report"]))
    paths["fit"] = fc.save(out / "fit.nc")
    return paths


def parse_args(argv=None):
    # the CLI's parser: "--budget -1e12" and "-inf" reach the range check, not argparse's "expected one argument"
    from .cli import NumbersParser, _seed

    parser = NumbersParser(
        prog="python -m forecast.demo",
        description="End-to-end demo: fit the shipped sweep, print the recommendation table, write the report.",
    )
    data = parser.add_mutually_exclusive_group()  # --live forecasts its own sweep: a --runs beside it was ignored
    data.add_argument("--live", action="store_true", help="first run a short trainer_minimal sweep and forecast it")
    data.add_argument("--runs", type=Path, default=None, help="run table to use instead of the shipped sweep")
    parser.add_argument("--out", type=Path, default=Path("demo_out"), help="output folder (default demo_out)")
    parser.add_argument("--budget", type=float, default=None, help=f"default: {BUDGET_RULE}")
    parser.add_argument("--target", type=float, default=None, help=f"default: the {TARGET_RULE}")
    parser.add_argument("--seed", type=_seed, default=0)  # the CLI's: -1 named random_seed, no flag
    parser.add_argument("--fast", action="store_true", help="short chains (a quick look; used by the tests)")
    parser.add_argument("--write-synthetic", type=Path, default=None, metavar="PATH",
                        help="regenerate the synthetic Table 1 example at PATH and exit")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    """Exit codes as the CLI's: 0 ok, 2 bad input (a bad run table or option, an --out that refuses a file), 1 a
    failed sweep or write (its folder deleted meanwhile, a full disk)."""
    from .data import RunDataError

    args = parse_args(argv)
    try:
        if args.write_synthetic is not None:
            print(f"wrote {write_synthetic_example(args.write_synthetic)}")
            return 0
        return run_demo(args)
    except (RunDataError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as err:
        print(f"error: the live sweep failed (exit {err.returncode}): {' '.join(map(str, err.cmd))}", file=sys.stderr)
        return 1
    except OSError as err:  # an output that could not be written (demo_out deleted meanwhile, a full disk): a line
        from .cli import said_os_error

        if (code := said_os_error(err)) is None:
            raise
        return code


OUTPUT_NAMES = ("report.html", "fan_chart.png", "forest.png", "summary.json", "fit.nc")


def check_budget_and_target(args) -> None:
    """--budget and --target, checked as `forecast report` checks its own, before the fit (and a --live sweep):
    a --budget nan or --target 2 was refused only by the report after the fit, naming no flag. ValueError."""
    from .cli import BadInput, _positive_finite, _refuse_target_out_of_range

    if args.budget is not None and not _positive_finite(args.budget):
        raise ValueError(f"--budget must be finite and > 0, got {args.budget:g}")
    try:
        _refuse_target_out_of_range(args.target)
    except BadInput as err:
        raise ValueError(str(err)) from None


def check_out(out: Path, runs) -> None:
    """The output folder, checked before the fit (minutes), as `forecast fit --out` checks its own:
    not a file, nor under one, writable, and not a folder whose files would replace or become an
    input (a trainer's run folder holds its own summary.json; a fit.nc among the runs makes the
    folder read as a saved fit). ValueError says which."""
    from .cli import BadInput, _check_parent_folders, _check_writable, _holds_runs, _output_conflict

    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file; --out names a folder ({', '.join(OUTPUT_NAMES)} go in it)")
    try:
        _check_parent_folders(out, "--out")
        if out.is_dir():
            _check_writable(out, out, "--out")
    except BadInput as err:
        raise ValueError(str(err)) from None
    for name in OUTPUT_NAMES:
        if (out / name).is_dir():
            raise ValueError(f"--out {out}: {out / name} is a folder, so the demo's {name} cannot be written there")
        if conflict := _output_conflict(out / name, runs):
            raise ValueError(f"--out {out}: its {name} {conflict}; write the demo's outputs elsewhere")
    # its fit.nc beside the run table would make the folder read as that fit from then on; run logs
    # below --out are not refused: --live writes its own sweep there
    if runs is not None and (held := _holds_runs(out, runs, logs=False)):
        raise ValueError(f"--out {out}: {held}, and the demo's fit.nc there would make the folder read as that fit "
                         f"from then on; write the demo's outputs elsewhere, e.g. {out.resolve() / 'demo_out'}")


def run_demo(args) -> int:
    from .data import load_runs
    from .report import (
        COMMAND_SETTINGS,
        default_target,
        fmt_compute,
        is_synthetic,
        recipe_table_text,
        write_report,
    )

    start = time.perf_counter()
    check_budget_and_target(args)
    check_out(args.out, None if args.live else (args.runs or default_runs_path()))
    args.out.mkdir(parents=True, exist_ok=True)
    runs_path = run_live_sweep(args.out / "live_sweep") if args.live else (args.runs or default_runs_path())
    runs_path = shown_path(runs_path)
    runs = load_runs(runs_path)
    label = " (SYNTHETIC: simulated from ScaleRL Table 1 curves)" if is_synthetic(runs) else ""
    print(f"data: {runs_path}{label}: {runs['run_id'].nunique()} runs of {runs['recipe'].nunique()} recipes, "
          f"{len(runs)} evaluations", flush=True)
    how = ("fast mode: short chains, seconds" if args.fast else
           f"{DEMO_DRAWS} draws and {DEMO_TUNE} warm-up per chain, about {FULL_FIT_MINUTES} minutes on 2 CPU cores "
           "(longer when a try is flagged and sampled again)")
    print(f"fitting: {how}", flush=True)
    fit_start = time.perf_counter()
    fc = fit(runs, fast=args.fast, seed=args.seed)
    fit_seconds = time.perf_counter() - fit_start
    target = args.target if args.target is not None else default_target(fc)
    data = write_report(fc, args.out / "report.html", budget=args.budget, target=target, target_chosen=args.target is None,
                        inputs=[str(runs_path)], settings=COMMAND_SETTINGS)
    paths = write_outputs(fc, data, args.out)
    print(f"fit: {fit_seconds:.0f} s; {fc.diagnostics()}")
    if tries := fc.sampling_tries():  # a fit that needed more than one try says so
        print(f"     {tries}")
    why_budget = "" if args.budget is not None else f" ({BUDGET_RULE})"
    why_target = "" if args.target is not None else f" ({TARGET_RULE})"
    print(f"\nbudget {fmt_compute(data.budget)} {data.compute_unit}{why_budget}, target {target:g}{why_target}\n")
    print(recipe_table_text(data))
    print(f"\n=> {data.recommendation.headline}")
    for reason in data.recommendation.reasons:
        print(f"   - {reason}")
    # the page's warning banner (a budget far from the data), said on the terminal too, as `forecast report` says it
    from .cli import warn

    for message in data.warnings:
        warn(message)
    print()
    width = max(map(len, paths))  # fan_chart_2 and on are longer than the other names
    for name, path in paths.items():
        print(f"   {name:{width}s} {path}")
    print(f"done in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
