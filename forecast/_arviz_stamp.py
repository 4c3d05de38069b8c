"""A workaround for a race in ArviZ 0.23's once-a-day notice, run before anything imports ArviZ.

On its first import of a day, arviz 0.23.x writes the date to <user cache>/arviz/daily_warning
through one fixed temporary name (daily_warning.tmp). Processes that import it at the same moment
(trainer sweep workers with the advisor on, torchrun ranks, parallel pytest, two benchmark lanes)
rename each other's temporary file away, and all but one fail at import with FileNotFoundError
(arviz-devs/arviz#2530 and #2583, no release fixes it yet). We write today's date first, through a
temporary file of our own (unique name, atomic replace), so that ArviZ finds today's date and
skips its own write. The cost: ArviZ's once-a-day notice about its coming refactor is not shown;
pyproject keeps arviz below 0.24, where that refactor starts.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from .io import atomic_write_text


def arviz_stamp_path() -> Path:
    """Where arviz 0.23 keeps the date of its last notice (platformdirs' user cache for "arviz")."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("arviz", "arviz")) / "daily_warning"


def settle_arviz_daily_stamp(stamp: Path | None = None, today: datetime.date | None = None) -> bool:
    """Make the stamp hold today's date before ArviZ reads it. True when it was written now.

    Safe when many processes call it at once: each writes its own temporary file and replaces the
    stamp atomically. Never raises: a workaround must not be what stops an import.
    """
    try:
        stamp = stamp or arviz_stamp_path()
        date = (today or datetime.date.today()).isoformat()
        try:
            if stamp.read_text().strip() == date:
                return False
        except OSError:
            pass
        atomic_write_text(stamp, date)
        return True
    except Exception:  # noqa: BLE001 - see the docstring
        return False
