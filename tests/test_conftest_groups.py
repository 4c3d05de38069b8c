"""The pairs of test files that `make test` hands to one worker (conftest.SHARED_STRUCTURE_FILES):
a file renamed or removed would silently end its pair's sharing of one compiled model."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED_STRUCTURE_FILES, shared_scope

TESTS = Path(__file__).resolve().parent


def test_each_file_of_a_shared_structure_pair_exists():
    missing = [name for pair in SHARED_STRUCTURE_FILES for name in pair if not (TESTS / name).is_file()]
    assert not missing, f"named in conftest.SHARED_STRUCTURE_FILES but not in tests/: {missing}"


def test_a_pair_is_one_work_unit_and_other_files_keep_their_own():
    for first, second in SHARED_STRUCTURE_FILES:
        assert shared_scope(f"tests/{first}") == shared_scope(f"tests/{second}")
    units = {shared_scope(f"tests/{pair[0]}") for pair in SHARED_STRUCTURE_FILES}
    assert len(units) == len(SHARED_STRUCTURE_FILES)  # no two pairs merged into one unit
    assert shared_scope("tests/test_data.py") == "tests/test_data.py"


class _LoadfileConfig:
    """What the scheduler hook reads of pytest's config, and the warnings it is given."""

    def __init__(self):
        self.warnings = []

    def getvalue(self, name):
        return {"dist": "loadfile", "tx": ["2*popen"]}[name]

    def issue_config_time_warning(self, warning, stacklevel):
        self.warnings.append(warning)


def test_the_scheduler_names_a_pair_s_tests_by_one_unit():
    pytest.importorskip("xdist.scheduler")
    from conftest import pytest_xdist_make_scheduler

    config = _LoadfileConfig()
    scheduler = pytest_xdist_make_scheduler(config, None)
    first, second = SHARED_STRUCTURE_FILES[0]
    assert scheduler._split_scope(f"tests/{first}::test_a") == scheduler._split_scope(f"tests/{second}::test_b")
    assert scheduler._split_scope("tests/test_data.py::test_c") == "tests/test_data.py"
    assert not config.warnings


def test_an_xdist_without_split_scope_is_warned_of_and_loadfile_runs_as_usual(monkeypatch):
    xdist_scheduler = pytest.importorskip("xdist.scheduler")
    from conftest import pytest_xdist_make_scheduler

    for cls in xdist_scheduler.LoadFileScheduling.__mro__:
        if "_split_scope" in vars(cls):
            monkeypatch.delattr(cls, "_split_scope")
    config = _LoadfileConfig()
    assert pytest_xdist_make_scheduler(config, None) is None  # xdist's own loadfile then
    assert len(config.warnings) == 1 and "_split_scope" in str(config.warnings[0])
