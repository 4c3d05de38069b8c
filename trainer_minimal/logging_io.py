"""Append-only JSONL logs, atomic writes, and the log repair that makes --resume safe after kill -9.

A kill can leave (a) a torn last line and (b) rows logged after the last checkpoint, which the
resumed run will produce again. repair_jsonl() removes both and rewrites the file atomically (temp
file + os.replace: forecast.io.atomic_path), so a reader sees the old file or the repaired one, never a mix.
A crash of the machine can leave zeros where writes were lost: at a log's end they are dropped with its torn
last line and said on stderr; followed by a line end (rows after them), they are refused (numbered_complete_rows).
"""

import errno
import json
import os
import sys
from pathlib import Path

import torch

# one atomic write for the project: symlinks, mode bits, fsync (the trainer writes ASCII JSON, so
# forecast's UTF-8 text is the same bytes as the locale's); atomic_write_text is train.py's too
from forecast.io import (
    atomic_path,
    atomic_write_text,
    dropped_zeros_message,
    numbered_complete_jsonl,
    numbered_complete_rows,
    read_complete_jsonl,
    torn_last_line,
)

try:
    import fcntl
except ImportError:  # not on Windows: runs there are not guarded against a second writer
    fcntl = None


class RunFolderBusy(RuntimeError):
    """Another process is training in this run folder."""


_said_cannot_lock = set()  # the file systems' errors said already: once per process, not once per run
_unguarded_folders = set()  # run folders lock_run_folder could not lock (their file system has no locks)


def locked_alone(handle, path):
    """Take an exclusive lock on the open file `handle` (at `path`): True when this process holds it now,
    False when another process does, None where no lock can be had (Windows, or a file system that has
    no locks: Lustre mounted without -o flock, ENOSYS; NFS without its lock daemon, ENOLCK). Those fail
    every flock, and taking that for a lock held elsewhere refused every run there as one another
    process was training; such a run goes on unguarded, as on Windows, and says so once."""
    if fcntl is None:  # Windows: unguarded
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        if e.errno not in _said_cannot_lock:
            _said_cannot_lock.add(e.errno)
            print(f"trainer-minimal: warning: {path}: this file system cannot lock files ({e.strerror}), so runs "
                  "here are not guarded against a second process training in the same run folder", file=sys.stderr)
        return None
    return True


def run_folder_guarded(folder):
    """Whether lock_run_folder(folder) holds a lock that keeps other processes out (not on Windows, nor
    on a file system that has no locks)."""
    return fcntl is not None and os.path.abspath(folder) not in _unguarded_folders


def lock_run_folder(folder):
    """Hold an exclusive lock on folder/.lock until the returned file is closed (the OS releases it
    when the process ends, kill -9 included). Two processes training in one folder interleave
    their rows in evals.jsonl and replace each other's ckpt.pt: e.g. a sweep rerun after its parent was
    killed while an orphaned run it started is still training. Raises RunFolderBusy."""
    os.makedirs(folder, exist_ok=True)
    handle = open(os.path.join(folder, ".lock"), "a+")
    held = locked_alone(handle, os.path.join(folder, ".lock"))
    if held is None:
        _unguarded_folders.add(os.path.abspath(folder))
    if held is False:
        handle.seek(0)
        holder = handle.read().strip() or "?"
        handle.close()
        raise RunFolderBusy(f"{folder}: another process (pid {holder}) is training in this run folder; "
                            "wait for it to end or stop it, then --resume") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def open_log_alone(path):
    """path opened for appending with an exclusive lock on it, or None when another process holds that lock.
    A sweep gives the file to the run it starts as its stdout, and the lock belongs to the open file, so it
    lasts as long as the run (an orphan of a killed sweep included), not only the sweep. The run folder's
    own .lock is taken by the run's `train` after it starts: two sweeps starting one run at once had both
    opened the log by then, and the refused one wrote its refusal into the other's."""
    handle = open(path, "a")
    if locked_alone(handle, path) is False:
        handle.close()
        return None
    return handle


def append_jsonl(path, row, fsync=True):
    """Append one JSON object as a line and flush it to disk before returning. A write that fails (a
    full disk) may leave the start of the line without its newline: a torn last line, which readers
    skip and --resume drops. Its error names the log (a file object's write names none)."""
    try:
        with open(path, "a") as f:
            f.write(json.dumps(row, default=_plain) + "\n")
            f.flush()
            if fsync:
                os.fsync(f.fileno())
    except OSError as err:
        if err.filename is not None or err.errno is None:
            raise
        raise OSError(err.errno, os.strerror(err.errno), str(path)) from err


def _error_naming(path):
    """What makes the ValueError a log's damaged line raises, naming the log (forecast.io's `error`)."""
    return lambda what: ValueError(f"{path}: {what}")


def read_jsonl(path):
    """All complete rows of a JSONL file; a torn last line (no final newline) is ignored, any other
    unparsable line raises ValueError naming the file and line (forecast.io.read_complete_jsonl)."""
    return read_complete_jsonl(path, _error_naming(path))


def read_numbered_jsonl(path):
    """read_jsonl's rows, each with its line in the file counting from 1: (line, row) pairs, for messages
    that name a row by its line, as forecast's do (forecast.io.numbered_complete_jsonl)."""
    return numbered_complete_jsonl(path, _error_naming(path))


def repair_jsonl(path, max_step):
    """Keep complete rows with step <= max_step; rewrite atomically. Returns the kept rows.
    A torn last line is dropped without a word: a kill mid-write leaves one, and its row is written again. One
    holding zeros (NUL bytes) is dropped too, and said on stderr, naming the log and how many bytes: a crash leaves
    them where writes were lost (train_log.jsonl is not synced at each row), so rows up to the checkpoint's step may
    be gone for good, and forecast refuses such a log. Zeros followed by rows are refused by the read (damage)."""
    raw = Path(path).read_bytes() if os.path.exists(path) else b""
    rows = [r for _line, r in numbered_complete_rows(raw, _error_naming(path)) if r.get("step", 0) <= max_step]
    if dropped := dropped_zeros_message(path, torn_last_line(raw), rows, max_step):
        print(f"trainer-minimal: warning: {dropped}", file=sys.stderr)
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in rows))
    return rows


def atomic_write_json(path, obj):
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_plain) + "\n")


def _plain(value):
    """numpy scalars (e.g. in an advisor's recommendation) -> Python numbers; anything else -> str."""
    return value.item() if hasattr(value, "item") else str(value)


def atomic_torch_save(obj, path):
    """torch.save through a temporary file of this process's own (several processes may write one
    path, e.g. a warm start in a shared cache) and an atomic, synced replace: a checkpoint is the old
    one or the new one, even after a power loss. A write that fails (a full disk) raises the OSError
    saying so: torch.save given a file name said only 'RuntimeError: basic_ios::clear: iostream
    error', so a file object of Python's does the writing, and its error is raised, not torch's. So is
    a stop (Ctrl-C, SIGTERM: KeyboardInterrupt) raised by a signal's handler inside that write: torch's
    RuntimeError ended the run in a traceback, exit 1, where a stop is said in a line (cli.run_command)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        try:
            torch.save(obj, f)
        except RuntimeError as err:  # torch's own error while the zip archive ends, raised in handling the write's
            behind = raised_by_the_write(err)
            if behind is None:
                raise
            raise behind from None


def raised_by_the_write(err):
    """The OSError or stop (KeyboardInterrupt) `err` was raised in handling of (its __context__ chain), or None."""
    while err is not None and not isinstance(err, (OSError, KeyboardInterrupt)):
        err = err.__context__
    return err
