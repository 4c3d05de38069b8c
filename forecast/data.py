"""The run format: reading, validating and describing run tables.

One row per evaluation of one run (see docs/run_format.md). Every problem is reported at the
boundary with the file, column, run and row that caused it, so a user never has to debug the
model to find a typo in a CSV.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import functools
import heapq
import io
import itertools
import json
import math
import numbers
import os
import re
import stat
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

import numpy as np
import pandas as pd

from .formatting import (
    computes_told_apart,
    fmt_compute,
    name_of,
    names_shown,
    said_together,
    told_apart,
)
from .io import TOO_DEEP, jsonl_line_end, nul_block_message
from .thread_warnings import this_threads_warnings_dropped, this_threads_warnings_recorded

REQUIRED_COLUMNS = ("run_id", "recipe", "compute", "metric")
OPTIONAL_NUMERIC = ("seed", "n_eval", "step", "device_seconds")
RUN_LOG_NAME = "evals.jsonl"
SUPPORTED_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq", ".jsonl", ".json")
# in a folder, a .json file is a config, a summary or notes far more often than a run table (the
# trainer writes config.json and summary.json beside its logs): read only when named as the input.
# A .tsv too, as it was before tab-separated tables were read: a folder reads what it read then
FOLDER_SUFFIXES = (".csv", ".parquet", ".pq", ".jsonl")
# trainer_minimal's per-step log beside its run log: no run table (no run_id, no metric), and in a
# folder without run logs (runs that have not evaluated yet) it was read as one and failed on run_id
TRAINER_STEP_LOG = "train_log.jsonl"
# Which runs ended, and how: a run folder's stopped.json (its own advisor, --advisor-every, stopped
# it) or summary.json (it finished its steps), written on the rows read from its run log and in the
# column a sweep's runs.csv carries, so a table or a saved fit says what the folder said. Empty: in flight.
ENDED_COLUMN = "ended"
ENDED_VALUES = ("finished", "advisor_stopped")

__all__ = ["RunDataError", "FarFromDataWarning", "load_runs", "validate_runs", "require_rates", "read_table", "RunSummary", "summarize_runs"]


class RunDataError(ValueError):
    """Bad input in a run table. Carries where the problem is, for messages and for tests."""

    def __init__(self, message, *, source=None, column=None, run_id=None, row=None):
        if isinstance(source, float) and source != source:
            # the _source of a row from an in-memory table joined to a loaded one: no file ("file nan")
            source = None
        self.source, self.column, self.run_id, self.row = source, column, run_id, row
        where = []
        if source is not None:
            where.append(f"file {source}")
        if column is not None:
            where.append(f"column '{column}'")
        if run_id is not None:
            where.append(f"run '{_printable(run_id)}'")
        if row is not None:
            where.append(f"row {row}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


def _printable(name) -> str:
    """A run's name as a message names it: a control character escaped as Python writes it (a name holding one
    is refused, naming it), so the message stays one line that a terminal prints as it is; a tab is text."""
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in str(name))


# ----------------------------------------------------------------------------- reading


def _read_json_records(path: Path, text: str) -> pd.DataFrame:
    """A .json file holding one array of row objects (pandas' to_json(orient="records"))."""
    try:
        records = json.loads(text, object_pairs_hook=_object_without_repeated_keys)
    except _RepeatedKey as err:
        raise RunDataError("is given twice in one object (JSON keeps the last in silence): keep one", source=path,
                           column=str(err)) from None
    except json.JSONDecodeError as err:
        raise RunDataError(f"line {err.lineno} is not valid JSON ({err.msg})", source=path) from None
    except RecursionError:
        raise RunDataError(TOO_DEEP, source=path) from None
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise RunDataError(f"item {number} of the array is not a JSON object", source=path)
        if (surrogate := _lone_surrogate(record)) is not None:
            raise RunDataError(f"item {number} of the array {_holds_a_lone(surrogate)}", source=path)
        record["_line"] = number
    return pd.DataFrame.from_records(records)


def _log_text(path: Path) -> str:
    """A JSONL file's text (a byte-order mark, as some editors write, is not data). A torn last line
    may be cut inside a multi-byte character: it is dropped, as the reader drops any torn line,
    rather than failing the whole log; bytes that are not UTF-8 anywhere else raise. A block of zeros a crash
    left is refused as _binary_message refuses one in the head, wherever it is: past the head's 8 KiB it was said
    as a bad JSON line, and at the end (no newline after it) dropped in silence as a torn last line."""
    raw = path.read_bytes()
    if nul_block := nul_block_message(raw):  # judged in the bytes read anyway: the log is not read again
        raise RunDataError(nul_block, source=path)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        end = jsonl_line_end(raw)  # where the torn line begins
        if raw.endswith(end):
            raise
        return raw[: raw.rfind(end) + 1].decode("utf-8-sig")


def _lone_surrogate(record: dict) -> str | None:
    """A half of a surrogate pair in a JSON row's keys or text (the escape "\\ud83d" without its "\\ude00"), or
    None. JSON reads it as a str that no UTF-8 holds, and the table's text column failed to build: "could not be
    read (UnicodeEncodeError: ...)", naming no line."""
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        return err.object[err.start:err.end]
    return None


def _holds_a_lone(surrogate: str) -> str:
    return (f"holds {ascii(surrogate)[1:-1]}, half of a surrogate pair (an escaped character cut in two?), "
            "which is not text: correct or delete it")


def _is_one_json_document(text: str) -> bool:
    """A pretty-printed JSON object (a config or summary named as the runs): valid JSON, not JSONL."""
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def _read_jsonl(path: Path) -> pd.DataFrame:
    """Read a JSONL run log. A torn last line (a writer killed mid-line) is skipped, because a
    log that is still being written must stay readable; a bad line anywhere else is an error."""
    text = _log_text(path)
    if path.suffix.lower() == ".json" and text.lstrip().startswith("["):
        return _read_json_records(path, text)
    lines = text.split(jsonl_line_end(text))
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line, object_pairs_hook=_object_without_repeated_keys)
        except _RepeatedKey as err:
            raise RunDataError("is given twice on this line (JSON keeps the last in silence): keep one", source=path,
                               column=str(err), row=number) from None
        except RecursionError:  # a line of 100,000 nested brackets: "could not be read (RecursionError: ...)", no line
            raise RunDataError(f"line {number} {TOO_DEEP}", source=path) from None
        except json.JSONDecodeError as err:
            is_last = all(not rest.strip() for rest in lines[number:])
            if is_last and not text.endswith(jsonl_line_end(text)):
                continue  # torn final line of a log still being written
            if _is_one_json_document(text):
                array = text.lstrip().startswith("[")
                raise RunDataError("holds one JSON document spread over several lines, not rows: a run table is one "
                                   "JSON object per line (JSONL), or an array of row objects"
                                   + (" in a file named .json" if array else ""), source=path) from None
            raise RunDataError(f"line {number} is not valid JSON ({err.msg})" + _csv_header_hint(line, number, lines),
                               source=path) from None
        if not isinstance(record, dict):
            raise RunDataError(f"line {number} is not a JSON object", source=path)
        if "\\u" in line and (surrogate := _lone_surrogate(record)) is not None:  # only an escape writes one
            raise RunDataError(f"line {number} {_holds_a_lone(surrogate)}", source=path)
        record["_line"] = number
        records.append(record)
    frame = pd.DataFrame.from_records(records)
    _warn_if_compute_falls_in_log_order(frame, path)
    return frame


def _head(path: Path) -> bytes:
    """A file's first 8 KiB: what _binary_message and _first_line judge it by (read once for both)."""
    with open(path, "rb") as handle:
        return handle.read(8192)


def _first_line(head: bytes) -> str:
    """The first line that is not blank, stripped ('' for none), of a file's head (_head; a byte-order
    mark, as some editors write, is not part of it)."""
    text = head.decode("utf-8-sig", errors="replace")
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


# A header's separator: what it reads as, the values it separates and the suffix that reads them. A
# tab-separated table must be named .tsv (a .csv is read with tabs only where its header has the run
# format's names); one separated by ';' (Excel's CSV where the decimal mark is a comma) is read as a .csv.
_HEADER_SEPARATORS = {",": ("a CSV header", "comma", ".csv"), "\t": ("a tab-separated header", "tab", ".tsv"),
                      ";": ("a semicolon-separated header", "semicolon", ".csv")}


def _csv_header_hint(line: str, number: int, lines: list[str]) -> str:
    """What to do about a first line that is not JSON but a CSV (or tab- or semicolon-separated)
    header: a CSV export named .jsonl was refused as 'line 1 is not valid JSON' alone, which sent
    the user to look for a broken line. The separator is the one the line holds most of."""
    first = next(k for k, text in enumerate(lines, start=1) if text.strip())
    text = line.strip()
    separator = max(_HEADER_SEPARATORS, key=text.count)
    if number != first or text.startswith(("{", "[")) or separator not in text:
        return ""
    header, separated, suffix = _HEADER_SEPARATORS[separator]
    shown = text.replace("\t", "\\t")  # a tab is said, not printed as blank space
    return (f": it reads as {header} ({shown if len(shown) <= 60 else shown[:57] + '...'}), so the file looks like "
            f"{separated}-separated values: give it the suffix {suffix}")


def _warn_if_compute_falls_in_log_order(frame: pd.DataFrame, path: Path) -> None:
    """A log is written in time order, so a run's compute that falls from one line to a later one is
    a restarted counter (a resumed run). With a step column the validation refuses it; without one
    the rows are sorted by compute and the two stretches of the curve interleave in silence. Said,
    not refused: a JSONL table written by hand need not be in time order."""
    if "step" in frame.columns or not {"run_id", "compute"} <= set(frame.columns):
        return
    try:
        compute = pd.to_numeric(frame["compute"], errors="coerce")
    except OverflowError:  # an integer beyond a float's range: validation names its row
        return
    # true/false read as 1/0 would be said to fall here beside validation's refusal of the same cell
    compute = compute.mask(frame["compute"].map(lambda value: isinstance(value, (bool, np.bool_))).astype(bool))
    previous = compute.groupby(frame["run_id"].astype(str)).shift()
    falls = compute < previous
    if falls.any():
        idx = falls.idxmax()
        before, after = _told_apart(previous[idx], compute[idx])
        warnings.warn(str(RunDataError(
            f"falls from {before} to {after} in the log's order: a resumed run that restarted its compute counter? "
            "Compute must count from the run's start (log a step column and this is checked)",
            source=path, column="compute", run_id=frame.at[idx, "run_id"], row=int(frame.at[idx, "_line"]))),
            UserWarning, stacklevel=5)


SPREADSHEET_SUFFIXES = (".xlsx", ".xls", ".xlsm", ".ods", ".numbers")
# the first bytes of files that are named .csv or .jsonl by mistake, and what to do about each
BINARY_SIGNATURES = (
    (b"PK\x03\x04", "is a zip archive, not text (an Excel workbook renamed?): save the sheet as CSV (UTF-8)"),
    (b"PAR1", "is a Parquet file, not text: give it the suffix .parquet"),
    (b"\x1f\x8b", "is gzip-compressed: decompress it first"),
    (b"\xd0\xcf\x11\xe0", "is an old Excel workbook (.xls), not text: save the sheet as CSV (UTF-8)"),
)


def _looks_like_utf16_without_mark(head: bytes) -> bool:
    """Text of ASCII characters saved as UTF-16 with no byte-order mark: every other byte NUL."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or len(head) < 8:
        return False
    return any(half.count(0) >= 0.9 * len(half) for half in (head[0::2], head[1::2]))


def _binary_message(head: bytes) -> str | None:
    """Why a file named as a text table is not one, judged by its head (_head), or None: a parser reads
    binary bytes as a ragged CSV ('line 3 has 2 fields') or a bad JSON line, which sends the user to the
    wrong fix."""
    for signature, message in BINARY_SIGNATURES:
        if head.startswith(signature):
            return message
    if nul_block := nul_block_message(head):
        return nul_block
    if _looks_like_utf16_without_mark(head):  # NULs are UTF-8 too: it read as columns 'r\x00u\x00n\x00...'
        return "is UTF-16 text without a byte-order mark; save the file as UTF-8"
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 text has NULs: said as not UTF-8
        try:
            head.decode("utf-8")
        except UnicodeDecodeError:
            return "is binary data, not a text table (CSV, JSONL): was another file named?"
    return None


def _read_one_file(path: Path) -> pd.DataFrame:
    suffix = path.suffix.lower()
    try:
        head = _head(path) if suffix in (".csv", ".tsv", ".jsonl", ".json") and path.is_file() else None
        if head is not None and (message := _binary_message(head)):
            raise RunDataError(message, source=path)
        if suffix in (".csv", ".tsv"):
            if head is not None and _first_line(head).startswith("{"):
                separated = "comma" if suffix == ".csv" else "tab"
                raise RunDataError(f"holds JSON lines (a {{...}} object per line), not {separated}-separated values: "
                                   "give it the suffix .jsonl", source=path)
            frame = _read_csv(path)
        elif suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
            if any(name is not None for name in frame.index.names):
                frame = frame.reset_index()  # run_id saved as the index (to_parquet keeps it) is a column here
            frame["_line"] = np.arange(len(frame)) + 1
        elif suffix in (".jsonl", ".json"):
            frame = _read_jsonl(path)
        else:
            raise RunDataError(
                f"unsupported file type '{suffix}' (use one of {', '.join(SUPPORTED_SUFFIXES)})"
                + ("; save the sheet as CSV (UTF-8)" if suffix in SPREADSHEET_SUFFIXES else ""),
                source=path,
            )
    except RunDataError:
        raise
    except pd.errors.ParserError as err:  # a ragged CSV: say which line, in words rather than the parser's
        raise RunDataError(_ragged_csv_message(str(err), path), source=path) from None
    except UnicodeDecodeError as err:  # the decoder's byte offset is into a chunk, not the file: name the line
        raise RunDataError(_not_utf8_message(path, err), source=path) from None
    except PermissionError:  # another user's file on a shared disk: it was a traceback out of every command
        raise RunDataError("cannot be read (permission denied): ask its owner, or copy it somewhere you can read",
                           source=path) from None
    except Exception as err:  # pandas/pyarrow parse errors: name the file, keep the cause
        raise RunDataError(f"could not be read ({type(err).__name__}: {err})", source=path) from None
    if path.name == RUN_LOG_NAME:
        frame[ENDED_COLUMN] = how_run_folder_ended(path.parent)
    frame["_source"] = str(path)
    return frame


def how_run_folder_ended(folder: Path) -> str:
    """'advisor_stopped' when a trainer's run folder holds stopped.json (a run killed before its
    summary.json stays stopped: the trainer does not resume it), 'finished' when it holds
    summary.json alone, '' when neither: the run is in flight. A folder that cannot be entered
    (permission denied: pathlib's exists() raised it) says neither; its log cannot be read either."""
    if os.path.exists(folder / "stopped.json"):
        return "advisor_stopped"
    return "finished" if os.path.exists(folder / "summary.json") else ""


# attrs key of a checked table: the runs left out of it and why ({run_id: {"recipe", "reason"}}), for the fit
LEFT_OUT_RUNS = "left_out_runs"
# what read_csv takes for a missing value by default (pandas' documented list)
CSV_MISSING = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
               "NA", "NULL", "NaN", "None", "n/a", "nan", "null")
NAME_COLUMNS = ("run_id", "recipe")


@contextlib.contextmanager
def _data_warnings_recorded():
    """Records the UserWarnings this thread raises in the block, in place of showing them, into the
    list it yields (each message once, in order), filled when the block ends, by an error too. Other
    warnings, and other threads' (a service checking two uploads at once), are shown as Python would."""
    messages = []
    caught = []
    try:
        with this_threads_warnings_recorded(UserWarning) as caught:
            yield messages
    finally:
        messages.extend(dict.fromkeys(str(w.message) for w in caught))


def data_warnings_of(call, *args, **kwargs):
    """(call(*args, **kwargs), the UserWarnings it raised, each message once), for callers that say
    the data's warnings in their own words (watch, the trainer's advisor). Other warnings are shown
    as Python would. What call raises propagates; the warnings caught before it are then dropped."""
    with _data_warnings_recorded() as messages:
        result = call(*args, **kwargs)
    return result, messages


# What a warning of these kinds says after its column, before the numbers that move as a sweep in flight
# grows (how many runs fall, of how many judged; runs' typical compute and its ratio): a watch says each
# once per column, not again whenever a poll moves them, since the numbers are not news to someone who
# has heard the warning.
METRIC_FALLS = "falls with compute in "
COMPUTE_IN_TWO_UNITS = "runs' compute differs by "
DRIFTING_WARNING_KINDS = (METRIC_FALLS, COMPUTE_IN_TWO_UNITS)


def data_warning_topic(message: str) -> str:
    """What makes a data warning news to someone who has heard it: for a kind in DRIFTING_WARNING_KINDS,
    that kind about its column (the file left out: the falling metric's is the first row's, which moves
    as runs join); for any other, its whole text."""
    for kind in DRIFTING_WARNING_KINDS:
        head, found, _ = message.partition(kind)
        column = re.search(r"(?:^|, )(column '[^']*'): $", head) if found else None  # RunDataError's prefix
        if column:
            return f"{column.group(1)}: {kind}"
    return message


def _said_and_kept(call, *args, say: bool = True, **kwargs):
    """(call(*args, **kwargs), its data warnings, as data_warnings_of gives them), each also said as a
    UserWarning to whoever called our caller, as before (where call raises too: the command line printed
    them before the error), so that the table can keep them for the fit, its saved file and its report."""
    try:
        with _data_warnings_recorded() as messages:
            result = call(*args, **kwargs)
    finally:
        if say:
            for text in messages:
                warnings.warn(text, UserWarning, stacklevel=3)
    return result, messages


def _read_csv(path: Path) -> pd.DataFrame:
    # the file's bytes, read once: the zeros a crash left, the cut-short check below, the parse and the row lines
    # are judged in the same bytes. The head's zeros were judged (_binary_message), the rest's were not: past its
    # 8 KiB a block of them was read into a run's name, and one that ended the file was said as a last row cut
    # short. Judged before read_csv, which may fail on them. The file was read again for the parse and the lines:
    # one a logger appended to meanwhile (forecast watch reads it at every poll) was parsed with a last row cut
    # short that the check, judging the earlier bytes, let through (a metric 0.3917 fitted as 0.39)
    data = path.read_bytes()
    if nul_block := nul_block_message(data):
        raise RunDataError(nul_block, source=path)

    def parsed(**options) -> pd.DataFrame:
        return pd.read_csv(io.BytesIO(data), **options)

    try:
        columns = parsed(nrows=0).columns
        separator = _separator_of(columns, tabs=path.suffix.lower() == ".tsv")
        if separator != ",":
            columns = parsed(nrows=0, sep=separator).columns
        # names stay as written: "001" is not run 1, and recipe "1e-3" is not 0.001; nor is a recipe
        # "None" or a run "NA" missing (pandas' default reading, which refused them as "is missing")
        missing = {column: [""] if column in NAME_COLUMNS else list(CSV_MISSING) for column in columns}
        _refuse_repeated_header_names(path, parsed(sep=separator, header=None, nrows=1, dtype=str,
                                                   keep_default_na=False))
        names = {"run_id": str, "recipe": str, "compute_unit": str}
        if separator != ",":
            # read the numbers as text first: their decimal mark is decided for the whole file below
            numbers = {column: str for column in columns if column in DECIMAL_COLUMNS}
            raw = parsed(sep=separator, dtype={**names, **numbers}, keep_default_na=False, na_values=missing)
            decimal = _decimal_mark(path, raw, _csv_row_lines(data, len(raw), separator))
            frame = parsed(sep=separator, decimal=decimal, dtype={**names, **numbers}, keep_default_na=False,
                           na_values=missing)
            for column in numbers:
                frame[column] = frame[column].str.replace(",", ".", regex=False) if decimal == "," else frame[column]
        else:
            frame = parsed(dtype=names, keep_default_na=False, na_values=missing)
        _refuse_a_last_row_cut_short(path, data, separator, len(columns))
    except pd.errors.EmptyDataError:
        # a file with nothing in it holds no rows, as a header-only one or an empty JSONL log does
        # (in a folder it is skipped, where it failed the whole read; named, it "holds no rows")
        return pd.DataFrame()
    frame["_line"] = _csv_row_lines(data, len(frame), separator)
    return _without_trailing_empty_columns(frame)


def _refuse_repeated_header_names(path: Path, header: pd.DataFrame) -> None:
    """RunDataError when the header names a column twice: read_csv renames the second 'metric' to
    'metric.1', so the fit read the first in silence (two exports pasted side by side). `header`: the file's
    first line as a row of text (read_csv with header=None, nrows=1)."""
    names = [str(name).strip() for name in header.iloc[0]] if len(header) else []
    for name in dict.fromkeys(names):
        places = [number for number, other in enumerate(names, start=1) if other == name]
        if name and len(places) > 1:
            raise RunDataError(f"appears more than once in the header (columns {', '.join(map(str, places))}): "
                               "keep one column of each name", source=path, column=name)


def _refuse_a_last_row_cut_short(path: Path, text: bytes, separator: str, n_columns: int) -> None:
    """RunDataError when the file ends inside its last row, without a newline, and that row has fewer fields
    than the header (and than the row before it: a writer may leave out a row's empty last fields): a write or a
    copy cut off. read_csv fills the missing fields with NaN and reads the cut one as written, so a metric cut
    from 0.3917 to 0.39 was fitted in silence (a JSONL log's torn last line is left out, as a log in flight is
    one; a CSV row is not told from a complete one, so it is refused). `text`: the file's bytes (_read_csv's)."""
    if text.endswith((b"\n", b"\r")):  # a whole last line
        return
    rows = [line for line in text.split(b"\n") if line.strip()]
    if len(rows) < 2:  # a header alone
        return
    fields = _field_count(rows[-1], separator)
    before = _field_count(rows[-2], separator) if len(rows) > 2 else n_columns
    if fields is not None and fields < min(n_columns, before or n_columns):
        line = text.count(b"\n") + 1
        raise RunDataError(f"line {line} has {fields} fields where the header has {n_columns}, and the file ends inside "
                           "it, without a newline: a write or a copy cut short? Complete the line or delete it", source=path)


def _field_count(line: bytes, separator: str) -> int | None:
    """How many fields a CSV line holds, or None for a line that opens or closes a quoted field holding a newline."""
    text = line.decode("utf-8", errors="replace")
    if text.count('"') % 2:
        return None
    return len(next(csv.reader([text], delimiter=separator), []))


class _RepeatedKey(ValueError):
    """A JSON object that gives one key twice (json.loads keeps the last value in silence)."""


def _object_without_repeated_keys(pairs):
    keys = [key for key, _ in pairs]
    if len(set(keys)) < len(keys):
        raise _RepeatedKey(next(key for key in keys if keys.count(key) > 1))
    return dict(pairs)


# the columns read as numbers, whose decimal mark a file separated by ';' or tabs decides
DECIMAL_COLUMNS = ("compute", "metric", *OPTIONAL_NUMERIC, "true_metric")


def _separator_of(columns, *, tabs: bool) -> str:
    """',' for a CSV, or the separator of a header that read as one column holding it and the run
    format's names: ';' as Excel saves a CSV where the decimal mark is a comma (most of Europe), or a
    tab (a sheet saved as tab-separated text). A .tsv file (`tabs`) is separated by tabs, but for a
    header whose commas separate the run format's names (a CSV saved under that name)."""
    if tabs:
        return "," if set(REQUIRED_COLUMNS) <= {str(name).strip() for name in columns} else "\t"
    for separator in (";", "\t"):
        names = {name.strip().strip('"') for name in str(columns[0]).split(separator)} if len(columns) == 1 else set()
        if set(REQUIRED_COLUMNS) <= names:
            return separator
    return ","


def _decimal_mark(path: Path, raw: pd.DataFrame, lines) -> str:
    """',' where the numbers of a file separated by ';' or tabs are written with a decimal comma (0,35), else '.'.
    A number with a '.' beside decimal commas is ambiguous (1.234 is 1234 where '.' groups
    thousands) and refused, naming it, rather than read 1000x off."""
    text = raw[[c for c in raw.columns if c in DECIMAL_COLUMNS]].astype("string")
    # a number holds one decimal mark: two commas in it group its digits (1,500,000, as a sheet shows it), said
    # as not a number where it is read, not taken for decimal commas that made it 1.500.000
    comma = text.apply(lambda column: column.str.contains(r"\d,\d", regex=True, na=False)
                       & ~column.str.contains(",.*,", regex=True, na=False)).stack()
    if not comma.any():
        return "."
    dot = text.apply(lambda column: column.str.contains(".", regex=False, na=False)).stack()
    if dot.any():
        index, column = dot.idxmax()
        example = text.at[comma.idxmax()]
        run_id = raw.at[index, "run_id"] if "run_id" in raw.columns else None
        raise RunDataError(
            f"value {text.at[index, column]!r} has a '.' where the file's other numbers use a decimal comma "
            f"({example!r}), so the '.' may group thousands: write every number with one decimal mark",
            source=path, column=column, run_id=run_id if pd.notna(run_id) else None, row=int(lines[index]))
    return ","


def _without_trailing_empty_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """A separator at the end of every line (Excel's trailing comma) makes a column without a name
    or a value, 'Unnamed: 7': not data, and not carried into the fit."""
    empty = [c for c in frame.columns if str(c).startswith("Unnamed: ") and frame[c].isna().all()]
    return frame.drop(columns=empty)


def _csv_row_lines(data: bytes, n_rows: int, separator: str = ",") -> np.ndarray:
    """The file line of each data row, for errors that name it (`data`: the file's bytes, as parsed). read_csv
    skips blank lines, so counting rows from the header put an error after a blank line one line or more too
    early. A quoted field holding a newline (a notes column) spans lines: the records are then read as CSV, each
    named by the line it starts on (every row after such a field was named a line early). Where neither count
    matches the rows read, rows counted from line 2."""
    text = data.decode("utf-8", errors="replace")
    filled = [number for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if len(filled) == n_rows + 1:  # the header and one line per row
        return np.array(filled[1:])
    starts = _csv_record_lines(text, separator)
    if starts is not None and len(starts) == n_rows + 1:
        return np.array(starts[1:])
    return np.arange(n_rows) + 2


def _csv_record_lines(text: str, separator: str) -> list[int] | None:
    """The line each non-blank CSV record of `text` starts on (a record may span lines inside quotes), or None
    where the csv module cannot read it as the parser did."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=separator)
    starts, end = [], 0
    try:
        for record in reader:
            if any(cell.strip() for cell in record):
                starts.append(end + 1)
            end = reader.line_num
    except csv.Error:
        return None
    return starts


def _ragged_csv_message(parser_message: str, path: Path) -> str:
    found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", parser_message)
    if not found and "EOF inside string" in parser_message and (line := _unclosed_quote_line(path)):
        # the parser's "starting at row 3" counts neither the header nor blank lines: the file's line instead
        return (f"line {line} opens a quote (\") that is never closed, so every line after it reads as one value "
                "(a stray quote?)")
    if not found:
        return f"could not be read as CSV ({parser_message.strip()})"
    expected, line, saw = found.groups()
    return f"line {line} has {saw} fields where the header has {expected} (a stray comma, or a row cut short?)"


def _unclosed_quote_line(path: Path) -> int | None:
    """The line where a CSV's last quoted field opens and is never closed, or None."""
    inside, opened = False, None
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        for _ in range(line.count('"')):
            inside = not inside
            opened = number if inside else None
    return opened if inside else None


def _not_utf8_message(path: Path, err: UnicodeDecodeError) -> str:
    """Which line of a text file is not UTF-8 (a table saved as Latin-1, or UTF-16 by a spreadsheet)."""
    for number, line in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as bad:
            return f"line {number} is not UTF-8 text (byte 0x{line[bad.start]:02x}); save the file as UTF-8"
    return f"is not UTF-8 text ({err.reason}); save the file as UTF-8"


@dataclass(frozen=True)
class FolderListing:
    files: list  # every file below the folder, each once, sorted
    unlisted: list  # (folder, OSError) for each folder that could not be listed
    dangling: list  # symbolic links to nothing, or that lead back to themselves
    cut: list = field(default_factory=list)  # (link, where it leads) whose tree goes deeper than LINKED_TREE_DEPTH


# How many levels of folders below a link's target are listed. A link gathers runs from elsewhere: a run
# folder (0), a sweep's folder (its runs at 1), a folder of sweeps (2), a project's (3); deeper than that
# it leads to a tree of other files (a dataset cache, /usr), once listed in full at every read and every
# poll of forecast watch (/usr's 120,000 files in 2 s, a cache's millions in minutes), for no run.
LINKED_TREE_DEPTH = 3


def list_folder(folder: Path) -> FolderListing:
    """Every file below `folder`, following links to folders (a sweep put together from links to its
    run folders: pathlib's rglob does not follow them, and their runs were left out without a word),
    each folder and file once (a link back up, to it or above it, a loop, or a second link to a folder
    already listed is not read again). Below a link, folders are listed LINKED_TREE_DEPTH levels deep,
    the folder given to any depth. A folder that cannot be listed (permission denied), a link to nothing
    and a link whose tree goes deeper (not inside a run folder) are returned for the caller to say: rglob
    skipped the first two in silence, and with them the runs inside."""
    files, unlisted, dangling, cut = [], [], [], []
    # the folders holding a run log below a link: the folders inside one hold the run's own files (TensorBoard's
    # runs/<date_host>/, a DeepSpeed checkpoint's global_stepN/), not other runs: cut there, no run log is left out
    run_folders = set()
    # the folders above it count as listed: a link back up to one of them climbed out of the folder given,
    # and read the runs beside it (another sweep's, or a whole disk's through a link to /)
    seen_folders, seen_files = _folders_above(folder), set()
    # (levels below the link it is reached through, -1 for none; order found; folder; that link), taken
    # fewest levels first: a folder reached by its own path and through a link, or through two links,
    # is listed as the nearer (a deep run of the folder given is read, not cut short by a link to it)
    order = itertools.count()
    pending = [(-1, next(order), folder, None)]
    while pending:
        level, _, current, link = heapq.heappop(pending)
        try:
            identity = _identity(current.stat())
            if identity in seen_folders:
                continue
            if level > LINKED_TREE_DEPTH:
                if link not in dict(cut) and run_folders.isdisjoint(current.parents):
                    cut.append((link, _where_a_link_leads(link)))
                continue
            with os.scandir(current) as listing:
                entries = list(listing)
        except FileNotFoundError:
            continue  # deleted while the folder was listed: gone, as if listed a moment later
        except OSError as err:
            # a run folder that may be entered but not listed: its log (and summary.json) are reached by name,
            # as rglob did. os.path, not pathlib: a folder that may not be entered either (another user's, mode
            # 700) makes pathlib's is_file() raise PermissionError (Python < 3.12), and the folder is refused
            if os.path.isfile(current / RUN_LOG_NAME):
                files.append(current / RUN_LOG_NAME)
            else:
                unlisted.append((current, err))
            continue
        seen_folders.add(identity)
        for entry in entries:
            path = current / entry.name
            try:
                if entry.is_dir():  # through a link too
                    below, through = _level_below(level, link, path, entry.is_symlink())
                    heapq.heappush(pending, (below, next(order), path, through))
                elif entry.is_file():
                    if entry.name == RUN_LOG_NAME and level >= 0:  # a link put in a run folder is still said
                        run_folders.add(current)
                    if (identity := _file_identity(entry)) not in seen_files:
                        seen_files.add(identity)
                        files.append(path)
                elif entry.is_symlink() and not path.exists():
                    dangling.append(path)
            except OSError as err:  # a link whose target cannot be looked at (permission denied)
                if err.errno == errno.ELOOP:  # a link that leads back to itself holds no runs: as a link to nothing
                    dangling.append(path)
                else:
                    unlisted.append((path, err))
    return FolderListing(sorted(files), sorted(unlisted, key=lambda item: item[0]), sorted(dangling), sorted(cut))


def _where_a_link_leads(link: Path) -> str:
    """The link's target as written, taken while the link is there (said later, it may be gone by then)."""
    try:
        return os.readlink(link)
    except OSError:
        return os.path.realpath(link)


def _level_below(level: int, link, path: Path, is_link: bool) -> tuple:
    """(levels below a link, that link) of the folder `path` found in a folder `level` levels below `link`
    (-1, None: in the folder given, by its own path). The first link counts: one within its tree is a level
    as a folder is, so a chain of links does not start the count again."""
    if level >= 0:
        return level + 1, link
    return (0, path) if is_link else (-1, None)


def _folders_above(folder: Path) -> set:
    """The identities of the folders that hold `folder`, by the path given and by the path its links lead
    to (a sweep given through a link has two sets of parents)."""
    above = set()
    for path in (Path(os.path.abspath(folder)), Path(os.path.realpath(folder))):
        for parent in path.parents:
            with contextlib.suppress(OSError):
                above.add(_identity(parent.stat()))
    return above


def _identity(stat_result) -> tuple:
    return stat_result.st_dev, stat_result.st_ino


def _file_identity(entry: os.DirEntry):
    """What tells one file from another reached by a second path (a link), or the entry's path where
    the file cannot be looked at (its folder's execute permission denied): the reader then says why."""
    try:
        return _identity(entry.stat())
    except OSError:
        return entry.path


def run_logs_below(folder: Path, *, warn_unread: bool = False) -> list[Path]:
    """The run logs (`evals.jsonl`) below `folder`, through links to folders. warn_unread: say each
    folder that could not be listed and each link to nothing, as UserWarnings (for forecast watch,
    which goes on with the runs it can read), instead of nothing."""
    listing = list_folder(Path(folder))
    if warn_unread:
        for message in _unread_messages(listing):
            warnings.warn(message, UserWarning, stacklevel=2)
    return [p for p in listing.files if p.name == RUN_LOG_NAME]


def _unread_messages(listing: FolderListing) -> list[str]:
    said = [str(RunDataError(f"cannot be listed ({_reason(err)}): the runs in it, if any, are left out", source=folder))
            for folder, err in listing.unlisted]
    said += [str(RunDataError(_why_a_link_leads_nowhere(link), source=link)) for link in listing.dangling]
    return said + [str(RunDataError(f"is a link to {target}, whose folders are read {LINKED_TREE_DEPTH} deep, not deeper "
                                    "(a tree of other files, not of runs?): a run log deeper in it is left out; link its "
                                    "run folder, or its sweep's folder, instead", source=link))
                   for link, target in listing.cut]


def _why_a_link_leads_nowhere(link: Path) -> str:
    try:
        os.stat(link)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return f"is a link to {os.readlink(link)} that leads back to itself ({err.strerror.lower()}): left out"
    return f"is a link to {os.readlink(link)}, which does not exist: left out (a run folder moved or deleted?)"


def _reason(err: OSError) -> str:
    return "permission denied" if isinstance(err, PermissionError) else (err.strerror or type(err).__name__).lower()


def _files_in_folder(listing: FolderListing) -> list[Path]:
    """Run logs (`evals.jsonl`, as trainer_minimal writes) win over anything else in a folder,
    so a sweep folder holding both the per-run logs and a combined table is not read twice."""
    logs = [p for p in listing.files if p.name == RUN_LOG_NAME]
    if logs:
        return logs
    return [p for p in listing.files if p.suffix.lower() in FOLDER_SUFFIXES and p.name != TRAINER_STEP_LOG]


def run_tables_below(folder) -> list[Path]:
    """The run tables `load_runs(folder)` would read where the folder holds no run log (`evals.jsonl`):
    [] where it holds one, or nothing but other files."""
    listing = list_folder(Path(folder))
    return [] if any(p.name == RUN_LOG_NAME for p in listing.files) else _files_in_folder(listing)


def _listed(folder: Path) -> FolderListing:
    """The folder's listing; a part of it that cannot be listed is refused (its runs would be left
    out of the result without a word), and a link to nothing is said."""
    listing = list_folder(folder)
    if listing.unlisted:
        place, err = listing.unlisted[0]
        raise RunDataError(f"cannot be listed ({_reason(err)}), so the runs in it would be left out: ask its owner, "
                           "or copy the runs somewhere you can read", source=place)
    for message in _unread_messages(listing):
        warnings.warn(message, UserWarning, stacklevel=3)
    return listing


def read_table(path) -> pd.DataFrame:
    """Read a run table from a CSV/Parquet/JSONL file or a folder of them, without validating."""
    path = Path(path).expanduser()  # "~/runs.csv", as pandas reads it: it was "does not exist"
    try:
        is_folder = stat.S_ISDIR(path.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError):
        raise RunDataError("does not exist", source=path) from None
    except PermissionError:  # in a folder that may be listed but not entered: pathlib's exists() raised it
        raise RunDataError("cannot be read (permission denied): ask its owner, or copy it somewhere you can read",
                           source=path) from None
    except OSError as err:  # a link that loops, a name too long: pathlib's exists() took the first for "not there"
        raise RunDataError(f"cannot be read ({err.strerror})", source=path) from None
    listing = _listed(path) if is_folder else None
    files = _files_in_folder(listing) if listing else [path]
    frames = [f for f in map(_read_one_file, files) if len(f)]
    if not listing:
        _refuse_the_trainer_s_step_log(path, frames)
    if not frames and listing and (step_log := next((p for p in listing.files if p.name == TRAINER_STEP_LOG), None)):
        raise RunDataError(f"holds trainer runs that have not evaluated yet ({step_log}, but no {RUN_LOG_NAME}: "
                           "a run writes it at its first evaluation, every --eval-every steps)", source=path)
    if not files:
        raise RunDataError("folder holds no run files (*.csv, *.parquet, *.pq, *.jsonl)", source=path)
    if not frames:
        raise RunDataError("holds no rows", source=path)
    if listing:
        _refuse_a_file_lacking_what_the_others_hold(frames)
        _warn_of_runs_only_in_tables_beside_logs(listing, frames, path)
    return pd.concat(frames, ignore_index=True)


def _refuse_the_trainer_s_step_log(path: Path, frames: list[pd.DataFrame]) -> None:
    """RunDataError for trainer_minimal's per-step log named as the input: it was refused as "column 'run_id' is
    missing", as if the trainer had written a bad run table, with no word of the log that holds its runs. A table
    of the user's own under that name, with a run_id column, is read as any other."""
    if path.name != TRAINER_STEP_LOG or any("run_id" in frame.columns for frame in frames):
        return
    raise RunDataError(f"is the trainer's per-step log (a row per training step, no run_id or metric), not a run table: "
                       f"give forecast the run folder ({path.parent}), or the {RUN_LOG_NAME} in it (a row per "
                       "evaluation)", source=path)


def _refuse_a_file_lacking_what_the_others_hold(frames: list[pd.DataFrame]) -> None:
    """A file of a folder without a required column that the folder's other files hold (a stray export,
    notes saved as CSV) is refused by name, with its columns: joined to the others its rows would lack that
    column's values, and the error would read 'row 2: is missing (NaN/empty)' as if one cell were empty."""
    held = set().union(*(set(frame.columns) for frame in frames)) & set(REQUIRED_COLUMNS)
    for frame in frames:
        lacking = [column for column in REQUIRED_COLUMNS if column in held and column not in frame.columns]
        if lacking:
            present = [str(c) for c in frame.columns if str(c) not in ("_line", "_source")]
            # a run table whose header spells a name otherwise ('Metric', ' recipe') is no stray: told what it is
            # told when named alone, not to move it out
            spelt = [hint for column in lacking if (hint := _misspelt_name_hint(column, present))]
            what = "; ".join(spelt) if spelt else (f"is it a run table? Give it {'that column' if len(lacking) == 1 else 'those columns'}, "
                                                   "or move it out of the folder")
            raise RunDataError(
                f"lacks {said_together([repr(c) for c in lacking])}, which the folder's other files hold (its columns: "
                f"{names_shown(present, 20)}): {what}", source=frame["_source"].iloc[0])


def _tables_beside_logs(listing: FolderListing) -> list[Path]:
    """The tables a folder holding run logs is not read through (see _files_in_folder)."""
    if not any(p.name == RUN_LOG_NAME for p in listing.files):
        return []
    return [p for p in listing.files if p.suffix.lower() in FOLDER_SUFFIXES and p.name not in (RUN_LOG_NAME, TRAINER_STEP_LOG)]


def _warn_of_runs_only_in_tables_beside_logs(listing: FolderListing, frames: list, folder: Path) -> None:
    """A folder with run logs is read through them alone, so that a sweep's runs.csv (the same rows)
    is not read twice; a table there holding other runs (a second sweep's table copied in beside the
    run folders) was left out without a word. Said, naming the table and its runs; a table that
    cannot be read, or names no runs, says nothing of them."""
    tables = _tables_beside_logs(listing)
    if not tables:  # most sweeps: the logs' runs are not named for nothing (about 7 ms on 75 runs, at each watch poll)
        return
    # named as validate_runs names them (formatting.name_of): another tool's table holds run 3 as 3.0
    logged = set().union(*(_run_names(f["run_id"]) for f in frames if "run_id" in f))
    for table in tables:
        named = _runs_named_in_table(table)
        if named is None:
            continue
        others = sorted(named - logged)
        if others:
            warnings.warn(str(RunDataError(
                f"holds {len(others)} run(s) that no run log ({RUN_LOG_NAME}) under {folder} holds ({names_shown(others, 6)}): left out, "
                f"as a folder with run logs is read through those alone; give the table as its own RUNS to read it",
                source=table)), UserWarning, stacklevel=3)


def _runs_named_in_table(table: Path) -> frozenset | None:
    """The runs a table beside run logs names, None when it cannot be read or has no run_id column. Kept
    while the file is unchanged (its device, inode, size and times: any write moves its ctime, once past the
    file system's time resolution), since forecast watch reads the folder at every poll and reading the table again was a fifth of that read."""
    try:
        info = table.stat()
    except OSError:  # read as it is, which says why it cannot be
        return _runs_named_in_file.__wrapped__(str(table), None)
    if time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) < _JUST_CHANGED_NS:
        # a file system that keeps coarse times (whole seconds: NFS, FAT, HFS+) gives a table rewritten at
        # the same size within that time the same stat, so what was kept for it would be said ever after
        return _runs_named_in_file.__wrapped__(str(table), None)
    return _runs_named_in_file(str(table), (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))


# how long after its last change a table's stat cannot yet tell it from a rewrite (coarsest common: FAT's 2 s)
_JUST_CHANGED_NS = 3 * 10**9


@functools.lru_cache(maxsize=64)
def _runs_named_in_file(path: str, version: tuple) -> frozenset | None:
    try:
        with this_threads_warnings_dropped():  # its own problems are not this read's: it is not read
            frame = _read_one_file(Path(path))
    except RunDataError:
        return None
    return frozenset(_run_names(frame["run_id"])) if "run_id" in frame else None


def _run_names(column: pd.Series) -> set:
    """The runs a run_id column names, as validate_runs names them (a blank cell names none)."""
    return set(_names_of(column.dropna()).unique())


# ----------------------------------------------------------------------------- validating


def _where(frame: pd.DataFrame, index) -> dict:
    """File, run and row of one offending row, for the error message."""
    row = frame.loc[index]
    source = row["_source"] if "_source" in frame.columns else None
    line = row["_line"] if "_line" in frame.columns else index
    run_id = name_of(row["run_id"]) if "run_id" in frame.columns and pd.notna(row.get("run_id")) else None
    run_id = run_id if run_id is not None and run_id.strip() else None  # a blank name names no run
    return {"source": source, "run_id": run_id, "row": int(line) if pd.notna(line) else None}


def _not_a_plain_number(value) -> bool:
    """True/False and dates are read as numbers by pandas (1, nanoseconds since 1970): refused here,
    because a compute of True or of a timestamp is a column mix-up, never a measurement."""
    return isinstance(value, (bool, np.bool_, pd.Timestamp, pd.Timedelta, pd.Period, np.datetime64, np.timedelta64))


def _beyond_float_range(value) -> bool:
    """An integer no float can hold (JSON keeps 1 followed by 400 zeros as a Python int)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    try:
        float(value)
    except OverflowError:
        return True
    return False


def _refuse_a_value_beyond_float_range(frame: pd.DataFrame, column: str) -> None:
    """JSON reads a 400-digit number as a Python int, which to_numeric cannot make a float: it raised
    OverflowError out of the reader (a traceback) where a 1e400 written as a float is "infinite"."""
    if not pd.api.types.is_object_dtype(frame[column].dtype):  # such an int is held only in a column of objects
        return
    beyond = frame[column].map(_beyond_float_range)
    if beyond.any():
        idx = beyond.idxmax()
        digits = len(str(abs(frame.loc[idx, column])))
        raise RunDataError(f"value of {digits} digits is beyond a float's range (about 1.8e308), not a usable number",
                           column=column, **_where(frame, idx))


def _require_numeric(frame: pd.DataFrame, column: str, *, required: bool) -> None:
    kind = frame[column].dtype
    types = pd.api.types
    # a period (a day, a month: a Parquet file keeps pandas' periods) read as its count of days or months since 1970
    if types.is_bool_dtype(kind) or types.is_datetime64_any_dtype(kind) or types.is_timedelta64_dtype(kind) \
            or types.is_object_dtype(kind) or isinstance(kind, pd.PeriodDtype):
        odd = frame[column].map(_not_a_plain_number)
        if odd.any():
            idx = odd.idxmax()
            what = "true/false" if isinstance(frame.loc[idx, column], (bool, np.bool_)) else "a date or a duration"
            raise RunDataError(f"value {frame.loc[idx, column]!r} is {what}, not a number", column=column,
                               **_where(frame, idx))
        _refuse_a_value_beyond_float_range(frame, column)
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = values.isna() & frame[column].notna()
    if bad.any():
        idx = bad.idxmax()
        raise RunDataError(
            f"value {frame.loc[idx, column]!r} is not a number{_as_a_number(frame.loc[idx, column])}", column=column,
            **_where(frame, idx))
    if required and values.isna().any():
        idx = values.isna().idxmax()
        # counted in the file the message names: a folder's files read together counted every file's rows
        raise RunDataError(f"is missing (NaN/empty){_rows_missing(values[_rows_of_the_file_of(frame, idx)])}",
                           column=column, **_where(frame, idx))
    if np.isinf(values).any():
        idx = np.isinf(values).idxmax()
        raise RunDataError("is infinite", column=column, **_where(frame, idx))
    frame[column] = values.astype(float)


def _as_a_number(value) -> str:
    """How to write a value that is not a number as one, where it shows: a sheet formatted as
    percentages exports '45.5%', one that groups thousands '1,500,000'."""
    text = str(value).strip()
    percent = re.fullmatch(r"([-+]?[\d.]+(?:[eE][-+]?\d+)?)\s*%", text)
    if percent and _is_number(percent.group(1)):
        return f" (a percentage: write the rate as a number in [0, 1], {float(percent.group(1)) / 100:g} for {text})"
    if re.fullmatch(r"[-+]?0,\d+", text):  # no group of thousands starts with 0: a sheet's decimal comma ("0,355")
        return f" (a decimal comma: write it with a point, {text.replace(',', '.')})"
    if re.fullmatch(r"[-+]?[1-9]\d{0,2}(,\d{3})+(\.\d*)?", text):  # a sheet's thousands separators
        return f" (its digits grouped by ',': write it without them, {text.replace(',', '')})"
    return ""


def _rows_of_the_file_of(frame: pd.DataFrame, index) -> pd.Series:
    """Which rows of `frame` come from the file that row `index` comes from (every row where the
    table names no files; rows of a table in memory, whose _source is NaN, count as one file)."""
    if "_source" not in frame.columns:
        return pd.Series(True, index=frame.index)
    source = frame.at[index, "_source"]
    return frame["_source"].isna() if pd.isna(source) else frame["_source"] == source


def _rows_missing(values: pd.Series) -> str:
    """'' for a cell or two lost; where a quarter of the rows or more lack a value the others hold, how
    many and the likely cause: a tracker's export has a row per logged step, each key on some of them."""
    missing = int(values.isna().sum())
    if missing < 2 or missing < len(values) / 4 or missing == len(values):
        return ""
    return (f" on {missing} of {len(values)} rows, here first: a tracker's export, with a row per logged step and this "
            "column on some? Keep the rows that hold it (docs/run_format.md, 'From a tracker's export')")


def require_rates(frame: pd.DataFrame, column: str) -> None:
    """`column` must hold a pass rate, a number in [0, 1], on every row (converted to float in
    place); RunDataError names the file, column, run and row of the first that does not. The metric
    column, and a replica's true pass rates (`forecast backtest --truth`)."""
    _require_numeric(frame, column, required=True)
    bad = (frame[column] < 0) | (frame[column] > 1)
    if bad.any():
        idx = bad.idxmax()
        value = frame.loc[idx, column]
        raise RunDataError(f"must lie in [0, 1], got {_shown(value, lambda v: 0 <= v <= 1)}"
                           f"{_percent_hint(frame[column])}", column=column, **_where(frame, idx))


def _percent_hint(rates: pd.Series) -> str:
    """Where every value lies in [0, 100] and most above 1, the column reads as percentages: say so, and what to do.
    Not divided here: a column of pass counts or rewards can lie in [0, 100] too, and a sweep whose
    rates all stay under 1% would be read as fractions by any guess, 100x off beside its siblings."""
    if rates.min() >= 0 and rates.max() <= 100 and rates.median() > 1:  # one stray value is not a column in percent
        return " (percentages? the column holds values from 0 to 100: divide it by 100 for a rate in [0, 1])"
    return ""


# n_eval's rule, one for a run table's column, ForecastPruner's and ForecastCallback's n_eval. Its most is
# 10**12, a trillion graded samples, more than any evaluation grades (10**30, taken once, is a typo or not a
# count of samples). The bound is far below 2**53 because a table's column is read as floats where a cell is
# empty or written with a point, and a float counts whole numbers exactly only to 2**53: with 2**53 as the
# most, 2**53 + 1 was read as 2**53 and taken. Below 10**12 a float still tells 10**12 + 1, and a fraction.
MAX_N_EVAL = 10**12
N_EVAL_RULE = "a whole number of graded samples from 1 to 10**12"


def is_usable_n_eval(value) -> bool:
    """Whether `value` keeps N_EVAL_RULE: a number (not a bool), whole, from 1 to MAX_N_EVAL."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return False
    if isinstance(value, numbers.Integral):
        return 1 <= value <= MAX_N_EVAL  # as integers: a huge int made a float may round into the range
    value = float(value)
    return math.isfinite(value) and value.is_integer() and 1 <= value <= MAX_N_EVAL


def _shown(value: float, fine) -> str:
    """A refused value in the short form (:g), or in full where the short form is a value that
    `fine` accepts: 1 + 2e-16 (a rate's rounding error) read "must lie in [0, 1], got 1"."""
    short = f"{value:g}"
    return repr(float(value)) if fine(float(short)) else short


def require_names(frame: pd.DataFrame, column: str) -> None:
    """Every row names its run (or recipe): a row without one cannot be told apart from another
    run's, and astype(str) would make a run called 'nan' of it."""
    missing = frame[column].isna() | (frame[column].astype(str).str.strip() == "")
    if missing.any():
        raise RunDataError("is missing (NaN/empty)", column=column, **_where(frame, missing.idxmax()))


def _names_of(column: pd.Series) -> pd.Series:
    """A run_id or recipe column as the names validate_runs gives (formatting.name_of): run 3.0 of a float
    column is '3'. A column of text holds its names as they are, so it is not mapped value by value (a
    Python call per row, most of a millisecond per thousand rows, after every evaluation in forecast watch)."""
    if isinstance(column.dtype, pd.StringDtype):
        return column.astype(str)
    return column.map(name_of).astype(str)


def validate_runs(frame: pd.DataFrame, *, source=None, min_points: int = 2) -> pd.DataFrame:
    """Check a run table and return a clean copy sorted by (recipe, run_id, compute). The table is a
    pandas DataFrame, or a dict of columns, a list of rows (dicts) or a pyarrow or polars table.

    min_points: the fewest evaluations a run needs (a curve needs 2); a run in flight with fewer is left
    out with a warning (unless every run is), any other is an error.
    Raises RunDataError naming the file, column, run and row of the first problem found (two
    values of compute_unit in one table among them). Its warnings (n_eval missing on some rows,
    runs' compute over 1000x apart, runs of one recipe that differ in a recipe setting, a metric that
    falls with compute in most runs, runs in flight left out) are said
    once per table: a table this function returned, unchanged since, is checked again in silence
    (load_runs, then fit). The table returned keeps them, as said, in attrs["data_warnings"] (a fit
    saves them and its report shows them: the page is read by people who never see the terminal).
    A table changed since (filtered, edited) is checked again and keeps this check's warnings, with
    load_runs' own about reading its files (attrs["read_warnings"]), which no check of the table can say again.
    """
    digest = _digest(frame) if isinstance(frame, pd.DataFrame) else None
    said_before = digest is not None and frame.attrs.get("validated_digest") == digest
    # a DataFrame's attrs travel through pandas' filters (a mask, .query, .loc, .copy), not through a
    # pd.concat of tables whose attrs differ; a warning about a run filtered out since stays, as the file said it
    said_reading = list(frame.attrs.get("read_warnings", [])) if isinstance(frame, pd.DataFrame) else []
    clean, said = _said_and_kept(_checked_runs, frame, source=source, min_points=min_points, say=not said_before)
    if said_before:  # as said the first time, with load_runs' own about reading the file
        said = list(frame.attrs.get("data_warnings", said))
    # a run left out by an earlier check (load_runs, then fit) is no longer in the table to be left out again;
    # of a table filtered since, only those of a recipe still in it: a recipe filtered away was said to be
    # "not in the fit: its run 'x' was left out (...); fit again once it has more", its finished runs unnamed
    earlier = frame.attrs.get(LEFT_OUT_RUNS, {}) if isinstance(frame, pd.DataFrame) else {}
    fitted_runs, fitted_recipes = set(clean["run_id"]), set(clean["recipe"].map(str))
    clean.attrs[LEFT_OUT_RUNS] = {**{run: why for run, why in earlier.items() if run not in fitted_runs
                                     and (said_before or why.get("recipe") in fitted_recipes)},
                                  **clean.attrs.get(LEFT_OUT_RUNS, {})}
    clean.attrs["validated_digest"] = _digest(clean)
    clean.attrs["read_warnings"] = said_reading
    clean.attrs["data_warnings"] = list(dict.fromkeys([*said_reading, *said]))
    return clean


def _digest(frame: pd.DataFrame) -> int | None:
    """A fingerprint of a table's content (index, columns and values), to tell an unchanged one;
    None when a cell cannot be hashed (a list in a JSONL field), so such a table is never "unchanged"."""
    try:
        return int(pd.util.hash_pandas_object(frame, index=True).sum()) ^ hash(tuple(map(str, frame.columns)))
    except TypeError:
        return None


def _require_one_column_per_name(frame: pd.DataFrame, source) -> None:
    """Each column is found by one name: two columns named 'metric' (a concat along columns), or
    names on several header rows, made frame['metric'] a table and the checks fail with a traceback."""
    if frame.columns.nlevels > 1:
        raise RunDataError("has column names on several levels (a MultiIndex); give each column one name, "
                           "e.g. frame.columns = frame.columns.get_level_values(-1)", source=source)
    twice = frame.columns[frame.columns.duplicated()]
    if len(twice):
        raise RunDataError("appears more than once; keep one column of each name", source=source, column=twice[0])


# what experiment trackers' exports (Weights & Biases, MLflow) and hand-made tables often call the columns
EXPORT_NAMES = {"run_id": ("name", "run.name", "run_name", "run", "run name", "tags.mlflow.runname"),
                "recipe": ("group", "run.group", "recipe_name", "experiment", "sweep"),
                "compute": ("flops", "total_flops", "train_flops", "cumulative_flops", "compute_flops"),
                "metric": ("pass_rate", "pass rate", "pass@1", "pass_at_1", "accuracy", "val_pass_rate", "eval/pass_rate",
                           "eval_pass_rate", "eval_accuracy", "val_accuracy", "acc", "val_acc", "success_rate", "solve_rate")}
# compute a tracker logs in GPU-hours, and the step counters trackers log (W&B's Step and _step, TensorBoard's step)
GPU_HOURS_NAME = re.compile(r"gpu[\s_\-]*(hours?|hrs?|h)")
STEP_NAMES = ("step", "_step", "global_step", "steps", "iteration", "iter")


def _missing_column_message(missing: list[str], columns) -> str:
    """'is missing', the columns there are, the other required columns missing too, and the likely
    cause of each where one shows: a name with a space or a capital, a tracker's name for it, a file
    separated by ';' or tabs, a first line of data rather than names. Every missing column is said at
    once: a tracker's export lacks all four, and saying one per try sent the user back four times."""
    # the reader's own columns are not the user's (W&B's _step, _runtime are); header=None gives names 0, 1, ...
    present = [str(c) for c in columns if str(c) not in ("_line", "_source")]
    message = f"is missing (columns present: {names_shown(present, 20)})"  # a W&B chart's export has 3 per run
    others = [f"'{column}'" for column in missing[1:]]
    if others:
        listed = said_together(others)
        message += f"; so {'is' if len(others) == 1 else 'are'} {listed}"
    # a header misread as a whole (one column, or a row of data) first: no column of it is worth a hint
    for separator in (";", "\t", "|"):
        if len(present) == 1 and separator in present[0]:
            if separator == "|":
                return f"{message}; the header is one column holding {separator!r}: separate the columns with commas"
            # read as separated by it once its names are right: 'separate the columns with commas' split every
            # decimal comma (0,35) of such a file in two
            names = [name.strip().strip('"') for name in present[0].split(separator)]
            # a name already right ('run_id') is not missing once the file is read by its separator
            hints = [hint for column in missing if column not in names and (hint := _missing_column_hint(column, names))]
            lead = (f"the header is one column holding {separator!r}, which separates the columns where they are named "
                    f"{said_together(REQUIRED_COLUMNS)}")
            return f"{message}; {lead}" + (f": {'; '.join(hints)}" if hints else "")
    if sum(map(_is_number, present)) >= 2:  # compute and metric at least; one such name may be a knob's ('2024')
        return f"{message}; some column names are numbers: does the table lack its header line?"
    if shape := _tracker_shape_hint(present):
        return f"{message}; {shape} (docs/run_format.md, 'From a tracker's export')"
    hints = [hint for column in missing if (hint := _missing_column_hint(column, present))]
    if len(missing) > 1:  # a tracker's export, renamed, is refused next for its rows without an evaluation
        hints.append("converting a tracker's export: docs/run_format.md, 'From a tracker's export'")
    return "; ".join([message, *hints])


# a W&B chart's CSV export: 'Step', then 'RUN - KEY' for each run (and 'RUN - KEY__MIN', '__MAX')
CHART_COLUMN = re.compile(r"(.+) - (.+)")


def _tracker_shape_hint(present: list[str]) -> str | None:
    """What a tracker's table of another shape than the run format's is, and how to make it one: no
    rename can (the runs' names are in its column names, or its values under their tags), so the
    hints for single columns would mislead ('Rename run to run_id'). None for any other table."""
    lowered = {name.strip().lower() for name in present}
    if {"name", "state", "created", "runtime"} <= lowered:
        return ("one row per run, as W&B's runs table: its values are each run's last, where the fit needs each run's "
                "evaluations along the way, its history")
    if {"wall time", "step", "value"} <= lowered:
        return ("one tag of one run, as TensorBoard's chart download writes it ('Wall time', 'Step', 'Value'): give "
                "its rows the run's run_id, recipe and compute, with 'Value' as 'metric', and join the runs' files")
    if {"tag", "value"} <= lowered:
        return ("a long table, one row per run, tag and step ('tag', 'value': TensorBoard's scalars): keep the rows "
                "of your pass rate's tag, with 'value' as 'metric'")
    charted = [name for name in present if CHART_COLUMN.fullmatch(name.strip())]
    if len({CHART_COLUMN.fullmatch(name.strip()).group(1) for name in charted}) >= 2:
        return (f"a column per run ({charted[0]!r}, as a W&B chart's CSV export): the run format has a row per "
                "evaluation, melted from it")
    return None


def _misspelt_name_hint(column: str, present: list[str]) -> str | None:
    """The column present that is `column` spelt otherwise ('Run ID', ' metric', 'compute (flops)', a name
    behind a byte-order mark), and what to do, or None."""
    # a byte-order mark left on the first name (a file saved with two, or joined after one) is invisible when printed
    near = [name for name in present if _plain_name(name.lstrip("\ufeff")) == column]  # 'Run ID', 'run-id' too
    if near and "\ufeff" in near[0]:
        return (f"{near[0]!r} is not '{column}': it begins with an invisible byte-order mark (U+FEFF; the "
                "file has two, or was joined to another after its first line): remove it")
    if near:
        return f"{near[0]!r} is not '{column}': names are matched exactly, without spaces or capitals"
    with_unit = [name for name in present if re.fullmatch(rf"\s*{column}\s*[(\[].*[)\]]\s*", name, re.IGNORECASE)]
    if with_unit:
        return (f"{with_unit[0]!r} is not '{column}': name the column '{column}'"
                + (" and give its unit in a column 'compute_unit'" if column == "compute" else ""))
    return None


def _missing_column_hint(column: str, present: list[str]) -> str | None:
    """Which of the columns present is likely the missing `column`, and what to do, or None."""
    if spelt := _misspelt_name_hint(column, present):
        return spelt
    # a tracker's key is the name under a prefix ('val/accuracy', 'train/flops')
    export_names = [name for name in present
                    if {name.strip().lower(), _last_key(name)} & set(EXPORT_NAMES.get(column, ()))]
    if export_names:
        return f"is {export_names[0]!r} the {column.replace('_', ' ')}? Rename it to '{column}'"
    if column == "compute":
        hours = [name for name in present if GPU_HOURS_NAME.fullmatch(_last_key(name))]
        if hours:
            return (f"is {hours[0]!r} the compute? Rename it to 'compute' and give its unit in a column 'compute_unit' "
                    "(gpu_hours)")
        steps = [name for name in present if _plain_name(_last_key(name)) in STEP_NAMES]
        if steps:  # the fit reads compute as cost: steps of two batch sizes are not one unit
            return (f"{steps[0]!r} counts steps, which stand in for compute only where every run's step costs the same "
                    "(one batch size, generation length and model): then copy it into a column 'compute', with 'steps' "
                    "in a column 'compute_unit', or else give each evaluation's training compute so far (FLOPs, GPU-hours)")
    if column == "recipe":
        return ("'recipe' groups the runs that differ only in their seed (W&B's Group), which the fit pools: with one "
                "run per recipe, give each run's run_id as its recipe")
    return None


def _plain_name(name: str) -> str:
    """A column name as the run format would spell it: 'Run ID' and ' run-id ' are 'run_id'."""
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


def _last_key(name: str) -> str:
    """A tracker's key without its prefixes: 'accuracy' of 'eval/val/accuracy', lower case."""
    return name.strip().lower().rsplit("/", 1)[-1].strip()


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _as_data_frame(table, source) -> pd.DataFrame:
    """A run table held in memory as a pandas DataFrame: a notebook's dict of columns, list of rows
    (dicts) or pyarrow or polars table is read as one, rather than refused as "expected a pandas
    DataFrame, got dict"; RunDataError saying what to pass for anything else (a path among them)."""
    if isinstance(table, pd.DataFrame):
        return table
    rows = isinstance(table, (list, tuple)) and len(table) and all(isinstance(row, Mapping) for row in table)
    if isinstance(table, Mapping) and len(table) and all(isinstance(v, pd.DataFrame) for v in table.values()):
        raise RunDataError("is a dict of tables (one per run?): join them into one table with "
                           "pd.concat(tables.values(), ignore_index=True)", source=source)
    if isinstance(table, Mapping) or rows:
        try:
            return pd.DataFrame(table if rows else dict(table))
        except (ValueError, TypeError) as err:  # columns of several lengths, or single values rather than lists
            what = "a list of rows (dicts)" if rows else "a dict of columns (one list of values per column name)"
            raise RunDataError(f"could not be read as {what}: {err}", source=source) from None
    to_pandas = getattr(table, "to_pandas", None)  # pyarrow's Table and RecordBatch, polars' DataFrame
    if callable(to_pandas) and not isinstance(table, pd.Series):
        frame = to_pandas()
        if isinstance(frame, pd.DataFrame):
            return frame
    hint = " (a path: load_runs(path) reads it)" if isinstance(table, (str, PathLike)) else ""
    raise RunDataError(f"expected a run table: a pandas DataFrame, a dict of columns, a list of rows (dicts) or a pyarrow "
                       f"or polars table; got {type(table).__name__}{hint}", source=source)


def _checked_runs(frame: pd.DataFrame, *, source, min_points: int) -> pd.DataFrame:
    frame = _as_data_frame(frame, source)
    _require_one_column_per_name(frame, source)
    frame = frame.copy()
    if any(name in REQUIRED_COLUMNS and name not in frame.columns for name in frame.index.names):
        # run_id (or recipe) as the index, from set_index or a groupby, is a column here, as in a Parquet
        # file (_read_one_file); the index was dropped and the table refused: "run_id is missing"
        frame = frame.reset_index()
    frame.index = pd.RangeIndex(len(frame))
    if "_source" not in frame.columns and source is not None:
        frame["_source"] = str(source)
    if "_line" not in frame.columns:
        frame["_line"] = np.arange(len(frame)) + 1
    src = source if source is not None else (frame["_source"].iloc[0] if "_source" in frame and len(frame) else None)
    if len(frame) == 0:
        raise RunDataError("holds no rows", source=src)

    missing = [column for column in REQUIRED_COLUMNS if column not in frame.columns]
    if missing:
        files = frame["_source"].nunique() if "_source" in frame.columns else 1
        # a folder of one table per run (a tracker's history saved run by run): no one file is wrong
        per_file = (f"; the table is joined from {files} files (one run per file?): give each file's rows a column "
                    "'run_id' naming their run" if "run_id" in missing and files > 1 else "")
        raise RunDataError(_missing_column_message(missing, frame.columns) + per_file, source=src, column=missing[0])
    for column in ("run_id", "recipe"):
        require_names(frame, column)
        frame[column] = _names_of(frame[column])
        # a control character (NUL, a newline) is a corrupted name, and a saved fit cannot hold NUL
        control = frame[column].str.contains(r"[\x00-\x08\x0a-\x1f\x7f]", regex=True)
        if control.any():
            idx = control.idxmax()
            raise RunDataError(f"holds a control character ({frame.at[idx, column]!r}); names are printable text",
                               column=column, **_where(frame, idx))

    _require_numeric(frame, "compute", required=True)
    require_rates(frame, "metric")
    for column in OPTIONAL_NUMERIC:
        if column in frame.columns:
            _require_numeric(frame, column, required=False)

    bad = frame["compute"] <= 0
    if bad.any():
        idx = bad.idxmax()
        # an evaluation before training (step 0, as trackers log one) sits at log(0): the curve has no point there
        before_training = (": an evaluation before training has no place on the curve, which is fitted against "
                           "log compute; drop the row (the fit learns the start, R0, from the runs' early points)"
                           if frame.loc[idx, "compute"] == 0 else "")
        raise RunDataError(
            f"must be > 0, got {frame.loc[idx, 'compute']:g}{before_training}", column="compute", **_where(frame, idx)
        )
    refuse_negative_counts(frame)
    if "n_eval" in frame.columns:
        n = frame["n_eval"]
        if n.isna().any() and n.notna().any():
            idx = n.isna().idxmax()
            warnings.warn(str(RunDataError(
                "is missing (here first) while other rows have it: the fit then ignores n_eval everywhere and "
                "learns all evaluation noise from the scatter (give it on every row to use the binomial term)",
                column="n_eval", **_where(frame, idx))), UserWarning, stacklevel=3)
        bad = n.notna() & ~n.map(is_usable_n_eval).astype(bool)
        if bad.any():
            idx = bad.idxmax()
            shown = _shown(n[idx], is_usable_n_eval)  # 16000.000001 read "got 16000"
            raise RunDataError(f"must be {N_EVAL_RULE}, got {shown}", column="n_eval", **_where(frame, idx))
    if "compute_unit" in frame.columns:
        # a blank cell means the table's unit (a saved fit writes a missing unit as ""); one unit fills them
        unit = frame["compute_unit"].where(frame["compute_unit"].isna(), frame["compute_unit"].astype(str).str.strip())
        frame["compute_unit"] = unit.replace("", np.nan)
        units = frame["compute_unit"].dropna().astype(str).unique()
        if len(units) == 1:
            frame["compute_unit"] = frame["compute_unit"].fillna(units[0])
        if len(units) > 1:
            first = frame["compute_unit"].astype(str) == units[0]
            idx = (~first & frame["compute_unit"].notna()).idxmax()
            raise RunDataError(
                f"mixes compute units {sorted(units)}; convert to one unit per table",
                column="compute_unit",
                **_where(frame, idx),
            )

    # a run has one recipe and one seed: two in one run_id are two runs written under one name
    for column, what in (("recipe", "recipes"), ("seed", "seeds")):
        if column not in frame.columns:
            continue
        per_run = frame.groupby("run_id")[column].nunique()
        if (per_run > 1).any():
            run = per_run[per_run > 1].index[0]
            values = frame.loc[frame["run_id"] == run, column].dropna()
            idx = values.index[values != values.iloc[0]][0]
            shown = [v.item() if isinstance(v, np.generic) else v for v in sorted(values.unique())]
            shown = [int(v) if isinstance(v, float) and v.is_integer() else v for v in shown]  # seed 1, not 1.0
            hint = ""
            if column == "recipe":  # names unique within a recipe only (seed0, seed1 in each): one run id each
                hint = (f": a run_id names one run in the whole table; if these are {len(shown)} runs, name them apart "
                        f"(e.g. '{shown[0]}-{run}', '{shown[1]}-{run}')")
            raise RunDataError(f"belongs to several {what} {shown}{hint}", column=column, **_where(frame, idx))
    if ENDED_COLUMN in frame.columns:
        frame[ENDED_COLUMN] = _checked_ended(frame)
    frame = _without_repeated_rows(frame)
    duplicated = frame.duplicated(["run_id", "compute"], keep="first")
    if duplicated.any():
        idx = duplicated.idxmax()
        first = _first_row_at(frame, idx)
        differs = next(c for c in frame.columns if c not in ("_line", "_source")
                       and not _same_cell(frame.at[first, c], frame.at[idx, c]))
        before, here = _shown_pair(frame.at[first, differs], frame.at[idx, differs])
        raise RunDataError(
            f"has two rows at compute {fmt_compute(frame.loc[idx, 'compute'])} (duplicate run_id, compute) that differ in "
            f"'{differs}' ({before} at {_row_name(frame, first, idx)}, {here} here): keep the one evaluation that is right",
            column="compute",
            **_where(frame, idx),
        )
    _require_compute_to_grow_with_step(frame)
    _warn_if_runs_look_like_two_units(frame)
    _warn_if_a_recipe_mixes_settings(frame)
    counts = frame.groupby("run_id").size()
    short = counts[counts < min_points]
    in_flight = _runs_in_flight(frame, short.index)
    left_out = {}
    if in_flight and len(in_flight) < len(counts):
        left_out = left_out_in_flight(frame, short[in_flight], min_points)
        frame = _without_runs(frame, in_flight, min_points)
        short = short.drop(in_flight)
    if len(short):
        run = short.index[0]
        idx = frame.index[frame["run_id"] == run][0]
        raise RunDataError(
            f"has {short.iloc[0]} point(s); at least {min_points} are needed to fit a curve"
            + (" (it is in flight: read it again after its next evaluation)" if run in in_flight else "")
            # a tracker's runs table (one row per run, its last values) is not one short run; a sweep whose runs
            # are all in flight at their first evaluation is not such a table either
            + (" (every run has one row: a table of runs' last values? The fit needs each run's evaluations along "
               "the way)" if len(counts) > 1 and (counts == 1).all() and not in_flight else ""),
            **_where(frame, idx),
        )

    frame = frame.sort_values(["recipe", "run_id", "compute"], kind="stable").reset_index(drop=True)
    _warn_if_the_metric_falls_with_compute(frame, src)
    frame.attrs["source"] = str(src) if src is not None else None
    frame.attrs[LEFT_OUT_RUNS] = left_out
    return frame


# optional columns that count up from a run's start (docs/run_format.md): none is ever below 0
COUNTS_FROM_THE_START = {"step": "an optimizer step", "device_seconds": "a count of device seconds"}


def refuse_negative_counts(frame: pd.DataFrame, counts: dict = COUNTS_FROM_THE_START) -> None:
    """A step or device time below 0 is bad input, as a compute of 0 or less is: it was read, and a negative step
    was said as a compute that 'falls while step rises' (the row sorted first by its step), or not at all. The
    trainer's --resume refuses its logs' rows with this check too (a table not validated: a value that is not
    a number is not negative here, and left to the checks that read it as a number); counts: {column: what it
    counts}, COUNTS_FROM_THE_START's and, for its per-step log, its compute."""
    for column, what in counts.items():
        if column not in frame.columns:
            continue
        # the trainer's table is not validated: such a value raised OverflowError below, a traceback out of --resume
        _refuse_a_value_beyond_float_range(frame, column)
        negative = pd.to_numeric(frame[column], errors="coerce") < 0
        if negative.any():
            idx = negative.idxmax()
            raise RunDataError(f"must be >= 0, got {frame.loc[idx, column]:g}: {what} counts from the run's start",
                               column=column, **_where(frame, idx))


def _runs_in_flight(frame: pd.DataFrame, runs) -> list:
    """Those of `runs` that the table's `ended` column says are in flight (none without the column)."""
    if ENDED_COLUMN not in frame.columns or not len(runs):
        return []
    ended = frame.groupby("run_id")[ENDED_COLUMN].first()
    return [run for run in runs if ended[run] == ""]


def left_out_in_flight(frame: pd.DataFrame, counts: pd.Series, min_points: int) -> dict:
    """{run_id: {"recipe", "reason"}} for the runs in flight left out for too few evaluations (`counts`,
    by run), kept with the table and the fit: predict(run_id=...) of such a run said only "unknown run_id"."""
    recipes = frame.groupby("run_id")["recipe"].first()
    return {str(run): {"recipe": str(recipes[run]),
                       "reason": f"it was in flight with {n} evaluation{'' if n == 1 else 's'}, fewer than the {min_points} "
                                 "a curve needs; fit again once it has more"}
            for run, n in counts.items()}


def _without_runs(frame: pd.DataFrame, runs, min_points: int) -> pd.DataFrame:
    """The table without runs in flight too short to fit, said in a warning. Every run of a sweep read
    while it trains (`forecast report SWEEP_DIR`) has one evaluation for an evaluation interval after
    it starts: the whole table was refused for it, where watch and the trainer's advisor leave it out."""
    one = len(runs) == 1
    warnings.warn(f"{len(runs)} run{'' if one else 's'} in flight {'has' if one else 'have'} fewer than {min_points} "
                  f"evaluations so far and {'is' if one else 'are'} left out until {'it has' if one else 'they have'} "
                  f"more: {', '.join(map(str, runs))}", UserWarning, stacklevel=4)
    return frame[~frame["run_id"].isin(runs)].reset_index(drop=True)


def _checked_ended(frame: pd.DataFrame) -> pd.Series:
    """The `ended` column as text, one value per run: '' for a run in flight (empty cells; a saved fit
    writes ''), else the one of ENDED_VALUES its rows name. RunDataError for another value, or a run
    whose rows name two."""
    ended = frame[ENDED_COLUMN].astype(object)  # a Parquet file's categorical or nullable column too
    text = ended.where(ended.isna(), ended.astype(str).str.strip()).fillna("")
    bad = ~text.isin(("", *ENDED_VALUES))
    if bad.any():
        idx = bad.idxmax()
        raise RunDataError(f"must be empty (a run in flight) or say how the run ended: {' or '.join(map(repr, ENDED_VALUES))}; "
                           f"got {text[idx]!r}", column=ENDED_COLUMN, **_where(frame, idx))
    said = text[text != ""]
    per_run = said.groupby(frame.loc[said.index, "run_id"]).nunique()
    if (per_run > 1).any():
        run = per_run[per_run > 1].index[0]
        values = said[frame.loc[said.index, "run_id"] == run]
        idx = values.index[values != values.iloc[0]][0]
        raise RunDataError(f"says the run ended two ways ({values.iloc[0]!r}, then {values[idx]!r}); give one",
                           column=ENDED_COLUMN, **_where(frame, idx))
    return text.groupby(frame["run_id"]).transform("max")  # a run's empty cells take its one value


def _first_row_at(frame: pd.DataFrame, later):
    """The first row of the run of row `later` at its compute."""
    same = (frame["run_id"] == frame.at[later, "run_id"]) & (frame["compute"] == frame.at[later, "compute"])
    return frame.index[same][0]


def _same_cell(a, b) -> bool:
    a_missing, b_missing = (pd.api.types.is_scalar(v) and pd.isna(v) for v in (a, b))
    if a_missing or b_missing:  # a nullable column's <NA> compares as <NA>, which no bool() can read
        return a_missing and b_missing
    # as _without_repeated_rows compares them: two lists of two lengths (a JSONL field) raised out of np.all(a == b)
    return bool(_hashable(a) == _hashable(b))


def _hashable(value):
    """A cell as rows are compared: itself, or where no hash takes it (a list or an object in a JSONL field, an
    array read from Parquet) the text of its values, so that two rows holding the same list are one row."""
    try:
        hash(value)
    except TypeError:
        return repr(value.tolist() if isinstance(value, np.ndarray) else value)
    return value


def _shown_pair(a, b) -> tuple[str, str]:
    """Two cells as a message shows them: numbers with the digits that tell them apart, text quoted."""
    numbers = [v for v in (a, b) if isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))]
    if len(numbers) == 2 and not (pd.isna(a) or pd.isna(b)) and not any(map(_beyond_float_range, numbers)):
        return _told_apart(float(a), float(b))
    return _shown_cell(a), _shown_cell(b)


def _shown_cell(value) -> str:
    """A cell as _shown_pair shows a value that is not a float: quoted, or an integer of a JSON field beyond a
    float's range (whose float() raised OverflowError out of the read) by its length, not its 400 digits."""
    if _beyond_float_range(value):
        return f"a number of {len(str(abs(value)))} digits"
    return repr(value.item() if isinstance(value, np.generic) else value)


def _row_name(frame: pd.DataFrame, first, later) -> str:
    """'row 5', or 'file F row 5' where the earlier of two rows comes from another file than the later."""
    where = _where(frame, first)
    if where["source"] is not None and where["source"] != _where(frame, later)["source"]:
        return f"file {where['source']} row {where['row']}"
    return f"row {where['row']}"


def _without_repeated_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The table with a row that repeats an earlier one in every column dropped, with a warning: one
    evaluation written twice (an export joined to an overlapping one, a log read twice) is still one
    evaluation, while counting it twice would weigh it double in the fit."""
    values = [c for c in frame.columns if c not in ("_line", "_source")]
    try:
        repeated = frame.duplicated(values, keep="first")
    except (TypeError, NotImplementedError):
        # an unhashable cell (a list in a JSONL field, a pyarrow list), compared by its values' text: a repeated row
        # with one was kept, then refused as two rows at one compute that differ in no column (a traceback)
        repeated = frame[values].astype(object).map(_hashable).duplicated(keep="first")
    if not repeated.any():
        return frame
    idx = repeated.idxmax()
    first = _first_row_at(frame, idx)
    more = f" ({int(repeated.sum())} rows repeat an earlier one; each is read once)" if repeated.sum() > 1 else ""
    warnings.warn(str(RunDataError(
        f"repeats {_row_name(frame, first, idx)} in every column, at compute {fmt_compute(frame.at[idx, 'compute'])}: read once"
        f"{more}", **_where(frame, idx))), UserWarning, stacklevel=4)
    return frame[~repeated]


# Runs of one sweep share a compute grid within a few x (a bigger batch, a longer generation); runs
# whose typical compute differs by more than this were almost surely counted in different units.
UNIT_MIX_RATIO = 1e3


def _warn_if_runs_look_like_two_units(frame: pd.DataFrame) -> None:
    """A warning when one run's compute sits orders of magnitude beside another's: FLOPs beside
    GPU-hours, which a table without a compute_unit column cannot say and the fit would take as
    two recipes a million times apart in cost."""
    typical = frame.groupby("run_id")["compute"].median()
    if len(typical) < 2 or typical.max() <= UNIT_MIX_RATIO * typical.min():
        return
    low, high = typical.idxmin(), typical.idxmax()
    source, at = _files_of_runs(frame, low, high)
    warnings.warn(str(RunDataError(
        f"{COMPUTE_IN_TWO_UNITS}{typical[high] / typical[low]:.2g}x (run '{low}'{at[low]} at about {fmt_compute(typical[low])}, "
        f"run '{high}'{at[high]} at about {fmt_compute(typical[high])}): are they in one unit? Convert to one unit per table",
        source=source, column="compute")), UserWarning, stacklevel=4)


def _files_of_runs(frame: pd.DataFrame, *run_ids) -> tuple[object, dict[str, str]]:
    """Where a warning about these runs points: (the file for its 'file ...' prefix: the table's, or
    the one file the runs share; {run: ' (its file)', or '' where the prefix says it}). Runs read
    from a folder of run logs come from one file each, and naming the folder's first file named a run
    the warning was not about."""
    files = {}
    if "_source" in frame:
        first_rows = frame.drop_duplicates("run_id").set_index("run_id")["_source"]
        files = {run: first_rows[run] for run in run_ids if pd.notna(first_rows.get(run))}
    if len(set(files.values())) > 1:
        return None, {run: f" ({files[run]})" if run in files else "" for run in run_ids}
    return frame.attrs.get("source") or next(iter(files.values()), None), dict.fromkeys(run_ids, "")


# Columns that define a recipe in trainer_minimal's runs: its knobs (trainer_minimal.train.KNOB_COLUMNS,
# kept in sync by a test) and the model's size. Runs of one recipe differ only by seed
# (docs/run_format.md); a table that joins two sweeps under one recipe name at two learning rates
# would be pooled as seeds of one recipe, its difference read as seed-to-seed spread.
RECIPE_SETTING_COLUMNS = (
    "loss_type", "aggregation", "adv_norm", "zero_var_filter", "npr_threshold", "off_policy_k",
    "fp32_logits", "batch_size", "group_size", "gen_len", "lr", "n_params",
)


def _comparable(values: pd.Series) -> pd.Series:
    """Numbers where every value is one (5e-4 and "0.0005" from two writers are one setting), text otherwise."""
    try:
        numbers = pd.to_numeric(values, errors="coerce")
    except OverflowError:  # an integer beyond a float's range (JSON keeps 400 digits): told apart as text
        return values.astype(str)
    return numbers if numbers.notna().all() else values.astype(str)


def _warn_if_a_recipe_mixes_settings(frame: pd.DataFrame) -> None:
    """A warning (the first found) when runs of one recipe differ in a recipe-defining column."""
    present = [c for c in RECIPE_SETTING_COLUMNS if c in frame.columns]
    if not present or frame["run_id"].nunique() < 2:
        return
    per_run = frame.groupby("run_id", sort=False)[["recipe", *present]].first()
    for column in present:
        for recipe, runs in per_run.groupby("recipe", sort=True):
            values = runs[column].dropna()
            if values.empty:
                continue
            values = _comparable(values)
            if values.nunique() < 2:
                continue
            others = values[values != values.iloc[0]]
            first, other, first_run, other_run = values.iloc[0], others.iloc[0], values.index[0], others.index[0]
            source, at = _files_of_runs(frame, first_run, other_run)
            warnings.warn(str(RunDataError(
                f"differs between runs of recipe '{recipe}' ({first} in run '{first_run}'{at[first_run]}, "
                f"{other} in run '{other_run}'{at[other_run]}): "
                "runs of one recipe are pooled as seeds, so the fit reads the difference as seed-to-seed spread and the "
                "recipe's forecast mixes the two settings; give each setting its own recipe name",
                source=source, column=column)), UserWarning, stacklevel=4)
            return


# A run is read as falling when the mean of its last quarter of evaluations (at least FALL_MIN_POINTS)
# lies FALL_STANDARD_ERRORS standard errors of that difference below the mean of its first quarter, and
# at least FALL_MIN_DROP below it; runs with fewer than FALL_MIN_EVALS evaluations are not judged. On the
# shipped sweeps, synthetic sweeps (the "messy" ones whose pass rate erodes late among them) and their
# early parts, run by run, no run of a rising sweep was read as falling, while most runs of a copy with
# 1 - metric were (tests/test_data.py).
FALL_STANDARD_ERRORS = 3.0
FALL_MIN_DROP = 0.02
FALL_MIN_POINTS = 2
FALL_MIN_EVALS = 6
# One run's fall is as often a run going wrong (an RL run whose pass rate collapses: the trainer's advisor
# validates its run alone) as a metric upside down, so at least this many runs must fall.
FALL_MIN_RUNS = 2


def _medians(arrays: list[np.ndarray]) -> np.ndarray:
    """np.median of each of the (non-empty) arrays, the same numbers, with one sort for them all: a call of
    np.median per run made the falling-metric check most of validate_runs' time on a sweep of many runs.
    The arrays are laid in rows padded with inf, which sorts after every number and before NaN; a row
    with a NaN has median NaN, as np.median says."""
    lengths = np.array([len(a) for a in arrays])
    block = np.full((len(arrays), lengths.max()), np.inf)
    block[np.arange(block.shape[1]) < lengths[:, None]] = np.concatenate(arrays)
    block.sort(axis=1)
    rows = np.arange(len(arrays))
    medians = (block[rows, (lengths - 1) // 2] + block[rows, lengths // 2]) / 2  # one value twice when odd
    medians[np.isnan(block).any(axis=1)] = np.nan
    return medians


def _evaluation_noise(frame: pd.DataFrame, metrics: list[np.ndarray]) -> float:
    """The sd of one evaluation: the median over runs of the robust spread of successive differences
    about their median (MAD / 0.6745 / sqrt 2: a curve's steady climb or fall is not noise), and no less
    than the binomial sd the table's n_eval gives (a short run's few differences can read it low)."""
    spreads = []
    if metrics:
        steps = [np.diff(m) for m in metrics]
        typical = _medians(steps)
        spreads = _medians([np.abs(s - t) for s, t in zip(steps, typical, strict=True)]) / 0.6745 / np.sqrt(2)
    noise = float(np.median(spreads)) if len(spreads) else 0.0
    if "n_eval" in frame.columns and frame["n_eval"].notna().any():
        rate = frame["metric"].clip(0.01, 0.99)
        noise = max(noise, float(np.nanmedian(np.sqrt(rate * (1 - rate) / frame["n_eval"]))))
    return noise


def _metrics_by_run(frame: pd.DataFrame) -> dict:
    """Each run's metric in order of compute, the runs in order of their first row. One sort of the whole
    table, then split: a sort per run (groupby, then sort_values) took most of validate_runs' time on a
    sweep of many runs, and validate_runs runs after every evaluation (forecast watch, the pruner)."""
    codes, runs = pd.factorize(frame["run_id"], sort=False)  # a missing run_id is -1, left out as groupby does
    kept = codes >= 0
    codes = codes[kept]
    order = np.lexsort((frame["compute"].to_numpy(dtype=float)[kept], codes))
    metric = frame["metric"].to_numpy(dtype=float)[kept][order]
    if not len(runs):
        return {}
    ends = np.cumsum(np.bincount(codes, minlength=len(runs)))
    return dict(zip(runs, np.split(metric, ends[:-1]), strict=True))


def runs_whose_metric_falls(frame: pd.DataFrame) -> tuple[list, int]:
    """(the runs whose metric clearly falls from their first evaluations to their last, the number of
    runs judged: those with at least FALL_MIN_EVALS evaluations)."""
    metrics = _metrics_by_run(frame)
    judged = {run: m for run, m in metrics.items() if len(m) >= FALL_MIN_EVALS}
    noise = _evaluation_noise(frame, list(judged.values()))
    falling = []
    for run, m in judged.items():
        k = max(FALL_MIN_POINTS, len(m) // 4)
        standard_error = noise * np.sqrt(2 / k)  # of a difference of two means of k evaluations
        if m[:k].mean() - m[-k:].mean() > max(FALL_STANDARD_ERRORS * standard_error, FALL_MIN_DROP):
            falling.append(run)
    return falling, len(judged)


def _warn_if_the_metric_falls_with_compute(frame: pd.DataFrame, source) -> None:
    """A warning when most runs' metric falls with compute (two runs at least): the curve is a rising sigmoid to an asymptote
    (a pass rate), so a loss or an error rate is fitted all the same, and the recipe whose metric is the
    highest (the worst loss) is called the best. Said, not refused: a sweep where most runs decline is
    worth a look, whatever the metric."""
    falling, judged = runs_whose_metric_falls(frame)
    if len(falling) < FALL_MIN_RUNS or 2 * len(falling) <= judged:
        return
    shown = names_shown([f"'{run}'" for run in falling], 3)
    warnings.warn(str(RunDataError(
        f"{METRIC_FALLS}{len(falling)} of {judged} runs ({shown}: their last evaluations lie clearly below their "
        "first). The forecast assumes a score in [0, 1] that rises with compute, higher being better (a pass rate), "
        "and calls the recipe with the highest metric the best: a loss or an error rate is read upside down, its worst "
        "recipe called the one to scale. Pass a score that rises: 1 - error rate (1 - loss, for a loss in [0, 1])",
        source=source, column="metric")), UserWarning, stacklevel=4)


def _require_compute_to_grow_with_step(frame: pd.DataFrame) -> None:
    """Compute is counted from the start of a run, so it never falls while the step rises; where it
    does, a resumed run restarted its counter (or two logs share a run_id), and the curve would be
    fitted to a compute axis that folds back on itself."""
    if "step" not in frame.columns or frame["step"].isna().all():
        return
    ordered = frame.dropna(subset=["step"]).sort_values(["run_id", "step", "compute"], kind="stable")
    previous = ordered.groupby("run_id")["compute"].shift()
    previous_step = ordered.groupby("run_id")["step"].shift()
    falls = (ordered["compute"] < previous) & (ordered["step"] > previous_step)
    if falls.any():
        idx = falls.idxmax()
        before, after = _told_apart(previous[idx], ordered.at[idx, "compute"])
        raise RunDataError(
            f"falls from {before} to {after} while step rises from "
            f"{previous_step[idx]:g} to {ordered.at[idx, 'step']:g}; compute must count from the run's start "
            "(a resumed run that restarted its counter?)",
            column="compute", **_where(frame, idx))


def _told_apart(first: float, second: float) -> tuple[str, str]:
    """Two different computes with as many digits as it takes for them to read differently: a compute
    that fell from 1.0000002e18 to 1.0000001e18 read "falls from 1e+18 to 1e+18"."""
    a, b = told_apart(first, second, lambda value, digits: f"{value:.{digits}g}", range(6, 18))
    return (a, b) if a != b else (repr(float(first)), repr(float(second)))


def load_runs(path, *, min_points: int = 2) -> pd.DataFrame:
    """Read and validate a run table (CSV, Parquet, JSONL, or a folder of run logs); min_points as
    validate_runs'. A path that is not a str or os.PathLike (a table) is a TypeError.

    The table returned keeps the data's warnings said while it was read and checked in
    attrs["data_warnings"] (a fit keeps them as fc.data_warnings_, saves them and its report shows them);
    those said while its files were read (a run log's compute that falls in its order, a link to nothing,
    a table of other runs beside the run logs) stay through a filter (runs[runs.recipe != "x"], .query,
    .copy, .sort_values, .reset_index) and the fit of what is left, and through save() and load() to a
    refit of a filter of the loaded fit's runs_. pandas keeps attrs through
    pd.concat only where every table's are the same: a concat of two loads keeps none, and its fit
    shows the warnings of its own check alone.

    >>> runs = load_runs("examples/trainer_sweep/runs.csv")  # doctest: +SKIP
    """
    if not isinstance(path, (str, PathLike)):  # pathlib said "expected str, bytes or os.PathLike object, not DataFrame"
        raise TypeError(f"load_runs reads a file or a folder: give its path, got {type(path).__name__}; a table in memory "
                        "is checked by validate_runs(table), and fit() takes it as it is")
    frame, said_reading = _said_and_kept(read_table, path)  # a run log's compute that falls in its order
    runs = validate_runs(frame, source=path if Path(path).expanduser().is_file() else None, min_points=min_points)
    runs.attrs["data_warnings"] = list(dict.fromkeys([*said_reading, *runs.attrs["data_warnings"]]))
    runs.attrs["read_warnings"] = said_reading  # kept apart: a filtered table is checked again, its files not read again
    return runs


# ----------------------------------------------------------------------------- describing


@dataclass(frozen=True)
class RunSummary:
    n_runs: int
    n_recipes: int
    n_points: int
    compute_unit: str
    compute_range: tuple[float, float]
    sources: tuple[str, ...]


def summarize_runs(runs: pd.DataFrame) -> RunSummary:
    unit = compute_unit_of(runs)
    sources = tuple(sorted(runs["_source"].dropna().unique())) if "_source" in runs else ()
    return RunSummary(
        n_runs=int(runs["run_id"].nunique()),
        n_recipes=int(runs["recipe"].nunique()),
        n_points=len(runs),
        compute_unit=unit,
        compute_range=(float(runs["compute"].min()), float(runs["compute"].max())),
        sources=sources,
    )


# what a table without a compute_unit column measures compute in: printed after numbers ("at 4e+05
# compute units") and in axis labels, where a bare "compute" read "at 4e+05 compute", "compute (compute)"
UNSPECIFIED_UNIT = "compute units"


def compute_unit_of(runs: pd.DataFrame) -> str:
    """The run table's compute unit (its compute_unit column), or UNSPECIFIED_UNIT when it says none."""
    if "compute_unit" in runs and runs["compute_unit"].notna().any():
        return str(runs["compute_unit"].dropna().iloc[0])
    return UNSPECIFIED_UNIT


# A compute this many times beyond the data's largest (or below its smallest) is more often a unit
# mix-up (GPU-hours against FLOPs, 1e4 against 1e14) than a plan, and the forecast there is the prior.
FAR_BEYOND_DATA = 100.0


def far_from_data(value: float, observed_compute, *, unit: str, name: str) -> str | None:
    """A sentence when `value` (a budget, a horizon) lies far outside the observed compute, else None."""
    low, high = float(np.min(observed_compute)), float(np.max(observed_compute))
    if value > FAR_BEYOND_DATA * high:
        # in the digits that read more than the bar: 1.0205e14 on data to 1.02e12 is 100.05x, not "100x"
        times, _ = computes_told_apart(value / high, FAR_BEYOND_DATA)
        return (f"{name} {fmt_compute(value)} is {times}x the largest compute in the data "
                f"({fmt_compute(high)} {unit}); a forecast that far out says little beyond the prior. Is the unit right?")
    if value < low:
        # "6.05e9 is below the smallest compute in the data (6.05e9 flops)" contradicted itself
        shown, smallest = computes_told_apart(value, low)
        return (f"{name} {shown} is below the smallest compute in the data ({smallest} {unit}). "
                "Is the unit right?")
    return None


class FarFromDataWarning(UserWarning):
    """A compute given to the Python API (fit's horizon, predict's compute, a decision's budget)
    lies far outside the fitted data's (far_from_data): likely another unit. The command line says
    the same with its flag's name (--horizon, --compute, --budget). predict gives it too for a compute
    within the data but below a recipe's (or a run's) own first evaluation, naming that recipe or run."""


def warn_if_far_from_data(values, observed_compute, *, unit: str, name: str, stacklevel: int = 3) -> None:
    """One FarFromDataWarning for the first of `values` far outside the observed compute, if any:
    once per call, as the command line says it once per flag. stacklevel 3 points at the caller of
    the public function that calls this."""
    for value in np.atleast_1d(np.asarray(values, dtype=float)):
        if message := far_from_data(float(value), observed_compute, unit=unit, name=name):
            warnings.warn(message, FarFromDataWarning, stacklevel=stacklevel)
            return
