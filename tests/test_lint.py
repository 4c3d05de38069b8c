"""The lint `make lint` runs is part of `make test`, so CI catches what a session forgot to lint
(an import-order slip in notebook 02 stayed red for a session because only `make lint` saw it)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINTED = ["forecast", "trainer_minimal", "tests", "benchmarks", "notebooks"]


def test_ruff_finds_nothing_in_the_linted_folders():
    if shutil.which("ruff") is None and subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True).returncode != 0:
        pytest.skip("ruff is not installed (it comes with the dev extra)")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", *LINTED], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
