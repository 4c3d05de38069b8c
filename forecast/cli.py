"""Command line: `forecast fit`, `forecast predict`, and the decision and report commands.

Exit codes: 0 ok, 2 bad input (the message names the file, column, run and row; no traceback),
1 anything unexpected. Results are written atomically, so an interrupted command never leaves
a half-written file behind.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT = 0, 1, 2

EPILOG = """examples:
  forecast fit examples/trainer_sweep/runs.csv --out fits/sweep
  forecast predict fits/sweep --compute 1e15 1e16 --recipe scalerl
  forecast predict fits/sweep --compute 1e16 --run-id scalerl-s0 --kind run --json
"""


class BadInput(Exception):
    """Raised by commands for user errors that should exit 2 with a plain message."""


def _parse_floats(values):
    out = []
    for v in values:
        for part in str(v).split(","):
            if part.strip():
                try:
                    out.append(float(part))
                except ValueError:
                    raise BadInput(f"--compute: '{part}' is not a number") from None
    return out


# ----------------------------------------------------------------------------- fit


def add_fit_parser(sub):
    p = sub.add_parser("fit", help="fit the hierarchical model to a run table", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", help="run table: CSV, Parquet, JSONL, or a folder of run logs")
    p.add_argument("--out", required=True, help="output folder (fit.nc, summary.json)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--fast", action="store_true", help="short chains, for frequent refits")
    p.add_argument("--robust", action="store_true", help="Student-t likelihood for outliers")
    p.add_argument("--target", type=float, default=None, help="also report compute to reach this metric")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_fit)


def fit_summary(fc, target=None) -> dict:
    summary = {
        "forecast_version": fc.idata.posterior.attrs.get("forecast_version"),
        "compute_unit": fc.compute_unit,
        "n_runs": len(fc.run_ids),
        "recipes": fc.recipes,
        "diagnostics": fc.diagnostics().to_dict(),
        "fit_info": fc.fit_info_,
        "parameters": fc.parameters().to_dict(orient="records"),
    }
    if target is not None:
        summary["compute_to_target"] = fc.compute_to_target(target).to_dict(orient="records")
    return summary


def run_fit(args) -> int:
    from .data import load_runs
    from .forecaster import ScalingForecaster
    from .io import atomic_write_json

    runs = load_runs(args.runs)
    if args.target is not None and not 0 < args.target < 1:
        raise BadInput(f"--target must lie in (0, 1), got {args.target}")
    fc = ScalingForecaster(robust=args.robust, mode="fast" if args.fast else "nuts")
    fc.fit(runs, random_seed=args.seed, progress=None if not args.no_progress else False)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fc.save(out / "fit.nc")
    summary = fit_summary(fc, args.target)
    summary["input"] = str(args.runs)
    atomic_write_json(out / "summary.json", summary)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        import pandas as pd

        with pd.option_context("display.width", 140, "display.max_columns", 20):
            print(f"fitted {len(fc.run_ids)} runs of {len(fc.recipes)} recipes ({fc.compute_unit})")
            print(fc.diagnostics())
            table = fc.asymptote().query("level == 'recipe'")[["recipe", "mean", "q05", "q50", "q95"]]
            print("\nasymptote A per recipe:")
            print(table.round(4).to_string(index=False))
            if args.target is not None:
                print(f"\ncompute to reach {args.target}:")
                print(fc.compute_to_target(args.target).to_string(index=False, float_format="%.4g"))
        print(f"\nwrote {out / 'fit.nc'} and {out / 'summary.json'}")
    return EXIT_OK


# ----------------------------------------------------------------------------- predict


def add_predict_parser(sub):
    p = sub.add_parser("predict", help="forecast from a saved fit", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("fit_dir", help="folder written by `forecast fit` (or a fit.nc file)")
    p.add_argument("--compute", nargs="+", required=True, help="compute values (space or comma separated)")
    p.add_argument("--recipe", default=None, help="one recipe (default: all)")
    p.add_argument("--run-id", default=None, help="one run (with --kind run)")
    p.add_argument("--kind", default=None, choices=["run", "new_run", "mean"], help="default: run if --run-id, else new_run")
    p.add_argument("--json", action="store_true", help="print JSON records")
    p.set_defaults(func=run_predict)


def load_fit(path):
    from .forecaster import ScalingForecaster

    path = Path(path)
    file = path / "fit.nc" if path.is_dir() else path
    if not file.exists():
        raise BadInput(f"no saved fit at {file} (run `forecast fit RUNS --out DIR` first)")
    try:
        return ScalingForecaster.load(file)
    except (OSError, ValueError) as err:
        raise BadInput(f"{file}: {err}") from None


def run_predict(args) -> int:
    fc = load_fit(args.fit_dir)
    compute = _parse_floats(args.compute)
    if any(c <= 0 for c in compute):
        raise BadInput("--compute values must be > 0")
    kind = args.kind or ("run" if args.run_id else "new_run")
    try:
        table = fc.predict(compute, recipe=args.recipe, run_id=args.run_id, kind=kind)
    except KeyError as err:
        raise BadInput(str(err).strip("'\"")) from None
    except ValueError as err:
        raise BadInput(str(err)) from None
    if args.json:
        print(json.dumps(table.to_dict(orient="records"), indent=2, default=str))
    else:
        print(table.to_string(index=False, float_format="%.4g"))
    return EXIT_OK


# ----------------------------------------------------------------------------- report

REPORT_EPILOG = """examples:
  forecast report examples/synthetic_table1/runs.csv -o report.html
  forecast report runs.csv --budget 6.4e4 --target 0.6 -o report.html
  forecast report fits/sweep --budget 6.4e4 -o report.html --json   # from a saved fit (fit.nc)

RUNS is a run table (CSV, Parquet, JSONL, a folder of run logs) or a saved fit (fit.nc or the
folder `forecast fit --out` wrote). The page is self-contained: it opens offline.
Exit codes: 0 ok, 2 bad input (the message says what and where), 1 anything unexpected.
"""


def add_report_parser(sub):
    p = sub.add_parser(
        "report",
        help="write the planning report: one self-contained HTML page",
        description="Fit (or load a fit), then write one HTML page: the recommendation, every recipe\n"
        "at the budget with P(best), fan charts, asymptotes, compute to target, stop advice,\n"
        "convergence diagnostics and provenance.",
        epilog=REPORT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs", help="run table or folder of run logs, or a saved fit (fit.nc or its folder)")
    p.add_argument("--budget", type=float, default=None, help="compute budget to plan for (default: 4x the largest observed)")
    p.add_argument("--target", type=float, default=None, help="metric to reach (default: median of the recipes' forecast asymptotes)")
    p.add_argument("-o", "--out", default="report.html", help="output HTML file (default report.html)")
    p.add_argument("--title", default=None, help="page title")
    p.add_argument("--seed", type=int, default=0, help="random seed of the fit (default 0)")
    p.add_argument("--fast", action="store_true", help="short chains: a quick look, not a decision")
    p.add_argument("--robust", action="store_true", help="Student-t likelihood for outliers")
    p.add_argument("--json", action="store_true", help="print the report's numbers as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run_report)


def _is_saved_fit(path: Path) -> bool:
    return path.suffix == ".nc" or (path.is_dir() and (path / "fit.nc").exists())


def run_report(args) -> int:
    from .report import default_target, recipe_table_text, report_summary, write_report

    if args.budget is not None and not args.budget > 0:
        raise BadInput(f"--budget must be > 0, got {args.budget:g}")
    if args.target is not None and not 0 < args.target < 1:
        raise BadInput(f"--target must lie in (0, 1), got {args.target:g}")
    source = Path(args.runs)
    progress = not args.no_progress and sys.stderr.isatty()
    if _is_saved_fit(source):
        fc = load_fit(source)
    else:
        from .data import load_runs
        from .forecaster import ScalingForecaster

        runs = load_runs(source)
        fc = ScalingForecaster(robust=args.robust, mode="fast" if args.fast else "nuts")
        with warnings.catch_warnings():
            # the report shows non-convergence prominently; a second warning on stderr adds nothing
            warnings.simplefilter("ignore")
            fc.fit(runs, random_seed=args.seed, progress=progress)
    target = args.target if args.target is not None else default_target(fc)
    data = write_report(fc, args.out, budget=args.budget, target=target, inputs=[str(source)], title=args.title, progress=progress)
    if args.json:
        print(json.dumps(report_summary(data, args.out), indent=2, default=str))
        return EXIT_OK
    print(data.recommendation.headline)
    print()
    print(recipe_table_text(data))
    if not data.diagnostics.get("converged", True):
        print("\nwarning: the fit did not converge; see the report's diagnostics", file=sys.stderr)
    print(f"\nwrote {args.out}")
    return EXIT_OK


# ----------------------------------------------------------------------------- main

# Each entry adds one subcommand. Modules are imported lazily so `forecast --help` stays fast.
COMMANDS = [
    ("forecast.cli", "add_fit_parser"),
    ("forecast.cli", "add_predict_parser"),
    ("forecast.cli", "add_report_parser"),
]


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="forecast",
        description="Bayesian forecasts of RL compute scaling (ScaleRL sigmoid), and decisions built on them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module, function in COMMANDS:
        try:
            adder = getattr(importlib.import_module(module), function)
        except (ImportError, AttributeError):
            continue  # a command whose module is not present in this build
        adder(sub)
    return parser


def main(argv=None) -> int:
    from .data import RunDataError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*BLAS.*")
            return int(args.func(args) or 0)
    except (RunDataError, BadInput) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
