"""Atomic writes: a result file is either the old one or the complete new one, never half."""

from __future__ import annotations

import codecs
import errno
import json
import math
import os
import stat
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

# A writer killed mid-write (kill -9, power loss) leaves its temporary file behind; the next write to
# the same path removes such leftovers once they are this old. A live writer touches its file far more
# often than this, and age (unlike a pid) is safe where another machine writes the same shared folder.
STALE_TEMP_S = 3600.0

# Failures of the machine, not of the input or of the code: a command says them in one line with what
# to do (resource_error_message), not in a traceback. What each errno means for the user, and the fix.
RESOURCE_ERRORS = {
    code: advice for code, advice in (
        (errno.ENOSPC, "the disk is full: free some space, or write elsewhere"),
        (getattr(errno, "EDQUOT", None), "the disk quota is used up: free some space, or write elsewhere"),
        (errno.EROFS, "the file system is read-only: write elsewhere"),
        # `ulimit -f` (Python ignores SIGXFSZ, so the write fails) or the file system's largest file (FAT32's 4 GiB)
        (errno.EFBIG, "larger than this process may write (ulimit -f) or the file system holds: raise the limit, "
                      "or write elsewhere"),
        (errno.EMFILE, "this process has as many files open as it may: raise the limit (ulimit -n)"),
        (errno.ENFILE, "the system has as many files open as it may: end other work, or raise its limit"),
        (errno.EIO, "the disk or network file system failed to read or write"),
    ) if code is not None
}


# Failures of the path a result goes to, met while it is written: said as what happened to the path and what
# to do. The commands refuse such paths before any work (cli._check_output_file, demo.check_out); these are
# the ones made after those checks, while a fit ran for minutes (`rm -r demo_out` in another terminal, a
# chmod, a folder made in the file's place), or met by a Python caller of save() or write_report().
PATH_ERRORS = {
    errno.ENOENT: "its folder {folder} was deleted or moved while it was written: make the folder again, or write elsewhere",
    errno.EACCES: "this process may not write in {nearest} (read-only, or not yours): write elsewhere",
    errno.EPERM: "this process may not write in {nearest} (read-only, or not yours): write elsewhere",
    errno.EISDIR: "a folder is in its place: move that folder away, or name another file",
    errno.ENOTDIR: "{blocker} is a file, so nothing can be written under it: name another folder",
}
# which of them the user's path itself causes, as the commands' checks before any work find them (exit 2):
# a folder deleted mid-write, like a full disk, is what happened to the machine meanwhile (exit 1)
PATH_REFUSALS = frozenset({errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR})


class WriteFailed(OSError):
    """A result file that could not be written, said of the user's path (not the temporary file it went
    through): str() is one line, 'PATH: WHAT HAPPENED (WHAT TO DO)'. What was at the path before is as it
    was (atomic_path), and no temporary file is left beside it."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"

    @property
    def path_refuses(self) -> bool:
        """Whether the path itself refuses the file (read-only, a folder or a file in the way): bad input."""
        return self.errno in PATH_REFUSALS


def resource_error_message(err: BaseException) -> str | None:
    """'PATH: No space left on device (the disk is full: free some space, or write elsewhere)' for an
    OSError the machine caused (RESOURCE_ERRORS), or any result that could not be written (WriteFailed),
    else None. Said from errno, not str(err): h5py's message for a full disk is several lines of its internals."""
    if isinstance(err, WriteFailed):
        return str(err)
    if not isinstance(err, OSError) or err.errno not in RESOURCE_ERRORS:
        return None
    where = f"{err.filename}: " if err.filename else ""
    return f"{where}{os.strerror(err.errno)} ({RESOURCE_ERRORS[err.errno]})"


def _write_failed(code: int, path, target: Path) -> WriteFailed:
    """WriteFailed for errno `code` met writing `path` (whose real file is `target`): what happened, what to do."""
    if code in RESOURCE_ERRORS:
        advice = RESOURCE_ERRORS[code]
    elif code == errno.ENOENT and target.parent.is_dir():  # the folder is there: something removed our temporary file
        advice = "its temporary file was removed while it was written (by a clean-up of the folder?): write it again"
    else:
        blocker = next((p for p in target.parents if p.exists() and not p.is_dir()), target.parent)
        nearest = next((p for p in target.parents if p.is_dir()), target.parent)  # the folder that refused a new one
        advice = PATH_ERRORS[code].format(folder=target.parent, blocker=blocker, nearest=nearest)
    return WriteFailed(code, f"{os.strerror(code)} ({advice})", str(path))


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside `path`; on success it replaces `path` in one rename.

    What a user of the old file would expect of a rewrite: a symlink at `path` is written through (its
    target is replaced, the link stays), the file keeps its permission bits (new files get the umask's),
    and the data is on disk before the rename and the rename before returning (fsync), so a power loss
    leaves the old file or the new one, not an empty one. Temporary files are named .NAME.*.tmp."""
    path = Path(path)
    target = Path(os.path.realpath(path))  # through a symlink: replacing the link itself unlinks it
    # the folder the file goes in, made as for a plain path: also that of a link whose target is not
    # there yet (else mkstemp's FileNotFoundError named our temporary file, not the user's path)
    _make_folder_for(path, target)
    remove_stale_temps(target)
    with _said_of(path, target):
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        with _said_of(path, target):
            yield Path(tmp)
            fsync_path(tmp)
            os.chmod(tmp, kept_mode(target))  # after the write (a writer may recreate the file) and the sync
            os.replace(tmp, target)
        fsync_directory(target.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _make_folder_for(path, target: Path) -> None:
    """Make the folder `target` goes in; a file on the way ('File exists', or 'Not a directory' naming that
    file) or a folder that may not be written in is said as WriteFailed of `path`."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise _write_failed(errno.ENOTDIR, path, target) from None
    except OSError as err:
        if err.errno not in RESOURCE_ERRORS and err.errno not in PATH_ERRORS:
            raise
        raise _write_failed(err.errno, path, target) from err


@contextmanager
def _said_of(path, target: Path):
    """A failure met while writing `path` through its temporary file (a full disk or another of
    RESOURCE_ERRORS, its folder deleted, made read-only or a folder in its place: PATH_ERRORS), raised as
    WriteFailed said of `path`: the user never named .fit.nc.1rs05yk7.tmp, and h5py's and a file object's
    errors name no file at all. Other errors (about some other file the writer read) pass as they are."""
    try:
        yield
    except WriteFailed:
        raise  # another result's, written inside this one's (fit.nc inside summary.json's): said of its own path
    except OSError as err:
        if (err.errno not in RESOURCE_ERRORS and err.errno not in PATH_ERRORS) or not _is_ours(err.filename, path, target):
            raise
        raise _write_failed(err.errno, path, target) from err


def _is_ours(filename, path, target: Path) -> bool:
    """Whether an error's file name is the file being written: none given, `path`, or a temporary file of it."""
    if filename is None or str(filename) in (str(path), str(target)):
        return True
    name = Path(os.fsdecode(filename))
    return name.parent == target.parent and name.name.startswith(f".{target.name}.") and name.suffix == ".tmp"


def kept_mode(path) -> int:
    """The permission bits of the file at `path`, or for a new file the umask's default (mkstemp makes
    files owner-only; results are meant to be shared as the user's umask says)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def fsync_path(path) -> None:
    fd = os.open(path, os.O_RDWR)  # Windows flushes only a handle open for writing
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(folder) -> None:
    """Make a rename in `folder` durable. Not every OS can open a folder (Windows cannot): skipped there."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a folder; the rename itself has still happened
    finally:
        os.close(fd)


def remove_stale_temps(path, max_age_s: float = STALE_TEMP_S) -> None:
    """Remove temporary files of earlier writes to `path` that a dead writer left (older than max_age_s)."""
    import glob

    now = time.time()
    for leftover in glob.glob(os.path.join(glob.escape(str(path.parent)), f".{glob.escape(path.name)}.*.tmp")):
        try:
            if now - os.stat(leftover).st_mtime > max_age_s:
                os.unlink(leftover)
        except OSError:
            pass  # another writer removed or replaced it meanwhile


# what a JSON line nested deeper than Python's recursion limit (json.loads raises RecursionError) is said to do
TOO_DEEP = "nests arrays or objects too deep to read (past Python's recursion limit): a row is one object of plain values"


def jsonl_line_end(text: str | bytes) -> str | bytes:
    """What ends a JSONL file's lines (of its text or its bytes, said in kind): a newline, or a carriage
    return in a file that holds no newline (old Mac line ends, as some editors still save), as its CSV is
    read. Split at newlines alone, such a log was one line and, not JSON, dropped as a torn last line: it
    "holds no rows" to forecast, and --resume found no evaluation in it. A carriage return in a file with
    newlines is left to JSON (whitespace, or a CRLF line end)."""
    newline, carriage_return = ("\n", "\r") if isinstance(text, str) else (b"\n", b"\r")
    return carriage_return if newline not in text and carriage_return in text else newline


# NUL bytes in a row: two NUL characters in UTF-16 (which text never holds), so a block of them in text that
# is UTF-8 around them is not UTF-16 but zeros left where writes were lost (a crash, on some file systems)
NUL_BLOCK = b"\x00" * 4


def nul_block_message(data: bytes) -> str | None:
    """Where a text file holds a block of NUL bytes (the rest of `data` UTF-8), or None. `data` is the file's head
    (forecast.data's _head), or a JSONL log's or a CSV's whole bytes (its _log_text, _read_csv), or a log's complete
    lines (numbered_complete_rows, the trainer's read), so that the offset and line are the file's either way. Such
    a log, zeros first, was refused as 'UTF-16 text without a byte-order mark' (save as UTF-8), and a shorter block
    as a CSV header: the wrong cause and the wrong fix."""
    offset = data.find(NUL_BLOCK)
    if offset < 0:
        return None
    try:  # incremental: a character cut at the head's end is not a bad byte
        codecs.getincrementaldecoder("utf-8")().decode(data.replace(b"\x00", b""), final=False)
    except UnicodeDecodeError:
        return None  # binary data with zeros in it, said as such by forecast.data's _binary_message
    line = data.count(b"\n", 0, offset) + 1
    return (f"holds NUL bytes (zeros) from byte offset {offset}, on line {line}: not text but what a crash leaves on "
            "some file systems where writes were lost; remove them (tr -d '\\000' < FILE > fixed) to read the rows "
            "around them")


def dropped_zeros_message(path, torn: bytes, kept_rows: list[dict], resumed_after: int) -> str | None:
    """What a resume that dropped a log's torn last line `torn` says of it where it holds zeros (NUL bytes), or None:
    a kill mid-write leaves a torn line, written again, but a crash leaves zeros where writes were lost, so rows up to
    the checkpoint's step may be gone for good (forecast refuses such a log). One message for the trainer's
    --resume (repair_jsonl) and ForecastCallback's resume, whose drop of them was said by neither."""
    if NUL_BLOCK not in torn:
        return None
    kept = f"its rows now end at step {kept_rows[-1].get('step', 0)}" if kept_rows else "it holds no row now"
    return (f"{path}: dropped its last {len(torn)} bytes, zeros (NUL bytes) a crash left where writes were lost; "
            f"{kept}, and the run resumes after step {resumed_after}")


def read_complete_jsonl(path, error) -> list[dict]:
    """The complete rows of an append-only JSONL log (a run's evals.jsonl); a missing file holds none. See
    numbered_complete_jsonl, which reads them with their lines."""
    return [row for _line, row in numbered_complete_jsonl(path, error)]


def numbered_complete_jsonl(path, error) -> list[tuple[int, dict]]:
    """The complete rows of an append-only JSONL log (a run's evals.jsonl), each with its line in the file counting
    from 1 (what an editor shows, and what forecast.data's messages name as a row's): the trainer numbered a row by
    its place among the rows, so after a blank line (a log edited by hand) its --resume named row 2 where forecast
    named row 3 of the same line. A missing file holds none.

    Each row is written with one write() ending in a newline, so a kill mid-write leaves a prefix
    without its newline: that torn last line is left out. Any other line that is not UTF-8, not JSON or
    not an object is real damage: `error(what)` makes the exception raised, from what is wrong
    ("line 3 is not valid JSON (Expecting ',' delimiter: column 12)"), so each reader names its file
    its own way (the trainer's ValueError, forecast's RunDataError). A byte-order mark (a log edited in a
    Windows editor) is not data, as forecast.data reads the log: it was line 1 "not valid JSON", and
    --resume refused a log forecast read. Lines may end in a carriage return alone (jsonl_line_end), as
    forecast.data reads them.
    """
    path = Path(path)
    if not path.exists():
        return []
    return numbered_complete_rows(path.read_bytes(), error)


def torn_last_line(raw: bytes) -> bytes:
    """A JSONL log's bytes after its last line end (of its bytes `raw`): a torn last line, or b'' for none."""
    return raw.rpartition(jsonl_line_end(raw))[2]


def numbered_complete_rows(raw: bytes, error) -> list[tuple[int, dict]]:
    """numbered_complete_jsonl's rows of a log's bytes `raw`, for a reader that needs the bytes too (the trainer's
    repair_jsonl, which says what it drops). A block of zeros in a complete line, what a crash leaves where writes
    were lost, is refused as forecast.data refuses it (nul_block_message: its byte offset and line), not as 'line 3
    is not valid JSON': a line end follows them, so they are no torn last line. Zeros in that line are left out with it."""
    torn = torn_last_line(raw)
    complete = raw[: len(raw) - len(torn)]
    if zeros := nul_block_message(complete):
        raise error(zeros)
    rows = []
    for number, line in enumerate(complete.removeprefix(codecs.BOM_UTF8).split(jsonl_line_end(raw)), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise error(f"line {number} is not UTF-8 text") from None
        except json.JSONDecodeError as err:  # json's account and column: a long row is not searched by eye
            raise error(f"line {number} is not valid JSON ({err.msg}: column {err.colno})") from None
        except RecursionError:  # a line of 100,000 nested brackets: json's RecursionError was a traceback
            raise error(f"line {number} {TOO_DEEP}") from None
        if not isinstance(row, dict):  # every row is an object: a bare [] or 1 failed later on row.get
            raise error(f"line {number} is not a JSON object")
        rows.append((number, row))
    return rows


def atomic_write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path, obj) -> None:
    atomic_write_text(path, dumps_json(obj) + "\n")


def dumps_json(obj, indent: int | None = 2) -> str:
    """Strict JSON (no NaN or Infinity, which JSON.parse and jq reject or misread): see json_safe."""
    return json.dumps(json_safe(obj), indent=indent, allow_nan=False)


def json_safe(value):
    """Plain JSON types, with inf/NaN as null: strict JSON parsers reject Infinity and NaN, and
    'never reaches the target' is better said by null plus p_reach than by a non-standard token."""
    import numpy as np
    import pandas as pd

    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return json_safe(value.item())
    if isinstance(value, (list, tuple, set, frozenset, np.ndarray)):
        return [json_safe(v) for v in (sorted(value, key=str) if isinstance(value, (set, frozenset)) else value)]
    if value is pd.NA or value is pd.NaT:  # pandas' missing values (nullable columns, e.g. from Parquet)
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if value is None or isinstance(value, str):
        return value
    return str(value)
