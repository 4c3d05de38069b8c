"""The pairs of test files that `make test` hands to one worker (conftest.SHARED_STRUCTURE_FILES):
a file renamed or removed would silently end its pair's sharing of one compiled model."""

from __future__ import annotations

from pathlib import Path

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
