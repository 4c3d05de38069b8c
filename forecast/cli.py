"""Command line: `forecast fit`, `forecast predict`, and the decision and report commands.

Exit codes: 0 ok, 2 bad input (the message names the file, column, run and row; no traceback),
1 a failure of the machine (a full disk, a read-only file system, too many open files: one line
naming the file, no traceback) or anything unexpected. Results are written atomically, so an interrupted command never leaves
a half-written file behind.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import warnings
from pathlib import Path

from .io import dumps_json, resource_error_message

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT = 0, 1, 2
EXIT_BROKEN_PIPE = 128 + 13  # as a command killed by SIGPIPE: the shell's 141

EPILOG = """examples:
  forecast fit examples/trainer_sweep/runs.csv --out fits/sweep
  forecast predict fits/sweep --compute 2e12 4e12 --recipe dapo
  forecast predict fits/sweep --compute 4e12 --run-id dapo-s0 --kind run --json
"""


class BadInput(Exception):
    """Raised by commands for user errors that should exit 2 with a plain message."""


def prior_overrides(items) -> dict:
    """'NAME=VALUE' strings (--prior) -> {name: float} for forecast.model.Priors; ValueError naming
    the bad item."""
    from .model import Priors
    from .settings import parse_settings

    return parse_settings(items, Priors, "--prior")


def _add_prior_option(p):
    p.add_argument("--prior", action="append", default=[], metavar="NAME=VALUE",
                   help="a prior setting of the model (forecast.model.Priors), repeatable; "
                        "e.g. --prior b_mu=0.5 --prior a_mu_offset=1.0")


def _forecaster_kwargs(args) -> dict:
    """{"priors": Priors(...)} from --prior, or {} for the defaults."""
    if not getattr(args, "prior", None):
        return {}
    from .model import Priors  # loads PyMC: only when there are priors to check

    try:
        overrides = prior_overrides(args.prior)  # its errors name --prior and the item
    except ValueError as err:
        raise BadInput(str(err)) from None
    try:
        return {"priors": Priors(**overrides)}
    except ValueError as err:
        raise BadInput(f"--prior {err}") from None


def _seed(text: str) -> int:
    """argparse type for --seed: numpy's generators take whole numbers >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got '{text}'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {value}")
    return value


def warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A package warning on the terminal in the CLI's own words ("warning: ..."), not Python's
    "/site-packages/forecast/data.py:231: UserWarning: ..." with the source line under it."""
    warn(str(message))


def warn_if_unconverged(fc, *, problems_printed: bool = False) -> None:
    """Every command that shows numbers from a fit says on stderr when that fit did not converge,
    whether it was fitted now or loaded: its intervals should not be trusted. `problems_printed`: the
    command printed the fit's diagnostics, problems and all (fit's text); where stdout and stderr reach
    the same place (a terminal) the warning then points at them rather than listing them a second time."""
    report = fc.diagnostics()
    if report is not None and not report.converged:
        if problems_printed and stdout_and_stderr_together():
            # a file or pipe (`> out.txt 2>&1`, `2>&1 | tee`) buffers stdout apart: the diagnostics, out first, are above
            sys.stdout.flush()
            warn("the fit did not converge (its diagnostics above say how), so treat these intervals with suspicion")
        else:
            warn("the fit did not converge, so treat these intervals with suspicion: " + "; ".join(report.problems()))


def stdout_and_stderr_together() -> bool:
    """True where stdout and stderr reach the same place: a terminal, or `> out.txt 2>&1`. A warning the
    printed result already carries (a backtest table's line on refits that did not converge) is then
    not said twice, one line apart; where stdout goes elsewhere (`> out.txt`) the saved text keeps it
    and stderr still says it on the terminal. False where either is no file (a notebook's, a test's)."""
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno()))
    except (AttributeError, OSError, ValueError):
        return False


def warn_if_far_from_data(fc, values, flag: str) -> None:
    """A warning naming `flag` when a compute value lies far outside the fitted data's range
    (forecast.data.far_from_data: a likely unit mix-up); the first such value is enough."""
    from .data import far_from_data

    for value in values:
        if message := far_from_data(value, fc.runs_["compute"], unit=fc.compute_unit, name=flag):
            warn(message)
            return


def warn_ignored(flags: list[str], why: str) -> None:
    """Flags that had no effect, said rather than silently dropped."""
    if flags:
        warn(f"{', '.join(flags)} {'has' if len(flags) == 1 else 'have'} no effect: {why}")


def _check_output_file(path, flag: str, example: str, source=None) -> None:
    """An output file must not be a folder, nor an input of the command: the run table or saved
    fit it reads (`source`, or each of a tuple of them), or a file the folder it reads would take as
    a run table next time, nor a file in a trainer's run folder, nor an existing data file of another
    kind (checked before any work, not after a long fit)."""
    if path is None:
        return
    _refuse_standard_output(path, flag, example)
    out = Path(path)
    if out.is_dir():
        raise BadInput(f"{flag} {path}: is a folder; give a file name, e.g. {out / example}")
    _check_parent_folders(out, flag)
    for one_source in (source if isinstance(source, tuple) else (source,)):
        if conflict := _output_conflict(out, one_source):
            elsewhere = _outside_run_folders(Path(one_source).resolve().parent if one_source is not None
                                             else out.resolve().parent)
            raise BadInput(f"{flag} {path}: {conflict}; write it elsewhere, e.g. {elsewhere / example}")
    if conflict := _overwrites_other_data(out, example):
        raise BadInput(f"{flag} {path}: {conflict}; name the output e.g. {out.parent / example}")


def _refuse_standard_output(path, flag: str, example: str) -> None:
    """`-o -` is many tools' "write to standard output"; here it made a file named '-' without a word."""
    if str(path) == "-":
        raise BadInput(f"{flag} -: this command writes a file, not standard output; name one, e.g. {example} "
                       "(--json prints the result on standard output where a command offers it)")


def _overwrites_other_data(out: Path, example: str) -> str | None:
    """Why writing over the existing file `out` would destroy data of another kind, or None: a
    report written over runs.csv (typed for report.html, or from the history of `forecast fit
    runs.csv`) replaced the runs a saved fit came from with HTML, without a word. Under the output's own
    suffix, a file that holds run rows (a run table) is refused too: `watch --out runs.json` wrote its advice
    over a JSON run table."""
    from .data import SUPPORTED_SUFFIXES

    suffix = out.suffix.lower()
    if not out.is_file() or suffix not in (*SUPPORTED_SUFFIXES, ".nc"):
        return None
    if _is_this_commands_output(out, example):  # a rerun over its own earlier output: replaced, as it was meant to be
        return None
    if suffix != Path(example).suffix:
        return f"exists, and is a {suffix} file (run data, or a fit) that this {Path(example).suffix} output would replace"
    if _holds_run_rows(out):
        return f"exists, and holds run data (rows with run_id, compute and metric) that this {suffix} output would replace"
    return None


def _holds_run_rows(path: Path) -> bool:
    """Whether the file's head reads as rows of the run format: a CSV/TSV header, a JSON array's first object or
    a JSONL file's first line naming run_id, compute and metric. Another file of the output's suffix (an earlier
    benchmark's results, a note) is the user's to replace, as before."""
    wanted = {"run_id", "compute", "metric"}
    try:
        with open(path, "rb") as handle:
            head = handle.read(65536).decode("utf-8", errors="replace").lstrip("\ufeff").lstrip()
    except OSError:
        return False
    first_line = head.split("\n", 1)[0]
    if path.suffix.lower() in (".csv", ".tsv"):
        return wanted <= {name.strip().strip('"') for name in re.split(r"[,;\t]", first_line)}
    if head.startswith("["):  # a JSON array of row objects: its first object, read as far as the head goes
        head = head[1:].lstrip()
        first_line = head[: head.find("}") + 1] if "}" in head else ""
    try:
        first = json.loads(first_line)
    except ValueError:
        return False
    return isinstance(first, dict) and wanted <= set(first)


def _is_this_commands_output(out: Path, example: str) -> bool:
    """Whether the existing file `out` holds what the command writes (example's kind), whatever its
    suffix: a report's HTML, a JSON object stamped with forecast_version (watch, backtest), the
    table cross-validate writes. `backtest --out results.csv` was refused on its own rerun."""
    kind = Path(example).suffix
    try:
        with open(out, "rb") as handle:
            head = handle.read(65536).decode("utf-8", errors="replace")
        if kind == ".html":
            return head.lstrip().lower().startswith(("<!doctype html", "<html"))
        if kind == ".json":
            document = json.loads(out.read_text(encoding="utf-8")) if out.stat().st_size < 64 * 2**20 else None
            return isinstance(document, dict) and "forecast_version" in document
        if kind == ".csv":
            header = set(head.split("\n", 1)[0].strip().split(","))
            return {"covered", "fit_converged", "forecast"} <= header
    except (OSError, ValueError):
        return False
    return False


def _check_parent_folders(out: Path, flag: str) -> None:
    """An output under an existing file (runs.csv/fit), or in a folder this process may not write
    (a read-only file system, another user's folder), cannot be made: said before any work, not by
    a traceback after it."""
    for parent in out.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise BadInput(f"{flag} {out}: {parent} is a file, so nothing can be written under it")
            _check_writable(parent, out, flag)
            return


def _check_writable(folder: Path, out: Path, flag: str) -> None:
    """Results are written through a temporary file in their folder, so the folder must be writable."""
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BadInput(f"{flag} {out}: cannot write in {folder} (read-only or not yours); write it elsewhere")


def _outside_run_folders(folder: Path) -> Path:
    """`folder`, or the nearest folder above it that is not a trainer's run folder: where a refusal
    suggests writing instead (next to one run's evals.jsonl would be refused again)."""
    from .data import RUN_LOG_NAME

    while (folder / RUN_LOG_NAME).exists() and folder.parent != folder:
        folder = folder.parent
    return folder


def _output_conflict(out: Path, source=None) -> str | None:
    """Why writing the file `out` would destroy or corrupt an input, or None. A trainer's run folder
    is the trainer's: its run log, its summary.json (which marks the run finished) and its config
    are read by `watch`, `fit` and `backtest`, so nothing of ours goes in it."""
    from .data import RUN_LOG_NAME

    if source is not None and _read_as_input(out, Path(source)):
        return f"is, or would become, an input read from {source}"
    if (out.resolve().parent / RUN_LOG_NAME).exists():
        return f"is in the run folder {out.resolve().parent}, whose files ({RUN_LOG_NAME}, summary.json) are the trainer's"
    return None


def _holds_runs(folder: Path, source, *, logs: bool = True) -> str | None:
    """What run data a fit written into `folder` would hide, or None: the folder of the run table
    being fitted, or (with `logs`) a folder holding run logs, a sweep's, that is not a saved fit
    already (as `forecast demo --live` leaves its folder: the fit, with the sweep below it). A
    fit.nc makes the folder a saved fit to every command: `decide`/`report` would read that frozen
    fit instead of the runs, and `fit`/`backtest`/`cross-validate` would refuse the folder."""
    from .data import run_logs_below

    if not folder.is_dir():
        return None
    folder, source = folder.resolve(), Path(source).resolve()
    if source.is_file() and source.parent == folder:
        return f"it holds the run table {source} being fitted"
    if logs and not (folder / "fit.nc").exists() and (log := next(iter(run_logs_below(folder)), None)):
        return f"it holds run logs ({log})"
    return None


def _read_as_input(out: Path, source: Path) -> bool:
    """Whether a file at `out` is read when `source` is: the file itself, a saved fit's fit.nc, or
    in a folder of run files one that load_runs would pick up (run logs win, as in forecast.data)."""
    from .data import FOLDER_SUFFIXES, RUN_LOG_NAME, run_logs_below

    out, source = out.resolve(), source.resolve()
    if out == source:
        return True
    if not source.is_dir() or source not in out.parents:
        return False
    if out == source / "fit.nc":
        return True
    if run_logs_below(source):
        return out.name == RUN_LOG_NAME
    return out.suffix.lower() in FOLDER_SUFFIXES


def _positive_finite(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _refuse_target_out_of_range(target) -> None:
    """--target is a pass rate strictly between 0 and 1 (fit, report and decide alike: fit said 0 as "0.0")."""
    if target is not None and not 0 < target < 1:
        raise BadInput(f"--target must lie in (0, 1), got {target:g}")


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
    p.add_argument("--seed", type=_seed, default=0, help="random seed (default 0)")
    p.add_argument("--fast", action="store_true", help="short chains, for frequent refits")
    p.add_argument("--robust", action="store_true", help="Student-t likelihood for outliers")
    p.add_argument("--target", type=float, default=None, help="also report compute to reach this metric")
    p.add_argument("--horizon", type=float, default=None, metavar="C",
                   help="for a sweep in flight: the compute its runs are planned to reach; the priors are then set "
                        "on the range up to it, as for the finished sweep (less biased forecasts far ahead)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_prior_option(p)
    p.set_defaults(func=run_fit)


def fit_summary(fc, target=None) -> dict:
    summary = {
        "forecast_version": fc.posterior.attrs.get("forecast_version"),
        "compute_unit": fc.compute_unit,
        "n_runs": len(fc.run_ids),
        "recipes": fc.recipes,
        "diagnostics": fc.diagnostics().to_dict(),
        "settings": fc.settings(),  # priors, likelihood, sampler: what it takes to repeat the fit
        "fit_info": fc.fit_info_,
        "data_warnings": fc.data_warnings_,  # said on stderr while the runs were read; `report` shows them
        "parameters": fc.parameters().to_dict(orient="records"),
        "misshapen_runs": fc.misshapen_runs(),  # runs whose end falls away from their curve: intervals too narrow
    }
    if target is not None:
        summary["compute_to_target"] = fc.compute_to_target(target).to_dict(orient="records")
    return summary


def _check_savable(runs, source) -> None:
    """Render the run table as the saved fit will hold it: a column netCDF cannot hold fails here, in words,
    rather than in save() after the fit."""
    from .forecaster import run_table_dataset

    try:
        _render_as_saved(run_table_dataset(runs))
    except (TypeError, ValueError) as err:
        _refuse_nul_characters(runs)
        column = _unsavable_column(runs)
        which = f"column '{column}'" if column is not None else "column it names"
        raise BadInput(f"{source}: the run table cannot be saved with the fit ({err}); drop or rename the {which}") from None


def _render_as_saved(table) -> None:
    """The run table's Dataset rendered as save() renders it, in memory (forecaster.netcdf_image: a scratch
    file on a full disk crashed HDF5, exit 139), or where this xarray cannot, to a scratch file: TypeError
    or ValueError for a column netCDF cannot hold."""
    import tempfile

    from .forecaster import netcdf_image

    if netcdf_image({"run_table": table}) is None:
        with tempfile.TemporaryDirectory() as scratch:
            table.to_netcdf(Path(scratch) / "run_table.nc")


def _refuse_nul_characters(runs) -> None:
    """RunDataError naming the first cell that holds a NUL character, which netCDF's text cannot hold.
    A stray NUL in one value (a corrupted byte) was said as 'drop or rename the column', which
    renaming does not fix, and without the row that holds it."""
    from .data import RunDataError, _where

    for column in runs.columns:
        if str(column).startswith("_"):
            continue
        holds = runs[column].map(lambda value: isinstance(value, str) and "\x00" in value)
        if holds.any():
            raise RunDataError("holds a NUL character (a corrupted byte?), which a saved fit cannot hold: remove it",
                               column=column, **_where(runs, holds.idxmax()))


def _unsavable_column(runs):
    """The one column netCDF refuses when written alone, for a message that names it (its own error,
    "VLEN strings do not support embedded NULLs", does not); None where none or several do."""
    from .forecaster import run_table_dataset

    refused = []
    for column in (c for c in runs.columns if not str(c).startswith("_")):
        try:
            _render_as_saved(run_table_dataset(runs[[column]]))
        except (TypeError, ValueError):
            refused.append(column)
    return refused[0] if len(refused) == 1 else None


def run_fit(args) -> int:
    from .data import compute_unit_of, far_from_data, load_runs
    from .formatting import FAST_FIT_QUICK_LOOK, fmt_compute
    from .io import atomic_path
    from .shape_check import misshapen_runs_sentence

    forecaster_kwargs = _forecaster_kwargs(args)  # a bad --prior fails before a large table is read
    if args.horizon is not None and not _positive_finite(args.horizon):
        raise BadInput(f"--horizon must be a compute > 0, got {args.horizon:g}")
    _refuse_target_out_of_range(args.target)
    _refuse_standard_output(args.out, "--out", "fits/sweep")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out}: is a file; --out names a folder (fit.nc and summary.json go in it)")
    _check_parent_folders(out, "--out")
    if out.is_dir():  # fit.nc and summary.json are written in it
        _check_writable(out, out, "--out")
    _refuse_a_saved_fit(Path(args.runs), "fit")
    for name in ("fit.nc", "summary.json"):
        if (out / name).is_dir():  # e.g. left by an earlier `--out DIR/fit.nc`: save() failed on it after the fit
            raise BadInput(f"--out {out}: {out / name} is a folder, so the fit's {name} cannot be written there; "
                           "move it away or write the fit elsewhere")
        if conflict := _output_conflict(out / name, args.runs):
            # a saved fit inside the runs folder would be read instead of the runs from then on
            raise BadInput(f"--out {out}: its {name} {conflict}; write the fit elsewhere, "
                           f"e.g. {_outside_run_folders(Path(args.runs).resolve().parent) / 'fit'}")
    if held := _holds_runs(out, args.runs):
        raise BadInput(f"--out {out}: {held}, and a fit.nc there would make the folder read as that fit from then on "
                       f"(`forecast decide/report {out}` would use the fit, not the runs); write the fit elsewhere, "
                       f"e.g. {out.resolve() / 'fit'}")
    runs = load_runs(args.runs)
    if args.horizon is not None and (message := far_from_data(args.horizon, runs["compute"], unit=compute_unit_of(runs), name="--horizon")):
        warn(message)  # before the fit, which would take minutes to use it
    if args.horizon is not None and args.horizon <= runs["compute"].max():
        warn_ignored(["--horizon"], f"the runs already reach {fmt_compute(runs['compute'].max())} {compute_unit_of(runs)}, "
                                    "and the priors are set on the compute range seen when it is within it")
    # PyMC loads here, after the table is checked
    from .forecaster import ConvergenceWarning, FarFromDataWarning, ScalingForecaster

    _check_savable(runs, args.runs)  # before the fit, which takes minutes
    fc = ScalingForecaster(robust=args.robust, mode="fast" if args.fast else "nuts", **forecaster_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # said once below, after the diagnostics
        warnings.filterwarnings("ignore", message="horizon=.* has no effect")  # said above, as a flag
        warnings.simplefilter("ignore", FarFromDataWarning)  # said above, naming --horizon
        fc.fit(runs, random_seed=args.seed, progress=None if not args.no_progress else False, horizon=args.horizon)
    # the folder is made by the atomic writes below (atomic_path): a file put in its place during the fit
    # is said there in a line (mkdir here raised FileExistsError, a traceback)
    # the summary before either file is replaced (it takes seconds): fit.nc and summary.json are then
    # replaced back to back, so a Ctrl-C or kill leaves the old pair or the new one, not a new fit.nc
    # beside the old fit's summary (what is left is the instant between two renames; a report tells
    # such a pair by its fit_info: _saved_fit_inputs)
    summary = fit_summary(fc, args.target)
    summary["input"] = str(Path(args.runs).resolve())  # a report run from another folder still finds it
    # and summary.json's temporary file is written before fit.nc is replaced: a disk that fills up between
    # the two fails the fit's write, not the summary's after fit.nc was replaced (a new fit beside the old
    # fit's numbers); both are then renamed into place
    with atomic_path(out / "summary.json") as summary_tmp:
        summary_tmp.write_text(dumps_json(summary) + "\n", encoding="utf-8")
        fc.save(out / "fit.nc")
    if args.json:
        print(dumps_json(summary))
    else:
        import pandas as pd

        with pd.option_context("display.width", 140, "display.max_columns", 20):
            print(f"fitted {len(fc.run_ids)} runs of {len(fc.recipes)} recipes ({fc.compute_unit})")
            if fc.mode == "fast":  # as `forecast report --fast` says it, on its page and terminal
                print(f"{FAST_FIT_QUICK_LOOK} (without --fast)")
            print(fc.diagnostics())
            if tries := fc.sampling_tries():
                print(tries)
            if shape := misshapen_runs_sentence(summary["misshapen_runs"]):
                print(f"shape: {shape}")
            table = fc.asymptote().query("level == 'recipe'")[["recipe", "mean", "q05", "q50", "q95"]]
            print("\nasymptote A per recipe:")
            print(table.round(4).to_string(index=False))
            if args.target is not None:
                print(f"\ncompute to reach {args.target}:")
                table = fc.compute_to_target(args.target)
                formatters = {q: fmt_compute for q in table.columns if q.startswith("q")}  # "never", not inf
                print(table.to_string(index=False, float_format="%.4g", formatters=formatters))
        print(f"\nwrote {out / 'fit.nc'} and {out / 'summary.json'}")
    warn_if_unconverged(fc, problems_printed=not args.json)
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
    from .forecaster import ConvergenceWarning, NotASavedFitError, ScalingForecaster

    path = Path(path)
    file = path / "fit.nc" if path.is_dir() else path
    if not file.exists():
        raise BadInput(f"no saved fit at {file} (run `forecast fit RUNS --out DIR` first)")
    if file.is_dir():
        raise BadInput(f"{file}: is a folder, not a saved fit (a fit is the file fit.nc that `forecast fit --out DIR` writes)")
    if file.suffix != ".nc":
        raise BadInput(f"{file}: is not a saved fit (fit.nc, or the folder `forecast fit --out` wrote); "
                       f"run `forecast fit {file} --out DIR` first")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # said once by warn_if_unconverged, after the numbers
            return ScalingForecaster.load(file)
    except ValueError as err:
        message = str(err) if str(err).startswith(str(file)) else f"{file}: {err}"
        hint = "; run `forecast fit RUNS --out DIR` to make one" if isinstance(err, NotASavedFitError) else ""
        raise BadInput(message + hint) from None


def _written(value) -> str:
    """A number given on the command line as the messages write compute (fmt_compute: 1e12, -1); nan
    and inf as themselves (fmt_compute writes nan as a dash and inf as 'never')."""
    from .formatting import fmt_compute

    return value if isinstance(value, str) else fmt_compute(value)


def _hint_as_flags(message: str) -> str:
    """The forecaster's hint for a run's name given as a recipe (or a recipe's as a run), written for
    Python ("give run_id='dapo-s0'"), as the command line takes it: "give --run-id dapo-s0"."""
    flags = {"recipe": "--recipe", "run_id": "--run-id"}
    # a name that begins with '-' is taken by argparse for a flag unless joined to its own: --run-id=-s0
    return re.sub(r"give (recipe|run_id)='(.*)'\)",
                  lambda m: f"give {flags[m[1]]}{'=' if m[2].startswith('-') else ' '}{_shell_word(m[2])})", message)


def _shell_word(name: str) -> str:
    """A name as a shell reads it back: as it is, in single quotes, or in double quotes for one with
    a single quote and nothing a shell expands inside double quotes ("it's grpo", where shlex.quote
    writes 'it'"'"'s grpo')."""
    import shlex

    quoted = shlex.quote(name)
    if "'" in name and quoted != name and not set(name) & set('$`\\"!'):
        return f'"{name}"'
    return quoted


def run_predict(args) -> int:
    fc = load_fit(args.fit_dir)
    compute = _parse_floats(args.compute)
    if not all(_positive_finite(c) for c in compute):
        # the values at fault, as compute is written everywhere else: "got 1e+12, -1, 2e+12" named the good ones too
        bad = [c if math.isfinite(c) else f"{c}" for c in compute if not _positive_finite(c)]
        raise BadInput(f"--compute values must be finite and > 0, got {', '.join(map(_written, bad))}"
                       + (f" (of {len(compute)} values)" if len(compute) > 1 else ""))
    from .forecaster import FarFromDataWarning, resolve_kind  # loaded with the fit above

    kind = resolve_kind(args.kind, args.run_id)
    if args.run_id and kind != "run" and not args.recipe:
        warn(f"--kind {kind} forecasts the recipe of run '{args.run_id}', not the run itself; --kind run for the run")
    warn_if_unconverged(fc)
    warn_if_far_from_data(fc, compute, "--compute")
    try:
        with warnings.catch_warnings():
            # said just above, naming --compute, and below a recipe's data after the forecast
            warnings.simplefilter("ignore", FarFromDataWarning)
            table = fc.predict(compute, recipe=args.recipe, run_id=args.run_id, kind=kind)
    except KeyError as err:
        # the message itself (args[0]), not str(err): KeyError's str() is its repr, which doubles a backslash
        raise BadInput(_hint_as_flags(str(err.args[0]) if err.args else str(err))) from None
    except ValueError as err:
        raise BadInput(str(err)) from None
    from .decisions import forecasts_below_data, predict_below_data_texts

    for text in predict_below_data_texts(fc, table):  # fc.predict's own warnings are ignored above
        warn(text)
    if args.json:
        # a flag per record, for a script: the warning above names only each recipe's largest such compute
        below = forecasts_below_data(fc, table)
        print(dumps_json([{**record, "below_data": flag} for record, flag in zip(table.to_dict(orient="records"), below,
                                                                                  strict=True)]))
    else:
        from .formatting import fmt_compute

        # compute as decide, report and watch write it: 4.08e12, not 4.08e+12, in the unit decide's table names
        print(f"compute in {fc.compute_unit}")
        print(table.to_string(index=False, float_format="%.4g", formatters={"compute": fmt_compute}))
    return EXIT_OK


# ----------------------------------------------------------------------------- report

REPORT_EPILOG = """examples:
  forecast report examples/synthetic_table1/runs.csv -o report.html
  forecast report runs.csv --budget 4e12 --target 0.6 -o report.html   # the budget in the table's compute unit
  forecast report fits/sweep --budget 4e12 -o report.html --json   # from a saved fit (fit.nc)

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
    p.add_argument("--target", type=float, default=None, help="metric to reach (default: the median of the recipes' forecast asymptotes rounded down to 0.01, for the compute-to-target table only: a chosen target stops no run)")
    p.add_argument("-o", "--out", default="report.html", help="output HTML file (default report.html)")
    p.add_argument("--title", default=None, help="page title")
    p.add_argument("--seed", type=_seed, default=0, help="random seed of the fit (default 0)")
    p.add_argument("--fast", action="store_true", help="short chains: a quick look, not a decision")
    p.add_argument("--robust", action="store_true", help="Student-t likelihood for outliers")
    p.add_argument("--json", action="store_true", help="print the report's numbers as JSON")
    p.add_argument("--cross-validation", default=None, metavar="CV_CSV",
                   help="a table `forecast cross-validate RUNS --out CV_CSV` wrote: the page then says how honest the "
                        "intervals were on these runs' held-out curve ends")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    _add_prior_option(p)
    p.set_defaults(func=run_report)


def _saved_fit_inputs(source: Path, fc) -> list[str]:
    """Provenance of a report made from a saved fit: the run table it was fitted on (the
    summary.json `forecast fit` wrote beside fit.nc says), then the fit itself. A summary whose
    fit_info is not this fit's (a `fit` stopped between writing fit.nc and summary.json, or a
    fit.nc copied over) belongs to another fit, and its input is not claimed for this one."""
    file = source / "fit.nc" if source.is_dir() else source
    fitted_on = None
    if file.name == "fit.nc":  # another .nc's folder may hold some other fit's summary
        try:
            summary = json.loads((file.parent / "summary.json").read_text(encoding="utf-8"))
            if isinstance(summary, dict) and summary.get("fit_info") == json.loads(dumps_json(fc.fit_info_)):
                fitted_on = summary.get("input")
        except (OSError, ValueError):
            pass
    return ([f"{fitted_on} (fitted on)"] if fitted_on else []) + [f"{source} (saved fit)"]


def _is_saved_fit(path: Path) -> bool:
    return path.suffix == ".nc" or (path.is_dir() and (path / "fit.nc").exists())


def run_report(args) -> int:
    from .formatting import fmt_compute
    from .report import (
        COMMAND_SETTINGS,
        chosen_notes,
        fast_fit_note,
        recipe_table_text,
        report_summary,
        write_report,
    )

    if args.budget is not None and not _positive_finite(args.budget):
        raise BadInput(f"--budget must be finite and > 0, got {args.budget:g}")
    _refuse_target_out_of_range(args.target)
    # the page written over the cross-validation table it reads would destroy it: an input, said as one
    inputs = (args.runs,) if args.cross_validation is None else (args.runs, args.cross_validation)
    _check_output_file(args.out, "-o", "report.html", source=inputs)
    cross_validation = _read_cross_validation(args.cross_validation)  # a bad file fails before the fit
    source = Path(args.runs)
    progress = not args.no_progress and sys.stderr.isatty()
    forecaster_kwargs = _forecaster_kwargs(args)
    inputs = [str(source)]
    if _is_saved_fit(source):
        _no_prior_for_saved_fit(source, forecaster_kwargs)
        _warn_fit_flags_ignored(args, source)
        fc = load_fit(source)
        inputs = _saved_fit_inputs(source, fc)
    else:
        from .data import load_runs
        from .forecaster import ScalingForecaster

        runs = load_runs(source)
        fc = ScalingForecaster(robust=args.robust, mode="fast" if args.fast else "nuts", **forecaster_kwargs)
        with warnings.catch_warnings():
            # said once, after the report is written (warn_if_unconverged), and on the page itself
            warnings.simplefilter("ignore")
            fc.fit(runs, random_seed=args.seed, progress=progress)
    # no --target: write_report picks the page's target (default_target) and names it as chosen
    data = write_report(fc, args.out, budget=args.budget, target=args.target, inputs=inputs, title=args.title,
                        progress=progress, cross_validation=cross_validation,
                        cross_validation_source=args.cross_validation, settings=COMMAND_SETTINGS)
    if args.json:
        print(dumps_json(report_summary(data, args.out)))
        for message in data.warnings:
            warn(message)
        warn_if_unconverged(fc)
        return EXIT_OK
    print(data.recommendation.headline)
    if quick_look := fast_fit_note(data):  # under the headline it qualifies, as the page's header says it
        print(quick_look)
    print()
    # what the table was made at, and which of the two nobody gave (the page's header says the same)
    chosen_budget, chosen_target = chosen_notes(data)
    print(f"budget {fmt_compute(data.budget)} {data.compute_unit}{chosen_budget}, target {data.target:g}{chosen_target}")
    print(recipe_table_text(data))
    if data.honesty:
        print("\nhow honest the intervals were on these runs (cross-validation):")
        print("\n".join(data.honesty["summary"]))
    print(f"\nwrote {args.out}")
    for message in data.warnings:  # on the page as a banner; said here too for whoever reads the terminal
        warn(message)
    warn_if_unconverged(fc)
    return EXIT_OK


def _read_cross_validation(path):
    if path is None:
        return None
    from .cross_validation import read_cross_validation

    if not Path(path).is_file():
        raise BadInput(f"--cross-validation {path}: {'is a folder' if Path(path).is_dir() else 'does not exist'}; "
                       "give the CSV file `forecast cross-validate RUNS --out cv.csv` wrote")
    try:
        return read_cross_validation(path)
    except ValueError as err:
        raise BadInput(f"--cross-validation {err}") from None


# ----------------------------------------------------------------------------- decide, watch, backtest
# (early-stop and scale decisions: forecast/decisions.py, early_stop.py, watch.py, backtest.py)

DECIDE_EPILOG = """examples:
  forecast decide fits/sweep --budget 4e12 --target 0.55
  forecast decide runs.csv --budget 2.56e5 --total --max-ways 3 --fast
  forecast decide fits/sweep --budget 4e12 --json

RUNS_OR_FIT is a run table (fitted here; --fast for short chains) or a saved fit.
--budget is compute for one run; with --total it is a total that may be split over k runs
(other recipes, or more seeds of one), keeping the best.
"""


def add_decide_parser(sub):
    p = sub.add_parser("decide", help="which recipe to scale: rank recipes at a budget", epilog=DECIDE_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", metavar="RUNS_OR_FIT", help="run table or folder of run logs, or a saved fit")
    p.add_argument("--budget", type=float, required=True, help="compute per run (or the total, with --total)")
    p.add_argument("--target", type=float, default=None, help="metric to reach: adds P(target) and compute to target")
    p.add_argument("--total", action="store_true", help="--budget is a total to split over up to --max-ways runs")
    p.add_argument("--max-ways", type=int, default=None, help="with --total: most runs to split into (default 4)")
    p.add_argument("--seed", type=_seed, default=0, help="random seed of the fit (default 0)")
    p.add_argument("--fast", action="store_true", help="short chains when fitting a run table")
    p.add_argument("--json", action="store_true", help="print the table and recommendation as JSON")
    _add_prior_option(p)
    p.set_defaults(func=run_decide)


def _no_prior_for_saved_fit(source: Path, forecaster_kwargs: dict | None):
    if forecaster_kwargs:
        raise BadInput(f"--prior: {source} is a saved fit, whose priors were set when it was fitted (they are saved "
                       "with it); give a run table to fit with other priors")


def _warn_fit_flags_ignored(args, source: Path) -> None:
    """Fit settings given with a saved fit: it was fitted with its own, so say they do nothing."""
    given = [flag for flag, on in (("--fast", getattr(args, "fast", False)), ("--robust", getattr(args, "robust", False)),
                                   ("--seed", getattr(args, "seed", 0) != 0)) if on]
    warn_ignored(given, f"{source} is a saved fit, fitted with its own settings; give a run table to fit with these")


def _fit_or_load(source: Path, *, fast: bool, seed: int, forecaster_kwargs: dict | None = None):
    if _is_saved_fit(source):
        _no_prior_for_saved_fit(source, forecaster_kwargs)
        return load_fit(source)
    from .data import load_runs
    from .forecaster import ScalingForecaster

    runs = load_runs(source)
    fc = ScalingForecaster(mode="fast" if fast else "nuts", **(forecaster_kwargs or {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc.fit(runs, random_seed=seed, progress=False)
    return fc


def run_decide(args) -> int:
    from .data import FarFromDataWarning
    from .decisions import MAX_SPLIT_WAYS, decide, decide_split

    if not _positive_finite(args.budget):
        raise BadInput(f"--budget must be finite and > 0, got {args.budget:g}")
    _refuse_target_out_of_range(args.target)
    if args.max_ways is not None and not 1 <= args.max_ways <= MAX_SPLIT_WAYS:
        raise BadInput(f"--max-ways must be between 1 and {MAX_SPLIT_WAYS}, got {args.max_ways}")
    if not args.total and args.max_ways is not None:  # given, even as the default 4
        warn_ignored(["--max-ways"], "it splits a total budget, which needs --total")
    if args.total and args.target is not None:
        warn_ignored(["--target"], "--total compares splits of the budget by their expected best metric")
    source = Path(args.runs)
    if _is_saved_fit(source):
        _warn_fit_flags_ignored(args, source)
    fc = _fit_or_load(source, fast=args.fast, seed=args.seed, forecaster_kwargs=_forecaster_kwargs(args))
    warn_if_far_from_data(fc, [args.budget], "--budget")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FarFromDataWarning)  # said just above, naming --budget
        if args.total:
            decision = decide_split(fc, args.budget, max_ways=4 if args.max_ways is None else args.max_ways)
        else:
            decision = decide(fc, args.budget, target=args.target)
    if args.json:
        from . import __version__

        # stamped, as the fit's summary and the report are: a forwarded decision names what made it
        print(dumps_json({**decision.to_dict(), "diagnostics": fc.diagnostics().to_dict(), "forecast_version": __version__,
                          "fit_forecast_version": fc.posterior.attrs.get("forecast_version"),
                          "data_warnings": fc.data_warnings_}))  # as fit's and report's JSON: kept with the fit
    else:
        print(decision)
    warn_if_unconverged(fc)
    if fc.mode == "fast":  # as fit and report say it: the command that decides said nothing of it
        from .formatting import FAST_FIT_QUICK_LOOK

        warn(f"{FAST_FIT_QUICK_LOOK} (`forecast fit` without --fast)")
    return EXIT_OK


def _add_rule_options(p):
    p.add_argument("--target", type=float, default=None, help="metric to reach within the budget (adds the target rule)")
    p.add_argument("--threshold", type=float, default=None, help="stop when P(beats best by margin) < this (default 0.1)")
    p.add_argument("--margin", type=float, default=None, help="'beats' means by at least this much (default 0.01)")
    p.add_argument("--epsilon", type=float, default=None, help="stop when the expected gain per doubling of compute < this (default 0.002)")
    p.add_argument("--min-gain", type=float, default=None,
                   help="stop when the expected gain to the sweep's best per typical budget of compute left < this (default 0.002)")
    p.add_argument("--min-evals", type=int, default=None, help="no decision before this many evaluations (default 4)")
    p.add_argument("--max-extrapolation", type=float, default=None,
                   help="no decision while the budget is more than this many times the compute so far (default 8)")
    p.add_argument("--max-stop-share", type=float, default=None,
                   help="at most this share of the runs in flight is stopped on comparisons within the last "
                        "stop_cap_window (1.25x) of compute (default 0.5; 1 = no cap)")
    p.add_argument("--protect-top", type=float, default=None,
                   help="never stop a run on another run's forecast while its best evaluation is in the top this-%% "
                        "of the runs at its step (default off)")
    p.add_argument("--keep-runner-up", action=argparse.BooleanOptionalAction, default=None,
                   help="while the run the others are compared with is still in flight, keep the strongest other run "
                        "going until that run has a final (default on)")
    p.add_argument("--rule", action="append", default=[], metavar="NAME=VALUE",
                   help="any other stop-rule setting (a field of forecast.early_stop.EarlyStopConfig), repeatable; "
                        "e.g. --rule p_target_threshold=0.2 --rule keep_leader=false; none turns an optional rule off")
    p.add_argument("--seed", type=_seed, default=0, help="random seed of the refits (default 0)")
    _add_prior_option(p)


RULE_FLAGS = {"target": "--target", "p_beat_threshold": "--threshold", "margin": "--margin",
              "saturation_epsilon": "--epsilon", "min_gain_per_compute": "--min-gain", "min_evals": "--min-evals",
              "max_extrapolation": "--max-extrapolation", "max_stop_share": "--max-stop-share",
              "protect_top_percent": "--protect-top", "keep_runner_up": "--keep-runner-up"}


def _rule_config(args):
    """EarlyStopConfig from the rule flags given; its range checks, reworded with the flag's name."""
    from .early_stop import EarlyStopConfig
    from .settings import parse_settings

    given = {field: getattr(args, flag.removeprefix("--").replace("-", "_")) for field, flag in RULE_FLAGS.items()}
    given = {k: v for k, v in given.items() if v is not None}
    try:
        from_rule = parse_settings(args.rule, EarlyStopConfig, "--rule")
    except ValueError as err:
        raise BadInput(str(err)) from None
    twice = sorted(set(from_rule) & set(given))
    if twice:
        raise BadInput(f"{RULE_FLAGS[twice[0]]} and --rule {twice[0]}=... both set it; give one")
    try:
        return EarlyStopConfig(**from_rule, **given)
    except ValueError as err:
        field, _, rest = str(err).partition(" ")
        flag = f"--rule {field}" if field in from_rule else RULE_FLAGS.get(field, field)
        raise BadInput(f"{flag} {rest}") from None


WATCH_EPILOG = """examples:
  forecast watch out/sweep --budget 4e15 --interval 30
  forecast watch out/sweep --once --json            # one look, JSON lines
  forecast watch out/sweep --target 0.5 --max-polls 100 --out advice.json

Reads RUNS_DIR/*/evals.jsonl (trainer_minimal's run logs) while they are written and writes
the latest recommendation per run to RUNS_DIR/recommendations.json (atomically).
"""


def add_watch_parser(sub):
    p = sub.add_parser("watch", help="follow run logs and recommend continue/stop as evaluations arrive",
                       epilog=WATCH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs_dir", metavar="RUNS_DIR", help="folder of run folders with evals.jsonl")
    p.add_argument("--interval", type=float, default=30.0, help="seconds between polls (default 30)")
    p.add_argument("--budget", type=float, default=None, help="planned compute per run (default: from each run's config.json)")
    p.add_argument("--reference", default=None, help="run table of finished reference runs to compare with")
    p.add_argument("--out", default=None, help="JSON file for the latest advice (default RUNS_DIR/recommendations.json)")
    p.add_argument("--once", action="store_true", help="poll once and exit")
    p.add_argument("--max-polls", type=int, default=None, help="exit after this many polls")
    p.add_argument("--json", action="store_true", help="print each recommendation as one JSON line")
    _add_rule_options(p)
    p.set_defaults(func=run_watch)


FOLDER_WAIT_SECONDS = 60  # a sweep started a moment before its watch makes its folder a few seconds in


def _wait_for_the_folder(runs_dir, *, wait: bool, sleep=None) -> None:
    """BadInput unless runs_dir is a folder. One that does not exist yet is waited for (saying so),
    up to FOLDER_WAIT_SECONDS, unless `wait` is False (--once): `trainer-minimal sweep ... &` then
    `forecast watch` exited 2 while the sweep was still importing torch; a mistyped path still
    ends in the same error, a minute later and with the wait named."""
    import time

    path = Path(runs_dir)
    if path.is_dir():
        return
    if not wait or path.exists():
        raise BadInput(f"{runs_dir}: is not a folder")
    warn(f"{runs_dir} does not exist yet: waiting up to {FOLDER_WAIT_SECONDS} s for it (a sweep just started?)")
    sleep = sleep or time.sleep
    for _ in range(FOLDER_WAIT_SECONDS):
        sleep(1.0)
        if path.is_dir():
            return
    raise BadInput(f"{runs_dir}: is not a folder (waited {FOLDER_WAIT_SECONDS} s for it to appear)")


def _say_if_it_holds_tables_not_logs(runs_dir, *, once: bool) -> None:
    """A folder of run tables (a sweep's runs.csv, evals.csv per run) but no run log was 'waiting for
    evals.jsonl' forever, or with --once exited 0 having advised nothing. Said naming the tables: with
    --once an error, live a warning, since a sweep may yet write its logs there."""
    from .data import RUN_LOG_NAME, run_tables_below

    tables = sorted(str(p.relative_to(runs_dir)) for p in run_tables_below(Path(runs_dir)))
    if not tables:
        return
    shown = ", ".join(tables[:3]) + (f" and {len(tables) - 3} more" if len(tables) > 3 else "")
    message = (f"{runs_dir}: holds no run log ({RUN_LOG_NAME}) but run tables ({shown}): `forecast watch` follows "
               f"trainer_minimal's run logs, RUN/{RUN_LOG_NAME}, as they are written; a table is read by "
               "`forecast report`, `decide` or `backtest`")
    if once:
        raise BadInput(message)
    warn(message + f"; waiting for {RUN_LOG_NAME}")


def watch_start_line(args, polls) -> str:
    """What the watch looks at, how often, where each run's budget comes from and where the advice
    goes, said before the first poll. Without it a watch of a sweep in flight printed nothing until its
    first fit (a minute or more on 2 cores), and never said where recommendations.json went."""
    from .data import RUN_LOG_NAME
    from .formatting import fmt_compute
    from .watch import DEFAULT_OUT_NAME

    out = args.out if args.out is not None else Path(args.runs_dir) / DEFAULT_OUT_NAME
    if polls == 1:
        how = "once"
    else:
        how = f"every {args.interval:g} s" + (f", {polls} polls" if polls else ", until Ctrl-C")
    budget = (f"--budget {fmt_compute(args.budget)} for every run" if args.budget is not None
              else "from each run's config.json (advisor_budget, else max_steps)")
    reference = f"; reference runs from {args.reference}" if args.reference is not None else ""
    return (f"watching {RUN_LOG_NAME} under {args.runs_dir} {how}; planned budget {budget}{reference}; "
            f"advice written to {out} (a line per run when it has new evaluations, after each fit)")


EXIT_TERMINATED = 128 + 15  # as a shell reports a command ended by SIGTERM


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While in the block, SIGTERM (kill, timeout, a scheduler's time limit) raises KeyboardInterrupt, as Ctrl-C
    does, so the command stops where Ctrl-C stops it (a write of recommendations.json is atomic: it keeps its last
    complete version), and yields a list that holds the signal once it came. SIGTERM's default ended `forecast
    watch` with 143 and no word, where Ctrl-C said 'interrupted'. Outside the main thread (a test, a notebook's
    worker) signals cannot be caught, and the block runs as it is."""
    import signal
    import threading

    received = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def interrupt(signum, _frame):
        received.append(signum)
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_watch(args) -> int:
    # a sampler catches the KeyboardInterrupt and the fit raises its own (inference._require_every_draw): the list,
    # not the exception, says that SIGTERM ended the watch
    with sigterm_as_interrupt() as terminated:
        try:
            return _run_watch(args)
        except KeyboardInterrupt:
            if not terminated:
                raise  # Ctrl-C: main() says 'interrupted' (130)
    print("terminated (SIGTERM)", file=sys.stderr)
    return EXIT_TERMINATED


def _run_watch(args) -> int:
    from .formatting import COMMAND_SETTINGS
    from .watch import DEFAULT_OUT_NAME, MAX_WATCH_INTERVAL_S, WatchedFolderGone, watch

    config = _rule_config(args)
    if args.budget is not None and not _positive_finite(args.budget):
        raise BadInput(f"--budget must be finite and > 0, got {args.budget:g}")
    # nan and inf (or a wait beyond the platform's limit) would pass a check for < 0 and fail in
    # time.sleep, with a traceback, after the first poll's fit; a wait sleeps to a deadline of now plus
    # the interval, so threading.TIMEOUT_MAX itself overflowed too: a week is far beyond any sweep's poll
    if not 0 <= args.interval <= MAX_WATCH_INTERVAL_S:
        raise BadInput(f"--interval must be a number of seconds >= 0 (at most {MAX_WATCH_INTERVAL_S:.0f}, a week), "
                       f"got {args.interval:g}")
    if args.max_polls is not None and args.max_polls < 1:
        raise BadInput(f"--max-polls must be >= 1, got {args.max_polls}")
    _wait_for_the_folder(args.runs_dir, wait=not args.once)
    _say_if_it_holds_tables_not_logs(args.runs_dir, once=args.once)
    if args.out is None and not os.access(args.runs_dir, os.W_OK | os.X_OK):  # the advice goes in RUNS_DIR
        raise BadInput(f"{args.runs_dir}: cannot write {DEFAULT_OUT_NAME} in it (read-only or not yours); "
                       "give --out FILE in a folder you can write")
    if args.reference is not None and not Path(args.reference).exists():
        raise BadInput(f"--reference {args.reference}: does not exist")
    # the advice written over a run log or the reference table would destroy it
    inputs = (args.runs_dir,) if args.reference is None else (args.runs_dir, args.reference)
    _check_output_file(args.out, "--out", "recommendations.json", source=inputs)
    if args.once and args.max_polls not in (None, 1):
        warn(f"--max-polls {args.max_polls} has no effect with --once (one poll)")
    polls = 1 if args.once else args.max_polls
    if args.json:
        def emit(rec):
            print(dumps_json(rec.to_dict(), indent=None), flush=True)

        def say(text):
            print(text, file=sys.stderr, flush=True)
    else:
        emit = None

        def say(text):
            print(text, flush=True)

    say(watch_start_line(args, polls))
    try:
        state = watch(args.runs_dir, interval=args.interval, budget=args.budget, config=config, reference=args.reference,
                      out=args.out, max_polls=polls, emit=emit, say=say, warn=warn, random_seed=args.seed,
                      forecaster_kwargs=_forecaster_kwargs(args), settings=COMMAND_SETTINGS)
    except WatchedFolderGone as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    if state.refused:
        # a bad row is bad input: with every run refused, `--once` exited 0 having advised nothing, and a
        # script could not tell that from a folder with nothing to advise (the other runs' advice is written)
        runs = sorted(state.refused)
        print(f"error: {len(runs)} run(s) left out at the last poll for their data ({', '.join(runs)}: said above, "
              "naming file, column and row); mend the rows and watch again", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


BACKTEST_EPILOG = """examples:
  forecast backtest examples/trainer_sweep/runs.csv
  forecast backtest runs.csv --policies forecast,median --json
  forecast backtest runs.csv --policies median,successive_halving --median-percentile 25 --halving-eta 3
  forecast backtest simulated.csv --truth true_metric

Replays finished runs as if live (all runs in parallel, evaluations revealed in compute order)
under each policy, and reports compute used (fraction of running everything to the end) and
regret (true best final - final of the run chosen; final = mean of the last 3 evaluations).
A measured final carries evaluation noise; where the table knows each evaluation's true pass rate
(a simulated sweep's true_metric, or a replica from forecast.backtest.resample_evaluation_noise),
--truth scores regret on it, the policies still seeing only the measured metric.
"""


def add_backtest_parser(sub):
    from_policies = "forecast,median,successive_halving,least_squares,no_stopping"
    p = sub.add_parser("backtest", help="replay finished runs under early-stop policies: compute saved vs regret",
                       epilog=BACKTEST_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", help="run table or folder of run logs (finished runs)")
    p.add_argument("--policies", default=from_policies, help=f"comma list (default {from_policies})")
    p.add_argument("--growth", type=float, default=None, help="decide each time compute grows by this factor (default 1.25)")
    p.add_argument("--halving-eta", type=int, default=None,
                   help="successive halving keeps the best 1/eta at each rung, rungs eta times apart (default 4)")
    p.add_argument("--median-percentile", type=float, default=None,
                   help="the median rule stops a run whose best value so far is below the (100 - this)th "
                        "percentile of the other runs at its step, as Optuna's PercentilePruner "
                        "(default 50 = MedianPruner; smaller stops more)")
    p.add_argument("--median-startup", type=int, default=None, metavar="N",
                   help="the median rule judges a run only beside at least N other runs at its step, as Optuna's "
                        "n_startup_trials (default 5)")
    p.add_argument("--truth", default=None, metavar="COLUMN",
                   help="score regret on this column of true pass rates (e.g. true_metric of a simulated sweep) "
                        "instead of the measured finals; the policies never see it")
    p.add_argument("--json", action="store_true", help="print per policy compute_fraction, regret and the rest as JSON")
    p.add_argument("--out", default=None, help="also write the JSON result to this file")
    _add_rule_options(p)
    p.set_defaults(func=run_backtest)


def _warn_if_runs_in_flight(runs, source: Path) -> None:
    """A backtest replays finished runs: its regret takes each run's last evaluation as its final.
    In a folder of run logs, a run without summary.json (or stopped.json) has not finished (a sweep
    still in flight), and one with stopped.json was ended early by the trainer's advisor: both are said.
    A table, or a folder of tables (no run logs in it: load_runs read its tables), says it in its
    `ended` column."""
    from .data import run_logs_below

    folders = sorted((log.parent for log in run_logs_below(source)), key=lambda folder: folder.name) \
        if source.is_dir() else []
    if not folders:
        _warn_if_table_says_runs_in_flight(runs, source)
        return
    from .watch import is_finished, stopped_by_advisor

    _say_runs_in_flight(source, [folder.name for folder in folders if not is_finished(folder)], "have no summary.json",
                        # a sweep trained with --advisor-every: its stopped runs look finished (summary.json), but ended early
                        [folder.name for folder in folders if stopped_by_advisor(folder)], "stopped.json")


def _warn_if_table_says_runs_in_flight(runs, source: Path) -> None:
    """The same two warnings for a run table whose `ended` column (a trainer sweep's runs.csv) says how
    its runs ended: read from the table, a sweep's advisor-stopped runs were scored as finished without
    a word. A table without the column says nothing of it, and nothing is said."""
    from .data import ENDED_COLUMN

    if ENDED_COLUMN not in runs.columns:
        return
    ended = runs.drop_duplicates("run_id").set_index("run_id")[ENDED_COLUMN]
    _say_runs_in_flight(source, sorted(map(str, ended.index[ended == ""])), f"have an empty '{ENDED_COLUMN}' column",
                        sorted(map(str, ended.index[ended == "advisor_stopped"])), f"{ENDED_COLUMN} advisor_stopped")


def _say_runs_in_flight(source, unfinished: list[str], unfinished_because: str, stopped: list[str],
                        stopped_because: str) -> None:
    """The backtest's two warnings, each with how it is known (a folder's files, or a table's column)."""
    from .formatting import names_shown

    if unfinished:
        warn(f"{len(unfinished)} run(s) in {source} {unfinished_because} and may still be training "
             f"({names_shown(unfinished, 6)}): the backtest takes their last evaluation as their final, so its "
             "regret and compute are of unfinished runs")
    if stopped:
        warn(f"{len(stopped)} run(s) in {source} were stopped early by their own advisor ({stopped_because}: "
             f"{names_shown(stopped, 6)}): the backtest takes where each stopped as its end and final, so "
             "'no_stopping' is the sweep as it ran, not every run to its end, and regret is judged on those early finals")


def run_backtest(args) -> int:
    from .backtest import (
        MIN_CHECK_GROWTH,
        POLICIES,
        BacktestConfig,
        backtest,
        repeated_policies,
        unconverged_refits_said,
    )
    from .data import load_runs
    from .io import atomic_write_json

    _check_output_file(args.out, "--out", "backtest.json", source=args.runs)
    from .formatting import did_you_mean

    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [f"'{p}'" + (f" ({hint})" if (hint := did_you_mean(p, POLICIES)) else "") for p in policies if p not in POLICIES]
    if unknown or not policies:
        raise BadInput(f"--policies: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(POLICIES)}")
    if repeated := repeated_policies(policies):
        raise BadInput(f"--policies: {', '.join(repeated)} given more than once")
    if args.growth is not None and not (math.isfinite(args.growth) and args.growth >= MIN_CHECK_GROWTH):
        raise BadInput(f"--growth must be finite and at least {MIN_CHECK_GROWTH:g} (a check when compute has grown "
                       f"by that factor), got {args.growth:g}")
    if args.halving_eta is not None and args.halving_eta < 2:
        raise BadInput(f"--halving-eta must be an integer >= 2, got {args.halving_eta}")
    if args.median_percentile is not None and not 0 <= args.median_percentile <= 100:
        raise BadInput(f"--median-percentile must lie in [0, 100], got {args.median_percentile:g}")
    if args.median_startup is not None and args.median_startup < 1:
        raise BadInput(f"--median-startup must be an integer >= 1, got {args.median_startup}")
    rules = _rule_config(args)
    config = BacktestConfig(early_stop=rules, min_evals=rules.min_evals, random_seed=args.seed,
                            forecaster_kwargs=_forecaster_kwargs(args))
    if args.growth is not None:
        config.check_growth = args.growth
    if args.halving_eta is not None:
        config.halving_eta = args.halving_eta
    if args.median_percentile is not None:
        config.median_percentile = args.median_percentile
    if args.median_startup is not None:
        config.median_n_startup = args.median_startup
    _refuse_a_saved_fit(Path(args.runs), "backtest")
    runs = load_runs(args.runs)
    if args.truth is not None:
        _check_truth_column(runs, args.truth, args.runs)
    _warn_if_runs_in_flight(runs, Path(args.runs))
    _warn_if_nothing_to_decide(runs, config.min_evals)
    if "median" in policies:
        _warn_if_the_median_rule_never_judges(runs, config.median_n_startup)
    result = backtest(runs, policies, config, truth=args.truth)
    result.source = str(args.runs)
    # the printed table has this warning's line; a terminal that shows both had it twice
    said_in_table = not args.json and stdout_and_stderr_together()
    for policy in result.results:  # as every command showing numbers from a fit (warn_if_unconverged)
        if policy.notes.get("unconverged_fits") and not said_in_table:
            warn(unconverged_refits_said(policy))
    from . import __version__

    payload = {**result.to_dict(), "forecast_version": __version__}
    if args.out:
        atomic_write_json(args.out, payload)
    if args.json:
        print(dumps_json(payload))
    else:
        print(result)
        scored_on = f" of column '{args.truth}', the true pass rates" if args.truth not in (None, "metric") else ""
        print(f"\ncompute_fraction = compute used / running every run to its end; regret = true best final - "
              f"final of the chosen run (final = mean of the last {config.smooth_last} evaluations{scored_on})")
    return EXIT_OK


def _warn_if_nothing_to_decide(runs, min_evals: int) -> None:
    """A backtest of one run, or of runs that never reach min_evals evaluations, scores policies
    on nothing: least squares "saved" 86% of a lone run's compute beside a ceiling of 0%."""
    n_runs = runs["run_id"].nunique()
    if n_runs < 2:
        warn(f"the table holds {n_runs} run: a stopping policy needs runs to compare, so its figures mean nothing here")
    elif runs.groupby("run_id").size().max() < min_evals:
        warn(f"no run has {min_evals} evaluations (min_evals), where the policies start deciding: every policy runs every run")


def _warn_if_the_median_rule_never_judges(runs, n_startup: int) -> None:
    """A sweep of 4 runs printed 'median 0.0% saved' with no reason: the rule judges a run only beside
    n_startup others at its step, which it never has there."""
    n_runs = runs["run_id"].nunique()
    if 1 < n_runs <= n_startup:
        warn(f"the median rule judges a run only beside {n_startup} other runs at its step, and the table holds "
             f"{n_runs} runs: it stops none here (--median-startup sets the number, Optuna's n_startup_trials)")


def _refuse_a_saved_fit(source: Path, command: str) -> None:
    """fit and backtest read runs: a saved fit given to them failed on its summary.json, or on .nc as a file type."""
    if _is_saved_fit(source):
        raise BadInput(f"{source}: is a saved fit; `forecast {command}` reads a run table or a folder of run logs "
                       "(the fit's own runs: the table it was fitted on)")


def _check_truth_column(runs, column: str, source) -> None:
    """--truth must name a column of pass rates; RunDataError names the file, column, run and row
    of the first value that is not one."""
    from .data import require_rates
    from .formatting import names_shown

    if column not in runs:
        # as load_runs says a missing column: with the ones there are, not the reader's own (_line, _source)
        present = [str(name) for name in runs.columns if str(name) not in ("_line", "_source")]
        raise BadInput(f"{source}: --truth column '{column}' is not in the run table "
                       f"(columns present: {names_shown(present, 20)})")
    require_rates(runs, column)


# ----------------------------------------------------------------------------- cross-validate

CROSS_VALIDATE_EPILOG = """examples:
  forecast cross-validate examples/trainer_sweep/runs.csv
  forecast cross-validate runs.csv --cuts 0.25,0.5 --level 0.9 --out cv.csv
  forecast cross-validate runs.csv --cuts 0.5 --fast --json

Each cut hides every run's evaluations beyond that fraction of its final compute, fits the model
to the rest (one full fit per cut) and forecasts the hidden ones. With honest intervals the 90%
interval holds about 90% of them; the summary says how far from that chance can move it for the
number of runs, how far the forecasts ran low or high, and ours' error beside least squares'.
"""


def add_cross_validate_parser(sub):
    p = sub.add_parser("cross-validate", help="hide curve ends, forecast them: interval coverage and error on your runs",
                       epilog=CROSS_VALIDATE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", help="run table or folder of run logs")
    p.add_argument("--cuts", default="0.25,0.5",
                   help="fractions of each run's final compute to cut at, comma separated; one fit each (default 0.25,0.5)")
    p.add_argument("--level", type=float, default=0.9, help="the central interval checked (default 0.9)")
    p.add_argument("--seed", type=_seed, default=0, help="random seed (default 0)")
    p.add_argument("--fast", action="store_true", help="short chains: quicker, and noisier intervals")
    p.add_argument("--robust", action="store_true", help="Student-t likelihood for outliers")
    p.add_argument("--unknown-budget", action="store_true",
                   help="fit as if the compute the runs went on to reach were not known (without fit's --horizon)")
    p.add_argument("--json", action="store_true", help="print the metrics, summary and fits as JSON")
    p.add_argument("--out", default=None, help="also write one row per hidden evaluation to this CSV file")
    _add_prior_option(p)
    p.set_defaults(func=run_cross_validate)


def _cuts_from(text: str) -> tuple[float, ...]:
    from .cross_validation import checked_cuts

    try:
        return checked_cuts([float(part) for part in text.split(",") if part.strip()])
    except ValueError as err:
        raise BadInput(f"--cuts {text}: {err}") from None


def run_cross_validate(args) -> int:
    from .cross_validation import (
        cross_validate,
        describe_cross_validation,
        performance_metrics,
        splits_at,
    )
    from .data import load_runs
    from .io import atomic_path

    cuts = _cuts_from(args.cuts)
    if not 0 < args.level < 1:
        raise BadInput(f"--level must lie in (0, 1), e.g. 0.9; got {args.level:g}")
    _check_output_file(args.out, "--out", "cv.csv", source=args.runs)
    forecaster_kwargs = _forecaster_kwargs(args)
    _refuse_a_saved_fit(Path(args.runs), "cross-validate")
    runs = load_runs(args.runs)
    try:
        splits_at(runs, cuts)
    except ValueError as err:  # a cut no run has three evaluations before: named as given, as _cuts_from names it
        raise BadInput(f"--cuts {args.cuts}: {args.runs}: {err}") from None
    from .forecaster import ScalingForecaster  # PyMC loads here, after the table is checked

    template = ScalingForecaster(robust=args.robust, mode="fast" if args.fast else "nuts", **forecaster_kwargs)
    cv = cross_validate(runs, cuts=cuts, level=args.level, forecaster=template, random_seed=args.seed,
                        planned_budget=not args.unknown_budget, say=lambda line: print(line, file=sys.stderr, flush=True))
    metrics = performance_metrics(cv)
    summary = describe_cross_validation(cv, metrics)
    if args.out:
        with atomic_path(args.out) as tmp:
            cv.to_csv(tmp, index=False)
    if args.json:
        from . import __version__

        print(dumps_json({"forecast_version": __version__, "level": cv.attrs["level"], "compute_unit": cv.attrs["compute_unit"],
                          "metrics": metrics.to_dict(orient="records"), "summary": summary, "fits": cv.attrs["fits"]}))
    else:
        import pandas as pd

        with pd.option_context("display.width", 160, "display.max_columns", 20):
            # -0.0004 as 0.000, not -0.000 (as the report's table has it)
            print(metrics.to_string(index=False, float_format=lambda v: f"{round(v, 3) or 0.0:.3f}"))
        print("\ncoverage: share of hidden evaluations inside the central interval; mean_error: observed - forecast "
              "(> 0: forecasts ran low); z_rms: root mean square of standardised errors (> 1: intervals narrower than the errors)\n")
        print("\n".join(summary))
        if args.out:
            print(f"\nwrote {args.out}")
    said_in_summary = not args.json and stdout_and_stderr_together()  # its first lines: a terminal had them twice
    for fit in cv.attrs["fits"]:
        if not fit["converged"] and not said_in_summary:
            warn(f"cut {fit['cut']:g}: the fit did not converge, so treat its figures with suspicion: " + "; ".join(fit["problems"]))
    return EXIT_OK


# ----------------------------------------------------------------------------- main

# Each entry adds one subcommand. Modules are imported lazily so `forecast --help` stays fast.
COMMANDS = [
    ("forecast.cli", "add_fit_parser"),
    ("forecast.cli", "add_predict_parser"),
    ("forecast.cli", "add_report_parser"),
    ("forecast.cli", "add_decide_parser"),
    ("forecast.cli", "add_watch_parser"),
    ("forecast.cli", "add_backtest_parser"),
    ("forecast.cli", "add_cross_validate_parser"),
]


class NumbersParser(argparse.ArgumentParser):
    """argparse, with "-1e12" read as a (negative) number like "-1" and "-0.5": Python 3.11's
    argparse takes it for an unknown flag, so `--budget -1e12` said "expected one argument"
    instead of our "--budget must be finite and > 0". (Python 3.13's own pattern covers it.) So is
    "-inf" (and "-nan", "-Infinity"), which float() reads and no pattern of argparse's covers: it
    said "expected one argument", naming no value. The trainer's parser is one too."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\d+$|^-\d*\.\d+$|^-(\d+\.?\d*|\.\d+)[eE][-+]?\d+$"
                                                   r"|^-(?i:inf|infinity|nan)$")

    def _check_value(self, action, value):
        """argparse's refusal of a name outside `choices` (a command, --kind, the trainer's --loss-type),
        with the likely name first, as a mistyped --recipe gets it: "invalid choice: 'rn' (did you mean
        'run'?); choose from 'run', ...". A name with no close one keeps argparse's own words."""
        from .formatting import did_you_mean

        if action.choices is not None and value not in action.choices:
            if hint := did_you_mean(str(value), action.choices):
                raise argparse.ArgumentError(action, f"invalid choice: {value!r} ({hint}); "
                                                     f"choose from {', '.join(map(repr, action.choices))}")
        super()._check_value(action, value)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = NumbersParser(
        prog="forecast",
        description="Bayesian forecasts of RL compute scaling (ScaleRL sigmoid), and decisions built on them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"forecast (scaling-forecast) {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module, function in COMMANDS:
        try:
            adder = getattr(importlib.import_module(module), function)
        except (ImportError, AttributeError):
            continue  # a command whose module is not present in this build
        adder(sub)
    parser.commands = sub.choices  # name -> its parser, for errors in the command's own words
    return parser


def repeated_flag(command_parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """A value-taking flag given twice, which argparse settles silently by keeping the last (a
    pasted command with `--budget 1e5 ... --budget 1e6` decides at 1e6 without a word); None if none.
    Flags meant to repeat (--prior, --rule) and on/off switches (--fast twice means --fast) pass.
    A flag abbreviated as argparse allows (--bud for --budget) counts as the flag it stands for, and
    a short flag with its value attached (-oreport.html) as the short flag."""
    spelled = [token.split("=", 1)[0] if token.startswith("--") else token[:2] for token in argv if token.startswith("-")]
    for action in command_parser._actions:
        if not action.option_strings or action.nargs == 0 or isinstance(action, argparse._AppendAction):
            continue
        given = [name for name in spelled if _flag_meant(command_parser, name) in action.option_strings]
        if len(given) > 1:
            return "/".join(dict.fromkeys(given))
    return None


def _flag_meant(command_parser: argparse.ArgumentParser, name: str) -> str:
    """The option a token names: itself, or the one long option it is the unique prefix of."""
    options = command_parser._option_string_actions
    if name in options or not name.startswith("--"):
        return name
    matches = [option for option in options if option.startswith(name)]
    return matches[0] if len(matches) == 1 else name


# the arguments that name a file or folder. "~/runs.csv" quoted, or after "=" (--out=~/fit), reaches
# the command unexpanded; load_runs, save() and load() expand it (2a9c501), so the checks around them
# and the provenance written (summary.json's input) must see the same path: they took "~" for a folder
PATH_ARGUMENTS = ("runs", "runs_dir", "fit_dir", "out", "cross_validation", "reference")
POSITIONAL_PATHS = ("runs", "runs_dir", "fit_dir")  # said without a flag


def _expand_home(args) -> None:
    for name in PATH_ARGUMENTS:
        if isinstance(value := getattr(args, name, None), str):
            setattr(args, name, os.path.expanduser(value))


# What to give each flag that takes a list, when its value is empty: an unset shell variable (`--compute "$C"`)
# was said as 'compute is empty', naming no flag, and `--prior ""` or `--rule ""` was no setting at all (the
# command ran on the defaults without a word)
EMPTY_LIST_HINTS = {
    "compute": "give at least one compute value, e.g. --compute 4e12",
    "prior": "give NAME=VALUE, e.g. --prior b_mu=0.5",
    "rule": "give NAME=VALUE, e.g. --rule p_beat_threshold=0.05",
    "policies": "give a comma list of policies, e.g. --policies forecast,median (or leave it out for the default)",
    "cuts": "give at least one fraction of each run's compute, e.g. --cuts 0.5 (or leave it out for the default)",
}


# an empty path is the current folder to the file system: `fit --out "$OUT"` with OUT unset wrote fit.nc there,
# and `decide "$FIT"` read whatever fit or run table was there
EMPTY_PATH_HINT = "give a path (an empty one is read as the current folder)"


def _refuse_empty_values(command_parser, args) -> None:
    """BadInput naming the first argument given a value with nothing in it: a list of EMPTY_LIST_HINTS (only
    blanks and commas; a blank item inside a list, 'a=1,,b=2', is a typo the parsers pass over) or a path
    (PATH_ARGUMENTS: only blanks)."""
    for action in command_parser._actions:
        if action.dest not in EMPTY_LIST_HINTS and action.dest not in PATH_ARGUMENTS:
            continue
        value = getattr(args, action.dest, None)
        items = value if isinstance(value, list) else [value]
        separators = "," if action.dest in EMPTY_LIST_HINTS else ""
        if any(isinstance(item, str) and not item.strip(separators + " \t\n") for item in items):
            # a positional as its usage line shows it: its metavar, or argparse's own name for it (its dest, as is)
            name = max(action.option_strings, key=len) if action.option_strings else action.metavar or action.dest
            raise BadInput(f"{name} is empty: {EMPTY_LIST_HINTS.get(action.dest, EMPTY_PATH_HINT)}")


def _refuse_unusable_paths(args) -> None:
    """BadInput naming a path argument that cannot be looked at: a link that loops, a name too long for
    the file system, a folder on the way that may not be entered. Each was a traceback out of the first
    check to touch it (pathlib's resolve() raises RuntimeError on a loop, exists() the others); a
    path that is not there is left to each command, which says so (or, for watch, waits for it)."""
    for name in PATH_ARGUMENTS:
        if not isinstance(value := getattr(args, name, None), str):
            continue
        try:
            os.stat(value)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as err:
            flag = "" if name in POSITIONAL_PATHS else f"--{name.replace('_', '-')} "
            hint = ": ask its owner, or use a path you can read and write" if isinstance(err, PermissionError) else ""
            raise BadInput(f"{flag}{value}: {err.strerror.lower()}{hint}") from None


def main(argv=None) -> int:
    from forecast.cli import BadInput as RegisteredBadInput

    from .data import RunDataError

    # Run as `python -m forecast.cli`, this file is both __main__ and forecast.cli, and handlers
    # raise forecast.cli.BadInput: catch both classes so bad input always exits 2.
    bad_input = (RunDataError, BadInput, RegisteredBadInput)
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # said by the command's own parser: its usage line lists the flags it does take
        parser.commands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    command_parser = parser.commands.get(getattr(args, "command", None))
    repeated = command_parser and repeated_flag(command_parser, list(sys.argv[1:] if argv is None else argv))
    if repeated:
        command_parser.error(f"{repeated} is given more than once; give it once (only the last would count)")
    if not getattr(args, "func", None):  # no command: a usage error, said where the others are (stdout may be a JSON file)
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    _expand_home(args)
    try:
        _refuse_empty_values(command_parser, args)
        _refuse_unusable_paths(args)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*BLAS.*")
            warnings.showwarning = _show_warning  # restored when the block ends
            return int(args.func(args) or 0)
    except bad_input as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader closed early (`forecast backtest ... --json | head`): it has what it wanted.
        # Point stdout at devnull so the flush at exit raises no second error, and exit as a
        # command killed by SIGPIPE does, without a traceback.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (AttributeError, OSError, ValueError):  # stdout is not a file (a notebook, a test)
            pass
        return EXIT_BROKEN_PIPE
    except PermissionError as err:
        # a path in a folder that may be listed but not entered (another user's): pathlib's exists() and
        # is_dir() raise it (Python < 3.12), in every check made on a path before it is read or written
        where = f"{err.filename}: " if err.filename else ""
        print(f"error: {where}permission denied: ask its owner, or use a path you can read and write", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as err:
        if (code := said_os_error(err)) is None:
            raise
        return code


def said_os_error(err: OSError) -> int | None:
    """Say in one line, on stderr, a result that could not be written (forecast.io.WriteFailed: its folder
    deleted, made read-only or a folder in its place meanwhile, a full disk) or another failure of the
    machine (too many open files, a failing disk: RESOURCE_ERRORS), and return the exit code: 2 where the
    path itself refuses the file (as the checks before any work say it), else 1. Results are written
    atomically, so a file already there is as it was. None for any other OSError, which is a bug's."""
    from .io import WriteFailed

    if (message := resource_error_message(err)) is None:
        return None
    print(f"error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT if isinstance(err, WriteFailed) and err.path_refuses else EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
