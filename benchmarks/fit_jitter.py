"""Monte Carlo jitter between fits: one run table fitted with several random seeds, as a planner
who refits the same sweep would see it (Prophet's users complain of numbers that move between runs).

At the page's default budget and target (forecast.report.default_budget / default_target), per fit:
the recommended recipe, the runner-up, each recipe's P(best) and expected metric at the budget with
the Monte Carlo standard errors `forecast decide` prints beside them, A's 95% quantile and the
compute to the target; then the spread of each across fits beside those standard errors, and
whether the recommendation's leader (and its wording but for the numbers) changed. One fit asked
twice must give identical numbers (forecasts are reproducible for one fit).

    python benchmarks/fit_jitter.py                          # 4 default (full) fits, 2-4 min each: 8-16 min
    python benchmarks/fit_jitter.py --seeds 0,1              # quicker: 2 fits, 4-8 min
    python benchmarks/fit_jitter.py --seeds 0,1,2,3,4,5,6,7  # the README's row: 16-32 min
    python benchmarks/fit_jitter.py --fits a.nc b.nc ...     # fits saved before (fc.save)
    python benchmarks/fit_jitter.py --seeds 0,1 --save-dir out/jitter_fits
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.provenance import print_provenance  # noqa: E402
from forecast import ScalingForecaster, load_runs  # noqa: E402
from forecast.cli import BadInput, _check_output_file, _check_parent_folders, _check_writable  # noqa: E402
from forecast.decisions import _level_with, decide  # noqa: E402
from forecast.report import default_budget, default_target  # noqa: E402

RUNS = ROOT / "examples" / "trainer_sweep" / "runs.csv"


def fits(args):
    """(label, forecaster) per saved fit or per seed, fitted one after another."""
    if args.fits:
        for path in args.fits:
            yield path, ScalingForecaster.load(path)
        return
    runs = load_runs(args.runs)
    for seed in args.seeds:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # each fit's flags are printed from diagnostics() below
            fc = ScalingForecaster().fit(runs, random_seed=seed, progress=False)
        print(f"seed {seed}: fitted in {time.perf_counter() - start:.0f} s", flush=True)
        if args.save_dir:
            fc.save(Path(args.save_dir) / f"fit_seed{seed}.nc")
        yield f"seed {seed}", fc


def check_save_dir(save_dir, seeds) -> None:
    """--save-dir must be a folder this process can write, with no folder where a fit_seedN.nc goes
    and not a trainer's run folder: said before the first fit, not by a traceback after it (BadInput)."""
    if save_dir is None:
        return
    folder = Path(save_dir)
    if folder.exists() and not folder.is_dir():
        raise BadInput(f"--save-dir {save_dir}: is a file; --save-dir names a folder (fit_seedN.nc go in it)")
    _check_parent_folders(folder, "--save-dir")
    if folder.is_dir():
        _check_writable(folder, folder, "--save-dir")
    for seed in seeds:
        if (folder / f"fit_seed{seed}.nc").is_dir():
            raise BadInput(f"--save-dir {save_dir}: {folder / f'fit_seed{seed}.nc'} is a folder, so that fit cannot be saved there")
        _check_output_file(folder / f"fit_seed{seed}.nc", "--save-dir", f"fit_seed{seed}.nc")


def measure(label, fc, budget, target) -> dict:
    result = decide(fc, budget, target=target)
    again = decide(fc, budget, target=target)
    table = result.table.set_index("recipe")
    asymptotes = fc.asymptote().query("level == 'recipe'").set_index("recipe")
    return {
        "label": label,
        "identical_twice": result.table.equals(again.table) and result.recommendation == again.recommendation,
        "leader": result.table.iloc[0].recipe,
        "runner_up": result.table.iloc[1].recipe if len(result.table) > 1 else None,
        # the headline (first sentence) without its numbers: the verdict and the leader
        "headline": re.sub(r"\d+(\.\d+)?", "#", result.recommendation.split(". ")[0]),
        # the runner-up and the recipes the text calls level with it within Monte Carlo noise
        "runner_up_group": tuple(sorted([result.table.iloc[1].recipe, *_level_with(result.table.iloc[2:], result.table.iloc[1])]))
        if len(result.table) > 1 else (),
        "converged": fc.diagnostics().converged,
        "diagnostics": str(fc.diagnostics()).splitlines()[0],
        "table": table,
        "A_q95": asymptotes["q95"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default=str(RUNS), help="run table (default: the shipped trainer sweep)")
    parser.add_argument("--seeds", type=lambda s: [int(v) for v in s.split(",")], default=[0, 1, 2, 3],
                        help="random seeds of the fits (comma list; default 0,1,2,3)")
    parser.add_argument("--fits", nargs="+", help="saved fits instead of fitting (--seeds is then ignored)")
    parser.add_argument("--save-dir", help="save each fit there as fit_seedN.nc")
    args = parser.parse_args(argv)
    if args.save_dir and args.fits:
        parser.error("--save-dir saves the fits made from --seeds; with --fits nothing is fitted, so nothing would be saved")
    try:
        check_save_dir(args.save_dir, args.seeds)
    except BadInput as error:
        parser.error(str(error))
    print_provenance("benchmarks/fit_jitter.py", vars(args))

    measured, budget, target = [], None, None
    for label, fc in fits(args):
        if budget is None:  # the first fit's page settings for all, so every fit is read at one budget
            budget, target = default_budget(fc.runs_), default_target(fc)
        measured.append(measure(label, fc, budget, target))
        m = measured[-1]
        top = m["table"].loc[m["leader"]]
        print(f"{m['label']}: leader {m['leader']} P(best) {top.p_best:.3f} +- {top.p_best_mcse:.3f}, expected "
              f"{top.expected:.4f} +- {top.expected_mcse:.4f}; runner-up {m['runner_up']}; identical when asked twice: "
              f"{m['identical_twice']}; {m['diagnostics']}", flush=True)
    print(f"\nbudget {budget:.4g}, target {target:g}, {len(measured)} fits")

    rows = []
    for recipe in measured[0]["table"].index:
        tables = [m["table"].loc[recipe] for m in measured]
        for name, mcse in (("p_best", "p_best_mcse"), ("expected", "expected_mcse"), ("compute_q50", None)):
            values = np.array([t[name] for t in tables], dtype=float)
            said = np.mean([t[mcse] for t in tables]) if mcse else np.nan
            spread = values.std(ddof=1) if len(values) > 1 and np.isfinite(values).all() else np.nan
            rows.append({"recipe": recipe, "quantity": name, "min": values.min(), "max": values.max(),
                         "sd across fits": spread, "mcse said": said, "sd / mcse": spread / said if mcse else np.nan})
        values = np.array([m["A_q95"].loc[recipe] for m in measured])
        rows.append({"recipe": recipe, "quantity": "A q95", "min": values.min(), "max": values.max(),
                     "sd across fits": values.std(ddof=1) if len(values) > 1 else np.nan, "mcse said": np.nan,
                     "sd / mcse": np.nan})
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.4g}"))

    leaders = [m["leader"] for m in measured]
    print(f"\nleaders: {leaders}")
    print(f"runner-ups: {[m['runner_up'] for m in measured]}")
    print(f"runner-up with the recipes it is said to be level with: {sorted({m['runner_up_group'] for m in measured})}")
    print(f"headline the same but for its numbers in every fit: {len({m['headline'] for m in measured}) == 1} "
          f"({measured[0]['headline']!r})")
    print(f"converged: {sum(m['converged'] for m in measured)} of {len(measured)}; "
          f"identical when asked twice: {sum(m['identical_twice'] for m in measured)} of {len(measured)}")
    return 0 if all(m["identical_twice"] for m in measured) else 1


if __name__ == "__main__":
    raise SystemExit(main())
