"""Extrapolation accuracy and honesty: forecast each curve's final value from its beginning.

Curves are truncated at 1/8 and 1/4 of their final compute (all runs of a sweep at once, as when
forecasting a sweep in flight); each method predicts the final observed evaluation:
  - last value:    carry the last observed value forward (the bar to beat on real curves);
  - least squares: the paper's per-run fit (forecast.baseline), point forecast;
  - ours:          the hierarchical Bayesian model, posterior predictive of that run (kind="run").
Prints MAE, and for ours the 90%-interval coverage and mean width, on the same curves, plus the
ratios the targets are stated in. Where a sweep knows each run's true asymptote (the synthetic
ones' true_A), also each run's asymptote: ours (the run's A, its median and 90% interval) against
least squares' A, by error, and the coverage of ours' interval. Data: synthetic sweeps shaped like ScaleRL's Table 1 (clean and
messy: early plateaus and late declines), and the trainer's shipped sweep when present.

    python benchmarks/extrapolation.py            # full: 6 default fits, 1-2 min each on 2 cores (6-12 min)
    python benchmarks/extrapolation.py --quick    # one synthetic sweep, one fraction: 1-2 min
    python benchmarks/extrapolation.py --horizon  # ours told the planned budget (fit(horizon=...))
    python benchmarks/extrapolation.py --fractions 0.25,1  # other cuts (1: the whole curves, asymptotes only)
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.provenance import print_provenance  # noqa: E402
from forecast import ScalingForecaster  # noqa: E402
from forecast.baseline import fit_run_least_squares, predict_least_squares  # noqa: E402
from forecast.cli import BadInput, _check_output_file  # noqa: E402
from forecast.data import load_runs  # noqa: E402
from forecast.io import atomic_path  # noqa: E402
from forecast.synthetic import simulate_sweep  # noqa: E402

warnings.filterwarnings("ignore")

TRAINER_SWEEP = ROOT / "examples" / "trainer_sweep" / "runs.csv"


def truncate(runs: pd.DataFrame, fraction: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Keep each run's evaluations up to `fraction` of its final compute; return (kept, finals)."""
    final = runs.loc[runs.groupby("run_id")["compute"].idxmax()].set_index("run_id")
    cut = runs["run_id"].map(final["compute"]) * fraction
    kept = runs[runs["compute"] <= cut * (1 + 1e-9)]
    kept = kept[kept.groupby("run_id")["compute"].transform("size") >= 3]
    return kept.reset_index(drop=True), final


def evaluate(runs: pd.DataFrame, fraction: float, *, seed: int = 0, horizon_sd=None, calibrate=(),
             planned: bool = False) -> pd.DataFrame:
    """planned: tell ours the planned budget (the largest final compute) as fit(horizon=...)."""
    kept, final = truncate(runs, fraction)
    kwargs = {} if horizon_sd is None else {"horizon_sd": horizon_sd}
    horizon = float(final["compute"].max()) if planned else None
    start = time.perf_counter()
    fc = ScalingForecaster(**kwargs).fit(kept, random_seed=seed, progress=False, horizon=horizon)
    fit_seconds = time.perf_counter() - start
    asymptotes = fc.asymptote().query("level == 'run'").set_index("run_id")
    rows = []
    for run_id, run in kept.groupby("run_id"):
        c_final, y_final = final.loc[run_id, "compute"], final.loc[run_id, "metric"]
        draws = fc.sample_curves([c_final], run_id=run_id, kind="run")[:, 0]
        lo, hi = np.quantile(draws, [0.05, 0.95])
        extra = {}
        for h in calibrate:  # same fit, other extrapolation widths (horizon_sd only acts on predictions)
            saved, fc.horizon_sd = fc.horizon_sd, h
            d = fc.sample_curves([c_final], run_id=run_id, kind="run")[:, 0]
            fc.horizon_sd = saved
            lo_h, hi_h = np.quantile(d, [0.05, 0.95])
            extra[f"cov@{h:g}"] = float(lo_h <= y_final <= hi_h)
        ls = fit_run_least_squares(run["compute"], run["metric"])
        rows.append(
            {
                "run_id": run_id,
                "fraction": fraction,
                "y_final": y_final,
                "last_value": run["metric"].iloc[-1],
                "least_squares": float(predict_least_squares(ls, [c_final])[0]),
                "ours": float(np.median(draws)),  # the median minimises absolute error
                "oracle": final.loc[run_id, "true_metric"] if "true_metric" in final else np.nan,
                "ours_lo": lo,
                "ours_hi": hi,
                "shape": final.loc[run_id, "shape"] if "shape" in final else "real",
                "A_true": final.loc[run_id, "true_A"] if "true_A" in final else np.nan,
                "A_ours": asymptotes.loc[run_id, "q50"],
                "A_ours_lo": asymptotes.loc[run_id, "q05"],
                "A_ours_hi": asymptotes.loc[run_id, "q95"],
                "A_least_squares": ls["A"],
                "fit_seconds": fit_seconds,
                "converged": fc.diagnostics().converged,
                "verdict": str(fc.diagnostics()).splitlines()[0],
                "tries": fc.sampling_tries() or "",
                **extra,
            }
        )
    return pd.DataFrame(rows)


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    def one(g):
        err = lambda col: float(np.mean(np.abs(g[col] - g["y_final"])))  # noqa: E731
        covered = (g["y_final"] >= g["ours_lo"]) & (g["y_final"] <= g["ours_hi"])
        return pd.Series(
            {
                "curves": len(g),
                "mae_last_value": err("last_value"),
                "mae_least_squares": err("least_squares"),
                "mae_ours": err("ours"),
                "ours/ls": ratio(err("ours"), err("least_squares")),
                "ours/last": ratio(err("ours"), err("last_value")),  # NaN at a cut of 1: the last value is the final
                "mae_oracle": err("oracle"),
                "coverage90": float(covered.mean()),
                "width90": float((g["ours_hi"] - g["ours_lo"]).mean()),
                # each run's asymptote, where the truth is known (NaN otherwise)
                "A_mae_ls": float(np.mean(np.abs(g["A_least_squares"] - g["A_true"]))),
                "A_mae_ours": float(np.mean(np.abs(g["A_ours"] - g["A_true"]))),
                "A_coverage90": float(((g["A_true"] >= g["A_ours_lo"]) & (g["A_true"] <= g["A_ours_hi"]))[g["A_true"].notna()].mean()),
            }
        )

    return results.groupby(["dataset", "fraction"]).apply(one, include_groups=False)


def datasets(quick: bool):
    yield "synthetic-clean", simulate_sweep(n_seeds=3, n_points=40, rng=11)
    if quick:
        return
    yield "synthetic-messy", simulate_sweep(n_seeds=3, n_points=40, rng=12, messy_fraction=0.3, wander_sd=0.01)
    sweep = TRAINER_SWEEP
    if sweep.exists():
        yield "trainer-sweep", load_runs(sweep)
    else:
        print(f"(no trainer sweep at {sweep}; skipped)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one synthetic sweep at a cut of 1/4 (1-2 min)")
    parser.add_argument("--horizon-sd", type=float, default=None)
    parser.add_argument("--horizon", action="store_true",
                        help="tell ours each sweep's planned budget (its largest final compute), as a sweep in flight would")
    parser.add_argument("--csv", default=None, help="write per-curve results here")
    parser.add_argument("--calibrate", default="", help="comma-separated horizon_sd values to score on the same fits")
    parser.add_argument("--fractions", default=None, help="comma-separated cuts (default 0.125,0.25; --quick 0.25); "
                        "at 1 the final is in the fit, so only the asymptote columns mean anything there")
    args = parser.parse_args(argv)
    try:  # a --csv that cannot be written, or is the shipped sweep read here, is refused before the fits
        _check_output_file(args.csv, "--csv", "extrapolation.csv", source=TRAINER_SWEEP)
    except BadInput as error:
        parser.error(str(error))
    print_provenance("benchmarks/extrapolation.py", vars(args))
    fractions = [float(v) for v in args.fractions.split(",")] if args.fractions else [0.25] if args.quick else [0.125, 0.25]
    results = []
    for name, runs in datasets(args.quick):
        for fraction in fractions:
            grid = [float(v) for v in args.calibrate.split(",") if v]
            res = evaluate(runs, fraction, horizon_sd=args.horizon_sd, calibrate=grid, planned=args.horizon)
            res["dataset"] = name
            results.append(res)
            first = res.iloc[0]
            tries = f"\n    tries: {first['tries']}" if first["tries"] else ""
            print(f"{name} @ {fraction:.3f}: fit {first['fit_seconds']:.1f}s, {first['verdict']}{tries}", flush=True)
    results = pd.concat(results, ignore_index=True)
    if args.csv:
        with atomic_path(args.csv) as tmp:  # a run stopped while writing leaves the old file, not half a table
            results.to_csv(tmp, index=False)
    table = summarise(results)
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.float_format", "{:.4f}".format):
        print(table)
        pooled = summarise(results.assign(dataset="all"))
        print(pooled)
        cal = [c for c in results.columns if c.startswith("cov@")]
        if cal:
            print("coverage of the 90% interval by horizon_sd (same fits):")
            print(results.groupby(["dataset", "fraction"])[cal].mean())
            print(results[cal].mean().to_frame("all").T)
    print("mae_oracle: error of the true noiseless curve itself (synthetic only): the noise floor no forecast can beat")
    print("A_*: each run's asymptote against its true value (synthetic sweeps only); A_coverage90 should be near 0.90")
    print("targets: ours/ls <= 0.70, ours/last < 1.00, 0.85 <= coverage90 <= 0.95")


if __name__ == "__main__":
    main()
