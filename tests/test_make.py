"""`make test` runs the suite in two processes (pytest-xdist), whole files to each; there only the
notebooks' own fixture starts the notebooks (conftest.py)."""

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest

REPO = Path(__file__).resolve().parents[1]


def pytest_command_of(*make_arguments: str) -> str:
    """The pytest line `make -n` prints for `make_arguments` (a dry run: nothing is set up or run)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    printed = subprocess.run(["make", "-n", *make_arguments], cwd=REPO, capture_output=True, text=True, check=True).stdout
    (line,) = [line for line in printed.splitlines() if "-m pytest" in line]
    return line


def test_make_test_runs_the_suite_in_two_processes_handing_out_whole_files():
    assert pytest_command_of("test").endswith('-m pytest -n 2 --dist loadfile -m "not slow"')
    assert pytest_command_of("test-all").endswith("-m pytest -n 2 --dist loadfile")
    assert pytest_command_of("test-all", "TEST_WORKERS=3").endswith("-m pytest -n 3 --dist loadfile")
    assert pytest_command_of("test-all", "TEST_WORKERS=0").endswith("-m pytest -n 0 --dist loadfile")  # one process


def test_an_xdist_worker_leaves_the_notebooks_to_their_fixture():
    """Every worker collects every test: each starting the notebooks at collection would run them twice."""
    started = []
    notebooks = SimpleNamespace(STARTED_KEY=pytest.StashKey[dict](), start_executions=lambda out: started.append(out) or {})
    needing = SimpleNamespace(fixturenames=("executions",), module=notebooks)

    def session(**worker):
        config = SimpleNamespace(option=SimpleNamespace(collectonly=False), stash=pytest.Stash(),
                                 _tmp_path_factory=SimpleNamespace(mktemp=lambda name: Path("/nowhere") / name), **worker)
        return SimpleNamespace(config=config, items=[needing])

    on_a_worker = session(workerinput={"workerid": "gw1"})
    conftest.pytest_collection_finish(on_a_worker)
    assert started == [] and notebooks.STARTED_KEY not in on_a_worker.config.stash
    alone = session()
    conftest.pytest_collection_finish(alone)  # the check above can fail: without a worker, they start here
    assert started == [Path("/nowhere/notebooks")] and alone.config.stash[notebooks.STARTED_KEY] == {}
