"""`forecast watch RUNS_DIR`: follow run logs while they are written and recommend continue/stop.

Every `interval` seconds the folder's run logs (`*/evals.jsonl`, as trainer_minimal writes) are
read again. When any run has new evaluations (or rows rewritten: _row_versions), the model is
refitted on all of them (fast mode; a few new evaluations of the same runs are absorbed by reweighting the last posterior, see
ScalingForecaster.refit) and every run still in flight gets a Recommendation (forecast.early_stop), printed and written
atomically to a JSON file, so a scheduler or a person can act on it. A run whose last third falls away from
its fitted curve (forecast.shape_check) has that said on its line and in its details (noting_misshapen_runs).

Logs are read while trainers append to them: a torn last line (a write in progress) is skipped by
forecast.data's reader and picked up whole at the next poll. A run is finished when its folder
holds summary.json (trainer_minimal writes it at the end, stopped or not), or stopped.json (its own
advisor stopped it, and it was killed before its summary: it stays stopped); finished runs are
alternatives for the others, judged where they ended. A run that ends while watched is said once,
with how it ended (stopped by its own advisor, from the stopped.json trainer_minimal's --advisor-every
writes, or finished), and listed under "ended" in the JSON. A run with a bad row (or one that only
conflicts with the others, e.g. another compute unit, or one logged in two folders: a copied run
folder) is left out, said once, listed under "refused" in the JSON, and looked at again when its log changes; the other runs are still advised.
A log that cannot be read as rows (a bad line before the last, a line that is not a JSON object,
rows without run_id) refuses its run the same way. A run whose log is deleted or emptied loses its
advice, said once and listed under "gone" (the others are advised again without it); while the folder
itself cannot be listed no run is taken as gone: each keeps its last advice, unknown ("unlisted"). The JSON
keeps the runs told to stop on comparisons, so a restarted watch of the same folder counts them
against the stop cap as the first one did. A reference table (--reference) is read and checked
once, at the start, so a bad row in it stops the watcher before the first poll, not hours later;
one that counts compute in another unit than the runs stops it at the first poll that reads them.

Planned budget per run: --budget if given, else the run folder's config.json (advisor_budget, or
max_steps times the compute per step so far), else its log's planned_compute column (the latest
evaluation's: forecast.hf_callback writes it), else the run gets a "no_budget" continue.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__
from .data import (
    ENDED_COLUMN,
    RUN_LOG_NAME,
    UNSPECIFIED_UNIT,
    RunDataError,
    _beyond_float_range,
    _reason,
    compute_unit_of,
    data_warning_topic,
    data_warnings_of,
    far_from_data,
    how_run_folder_ended,
    load_runs,
    read_table,
    require_names,
    run_logs_below,
    validate_runs,
)
from .early_stop import (
    COMPARISON_RULES,
    CONTINUE,
    EarlyStopConfig,
    Recommendation,
    advice_pad,
    check_random_seed,
    checked_forecaster_kwargs,
    checked_rules,
    fit_for_advice,
    noting_misshapen_runs,
    recent_comparison_stops,
    recommend_runs,
    reference_rows,
    rests_on_an_unconverged_fit,
    seed_of_fit,
    what_did_not_converge,
)
from .formatting import PYTHON_SETTINGS, SettingNames, fmt_compute, name_of
from .inference import as_real, is_whole_number
from .io import atomic_write_json, resource_error_message

__all__ = ["WatchState", "scan_runs", "planned_budget", "advise_table", "poll", "watch", "DEFAULT_OUT_NAME",
           "WatchedFolderGone"]

DEFAULT_OUT_NAME = "recommendations.json"


@dataclass
class WatchState:
    """What the watcher remembers between polls."""

    # run_id -> (evaluations, digest of their values) at the last advice (_row_versions): a log rewritten
    # to as many rows (a resumed run's, a bad row fixed in place) is news, as a new row is
    seen: dict = field(default_factory=dict)
    latest: dict = field(default_factory=dict)  # run_id -> latest Recommendation
    polls: int = 0
    fits: int = 0
    forecaster: object = None  # the last fit, refitted (reweighted when it can be) at the next poll
    # (compute reached by the runs in flight, the runs first told to stop on a comparison then): the
    # stop cap counts those that have ended over EarlyStopConfig.stop_cap_window of compute, since
    # advice comes after every evaluation
    comparison_stops: list = field(default_factory=list)
    finished: set = field(default_factory=set)  # runs whose folder holds summary.json (or stopped.json)
    # run_id -> how it ended (its summary.json, and stopped.json when its own advisor stopped it):
    # without it a run told 'continue' vanished from the lines and the JSON when it ended, and a stop
    # by the trainer's advisor was never said
    ended: dict = field(default_factory=dict)
    # lines for watch() to say once: runs that ended since the last poll, the folder listed again
    ended_lines: list = field(default_factory=list)
    # run_id -> (its rows' version, why they were refused): a run with a bad row is left out of
    # the fits, and advised again once its log changes, instead of stopping advice for every run
    refused: dict = field(default_factory=dict)
    # refused runs whose log could not be read at all (run -> log): read again at every poll, and
    # cleared from `refused` when the log reads again or is gone
    unreadable: dict = field(default_factory=dict)
    folders: dict = field(default_factory=dict)  # run_id -> its folder, as last seen: names an unreadable log's run
    gone: dict = field(default_factory=dict)  # run_id -> why: its log was deleted or emptied after it was seen
    # why the watched folder itself cannot be listed (None while it can): no log is read then, so no run is
    # known gone, and each keeps its last advice, said as unknown (_folder_unlisted)
    unlisted: str | None = None
    budget_checked: bool = False  # the --budget unit check is made once, when the first rows are read
    notes: list = field(default_factory=list)  # warnings for watch() to say once (then cleared)
    compute_unit: str = UNSPECIFIED_UNIT  # the runs' compute_unit, which each printed line writes after its compute

    @property
    def told_to_stop(self) -> set:
        """Runs told to stop on a comparison so far."""
        return set().union(*(runs for _, runs in self.comparison_stops))


def scan_runs(runs_dir) -> tuple[pd.DataFrame, dict[str, Path], dict[Path, RunDataError]]:
    """All evaluation rows under `runs_dir`, the folder of each run, and the logs that cannot be
    read as rows (log -> the error naming file, column and row). Logs that are empty or hold only a
    torn first line are skipped silently (the run has not evaluated yet)."""
    runs_dir = Path(runs_dir)
    frames, folders, unreadable = [], {}, {}
    for log in run_logs_below(runs_dir, warn_unread=True):
        try:
            frame = read_table(log)
            _require_run_ids(frame, log)
        except RunDataError as err:
            if not _has_complete_line(log):
                continue  # no complete row yet (or the log went between listing and reading)
            unreadable[log] = err  # a bad line that is not a write in progress: the user's to fix
            continue
        frames.append(frame)
        for run in frame["run_id"].map(name_of).unique():  # named as load_runs names it: run 3.0 is '3'
            folders[run] = log.parent
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if len(table):
        table["run_id"] = table["run_id"].map(name_of).astype(str)
    return table, folders, unreadable


def _has_complete_line(log: Path) -> bool:
    """Whether the log holds a non-blank line ended by a newline. The reader skips a torn last
    line (a write in progress), so a log without such a line has simply not evaluated yet."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return False  # deleted while the folder was scanned: gone, not bad
    except OSError:
        return True  # there but unreadable (another user's, permission denied): its run is refused and said, not skipped
    return bool(text[: text.rfind("\n") + 1].strip())


def _require_run_ids(frame: pd.DataFrame, log: Path) -> None:
    """Every row of a run log names its run (validate_runs checks the rest once the logs are joined)."""
    if "run_id" not in frame:
        raise RunDataError("is missing on every row", source=log, column="run_id", row=int(frame["_line"].iloc[0]))
    require_names(frame, "run_id")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _unreadable_json(path: Path) -> str | None:
    """Why a file that is there cannot be read as JSON, or None when it can."""
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return f"{path} cannot be read as JSON ({type(err).__name__}: {err})"
    return None


def planned_budget(folder: Path | None, rows: pd.DataFrame, override: float | None = None) -> float | None:
    """Planned compute of one run: the override, else what its config.json implies, else its log's
    latest `planned_compute` (written by forecast.hf_callback), else None."""
    return planned_budget_or_why_not(folder, rows, override)[0]


def planned_budget_or_why_not(folder: Path | None, rows: pd.DataFrame, override: float | None = None):
    """(planned budget, None), or (None, why config.json gives none: its file and value, or None
    where it just says nothing). A hand-edited config.json (max_steps "lots", -5, a list) used to
    raise out of the whole poll, so one run's file stopped the advice for every run."""
    if override:
        return float(override), None
    if folder is None:
        return None, None
    path = folder / "config.json"
    config = _read_json(path)
    if config == {} and path.is_file() and (problem := _unreadable_json(path)):
        return None, problem  # cut short, or edited by hand: said, where "no planned budget known" hid it
    if not isinstance(config, dict):
        return None, f"{path} is not a JSON object"
    advisor_budget, problem = _config_number(config, "advisor_budget", path)
    if advisor_budget is not None or problem:
        return advisor_budget, problem
    max_steps, problem = _config_number(config, "max_steps", path)
    if max_steps is not None and "step" in rows and (last := _latest_with(rows, "step")) is not None:
        if last["step"] > 0:
            budget = float(last["compute"] / last["step"] * max_steps)
            return (budget, None) if math.isfinite(budget) else (None, f"{path}: max_steps {max_steps:g} is too large")
    if problem is None and (logged := logged_planned_compute(rows)) is not None:
        return logged, None
    return None, problem


def logged_planned_compute(rows: pd.DataFrame) -> float | None:
    """The planned compute a run's own log gives (column planned_compute, its latest evaluation's:
    forecast.hf_callback writes it, having no trainer config.json to put it in), or None."""
    if "planned_compute" not in rows:
        return None
    last = _latest_with(rows, "planned_compute")
    value = float(last["planned_compute"]) if last is not None else math.nan
    return value if math.isfinite(value) and value > 0 else None


def _latest_with(rows: pd.DataFrame, column: str) -> pd.Series | None:
    """The run's evaluation of largest compute that gives `column`, its compute and `column` as numbers
    (None where none gives it). A log's rows are as written, before validation: numbers written as
    text ("40"), which validate_runs reads as numbers, raised on a sort beside numbers, or sorted as text."""
    numbers = pd.DataFrame({"compute": pd.to_numeric(rows["compute"], errors="coerce"),
                            column: pd.to_numeric(rows[column], errors="coerce")}).dropna()
    return numbers.sort_values("compute", kind="stable").iloc[-1] if len(numbers) else None


def _config_number(config: dict, name: str, path: Path):
    """(a positive finite number, None), (None, None) when unset (absent, null or 0, the trainer's
    "not given"), or (None, what is wrong with it)."""
    value = config.get(name)
    if isinstance(value, str):  # a hand-edited "640" or "1e12" reads as the number it spells
        try:
            value = float(value)
        except ValueError:
            return None, f"{path}: {name} {value!r} is not a number > 0"
    if value is None or (not isinstance(value, bool) and value == 0):
        return None, None
    if _beyond_float_range(value):
        # JSON keeps a 1 followed by 400 zeros as an int, which math.isfinite raised OverflowError on, out of the poll
        return None, f"{path}: {name} of {len(str(abs(value)))} digits is beyond a float's range, not a usable number > 0"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        return None, f"{path}: {name} {value!r} is not a number > 0"
    return float(value), None


def stopped_by_advisor(folder: Path | None) -> bool:
    """Whether a trainer's run folder holds stopped.json: its own advisor (--advisor-every) ended it."""
    return folder is not None and how_run_folder_ended(folder) == "advisor_stopped"


def is_finished(folder: Path | None) -> bool:
    """Whether a trainer's run folder says its run ended: summary.json, or stopped.json alone (its own
    advisor stopped it and it was killed before its summary: the trainer keeps the stop on --resume,
    and forecast report takes it as ended too)."""
    return folder is not None and how_run_folder_ended(folder) != ""


def last_evaluation(rows: pd.DataFrame) -> str:
    """Where a run's rows end, in words: 'eval 8 (1.01e9 flops)'."""
    compute = pd.to_numeric(rows["compute"], errors="coerce").max() if "compute" in rows else float("nan")
    at = f" ({fmt_compute(float(compute))} {_unit_as_logged(rows)})" if math.isfinite(compute) else ""
    return f"eval {len(rows)}{at}"


def how_it_ended(folder: Path | None, rows: pd.DataFrame) -> str:
    """A finished run's end in words, from its stopped.json (the trainer's advisor stopped it) and
    its log: 'stopped by its own advisor at eval 8 (1.01e9 flops): stop: P(...) < 0.05', or 'finished at
    eval 15 (2.17e9 flops)'. A file of another shape (or a refused run's bad compute) is read as far as it goes."""
    where = last_evaluation(rows)
    stopped = _read_json(folder / "stopped.json") if folder is not None else {}
    advice = stopped.get("advice") if isinstance(stopped, dict) else None
    if isinstance(advice, dict):
        message = advice.get("message") or advice.get("rule") or "no reason recorded"
        return f"stopped by its own advisor at {where}: {message}"
    return f"finished at {where}"


def advise_table(table: pd.DataFrame, budgets: dict, config: EarlyStopConfig, *, random_seed: int = 0, previous=None,
                 recent_stops: int = 0, **forecaster_kwargs):
    """Fit every run in `table` (a refit of `previous` when given) and recommend for the runs in
    `budgets` (the default advisor). recent_stops: runs told to stop on comparisons within the stop
    cap's window (recommend_runs). forecaster_kwargs (e.g. priors) go to ScalingForecaster on a
    fresh fit; a refit keeps `previous`'s. Returns (recommendations, forecaster)."""
    # padded to sizes 1.5x apart, so a growing sweep recompiles rarely (advice_pad)
    fc, converged = fit_for_advice(table, random_seed=random_seed, pad_to=advice_pad(len(table)), previous=previous, **forecaster_kwargs)
    last = table.groupby("run_id")["compute"].max()
    compare_at = {r: budgets.get(r, float(last[r])) for r in fc.run_ids}
    recs = recommend_runs(fc, budgets, config, compare_at=compare_at, recent_stops=recent_stops)
    noting_misshapen_runs(fc, recs)  # said beside the advice (line and JSON) of a run whose end falls away from its curve
    problems = [] if converged else fc.diagnostics().problems()
    for rec in recs.values():
        rec.details["converged"] = converged
        rec.details["reweighted"] = bool(fc.fit_info_.get("reweighted", False))
        if problems:  # what failed (R-hat, ESS, divergences): the printed line and the JSON say it
            rec.details["convergence_problems"] = problems
    return recs, fc


def poll(
    runs_dir,
    state: WatchState,
    *,
    config: EarlyStopConfig,
    budget: float | None = None,
    reference=None,
    advisor: Callable | None = None,
    random_seed: int = 0,
    forecaster_kwargs: dict | None = None,
    settings: SettingNames = PYTHON_SETTINGS,
) -> list[Recommendation]:
    """One look at the folder. Returns the recommendations made for runs with new evaluations,
    and for runs whose advice turned (continue to stop, or back) on the others' new evaluations
    (empty when nothing changed). Updates `state`. forecaster_kwargs: for the default advisor's fits.
    settings: how the advice names the budget to pass (PYTHON_SETTINGS: the keyword argument;
    COMMAND_SETTINGS: `forecast watch`'s flag)."""
    def default_advisor(table, budgets, config):
        # Advice comes at every new evaluation, far more often than the backtest's checks, so the stop
        # cap counts the runs told to stop over the last stop_cap_window of compute, not per poll. A
        # run told to stop that is still in flight is judged again here and counted at this poll.
        reached = float(table.loc[table["run_id"].isin(list(budgets)), "compute"].max())
        ended = [(at, len(runs - set(budgets))) for at, runs in state.comparison_stops]
        recent = recent_comparison_stops(ended, reached, config.stop_cap_window)
        recs, state.forecaster = advise_table(table, budgets, config, random_seed=seed_of_fit(random_seed, state.fits),
                                              previous=state.forecaster, recent_stops=recent, **(forecaster_kwargs or {}))
        newly = {r for r, rec in recs.items() if rec.stop and rec.rule in COMPARISON_RULES} - state.told_to_stop
        state.comparison_stops.append((reached, newly))
        return recs

    advisor = advisor or default_advisor
    state.polls += 1
    if _folder_unlisted(Path(runs_dir), state):
        return []
    table, folders, unreadable = scan_runs(runs_dir)
    _refuse_unreadable(runs_dir, unreadable, state)
    counts = table.groupby("run_id").size().to_dict() if len(table) else {}
    versions = _row_versions(table)
    went = _drop_gone_runs(counts, state)
    state.folders.update(folders)
    _check_budget_unit(budget, table, state, settings)
    if table.empty:
        return []
    state.compute_unit = _unit_as_logged(table)
    # checked every poll: a run writes summary.json after its last evaluation, with no new row to notice
    finished = {r for r in counts if is_finished(folders.get(r))}
    for run in sorted(finished - set(state.ended)):
        state.ended[run] = how_it_ended(folders.get(run), table[table["run_id"] == run])
        if state.polls > 1:  # not the runs that had ended before the watch began: the last line below counts them
            state.ended_lines.append(f"[{run}] ended: {state.ended[run]}")
    for run in set(state.ended) - finished:  # an extended run trains on (its summary.json removed)
        state.ended.pop(run)
    state.finished = finished
    for run in finished:
        state.latest.pop(run, None)
    changed = [r for r, version in versions.items() if version != state.seen.get(r)]
    if not changed and not went:  # a run gone is news too: the others' advice was fitted beside it
        return []
    usable = _usable_runs(table, versions, state)
    in_flight = [r for r in counts if r not in finished and r in usable]
    recs = {}
    budgets = {}
    for run in in_flight:
        rows = table[table["run_id"] == run]
        if counts[run] < max(config.min_evals, 2):
            recs[run] = Recommendation(CONTINUE, "warmup", f"continue: {counts[run]} evaluation(s) so far; rules start at {max(config.min_evals, 2)}",
                                       run_id=run, value=float(counts[run]), threshold=float(max(config.min_evals, 2)))
            continue
        b, problem = planned_budget_or_why_not(folders.get(run), rows, budget)
        if b is None:
            why = f"; {problem}" if problem else ""
            recs[run] = Recommendation(CONTINUE, "no_budget", f"continue: no planned budget known (pass {settings.budget}{why})", run_id=run)
            continue
        budgets[run] = b
    fit_rows = table[(table["run_id"].map(counts) >= 2) & table["run_id"].isin(usable)]
    if reference is not None:
        # a table was loaded by watch() at the start; a path (a direct poll() call) is read now
        loaded = reference if isinstance(reference, pd.DataFrame) else load_reference(reference)
        _require_the_runs_unit(loaded, table, runs_dir)
        fit_rows = pd.concat([reference_rows(loaded, table), fit_rows], ignore_index=True)
    if budgets:
        fit_rows = _validated_together(fit_rows, versions, state)
        for run in set(budgets) - set(fit_rows["run_id"]):  # refused only beside the others
            budgets.pop(run)
        if budgets:
            recs.update(advisor(fit_rows, budgets, config))
            state.fits += 1
    for run in changed:
        state.seen[run] = versions[run]
    # a refit on the other runs' new rows can turn a run without new rows from continue to stop (or
    # back): said too, or the JSON would tell a scheduler to stop a run the printed lines never did
    flipped = [r for r, rec in recs.items() if r not in changed and r in state.latest and state.latest[r].action != rec.action]
    new = [recs[r] for r in [*changed, *flipped] if r in recs]
    for rec in recs.values():
        rec.details.setdefault("n_evals", counts.get(rec.run_id))
    state.latest.update(recs)
    for run in finished | set(state.refused):  # a refused run's earlier advice would read as current
        state.latest.pop(run, None)
    return new


def load_reference(reference) -> pd.DataFrame:
    """The reference runs (a run table's path, or a table), validated: RunDataError names the
    file, column, run and row. watch() calls it once, at the start."""
    if isinstance(reference, pd.DataFrame):
        return validate_runs(reference)
    return load_runs(reference)


def _units(table: pd.DataFrame) -> set:
    if "compute_unit" not in table:
        return set()
    units = table["compute_unit"].dropna().astype(str).str.strip()
    return set(units[units != ""])


def _unit_as_logged(rows: pd.DataFrame) -> str:
    """The compute_unit of rows read from logs, before validation: the one unit they name (blank
    entries aside), else "compute units" (none, or a mix that validation refuses)."""
    units = _units(rows)
    return units.pop() if len(units) == 1 else UNSPECIFIED_UNIT


def _require_the_runs_unit(reference: pd.DataFrame, table: pd.DataFrame, runs_dir) -> None:
    """RunDataError when the reference counts compute in another unit than every run in flight.
    Checked beside the runs, that mix refused each run in turn as if its own log were wrong ('mixes
    compute units'), and the watcher went on polling with every run left out and nothing advised."""
    theirs, ours = _units(reference), _units(table)
    if theirs and ours and not theirs & ours:
        source = reference.attrs.get("source") or (reference["_source"].iloc[0] if "_source" in reference else None)
        raise RunDataError(f"counts compute in {', '.join(sorted(theirs))}, the runs under {runs_dir} in "
                           f"{', '.join(sorted(ours))}; give a reference in their unit", source=source, column="compute_unit")


# columns the reader adds to each row: where it was read (a folder renamed moves them) and how its folder
# says the run ended (checked by itself every poll), neither of which is news of the run's evaluations
_READER_COLUMNS = ("_source", "_line", ENDED_COLUMN)


def _row_versions(table: pd.DataFrame) -> dict:
    """run -> (evaluations, a digest of their values): what says a run's rows changed since the last poll.
    The count alone missed a log rewritten to as many rows (a run killed and resumed between two polls:
    its log repaired, the rows after its checkpoint logged again with other values; a bad row fixed in
    place), so its advice stood on rows no longer there, and a refused run stayed refused. Only the
    cells a run fills count, each number read as a float: a run joining with a column the others lack
    (or blanks that turn their integers to floats, or to objects) changes nothing of theirs."""
    if table.empty:
        return {}
    row_hashes = np.zeros(len(table), dtype=np.uint64)
    for column in table.columns.drop(["run_id", *_READER_COLUMNS], errors="ignore"):
        name = int.from_bytes(hashlib.blake2b(repr(column).encode(), digest_size=8).digest(), "little")
        cells, filled = _cell_hashes(table[column])
        row_hashes[filled] += cells[filled] ^ np.uint64(name)  # a sum, so the columns' order is no change
    return {run: (len(where), hashlib.blake2b(row_hashes[where].tobytes(), digest_size=16).hexdigest())
            for run, where in table.groupby("run_id", sort=False).indices.items()}


def _cell_hashes(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(a hash of each cell of a column, which cells are filled). A number hashes as the float it is,
    whatever the column's type: 800 in an integer column, or among another run's blanks in a column of
    objects, is 800.0; anything else as its text."""
    filled = values.notna().to_numpy()
    hashes = np.zeros(len(values), dtype=np.uint64)
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        hashes[filled] = pd.util.hash_array(values.to_numpy(dtype=float)[filled])
        return hashes, filled
    cells = values.to_numpy(dtype=object)
    number = filled & np.fromiter(map(_is_number, cells), dtype=bool, count=len(cells))
    try:
        hashes[number] = pd.util.hash_array(cells[number].astype(float))
    except OverflowError:  # an integer beyond a float's range, which validation names: hashed as text
        number[:] = False
    text = filled & ~number
    hashes[text] = pd.util.hash_array(np.array([str(cell) for cell in cells[text]], dtype=object))
    return hashes, filled


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _refuse_unreadable(runs_dir: Path, unreadable: dict, state: WatchState) -> None:
    """Refuse the run of each log that cannot be read as rows, as a bad row refuses its run: left
    out, said once (again only when the log changes), listed under 'refused'. The log is read at
    every poll, so an entry whose log reads again (or is gone) is cleared first."""
    for run in state.unreadable:
        state.refused.pop(run, None)
    state.unreadable = {}
    for log, err in unreadable.items():
        for run in _runs_of_log(log, runs_dir, state):
            state.refused[run] = (_log_signature(log), str(err))
            state.unreadable[run] = log
            state.latest.pop(run, None)
            # no count: advised afresh when the log reads again; still a run in flight unless it has ended
            if is_finished(log.parent):
                state.seen.pop(run, None)
            else:
                state.seen[run] = None


def _runs_of_log(log: Path, runs_dir: Path, state: WatchState) -> list[str]:
    """The runs an unreadable log held when it last read (its rows cannot be read now), else its
    folder's name (the trainer names run folders after their runs)."""
    known = sorted(run for run, folder in state.folders.items() if folder == log.parent)
    if known:
        return known
    folder = log.parent.relative_to(runs_dir).as_posix()
    return [folder if folder != "." else log.name]


def _log_signature(log: Path):
    """What changes when a log is written to or fixed: an unreadable log is said again only then."""
    try:
        stat = log.stat()
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns)


def _folder_unlisted(runs_dir: Path, state: WatchState) -> bool:
    """Whether the watched folder itself cannot be listed (permission denied, an I/O error of a network disk),
    noting when that starts and ends. Its listing then holds no log, and every run was said and listed as
    'deleted or emptied' beside the warning that the folder cannot be listed: their logs are not known gone,
    only not read, so the poll reads nothing and each run keeps its last advice, marked unknown in the JSON
    (`unlisted`) until the folder can be listed again. A folder deleted is not this (require_the_folder)."""
    try:
        with os.scandir(runs_dir):
            pass
    except FileNotFoundError:
        return False  # gone: its runs are gone with it
    except OSError as err:
        if state.unlisted is None:
            state.unlisted = f"{runs_dir} cannot be listed ({_reason(err)}) since poll {state.polls}"
            known = len(state.latest)
            kept = (f", and its {known} advised run(s) are not taken as gone: each one's last advice stands in the "
                    "file, unknown now (under 'unlisted')" if known else "")
            state.notes.append(f"{state.unlisted}: no run log can be read until it can{kept}")
        return True
    if state.unlisted is not None:
        state.ended_lines.append(f"{runs_dir} can be listed again: its runs are read and advised again")
        state.unlisted = None
    return False


def _drop_gone_runs(counts: dict, state: WatchState) -> list[str]:
    """Runs seen before whose log was deleted or emptied (or put out of reach): their advice would read as current and
    they would never count as finished, so they are forgotten, said once, and listed as gone.
    Returns the runs gone at this poll, so that the others are advised again without them (their
    advice compared them with a gone run: 'P(beats best ...)' of a run no longer in the sweep)."""
    for run in counts:
        state.gone.pop(run, None)  # a log that came back is a run again
    went = sorted(set(state.seen) - set(counts) - set(state.unreadable))
    for run in went:
        had_advice = run in state.latest  # a run that had ended (or was never advised) has none to drop
        state.gone[run] = _why_gone(state.folders.get(run))
        for memory in (state.seen, state.latest, state.refused, state.folders):
            memory.pop(run, None)
        state.notes.append(f"[{run}] {state.gone[run]}" + (": its advice is dropped" if had_advice else ""))
    return went


def _why_gone(folder: Path | None) -> str:
    """Why a run's log, read before, is read no more: deleted or emptied, or out of reach (its folder, or
    one above it, made unreadable: chmod 000, another user's), which was said as deleted too."""
    if folder is not None:
        try:
            (folder / RUN_LOG_NAME).stat()
        except PermissionError:
            return (f"its {RUN_LOG_NAME} cannot be reached: {folder} (or a folder above it) may not be read "
                    "(permission denied)")
        except OSError:
            pass
    return f"its {RUN_LOG_NAME} was deleted or emptied"


def _check_budget_unit(budget, table: pd.DataFrame, state: WatchState, settings: SettingNames = PYTHON_SETTINGS) -> None:
    """Warn once, when the first rows are read (the data are unknown at the start), about a
    budget below every compute logged: likely another unit (1e3 against FLOPs at 2e11), which
    would tell every run to stop. Only the low side: a planned budget far beyond a sweep's first
    evaluations is normal for a watcher, unlike for decide's finished runs."""
    if budget is None or state.budget_checked or table.empty:
        return
    compute = pd.to_numeric(table["compute"], errors="coerce") if "compute" in table else pd.Series(dtype=float)
    compute = compute[(compute > 0) & (compute < float("inf"))]
    if compute.empty:
        return
    state.budget_checked = True
    if float(budget) < compute.min():
        state.notes.append(far_from_data(float(budget), compute, unit=compute_unit_of(table),
                                          name=settings.budget.rstrip("=")))  # '--budget', or 'budget' as Python's warnings name it


def _validated_together(fit_rows: pd.DataFrame, versions: dict, state: WatchState) -> pd.DataFrame:
    """The fit's rows validated as one table. A problem only visible across runs (one run logs
    flops, another gpu_hours) refuses the run it is found in, as _usable_runs does, and the rest
    are checked again; a problem in the reference table is the user's to fix (RunDataError)."""
    while True:
        try:
            return validate_runs(fit_rows)
        except RunDataError as err:
            if err.run_id not in versions:
                raise
            state.refused[err.run_id] = (versions[err.run_id], str(err))
            fit_rows = fit_rows[fit_rows["run_id"].astype(str) != err.run_id]


def _usable_runs(table: pd.DataFrame, versions: dict, state: WatchState) -> set:
    """Runs whose rows pass validation. A refused run is recorded in state.refused with the
    reason (file, column, row), so the watcher can say so once, and is looked at again only when
    its rows have changed (_row_versions)."""
    usable = set()
    for run, rows in table.groupby("run_id", sort=False):
        known = state.refused.get(run)
        if known is not None and known[0] == versions[run]:
            continue
        if len(logs := _logs_of(rows)) > 1:
            state.refused[run] = (versions[run], _logged_twice(run, logs))
            continue
        try:
            validate_runs(rows, min_points=1)  # a run with one evaluation is in warm-up, not wrong
        except RunDataError as err:
            state.refused[run] = (versions[run], str(err))
            continue
        state.refused.pop(run, None)
        usable.add(run)
    return usable


def _logs_of(rows: pd.DataFrame) -> list[str]:
    return sorted(rows["_source"].dropna().astype(str).unique()) if "_source" in rows else []


def _logged_twice(run: str, logs: list[str]) -> str:
    """Why a run found in two run logs (a copied run folder) is left out: it was advised on both
    logs' rows, its evaluations counted twice ('eval 80' of 40), with the budget and the end of
    whichever folder was listed last."""
    return str(RunDataError(f"is logged in {len(logs)} run logs ({', '.join(logs)}), so its evaluations would count "
                            "twice and its budget and end come from one folder at random: keep one (a copied run "
                            "folder?)", run_id=run))


def _line(rec: Recommendation, unit: str = UNSPECIFIED_UNIT) -> str:
    n = rec.details.get("n_evals")
    at = rec.details.get("compute_now")
    where = f" eval {n}" if n is not None else ""
    where += f" @ {fmt_compute(at)} {unit}" if at is not None else ""  # as the advice writes compute: 1.01e12 flops
    # a stop decided on a fit that did not converge deserves a second look (a continue costs nothing)
    note = ""
    if rests_on_an_unconverged_fit(rec):
        note = f" (warning: the fit behind this advice did not converge: {what_did_not_converge(rec.details)})"
    if shape := rec.details.get("shape_note"):  # its forecasts are likely too high, whichever way the advice goes
        note += f" ({shape})"
    return f"[{rec.run_id}]{where}: {rec.message}{note}"


def write_recommendations(path, runs_dir, state: WatchState) -> None:
    atomic_write_json(
        path,
        {
            # absolute: a restart from another working directory (or naming the folder otherwise)
            # compares it with its own to read the stop cap's history back
            "runs_dir": str(Path(runs_dir).resolve()),
            "updated": datetime.now(UTC).isoformat(timespec="seconds"),
            "forecast_version": __version__,
            "polls": state.polls,
            "recommendations": {r: rec.to_dict() for r, rec in sorted(state.latest.items())},
            "refused": {r: why for r, (_, why) in sorted(state.refused.items())},  # left out until their logs change
            "gone": dict(sorted(state.gone.items())),  # logs deleted or emptied: no advice
            # the folder cannot be listed: the recommendations are each run's last, unknown now (None: it can)
            "unlisted": state.unlisted,
            "ended": dict(sorted(state.ended.items())),  # finished (summary.json, stopped.json): no advice, and how each ended
            # the stop cap's memory, read back by a restarted watch (previous_comparison_stops)
            "comparison_stops": [{"compute": at, "runs": sorted(runs)} for at, runs in state.comparison_stops if runs],
        },
    )


class WatchedFolderGone(Exception):
    """The folder being watched was deleted, moved or unmounted while it was watched."""


def require_the_folder(runs_dir: Path, out: Path, state: WatchState) -> None:
    """WatchedFolderGone when `runs_dir` is no folder any more. A watch of a deleted folder said each run's
    log 'deleted or emptied' and polled on forever, and its next write of the advice made the folder
    again (atomic writes make the folder they write in), holding only recommendations.json."""
    if runs_dir.is_dir():
        return
    last = f"; its last advice is in {out}" if out.is_file() else ""
    raise WatchedFolderGone(f"{runs_dir}: the folder being watched is gone (deleted, moved or unmounted) after "
                            f"{state.polls} poll(s), so the watch stops{last}")


def write_or_say_why_not(out: Path, runs_dir, state: WatchState, failed: OSError | None, warn, say) -> OSError | None:
    """Write the advice to `out`; a full disk (or another failure of the machine: forecast.io.RESOURCE_ERRORS)
    is said once, and again when the file is written again, while the watch goes on: it was a traceback
    that ended the watch of a sweep whose runs share that disk. Returns the error of this write (None when
    it was written), the `failed` of the next call; an error of another kind is raised."""
    try:
        write_recommendations(out, runs_dir, state)
    except OSError as err:
        message = resource_error_message(err)
        if message is None:
            raise
        if failed is None:
            warn(f"{message}; the watch goes on, with its advice said here, and writes {out} again when it can")
        return err
    if failed is not None:
        say(f"{out} is written again (it had not been since: {resource_error_message(failed)})")
    return None


def previous_comparison_stops(path, runs_dir) -> tuple[list, str | None]:
    """The stop cap's history from a recommendations file an earlier watch of `runs_dir` wrote, and
    a note saying what was read or why nothing was. A restart began with an empty history, so the
    cap let through as many comparison stops again as if none had been made."""
    path = Path(path)
    if not path.exists():
        return [], None
    try:
        saved = json.loads(path.read_text())
        if not isinstance(saved, dict):  # a JSON array (a run table in records form) has no .get: a traceback
            return [], f"{path} is not a JSON object (not a recommendations file); the stop cap starts with no history"
        history = [(float(entry["compute"]), set(map(str, entry["runs"]))) for entry in saved.get("comparison_stops", [])]
        if history and Path(saved["runs_dir"]).resolve() != Path(runs_dir).resolve():
            # another folder's watch: its stops say nothing about these runs (said: a folder moved or
            # renamed since loses its history here, and the file is about to be replaced)
            return [], (f"{path} was written by a watch of {saved['runs_dir']}, not {Path(runs_dir).resolve()}; "
                        "the stop cap starts with no history")
    except (OSError, ValueError, KeyError, TypeError) as err:
        return [], f"{path} could not be read ({type(err).__name__}: {err}); the stop cap starts with no history"
    if not history:
        return [], None  # a file from a version before the history was kept, or no stops yet
    runs = sorted(set().union(*(runs for _, runs in history)))
    return history, f"the stop cap keeps the {len(runs)} run(s) an earlier watch told to stop on comparisons ({', '.join(runs)}), read from {path}"


# a wait sleeps to a deadline of now plus the interval: threading.TIMEOUT_MAX itself overflowed, and a
# week is far beyond any sweep's poll (`forecast watch --interval` is held to it too)
MAX_WATCH_INTERVAL_S = 7 * 24 * 3600.0


def _checked_watch_settings(budget, interval, max_polls):
    """watch()'s budget, interval and max_polls, refused in words as `forecast watch` refuses its flags. In
    Python a budget of 0 was every run's "continue: no_budget" after a warning that it is below the data, a
    negative interval failed in time.sleep after the first poll's fit, and max_polls=0 polled once."""
    budget = as_real(budget)
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, numbers.Real)
                               or not (math.isfinite(budget) and budget > 0)):
        raise ValueError(f"budget must be a finite compute > 0, or None, got {budget!r}")
    interval = as_real(interval)
    if isinstance(interval, bool) or not isinstance(interval, numbers.Real) or not 0 <= interval <= MAX_WATCH_INTERVAL_S:
        raise ValueError(f"interval must be a number of seconds >= 0 (at most {MAX_WATCH_INTERVAL_S:.0f}, a week), "
                         f"got {interval!r}")
    if max_polls is not None and not (is_whole_number(max_polls) and max_polls >= 1):
        raise ValueError(f"max_polls must be a whole number >= 1, or None (for ever), got {max_polls!r}")
    return (None if budget is None else float(budget)), float(interval), (None if max_polls is None else int(max_polls))


def watch(
    runs_dir,
    *,
    interval: float = 30.0,
    budget: float | None = None,
    config: EarlyStopConfig | None = None,
    reference=None,
    out=None,
    max_polls: int | None = None,
    advisor: Callable | None = None,
    emit: Callable[[Recommendation], None] | None = None,
    say: Callable[[str], None] = print,
    warn: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    random_seed: int = 0,
    forecaster_kwargs: dict | None = None,
    settings: SettingNames = PYTHON_SETTINGS,
) -> WatchState:
    """Poll `runs_dir` until `max_polls` polls (None: forever), emitting and writing advice.

    interval: seconds between polls. budget: every run's planned compute, where a run's own
    (config.json, or its log's planned_compute) is not to be used (planned_budget). config: the stop
    rules (EarlyStopConfig or a dict of its fields). reference: finished runs (a run table or its
    path) fitted beside the runs in flight, which are judged against them. out: the JSON file
    written after each poll (default runs_dir/recommendations.json). advisor(table, budgets, config)
    -> {run_id: Recommendation}, in place of the forecaster's advice (tests pass their own).
    random_seed: the first fit's seed (later fits get their own, from it).
    emit(rec) is called for each new recommendation (default: say() one readable line);
    say(text) gets status lines; warn(text) warnings, the data's included, each once (default:
    'warning: ...' on stderr, so JSON output stays parseable); sleep(seconds) waits between polls (tests pass their own).
    A reference table is read and validated here, before the first poll (RunDataError).
    forecaster_kwargs go to the forecaster of each fresh fit (e.g. {"priors": Priors(b_mu=0.5)}).
    settings: how the advice and warnings name the budget (PYTHON_SETTINGS: budget=, this keyword argument;
    `forecast watch` passes COMMAND_SETTINGS: --budget).
    """
    warn = warn or (lambda text: print(f"warning: {text}", file=sys.stderr, flush=True))
    config = checked_rules(config)  # before the folder: a dict of settings failed only at the first fit
    budget, interval, max_polls = _checked_watch_settings(budget, interval, max_polls)
    # taken on an empty folder, they failed at the first fit, once runs had come, in the forecaster's words
    if forecaster_kwargs:  # none given is not checked: the check imports forecast.forecaster (scipy: most of a second)
        checked_forecaster_kwargs(forecaster_kwargs)
    check_random_seed(random_seed)
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise RunDataError("is not a folder", source=runs_dir)
    said_topics = set()

    def saying_warnings_once(call, *args, **kwargs):
        """call(), its data warnings (a recipe mixing settings, runs in two units, ...) said through
        warn() once per watch: Python's filter left them to its own printing (not warn()'s) and said
        one again at every refit, since each fit resets the filter's memory. Once per topic: a falling
        metric's counts ('in 2 of 3 runs') and two units' typical computes move as runs grow, and were
        said again at each move."""
        result, messages = data_warnings_of(call, *args, **kwargs)
        for message in messages:
            if (topic := data_warning_topic(message)) not in said_topics:
                said_topics.add(topic)
                warn(message)
        return result

    if reference is not None:
        reference = saying_warnings_once(load_reference, reference)  # a bad row in it stops us now, not at the first fit
    out = Path(out) if out is not None else runs_dir / DEFAULT_OUT_NAME
    state = WatchState()
    emit = emit or (lambda rec: say(_line(rec, state.compute_unit)))
    state.comparison_stops, note = previous_comparison_stops(out, runs_dir)
    if note:  # a note without a history says why the file could not be used
        (say if state.comparison_stops else warn)(note)
    told_refused = {}
    said_all_finished = False
    write_failed = None  # the error of the last write of `out`, while it fails
    while True:
        require_the_folder(runs_dir, out, state)
        new = saying_warnings_once(poll, runs_dir, state, config=config, budget=budget, reference=reference, advisor=advisor,
                                   random_seed=random_seed, forecaster_kwargs=forecaster_kwargs, settings=settings)
        for run, (n, why) in state.refused.items():
            if told_refused.get(run) != n:
                say(f"[{run}] left out until its log changes: {why}")
                told_refused[run] = n
        for text in state.notes:
            warn(text)
        state.notes.clear()
        for text in state.ended_lines:
            say(text)
        state.ended_lines.clear()
        for rec in new:
            emit(rec)
        seen_any = state.seen or state.refused or state.gone
        if seen_any:  # every poll, so 'polls' and 'updated' say the watcher is alive; nothing before a run log exists
            require_the_folder(runs_dir, out, state)  # gone during the fit: not made again by the write
            write_failed = write_or_say_why_not(out, runs_dir, state, write_failed, warn, say)
        if state.polls == 1 and not seen_any:  # one poll (--once) waits for nothing
            say(f"no {RUN_LOG_NAME} under {runs_dir} yet: nothing to advise at this one poll" if max_polls == 1
                else f"waiting for {RUN_LOG_NAME} under {runs_dir}")
        all_finished = bool(state.seen) and set(state.seen) <= state.finished
        if all_finished and not said_all_finished:  # at the first poll, or when the last run ends
            stopped = sum(how.startswith("stopped by its own advisor") for how in state.ended.values())
            by_advisor = f", {stopped} of them stopped by their own advisor (stopped.json)" if stopped else ""
            # a run killed between its advisor's stopped.json and its summary.json holds the first alone
            unsummed = any(not (state.folders[r] / "summary.json").exists() for r in state.finished if state.folders.get(r))
            holds = "summary.json, or stopped.json" if unsummed else "summary.json"
            say(f"no run in flight under {runs_dir}: {len(state.finished)} run(s) finished (their folders hold {holds})"
                f"{by_advisor}")
        said_all_finished = all_finished
        if max_polls is not None and state.polls >= max_polls:
            if write_failed is not None:  # the watch ends with its file not up to date (--once: never written)
                raise write_failed
            return state
        sleep(interval)
