"""benchmarks/trainer_default_run.py trains one run in a folder of its own: a temporary one unless
--out names one to keep. Each call used to leave its temporary run folder (checkpoint, logs and
warm-start cache) behind in the temp directory, so every `make bench` added one more."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from conftest import benchmark_module

# a run of a few seconds: 2 RL steps on a tiny pool after 2 supervised ones
TINY = ["--max-steps", "2", "--eval-every", "2", "--warmup-steps", "2", "--warmup-batch", "4", "--train-size", "16",
        "--val-size", "4", "--val-samples", "1", "--batch-size", "4", "--group-size", "2", "--off-policy-k", "1"]


def run_benchmark(argv: list[str], monkeypatch, capsys) -> dict:
    monkeypatch.setattr(sys, "argv", ["trainer_default_run.py", *argv])
    with benchmark_module("trainer_default_run.py") as module:
        module.main()
    out = capsys.readouterr().out
    return json.loads(out[out.index("\n{") + 1:])


def test_the_temporary_run_folder_is_removed_and_a_given_one_kept(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    result = run_benchmark(TINY, monkeypatch, capsys)
    assert result["steps"] == 2 and result["evaluations"] == 1
    assert result["out"] is None
    assert list((tmp_path / "tmp").glob("trainer-bench-*")) == []  # (torch keeps caches of its own there)

    kept = tmp_path / "kept"
    result = run_benchmark([*TINY, "--out", str(kept)], monkeypatch, capsys)
    assert result["out"] == str(kept) and (Path(kept) / "evals.jsonl").is_file()
