"""Shared fixtures. MCMC is expensive, so one small real fit is made per test session and shared
by every test that only reads a fitted model."""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecast.synthetic import load_table1, simulate_sweep


@contextlib.contextmanager
def benchmark_module(file_name: str):
    """A script in benchmarks/ imported as a module, for tests of its helpers. Registered in
    sys.modules while in use: dataclasses look their module up while the class is made."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / file_name
    spec = importlib.util.spec_from_file_location(f"{path.stem}_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def small_recipe_table(n: int = 3) -> pd.DataFrame:
    """A few Table 1 recipes with clearly different asymptotes."""
    t = load_table1().rename(columns={"run": "recipe"})
    picks = ["scalerl_8b", "scalerl_scout_moe", "scalerl_8gen"][:n]
    return t[t["recipe"].isin(picks)].reset_index(drop=True)


def pytest_collection_finish(session):
    """The notebooks (tests/test_notebooks.py) take minutes of CPU: started here, as soon as a test that
    needs them is collected, they run beside the tests before theirs, on the core those leave idle."""
    if session.config.option.collectonly:
        return
    if hasattr(session.config, "workerinput"):
        # a pytest-xdist worker collects every test, though it runs only its share: each worker starting
        # the notebooks would run them twice. There the notebooks' fixture starts them when their file's
        # first test comes, on one worker (`make test` hands out whole files), while the other runs on
        return
    needing = next((item for item in session.items if "executions" in getattr(item, "fixturenames", ())), None)
    if needing is not None:
        notebooks = needing.module
        # under pytest's base folder, as tmp_path_factory.mktemp makes it (the fixtures are not at hand in a
        # hook): pytest keeps the last few sessions' folders, so a killed session's no longer piles up in /tmp
        out = session.config._tmp_path_factory.mktemp("notebooks")
        session.config.stash[notebooks.STARTED_KEY] = notebooks.start_executions(out)
        session.config.stash[_NOTEBOOKS_KEY] = (notebooks, out)


_NOTEBOOKS_KEY = pytest.StashKey[tuple]()  # the notebooks' test module and the folder of their executed copies


def pytest_sessionfinish(session):
    """A session that ended before the notebooks' tests (-x, Ctrl-C) leaves no notebook running."""
    notebooks, out = session.config.stash.get(_NOTEBOOKS_KEY, (None, None))
    if notebooks is not None:
        notebooks.stop_executions(session.config.stash[notebooks.STARTED_KEY])
        shutil.rmtree(out, ignore_errors=True)


# Compiled models the test session keeps (forecast.inference keeps MAX_COMPILED_MODELS, 8, the ones
# used last). The fits of the forecast tests make 12 model structures (13 with the slow
# test_thirty_recipes_converge), so with 8 kept two were compiled again after they had been dropped
# (the backtest's 2-run structure in test_optuna_pruner.py, the advisor's in test_watch.py), each
# seconds of numba. 16 keep every one, at about 100 MB each.
SESSION_COMPILED_MODELS = 16


def pytest_configure(config):
    from forecast import inference

    inference.MAX_COMPILED_MODELS = max(inference.MAX_COMPILED_MODELS, SESSION_COMPILED_MODELS)


# Test files whose fits compile the same model structure (same runs, recipes and padded rows, same
# priors). Compiled models are cached per process (forecast.inference), and `make test` hands whole
# files to its two workers: a pair split between them compiled its structure on each, about 20 s of
# numba more. Each pair here goes to one worker together. Checked by test_conftest_groups.py.
SHARED_STRUCTURE_FILES = (
    ("test_backtest.py", "test_optuna_pruner.py"),  # ours' refits of 2 runs, 64 rows
    ("test_decisions.py", "test_forecaster.py"),  # 2 recipes x 2 seeds, 64 rows
    ("test_early_stop_trainer.py", "test_hf_callback.py"),  # the advisor's fit of 2 runs, 256 rows
)


def shared_scope(file_scope: str) -> str:
    """The work unit of a test file under `--dist loadfile`: its pair's, if it has one, else its own."""
    name = Path(file_scope).name
    pair = next((pair for pair in SHARED_STRUCTURE_FILES if name in pair), None)
    return file_scope if pair is None else str(Path(file_scope).with_name("+".join(pair)))


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: without the plugin (-p no:xdist) it is never called
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with each pair of SHARED_STRUCTURE_FILES as one work unit; any other mode as asked."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    if not callable(getattr(LoadFileScheduling, "_split_scope", None)):
        # xdist's private way of naming a test's unit, overridden below: an xdist without it would run
        # the override never, and the pairs would be split again without a word
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            "this pytest-xdist's LoadFileScheduling has no _split_scope: conftest.SHARED_STRUCTURE_FILES are not "
            "kept together (each pair's model is compiled on both workers)"), stacklevel=2)
        return None

    class SharedStructureScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return shared_scope(super()._split_scope(nodeid))

    return SharedStructureScheduling(config, log)


@pytest.fixture(scope="session")
def small_sweep() -> pd.DataFrame:
    """3 recipes x 2 seeds x 16 points, synthetic (ScaleRL Table 1 shapes)."""
    return simulate_sweep(small_recipe_table(), n_seeds=2, n_points=16, rng=7)


@pytest.fixture(scope="session")
def fitted(small_sweep):
    """A real (short-chain) NUTS fit of `small_sweep`, shared by the session."""
    from forecast import ScalingForecaster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = ScalingForecaster(mode="fast").fit(small_sweep, random_seed=3, progress=False)
    return fc


def with_a_late_decline(runs: pd.DataFrame, run_id: str, drop: float = 0.12) -> pd.DataFrame:
    """`runs` with `run_id`'s metric falling by up to `drop` over the last 40% of its evaluations (by
    compute rank): a late collapse, a shape no sigmoid follows (forecast.shape_check)."""
    runs = runs.copy()
    rows = runs["run_id"] == run_id
    position = runs.loc[rows, "compute"].rank(pct=True)
    runs.loc[rows, "metric"] -= drop * np.clip(position - 0.6, 0, None) / 0.4
    return runs


@pytest.fixture(scope="session")
def late_decline_sweep(small_sweep) -> tuple[pd.DataFrame, str]:
    """`small_sweep` with its first run made to decline late, and that run's id."""
    victim = str(small_sweep["run_id"].unique()[0])
    return with_a_late_decline(small_sweep, victim), victim


@pytest.fixture(scope="session")
def late_decline_fit(late_decline_sweep):
    """A fast fit of `late_decline_sweep`, shared by the session (its victim is flagged, no other run)."""
    from forecast import ScalingForecaster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ScalingForecaster(mode="fast").fit(late_decline_sweep[0], random_seed=3, progress=False)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


class FitIntercepted(Exception):
    """Raised by intercept_advice_fit's stand-in for fit_for_advice."""


@pytest.fixture
def intercept_advice_fit(monkeypatch):
    """install(module): replace module.fit_for_advice by a stand-in that records its keyword
    arguments in the returned dict and raises FitIntercepted, for tests of what reaches a fit."""

    def install(module) -> dict:
        seen = {}

        def fake_fit(table, **kwargs):
            seen.update(kwargs)
            raise FitIntercepted

        monkeypatch.setattr(module, "fit_for_advice", fake_fit)
        return seen

    return install


def _denied_by_chmod(path: Path, mode: int, restore: list) -> bool:
    """chmod `path` to `mode` where that denies access (not root), remembering its mode for the
    fixture's end; False as root, who reads and enters anything, so the fixture fakes the refusal."""
    import os

    if os.geteuid() == 0:
        return False
    restore.append((path, path.stat().st_mode))
    path.chmod(mode)
    return True


def _restore_modes(restore: list) -> None:
    for path, mode in restore:
        path.chmod(mode)  # so that pytest can remove its temporary folder


@pytest.fixture
def make_unreadable(monkeypatch):
    """make_unreadable(path): reading `path` fails with PermissionError, as another user's file does.
    chmod 000 where that denies it; as root (which reads any file, as in many containers) open()
    refuses the path instead, so the test runs there too."""
    import builtins
    import io
    import os

    denied = set()
    real_open = builtins.open

    def guarded_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(file) in denied:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    def make(path):
        path = Path(path)
        if _denied_by_chmod(path, 0, restore):
            return
        denied.add(os.path.abspath(path))
        monkeypatch.setattr(builtins, "open", guarded_open)
        monkeypatch.setattr(io, "open", guarded_open)

    restore = []
    yield make
    _restore_modes(restore)


@pytest.fixture
def make_unenterable(monkeypatch):
    """make_unenterable(folder): a path below `folder` cannot be looked at (PermissionError), as below
    another user's folder without execute permission; the folder itself can still be listed. chmod
    where that denies it; as root, os.stat refuses the paths below it instead."""
    import os

    denied = []
    real_stat = os.stat

    def guarded_stat(path, *args, **kwargs):
        if isinstance(path, (str, os.PathLike)) and any(os.path.abspath(path).startswith(f"{folder}{os.sep}")
                                                        for folder in denied):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_stat(path, *args, **kwargs)

    def make(folder):
        folder = Path(folder)
        if _denied_by_chmod(folder, 0o644, restore):
            return
        denied.append(os.path.abspath(folder))
        monkeypatch.setattr(os, "stat", guarded_stat)

    restore = []
    yield make
    _restore_modes(restore)


@pytest.fixture
def make_private(make_unenterable, monkeypatch):
    """make_private(folder): `folder` can be neither listed nor entered, as another user's folder of
    mode 700 (drwx------). chmod 000 where that denies it; as root, os.scandir refuses the folder and
    os.stat the paths below it (make_unenterable) instead."""
    import os

    denied = []
    real_scandir = os.scandir

    def guarded_scandir(path="."):
        if os.path.abspath(path) in denied:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    def make(folder):
        folder = Path(folder)
        if _denied_by_chmod(folder, 0, restore):
            return
        make_unenterable(folder)
        denied.append(os.path.abspath(folder))
        monkeypatch.setattr(os, "scandir", guarded_scandir)

    restore = []
    yield make
    _restore_modes(restore)


@pytest.fixture
def main_said(monkeypatch, tmp_path):
    """main_said(argv, together=...): forecast's CLI run with stdout and stderr on files, as a user's
    shell puts them. together=True: both on one file, as on a terminal or under `2>&1`; returns (exit
    code, that file's text). together=False: stdout saved apart (`> out.txt`); returns (exit code,
    stdout's text, stderr's text)."""
    from forecast.cli import main

    def run(argv, *, together):
        names = ["terminal"] if together else ["out", "err"]
        paths = [tmp_path / f"{name}{len(list(tmp_path.glob(name + '*.txt')))}.txt" for name in names]
        with contextlib.ExitStack() as files, monkeypatch.context() as patched:
            opened = [files.enter_context(open(path, "w")) for path in paths]
            patched.setattr(sys, "stdout", opened[0])
            patched.setattr(sys, "stderr", opened[-1])
            code = main(argv)
        return (code, *(path.read_text() for path in paths))

    return run


def main_on_a_full_disk(argv: list[str], room: int, *, before: str = "") -> subprocess.CompletedProcess:
    """forecast's CLI in a fresh interpreter that may write files of at most `room` bytes (RLIMIT_FSIZE: a
    write beyond it fails, as on a disk that fills up while the result is written), after running the
    Python lines `before` (stand-ins for slow work). Linux and macOS; the limit holds for that process alone."""
    import resource

    code = (f"{before}\nimport sys\nfrom forecast.cli import main\nsys.exit(main({argv!r}))")

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (room, room))

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          preexec_fn=limit_file_size)
