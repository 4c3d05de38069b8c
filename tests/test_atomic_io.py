"""Atomic rewrites of result files (forecast/io.py), which trainer_minimal's writes go through too:
a rewrite keeps what the user set up around the file and survives a crash."""

import os
import stat
import sys
import time

import pytest

from forecast.io import atomic_path, atomic_write_json, atomic_write_text

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
