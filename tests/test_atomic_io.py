"""Atomic rewrites of result files (forecast/io.py), which trainer_minimal's writes go through too:
a rewrite keeps what the user set up around the file and survives a crash."""

import errno
import os
import stat
import sys
import time

import pytest

from forecast.io import (
    atomic_path,
    atomic_write_json,
    atomic_write_text,
    numbered_complete_jsonl,
    read_complete_jsonl,
)

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="symlinks and mode bits are POSIX here")


@posix_only
def test_a_rewrite_goes_through_a_symlink_and_keeps_the_link(tmp_path):
    """A user who links report.html into a shared folder lost the link: the rewrite replaced the link
    with a plain file, and the shared copy stayed old."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "report.html").write_text("old")
    link = tmp_path / "report.html"
    link.symlink_to(shared / "report.html")
    atomic_write_text(link, "new")
    assert link.is_symlink()
    assert (shared / "report.html").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "shared"]


@posix_only
def test_a_rewrite_keeps_the_file_s_permission_bits(tmp_path):
    """A results file made group-readable (or read-only for others) became the umask's default again."""
    path = tmp_path / "recommendations.json"
    atomic_write_json(path, {"a": 1})
    os.chmod(path, 0o640)
    atomic_write_json(path, {"a": 2})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    os.chmod(path, 0o664)
    with atomic_path(path) as tmp:
        tmp.unlink()  # a writer (netCDF, pandas) may create its file anew
        tmp.write_text("{}")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o664


def test_the_new_file_is_on_disk_before_it_replaces_the_old_one(tmp_path, monkeypatch):
    """Without an fsync before the rename, a power loss can leave an empty file in place of both."""
    synced, real_fsync, real_replace = [], os.fsync, os.replace

    def fsync(fd):
        synced.append("fsync")
        return real_fsync(fd)

    def replace(src, dst):
        assert synced, "renamed before the data was synced"
        synced.append("renamed")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic_write_text(tmp_path / "summary.json", "{}")
    assert (tmp_path / "summary.json").read_text() == "{}"
    if sys.platform != "win32":  # Windows cannot open a folder to sync it
        assert synced[-1] != "renamed", "the folder was not synced after the rename"


def test_a_dead_writer_s_temporary_file_is_removed_by_the_next_write(tmp_path):
    """kill -9 mid-write left .NAME.xxxx.tmp behind, and every killed write added one more, for good."""
    path = tmp_path / "fit.nc"
    leftover = tmp_path / ".fit.nc.dead1234.tmp"
    leftover.write_text("half")
    hour_ago = time.time() - 2 * 3600
    os.utime(leftover, (hour_ago, hour_ago))
    in_flight = tmp_path / ".fit.nc.live5678.tmp"  # another writer's, being written now: left alone
    in_flight.write_text("partial")
    atomic_write_text(path, "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".fit.nc.live5678.tmp", "fit.nc"]


@posix_only
def test_a_link_to_a_file_in_a_folder_not_made_yet_is_written_through(tmp_path):
    """A link made ahead of its target (latest.html -> reports/today/report.html) failed with
    FileNotFoundError naming the write's own temporary file; the folder is made, as for a plain path."""
    link = tmp_path / "latest.html"
    link.symlink_to(tmp_path / "reports" / "today" / "report.html")
    atomic_write_text(link, "new")
    assert link.is_symlink() and (tmp_path / "reports" / "today" / "report.html").read_text() == "new"


@pytest.mark.parametrize(("code", "said"), [
    (errno.ENOSPC, "No space left on device (the disk is full: free some space, or write elsewhere)"),
    (errno.EFBIG, "File too large (larger than this process may write (ulimit -f) or the file system holds: raise "
                  "the limit, or write elsewhere)"),
], ids=["full disk", "file too large"])
def test_a_write_the_machine_fails_is_said_of_the_users_file_in_a_line_and_the_old_one_stays(tmp_path, monkeypatch,
                                                                                            code, said):
    """A full disk (ENOSPC) met while writing the temporary file (pathlib's error names the temporary file,
    h5py's and a file object's no file at all) was said of '.fit.nc.1rs05yk7.tmp' or of nothing. A write beyond
    the largest file the process may write (`ulimit -f`, or a file system's own largest file: EFBIG, 'File too
    large') was not among the failures said in one line, so every command writing a result ended in a traceback
    naming the temporary file. Each is said of the user's path now, with what to do, as a machine's failure
    (exit 1, not the path's); the file already there is untouched, with no temporary left."""
    import pathlib

    from forecast.io import WriteFailed, resource_error_message

    path = tmp_path / "summary.json"
    path.write_text("old")

    def failing(self, *args, **kwargs):
        raise OSError(code, os.strerror(code), str(self))

    monkeypatch.setattr(pathlib.Path, "write_text", failing)
    with pytest.raises(WriteFailed) as raised:
        atomic_write_text(path, "new")
    monkeypatch.undo()
    assert raised.value.errno == code and raised.value.filename == str(path)
    assert resource_error_message(raised.value) == f"{path}: {said}"
    assert not raised.value.path_refuses
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
    with pytest.raises(OSError) as raised:  # h5py's error: several lines of its internals, no file name
        with atomic_path(path):
            raise OSError(code, "Unable to synchronously create file (file write failed: ...)")
    assert raised.value.filename == str(path) and "Unable" not in resource_error_message(raised.value)


def test_an_error_about_another_file_is_not_said_of_the_file_being_written(tmp_path):
    """The writer may read other files on the way (a run table, a template): their errors are theirs."""
    import errno

    other = tmp_path / "elsewhere" / "runs.csv"
    with pytest.raises(OSError) as raised:
        with atomic_path(tmp_path / "report.html"):
            raise OSError(errno.EIO, "Input/output error", str(other))
    assert raised.value.filename == str(other)


def _folder_deleted_while_written(folder):
    """A writer that finds its folder deleted (`rm -r demo_out` in another terminal) as it writes: h5py's
    error for fit.nc names no file, pathlib's names the temporary file."""
    import errno
    import shutil

    def write(tmp):
        shutil.rmtree(folder)
        raise OSError(errno.ENOENT, "Unable to synchronously create file (unable to open file: ...)")
    return write


def _refused_in_a_read_only_folder(folder):
    """What a chmod 500 folder answers a user who is not root (the tests may run as root, whom it does not stop)."""
    import errno

    def write(tmp):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp))
    return write


def _a_folder_made_in_its_place(folder):
    def write(tmp):
        tmp.write_text("new")
        (folder / "summary.json").unlink()
        (folder / "summary.json").mkdir()
    return write


@pytest.mark.parametrize("happening, said", [
    (_folder_deleted_while_written, "No such file or directory (its folder {folder} was deleted or moved while it was "
                                    "written: make the folder again, or write elsewhere)"),
    (_refused_in_a_read_only_folder, "Permission denied (this process may not write in {folder} (read-only, or not "
                                     "yours): write elsewhere)"),
    (_a_folder_made_in_its_place, "Is a directory (a folder is in its place: move that folder away, or name another file)"),
])
def test_a_write_its_path_refuses_meanwhile_is_said_of_that_path_in_a_line(tmp_path, happening, said):
    """A result's folder deleted while it was written (`make demo` with demo_out removed while fit.nc was
    saved), made read-only, or a folder made in the file's place, after the command's checks and minutes of
    sampling: FileNotFoundError, PermissionError or IsADirectoryError, naming the temporary file
    ('.summary.json.x1y2.tmp'), out of every command as a traceback. It is WriteFailed now, said of the
    user's path in one line with what happened and what to do, and no temporary file is left beside it."""
    from forecast.io import WriteFailed, resource_error_message

    folder = tmp_path / "out"
    folder.mkdir()
    path = folder / "summary.json"
    path.write_text("old")
    with pytest.raises(WriteFailed) as raised:
        with atomic_path(path) as tmp:
            happening(folder)(tmp)
    assert resource_error_message(raised.value) == f"{path}: {said.format(folder=folder)}"
    assert str(raised.value) == resource_error_message(raised.value)
    left = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    assert [name for name in left if name.endswith(".tmp")] == []
    if happening is _refused_in_a_read_only_folder:
        assert path.read_text() == "old"


def test_a_file_on_the_way_to_a_result_is_named(tmp_path):
    """fc.save('fits/runs.csv/fit.nc') (a file where a folder is meant) said 'FileExistsError: File exists:
    fits/runs.csv', a file that was meant to exist; it names the file that is on the way now."""
    from forecast.io import WriteFailed

    (tmp_path / "runs.csv").write_text("run_id\n")
    for path in (tmp_path / "runs.csv" / "fit.nc", tmp_path / "runs.csv" / "sub" / "fit.nc"):
        with pytest.raises(WriteFailed, match="nothing can be written under it") as raised:
            atomic_write_text(path, "new")
        assert str(raised.value) == (f"{path}: Not a directory ({tmp_path / 'runs.csv'} is a file, so nothing can be "
                                     "written under it: name another folder)")
        assert raised.value.path_refuses
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv"]


@posix_only
def test_a_new_file_gets_the_umask_s_permission_bits_not_the_temporary_file_s(tmp_path):
    """Mutant 'new files owner-only': mkstemp makes its file 0o600; a new result is meant to be shared
    as the user's umask says (0o640 under umask 027), not readable by its writer alone."""
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "summary.json", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "summary.json").st_mode) == 0o640


def test_a_run_log_s_blank_lines_are_skipped_and_counted_in_the_line_a_damaged_row_is_named_by(tmp_path):
    """Mutant 'a blank line is damage' in read_complete_jsonl: a blank line (a log edited by hand) holds
    no row and is not refused; the lines are counted as the file has them, blank ones too."""
    path = tmp_path / "evals.jsonl"
    path.write_bytes(b'{"step": 1}\n\n{"step": 2}\n  \n{"step": 3, "tor')
    assert read_complete_jsonl(path, ValueError) == [{"step": 1}, {"step": 2}]
    # each row's line, as an editor and forecast.data number it: the second row is on line 3, not row 2
    assert numbered_complete_jsonl(path, ValueError) == [(1, {"step": 1}), (3, {"step": 2})]
    path.write_bytes(b'{"step": 1}\n\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"^line 3 is not a JSON object$"):
        read_complete_jsonl(path, ValueError)


def test_a_block_of_zeros_in_a_run_log_is_refused_as_forecast_refuses_it_but_in_its_torn_last_line(tmp_path):
    """Zeros a crash left on a complete line (a line end, and rows, after them) were 'line 2 is not valid JSON
    (Expecting value: column 1)': said as forecast.data says them, their byte offset and line in the file (a
    byte-order mark counted, as it is in the file). In the torn last line they are left out with it (a resume's
    repair says so: test_trainer_run)."""
    path = tmp_path / "evals.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"step": 1}\n' + b"\x00" * 16 + b'\n{"step": 2}\n')
    with pytest.raises(ValueError) as info:
        numbered_complete_jsonl(path, ValueError)
    assert str(info.value) == ("holds NUL bytes (zeros) from byte offset 15, on line 2: not text but what a crash "
                               "leaves on some file systems where writes were lost; remove them (tr -d '\\000' < FILE "
                               "> fixed) to read the rows around them")
    path.write_bytes(b'{"step": 1}\n{"step": 2, "metr' + b"\x00" * 4096)
    assert numbered_complete_jsonl(path, ValueError) == [(1, {"step": 1})]
