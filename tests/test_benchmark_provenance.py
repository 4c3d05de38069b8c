"""Every benchmark's output starts with where it came from: the commit, the package version, the
cores and every setting. RESULTS.md's figures were copied from output that said none of these, so
a figure could not be traced to the code or the machine that made it. No benchmark runs here: each
script's main() is stopped where it prints that line."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import benchmark_module

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import provenance  # noqa: E402

# every benchmark that runs without a GPU (gpu_check.sh and trainer_gpu.py need one)
SCRIPTS = ["command_latency.py", "convergence.py", "cross_validation_speed.py", "early_stop.py", "exact_likelihood.py", "extrapolation.py",
           "fit_jitter.py", "fit_speed.py", "optuna_pruner.py", "trainer_default_run.py"]


class StoppedAtProvenance(Exception):
    """Raised in place of printing the provenance line, so main() does no work after it."""

    def __init__(self, script, settings):
        super().__init__(script)
        self.script, self.settings = script, settings


def stop_at_provenance(script, settings):
    raise StoppedAtProvenance(script, settings)


def settings_printed_by(module, argv: list[str], monkeypatch) -> tuple[str, dict]:
    """The (script, settings) main(argv) would print its provenance line with, before any work."""
    monkeypatch.setattr(module, "print_provenance", stop_at_provenance)
    monkeypatch.setattr(sys, "argv", [module.__file__, *argv])  # trainer_default_run reads sys.argv
    with pytest.raises(StoppedAtProvenance) as stopped:
        module.main() if module.__name__.startswith("trainer_default_run") else module.main(argv)
    return stopped.value.script, stopped.value.settings


def test_the_line_names_script_commit_version_cores_time_and_every_setting():
    line = provenance.provenance_line(
        "benchmarks/fit_speed.py", {"skip_baseline": True, "long_points": 3000}, commit="abc1234 + uncommitted changes",
        version="0.1.0", cores=2, load=3.5, when=datetime(2026, 12, 5, 9, 30, tzinfo=UTC))
    assert line.startswith("# benchmarks/fit_speed.py at abc1234 + uncommitted changes, scaling-forecast 0.1.0; ")
    assert "; 2 cores, load 3.50;" in line and "2026-12-05 09:30 UTC" in line
    assert line.endswith("settings: skip_baseline=True, long_points=3000")
    assert "cores;" in provenance.provenance_line("x.py", {}, commit="c", version="v", cores=None, load=None,
                                                  when=datetime(2026, 1, 1, tzinfo=UTC))


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_commit_is_marked_when_the_tree_differs_from_it(tmp_path):
    assert provenance.checkout(tmp_path).startswith("unknown commit")
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a")
    head = git(tmp_path, "rev-parse", "--short", "HEAD")
    assert provenance.checkout(tmp_path) == head
    (tmp_path / "scratch.txt").write_text("an untracked file changes no figure\n")
    assert provenance.checkout(tmp_path) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert provenance.checkout(tmp_path) == f"{head} + uncommitted changes"


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_prints_its_provenance_with_its_settings_before_any_work(script, monkeypatch):
    with benchmark_module(script) as module:
        name, settings = settings_printed_by(module, [], monkeypatch)
    assert name == f"benchmarks/{script}"
    assert settings and all(not key.startswith("-") for key in settings)  # argparse's names: every flag, defaults too


def test_the_printed_settings_are_the_ones_given(monkeypatch):
    with benchmark_module("optuna_pruner.py") as module:
        _, settings = settings_printed_by(module, ["--studies", "3", "--trials", "12", "--sampler", "tpe"], monkeypatch)
    assert settings["studies"] == 3 and settings["trials"] == 12 and settings["sampler"] == "tpe"
    assert settings["pruners"] == ",".join(module.PRUNERS)  # a default is shown too
