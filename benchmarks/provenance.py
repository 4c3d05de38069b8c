"""The first line every benchmark prints: which script, at which commit and package version, on
how many cores, when, with which settings. A figure copied into RESULTS.md from a run's output
can then be traced to the code and the machine that made it (the record's figures moved 2x with
the cores' load and once with a baseline's core count, and the commit was reconstructed by hand).
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def checkout(root: Path = ROOT) -> str:
    """The commit the benchmark runs at, short, with '+ uncommitted changes' where the working
    tree differs from it (figures from a tree that is not a commit cannot be reproduced from one)."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown commit (not a git checkout)"
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown commit (git not available)"
    return head.stdout.strip() + (" + uncommitted changes" if dirty.stdout.strip() else "")


def package_version() -> str:
    try:
        from forecast import __version__
    except ImportError:
        return "unknown"
    return __version__


def provenance_line(script: str, settings: dict, *, commit: str, version: str, cores: int | None,
                    load: float | None, when: datetime) -> str:
    """One line naming the script, commit, package version, cores (and their load: the record's
    timings moved with it), the time in UTC and every setting, flags included at their defaults."""
    load_text = f", load {load:.2f}" if load is not None else ""
    shown = ", ".join(f"{name}={value!r}" for name, value in settings.items())
    return (f"# {script} at {commit}, scaling-forecast {version}; {cores or 'unknown'} cores{load_text}; "
            f"python {sys.version.split()[0]}; {when.astimezone(UTC):%Y-%m-%d %H:%M} UTC; "
            f"settings: {shown or 'none'}")


def print_provenance(script: str, settings: dict) -> None:
    """Print provenance_line for this process, before the benchmark's work starts."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = None
    print(provenance_line(script, settings, commit=checkout(), version=package_version(), cores=os.cpu_count(),
                          load=load, when=datetime.now(UTC)), flush=True)
