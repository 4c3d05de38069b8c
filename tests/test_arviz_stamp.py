"""The workaround for ArviZ 0.23's import race (forecast/_arviz_stamp.py)."""

import datetime
import os
import subprocess
import sys
from pathlib import Path

from forecast._arviz_stamp import settle_arviz_daily_stamp

ROOT = Path(__file__).resolve().parents[1]


def test_the_stamp_gets_today_once_and_keeps_it(tmp_path):
    stamp = tmp_path / "arviz" / "daily_warning"
    today = datetime.date(2026, 12, 2)
    assert settle_arviz_daily_stamp(stamp, today) is True
    assert stamp.read_text() == "2026-12-02"
    assert settle_arviz_daily_stamp(stamp, today) is False  # already today: nothing written
    assert settle_arviz_daily_stamp(stamp, datetime.date(2026, 12, 3)) is True  # a new day
    assert stamp.read_text() == "2026-12-03"
    assert [p.name for p in stamp.parent.iterdir()] == ["daily_warning"]  # no temporary file left


def test_a_stamp_that_cannot_be_written_does_not_raise(tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    assert settle_arviz_daily_stamp(blocker / "daily_warning") is False


def test_importing_forecast_leaves_arviz_nothing_to_write(tmp_path):
    # ArviZ 0.23 writes its stamp through the fixed name daily_warning.tmp; a folder of that name
    # makes that write fail, as a concurrent import renaming it away does. With today's date
    # already in the stamp, ArviZ does not write, and the import succeeds.
    cache = tmp_path / "cache"
    (cache / "arviz" / "daily_warning.tmp").mkdir(parents=True)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    code = "import forecast, arviz; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (cache / "arviz" / "daily_warning").read_text() == datetime.date.today().isoformat()
