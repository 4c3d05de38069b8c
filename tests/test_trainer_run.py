"""End-to-end tests of trainer_minimal on a tiny config: learning, crash-resume, the early-stop hook,
refusal of bad input, the Hugging Face path, bfloat16, and the sweep."""

import contextlib
import dataclasses
import errno
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import types

import pytest
import torch

from trainer_minimal import make_config
from trainer_minimal.cli import main
from trainer_minimal.config import from_dict, to_json
from trainer_minimal.logging_io import read_jsonl, read_numbered_jsonl
from trainer_minimal.model import forward_logits, load_hf_policy, save_untrained_llama
from trainer_minimal.tokenizer import CharTokenizer, HFTokenizer
from trainer_minimal.train import advice_line, checkpoint_step, train, warm_start_path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Reversing 3 digits with a one-layer model: learnt in seconds, so a few steps show a rise.
TINY = dict(d_model=32, n_layer=1, n_head=2, tasks="rev", max_size=1, train_size=400, val_size=50,
            val_samples=4, warmup_steps=60, warmup_batch=32, batch_size=8, group_size=4, gen_len=5, lr=2e-3)
RUN_FORMAT = {"run_id", "recipe", "seed", "compute", "compute_unit", "metric", "n_eval", "step", "device_seconds"}


@pytest.fixture(scope="session")
def warm_cache(tmp_path_factory):
    """One warm start for every test of this module (it is keyed by its settings)."""
    return str(tmp_path_factory.mktemp("warmstart"))


def tiny(out, warm_cache, preset="scalerl", **overrides):
    return make_config(preset, out=str(out), warmstart_cache=warm_cache, **{**TINY, **overrides})


def tiny_flags(**overrides):
    flags = []
    for key, value in {**TINY, **overrides}.items():
        flags += ["--" + key.replace("_", "-"), str(value)]
    return flags


def child_env():
    # the source tree first, one thread: the child sees the same package and the same numerics
    return {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}


def test_seeded_smoke_run_reward_rises(tmp_path, warm_cache):
    summary = train(tiny(tmp_path / "run", warm_cache, max_steps=40, eval_every=10))
    evals = read_jsonl(tmp_path / "run" / "evals.jsonl")
    log = read_jsonl(tmp_path / "run" / "train_log.jsonl")
    assert [r["step"] for r in evals] == [10, 20, 30, 40]
    assert RUN_FORMAT <= set(evals[0])
    assert {r["compute_unit"] for r in evals} == {"flops"} and evals[0]["n_eval"] == 200
    assert all(b["compute"] > a["compute"] > 0 for a, b in zip(evals, evals[1:], strict=False))
    assert evals[-1]["metric"] > summary["r0"] + 0.1, (summary["r0"], [r["metric"] for r in evals])
    first, last = (sum(r["reward"] for r in chunk) / len(chunk) for chunk in (log[:10], log[-10:]))
    assert last > first + 0.1
    assert {"reward", "entropy", "clip_frac", "zero_var_frac", "trained_tokens", "grad_norm"} <= set(log[0])
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["loss_type"] == "cispo" and config["run_id"] == "scalerl-s0"


def test_a_step_whose_loss_is_not_finite_ends_the_run_before_it_corrupts_the_weights(tmp_path, warm_cache, monkeypatch,
                                                                                      capsys):
    """A run whose loss turned NaN (a weight decay typed 1e8 times too large) took the step, trained on with NaN
    weights to its end and exited 0, its pass rate 0 from then on: forecast read a recipe that collapsed. The
    step is not taken: exit 1 naming it, no summary.json (not finished), and what was written stands, finite."""
    import trainer_minimal.train as train_module

    real_loss = train_module.policy_loss
    calls = []

    def loss_that_turns_nan(*args, **kwargs):
        token_loss, clipped = real_loss(*args, **kwargs)
        calls.append(1)
        return (token_loss * math.nan if len(calls) > 5 else token_loss), clipped

    monkeypatch.setattr(train_module, "policy_loss", loss_that_turns_nan)
    run = tmp_path / "run"
    argv = ["train", "--out", str(run), "--warmstart-cache", warm_cache, "--max-steps", "12", "--eval-every", "2",
            *tiny_flags(micro_batch=32)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert re.fullmatch(r"trainer-minimal: error: step 6: the loss is nan and the gradient norm nan, so training "
                        r"diverged; the step was not taken and the run ends \(.*\): start it anew with a lower learning "
                        r"rate \(lr 0.002\), weight decay or temperature, or with gradient clipping\n", err), err
    assert [row["step"] for row in read_jsonl(run / "evals.jsonl")] == [2, 4]
    assert [row["step"] for row in read_jsonl(run / "train_log.jsonl")] == [1, 2, 3, 4, 5]
    assert not (run / "summary.json").exists()
    weights = torch.load(run / "ckpt.pt", weights_only=False)["model"]
    assert all(torch.isfinite(w).all() for w in weights.values() if torch.is_floating_point(w))


def test_resume_after_kill_9_keeps_the_eval_log_exact(tmp_path, warm_cache):
    run = tmp_path / "killed"
    cmd = [sys.executable, "-m", "trainer_minimal", "train", "--out", str(run), "--warmstart-cache", warm_cache,
           "--max-steps", "400", "--eval-every", "2", *tiny_flags()]
    child = subprocess.Popen(cmd, env=child_env(), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while len(read_jsonl(run / "evals.jsonl")) < 3:
        assert child.poll() is None, child.stderr.read().decode()
        assert time.time() < deadline, "the child wrote no evaluations in time"
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    with open(run / "evals.jsonl", "a") as f:  # as if the kill had hit mid-write
        f.write('{"run_id": "scalerl-s0", "metr')

    ckpt_step = torch.load(run / "ckpt.pt", weights_only=False)["state"]["step"]
    end = ckpt_step + 6
    assert main(["train", "--out", str(run), "--resume", "--max-steps", str(end)]) == 0
    rows = read_jsonl(run / "evals.jsonl")
    assert [r["step"] for r in rows] == list(range(2, end + 1, 2))  # none lost, none duplicated
    assert (run / "evals.jsonl").read_text().endswith("\n")

    # the resumed run is the run that was never killed
    train(tiny(tmp_path / "reference", warm_cache, max_steps=end, eval_every=2))
    reference = read_jsonl(tmp_path / "reference" / "evals.jsonl")
    assert [r["metric"] for r in rows] == [r["metric"] for r in reference]
    assert [r["compute"] for r in rows] == [r["compute"] for r in reference]


class FileStandIn:
    """A file object that passes everything on to the real `file` but what a subclass changes, and
    closes it at the end of a with block."""

    def __init__(self, file):
        self.file = file

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


class FullDisk(FileStandIn):
    """A file whose disk is full: a write gets in the part that fits (half of it), then fails with
    ENOSPC, as a real full disk does at a page boundary."""

    def write(self, data):
        self.file.write(data[: len(data) // 2])
        self.file.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def fill_the_disk_at(monkeypatch, name, nth):
    """From the nth write of the run's file `name` on (its temporary file's, for a checkpoint), the disk is full."""
    import trainer_minimal.logging_io as logging_io

    writes = []

    def open_on_a_filling_disk(path, mode="r", *args, **kwargs):
        file = open(path, mode, *args, **kwargs)
        base = os.path.basename(path)
        if mode in ("a", "wb") and (base == name or base.startswith(f".{name}.")):
            writes.append(path)
            if len(writes) >= nth:
                return FullDisk(file)
        return file

    monkeypatch.setattr(logging_io, "open", open_on_a_filling_disk, raising=False)


@pytest.mark.parametrize("name, nth", [("ckpt.pt", 3), ("evals.jsonl", 2)])
def test_a_run_whose_disk_fills_says_so_in_a_line_and_resumes_exactly(tmp_path, warm_cache, monkeypatch, capsys, name, nth):
    """A run's folder filling up mid-run ended in a traceback: torch's 'RuntimeError: basic_ios::clear:
    iostream error' for a checkpoint, which named no disk at all. It is one line now, naming the file and
    the full disk, with how to go on, exit 1; the checkpoint before is intact, the log's torn last line
    is dropped on --resume, and the resumed run is the run that never stopped."""
    run = tmp_path / "run"
    fill_the_disk_at(monkeypatch, name, nth)  # the checkpoints of steps 0 and 2 fit, step 4's does not (or its row)
    assert main(["train", "--out", str(run), "--warmstart-cache", warm_cache, "--max-steps", "8", "--eval-every", "2",
                 *tiny_flags()]) == 1
    err = capsys.readouterr().err
    assert err == (f"trainer-minimal: error: {run / name}: No space left on device (the disk is full: free some space, or "
                   f"write elsewhere); `trainer-minimal train --out {run} --resume` goes on from the last checkpoint\n")
    assert checkpoint_step(str(run / "ckpt.pt")) == 2
    assert sorted(p.name for p in run.iterdir() if p.name.endswith(".tmp")) == []
    torn = (run / "evals.jsonl").read_text().rsplit("\n", 1)[1]
    if name == "ckpt.pt":  # step 4's row went in whole before its checkpoint failed
        assert [r["step"] for r in read_jsonl(run / "evals.jsonl")] == [2, 4] and torn == ""
    else:
        assert [r["step"] for r in read_jsonl(run / "evals.jsonl")] == [2] and torn.startswith('{"run_id"')
    monkeypatch.undo()  # space freed
    assert main(["train", "--out", str(run), "--resume"]) == 0
    train(tiny(tmp_path / "reference", warm_cache, max_steps=8, eval_every=2))
    rows, reference = (read_jsonl(folder / "evals.jsonl") for folder in (run, tmp_path / "reference"))
    assert [(r["step"], r["metric"], r["compute"]) for r in rows] == [(r["step"], r["metric"], r["compute"]) for r in reference]


class StoppedMidWrite(FullDisk):
    """A checkpoint's file whose second write is where a stop signal lands: its handler raises (Stopped,
    as cli.stop_signals_as_ctrl_c makes SIGTERM) inside that write, once; the writes after it go on."""

    def __init__(self, file):
        super().__init__(file)
        self.writes = 0

    def write(self, data):
        from trainer_minimal.cli import Stopped

        self.writes += 1
        if self.writes == 2:
            raise Stopped(signal.SIGTERM)
        return self.file.write(data)


def test_a_stop_during_a_checkpoint_write_is_said_as_a_stop(tmp_path, warm_cache, monkeypatch, capsys):
    """SIGTERM (or Ctrl-C) while a checkpoint was written, which follows every evaluation, ended the run
    in a traceback of torch's ('RuntimeError: ... unexpected pos 46 vs 0'), exit 1, since torch.save writes
    through a Python file object: the stop raised in its write came back as torch's RuntimeError. It is a
    stop, exit 143, saying that --resume goes on from the checkpoint before, which is whole."""
    import trainer_minimal.logging_io as logging_io

    run = tmp_path / "run"
    writes = []

    def open_stopped_at_the_third_checkpoint(path, mode="r", *args, **kwargs):
        file = open(path, mode, *args, **kwargs)
        if mode == "wb" and os.path.basename(path).startswith(".ckpt.pt."):
            writes.append(path)
            if len(writes) == 3:  # steps 0 and 2 are saved, step 4's checkpoint is being written
                return StoppedMidWrite(file)
        return file

    monkeypatch.setattr(logging_io, "open", open_stopped_at_the_third_checkpoint, raising=False)
    assert main(["train", "--out", str(run), "--warmstart-cache", warm_cache, "--max-steps", "8", "--eval-every", "2",
                 *tiny_flags()]) == 143
    assert capsys.readouterr().err == (f"trainer-minimal: stopped by SIGTERM; `trainer-minimal train --out {run} --resume` "
                                       "goes on from the last checkpoint\n")
    assert checkpoint_step(str(run / "ckpt.pt")) == 2
    assert sorted(p.name for p in run.iterdir() if p.name.endswith(".tmp")) == []


def test_a_resumed_run_removes_the_temporary_files_a_killed_write_left(tmp_path, warm_cache):
    """kill -9 during a checkpoint's save left .ckpt.pt.XXXX.tmp, as large as the checkpoint; the
    atomic write removes such files only once an hour old, so a run resumed sooner kept it for good.
    Under the run folder's lock they are a dead writer's, whatever their age; other files stay."""
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=4, eval_every=2))
    left = [run / ".ckpt.pt.k1ll3d.tmp", run / ".evals.jsonl.k1ll3d.tmp", run / ".summary.json.k1ll3d.tmp"]
    for path in left:
        path.write_bytes(b"half")
    (run / ".notes.tmp").write_text("the user's")
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "6"]) == 0
    assert not [path.name for path in left if path.exists()]
    assert (run / ".notes.tmp").read_text() == "the user's"


def test_the_same_seed_twice_gives_the_same_logs_but_for_the_wall_clock(tmp_path, warm_cache):
    """What the README promises for CPU runs: every logged number but device_seconds is reproduced."""
    def logs(name):
        train(tiny(tmp_path / name, warm_cache, max_steps=4, eval_every=2))
        rows = [*read_jsonl(tmp_path / name / "evals.jsonl"), *read_jsonl(tmp_path / name / "train_log.jsonl"),
                json.loads((tmp_path / name / "baseline.json").read_text())]
        return [{k: v for k, v in r.items() if k != "device_seconds"} for r in rows]

    first = logs("first")
    assert len(first) == 2 + 4 + 1 and first == logs("second")


def test_advisor_stop_ends_the_run_with_stopped_json(tmp_path, warm_cache, monkeypatch):
    from forecast.early_stop import EarlyStopConfig

    calls = []

    def trainer_advice(evals, reference_path, planned_compute, config, forecaster_kwargs):
        calls.append(dict(rows=len(evals), columns=set(evals.columns), reference=reference_path,
                          planned=planned_compute, config=config, forecaster_kwargs=forecaster_kwargs))
        action = "stop" if len(calls) == 2 else "continue"
        return types.SimpleNamespace(action=action, rule="fake", message=f"call {len(calls)}", details={},
                                     to_dict=lambda: dict(action=action, rule="fake"))

    fake = types.SimpleNamespace(trainer_advice=trainer_advice, EarlyStopConfig=EarlyStopConfig)
    monkeypatch.setitem(sys.modules, "forecast.early_stop", fake)
    summary = train(tiny(tmp_path / "run", warm_cache, max_steps=40, eval_every=2, advisor_every=2,
                         advisor_rules="target=0.6, margin=0.02,keep_runner_up=off", advisor_priors="b_mu=0.5"))
    assert summary["stopped"] and summary["steps"] == 8  # consulted after evals 2 and 4 (steps 4, 8)
    assert [c["rows"] for c in calls] == [2, 4] and RUN_FORMAT <= calls[0]["columns"]
    assert calls[0]["reference"] is None and calls[0]["planned"] > 0
    # the advisor's settings reach the rules and the fit; the others keep their defaults
    config = calls[0]["config"]
    assert (config.target, config.margin, config.keep_runner_up) == (0.6, 0.02, False)
    assert config.p_beat_threshold == EarlyStopConfig().p_beat_threshold
    assert calls[0]["forecaster_kwargs"]["priors"].b_mu == 0.5
    stopped = json.loads((tmp_path / "run" / "stopped.json").read_text())
    assert stopped["step"] == 8 and stopped["advice"] == {"action": "stop", "rule": "fake"}
    assert stopped["compute"] == read_jsonl(tmp_path / "run" / "evals.jsonl")[-1]["compute"]
    assert torch.load(tmp_path / "run" / "ckpt.pt", weights_only=False)["state"]["step"] == 8


def test_a_run_is_not_judged_at_max_steps_so_a_larger_max_steps_extends_it(tmp_path, warm_cache, monkeypatch):
    """The advisor's last turn used to fall on the final step, where it says budget_reached; the
    stopped.json that wrote then refused `--resume --max-steps N` as if the run had been judged."""
    from forecast.early_stop import EarlyStopConfig

    asked = []

    def trainer_advice(evals, planned_compute, **kwargs):
        asked.append(int(evals["step"].max()))
        done = evals["compute"].max() >= planned_compute  # what the real advisor says at max_steps
        advice = (dict(action="stop", rule="budget_reached", message="stop: compute >= planned budget") if done else
                  dict(action="continue", rule="beats_best", message="continue: P(beats best) = 0.5 >= 0.1"))
        return types.SimpleNamespace(**advice, details={"converged": False}, to_dict=lambda: advice)

    fake = types.SimpleNamespace(trainer_advice=trainer_advice, EarlyStopConfig=EarlyStopConfig)
    monkeypatch.setitem(sys.modules, "forecast.early_stop", fake)
    run = tmp_path / "run"
    summary = train(tiny(run, warm_cache, max_steps=4, eval_every=2, advisor_every=2))
    assert asked == [] and not summary["stopped"] and not (run / "stopped.json").exists()
    # extended, it is asked at step 4 as the run trained straight to 8 steps is, and not at 8
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "8"]) == 0
    assert asked == [4] and json.loads((run / "summary.json").read_text())["steps"] == 8
    assert [row["step"] for row in read_jsonl(run / "evals.jsonl")] == [2, 4, 6, 8]
    straight = tmp_path / "straight"
    train(tiny(straight, warm_cache, max_steps=8, eval_every=2, advisor_every=2))
    assert asked == [4, 4]


def test_an_extended_run_is_in_flight_again_until_it_ends(tmp_path, warm_cache, monkeypatch):
    """Its old summary.json stayed while it trained on, so `forecast watch` and `forecast backtest`
    took it for finished (watch: "no run in flight") until it wrote a new one."""
    import trainer_minimal.train as train_module

    run = tmp_path / "run"
    first = train(tiny(run, warm_cache, max_steps=4, eval_every=2))
    summary_while_training = []
    evaluate = train_module.evaluate

    def watched_evaluate(cfg, model, tok, val, step, *args):
        summary_while_training.append((step, (run / "summary.json").exists()))
        return evaluate(cfg, model, tok, val, step, *args)

    monkeypatch.setattr(train_module, "evaluate", watched_evaluate)
    extended = train(dataclasses.replace(tiny(run, warm_cache, max_steps=4, eval_every=2), resume=True, max_steps=8))
    assert summary_while_training == [(6, False), (8, False)]
    assert json.loads((run / "summary.json").read_text()) == extended and extended["steps"] == 8 != first["steps"]
    # a budget_reached stop reads no fit, so no "did not converge" warning rides on it
    assert "warning" not in advice_line("stop", "budget_reached", "stop: x", {"converged": False})


@pytest.mark.parametrize("argv, message", [
    (["train", "--preset", "nope"], "unknown preset 'nope'; choose one of grpo,"),
    # a typo or the paper's capitals: the nearest name is pointed at, not left to the list of eleven
    (["train", "--preset", "scalrl"], "unknown preset 'scalrl' (did you mean 'scalerl'?)"),
    (["sweep", "--presets", "GRPO,dapo", "--seeds", "0"], "unknown preset 'GRPO' (did you mean 'grpo'?)"),
    (["train", "--loss-type", "ppo2"], "invalid choice"),
    # a typo in a name from a fixed set is pointed at its likely name, as a preset's is
    (["train", "--loss-type", "ppoo"], "argument --loss-type: invalid choice: 'ppoo' (did you mean 'ppo'?); "
                                       "choose from 'ppo', 'cispo', 'gspo'"),
    (["sweep", "--presets", "grpo", "--seeds", "0", "--dtype", "bf16"], "invalid choice: 'bf16' (did you mean 'bfloat16'?)"),
    (["trian"], "invalid choice: 'trian' (did you mean 'train'?)"),
    (["train", "--tasks", "sort,rve"], "--tasks 'sort,rve': unknown task 'rve' (did you mean 'rev'?); use a comma list of add,"),
    (["train", "--advisor-every", "1", "--advisor-priors", "b_muu=1"], "--advisor-priors 'b_muu=1': unknown name 'b_muu' (did you mean 'b_mu'"),
    (["train", "--not-a-knob", "1"], "unrecognized arguments"),
    (["train", "--lr", "-1"], "lr must be > 0"),
    (["train", "--group-size", "1"], "--group-size must be >= 2"),
    (["train", "--batch-size", "abc"], "invalid int value"),
    (["train", "--eval-every", "3", "--off-policy-k", "2"], "multiple of --off-policy-k"),
    # a run that ended mid-round, extended later, sampled that round again and charged it twice
    (["train", "--max-steps", "3", "--eval-every", "2"], "--max-steps 3 must be a multiple of --off-policy-k 2"),
    (["sweep", "--presets", "scalerl,scalerl-k8", "--seeds", "0", "--max-steps", "36", "--eval-every", "4"],
     "--eval-every 4 must be a multiple of --off-policy-k 8"),
    (["train", "--train-size", "31"], "--train-size 31 must be at least --off-policy-k * --batch-size = 32"),
    (["train", "--data-seed", "-1"], "--data-seed must be >= 0, got -1"),
    (["train", "--seed", "-1"], "error: --seed must be >= 0, got -1"),
    (["train", "--resume"], "no checkpoint"),
    (["train", "--model-path", "/nonexistent/model"], "not a local Hugging Face model folder"),
    (["sweep", "--presets", "grpo", "--seeds", "0", "--model-path", "/nonexistent/model"],
     "not a local Hugging Face model folder"),
    (["train", "--advisor-every", "1", "--advisor-reference", "/nonexistent/runs.csv"],
     "--advisor-reference '/nonexistent/runs.csv' does not exist"),
    (["sweep", "--presets", "grpo", "--seeds", "0", "--advisor-every", "1", "--advisor-reference", "/nonexistent/runs"],
     "--advisor-reference '/nonexistent/runs' does not exist"),
    (["train", "--advisor-rules", "target=0.5"], "--advisor-rules is set but --advisor-every 0"),
    (["train", "--advisor-every", "1", "--advisor-rules", "taget=0.5"], "--advisor-rules 'taget=0.5': unknown name 'taget' (did you mean 'target'?); expected NAME=VALUE"),
    (["train", "--advisor-every", "1", "--advisor-rules", "p_beat_threshold=2"],
     "--advisor-rules: p_beat_threshold must lie in (0, 1), got 2.0"),
    (["train", "--advisor-every", "1", "--advisor-priors", "a_sd=-1"], "--advisor-priors: a_sd must be > 0 and at most 20, got -1.0"),
    (["sweep", "--presets", "grpo", "--seeds", "0", "--advisor-every", "1", "--advisor-rules", "min_evals=x"],
     "--advisor-rules 'min_evals=x': 'x' is not a whole number"),
    (["sweep", "--presets", "grpo,nope", "--seeds", "0"], "unknown preset 'nope'"),
    (["sweep", "--presets", "grpo", "--seeds", "0,x"], "comma list of integers"),
    # the tiny GPT's 64 learned positions: past them the run crashed at the position lookup, after its warm start
    # had begun (IndexError: index out of range in self, exit 1, a run folder left behind)
    (["train", "--tasks", "sort", "--max-size", "61"], "the tiny GPT has 64 positions, and the longest sequence"),
    (["sweep", "--presets", "grpo", "--seeds", "0", "--gen-len", "60"],
     "the longest sequence would be 69 tokens (a prompt of 9, then --gen-len 60 generated)"),
    (["train", "--lr", "inf"], "lr must be a finite number, got inf"),
    (["train", "--device", "cudax"], "--device 'cudax': use cpu, cuda or cuda:N"),
    (["sweep", "--presets", "grpo", "--seeds", "0", "--device", "cuda:-1"], "--device 'cuda:-1': use cpu, cuda or cuda:N"),
    (["train", "--lr", "1e-5", "--seed", "1", "--lr=1e-4"], "--lr is given more than once"),
    (["sweep", "--presets", "grpo", "--seeds", "0", "--seeds", "1"], "--seeds is given more than once"),
    (["train", "--clip-high", "nan"], "--clip-high must be a finite number, got nan"),
    # rev at size 1 has 1000 distinct prompts: the validation set cannot hold 1500 unique ones (it drew 50 *
    # val_size problems before it failed: hours at a val_size of 10 million)
    (["train", "--tasks", "rev", "--max-size", "1", "--val-size", "1500"],
     "--val-size 1500 is more than the 1000 distinct prompts of --tasks 'rev' up to --max-size 1"),
    (["sweep", "--presets", "grpo", "--seeds", "0", "--tasks", "rev", "--max-size", "1", "--val-size", "1500"],
     "--val-size 1500 is more than the 1000 distinct prompts of --tasks 'rev' up to --max-size 1"),
    # all of them: the training pool, drawn from the prompts the validation set leaves, drew 50 * train_size
    # problems before it failed ("could only generate 0 of 4000 problems")
    (["train", "--tasks", "rev", "--max-size", "1", "--val-size", "1000"],
     "--val-size 1000 takes all 1000 distinct prompts of --tasks 'rev' up to --max-size 1, and none is left for "
     "the training pool"),
    (["sweep", "--presets", "grpo", "--seeds", "0", "--tasks", "rev", "--max-size", "1", "--val-size", "1000"],
     "--val-size 1000 takes all 1000 distinct prompts of --tasks 'rev' up to --max-size 1, and none is left for "
     "the training pool"),
])
def test_bad_input_is_refused_with_exit_2_before_any_compute(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    code = main([*argv, "--out", str(out)])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()  # nothing created, nothing computed


def test_a_validation_set_may_leave_the_training_pool_one_prompt_but_not_none():
    """The training pool may repeat a prompt (tasks.build_datasets), so one prompt left by the validation set
    is enough: the refusal is at the tasks' whole count, not below it, for every task mix."""
    for tasks, max_size, count in (("rev", 1, 1000), ("add,mul", 1, 180), ("count", 1, 4**5)):
        make_config("scalerl", tasks=tasks, max_size=max_size, val_size=count - 1)
        with pytest.raises(ValueError, match=f"val_size={count} takes all {count} distinct prompts of tasks={tasks!r}"):
            make_config("scalerl", tasks=tasks, max_size=max_size, val_size=count)


def test_the_longest_sequence_of_the_tiny_gpt_may_fill_its_positions_not_pass_them():
    """Sorting at size s: a prompt of s + 5 tokens (<bos>, 's', s + 2 digits, '='), an answer of s + 3 (with
    <eos>): 64 tokens at size 28, within the 64 positions; 66 at size 29, refused. gen_len counts from the
    longest prompt (kills the mutant that halved the positions, and a check off by one either way)."""
    from trainer_minimal.tasks import build_datasets
    from trainer_minimal.train import check_sequences_fit

    def check(**settings):
        cfg = make_config("scalerl", tasks="sort", train_size=40, val_size=10, **settings)
        check_sequences_fit(cfg, *build_datasets(cfg))

    check(max_size=28)
    with pytest.raises(ValueError, match="the tiny GPT has 64 positions, and the longest sequence would be 66 tokens .a prompt and its answer"):
        check(max_size=29)
    check(max_size=3, gen_len=56)  # size 3: a prompt of 8 tokens
    with pytest.raises(ValueError, match=r"would be 65 tokens \(a prompt of 8, then gen_len=57 generated\)"):
        check(max_size=3, gen_len=57)


@pytest.mark.parametrize("command", [["train"], ["sweep", "--presets", "grpo", "--seeds", "0"]])
def test_a_cuda_device_the_machine_lacks_is_refused_with_exit_2_before_any_compute(tmp_path, capsys, monkeypatch,
                                                                                  command):
    """torch's own error came after the run folder was made (a traceback, exit 1), and for a sweep
    from its warm start, in the sweep's own process, before any run: whatever CUDA this machine has."""
    cases = (
        (False, 0, "cuda", "--device 'cuda' but this torch build sees no CUDA device"),
        (True, 1, "cuda:1", "--device 'cuda:1' but this machine has 1 CUDA device(s): use cuda:0"),
        (True, 2, "cuda:2", "--device 'cuda:2' but this machine has 2 CUDA device(s): use cuda:0 to cuda:1"),
    )
    for available, count, device, message in cases:
        monkeypatch.setattr(torch.cuda, "is_available", lambda available=available: available)
        monkeypatch.setattr(torch.cuda, "device_count", lambda count=count: count)
        out = tmp_path / f"out-{device}"
        argv = [*command, "--device", device, "--out", str(out),
                *tiny_flags(warmup_steps=1, max_steps=2, eval_every=2)]
        assert main(argv) == 2
        assert message in capsys.readouterr().err
        assert not out.exists()


@pytest.mark.parametrize("command", [["train"], ["sweep", "--presets", "grpo", "--seeds", "0"]])
def test_settings_whose_run_cannot_fit_in_memory_are_refused_with_exit_2_before_any_compute(tmp_path, capsys,
                                                                                           monkeypatch, command):
    """--n-layer 100000000 or --train-size 2000000000 passed every check, then ran for minutes building the
    model or the data until the machine ran out of memory. Here the machine is made to have 1 MiB, where the
    tiny run (about 0.45 MB by the estimate) fits, and each setting below makes it need more."""
    own_sysconf = os.sysconf

    def machine_with(pages):  # os.sysconf of a machine of `pages` 4 KiB pages; None: one that does not say
        def sysconf(name):
            if name == "SC_PHYS_PAGES":
                if pages is None:
                    raise ValueError("unrecognized configuration name")
                return pages
            return 4096 if name == "SC_PAGE_SIZE" else own_sysconf(name)
        return sysconf

    monkeypatch.setattr(os, "sysconf", machine_with(256))
    cases = (
        (dict(n_layer=4, d_model=64), "the model and its AdamW state 0.00308 GiB (--n-layer 4, --d-model 64)"),
        (dict(train_size=8000), "the task data 0.00187 GiB (--train-size 8000, --val-size 50)"),
        (dict(group_size=256), "(4096 in a rollout: --off-policy-k 2 x --batch-size 8 x --group-size 256)"),
    )
    for settings, part in cases:
        out = tmp_path / f"out-{'-'.join(settings)}"
        argv = [*command, "--out", str(out), "--warmstart-cache", str(tmp_path / "cache"),
                *tiny_flags(warmup_steps=1, max_steps=2, eval_every=2, **settings)]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "these settings need an estimated" in err and part in err
        assert "more than the 0.000977 GiB this machine has" in err
        assert not out.exists()
    # where the system does not say how much memory it has, nothing is refused
    monkeypatch.setattr(os, "sysconf", machine_with(None))
    out = tmp_path / "out-unknown-memory"
    assert main([*command, "--out", str(out), "--warmstart-cache", str(tmp_path / "cache"),
                 *tiny_flags(warmup_steps=1, max_steps=2, eval_every=2, n_layer=4, d_model=64)]) == 0


def test_the_memory_estimate_checks_a_cuda_device_s_own_memory_and_names_the_evaluation_s_sequences(monkeypatch):
    """On a CUDA device the model and the sequences are held by the device, the task data by the machine."""
    import trainer_minimal.train as train_module
    from trainer_minimal.train import check_memory_fits, memory_estimate

    cfg = make_config("scalerl", **{**TINY, "val_samples": 4096})
    sequences, said = memory_estimate(cfg)["the sequences held at once"]
    assert said == "4096 in an evaluation: val_samples=4096 per prompt" and sequences > 4096 * 4 * cfg.gen_len
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: types.SimpleNamespace(total_memory=2**20))
    monkeypatch.setattr(train_module, "machine_memory", lambda: 2**40)
    with pytest.raises(ValueError, match=r"need an estimated .* GiB of memory \(the model and its AdamW state .*; "
                                         r"the sequences held at once .*\), more than the 0.000977 GiB the CUDA "
                                         r"device cuda:0 has"):
        check_memory_fits(dataclasses.replace(cfg, device="cuda:0"))
    check_memory_fits(cfg)  # on the CPU, the machine's 1 TiB holds it
    monkeypatch.setattr(train_module, "machine_memory", lambda: 2**10)
    with pytest.raises(ValueError, match=r"\(the task data .* \(train_size=400, val_size=50\)\), more than the "
                                         r"9.54e-07 GiB this machine has"):
        check_memory_fits(dataclasses.replace(cfg, device="cuda:0", val_samples=4))


def needed(parts):
    return sum(size for size, _settings in parts.values())


def test_the_memory_estimate_counts_what_the_backward_keeps_of_a_warm_start_step_and_a_micro_batch(tmp_path,
                                                                                                 monkeypatch):
    """warmup_batch and micro_batch were left out: a warm-start step or an update's micro-batch holds its
    sequences with what their backward keeps in every block, far more a sequence than a rollout's. Each is
    counted only where the run surely holds it: the warm start where this process trains it (not cached, not
    resumed), the micro-batch without the zero-variance filter (with it a run may never run the update)."""
    import trainer_minimal.train as train_module
    from trainer_minimal.train import check_memory_fits, memory_estimate, warm_start_path

    cfg = make_config("scalerl", **{**TINY, "warmup_batch": 4096, "warmstart_cache": str(tmp_path / "cache")})
    sampled = memory_estimate(cfg)
    monkeypatch.setattr(train_module, "machine_memory", lambda: needed(sampled) + 1)  # fits all but the warm start
    with pytest.raises(ValueError, match=r"\(4096 in a warm-start step, with what its backward keeps: "):
        check_memory_fits(cfg)
    size, said = memory_estimate(cfg, warm_start=True)["the sequences held at once"]
    assert said == "4096 in a warm-start step, with what its backward keeps: warmup_batch=4096, n_layer=1, d_model=32"
    assert size > 2 * sampled["the sequences held at once"][0]
    check_memory_fits(dataclasses.replace(cfg, resume=True))  # a resumed run loads its weights: no warm start
    check_memory_fits(dataclasses.replace(cfg, warmup_steps=0))
    os.makedirs(os.path.dirname(warm_start_path(cfg)))
    open(warm_start_path(cfg), "wb").close()
    check_memory_fits(cfg)  # cached: loaded, not trained

    cfg = make_config("grpo", **{**TINY, "batch_size": 64, "group_size": 64, "micro_batch": 4096})
    sampled = memory_estimate(dataclasses.replace(cfg, micro_batch=1))
    monkeypatch.setattr(train_module, "machine_memory", lambda: needed(sampled) + 1)
    with pytest.raises(ValueError, match=r"\(4096 in a micro-batch of the update"):
        check_memory_fits(cfg)
    size, said = memory_estimate(cfg)["the sequences held at once"]
    # the mini-batch's 64 x 64 sequences, not the micro_batch asked for
    assert said == "4096 in a micro-batch of the update, with what its backward keeps: micro_batch=4096, n_layer=1, d_model=32"
    assert size > 2 * sampled["the sequences held at once"][0]
    split = memory_estimate(cfg, world=2)["the sequences held at once"][1]  # a rank's share of the mini-batch
    assert split.startswith("2048 in a micro-batch"), split
    check_memory_fits(dataclasses.replace(cfg, zero_var_filter=True))  # a run may keep no sequence to train on


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_what_the_estimate_counts_of_a_scored_batch_is_at_most_what_its_backward_keeps(dtype):
    """The memory check must never refuse a run that fits: the bytes torch keeps for the backward of a warm-start
    batch of the shortest sequences (its saved tensors, weights aside) are at least what the estimate counts."""
    from trainer_minimal.model import TinyGPT
    from trainer_minimal.rollout import score
    from trainer_minimal.tokenizer import CharTokenizer
    from trainer_minimal.train import SHORTEST_PROMPT_TOKENS, backward_kept_bytes

    cfg = make_config("scalerl", **{**TINY, "warmup_batch": 16, "n_layer": 2, "dtype": dtype})
    vocab = CharTokenizer().vocab_size
    model = TinyGPT(vocab, cfg.n_layer, cfg.n_head, cfg.d_model)
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept = {}

    def keep(tensor):
        kept[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    prompts = torch.randint(3, vocab, (cfg.warmup_batch, SHORTEST_PROMPT_TOKENS))
    answers = torch.randint(3, vocab, (cfg.warmup_batch, 2))
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
        score(model, prompts, torch.ones_like(prompts), answers, torch.ones_like(answers), dtype=dtype)
    estimate = backward_kept_bytes(cfg, cfg.warmup_batch, SHORTEST_PROMPT_TOKENS + 2, 2)
    assert sum(size for ptr, size in kept.items() if ptr not in weights) >= estimate > 0


def test_the_memory_check_counts_every_process_of_the_run_on_this_machine(tmp_path, monkeypatch):
    """Each rank holds its own model, sequences and task data: on the CPU the machine's memory holds every process
    on it (torchrun's LOCAL_WORLD_SIZE), and on CUDA devices the machine holds every process's task data. A
    single process is one whatever a shell left in LOCAL_WORLD_SIZE."""
    import trainer_minimal.train as train_module
    from trainer_minimal.train import check_memory_fits, memory_estimate

    cfg = make_config("scalerl", **{**TINY, "warmup_steps": 0})
    one = memory_estimate(cfg, world=4)
    monkeypatch.setattr(train_module, "machine_memory", lambda: 2 * needed(one))  # two processes fit, not three
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    check_memory_fits(cfg)  # WORLD_SIZE unset: a single process
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(ValueError, match=r"\(train_size=400, val_size=50; 3 processes on this machine, each its own\)"
                                         r"\), more than the .* GiB this machine has"):
        check_memory_fits(cfg)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two machines of two processes
    check_memory_fits(cfg)
    monkeypatch.delenv("LOCAL_WORLD_SIZE")  # a launch by hand: at least this rank and those below it
    monkeypatch.setenv("LOCAL_RANK", "2")
    with pytest.raises(ValueError, match="3 processes on this machine"):
        check_memory_fits(cfg)
    # on CUDA devices, each process's model and sequences are on its own device; the task data is the machine's
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: types.SimpleNamespace(total_memory=2**40))
    data = one["the task data"][0]
    monkeypatch.setattr(train_module, "machine_memory", lambda: 2 * data)
    with pytest.raises(ValueError, match=r"\(the task data .* 3 processes on this machine, each its own\)\), "
                                         r"more than the .* GiB this machine has"):
        check_memory_fits(dataclasses.replace(cfg, device="cuda"))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    check_memory_fits(dataclasses.replace(cfg, device="cuda"))


def test_a_sweep_s_runs_started_together_are_checked_against_the_memory_together(tmp_path, capsys, monkeypatch):
    """`sweep --workers 2` runs two runs side by side, and each was checked alone against the whole machine
    (check_memory_fits): runs that fit one at a time, not two together, passed and ran the machine out of memory.
    What the runs started together hold for their whole lives (their models and task data) is checked together,
    naming --workers and the settings; a finished run, which does not run, is not counted."""
    import trainer_minimal.sweep as sweep_module
    import trainer_minimal.train as train_module
    from trainer_minimal.sweep import LASTING_PARTS, check_runs_side_by_side_fit
    from trainer_minimal.train import check_memory_fits, memory_estimate

    settings = {**TINY, "train_size": 40000, "warmup_steps": 0, "max_steps": 2, "eval_every": 2}
    one = memory_estimate(make_config("grpo", **settings))
    lasting = sum(one[part][0] for part in LASTING_PARTS)
    monkeypatch.setattr(train_module, "machine_memory", lambda: lasting * 3 // 2)  # one run fits, not two
    plan = [dict(cfg=make_config("grpo", seed=seed, **settings), state="new") for seed in (0, 1, 2)]
    for p in plan:
        check_memory_fits(p["cfg"])
    # planned past this check, the sweep went on to generate its runs' data, then started them
    monkeypatch.setattr(sweep_module, "check_task_data", lambda configs: pytest.fail("planned past the memory check"))
    out = tmp_path / "sweep"
    assert main(["sweep", "--presets", "grpo", "--seeds", "0,1", "--out", str(out), "--workers", "2",
                 *tiny_flags(**settings)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainer-minimal: error: --workers 2 runs 2 runs side by side, which together need an "
                          "estimated "), err
    assert "(--train-size 40000, --val-size 50; 2 runs side by side, each its own)" in err, err
    assert err.endswith("GiB this machine has: lower --workers or the settings\n"), err
    assert not out.exists()
    # the Python API names the fields
    with pytest.raises(ValueError, match=r"^workers=3 runs 3 runs side by side, .*\(train_size=40000, val_size=50; "
                                         r"3 runs side by side, each its own\)\), more than the .* GiB this machine"):
        check_runs_side_by_side_fit(plan, 3)
    check_runs_side_by_side_fit(plan, 1)  # one at a time: each fits
    with pytest.raises(ValueError, match="workers=3 runs 2 runs side by side"):
        check_runs_side_by_side_fit([dict(plan[0], state="finished"), *plan[1:]], 3)
    check_runs_side_by_side_fit([dict(p, state="finished") for p in plan[:2]] + plan[2:], 3)
    # on a CUDA device the runs' models are in its memory, their task data in the machine's
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: types.SimpleNamespace(total_memory=2**40))
    on_cuda = [dict(p, cfg=dataclasses.replace(p["cfg"], device="cuda")) for p in plan]
    data = one["the task data"][0]
    monkeypatch.setattr(train_module, "machine_memory", lambda: data * 3 // 2)
    with pytest.raises(ValueError, match=r"^workers=2 runs 2 runs side by side, which together need an estimated "
                                         r"\S+ GiB of memory \(the task data .*\), more than the .* GiB this machine"):
        check_runs_side_by_side_fit(on_cuda, 2)
    monkeypatch.setattr(train_module, "machine_memory", lambda: data * 2)
    check_runs_side_by_side_fit(on_cuda, 2)  # the models on the device are not the machine's


@pytest.mark.parametrize("command", [["train"], ["sweep", "--presets", "grpo", "--seeds", "0"]])
def test_a_model_folder_that_cannot_be_loaded_is_refused_with_exit_2(tmp_path, capsys, command):
    """A config without weights, or no tokenizer and a vocabulary too small for the character
    tokenizer: refused like a missing folder, not a traceback after the run folder was made."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=10, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1)
    config.save_pretrained(tmp_path / "config-only")
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "small-vocab")
    # Cohere multiplies its logits by logit_scale after the head, which the trainer's own head does not redo
    transformers.CohereForCausalLM(transformers.CohereConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, logit_scale=0.0625)).save_pretrained(tmp_path / "logit-scale")
    for folder, message in (("config-only", "has a config.json but no weights"),
                            ("small-vocab", "has no tokenizer and vocab_size=10 < 21"),
                            ("logit-scale", "its config sets logit_scale=0.0625")):
        out = tmp_path / f"out-{folder}"
        assert main([*command, "--model-path", str(tmp_path / folder), "--out", str(out)]) == 2
        assert f"--model-path {str(tmp_path / folder)!r}" in (err := capsys.readouterr().err) and message in err
        assert not out.exists()


def test_an_existing_run_is_neither_overwritten_nor_resumed_with_another_model(tmp_path, warm_cache, capsys):
    train(tiny(tmp_path / "run", warm_cache, max_steps=2, eval_every=2))
    before = (tmp_path / "run" / "evals.jsonl").read_text()
    assert main(["train", "--out", str(tmp_path / "run")]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "run"), "--resume", "--d-model", "48"]) == 2
    assert "cannot change mid-run" in capsys.readouterr().err
    assert (tmp_path / "run" / "evals.jsonl").read_text() == before


def test_a_single_process_with_a_stray_rank_checks_its_run_folder(tmp_path, warm_cache, capsys, monkeypatch):
    """RANK without WORLD_SIZE (left over in the shell of a manual two-process launch, or a scheduler's):
    one process, rank 0 to setup_distributed. Its checks took it for torchrun's rank 1, which leaves the run
    folder to rank 0: a new run over an existing one trained on (exit 0), its rows appended to the old log."""
    train(tiny(tmp_path / "run", warm_cache, max_steps=2, eval_every=2))
    before = (tmp_path / "run" / "evals.jsonl").read_text()
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv("RANK", "1")
    assert main(["train", "--out", str(tmp_path / "run"), "--warmstart-cache", warm_cache,
                 *tiny_flags(max_steps=2, eval_every=2)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert (tmp_path / "run" / "evals.jsonl").read_text() == before


def test_a_single_process_with_a_stray_rank_says_how_it_was_stopped(tmp_path, monkeypatch, capsys):
    """RANK without WORLD_SIZE: one process, rank 0 to its checks and setup_distributed, but its stop line
    took it for torchrun's rank 1, which leaves the line to rank 0: Ctrl-C or SIGTERM ended it, exit 143,
    without a word of what stopped it or how to go on. Training is faked: the stop is what matters."""
    import trainer_minimal.train as train_module
    from trainer_minimal.cli import Stopped

    def stopped_after_a_checkpoint(cfg, **_):  # train(cfg, machine_checked=True)
        os.makedirs(cfg.out)
        open(os.path.join(cfg.out, "ckpt.pt"), "wb").close()
        raise Stopped(signal.SIGTERM)

    monkeypatch.setattr(train_module, "train", stopped_after_a_checkpoint)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv("RANK", "1")
    run = tmp_path / "run"
    assert main(["train", "--out", str(run), *tiny_flags()]) == 143
    assert f"stopped by SIGTERM; `trainer-minimal train --out {run} --resume` goes on" in capsys.readouterr().err


@pytest.mark.parametrize("env, said", [
    (dict(WORLD_SIZE="2"), "WORLD_SIZE=2 in the environment but no RANK"),
    (dict(WORLD_SIZE="2", RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500"), None),  # rank 0: fine so far
    (dict(WORLD_SIZE="2", RANK="2"), "RANK='2' in the environment is not one of 0 to 1 (WORLD_SIZE=2)"),
    (dict(WORLD_SIZE="2", RANK="x"), "RANK='x' in the environment is not one of 0 to 1 (WORLD_SIZE=2)"),
    (dict(WORLD_SIZE="two"), "WORLD_SIZE='two' in the environment is no number of processes"),
    (dict(WORLD_SIZE="0"), "WORLD_SIZE='0' in the environment is no number of processes")])
def test_a_launch_environment_no_launch_sets_is_refused_naming_the_variable(tmp_path, monkeypatch, capsys, env, said):
    """WORLD_SIZE above 1 without a RANK (left in a shell from a launch by hand that gave RANK on each command
    line, or a scheduler's own) crashed every run, a sweep's too, in a KeyError traceback, exit 1; a WORLD_SIZE
    or RANK that is no number said only "invalid literal for int() with base 10: 'x'". Each is refused in a
    line naming the variable and the fix, exit 2, before anything is written or any rank is waited for."""
    import trainer_minimal.train as train_module

    decided = []
    monkeypatch.setattr(train_module, "decided_by_rank_0",  # no store to wait at: what matters is what comes first
                        lambda name, decide, check_here=None: decided.append(name) or decide())
    monkeypatch.setattr(train_module, "train", lambda cfg, **_: None)
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    run = tmp_path / "run"
    code = main(["train", "--out", str(run), "--warmstart-cache", str(tmp_path / "ws"), *tiny_flags()])
    err = capsys.readouterr().err
    if said is None:
        assert code == 0 and decided == ["config"], err
        return
    assert code == 2 and err.startswith(f"trainer-minimal: error: {said}"), err
    assert "single process, unset WORLD_SIZE" in err and err.count("\n") == 1, err
    assert decided == [] and not run.exists()


@pytest.mark.parametrize("world", ["2", "two"])
def test_a_sweep_in_a_launch_environment_of_several_processes_is_refused_before_it_starts(tmp_path, monkeypatch,
                                                                                         capsys, world):
    """A sweep started where WORLD_SIZE=2, RANK and MASTER_ADDR/MASTER_PORT were set (torchrun's, a job script's
    exports, a shell kept from a launch by hand) gave them to every run it started: each took itself for rank 0
    of a two-process run and hosted the store, one waiting 5 minutes for a rank 1 that never came, the next
    crashing in a traceback ('address already in use'). A sweep starts each run as one process: it is refused,
    exit 2, naming the variable, before any folder or warm start."""
    import trainer_minimal.sweep as sweep_module

    started = []
    monkeypatch.setattr(sweep_module, "run_sweep", lambda plan, *args, **kwargs: started.append(plan) or 0)
    for name, value in (("WORLD_SIZE", world), ("RANK", "0"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500")):
        monkeypatch.setenv(name, value)
    out = tmp_path / "sweep"
    assert main(["sweep", "--presets", "grpo", "--seeds", "0", "--out", str(out), *tiny_flags()]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trainer-minimal: error: WORLD_SIZE={world!r} in the environment") and "unset WORLD_SIZE" in err
    assert err.count("\n") == 1 and not started and not out.exists()
    monkeypatch.setenv("WORLD_SIZE", "1")  # one process: a sweep as any other
    assert main(["sweep", "--presets", "grpo", "--seeds", "0", "--out", str(out), *tiny_flags()]) == 0
    assert len(started) == 1


def test_a_run_without_the_advisor_loads_neither_pandas_nor_the_sampling_libraries(tmp_path, warm_cache):
    """Every run imports forecast.io (atomic writes) and forecast.cli (a flag given twice) at its
    start, and importing any part of forecast loaded pandas through the package's front door:
    0.4-0.9 s at each run's start, though only the advisor reads a table."""
    code = ("import sys; from trainer_minimal.cli import main; code = main(sys.argv[1:]); "
            "print('loaded:', *[m for m in ('pandas', 'pymc', 'arviz', 'matplotlib') if m in sys.modules]); "
            "sys.exit(code)")
    cmd = [sys.executable, "-c", code, "train", "--out", str(tmp_path / "run"), "--warmstart-cache", warm_cache,
           "--max-steps", "2", "--eval-every", "2", *tiny_flags()]
    child = subprocess.run(cmd, env=child_env(), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines()[-1] == "loaded:"
    assert len(read_jsonl(tmp_path / "run" / "evals.jsonl")) == 1  # it ran: one evaluation, at step 2


def test_a_bad_advisor_reference_exits_2_with_one_line_and_no_traceback(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "trainer_minimal", "train", "--out", str(out), "--advisor-every", "1",
           "--advisor-reference", str(tmp_path / "typo.csv")]
    child = subprocess.run(cmd, env=child_env(), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert child.returncode == 2 and child.stdout == ""
    assert child.stderr == f"trainer-minimal: error: --advisor-reference '{tmp_path / 'typo.csv'}' does not exist " \
                           "(give a run table or a folder of runs to compare with)\n"
    assert not out.exists()


def test_a_sweep_may_name_its_own_folder_as_the_advisor_reference(tmp_path):
    from trainer_minimal.sweep import plan_sweep

    out = tmp_path / "sweep"  # made when the sweep starts, so it cannot exist yet
    (plan,) = plan_sweep("grpo", "0", str(out), dict(advisor_every=1, advisor_reference=str(out)))
    assert plan["cfg"].advisor_reference == str(out)


def folder_snapshot(folder):
    """{relative path: bytes} of every file under folder, to show that nothing was written."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_resume_of_a_run_the_advisor_stopped_does_not_train(tmp_path, warm_cache, monkeypatch, capsys):
    from forecast.early_stop import EarlyStopConfig

    advice = dict(action="stop", rule="beats_best", message="stop: P(beats best 'b-s0' by 0.01) = 0.02 < 0.1",
                  details={"converged": True})

    def trainer_advice(**kwargs):
        return types.SimpleNamespace(**advice, to_dict=lambda: advice)

    fake = types.SimpleNamespace(trainer_advice=trainer_advice, EarlyStopConfig=EarlyStopConfig)
    monkeypatch.setitem(sys.modules, "forecast.early_stop", fake)
    run = tmp_path / "run"
    assert train(tiny(run, warm_cache, max_steps=40, eval_every=2, advisor_every=1))["steps"] == 2
    before = folder_snapshot(run)
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert capsys.readouterr().out == (
        "[scalerl-s0] already stopped by the advisor at step 2: beats_best: P(beats best 'b-s0' by 0.01) = 0.02 "
        f"< 0.1 (delete {run / 'stopped.json'} to train on)\n")
    assert folder_snapshot(run) == before


def test_a_run_that_ended_mid_round_before_that_was_refused_still_resumes_to_say_so(tmp_path, warm_cache, capsys):
    """max_steps must now be a multiple of off_policy_k. A run made before (here: 3 steps at k=2, its
    config edited to say so) is still told apart: finished, or not extendable, in words."""
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=3, eval_every=1, off_policy_k=1))
    saved = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**saved, "off_policy_k": 2, "eval_every": 2}))
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert "already finished at step 3 of 3" in capsys.readouterr().out
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "6"]) == 2
    assert "inside a generation round of --off-policy-k 2 steps; the run cannot be extended exactly" in capsys.readouterr().err


def test_resume_of_a_finished_run_says_so_and_trains_no_further(tmp_path, warm_cache, capsys):
    run = tmp_path / "run"
    summary = train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    before = folder_snapshot(run)
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert capsys.readouterr().out == "[scalerl-s0] already finished at step 2 of 2 (pass a larger --max-steps to train on)\n"
    assert folder_snapshot(run) == before
    assert train(dataclasses.replace(tiny(run, warm_cache, max_steps=2, eval_every=2), resume=True)) == summary
    # killed after its last checkpoint but before summary.json: the resume writes it, as it always did
    (run / "summary.json").unlink()
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert json.loads((run / "summary.json").read_text())["steps"] == summary["steps"]
    # a stop record that is not one is refused like other bad input, before anything runs
    (run / "stopped.json").write_text("{not json")
    before = folder_snapshot(run)
    assert main(["train", "--out", str(run), "--resume"]) == 2
    assert "stopped.json: not a stop record" in capsys.readouterr().err and folder_snapshot(run) == before



@pytest.mark.parametrize("log", ["evals.jsonl", "train_log.jsonl"])
def test_resume_refuses_a_damaged_log_line_before_anything_runs(tmp_path, warm_cache, capsys, log):
    # found by fuzzing run folders: a bad line before a log's last (not a torn write) raised ValueError out of
    # repair_jsonl under the lock, a traceback and exit 1; a bare [] line, AttributeError on row.get. A line
    # that is not JSON was said without json's own account of it, which points at the place on the line
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    (run / "summary.json").unlink()  # killed before its summary: a resume goes on
    good = (run / log).read_bytes()
    for bad, said in ((b"{not json", "line 1 is not valid JSON (Expecting property name enclosed in double quotes: "
                                   "column 2); only a torn last line"),
                      (b"[]", "line 1 is not a JSON object; only a torn last line"),
                      (b"\xff\xfe", "line 1 is not UTF-8 text; only a torn last line"),
                      # a step that is not a number: TypeError comparing it, or a NaN step's row dropped unsaid
                      (b'{"step": "4"}', "row 1 has step '4', not a number"),
                      (b'{"step": NaN}', "row 1 has step nan, not a number"),
                      # found by fuzzing: math.isnan raised OverflowError on an integer of 400 digits, a traceback
                      (b'{"step": 1' + b"0" * 400 + b"}", "row 1 has step of 401 digits, not a number"),
                      # found by fuzzing: 100,000 nested brackets raised RecursionError out of the read, a traceback
                      (b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "line 1 nests arrays or objects too deep"),
                      # zeros a crash left, rows after them: 'not valid JSON (Expecting value)', as forecast said them
                      (b"\x00" * 64, "holds NUL bytes (zeros) from byte offset 0, on line 1: not text but what a crash "
                                     "leaves on some file systems where writes were lost")):
        (run / log).write_bytes(bad + b"\n" + good)
        before = folder_snapshot(run)
        capsys.readouterr()
        assert main(["train", "--out", str(run), "--resume"]) == 2
        assert f"--resume: {run / log}: {said}" in capsys.readouterr().err
        assert folder_snapshot(run) == before  # nothing written is lost: the log is not rewritten without the line
    (run / log).write_bytes(good + b'{"step": 2, "torn')  # a torn last line is a write cut off: dropped as before
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert (run / log).read_bytes() == good


def test_resume_drops_the_zeros_a_crash_left_at_a_log_s_end_and_says_so(tmp_path, warm_cache, capsys):
    """A crash of the machine leaves zeros where writes were lost, at a log's end: train_log.jsonl is not synced
    at each row, so its last rows may be lost to them. --resume dropped them in silence as a torn last line, where
    forecast refuses the same log; a resume is where they are found, and its repair is the right one (the rows after
    the checkpoint are written again), so they are still dropped, but said: the log, how many bytes, and where its
    rows now end (a train_log.jsonl whose rows end before the checkpoint's step lost rows for good)."""
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    (run / "summary.json").unlink()  # killed before its summary: a resume goes on
    evals, steps = (run / "evals.jsonl").read_bytes(), (run / "train_log.jsonl").read_bytes()
    last_row = steps.splitlines(keepends=True)[-1]
    (run / "evals.jsonl").write_bytes(evals + b"\x00" * 4096)  # a page the crash never wrote, after the last row
    (run / "train_log.jsonl").write_bytes(steps[: -len(last_row)] + b"\x00" * len(last_row))  # its last row lost
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume"]) == 0
    err = capsys.readouterr().err
    lost = "zeros (NUL bytes) a crash left where writes were lost"
    assert (f"trainer-minimal: warning: {run / 'evals.jsonl'}: dropped its last 4096 bytes, {lost}; its rows now end "
            "at step 2, and the run resumes after step 2\n") in err
    kept_step = json.loads(steps.splitlines()[-2])["step"]
    assert (f"trainer-minimal: warning: {run / 'train_log.jsonl'}: dropped its last {len(last_row)} bytes, {lost}; its "
            f"rows now end at step {kept_step}, and the run resumes after step 2\n") in err
    assert (run / "evals.jsonl").read_bytes() == evals
    assert (run / "train_log.jsonl").read_bytes() == steps[: -len(last_row)]


@pytest.mark.parametrize("edited", ["byte-order mark", "old Mac line ends"])
def test_resume_reads_a_log_an_editor_saved_as_forecast_does(tmp_path, warm_cache, capsys, edited):
    # found by fuzzing: a log saved by a Windows editor begins with a byte-order mark, and one saved with carriage
    # returns alone (old Mac line ends) has no newline; forecast reads both, and --resume refused them ("line 1 is
    # not valid JSON"; one torn line: "holds no evaluation at step 2"). Resumed, the log is rewritten in the
    # trainer's own format, as a resume rewrites any log (a torn last line, ended by no carriage return, still dropped)
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    (run / "summary.json").unlink()  # killed before its summary: a resume goes on
    good = {log: (run / log).read_bytes() for log in ("evals.jsonl", "train_log.jsonl")}
    for log in good:
        (run / log).write_bytes(b"\xef\xbb\xbf" + good[log] if edited == "byte-order mark"
                                else good[log].replace(b"\n", b"\r"))
    if edited == "old Mac line ends":
        (run / "train_log.jsonl").write_bytes(good["train_log.jsonl"].replace(b"\n", b"\r") + b'{"step": 3, "torn')
    from forecast.data import read_table

    assert len(read_table(run / "evals.jsonl")) == good["evals.jsonl"].count(b"\n")  # forecast reads it
    assert main(["train", "--out", str(run), "--resume"]) == 0, capsys.readouterr().err
    assert {log: (run / log).read_bytes() for log in good} == good


def test_resume_refuses_an_eval_log_that_lost_the_checkpoint_s_evaluation(tmp_path, warm_cache, capsys):
    # an eval row is written before its checkpoint, so the log holds the checkpoint's step. One cut short
    # (a copy or sync cut off), emptied or deleted was resumed in silence: its torn rest dropped, and the run
    # went on past a gap (steps [2, 6] of [2, 4, 6]), with a summary whose final_metric was an earlier one's
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=4, eval_every=2))
    (run / "summary.json").unlink()  # killed before its summary: a resume goes on
    log = run / "evals.jsonl"
    good = log.read_bytes()
    first_row_and_a_half = good[: good.index(b"\n") + 1 + len(good.splitlines()[1]) // 2]
    for damaged, said in ((first_row_and_a_half, "its last evaluation is at step 2"),
                          (b"", "it holds no evaluation"), (None, "it is not there")):
        log.unlink(missing_ok=True)
        if damaged is not None:
            log.write_bytes(damaged)
        before = folder_snapshot(run)
        capsys.readouterr()
        assert main(["train", "--out", str(run), "--resume", "--max-steps", "6"]) == 2
        err = capsys.readouterr().err
        assert f"--resume: {log} holds no evaluation at step 4, the step of the checkpoint {run / 'ckpt.pt'} ({said})" in err, err
        assert folder_snapshot(run) == before  # what is left of the log is kept as it was, for its owner to restore
    log.write_bytes(good)
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "6"]) == 0
    assert [row["step"] for row in read_jsonl(log)] == [2, 4, 6]


def test_resume_with_the_advisor_refuses_an_edited_eval_row_it_could_not_read(tmp_path, warm_cache, capsys):
    # an eval row edited by hand (a pass rate of 1.5) was resumed, trained, and at the advisor's next check
    # raised RunDataError out of the run: a traceback naming no file, exit 1, after the compute was spent,
    # with advisor_asking.json left for every later --resume to ask again and fail again at once
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=8, eval_every=2, advisor_every=2))  # extended, it is asked at step 8 first
    log = run / "evals.jsonl"
    good = log.read_text()
    rows = good.splitlines()
    log.write_text("\n".join([rows[0].replace('"metric": ', '"metric": 1.5, "was": '), *rows[1:]]) + "\n")
    before = folder_snapshot(run)
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "10"]) == 2
    err = capsys.readouterr().err
    assert (f"--resume: file {log}, column 'metric', run 'scalerl-s0', row 1: must lie in [0, 1], got 1.5; the advisor "
            "(--advisor-every) reads the run's evaluations") in err, err
    assert folder_snapshot(run) == before


def killed_run_with_a_log_value(tmp_path, warm_cache, log_name, index, column, value):
    """A tiny run killed before its summary (a resume goes on), its log's row `index` given `column` = value: the
    run folder and the log."""
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=4, eval_every=2))
    (run / "summary.json").unlink()
    log = run / log_name
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    rows[index][column] = value
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return run, log


def resume_refused(run, capsys) -> str:
    """--resume's stderr, having checked that it exits 2 and leaves the run folder as it was."""
    before = folder_snapshot(run)
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "6"]) == 2
    err = capsys.readouterr().err
    assert folder_snapshot(run) == before
    return err


@pytest.mark.parametrize("column, value, said", [("step", -2, "got -2: an optimizer step counts from the run's start"),
                                                 ("device_seconds", -1.5, "got -1.5: a count of device seconds counts from "
                                                                          "the run's start")])
def test_resume_refuses_a_negative_count_in_the_eval_log_as_forecast_does(tmp_path, warm_cache, capsys, column, value, said):
    # forecast refuses a negative step or device_seconds in a log; without the advisor (which reads the log with
    # forecast's checks) --resume took it, and the run went on with a log forecast would not read
    run, log = killed_run_with_a_log_value(tmp_path, warm_cache, "evals.jsonl", 0, column, value)
    from forecast.data import RunDataError, load_runs

    with pytest.raises(RunDataError, match=f"column '{column}', run 'scalerl-s0', row 1: must be >= 0, {said}"):
        load_runs(log)  # forecast refuses it
    err = resume_refused(run, capsys)
    assert f"--resume: file {log}, column '{column}', run 'scalerl-s0', row 1: must be >= 0, {said}; forecast refuses" in err, err


@pytest.mark.parametrize("column, value, said", [
    ("step", -1, "got -1: an optimizer step counts from the run's start"),
    ("compute", -5.0, "got -5: the compute spent counts from the run's start"),
    ("device_seconds", -1.5, "got -1.5: a count of device seconds counts from the run's start")])
def test_resume_refuses_a_negative_count_in_the_step_log_as_in_the_eval_log(tmp_path, warm_cache, capsys, column,
                                                                            value, said):
    # forecast reads no row of train_log.jsonl (a folder's is skipped, one named alone lacks run_id and metric), and
    # --resume checked only that its steps are numbers: a negative step, compute or device_seconds was resumed in
    # silence and kept in the rewritten log (a step of -1 is never after the checkpoint's)
    run, log = killed_run_with_a_log_value(tmp_path, warm_cache, "train_log.jsonl", 1, column, value)
    err = resume_refused(run, capsys)
    assert (f"--resume: file {log}, column '{column}', run 'scalerl-s0', row 2: must be >= 0, {said}; correct or delete "
            "that row, then resume again") in err, err


@pytest.mark.parametrize("log, column, why", [("evals.jsonl", "device_seconds", "forecast refuses such a log: "),
                                              ("train_log.jsonl", "compute", "")])
def test_resume_refuses_a_count_beyond_a_float_s_range_in_a_log_in_words(tmp_path, warm_cache, capsys, log, column, why):
    # JSON keeps 1 followed by 400 zeros as an int: the check of a log's counts before a resume (refuse_negative_counts,
    # which forecast runs only after its own check of such numbers) raised OverflowError out of --resume, a traceback
    run, path = killed_run_with_a_log_value(tmp_path, warm_cache, log, 0, column, 10**400)
    err = resume_refused(run, capsys)
    assert (f"--resume: file {path}, column '{column}', run 'scalerl-s0', row 1: value of 401 digits is beyond a float's "
            f"range (about 1.8e308), not a usable number; {why}correct or delete that row, then resume again") in err, err


@pytest.mark.parametrize("edit, said_by_forecast", [({"step": "x"}, "value 'x' is not a number"),
                                                      ({"device_seconds": -1.5}, "must be >= 0, got -1.5")])
def test_resume_names_a_bad_row_by_its_line_in_the_file_as_forecast_does(tmp_path, warm_cache, capsys, edit,
                                                                         said_by_forecast):
    # the trainer numbered a log's rows by their place among the rows, forecast by their line in the file: after a
    # blank line (a log edited by hand) --resume named the 3rd line's row 'row 2', where forecast named it 'row 3'.
    # Both name the line now, counting from 1 as an editor shows it
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=4, eval_every=2))
    (run / "summary.json").unlink()  # killed before its summary: a resume goes on
    log = run / "evals.jsonl"
    first, second = log.read_text().splitlines()
    log.write_text(first + "\n\n" + json.dumps({**json.loads(second), **edit}) + "\n")  # the bad row on line 3
    from forecast.data import RunDataError, load_runs

    with pytest.raises(RunDataError, match=said_by_forecast) as info:
        load_runs(log)
    assert info.value.row == 3  # forecast's number for it
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "6"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"row (\d+)", err).group(1) == "3", err


@pytest.mark.parametrize("advisor_every", [0, 2])
def test_resume_s_checks_read_the_eval_log_once(tmp_path, warm_cache, monkeypatch, advisor_every):
    # the checks before a resume read evals.jsonl with read_jsonl once for each of three checks (a sweep's
    # log of thousands of rows, on a network disk, read again and again before the run went on); the rows
    # read once are passed on. With the advisor on, forecast reads it once more: its rows carry their lines
    from forecast import data as forecast_data
    from trainer_minimal import train as train_module

    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    read = []

    def counted(path):
        read.append(os.path.basename(path))
        return read_numbered_jsonl(path)

    monkeypatch.setattr(train_module, "read_numbered_jsonl", counted)  # the rows with their lines, which the checks read
    monkeypatch.setattr("forecast.data.read_table", lambda path, real=forecast_data.read_table: read.append("forecast") or real(path))
    train_module.preflight(dataclasses.replace(tiny(run, warm_cache, max_steps=4, eval_every=2, advisor_every=advisor_every),
                                               resume=True))
    assert read.count("evals.jsonl") == 1 and read.count("train_log.jsonl") == 1, read
    assert read.count("forecast") == (1 if advisor_every else 0), read


def test_resume_with_the_advisor_of_a_run_stopped_twice_before_its_first_evaluation(tmp_path, warm_cache, monkeypatch):
    # a run stopped after R0 (its checkpoint at step 0) and resumed left an empty evals.jsonl (the resume
    # rewrites the log with no row kept); stopped again before its first evaluation, every later --resume
    # with the advisor on was refused: 'evals.jsonl: holds no rows; ... correct or delete that row', exit 2
    run = tmp_path / "run"

    def stopped(*args, **kwargs):
        raise Killed

    monkeypatch.setattr("trainer_minimal.train.update", stopped)
    with pytest.raises(Killed):
        train(tiny(run, warm_cache, max_steps=4, eval_every=2, advisor_every=2))
    with pytest.raises(Killed):
        main(["train", "--out", str(run), "--resume"])
    assert checkpoint_step(run / "ckpt.pt") == 0 and (run / "evals.jsonl").read_bytes() == b""
    monkeypatch.undo()
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert [row["step"] for row in read_jsonl(run / "evals.jsonl")] == [2, 4]



def test_resume_refuses_a_damaged_summary_before_anything_runs(tmp_path, warm_cache, capsys):
    # found by fuzzing run folders: a finished run's summary.json cut short or emptied made --resume raise
    # JSONDecodeError (exit 1, a traceback), whether it said "already finished" or was extended
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    good = (run / "summary.json").read_bytes()
    for damaged, said in ((good[:20], "JSONDecodeError"), (b"", "JSONDecodeError"), (b"[]", "TypeError: a JSON list, not an object")):
        (run / "summary.json").write_bytes(damaged)
        before = folder_snapshot(run)
        for extend in ([], ["--max-steps", "4"]):
            capsys.readouterr()
            assert main(["train", "--out", str(run), "--resume", *extend]) == 2
            assert f"{run / 'summary.json'}: not a run summary ({said}" in capsys.readouterr().err
            assert folder_snapshot(run) == before
    (run / "summary.json").unlink()
    (run / "summary.json").mkdir()  # a folder where the file was: refused, not IsADirectoryError
    assert main(["train", "--out", str(run), "--resume"]) == 2
    assert "summary.json: not a run summary (IsADirectoryError" in capsys.readouterr().err
    (run / "summary.json").rmdir()  # as the message says: without it the resume writes it anew
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert json.loads((run / "summary.json").read_text()) == json.loads(good)
    (run / "train_log.jsonl").unlink()
    (run / "train_log.jsonl").mkdir()
    (run / "summary.json").unlink()
    assert main(["train", "--out", str(run), "--resume"]) == 2
    assert f"--resume: {run / 'train_log.jsonl'}: cannot be read (IsADirectoryError" in capsys.readouterr().err


class Killed(BaseException):
    """What a kill -9 does to train(): it ends there, with nothing after it written."""


def fake_advisor(monkeypatch, answer):
    """Replace forecast.early_stop's trainer_advice with answer(call number, evals) -> action or a
    raised Killed; returns the list of calls (their numbers of eval rows)."""
    from forecast.early_stop import EarlyStopConfig

    calls = []

    def trainer_advice(evals, **kwargs):
        calls.append(len(evals))
        action = answer(len(calls), evals)
        advice = dict(action=action, rule="fake", message=f"{action}: call {len(calls)}", details={"converged": True})
        return types.SimpleNamespace(**advice, to_dict=lambda: advice)

    fake = types.SimpleNamespace(trainer_advice=trainer_advice, EarlyStopConfig=EarlyStopConfig)
    monkeypatch.setitem(sys.modules, "forecast.early_stop", fake)
    return calls


def test_resume_asks_the_advisor_the_question_the_kill_interrupted(tmp_path, warm_cache, monkeypatch):
    """The checkpoint is taken after an evaluation and before the (slow) advice on it; a run killed
    while being advised must be advised on that evaluation when resumed, not train on to the
    advisor's next turn with the stop it may have said unheard."""
    run = tmp_path / "run"

    def killed_at_second_question(call, evals):
        if call == 2:
            raise Killed
        return "continue"

    calls = fake_advisor(monkeypatch, killed_at_second_question)
    with pytest.raises(Killed):
        train(tiny(run, warm_cache, max_steps=40, eval_every=2, advisor_every=2))
    assert calls == [2, 4] and checkpoint_step(run / "ckpt.pt") == 8 and not (run / "summary.json").exists()

    calls = fake_advisor(monkeypatch, lambda call, evals: "stop")  # what the uninterrupted run was told
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert calls == [4]  # asked at once, about the evaluation it was killed on
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stopped"] and summary["steps"] == 8
    assert json.loads((run / "stopped.json").read_text())["step"] == 8
    assert [r["step"] for r in read_jsonl(run / "evals.jsonl")] == [2, 4, 6, 8]


def test_resume_after_the_stop_record_but_before_the_summary_keeps_the_stop(tmp_path, warm_cache, monkeypatch):
    run = tmp_path / "run"
    fake_advisor(monkeypatch, lambda call, evals: "stop")
    assert train(tiny(run, warm_cache, max_steps=40, eval_every=2, advisor_every=1))["steps"] == 2
    (run / "summary.json").unlink()  # killed between stopped.json and summary.json
    stop_record = (run / "stopped.json").read_text()
    evals = (run / "evals.jsonl").read_text()

    calls = fake_advisor(monkeypatch, lambda call, evals: "continue")
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert calls == []  # the stop stands: no training, no second opinion
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stopped"] and summary["steps"] == 2
    assert (run / "evals.jsonl").read_text() == evals and (run / "stopped.json").read_text() == stop_record


def test_deleting_the_stop_record_and_resuming_trains_on(tmp_path, warm_cache, monkeypatch):
    """The README's way to overrule a stop: delete stopped.json and --resume. The question at the
    checkpoint was answered, so it is not asked again (it would say stop again on the same data)."""
    run = tmp_path / "run"
    calls = fake_advisor(monkeypatch, lambda call, evals: "stop")
    assert train(tiny(run, warm_cache, max_steps=40, eval_every=2, advisor_every=1))["steps"] == 2
    assert calls == [1] and not (run / "advisor_asking.json").exists()
    (run / "stopped.json").unlink()
    (run / "summary.json").unlink()

    calls = fake_advisor(monkeypatch, lambda call, evals: "stop" if len(evals) >= 3 else "continue")
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert calls == [2, 3]  # trained on to its next questions, not stopped again at step 2
    assert json.loads((run / "summary.json").read_text())["steps"] == 6


def test_resume_refuses_to_change_what_defines_the_run(tmp_path, warm_cache, capsys):
    """A resumed run whose later rows carry another run_id, recipe or seed is two runs to the
    forecaster; one resumed with another learning rate is another recipe, and one resumed with
    other val_samples, temperature or gen_len measures its later rows differently. All under one
    run_id, the forecaster would read them as one curve."""
    run = tmp_path / "run"
    cfg = tiny(run, warm_cache, max_steps=2, eval_every=2)
    train(cfg)
    before = folder_snapshot(run)
    for flags, change in [(["--seed", "7"], "--seed 0 -> 7"), (["--recipe", "other"], "--recipe 'scalerl' -> 'other'"),
                          (["--run-id", "other-s0"], "--run-id 'scalerl-s0' -> 'other-s0'"),
                          (["--val-samples", "8"], "--val-samples 4 -> 8"),
                          (["--temperature", "0.7"], "--temperature 1.0 -> 0.7"),
                          (["--gen-len", "6"], "--gen-len 5 -> 6"), (["--lr", "1e-3"], "--lr 0.002 -> 0.001"),
                          (["--d-model", "48"], "--d-model 32 -> 48")]:
        capsys.readouterr()
        assert main(["train", "--out", str(run), "--resume", "--max-steps", "4", *flags]) == 2, flags
        err = capsys.readouterr().err
        assert f"started with other settings ({change}); these cannot change mid-run" in err, err
        assert folder_snapshot(run) == before
    # the same guard in the Python API, which reads the checkpoint's config rather than config.json
    with pytest.raises(ValueError, match=r"other settings than the checkpoint .*: val_samples 4 -> 8"):
        train(dataclasses.replace(cfg, resume=True, max_steps=4, val_samples=8))
    # what a resume may change: where and how long it trains, and how often it is evaluated
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "4", "--eval-every", "4", "--threads", "2"]) == 0
    assert [r["step"] for r in read_jsonl(run / "evals.jsonl")] == [2, 4]


def test_resume_of_a_folder_whose_config_json_is_another_run_s_is_refused_with_exit_2(tmp_path, warm_cache, capsys):
    """config.json copied from another run (or edited) agrees with the flags, so the CLI's comparison
    passed, and the checkpoint's own was refused only under the lock: a ValueError traceback."""
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    other = tiny(tmp_path / "other", warm_cache, preset="grpo", max_steps=2, eval_every=2)
    (run / "config.json").write_text(to_json(dataclasses.replace(other, out=str(run))) + "\n")
    before = folder_snapshot(run)
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "4"]) == 2
    err = capsys.readouterr().err
    assert f"other settings than the checkpoint in {run}: --preset 'scalerl' -> 'grpo'" in err and "Traceback" not in err
    assert f"if {run / 'config.json'} was edited or copied from another run" in err
    assert folder_snapshot(run) == before


def test_a_checkpoint_replaced_after_the_checks_of_a_resume_is_refused_with_exit_2_naming_the_flags(
        tmp_path, warm_cache, capsys, monkeypatch):
    """Another run's checkpoint copied over the run's after train()'s checks, before the run folder was locked:
    the load's own comparison refused it, naming the fields ('preset 'grpo' -> 'scalerl''), as a traceback at the
    command line. One line there, exit 2, naming the flags; the field in the Python API."""
    import shutil

    import trainer_minimal.train as train_module

    run, other = tmp_path / "run", tmp_path / "other"
    train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    train(tiny(other, warm_cache, preset="grpo", max_steps=2, eval_every=2))
    kept = (run / "ckpt.pt").read_bytes()
    locked = train_module.lock_run_folder

    def replaced_then_locked(folder):
        shutil.copyfile(other / "ckpt.pt", run / "ckpt.pt")
        return locked(folder)

    monkeypatch.setattr(train_module, "lock_run_folder", replaced_then_locked)
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trainer-minimal: error: --resume with other settings than the checkpoint in {run}: "
                          "--preset 'grpo' -> 'scalerl'; --recipe 'grpo' -> 'scalerl'; ") and err.count("\n") == 1, err
    assert "; --loss-type 'ppo' -> 'cispo'; " in err
    (run / "ckpt.pt").write_bytes(kept)
    with pytest.raises(ValueError, match=f"^resume=True with other settings than the checkpoint in {re.escape(str(run))}: "
                                         "preset 'grpo' -> 'scalerl'; "):
        train(dataclasses.replace(tiny(run, warm_cache, max_steps=2, eval_every=2), resume=True, max_steps=4))


def test_a_resume_s_refusals_name_the_fields_in_python_and_the_flags_at_the_command_line(tmp_path, warm_cache, capsys):
    """train()'s checks of a run folder said the flags in the Python API too ('--resume: ... (give --max-steps 4 or
    more)', 'pass --resume ... or choose another --out'), which a caller of train(cfg) never typed. They name the
    fields there (resume=True, max_steps=4, out), and the flags at the command line, in the same words."""
    run = tmp_path / "run"
    cfg = tiny(run, warm_cache, max_steps=4, eval_every=2)
    train(cfg)
    resumed = dataclasses.replace(cfg, resume=True)
    shortened = f"the step of the checkpoint in {run} (4); a run cannot be shortened"
    refusals = [  # (the config given to train(), what the Python API says, the command line's flags and words)
        (dataclasses.replace(resumed, max_steps=2), f"resume=True: max_steps=2 is below {shortened} (give max_steps=4 "
         "or more)", ["--resume", "--max-steps", "2"], f"--resume: --max-steps 2 is below {shortened} (give "
         "--max-steps 4 or more)"),
        (cfg, f"{run} already holds a run (evals.jsonl or ckpt.pt); pass resume=True to continue it or choose another "
         "out", None, None),  # at the command line: test_trainer_cli's run folder changed after the command's checks
        (dataclasses.replace(resumed, out=str(tmp_path / "none")), f"resume=True: no checkpoint at "
         f"{tmp_path / 'none' / 'ckpt.pt'}", None, None),  # the command line's own check says it (test_trainer_cli)
    ]
    evals = (run / "evals.jsonl").read_bytes()
    for cut_log in (False, True):
        if cut_log:  # the log cut short: a resume would go on past the gap in the curve
            (run / "evals.jsonl").write_bytes(evals.splitlines(keepends=True)[0])
            said = (f"{run / 'evals.jsonl'} holds no evaluation at step 4, the step of the checkpoint {run / 'ckpt.pt'} "
                    "(its last evaluation is at step 2): the log was cut short")
            refusals = [(dataclasses.replace(resumed, max_steps=6), f"resume=True: {said}", ["--resume", "--max-steps",
                         "6"], f"--resume: {said}")]
        for given, in_python, flags, at_the_command_line in refusals:
            with pytest.raises(ValueError) as refused:
                train(given)
            assert str(refused.value).startswith(in_python) and "--" not in str(refused.value), str(refused.value)
            if cut_log:
                assert str(refused.value).endswith("or start the run anew with another out")
            if flags:
                assert main(["train", "--out", str(run), *flags]) == 2
                err = capsys.readouterr().err
                assert err.startswith(f"trainer-minimal: error: {at_the_command_line}") and err.count("\n") == 1, err
                assert not cut_log or err.endswith("or start the run anew with another --out\n")
    assert (run / "evals.jsonl").read_bytes() == evals.splitlines(keepends=True)[0]  # nothing written


def test_resume_of_a_run_whose_config_json_was_deleted_goes_on_from_the_checkpoint_s_settings(tmp_path, warm_cache,
                                                                                                capsys):
    """With ckpt.pt there and config.json deleted, --resume said "no checkpoint (expected ckpt.pt and
    config.json)". The checkpoint holds the run's settings (those a resume is checked against): the
    resume goes on from them, says so, and writes config.json again; one that has ended writes nothing."""
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    (run / "config.json").unlink()
    before = folder_snapshot(run)
    (run / "ckpt.pt").rename(tmp_path / "ckpt.pt")
    (run / "ckpt.pt").write_bytes(b"not a checkpoint")  # then no settings to go on from: refused, naming both
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "4"]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'config.json'} is missing and {run / 'ckpt.pt'} is not a readable checkpoint" in err, err
    (tmp_path / "ckpt.pt").replace(run / "ckpt.pt")
    assert folder_snapshot(run) == before

    assert main(["train", "--out", str(run), "--resume"]) == 0  # ended at max_steps: says so, writes nothing
    err = capsys.readouterr().err
    assert f"{run / 'config.json'} is missing: the run's settings are read from its checkpoint" in err, err
    assert "the run has ended, so nothing is written" in err
    assert folder_snapshot(run) == before
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "4", "--lr", "1e-3"]) == 2
    assert "lr 0.002 -> 0.001" in capsys.readouterr().err  # still checked against the run's own settings
    assert folder_snapshot(run) == before

    assert main(["train", "--out", str(run), "--resume", "--max-steps", "4"]) == 0
    assert "config.json is written again from them" in capsys.readouterr().err
    assert [r["step"] for r in read_jsonl(run / "evals.jsonl")] == [2, 4]
    restored = from_dict(json.loads((run / "config.json").read_text()))
    assert restored == dataclasses.replace(tiny(run, warm_cache, max_steps=4, eval_every=2), resume=True)


def test_resume_from_a_damaged_checkpoint_is_refused_naming_it(tmp_path, warm_cache, capsys):
    """A ckpt.pt cut short (a full disk in an older version, a copy cut off), empty or another file,
    with config.json there: --resume was a torch traceback (RuntimeError about mmap and zip files,
    OSError), and one damaged in its weights a traceback under the run folder's lock. It is refused
    naming the file and what to do, exit 2, and nothing is written."""
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    (run / "summary.json").unlink()  # interrupted after its last checkpoint: --resume would train on
    good = (run / "ckpt.pt").read_bytes()
    capsys.readouterr()
    at = good.index(b"PK\x03\x04", len(good) // 2)  # a tensor's record in the zip: read only when the run loads it
    weights_damaged = good[:at] + bytes(30) + good[at + 30:]
    # bytes flipped inside a tensor's data (its record intact): torch.load does not check the zip's
    # CRC-32, so this resumed from weights the run never had, exit 0
    data_at = at + 30 + int.from_bytes(good[at + 26:at + 28], "little") + int.from_bytes(good[at + 28:at + 30], "little")
    weights_flipped = good[:data_at] + bytes(b ^ 0xFF for b in good[data_at:data_at + 4]) + good[data_at + 4:]
    for damaged, said in [(good[: len(good) // 2], f"not a whole checkpoint ({len(good) // 2} bytes, cut short"),
                          (b"", "empty (0 bytes)"), (b"not a torch file", "not a whole checkpoint (16 bytes"),
                          (weights_damaged, "damaged: its part data/"), (weights_flipped, "damaged: its part data/")]:
        (run / "ckpt.pt").write_bytes(damaged)
        before = folder_snapshot(run)
        assert main(["train", "--out", str(run), "--resume", "--max-steps", "4"]) == 2
        err = capsys.readouterr().err
        assert f"error: {run / 'ckpt.pt'} is {said}" in err and "Traceback" not in err, err
        assert "the run cannot be resumed from it: restore the checkpoint (from a copy), or start a new run" in err
        assert folder_snapshot(run) == before
    torch.save(dict(model={}), run / "ckpt.pt")  # a torch file, but no checkpoint of this trainer
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "4"]) == 2
    assert "is a torch file that cannot be read as a checkpoint (KeyError: 'state')" in capsys.readouterr().err
    (run / "ckpt.pt").write_bytes(good)  # restored: the run goes on
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "4"]) == 0
    assert [r["step"] for r in read_jsonl(run / "evals.jsonl")] == [2, 4]


class CountedReads(FileStandIn):
    """A file opened for reading whose reads add their bytes to counts["read"]."""

    def __init__(self, file, counts):
        super().__init__(file)
        self.counts = counts

    def read(self, *args):
        data = self.file.read(*args)
        self.counts["read"] += len(data)
        return data

    def readinto(self, buffer):
        n = self.file.readinto(buffer)
        self.counts["read"] += n or 0
        return n


def count_reads_of(path, monkeypatch):
    """{"read": bytes} read from the file at path from now on, through any file object (torch.load's and
    zipfile's: a memory-mapped load reads only the checkpoint's index and settings that way)."""
    import builtins
    import io

    counts, real_open, target = {"read": 0}, builtins.open, os.path.realpath(path)

    def counting_open(file, mode="r", *args, **kwargs):
        opened = real_open(file, mode, *args, **kwargs)
        if isinstance(file, (str, os.PathLike)) and "r" in mode and os.path.realpath(file) == target:
            return CountedReads(opened, counts)
        return opened

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(io, "open", counting_open)
    return counts


def test_a_resume_reads_its_checkpoint_once(tmp_path, warm_cache, monkeypatch):
    """--resume read ckpt.pt in full three times: for its checksums in the CLI's checks, again in train()'s
    own checks of the run folder, then to load it (into a full copy beside the model's weights). For a
    Hugging Face model's checkpoint of gigabytes that was minutes of reading. It is read once now, for its
    checksums; the weights are loaded from the file memory-mapped (3.3 times its size read before; each
    look at the checkpoint's settings reads its index, a large part of this tiny one)."""
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    (run / "summary.json").unlink()  # killed after its last checkpoint: the resume trains on
    size = (run / "ckpt.pt").stat().st_size
    counts = count_reads_of(run / "ckpt.pt", monkeypatch)
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "4"]) == 0
    assert size <= counts["read"] < 2 * size, counts["read"] / size
    # the run resumed from the checkpoint's weights and optimizer state: it is the run never stopped
    train(tiny(tmp_path / "reference", warm_cache, max_steps=4, eval_every=2))
    rows, reference = read_jsonl(run / "evals.jsonl"), read_jsonl(tmp_path / "reference" / "evals.jsonl")
    assert [(r["step"], r["metric"], r["compute"]) for r in rows] == [(r["step"], r["metric"], r["compute"]) for r in reference]


@pytest.mark.parametrize("when", ["before train()'s checks", "after train()'s checks"])
def test_a_checkpoint_damaged_after_the_cli_checked_it_is_refused(tmp_path, warm_cache, monkeypatch, capsys, when):
    """The CLI's checks read the checkpoint's checksums once; one written over after them (while rank 0
    waited for the other ranks, or before it locked the run folder) is not the file they found whole, and
    is read and refused, exit 2, where a resume without that look trained on from the changed weights."""
    import trainer_minimal.train as train_module

    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    (run / "summary.json").unlink()
    good = (run / "ckpt.pt").read_bytes()
    at = good.index(b"PK\x03\x04", len(good) // 2)  # a tensor's record, and its data after its header
    data_at = at + 30 + int.from_bytes(good[at + 26:at + 28], "little") + int.from_bytes(good[at + 28:at + 30], "little")
    flipped = good[:data_at] + bytes(b ^ 0xFF for b in good[data_at:data_at + 4]) + good[data_at + 4:]
    name, real = (("train", train_module.train) if when == "before train()'s checks"
                  else ("lock_run_folder", train_module.lock_run_folder))

    def after_damage(*args, **kwargs):
        (run / "ckpt.pt").write_bytes(flipped)  # in place: the same file, of the same size
        return real(*args, **kwargs)

    monkeypatch.setattr(train_module, name, after_damage)
    evals = (run / "evals.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "4"]) == 2
    err = capsys.readouterr().err
    assert f"error: {run / 'ckpt.pt'} is damaged: its part data/" in err and "Traceback" not in err, err
    assert (run / "evals.jsonl").read_bytes() == evals


def test_a_sweep_rerun_resumes_a_run_whose_config_json_was_deleted_from_its_checkpoint(tmp_path):
    """A sweep run folder with ckpt.pt but no config.json was planned as a new run, which `train`
    refused ("already holds a run") at every re-run: the sweep failed for good. It is resumed now,
    from the checkpoint's settings; without them (a --slim run: no checkpoint) it is refused up front."""
    from trainer_minimal.sweep import plan_sweep

    out, overrides = tmp_path / "sweep", dict(TINY, max_steps=4, eval_every=2)
    run = out / "scalerl-s0"
    run.mkdir(parents=True)
    cfg = make_config("scalerl", seed=0, out=str(run), warmstart_cache=str(out / "_warmstart"), **overrides)
    torch.save(dict(config=dataclasses.asdict(cfg)), run / "ckpt.pt")  # the settings are all plan_sweep reads
    (plan,) = plan_sweep("scalerl", "0", str(out), overrides)
    assert plan["state"] == "resume" and plan["argv"][:3] == ["--out", str(run), "--resume"]
    # the checkpoint's settings are held against the sweep's flags as config.json's were
    with pytest.raises(ValueError, match=r"scalerl-s0: lr 0.002 -> 0.001"):
        plan_sweep("scalerl", "0", str(out), {**overrides, "lr": 1e-3})
    (run / "ckpt.pt").write_bytes(b"cut short")
    with pytest.raises(ValueError, match=r"config.json is missing and .*ckpt.pt is not a readable checkpoint"):
        plan_sweep("scalerl", "0", str(out), overrides)
    (run / "ckpt.pt").unlink()
    (run / "summary.json").write_text("{}\n")
    with pytest.raises(ValueError, match=r"has a summary.json but neither config.json nor ckpt.pt"):
        plan_sweep("scalerl", "0", str(out), overrides)


def test_resume_refuses_a_max_steps_below_the_checkpoint(tmp_path, warm_cache, capsys):
    """It wrote summary.json for the checkpoint's steps and rewrote config.json's max_steps to the
    smaller number, so the folder claimed a run it was not."""
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=4, eval_every=2))
    (run / "summary.json").unlink()  # interrupted after its last checkpoint
    before = folder_snapshot(run)
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "2"]) == 2
    assert ("--resume: --max-steps 2 is below the step of the checkpoint" in capsys.readouterr().err)
    assert folder_snapshot(run) == before


def test_resume_with_the_advisor_off_drops_its_settings(tmp_path):
    """--advisor-every 0 on a run that had advisor rules was refused as 'advisor_rules is set but
    advisor_every=0' until --advisor-rules '' was given as well."""
    from trainer_minimal.cli import build_parser, resolve_train_config
    from trainer_minimal.config import to_json

    run = tmp_path / "run"
    run.mkdir()
    (run / "ckpt.pt").write_bytes(b"")  # resolve_train_config reads only config.json
    (run / "config.json").write_text(to_json(make_config(out=str(run), advisor_every=1, advisor_rules="target=0.5",
                                                         advisor_priors="b_mu=0.5")))
    args = build_parser().parse_args(["train", "--out", str(run), "--resume", "--advisor-every", "0"])
    cfg = resolve_train_config(args)
    assert (cfg.advisor_every, cfg.advisor_rules, cfg.advisor_priors) == (0, "", "")
    args = build_parser().parse_args(["train", "--out", str(run), "--resume", "--advisor-rules", "target=0.6"])
    assert resolve_train_config(args).advisor_rules == "target=0.6"  # the advisor's settings may change


@pytest.mark.parametrize("flags, said", [
    # asked at every 4th evaluation (step 64) but never at max_steps: never asked at all
    (["--advisor-every", "4", "--eval-every", "16", "--max-steps", "64"],
     "--advisor-every 4 with --eval-every 16 and --max-steps 64: the advisor would first be asked at step 64, and "
     "it is not asked at or past --max-steps"),
    # asked after evaluations 1-3, all before the rules start (min_evals 4)
    (["--advisor-every", "1", "--eval-every", "10", "--max-steps", "40"],
     "the advisor is last asked at step 30, after 3 evaluation(s), and its rules start at min_evals=4"),
    (["--advisor-every", "1", "--eval-every", "10", "--max-steps", "50", "--advisor-rules", "min_evals=5"],
     "its rules start at min_evals=5, so it can never stop this run"),
    (["--advisor-every", "1", "--eval-every", "10", "--max-steps", "50"], None),  # asked after 4 evaluations
    (["--advisor-every", "2", "--eval-every", "2", "--max-steps", "18"], None),
])
@pytest.mark.parametrize("command", [["train"], ["sweep", "--presets", "grpo,dapo", "--seeds", "0,1"]])
def test_an_advisor_that_can_never_stop_the_run_is_said_when_it_starts(tmp_path, monkeypatch, capsys, flags, said,
                                                                       command):
    """--advisor-every too large for --eval-every and --max-steps did nothing, without a word."""
    import trainer_minimal.sweep
    import trainer_minimal.train

    started = []
    monkeypatch.setattr(trainer_minimal.train, "train", lambda cfg, **_: started.append(cfg))
    monkeypatch.setattr(trainer_minimal.sweep, "run_sweep", lambda plan, *args, **kwargs: started.append(plan) or 0)
    assert main([*command, *flags, "--out", str(tmp_path / "out")]) == 0
    assert len(started) == 1  # a warning, not a refusal: the run starts
    err = capsys.readouterr().err
    if said is None:
        assert "warning" not in err
    else:
        assert said in err and err.count("warning") == 1  # once for a sweep, not once per run
        if command == ["train"]:  # the flags at the command line, the fields in the Python API
            from trainer_minimal.config import advisor_idle_note

            settings = dict(zip(flags[::2], flags[1::2], strict=True))
            assert advisor_idle_note(started[0]).startswith(
                f"advisor_every={settings['--advisor-every']} with eval_every={settings['--eval-every']} and "
                f"max_steps={settings['--max-steps']}: ")


def test_an_advisor_that_can_never_stop_the_run_is_said_when_it_starts_not_on_each_resume(tmp_path, warm_cache,
                                                                                          capsys):
    """The warning is for the command that starts the run; a resume of it, here of the run it ended, says only
    that the run is finished (kills the mutant that warned again on every --resume)."""
    run = tmp_path / "run"
    flags = ["--out", str(run), *tiny_flags(max_steps=2, eval_every=2), "--advisor-every", "4"]
    assert main(["train", *flags]) == 0
    assert "warning: --advisor-every 4 with --eval-every 2 and --max-steps 2" in capsys.readouterr().err
    assert main(["train", "--out", str(run), "--resume"]) == 0
    said = capsys.readouterr()
    assert said.err == ""
    assert said.out == "[scalerl-s0] already finished at step 2 of 2 (pass a larger --max-steps to train on)\n"


@pytest.mark.parametrize("text, said", [
    ('{"lr": ', "not a readable run config (JSONDecodeError"),  # cut short
    ('{"lr": "2e-3"}', "lr='2e-3' is not a number"),  # hand-edited: quoted
    ('{"max_steps": 8.5}', "max_steps=8.5 is not a whole number"),
    ('{"zero_var_filter": "no"}', "zero_var_filter='no' is not true or false"),
    ("[1, 2]", "not a run config (a JSON object of settings), but a list"),
])
@pytest.mark.parametrize("command", [["train", "--resume"], ["sweep", "--presets", "scalerl", "--seeds", "0"]])
def test_a_damaged_config_json_is_refused_naming_the_file(tmp_path, capsys, text, said, command):
    """--resume and a sweep re-run read the run's config.json: a damaged or hand-edited one was a
    traceback (TypeError, AttributeError), or JSON's bare message naming no file."""
    run = tmp_path / "out" / "scalerl-s0" if command[0] == "sweep" else tmp_path / "out"
    run.mkdir(parents=True)
    (run / "ckpt.pt").write_bytes(b"")  # resolve_train_config and plan_sweep read only config.json
    (run / "config.json").write_text(text)
    assert main([*command, "--out", str(tmp_path / "out")]) == 2
    assert f"{run / 'config.json'}: {said}" in capsys.readouterr().err
    assert (run / "config.json").read_text() == text


def test_a_second_process_is_refused_while_a_run_is_training_in_its_folder(tmp_path, warm_cache, capsys):
    """A sweep rerun after its parent was killed -9 resumes each unfinished run while the orphaned
    child may still be training it: two writers interleaved evals.jsonl and raced on ckpt.pt.tmp."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "trainer_minimal", "train", "--out", str(run), "--warmstart-cache", warm_cache,
           "--max-steps", "4000", "--eval-every", "2", *tiny_flags()]
    child = subprocess.Popen(cmd, env=child_env(), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while len(read_jsonl(run / "evals.jsonl")) < 3:
            assert child.poll() is None, child.stderr.read().decode()
            assert time.time() < deadline, "the child wrote no evaluations in time"
            time.sleep(0.05)
        capsys.readouterr()
        # the child's own --max-steps: a smaller one raced the child past it and was refused for that instead
        assert main(["train", "--out", str(run), "--resume", "--max-steps", "4000"]) == 2
        assert f"another process (pid {child.pid}) is training in this run folder" in capsys.readouterr().err
        assert child.poll() is None  # the first run trains on, alone
    finally:
        child.kill()
        child.wait()
    steps = [r["step"] for r in read_jsonl(run / "evals.jsonl")]
    assert steps == list(range(2, 2 * len(steps) + 1, 2))
    # the lock dies with its process (kill -9 included): the run can be resumed now
    end = checkpoint_step(run / "ckpt.pt") + 2
    assert main(["train", "--out", str(run), "--resume", "--max-steps", str(end)]) == 0
    assert [r["step"] for r in read_jsonl(run / "evals.jsonl")][-1] == end


def test_python_m_trainer_minimal_train_is_the_train_command(tmp_path):
    """`python -m trainer_minimal.train ...` used to import the module and exit 0 doing nothing."""
    cmd = [sys.executable, "-m", "trainer_minimal.train", "--help"]
    child = subprocess.run(cmd, env=child_env(), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0 and "--max-steps" in child.stdout and "--advisor-every" in child.stdout
    cmd = [sys.executable, "-m", "trainer_minimal.train", "--out", str(tmp_path / "run"), "--group-size", "1"]
    child = subprocess.run(cmd, env=child_env(), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert child.returncode == 2 and "--group-size must be >= 2" in child.stderr


def test_train_help_shows_the_default_of_every_on_off_flag(capsys):
    assert main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "drop prompts whose samples all got the same reward (default on)" in text
    assert "compute the LM head in fp32 (matters under bfloat16) (default on)" in text
    assert "continue from the run folder's checkpoint (refused when there is none) (default off)" in text
    assert "a --preset changes some of them (`trainer-minimal presets` lists what each one sets)" in text
    # where the names are, what else is evaluated, what a reference may be: said in the flags' own words
    assert "--preset STR named recipe whose overrides apply (`trainer-minimal presets` lists them)" in text
    assert "every E optimizer steps, and at max_steps (default 16)" in text
    assert "run table or folder of runs (a sweep) the advisor compares with" in text


def save_tiny_hf_model(folder, arch, eos_token="<eos>", model_vocab_size=None, n_positions=64):
    """A tiny causal LM built from a transformers config (nothing downloaded), saved to a folder.

    llama: no tokenizer files, so the trainer uses its character tokenizer;
    gpt2: saved with a character-level Hugging Face tokenizer, so the trainer uses the HF adapter
    (eos_token None: one without; model_vocab_size: the model's, when not the tokenizer's;
    n_positions: its learned positions).
    """
    transformers = pytest.importorskip("transformers")
    vocab_size = CharTokenizer().vocab_size
    if arch == "llama":
        save_untrained_llama(folder, hidden_size=32, n_layer=1, n_head=2)
        return
    torch.manual_seed(0)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    specials = dict(bos_token="<bos>", pad_token="<pad>", **({"eos_token": eos_token} if eos_token else {}))

    tokenizer = Tokenizer(models.WordLevel(dict(zip(CharTokenizer().itos, range(vocab_size), strict=True)),
                                           unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")  # one token per character
    tokenizer.decoder = decoders.Fuse()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, **specials).save_pretrained(folder)
    config = transformers.GPT2Config(vocab_size=model_vocab_size or vocab_size, n_embd=32, n_layer=1, n_head=2,
                                     n_positions=n_positions, bos_token_id=1, eos_token_id=2)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)


def test_a_folder_with_only_a_sentencepiece_tokenizer_is_refused_not_run_on_characters(tmp_path, capsys):
    """A Llama-2 style folder (tokenizer.model, no tokenizer.json or tokenizer_config.json) fell back to
    the character tokenizer: a 32k-vocabulary model trained on character ids, silently."""
    save_tiny_hf_model(tmp_path / "model", "llama")
    (tmp_path / "model" / "tokenizer.model").write_bytes(b"\x0a\x0b sentencepiece model proto")
    out = tmp_path / "out"
    assert main(["train", "--model-path", str(tmp_path / "model"), "--out", str(out),
                 *tiny_flags(warmup_steps=0, max_steps=2, eval_every=2)]) == 2
    assert "has tokenizer files (tokenizer.model) but no tokenizer.json or tokenizer_config.json" in capsys.readouterr().err
    assert not out.exists()


def test_a_tokenizer_the_loop_cannot_use_is_refused_with_exit_2(tmp_path, capsys):
    """Without an end-of-sequence token the loop crashed at padding (pad id None) or, with a pad token,
    sampled answers that never end; with ids beyond the model's vocabulary it crashed at the embedding
    lookup (a device-side assert on CUDA); a tokenizer that does not load gave transformers' own error.
    Each is refused in words before the run folder is made."""
    save_tiny_hf_model(tmp_path / "no-eos", "gpt2", eos_token=None)
    save_tiny_hf_model(tmp_path / "small-vocab", "gpt2", model_vocab_size=16)
    save_tiny_hf_model(tmp_path / "unloadable", "llama")  # tokenizer_config.json beside a tokenizer.model
    (tmp_path / "unloadable" / "tokenizer.model").write_bytes(b"\x0a\x0b not a sentencepiece model")
    (tmp_path / "unloadable" / "tokenizer_config.json").write_text('{"tokenizer_class": "LlamaTokenizer"}')
    for folder, message in (("no-eos", "its tokenizer has no end-of-sequence token (eos_token)"),
                            ("small-vocab", "its tokenizer has ids up to 20, beyond the model's vocab_size=16"),
                            ("unloadable", "its tokenizer could not be loaded")):
        out = tmp_path / f"out-{folder}"
        assert main(["train", "--model-path", str(tmp_path / folder), "--out", str(out),
                     *tiny_flags(warmup_steps=0, max_steps=2, eval_every=2)]) == 2
        assert f"--model-path {str(tmp_path / folder)!r}: {message}" in capsys.readouterr().err
        assert not out.exists()


def test_a_hugging_face_model_s_learned_positions_are_its_limit_checked_before_any_compute(tmp_path, capsys,
                                                                                          warm_cache):
    """A GPT-2 style model has n_positions learned positions: past them the run crashed at its position
    lookup (IndexError: index out of range in self, exit 1, a run folder left behind). Sorting at size 3: a
    prompt of 8 tokens, so gen_len=24 fills a model of 32 positions and 25 passes them; at size 12 a prompt
    and its answer with <eos> are 32 tokens, at 13 they are 34 (each one past crashed, found by hand). A rotary model (Llama) has no learned
    positions: its max_position_embeddings is no limit, and sequences past it are not refused."""
    from trainer_minimal.tasks import build_datasets
    from trainer_minimal.train import check_sequences_fit

    transformers = pytest.importorskip("transformers")
    save_tiny_hf_model(tmp_path / "gpt2", "gpt2", n_positions=32)
    save_untrained_llama(tmp_path / "llama", hidden_size=32, n_layer=1, n_head=2)
    with open(tmp_path / "llama" / "config.json") as f:
        assert json.load(f)["max_position_embeddings"] == 64

    def check(model, **settings):
        cfg = make_config("scalerl", tasks="sort", train_size=40, val_size=10, model_path=str(tmp_path / model),
                          **settings)
        check_sequences_fit(cfg, *build_datasets(cfg))

    limit = f"the model in model_path={str(tmp_path / 'gpt2')!r} has 32 learned positions (its n_positions=32)"
    check("gpt2", max_size=3, gen_len=24, warmup_steps=0)
    with pytest.raises(ValueError, match=re.escape(f"{limit}, and the longest sequence would be 33 tokens (a "
                                                   "prompt of 8, then gen_len=25 generated)")):
        check("gpt2", max_size=3, gen_len=25, warmup_steps=0)
    check("gpt2", max_size=12, gen_len=1)
    with pytest.raises(ValueError, match=r"would be 34 tokens \(a prompt and its answer with <eos>, in the warm start"):
        check("gpt2", max_size=13, gen_len=1)
    check("llama", max_size=29, gen_len=60)
    # OPT's table has two rows before position 0: 34 rows, 32 positions (it crashed at gen_len=25 too)
    transformers.OPTForCausalLM(transformers.OPTConfig(
        vocab_size=CharTokenizer().vocab_size, hidden_size=16, ffn_dim=32, num_hidden_layers=1, num_attention_heads=2,
        max_position_embeddings=32, word_embed_proj_dim=16)).save_pretrained(tmp_path / "opt")
    check("opt", max_size=3, gen_len=24, warmup_steps=0)
    with pytest.raises(ValueError, match=r"has 32 learned positions \(its max_position_embeddings=32\), and the longest "
                                         r"sequence would be 33 tokens"):
        check("opt", max_size=3, gen_len=25, warmup_steps=0)
    # from the command line: exit 2, nothing made; a run that fills the positions runs
    out = tmp_path / "out"
    assert main(["train", "--model-path", str(tmp_path / "gpt2"), "--out", str(out),
                 *tiny_flags(tasks="sort", max_size=3, gen_len=25, warmup_steps=0, max_steps=2, eval_every=2)]) == 2
    # the command line names the flag, --model-path, where the Python API names the field
    assert (f"the model in --model-path {str(tmp_path / 'gpt2')!r} has 32 learned positions (its n_positions=32), "
            "and the longest sequence would be 33 tokens") in capsys.readouterr().err
    assert not out.exists()
    summary = train(tiny(out, warm_cache, model_path=str(tmp_path / "gpt2"), tasks="sort", max_size=3, gen_len=24,
                         warmup_steps=0, max_steps=2, eval_every=2, zero_var_filter=False))
    assert summary["steps"] == 2


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_hugging_face_tiny_model_runs_a_step_on_cpu(tmp_path, warm_cache, arch):
    save_tiny_hf_model(tmp_path / arch, arch)
    _, tokenizer = load_hf_policy(str(tmp_path / arch))
    assert isinstance(tokenizer, CharTokenizer if arch == "llama" else HFTokenizer)
    assert tokenizer.decode(tokenizer.encode("r123=")[1:]) == "r123="
    summary = train(tiny(tmp_path / "run", warm_cache, model_path=str(tmp_path / arch), warmup_steps=5,
                         max_steps=2, eval_every=2, zero_var_filter=False, dtype="bfloat16"))
    assert summary["steps"] == 2
    log = read_jsonl(tmp_path / "run" / "train_log.jsonl")
    assert all(r["grad_norm"] is not None and r["trained_tokens"] > 0 for r in log)
    (row,) = read_jsonl(tmp_path / "run" / "evals.jsonl")
    assert row["compute"] > 0 and 0 <= row["metric"] <= 1 and row["n_params"] > 0


def test_the_trainer_sees_a_softcapped_model_s_own_logits(tmp_path):
    """Gemma 2 squashes its logits after the head (tanh(logits / cap) * cap); the trainer applies the head
    itself, so it must do the same, with and without the fp32 head."""
    transformers = pytest.importorskip("transformers")
    config = transformers.Gemma2Config(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                       final_logit_softcapping=2.0)
    torch.manual_seed(0)
    model = transformers.Gemma2ForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.normal_(0, 1.0)  # logits well beyond the cap, so it bites
    model.save_pretrained(tmp_path / "gemma2")
    model, _ = load_hf_policy(str(tmp_path / "gemma2"))
    ids = torch.tensor([[3, 9, 4, 1, 7], [0, 0, 3, 9, 4]])
    mask = (torch.arange(5) >= torch.tensor([[0], [2]])).long()
    with torch.no_grad():
        own = model(input_ids=ids[:1], attention_mask=mask[:1]).logits
        assert own.abs().max() > 1.5  # near the cap: without it the trainer's logits would reach ~30
        for fp32 in (True, False):
            logits, _ = forward_logits(model, ids, mask, fp32_logits=fp32)
            torch.testing.assert_close(logits[:1], own, rtol=1e-5, atol=1e-5)
            assert logits.abs().max() <= 2.0


def test_a_model_that_changes_its_logits_after_the_head_is_refused_when_loaded(tmp_path):
    """The load-time check: the model's own logits against the trainer's. Granite divides its logits by
    logits_scaling (check_model_path refuses the field before a run; this is the net behind it)."""
    transformers = pytest.importorskip("transformers")
    transformers.GraniteForCausalLM(transformers.GraniteConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, logits_scaling=4.0)).save_pretrained(tmp_path / "granite")
    with pytest.raises(ValueError, match="the model's own logits differ from the trainer's.*'logits_scaling': 4.0"):
        load_hf_policy(str(tmp_path / "granite"))


def saved_model_that_scales_its_logits(folder):
    """A tiny Granite model saved in `folder` (returned as str), whose forward scales the logits after the head
    (logits_scaling): check_model_path refuses it from its config, model.check_own_logits as it is loaded."""
    transformers = pytest.importorskip("transformers")
    transformers.GraniteForCausalLM(transformers.GraniteConfig(
        vocab_size=CharTokenizer().vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, logits_scaling=4.0)).save_pretrained(folder)
    return str(folder)


def test_a_model_refused_when_the_run_loads_it_is_said_in_one_line_naming_the_flag(tmp_path, monkeypatch, capsys):
    """The load-time check of the model's own logits (the net behind check_model_path, let through here) said
    "model_path='...': the model's own logits differ ..." at the command line, as a traceback from inside train().
    One line, exit 2, naming --model-path; the field in the Python API."""
    import trainer_minimal.train as train_module

    granite = saved_model_that_scales_its_logits(tmp_path / "granite")
    monkeypatch.setattr(train_module, "check_model_path", lambda cfg: None)  # which refuses logits_scaling first
    run = tmp_path / "run"
    assert main(["train", "--out", str(run), "--model-path", granite, "--warmstart-cache", str(tmp_path / "cache"),
                 *tiny_flags()]) == 2
    err = capsys.readouterr().err  # after transformers' progress bars
    assert err.endswith("\n") and "Traceback" not in err, err
    assert err.splitlines()[-1].startswith(f"trainer-minimal: error: --model-path {granite!r}: the model's own logits "
                                           "differ from the trainer's "), err
    assert not (run / "ckpt.pt").exists()
    with pytest.raises(ValueError, match=f"^model_path={re.escape(repr(granite))}: the model's own logits differ"):
        train(tiny(tmp_path / "api", str(tmp_path / "cache"), model_path=granite))


def test_a_model_refused_as_a_sweep_builds_its_warm_start_is_said_in_one_line_naming_the_flag(tmp_path, monkeypatch,
                                                                                               capsys):
    """A sweep builds its runs' warm starts in its own process (sweep.prepare_warm_starts): the model's load-time
    check of its own logits refused it there as a traceback of the sweep's, naming the field model_path. One line,
    exit 2, naming --model-path, before any run starts; the field in the Python API."""
    import trainer_minimal.sweep as sweep_module

    granite = saved_model_that_scales_its_logits(tmp_path / "granite")
    monkeypatch.setattr(sweep_module, "check_model_path", lambda cfg: None)  # which refuses logits_scaling first
    out = tmp_path / "sweep"
    assert main(["sweep", "--presets", "grpo", "--seeds", "0", "--out", str(out), "--model-path", granite,
                 "--warmstart-cache", str(tmp_path / "cache"), *tiny_flags()]) == 2
    err = capsys.readouterr().err
    assert err.endswith("\n") and "Traceback" not in err, err
    assert err.splitlines()[-1].startswith(f"trainer-minimal: error: --model-path {granite!r}: the model's own logits "
                                           "differ from the trainer's "), err
    assert not list(out.glob("*/evals.jsonl"))  # no run started
    plan = sweep_module.plan_sweep("grpo", "0", str(tmp_path / "api"),
                                   {**TINY, "model_path": granite, "warmstart_cache": str(tmp_path / "cache")})
    with pytest.raises(ValueError, match=f"^model_path={re.escape(repr(granite))}: the model's own logits differ"):
        sweep_module.prepare_warm_starts([p["cfg"] for p in plan])


def test_the_warm_start_cache_knows_a_model_folder_replaced_by_another_of_the_same_shape(tmp_path):
    """Keyed by model_path alone, another model saved into the same folder (same config.json, same file
    sizes) loaded the first one's warm start over its own weights, silently."""
    pytest.importorskip("transformers")
    cfg = tiny(tmp_path / "run", str(tmp_path / "cache"), model_path=str(tmp_path / "model"))
    save_untrained_llama(tmp_path / "model", hidden_size=32, n_layer=1, n_head=2, seed=0)
    first = warm_start_path(cfg)
    assert warm_start_path(cfg) == first
    save_untrained_llama(tmp_path / "model", hidden_size=32, n_layer=1, n_head=2, seed=1)
    assert warm_start_path(cfg) != first
    # the tiny GPT's key is as it was: the shipped sweep's runs name the warm start they started from
    run = os.path.join(REPO, "examples", "trainer_sweep", "grpo-s0")
    with open(os.path.join(run, "config.json")) as f:
        shipped = from_dict(json.load(f))
    with open(os.path.join(run, "baseline.json")) as f:
        assert warm_start_path(shipped) == json.load(f)["warm_start"]


def test_bfloat16_with_and_without_fp32_head(tmp_path, warm_cache):
    for fp32 in (True, False):
        out = tmp_path / f"fp32-{fp32}"
        summary = train(tiny(out, warm_cache, dtype="bfloat16", fp32_logits=fp32, warmup_steps=0,
                             max_steps=2, eval_every=2, zero_var_filter=False))
        assert summary["steps"] == 2
        assert all(r["grad_norm"] is not None for r in read_jsonl(out / "train_log.jsonl"))


def test_sweep_runs_recipes_in_parallel_and_writes_runs_csv(tmp_path, warm_cache, monkeypatch, capsys):
    pd = pytest.importorskip("pandas")
    monkeypatch.setenv("PYTHONPATH", REPO)  # the runs are child processes of this one
    out = tmp_path / "sweep"
    argv = ["sweep", "--presets", "grpo,cispo", "--seeds", "0", "--out", str(out), "--workers", "2",
            "--warmstart-cache", warm_cache, "--max-steps", "4", "--eval-every", "2", *tiny_flags()]
    assert main(argv) == 0
    table = pd.read_csv(out / "runs.csv")
    assert set(table["run_id"]) == {"grpo-s0", "cispo-s0"} and len(table) == 4
    assert list(table.columns[:9]) == ["run_id", "recipe", "seed", "compute", "compute_unit", "metric", "n_eval",
                                       "step", "device_seconds"]
    assert (table["compute"] > 0).all() and set(table["compute_unit"]) == {"flops"}
    assert set(table["loss_type"]) == {"ppo", "cispo"}
    # each start line is a command that can be pasted: the interpreter first, then the run's flags
    started = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[sweep] start grpo-s0: ")]
    assert len(started) == 1 and shlex.split(started[0].split(": ", 1)[1])[:4] == [sys.executable, "-m", "trainer_minimal", "train"]
    # running it again skips the finished runs and rewrites the same table
    capsys.readouterr()
    assert main(argv) == 0
    assert capsys.readouterr().out.count("finished, skipped") == 2
    pd.testing.assert_frame_equal(pd.read_csv(out / "runs.csv"), table)
    # a re-run with another recipe knob, or without the --max-steps the runs were started with, would
    # skip or resume them under their old settings, so the table would mix two: it is refused; so is a
    # smaller --max-steps (runs grow, never shrink: it skipped these runs, ended at 4, as if done at 2)
    at = argv.index("--max-steps")
    without_max_steps = argv[:at] + argv[at + 2:]  # the default, 640, is not what the runs were started with
    other_lr = [*argv]
    other_lr[argv.index("--lr") + 1] = "1e-3"  # replaced, not repeated: a flag given twice is refused on its own
    shorter = [*argv]
    shorter[at + 1] = "2"
    for rerun, message in [(other_lr, "--lr 0.002 -> 0.001"), (without_max_steps, "--max-steps 4 -> 640"),
                           (shorter, "--max-steps 4 -> 2")]:
        assert main(rerun) == 2
        err = capsys.readouterr().err
        assert f"{out / 'grpo-s0'}: {message}" in err and f"{out / 'cispo-s0'}: {message}" in err, err
    pd.testing.assert_frame_equal(pd.read_csv(out / "runs.csv"), table)
    # an explicit, larger --max-steps extends every run from its checkpoint
    assert main([*without_max_steps, "--max-steps", "6"]) == 0
    longer = pd.read_csv(out / "runs.csv")
    assert sorted(longer["step"]) == [2, 2, 4, 4, 6, 6]
    pd.testing.assert_frame_equal(longer[longer["step"] <= 4].reset_index(drop=True), table)


def test_ctrl_c_says_how_to_go_on_instead_of_a_traceback(tmp_path, monkeypatch, capsys):
    """Ctrl-C in `train` or `sweep` printed a KeyboardInterrupt traceback (from every process of a
    sweep); it now says how to resume, exit 130. Training is faked: the interrupt is what matters."""
    import trainer_minimal.sweep as sweep_module
    import trainer_minimal.train as train_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    def interrupted_after_a_checkpoint(cfg, **_):  # train(cfg, machine_checked=True)
        os.makedirs(cfg.out)
        open(os.path.join(cfg.out, "ckpt.pt"), "wb").close()
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "train", interrupted_after_a_checkpoint)
    monkeypatch.setattr(sweep_module, "run_sweep", interrupted)
    run = tmp_path / "run"
    assert main(["train", "--out", str(run), *tiny_flags()]) == 130
    assert f"interrupted; `trainer-minimal train --out {run} --resume` goes on" in capsys.readouterr().err
    assert main(["sweep", "--presets", "grpo", "--seeds", "0", "--out", str(tmp_path / "sweep"), *tiny_flags()]) == 130
    assert "interrupted; the same command again resumes the sweep" in capsys.readouterr().err


def test_ctrl_c_before_the_first_checkpoint_does_not_advise_a_resume_that_is_refused(tmp_path, warm_cache, capsys,
                                                                                      monkeypatch):
    """Interrupted in its warm start or its step-0 evaluation, a run has no checkpoint yet: the Ctrl-C line
    said `--resume` goes on, and that --resume was refused (exit 2, "no checkpoint") without saying what
    would go on. Both now say that the command that started the run starts it again, and it does."""
    import trainer_minimal.train as train_module

    real_evaluate = train_module.evaluate

    def interrupted_evaluation(*args, **kwargs):
        raise KeyboardInterrupt

    run = tmp_path / "run"
    argv = ["train", "--out", str(run), "--warmstart-cache", warm_cache, "--max-steps", "2", "--eval-every", "2",
            *tiny_flags()]
    monkeypatch.setattr(train_module, "evaluate", interrupted_evaluation)  # the step-0 evaluation (R0)
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "interrupted before the run's first checkpoint (nothing to resume); the same command again starts it" in err
    assert "--resume" not in err and not (run / "ckpt.pt").exists()
    assert main(["train", "--out", str(run), "--resume"]) == 2
    assert "it was stopped before its first checkpoint: the command that started it" in capsys.readouterr().err
    monkeypatch.setattr(train_module, "evaluate", real_evaluate)
    assert main(argv) == 0
    assert [r["step"] for r in read_jsonl(run / "evals.jsonl")] == [2]
    (run / "ckpt.pt").unlink()  # as a sweep's --slim leaves a finished run: not one to start again
    assert main(["train", "--out", str(run), "--resume"]) == 2
    assert "before its first checkpoint" not in capsys.readouterr().err


def test_a_sweep_rerun_reports_a_run_with_a_damaged_checkpoint_as_refused_and_runs_the_others(
        tmp_path, warm_cache, monkeypatch, capsys):
    """A sweep run folder with its config.json and a ckpt.pt cut short is resumed by the re-run, and
    its `train` refuses it: the sweep said only 'exit 2' and 'rerun to resume', the reason (before,
    a traceback) left in the run's stdout.log. It now says why, and the other runs train."""
    monkeypatch.setenv("PYTHONPATH", REPO)  # the runs are child processes of this one
    out, overrides = tmp_path / "sweep", dict(TINY, max_steps=2, eval_every=2)
    damaged = out / "scalerl-s0"
    damaged.mkdir(parents=True)
    cfg = make_config("scalerl", seed=0, out=str(damaged), warmstart_cache=warm_cache, **overrides)
    (damaged / "config.json").write_text(to_json(cfg) + "\n")
    (damaged / "ckpt.pt").write_bytes(b"PK\x03\x04 cut short")  # a zip file's first bytes, no more
    (damaged / "stdout.log").write_text("trainer-minimal: error: an earlier attempt's refusal\n")
    argv = ["sweep", "--presets", "scalerl", "--seeds", "0,1", "--out", str(out), "--warmstart-cache", warm_cache,
            "--max-steps", "2", "--eval-every", "2", *tiny_flags()]
    assert main(argv) == 1
    said = capsys.readouterr()
    refusal = (f"{damaged / 'ckpt.pt'} is not a whole checkpoint (14 bytes, cut short, or not a torch file), so the "
               "run cannot be resumed from it")
    assert "[sweep] done  scalerl-s0: exit 2 after" in said.out and refusal in said.out, said.out
    assert f"[sweep]   scalerl-s0 was refused: {refusal}" in said.err and "Traceback" not in said.err + said.out
    assert "earlier attempt" not in said.out + said.err  # only this attempt's own refusal
    assert "[sweep] done  scalerl-s1: exit 0" in said.out
    assert [r["step"] for r in read_jsonl(out / "scalerl-s1" / "evals.jsonl")] == [2]
    assert not (damaged / "evals.jsonl").exists() and (damaged / "ckpt.pt").read_bytes() == b"PK\x03\x04 cut short"


def _resumed_runs_plan(tmp_path, n: int) -> list[dict]:
    """A sweep plan of n runs r0, r1, ... to resume, for run_sweep with its runs faked by Popen."""
    return [dict(cfg=types.SimpleNamespace(run_id=f"r{i}", out=str(tmp_path / f"r{i}")), state="resume", argv=[])
            for i in range(n)]


def _kill_still_running(processes) -> None:
    """The fake runs a test left running (its assertion failed first), so none outlives the test."""
    for proc in processes:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def start_sleeping_run(popen, started, preexec_fn, **kwargs):
    """A stand-in run: a Python child that sleeps 2 minutes, its signals set by preexec_fn, kept in started."""
    proc = popen([sys.executable, "-c", "import time; time.sleep(120)"], preexec_fn=preexec_fn, **kwargs)
    started.append(proc)
    return proc


def interrupt_the_sweep_at_its_first_wait(monkeypatch, sweep_module):
    """The sweep's poll sleep raises KeyboardInterrupt, where a Ctrl-C to the sweep lands."""
    def interrupted(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_module, "time", types.SimpleNamespace(time=time.time, sleep=interrupted))


def test_a_sweep_interrupted_alone_stops_its_runs_instead_of_leaving_them_training(tmp_path, monkeypatch):
    """SIGINT to the sweep process alone (`kill -INT`, a scheduler; a terminal's Ctrl-C reaches every
    process) made it exit 130 saying the same command resumes it, while its runs trained on as orphans
    and held their folders' locks: that rerun then failed every run (exit 2). The sweep now waits a
    moment for its runs, interrupts those still going, and exits once they have. The runs are faked by
    sleeping processes; the sweep's poll sleep is where the interrupt lands."""

    import trainer_minimal.sweep as sweep_module

    started, real_popen = [], subprocess.Popen

    def sleeper(cmd, **kwargs):  # SIGINT at its default, as a run started by the sweep has it
        return start_sleeping_run(real_popen, started, lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kwargs)

    monkeypatch.setattr(subprocess, "Popen", sleeper)
    interrupt_the_sweep_at_its_first_wait(monkeypatch, sweep_module)
    monkeypatch.setattr(sweep_module, "STOP_GRACE_S", 0.2, raising=False)
    plan = _resumed_runs_plan(tmp_path, 2)
    try:
        with pytest.raises(KeyboardInterrupt):
            sweep_module.run_sweep(plan, str(tmp_path), workers=2)
        assert len(started) == 2
        assert all(proc.poll() is not None for proc in started), "a run of the interrupted sweep is still training"
    finally:
        _kill_still_running(started)


def test_a_sweep_that_cannot_start_a_run_stops_the_others_and_says_why_in_a_line(tmp_path, monkeypatch, capsys):
    """A sweep with more runs at a time than its open-file limit allows (ulimit -n 13, --workers 10: 8 runs
    started) ended in a traceback from subprocess ('OSError: [Errno 24] Too many open files'), and the
    runs it had started trained on as orphans holding their folders' locks against the rerun. It now
    stops them, as on Ctrl-C, and says what failed and how to go on, exit 1. Runs are faked by sleepers."""
    import trainer_minimal.sweep as sweep_module

    started, real_popen = [], subprocess.Popen

    def sleeper_then_no_more_files(cmd, **kwargs):
        if started:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return start_sleeping_run(real_popen, started, lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kwargs)

    monkeypatch.setattr(subprocess, "Popen", sleeper_then_no_more_files)
    monkeypatch.setattr(sweep_module, "STOP_GRACE_S", 0.2, raising=False)
    plan = _resumed_runs_plan(tmp_path, 2)
    try:
        with pytest.raises(OSError):
            sweep_module.run_sweep(plan, str(tmp_path), workers=2)
        assert len(started) == 1
        assert started[0].poll() is not None, "a run of the failed sweep is still training"
    finally:
        _kill_still_running(started)

    def no_more_files(*args, **kwargs):
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(sweep_module, "run_sweep", no_more_files)
    assert main(["sweep", "--presets", "grpo", "--seeds", "0", "--out", str(tmp_path / "sweep"), *tiny_flags()]) == 1
    assert capsys.readouterr().err == (
        "trainer-minimal: error: Too many open files (this process has as many files open as it may: raise the limit "
        "(ulimit -n)); the runs' own folders hold what they wrote: the same command again resumes the sweep (finished "
        "runs are skipped) and writes runs.csv\n")


def test_a_sweep_run_that_failed_mid_run_is_not_said_to_be_refused(tmp_path, monkeypatch, capsys):
    """A run that trained for hours and then found the disk full (exit 1, its error line in stdout.log) was
    listed as 'was refused: ...', the words for a run its `train` would not start (exit 2). Its line is
    shown with its exit, and it is listed with the failed runs that a rerun resumes."""
    import trainer_minimal.sweep as sweep_module

    said = "trainer-minimal: error: r0/ckpt.pt: No space left on device (the disk is full: ...)"
    real_popen = subprocess.Popen

    def full_disk_run(cmd, **kwargs):
        return real_popen([sys.executable, "-c", f"print({said!r}); raise SystemExit(1)"], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", full_disk_run)
    plan = _resumed_runs_plan(tmp_path, 1)
    assert sweep_module.run_sweep(plan, str(tmp_path), workers=1) == 1
    printed = capsys.readouterr()
    assert "[sweep] done  r0: exit 1 after" in printed.out and said.removeprefix("trainer-minimal: error: ") in printed.out
    assert "failed runs: r0 (see its stdout.log; rerun to resume)" in printed.err and "refused" not in printed.err


def test_a_sweep_s_closing_lines_tell_refused_runs_from_the_failed_ones_a_rerun_resumes(tmp_path, monkeypatch,
                                                                                         capsys):
    """The closing line listed every run that did not finish as 'failed runs: r0, r1, r2 (see their stdout.log;
    rerun to resume)', the refused ones too, which a rerun refuses again until what they name is fixed. The runs
    that failed mid-run are listed so; the refused ones apart, each with its reason; the exit code is 1 still."""
    import trainer_minimal.sweep as sweep_module

    scripts = {"r0": "print('trainer-minimal: error: --lr must be a finite number, got nan'); raise SystemExit(2)",
               "r1": "raise SystemExit(1)",  # died without a word (its log says nothing)
               "r2": "print('trainer-minimal: error: --resume: no checkpoint at r2/ckpt.pt'); raise SystemExit(2)"}
    real_popen = subprocess.Popen

    def fake_run(cmd, **kwargs):
        return real_popen([sys.executable, "-c", scripts[os.path.basename(os.path.dirname(kwargs["stdout"].name))]],
                          **kwargs)

    monkeypatch.setattr(subprocess, "Popen", fake_run)
    assert sweep_module.run_sweep(_resumed_runs_plan(tmp_path, 3), str(tmp_path), workers=1) == 1
    closing = capsys.readouterr().err.splitlines()[-5:]
    assert closing == [
        "[sweep] failed runs: r1 (see its stdout.log; rerun to resume)",
        f"[sweep]   r1 failed (its log: {tmp_path / 'r1' / 'stdout.log'})",
        "[sweep] refused runs: r0, r2 (a rerun refuses them again until what each line below names is fixed)",
        "[sweep]   r0 was refused: --lr must be a finite number, got nan",
        "[sweep]   r2 was refused: --resume: no checkpoint at r2/ckpt.pt",
    ], closing


def test_a_sweep_whose_runs_csv_finds_the_disk_full_says_so_and_the_rerun_writes_it(tmp_path, warm_cache, monkeypatch,
                                                                                     capsys):
    """runs.csv on a full disk, after every run had finished, was a pandas traceback ('OSError: [Errno 28] No
    space left on device' from its handle's close). It is one line naming the file now, exit 1, and the rerun
    (space freed) skips the finished run and writes the table."""
    pd = pytest.importorskip("pandas")
    monkeypatch.setenv("PYTHONPATH", REPO)  # the runs are child processes of this one
    out = tmp_path / "sweep"
    argv = ["sweep", "--presets", "grpo", "--seeds", "0", "--out", str(out), "--warmstart-cache", warm_cache,
            "--max-steps", "2", "--eval-every", "2", *tiny_flags()]

    def full_disk(self, path, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pd.DataFrame, "to_csv", full_disk)
    assert main(argv) == 1
    said = capsys.readouterr()
    assert "[sweep] done  grpo-s0: exit 0" in said.out
    assert said.err == (f"trainer-minimal: error: {out / 'runs.csv'}: No space left on device (the disk is full: free "
                        "some space, or write elsewhere); the runs' own folders hold what they wrote: the same command "
                        "again resumes the sweep (finished runs are skipped) and writes runs.csv\n")
    assert not (out / "runs.csv").exists() and not list(out.glob(".runs.csv.*"))
    monkeypatch.undo()
    monkeypatch.setenv("PYTHONPATH", REPO)
    assert main(argv) == 0
    assert "[sweep] grpo-s0: finished, skipped" in capsys.readouterr().out
    assert list(pd.read_csv(out / "runs.csv")["step"]) == [2]


def test_runs_csv_is_replaced_atomically(tmp_path, monkeypatch):
    """A sweep rewrites DIR/runs.csv at its end; killed (or failing) mid-write, it left half a table."""
    pd = pytest.importorskip("pandas")
    from trainer_minimal.sweep import combine

    out = tmp_path / "sweep"
    (out / "a-s0").mkdir(parents=True)
    row = dict(run_id="a-s0", recipe="a", seed=0, compute=1.0, compute_unit="flops", metric=0.5, n_eval=8, step=2)
    (out / "a-s0" / "evals.jsonl").write_text(json.dumps(row) + "\n")
    combine(str(out), [str(out / "a-s0")])
    before = (out / "runs.csv").read_text()
    (out / "a-s0" / "evals.jsonl").write_text("".join(json.dumps({**row, "compute": c, "step": 2 * c}) + "\n"
                                                      for c in range(1, 500)))
    real_to_csv = pd.DataFrame.to_csv

    def to_csv_killed_midway(self, path, **kwargs):
        real_to_csv(self.head(3), path, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv_killed_midway)
    with pytest.raises(KeyboardInterrupt):
        combine(str(out), [str(out / "a-s0")])
    assert (out / "runs.csv").read_text() == before



def test_a_rerun_of_a_finished_sweep_trains_no_warm_start(tmp_path, capsys):
    """After --slim deleted the sweep's warm-start cache, running the finished sweep again trained the
    warm start once more (and --slim deleted it again), though no run started from it."""
    from trainer_minimal.sweep import run_sweep

    out, cache = tmp_path / "sweep", tmp_path / "cache"
    cfg = tiny(out / "scalerl-s0", str(cache))
    (out / "scalerl-s0").mkdir(parents=True)
    row = dict(run_id=cfg.run_id, recipe=cfg.recipe, seed=0, compute=1.0, compute_unit="flops", metric=0.5,
               n_eval=200, step=2)
    (out / "scalerl-s0" / "evals.jsonl").write_text(json.dumps(row) + "\n")
    assert run_sweep([dict(cfg=cfg, state="finished", argv=[])], str(out), workers=1) == 0
    assert "finished, skipped" in capsys.readouterr().out
    assert not os.path.exists(warm_start_path(cfg))


def test_a_sweep_rerun_with_fewer_runs_keeps_the_others_in_runs_csv(tmp_path):
    """runs.csv held only the runs named by the last invocation: a sweep re-run for one recipe (or one
    that added a recipe) dropped every other run of the folder from the table, while
    forecast.load_runs(folder), reading the run logs, still saw them."""
    pd = pytest.importorskip("pandas")
    from trainer_minimal.sweep import combine

    out = tmp_path / "sweep"
    for run in ("a-s0", "b-s0"):
        (out / run).mkdir(parents=True)
        rows = [dict(run_id=run, recipe=run[0], seed=0, compute=float(s), compute_unit="flops", metric=0.5,
                     n_eval=8, step=s) for s in (2, 4)]
        (out / run / "evals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    combine(str(out), [str(out / "a-s0"), str(out / "b-s0")])
    table = pd.read_csv(out / "runs.csv")
    assert len(table) == 4
    combine(str(out), [str(out / "b-s0")])  # `sweep --presets b ...` into the same folder
    pd.testing.assert_frame_equal(pd.read_csv(out / "runs.csv"), table)


def test_a_sweeps_runs_csv_says_which_runs_ended_as_their_folders_do(tmp_path):
    """runs.csv said nothing of how runs ended, so `forecast report runs.csv` advised a finished run, or
    one its advisor had stopped, to continue or stop as if in flight, where `forecast report DIR`
    (reading stopped.json and summary.json) listed it as ended. The table now has an `ended` column."""
    pd = pytest.importorskip("pandas")
    from forecast.data import load_runs
    from forecast.report import ended_runs
    from trainer_minimal.sweep import combine

    out = tmp_path / "sweep"
    for run, files in {"a-s0": ["summary.json"], "b-s0": ["stopped.json", "summary.json"], "c-s0": []}.items():
        (out / run).mkdir(parents=True)
        rows = [dict(run_id=run, recipe=run[0], seed=0, compute=float(s), compute_unit="flops", metric=0.5,
                     n_eval=8, step=s) for s in (2, 4)]
        (out / run / "evals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        for name in files:
            (out / run / name).write_text("{}")
    combine(str(out), [])
    table = pd.read_csv(out / "runs.csv", keep_default_na=False)
    assert table.groupby("run_id")["ended"].first().to_dict() == {"a-s0": "finished", "b-s0": "advisor_stopped", "c-s0": ""}
    rules = {run: rule for run, (rule, _) in ended_runs(load_runs(out / "runs.csv")).items()}
    assert rules == {run: rule for run, (rule, _) in ended_runs(load_runs(out)).items()} == {"a-s0": "finished", "b-s0": "advisor_stopped"}


def test_sweep_help_shows_the_sweep_s_own_defaults(capsys):
    """sweep --help gave no default for --seeds and --workers, said the warm-start cache defaults to
    <out>/warmstart where a sweep keeps it in OUT/_warmstart, and did not say that each preset
    changes the ScaleRL defaults it shows (train --help does)."""
    assert main(["sweep", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "comma list of integer seeds (default 0,1,2)" in text
    assert "runs at a time (processes) (default 1)" in text
    assert "empty = OUT/_warmstart" in text and "<out>/warmstart" not in text
    assert "each preset changes some of them" in text


def test_two_processes_saving_one_warm_start_do_not_break_each_other(tmp_path, monkeypatch):
    """Two runs given one --warmstart-cache and started side by side both train the warm start and
    save it. Through one shared path.tmp, the first to finish renamed the other's file, and the other
    died with FileNotFoundError in os.replace (or had its half-written file renamed into the cache)."""
    from trainer_minimal.model import build_policy
    from trainer_minimal.tasks import build_datasets
    from trainer_minimal.train import warm_start

    cfg = tiny(tmp_path / "run", str(tmp_path / "cache"), warmup_steps=2)
    pool, _ = build_datasets(cfg)
    real_replace, real_getpid, raced = os.replace, os.getpid, []

    def start(pid):
        model, tok = build_policy(cfg, init_seed=0)
        monkeypatch.setattr(os, "getpid", lambda: pid)
        return warm_start(cfg, model, tok, pool, torch.device("cpu"), rank=0, world=1)

    def replace_after_the_other_process(src, dst):  # the other process finishes while this one renames
        if not raced:
            raced.append(src)
            start(real_getpid() + 1)
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_after_the_other_process)
    path = start(real_getpid())
    assert raced and os.path.exists(path)
    torch.load(path, weights_only=True)


def test_two_sweeps_combining_into_one_folder_at_once_both_write_a_whole_runs_csv(tmp_path, monkeypatch):
    """Two sweeps into one folder (a re-run adding a recipe while the first still runs) may write
    runs.csv at the same moment. Through one shared runs.csv.tmp, the first to rename moved the
    other's file into place (half-written, or another table), and the other died with
    FileNotFoundError in os.replace, after all its runs had finished."""
    from trainer_minimal import sweep

    out = tmp_path / "sweep"
    rows = {}
    for run, n in (("a-s0", 3), ("b-s0", 4)):
        (out / run).mkdir(parents=True)
        rows[run] = [dict(run_id=run, recipe=run[0], seed=0, compute=float(s), compute_unit="flops", metric=0.5,
                          n_eval=8, step=s) for s in range(1, n + 1)]
        (out / run / "evals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[run]))
    real_replace, real_getpid, raced = os.replace, os.getpid, []

    def replace_after_the_other_sweep(src, dst):  # the other sweep combines while this one renames
        if not raced:
            raced.append(src)
            monkeypatch.setattr(os, "getpid", lambda: real_getpid() + 1)
            sweep.combine(str(out), [str(out / "b-s0")])
            monkeypatch.setattr(os, "getpid", real_getpid)
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_after_the_other_sweep)
    table = sweep.combine(str(out), [str(out / "a-s0")])
    assert raced and len(table) == 7
    import pandas as pd

    assert len(pd.read_csv(out / "runs.csv")) == 7
    assert sorted(p.name for p in out.iterdir()) == ["a-s0", "b-s0", "runs.csv"]  # no temporary file left


def test_a_failed_write_of_runs_csv_leaves_no_temporary_file(tmp_path, monkeypatch):
    pd = pytest.importorskip("pandas")
    from trainer_minimal.sweep import combine

    out = tmp_path / "sweep"
    (out / "a-s0").mkdir(parents=True)
    (out / "a-s0" / "evals.jsonl").write_text(json.dumps(dict(run_id="a-s0", recipe="a", seed=0, compute=1.0,
                                                                metric=0.5, step=2)) + "\n")

    def to_csv_killed_midway(self, path, **kwargs):
        open(path, "w").write("run_id,rec")
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv_killed_midway)
    with pytest.raises(KeyboardInterrupt):
        combine(str(out), [str(out / "a-s0")])
    assert sorted(p.name for p in out.iterdir()) == ["a-s0"]


@pytest.mark.parametrize("command", [["train"], ["sweep", "--presets", "grpo", "--seeds", "0"]])
@pytest.mark.parametrize("where", ["out", "cache", "under_a_file"])
def test_a_folder_that_cannot_be_written_is_refused_with_exit_2_before_any_compute(tmp_path, monkeypatch, capsys,
                                                                                  command, where):
    """A read-only --out was a traceback (exit 1) at the first file the run wrote; a read-only
    --warmstart-cache one from torch.save ("open file failed"), after the warm-up had been trained."""
    import trainer_minimal.train as train_module

    read_only = tmp_path / "ro"
    read_only.mkdir()
    (tmp_path / "a_file").write_text("mine\n")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (not (mode & os.W_OK and str(path) == str(read_only))
                                                                and real_access(path, mode, **kw)))
    monkeypatch.setattr(train_module, "warm_start", lambda *a, **k: pytest.fail("warmed up before refusing"))
    out, cache = tmp_path / "out", tmp_path / "cache"
    if where == "out":
        out, message = read_only / "out", f"--out {read_only / 'out'}: cannot write in {read_only}"
    elif where == "cache":
        cache, message = read_only / "cache", f"--warmstart-cache {read_only / 'cache'}"
    else:
        out, message = tmp_path / "a_file" / "out", "a_file is a file, so nothing can be written under it"
    argv = [*command, *tiny_flags(max_steps=2, eval_every=2), "--out", str(out), "--warmstart-cache", str(cache)]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert list(read_only.iterdir()) == [] and not (tmp_path / "out").exists()


@pytest.mark.parametrize("entry", ["train", "sweep"])
@pytest.mark.parametrize("where", ["out", "warmstart_cache"])
def test_a_folder_that_cannot_be_written_is_named_by_its_field_in_the_python_api(tmp_path, monkeypatch, entry,
                                                                                 where):
    """train(cfg) and plan_sweep refused a read-only folder as '--out DIR: cannot write in ...' (or
    '--warmstart-cache DIR'), flags their caller never typed. They name the field, as every refusal of the
    settings does there; the command line's words are the flags' (the test above)."""
    import trainer_minimal.train as train_module
    from trainer_minimal.sweep import plan_sweep

    read_only = tmp_path / "ro"
    read_only.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (not (mode & os.W_OK and str(path) == str(read_only))
                                                                and real_access(path, mode, **kw)))
    monkeypatch.setattr(train_module, "warm_start", lambda *a, **k: pytest.fail("warmed up before refusing"))
    folders = dict(out=tmp_path / "out", warmstart_cache=tmp_path / "cache")
    folders[where] = read_only / where
    with pytest.raises(ValueError) as refused:
        if entry == "train":
            train(tiny(folders["out"], str(folders["warmstart_cache"]), max_steps=2, eval_every=2))
        else:
            plan_sweep("grpo", "0", str(folders["out"]),
                       dict(TINY, max_steps=2, eval_every=2, warmstart_cache=str(folders["warmstart_cache"])))
    said = str(refused.value)
    assert said.startswith(f"{where}={str(folders[where])!r}: cannot write in {read_only}") and "--" not in said, said
    assert list(read_only.iterdir()) == []


def test_a_resume_s_checkpoint_and_ending_name_the_fields_in_python_and_the_flags_at_the_command_line(
        tmp_path, warm_cache, capsys, monkeypatch):
    """A checkpoint that cannot be read ('... or start a new run with another --out'), a finished run's note ('pass
    a larger --max-steps to train on') and a new run into a sweep's folder ('--out SWEEP holds a sweep ..., e.g.
    --out DIR') said the flags to a caller of train(cfg) too. They name the fields there (out, max_steps), the
    flags at the command line, in the same words; a checkpoint damaged after the checks, as the run folder is
    locked, too."""
    import trainer_minimal.train as train_module

    run = tmp_path / "run"
    cfg = tiny(run, warm_cache, max_steps=2, eval_every=2)
    train(cfg)
    capsys.readouterr()
    train(dataclasses.replace(cfg, resume=True))
    assert capsys.readouterr().out == "[scalerl-s0] already finished at step 2 of 2 (pass a larger max_steps to train on)\n"
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert capsys.readouterr().out == "[scalerl-s0] already finished at step 2 of 2 (pass a larger --max-steps to train on)\n"

    good = (run / "ckpt.pt").read_bytes()
    cut = good[: len(good) // 2]
    damaged = (f"{run / 'ckpt.pt'} is not a whole checkpoint ({len(cut)} bytes, cut short, or not a torch file), so "
               "the run cannot be resumed from it: restore the checkpoint (from a copy), or start a new run with another ")
    locked = train_module.lock_run_folder

    def cut_then_locked(folder):  # after train()'s checks: the load under the lock refuses it
        (run / "ckpt.pt").write_bytes(cut)
        return locked(folder)

    for after_the_checks in (False, True):
        (run / "summary.json").unlink(missing_ok=True)  # else the resume says the run has ended, and reads no weights
        (run / "ckpt.pt").write_bytes(good if after_the_checks else cut)
        if after_the_checks:
            monkeypatch.setattr(train_module, "lock_run_folder", cut_then_locked)
        with pytest.raises(ValueError) as refused:
            train(dataclasses.replace(cfg, resume=True, max_steps=4))
        assert str(refused.value) == damaged + "out"
        (run / "ckpt.pt").write_bytes(good if after_the_checks else cut)
        assert main(["train", "--out", str(run), "--resume", "--max-steps", "4"]) == 2
        assert capsys.readouterr().err == f"trainer-minimal: error: {damaged}--out\n"

    sweep = tmp_path / "sweep"
    (sweep / "a-s0").mkdir(parents=True)
    (sweep / "a-s0" / "evals.jsonl").write_text("{}\n")
    with pytest.raises(ValueError) as refused:
        train(tiny(sweep, warm_cache, max_steps=2, eval_every=2))
    said = str(refused.value)
    assert said.startswith(f"out={str(sweep)!r} holds a sweep (run folder a-s0), not a run: "), said
    assert f"e.g. out={str(tmp_path / 'scalerl-s0')!r} (or add it to the sweep with `trainer-minimal sweep ... --out {sweep}`)" in said


@pytest.mark.parametrize("table", ["run_id,recipe,compute,metric\nold-s5,old,1.0,0.5\nold-s5,old,2.0,0.6\n",
                                   "name,score\nalice,3\n"])
def test_a_sweep_refuses_to_replace_a_runs_csv_whose_runs_it_does_not_hold(tmp_path, capsys, table):
    """A folder holding a runs.csv whose run folders are gone (the held-out examples keep only the
    table a sweep wrote), or a user's file of that name, had it replaced by the new runs' rows at the
    end of the sweep: every other row was lost."""
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "runs.csv").write_text(table)
    argv = ["sweep", "--presets", "grpo", "--seeds", "0", *tiny_flags(max_steps=2, eval_every=2), "--out", str(out),
            "--warmstart-cache", str(tmp_path / "cache")]
    assert main(argv) == 2
    assert "runs.csv" in capsys.readouterr().err
    assert (out / "runs.csv").read_text() == table and sorted(p.name for p in out.iterdir()) == ["runs.csv"]


@pytest.mark.parametrize("held, said", [
    (["runs.csv", "a-s0/evals.jsonl", "b-s0/ckpt.pt"], "holds a sweep (runs.csv; run folders a-s0, b-s0), not a run"),
    (["runs.csv"], "holds a sweep (runs.csv), not a run"),  # the held-out examples keep only the table
    (["a-s0/evals.jsonl", "_warmstart/x.pt"], "holds a sweep (run folder a-s0), not a run"),  # killed before runs.csv
])
def test_a_new_run_into_a_sweep_s_folder_is_refused_before_anything_is_written(tmp_path, capsys, held, said):
    """`train --out SWEEP` wrote a run at the top of the sweep's folder: forecast read it with the
    sweep's runs (every evals.jsonl under the folder) while the sweep's runs.csv never listed it."""
    sweep = tmp_path / "sweep"
    for name in held:
        (sweep / name).parent.mkdir(parents=True, exist_ok=True)
        (sweep / name).write_text("run_id,recipe,compute,metric\na-s0,a,1.0,0.5\n" if name == "runs.csv" else "{}\n")
    before = folder_snapshot(sweep)
    assert main(["train", "--out", str(sweep), *tiny_flags(max_steps=2, eval_every=2),
                 "--warmstart-cache", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    assert f"--out {sweep} {said}" in err, err
    assert f"e.g. --out {tmp_path / 'scalerl-s0'}" in err
    assert folder_snapshot(sweep) == before and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("held", [["evals.jsonl", "config.json", "summary.json"], ["ckpt.pt", "config.json"]])
def test_a_sweep_into_a_run_s_folder_is_refused_before_anything_is_written(tmp_path, capsys, held):
    """`sweep --out RUN` made its run folders inside a run's folder: runs nested in a run, all read
    by forecast as one table with it."""
    run = tmp_path / "scalerl-s0"
    run.mkdir()
    for name in held:
        (run / name).write_text("{}\n")
    before = folder_snapshot(run)
    assert main(["sweep", "--presets", "grpo", "--seeds", "0", *tiny_flags(max_steps=2, eval_every=2),
                 "--out", str(run), "--warmstart-cache", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    assert f"--out {run} holds a run ({held[0]}), not a sweep" in err, err
    assert f"e.g. --out {tmp_path / 'scalerl-s0-sweep'}" in err
    assert folder_snapshot(run) == before and not (tmp_path / "cache").exists()


def test_a_sibling_folder_is_beside_the_folder_it_is_suggested_for(tmp_path, monkeypatch):
    from trainer_minimal.config import sibling_folder

    assert sibling_folder("out/sweep/", "scalerl-s0") == os.path.join("out", "scalerl-s0")
    assert sibling_folder("out/scalerl-s0", "scalerl-s0") == os.path.join("out", "scalerl-s0-2")
    monkeypatch.chdir(tmp_path)  # "." is the sweep itself: beside it, not inside it
    assert sibling_folder(".", "scalerl-s0") == str(tmp_path.parent / "scalerl-s0")


def test_a_sweep_rerun_in_its_own_folder_may_rewrite_its_runs_csv(tmp_path):
    from trainer_minimal.sweep import check_runs_table, combine

    out = tmp_path / "sweep"
    (out / "a-s0").mkdir(parents=True)
    row = dict(run_id="a-s0", recipe="a", seed=0, compute=1.0, compute_unit="flops", metric=0.5, n_eval=8, step=2)
    (out / "a-s0" / "evals.jsonl").write_text(json.dumps(row) + "\n")
    combine(str(out), [str(out / "a-s0")])
    cfg = make_config("grpo", seed=0, out=str(out / "grpo-s0"))
    check_runs_table(str(out), [cfg])  # a-s0 has its folder; grpo-s0 is this sweep's
    (out / "runs.csv").write_text("\n")  # a sweep without rows yet
    check_runs_table(str(out), [cfg])


def test_resume_of_a_finished_run_in_a_read_only_folder_still_says_so(tmp_path, warm_cache, monkeypatch, capsys):
    """A run that has ended writes nothing on --resume (it says why): an archived, read-only run folder
    is no reason to refuse it."""
    run = tmp_path / "run"
    train(tiny(run, warm_cache, max_steps=2, eval_every=2))
    capsys.readouterr()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (not (mode & os.W_OK and str(path) == str(run))
                                                                and real_access(path, mode, **kw)))
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert "already finished at step 2 of 2" in capsys.readouterr().out
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "4"]) == 2  # this one would write
    assert f"--out {run}: cannot write in {run}" in capsys.readouterr().err


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks and mode bits are POSIX here")
@pytest.mark.parametrize("writer", ["runs.csv", "checkpoint", "json"])
def test_the_trainer_s_rewrites_keep_a_symlink_and_the_file_s_mode_and_sync(tmp_path, monkeypatch, writer):
    """runs.csv linked into a shared folder became a plain file at the next sweep, its mode bits went
    back to the umask's, and a checkpoint was renamed into place unsynced (a power loss could leave an
    empty ckpt.pt, which --resume then could not load)."""
    from trainer_minimal.logging_io import atomic_torch_save, atomic_write_json
    from trainer_minimal.sweep import combine

    out, shared = tmp_path / "sweep", tmp_path / "shared"
    (out / "a-s0").mkdir(parents=True)
    shared.mkdir()
    row = dict(run_id="a-s0", recipe="a", seed=0, compute=1.0, compute_unit="flops", metric=0.5, n_eval=8, step=2)
    (out / "a-s0" / "evals.jsonl").write_text(json.dumps(row) + "\n")
    name = {"runs.csv": "runs.csv", "checkpoint": "ckpt.pt", "json": "summary.json"}[writer]
    (shared / name).write_text("old")
    os.chmod(shared / name, 0o640)
    (out / name).symlink_to(shared / name)
    synced, real_fsync = [], os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    if writer == "runs.csv":
        combine(str(out), [str(out / "a-s0")])
    elif writer == "checkpoint":
        atomic_torch_save({"step": 2}, str(out / name))
    else:
        atomic_write_json(str(out / name), {"step": 2})
    assert (out / name).is_symlink() and (shared / name).read_bytes() != b"old"
    assert os.stat(shared / name).st_mode & 0o777 == 0o640
    assert synced
    assert sorted(p.name for p in shared.iterdir()) == [name]  # no temporary file left


def wait_for_evaluations(proc, evals, n, timeout=120):
    deadline = time.time() + timeout
    while len(read_jsonl(evals)) < n:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.time() < deadline, "no evaluations written in time"
        time.sleep(0.05)


def exit_code_or_where_it_hangs(child, timeout):
    """The exit code of `child` within `timeout` seconds; past it, the test fails with the child's stderr, which
    ends with its Python stacks where it was started with PYTHONFAULTHANDLER=1 (SIGABRT dumps them)."""
    try:
        return child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGABRT)
        _, err = child.communicate(timeout=30)
        pytest.fail(f"still running {timeout} s on; its stderr and stacks:\n{err.decode(errors='replace')[-6000:]}")


def folder_is_unlocked(folder):
    import fcntl

    with open(os.path.join(folder, ".lock"), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True


def ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sigint", ["as it is", "ignored"])
def test_sigterm_to_a_sweep_stops_its_runs_and_the_rerun_goes_on(tmp_path, warm_cache, sigint):
    """SIGTERM to the sweep (a scheduler's time limit, `kill PID`) ended it at once while its runs
    trained on as orphans holding their folders' locks, so the rerun its docs advise was refused. It now
    stops as on Ctrl-C: its runs stop at their last checkpoint, it says how to go on, exit 143.
    "ignored": a script's background job (`nohup trainer-minimal sweep ... &`) starts with SIGINT
    ignored, its runs too; the sweep stopped them with a SIGINT they never took, and waited for good."""
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "trainer_minimal", "sweep", "--presets", "scalerl", "--seeds", "0", "--out", str(out),
           "--warmstart-cache", warm_cache, "--max-steps", "4000", "--eval-every", "2", *tiny_flags()]
    sweep = subprocess.Popen(cmd, env=child_env(), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             preexec_fn=ignore_sigint if sigint == "ignored" else None)
    run = out / "scalerl-s0"
    try:
        wait_for_evaluations(sweep, run / "evals.jsonl", 2, timeout=240)
        sweep.send_signal(signal.SIGTERM)
        assert sweep.wait(timeout=60) == 143
        assert "stopped by SIGTERM; the same command again resumes the sweep" in sweep.stderr.read().decode()
        assert folder_is_unlocked(run), "the sweep's run is still training"
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
        if not folder_is_unlocked(run):  # the orphaned run: its pid is in the lock file
            os.kill(int((run / ".lock").read_text()), signal.SIGKILL)
    assert (run / "evals.jsonl").read_text().endswith("\n")
    end = checkpoint_step(run / "ckpt.pt") + 2
    assert main(["train", "--out", str(run), "--resume", "--max-steps", str(end)]) == 0


def ignore_stop_signals():
    """A run that takes no stop: SIGINT and SIGTERM ignored from before it starts, so none lands first."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


@contextlib.contextmanager
def killed_if_still_running_after(processes, seconds):
    """Yields an Event set when the processes (a list, filled as they start) were still running `seconds`
    later and were killed here: a sweep that waits on its runs for good fails its test instead of hanging it."""
    bitten = threading.Event()
    watchdog = threading.Timer(seconds, lambda: bitten.set() or _kill_still_running(list(processes)))
    watchdog.start()
    try:
        yield bitten
    finally:
        watchdog.cancel()
        _kill_still_running(processes)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sigint", ["taken", "ignored"])
def test_a_stopped_sweep_kills_a_run_that_takes_no_stop_and_says_so_in_its_log(tmp_path, monkeypatch, capsys, sigint):
    """A stopped sweep (SIGTERM, Ctrl-C) gave its runs a grace period, sent those still going a stop signal,
    then waited for them without limit: a run that took neither SIGINT nor SIGTERM (a hung data loader, a run
    stuck in C code, a wrapper that traps signals) kept the sweep alive for good under `kill PID` or `timeout`,
    and nothing said why. After a second bounded wait such a run is killed (SIGKILL), and the sweep says so on
    stderr and in the run's stdout.log, after what earlier attempts wrote there. The runs are stand-ins that
    ignore both signals; "ignored": a sweep started with SIGINT ignored stops its runs with SIGTERM."""
    import trainer_minimal.sweep as sweep_module

    started, real_popen = [], subprocess.Popen

    def run_that_takes_no_stop(cmd, **kwargs):
        return start_sleeping_run(real_popen, started, ignore_stop_signals, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", run_that_takes_no_stop)
    interrupt_the_sweep_at_its_first_wait(monkeypatch, sweep_module)
    plan = _resumed_runs_plan(tmp_path, 2)
    (tmp_path / "r0").mkdir()
    (tmp_path / "r0" / "ckpt.pt").write_bytes(b"")  # r0 has a checkpoint to resume from, r1 none yet
    (tmp_path / "r0" / "stdout.log").write_text("[r0] step 2  an earlier attempt's line\n")
    # set either way: pytest started as a script's background job (`nohup ... &`) inherits SIGINT ignored
    previous_sigint = signal.signal(signal.SIGINT, signal.SIG_IGN if sigint == "ignored" else signal.default_int_handler)
    try:
        with killed_if_still_running_after(started, 60) as bitten:
            with pytest.raises(KeyboardInterrupt):
                sweep_module.run_sweep(plan, str(tmp_path), workers=2, stop_grace=0.2, kill_grace=0.2)
            assert not bitten.is_set(), "the sweep waited for its runs until the test killed them"
    finally:
        signal.signal(signal.SIGINT, previous_sigint)
    assert len(started) == 2 and [proc.returncode for proc in started] == [-signal.SIGKILL] * 2
    stop = "SIGTERM" if sigint == "ignored" else "SIGINT"
    said = {"r0": f"[sweep] r0: killed (SIGKILL): still running 0.2 s after its {stop}; it has not finished: the "
                  "same command again resumes it from its last checkpoint",
            "r1": f"[sweep] r1: killed (SIGKILL): still running 0.2 s after its {stop}; it has not finished: the "
                  "same command again starts it anew (it had no checkpoint)"}
    err = capsys.readouterr().err
    for line in said.values():
        assert line in err.splitlines(), err
    assert (tmp_path / "r0" / "stdout.log").read_text() == f"[r0] step 2  an earlier attempt's line\n{said['r0']}\n"
    assert (tmp_path / "r1" / "stdout.log").read_text() == said["r1"] + "\n"


class RunStuckInTheKernel:
    """A stand-in Popen for a run in uninterruptible sleep (D state): no signal ends it, SIGKILL included, so
    a wait with a timeout times out and a wait without one never returns (raised here instead of hanging)."""

    pid = 4242
    returncode = None

    def __init__(self, cmd, **kwargs):
        self.signals = []

    def poll(self):
        return None

    def wait(self, timeout=None):
        if timeout is None:
            raise AssertionError("the sweep waited without a limit on a run that never ends")
        raise subprocess.TimeoutExpired("train", timeout)

    def send_signal(self, signum):
        self.signals.append(signum)

    def terminate(self):
        self.signals.append(signal.SIGTERM)

    def kill(self):
        self.signals.append(signal.SIGKILL)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_stopped_sweep_leaves_a_run_sigkill_did_not_end_and_says_so(tmp_path, monkeypatch, capsys):
    """After SIGKILL (kill_grace) the sweep waited on the run without a limit: one stuck in the kernel (D state:
    a hung NFS mount or device), which SIGKILL does not end until it wakes, held the stopped sweep for good.
    It now waits REAP_GRACE_S, then says on stderr and in the run's stdout.log that the run could not be
    reaped and how the rerun goes on with it, and stops the sweep's other runs as before."""
    import trainer_minimal.sweep as sweep_module

    started = []

    def stuck_run(cmd, **kwargs):
        started.append(RunStuckInTheKernel(cmd, **kwargs))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", stuck_run)
    monkeypatch.setattr(sweep_module, "REAP_GRACE_S", 0.1, raising=False)
    interrupt_the_sweep_at_its_first_wait(monkeypatch, sweep_module)
    plan = _resumed_runs_plan(tmp_path, 2)
    (tmp_path / "r0").mkdir()
    (tmp_path / "r0" / "ckpt.pt").write_bytes(b"")  # r0 has a checkpoint to resume from, r1 none yet
    previous_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):  # the sweep's own stop, not a wait that never returned
            sweep_module.run_sweep(plan, str(tmp_path), workers=2, stop_grace=0.1, kill_grace=0.1)
    finally:
        signal.signal(signal.SIGINT, previous_sigint)
    assert [proc.signals for proc in started] == [[signal.SIGINT, signal.SIGKILL]] * 2  # each stopped, then killed
    said = {"r0": "[sweep] r0: could not be reaped: still running 0.1 s after its SIGINT, and not ended 0.1 s after "
                  "SIGKILL (process 4242, stuck in the kernel); left behind, it has not finished: once that process has "
                  "ended, the same command again resumes it from its last checkpoint",
            "r1": "[sweep] r1: could not be reaped: still running 0.1 s after its SIGINT, and not ended 0.1 s after "
                  "SIGKILL (process 4242, stuck in the kernel); left behind, it has not finished: once that process has "
                  "ended, the same command again starts it anew (it had no checkpoint)"}
    err = capsys.readouterr().err
    for run, line in said.items():
        assert line in err.splitlines(), err
        assert (tmp_path / run / "stdout.log").read_text() == line + "\n"
    assert "killed (SIGKILL)" not in err  # said of a run SIGKILL ended, which these did not


HUNG_RUN_SCRIPT = """
import sys, time
import trainer_minimal.train as train_module
from trainer_minimal.cli import main

real_evaluate = train_module.evaluate

def evaluate_or_hang(cfg, model, tok, val, step, *args):
    if step > 2:  # stuck after its checkpoint at step 2, as in a hung data loader
        time.sleep(600)
    return real_evaluate(cfg, model, tok, val, step, *args)

train_module.evaluate = evaluate_or_hang
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_the_rerun_of_a_sweep_that_killed_a_hung_run_resumes_it(tmp_path, warm_cache, monkeypatch, capsys):
    """A run the stopped sweep had to kill (it hung after its checkpoint at step 2 and took no stop signal)
    is not finished: the same sweep command again resumes it from that checkpoint and ends it, its logs
    exact; its stdout.log keeps the sweep's line saying it was killed."""
    import trainer_minimal.sweep as sweep_module

    monkeypatch.setenv("PYTHONPATH", REPO)  # the runs are child processes of this one
    script = tmp_path / "hung_run.py"
    script.write_text(HUNG_RUN_SCRIPT)
    out = tmp_path / "sweep"
    run = out / "scalerl-s0"
    argv = ["sweep", "--presets", "scalerl", "--seeds", "0", "--out", str(out), "--warmstart-cache", warm_cache,
            "--max-steps", "4", "--eval-every", "2", *tiny_flags()]
    started, real_popen, real_sleep = [], subprocess.Popen, time.sleep

    def hung_run(cmd, **kwargs):  # cmd: python -m trainer_minimal train ARGS
        proc = real_popen([cmd[0], str(script), *cmd[3:]], preexec_fn=ignore_stop_signals, **kwargs)
        started.append(proc)
        return proc

    def interrupted_once_checkpointed_at_step_2(seconds):
        real_sleep(seconds)
        if (run / "ckpt.pt").exists() and checkpoint_step(run / "ckpt.pt") == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(subprocess, "Popen", hung_run)
    monkeypatch.setattr(sweep_module, "time", types.SimpleNamespace(time=time.time,
                                                                    sleep=interrupted_once_checkpointed_at_step_2))
    monkeypatch.setattr(sweep_module, "STOP_GRACE_S", 0.2)
    monkeypatch.setattr(sweep_module, "KILL_GRACE_S", 0.2, raising=False)
    # SIGINT taken, as from a terminal, whatever this pytest inherited (a background job's is ignored: SIGTERM is sent)
    previous_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with killed_if_still_running_after(started, 240) as bitten:
            assert main(argv) == 130
            assert not bitten.is_set(), "the sweep waited for its hung run until the test killed it"
    finally:
        signal.signal(signal.SIGINT, previous_sigint)
    killed = ("[sweep] scalerl-s0: killed (SIGKILL): still running 0.2 s after its SIGINT; it has not finished: the "
              "same command again resumes it from its last checkpoint")
    err = capsys.readouterr().err
    assert killed in err.splitlines() and "interrupted; the same command again resumes the sweep" in err, err
    assert folder_is_unlocked(run) and not (run / "summary.json").exists()
    monkeypatch.setattr(subprocess, "Popen", real_popen)
    monkeypatch.setattr(sweep_module, "time", time)
    assert main(argv) == 0
    assert [r["step"] for r in read_jsonl(run / "evals.jsonl")] == [2, 4] and (run / "summary.json").exists()
    lines = (run / "stdout.log").read_text().splitlines()  # what the killed attempt said, then the resume
    assert lines[lines.index(killed) - 1].startswith("[scalerl-s0] step 2 "), lines
    assert lines[lines.index(killed) + 1].startswith("[scalerl-s0] step 4 "), lines


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_to_a_run_stops_it_as_ctrl_c_does(tmp_path, warm_cache):
    """SIGTERM killed a run without a word (exit -15); it now stops as on Ctrl-C, saying that --resume
    goes on from its checkpoint, exit 143, its logs whole."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "trainer_minimal", "train", "--out", str(run), "--warmstart-cache", warm_cache,
           "--max-steps", "4000", "--eval-every", "2", *tiny_flags()]
    # PYTHONFAULTHANDLER: a child that does not stop is made to say where it is (its stack, on SIGABRT) before
    # the test fails; once under a loaded machine it went on for 60 s and nothing told where it was
    child = subprocess.Popen(cmd, env={**child_env(), "PYTHONFAULTHANDLER": "1"}, cwd=REPO, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        wait_for_evaluations(child, run / "evals.jsonl", 2)
        child.send_signal(signal.SIGTERM)
        assert exit_code_or_where_it_hangs(child, 60) == 143
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert f"stopped by SIGTERM; `trainer-minimal train --out {run} --resume` goes on" in child.stderr.read().decode()
    for log in ("evals.jsonl", "train_log.jsonl"):
        assert (run / log).read_text().endswith("\n")
    end = checkpoint_step(run / "ckpt.pt") + 2
    assert main(["train", "--out", str(run), "--resume", "--max-steps", str(end)]) == 0


STOPPED_IN_TORCH_IMPORT_SCRIPT = """
import importlib.abc, os, signal, sys, time
from trainer_minimal.cli import main

class StoppedInTheImport(importlib.abc.MetaPathFinder):  # the signal lands while torch is imported (seconds)
    def find_spec(self, name, path, target=None):
        if name == "torch":
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
            time.sleep(10)  # a handler that raises does so before this ends
        return None

sys.meta_path.insert(0, StoppedInTheImport())
# Ctrl-C as a terminal's foreground process has it: a shell starts a background job (`make test &`,
# nohup) with SIGINT ignored, the trainer rightly leaves an ignored signal ignored, and the run trained on
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signame, command, said", [
    ("SIGINT", "train", "interrupted before the run started"),
    ("SIGTERM", "train", "stopped by SIGTERM before the run started"),
    ("SIGTERM", "sweep", "stopped by SIGTERM before the sweep started")])
def test_a_stop_while_torch_is_imported_is_said_in_a_line(tmp_path, signame, command, said):
    """A run that a sweep stopped (SIGTERM, or its SIGINT after the grace) while it still imported torch, a
    second or more after it started, ended in a KeyboardInterrupt traceback in its stdout.log, exit -2, or
    for SIGTERM without a word, exit -15: the stop handlers were set only once the run's checks had passed.
    They are set from the start, and such a stop says so in a line, with the exit code of a later stop."""
    script = tmp_path / "stopped_in_torch_import.py"
    script.write_text(STOPPED_IN_TORCH_IMPORT_SCRIPT)
    argv = (["train", "--out", str(tmp_path / "run")] if command == "train"
            else ["sweep", "--presets", "grpo", "--seeds", "0", "--out", str(tmp_path / "sweep")])
    done = subprocess.run([sys.executable, str(script), signame, *argv, *tiny_flags()], env=child_env(), cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 128 + getattr(signal, signame), done.stderr
    assert done.stderr == f"trainer-minimal: {said} (nothing was written); the same command again starts it\n"
    assert not any(tmp_path.glob("*/*"))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_stop_signals_leave_nohup_alone_and_are_put_back():
    """Under nohup, SIGHUP is ignored and must stay so: a closed terminal must not stop the run."""
    from trainer_minimal.cli import Stopped, stop_signals_as_ctrl_c

    # SIGTERM as a plain process has it: where the test runner holds a handler of its own (coverage's
    # sigterm option), the context manager leaves it, and the SIGTERM below would end the test session
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with pytest.raises(Stopped), stop_signals_as_ctrl_c():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, before[0])
        signal.signal(signal.SIGTERM, before[1])


def test_a_negative_number_in_exponent_form_reaches_the_range_check(tmp_path, capsys):
    """`--clip-high -1e-3` was taken by argparse for an unknown flag ("expected one argument"), where
    `-0.001` got the clip range's own message; both now get it, and nothing is written."""
    assert main(["train", "--clip-high", "-1e-3", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "expected one argument" not in err and "--clip-high -0.001" in err
    assert not (tmp_path / "run").exists()


def test_a_sweep_says_what_each_crashed_run_died_of_and_where_its_log_is(tmp_path, monkeypatch, capsys):
    """A run that crashed mid-way (a traceback) or was killed (the kernel's OOM killer: SIGKILL) was
    reported as 'exit 1' or 'exit -9' and 'failed runs: X (see their stdout.log ...)': the user had to
    find the log and read it to learn what went wrong. The sweep now says the exception, or the
    signal, and the log's path, beside the runs that finished. The runs are faked by small processes."""
    import types

    import trainer_minimal.sweep as sweep_module

    scripts = {"crashed": "print('[crashed] step 2  pass 0.4'); raise RuntimeError('CUDA error: an illegal memory access')",
               "killed": "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
               "fine": "print('[fine] step 2  pass 0.4')"}
    real_popen = subprocess.Popen

    def fake_run(cmd, **kwargs):
        return real_popen([sys.executable, "-c", scripts[os.path.basename(cmd[-1])]], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", fake_run)
    plan = [dict(cfg=types.SimpleNamespace(run_id=name, out=str(tmp_path / name)), state="resume",
                 argv=["--out", str(tmp_path / name)]) for name in scripts]
    assert sweep_module.run_sweep(plan, str(tmp_path), workers=2) == 1
    said = capsys.readouterr()
    crashed_log, killed_log = (tmp_path / name / "stdout.log" for name in ("crashed", "killed"))
    assert "[sweep] done  crashed: exit 1 after" in said.out and "RuntimeError: CUDA error" in said.out, said.out
    assert "[sweep] done  fine: exit 0" in said.out
    assert (f"[sweep]   crashed crashed: RuntimeError: CUDA error: an illegal memory access (its log: {crashed_log})"
            in said.err), said.err
    assert f"[sweep]   killed was killed by SIGKILL (its log: {killed_log})" in said.err, said.err
    assert "fine" not in said.err


def test_a_new_run_that_would_mix_settings_into_a_sweep_s_runs_is_refused_before_anything_runs(tmp_path, capsys):
    """A sweep re-run refused a flag that changed an existing run, but a new run was checked against
    nothing: adding seed 2 of grpo with another --lr made 'grpo' a recipe of two learning rates, pooled
    by the forecaster as its seeds, and adding a recipe without the sweep's --tasks (a flag forgotten on
    the second day) compared it with the others on another measure, both without a word. A new run
    now has the settings of the recipe's runs already in the folder, and the sweep-wide ones (model,
    tasks, evaluation, warm start: all but what a preset sets) of the others; how long it trains and
    what a resume may change stay free."""
    from trainer_minimal.sweep import plan_sweep

    out, cache = tmp_path / "sweep", str(tmp_path / "cache")
    overrides = dict(TINY, max_steps=4, eval_every=2, warmstart_cache=cache)
    for name in ("grpo-s0", "cispo-s0"):  # a finished sweep: its runs' settings and their ends
        cfg = make_config(name.split("-")[0], seed=0, out=str(out / name), **overrides)
        (out / name).mkdir(parents=True)
        (out / name / "config.json").write_text(to_json(cfg) + "\n")
        (out / name / "summary.json").write_text("{}")
    base = ["sweep", "--out", str(out), "--warmstart-cache", cache, "--max-steps", "4", "--eval-every", "2"]
    other_lr = tiny_flags(lr=1e-3)
    assert main([*base, "--presets", "grpo", "--seeds", "2", *other_lr]) == 2
    err = capsys.readouterr().err
    assert (f"{out / 'grpo-s2'}: a new seed of grpo beside grpo-s0, which was started with other settings: "
            "--lr 0.002 -> 0.001") in err, err
    assert not (out / "grpo-s2").exists()
    no_tasks = [*tiny_flags()]
    del no_tasks[no_tasks.index("--tasks"):no_tasks.index("--tasks") + 2]
    assert main([*base, "--presets", "dapo", "--seeds", "0", *no_tasks]) == 2
    err = capsys.readouterr().err
    assert (f"{out / 'dapo-s0'}: a new recipe beside cispo-s0, which was started with other settings: "
            "--tasks 'rev' -> 'sort,rev,add'") in err, err
    # the sweep's own flags: a new seed, a new recipe (its preset's knobs are its own), and what a resume
    # may change (here how often the new runs are evaluated)
    plan = plan_sweep("grpo,dapo", "0,1", str(out), dict(overrides, eval_every=4))
    assert {p["cfg"].run_id: p["state"] for p in plan} == {"grpo-s0": "finished", "grpo-s1": "new", "dapo-s0": "new",
                                                           "dapo-s1": "new"}


def test_a_run_another_sweep_started_since_the_plan_is_resumed_not_refused_as_taken(tmp_path, monkeypatch, capsys):
    """Two sweeps into one folder at once (a re-run that adds a recipe while the first still runs) both
    plan their shared runs as new; the one that comes to a run the other has since started launched
    it as new, and `train` refused it ('already holds a run ...; pass --resume'), exit 1, though the run
    was training or done. It is now launched as a resume (`train` says it finished, or that another
    process trains it), unless the other sweep started it with other settings: that is refused as the
    plan would have refused it, and not launched. The runs are faked; what matters is how each is launched."""
    import trainer_minimal.sweep as sweep_module

    launched, real_popen = [], subprocess.Popen

    def fake_run(cmd, **kwargs):
        launched.append(cmd)
        return real_popen([sys.executable, "-c", "pass"], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", fake_run)
    monkeypatch.setattr(sweep_module, "prepare_warm_starts", lambda configs: None)
    out = tmp_path / "sweep"
    plan = sweep_module.plan_sweep("grpo", "0,1,2", str(out), dict(TINY, max_steps=4, eval_every=2,
                                                                   warmstart_cache=str(tmp_path / "cache")))
    assert {p["state"] for p in plan} == {"new"}
    for p, lr in zip(plan[:2], (TINY["lr"], 1e-3), strict=True):  # the other sweep's runs, one at another --lr
        os.makedirs(p["cfg"].out)
        (tmp_path / "sweep" / p["cfg"].run_id / "config.json").write_text(to_json(dataclasses.replace(p["cfg"], lr=lr)) + "\n")
        (tmp_path / "sweep" / p["cfg"].run_id / "ckpt.pt").write_bytes(b"")  # its first checkpoint
    assert sweep_module.run_sweep(plan, str(out), workers=1) == 1
    assert [cmd[4:7] for cmd in launched] == [["--out", str(out / "grpo-s0"), "--resume"],
                                              ["--preset", "grpo", "--seed"]]
    said = capsys.readouterr()
    assert "grpo-s0: started since this sweep was planned (another sweep into this folder?): resumed" in said.out
    assert (f"[sweep]   grpo-s1 was refused: {out / 'grpo-s1'} was started since this sweep was planned, with other "
            "settings: lr 0.001 -> 0.002") in said.err, said.err


@pytest.mark.skipif(sys.platform == "win32", reason="runs are not locked on Windows (logging_io.lock_run_folder)")
def test_two_sweeps_starting_one_run_at_once_keep_to_one_stdout_log(tmp_path, monkeypatch, capsys):
    """Two sweeps started at once into one folder both launch their shared run: each opened the run's
    stdout.log and started its `train`, and the one whose `train` lost the race for the run folder's lock
    wrote its refusal ('another process ... is training in this run folder') into the log of the run that
    trains. The second sweep now leaves the run, and its log, to the first, and says so. The sweeps run in
    two threads and their runs are faked: the first sweep's run is still going when the second comes to it."""
    import threading

    import trainer_minimal.sweep as sweep_module

    real_popen = subprocess.Popen

    def fake_run(cmd, **kwargs):
        first = threading.current_thread().name == "first sweep"
        said = "the run's own line" if first else "trainer-minimal: error: another process is training in this run folder"
        code = f"import time; print({said!r}, flush=True); time.sleep({3 if first else 0}); raise SystemExit({0 if first else 2})"
        return real_popen([sys.executable, "-c", code], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", fake_run)
    monkeypatch.setattr(sweep_module, "prepare_warm_starts", lambda configs: None)
    out = tmp_path / "sweep"
    plan = sweep_module.plan_sweep("grpo", "0", str(out), dict(TINY, max_steps=4, eval_every=2,
                                                               warmstart_cache=str(tmp_path / "cache")))
    codes = {}
    first = threading.Thread(target=lambda: codes.update(first=sweep_module.run_sweep(plan, str(out), workers=1)),
                             name="first sweep")
    first.start()
    log = out / "grpo-s0" / "stdout.log"
    deadline = time.time() + 60
    while not (log.exists() and log.read_text()):  # the first sweep's run has started and written
        assert time.time() < deadline and first.is_alive(), "the first sweep's run did not start"
        time.sleep(0.05)
    codes["second"] = sweep_module.run_sweep(plan, str(out), workers=1)
    first.join(timeout=60)
    assert log.read_text() == "the run's own line\n"
    assert codes == {"first": 0, "second": 1}
    said = capsys.readouterr()
    assert f"[sweep] grpo-s0: not started: {out / 'grpo-s0'} is being run by another process" in said.out, said.out
    assert "[sweep]   grpo-s0 was refused:" in said.err


def test_a_damaged_log_line_at_the_sweep_s_end_keeps_runs_csv_and_says_where(tmp_path, monkeypatch, capsys):
    """A run folder in the sweep's folder whose evals.jsonl holds a damaged line mid-file (a disk
    error, a hand edit) made the sweep end in a ValueError traceback after every run had trained.
    It now says which file and line, leaves runs.csv as it was, and exits 1; the runs are faked."""
    import types

    import trainer_minimal.sweep as sweep_module

    real_popen = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", lambda cmd, **kw: real_popen([sys.executable, "-c", "pass"], **kw))
    other = tmp_path / "other-s0"
    other.mkdir()
    (other / "evals.jsonl").write_text('{"run_id": "other-s0", "step": 2}\n{"run_id": "oth\n{"run_id": "other-s0", "step": 4}\n')
    (tmp_path / "runs.csv").write_text("kept\n")
    plan = [dict(cfg=types.SimpleNamespace(run_id="fine", out=str(tmp_path / "fine")), state="resume",
                 argv=["--out", str(tmp_path / "fine")])]
    assert sweep_module.run_sweep(plan, str(tmp_path), workers=1) == 1
    err = capsys.readouterr().err
    assert (f"was not rewritten: {other / 'evals.jsonl'}: line 2 is not valid JSON (Unterminated string starting at: "
            "column 12); remove or repair that line") in err, err
    assert (tmp_path / "runs.csv").read_text() == "kept\n"


def test_a_sweep_s_runs_csv_takes_in_a_run_folder_that_logs_no_seed(tmp_path):
    """combine() sorted by recipe, seed and step, so a run folder in the sweep's folder whose log has no
    seed column (written by another tool, or by hand) ended the sweep in KeyError: 'seed'."""
    from trainer_minimal.sweep import combine

    other = tmp_path / "other-run"
    other.mkdir()
    (other / "evals.jsonl").write_text('{"run_id": "other-run", "recipe": "x", "compute": 1, "metric": 0.1, "step": 2}\n')
    table = combine(str(tmp_path), [])
    assert list(table["run_id"]) == ["other-run"] and (tmp_path / "runs.csv").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="runs are not locked on Windows (logging_io.lock_run_folder)")
@pytest.mark.parametrize("cannot", [errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP])
def test_a_file_system_that_cannot_lock_is_said_not_taken_for_another_process(tmp_path, monkeypatch, capsys, cannot):
    """flock fails on a file system that has no locks (Lustre mounted without -o flock: ENOSYS; NFS
    without its lock daemon: ENOLCK), and every failure was read as a lock another process held: the
    sweep refused every run as 'being run by another process', and train every folder as one
    'another process (pid ?) is training in'. Only a held lock (EWOULDBLOCK) is another process's; on
    a file system without locks the run goes on, unguarded as on Windows, and says so once."""
    import fcntl

    import trainer_minimal.logging_io as logging_io

    def no_locks_here(handle, operation):
        raise OSError(cannot, os.strerror(cannot))

    monkeypatch.setattr(fcntl, "flock", no_locks_here)
    monkeypatch.setattr(logging_io, "_said_cannot_lock", set(), raising=False)
    log = logging_io.open_log_alone(str(tmp_path / "stdout.log"))
    assert log is not None
    log.close()
    from trainer_minimal.train import remove_dead_writes

    unguarded = logging_io.lock_run_folder(str(tmp_path / "run"))
    # unguarded, a temporary file may be a second writer's in flight, not a dead one's: left to its age
    (tmp_path / "run" / ".ckpt.pt.inflight.tmp").write_bytes(b"half")
    remove_dead_writes(types.SimpleNamespace(out=str(tmp_path / "run")))
    assert (tmp_path / "run" / ".ckpt.pt.inflight.tmp").exists()
    unguarded.close()
    said = capsys.readouterr().err
    assert said.count("trainer-minimal: warning:") == 1, said
    assert f"cannot lock files ({os.strerror(cannot)})" in said and "not guarded against a second" in said, said

    def held_elsewhere(handle, operation):
        raise BlockingIOError(errno.EWOULDBLOCK, os.strerror(errno.EWOULDBLOCK))

    monkeypatch.setattr(fcntl, "flock", held_elsewhere)
    assert logging_io.open_log_alone(str(tmp_path / "stdout.log")) is None
    with pytest.raises(logging_io.RunFolderBusy, match="another process"):
        logging_io.lock_run_folder(str(tmp_path / "run"))


def test_logged_compute_is_training_plus_the_round_s_sampling(tmp_path, warm_cache, monkeypatch):
    """Counts stubbed to known numbers: training counts 1 per trained token and a round's sampling 10^6, so
    every step adds its trained_tokens, and the first step of each round (k = 2) 10^6 more (kills the mutant
    that left the sampling out of the logged compute)."""
    import trainer_minimal.train as train_module

    class KnownCounts:
        n_params = 1

        def __init__(self, model):
            pass

        def rollout(self, n_seqs, prompt_width, decode_steps):
            return 1e6

        def train(self, n_seqs, width):
            return n_seqs * width

    monkeypatch.setattr(train_module, "FlopsModel", KnownCounts)
    train(tiny(tmp_path / "run", warm_cache, max_steps=4, eval_every=4, off_policy_k=2))
    log = read_jsonl(tmp_path / "run" / "train_log.jsonl")
    added = [b["compute"] - a["compute"] for a, b in zip([{"compute": 0.0}] + log, log, strict=False)]
    assert [r["step"] for r in log] == [1, 2, 3, 4]
    assert [x - r["trained_tokens"] for x, r in zip(added, log, strict=True)] == [1e6, 0.0, 1e6, 0.0]


def test_a_run_is_evaluated_every_eval_every_steps_and_at_max_steps(tmp_path, warm_cache):
    """max_steps 6 with eval_every 4: evaluations at steps 4 and 6, the last one where the run ends, and the
    summary's final metric and compute are that last evaluation's (kills the mutants that skipped the
    evaluation at max_steps, whose compute the forecaster then never saw, and took the first evaluation's
    metric as the final one)."""
    summary = train(tiny(tmp_path / "run", warm_cache, max_steps=6, eval_every=4))
    evals = read_jsonl(tmp_path / "run" / "evals.jsonl")
    log = read_jsonl(tmp_path / "run" / "train_log.jsonl")
    assert [r["step"] for r in evals] == [4, 6]
    assert [r["compute"] for r in evals] == [log[3]["compute"], log[5]["compute"]]
    assert (summary["steps"], summary["final_metric"], summary["compute"]) == (6, evals[-1]["metric"], evals[-1]["compute"])


def test_the_learning_rate_warms_up_linearly_from_its_first_step(tmp_path, warm_cache):
    """lr_warmup 4: steps 1 to 4 train at 1/4, 2/4, 3/4 and 4/4 of lr, then lr (kills the mutant whose
    warm-up started at 0, a first step that trained nothing). GRPO's preset filters no prompt, so every
    step trains and sets its learning rate."""
    train(tiny(tmp_path / "run", warm_cache, preset="grpo", max_steps=6, eval_every=6, lr_warmup=4))
    lr = TINY["lr"]
    assert [r["lr"] for r in read_jsonl(tmp_path / "run" / "train_log.jsonl")] == pytest.approx(
        [lr / 4, lr / 2, 3 * lr / 4, lr, lr, lr], rel=1e-12)


def test_a_log_repair_replaces_the_log_whole_so_a_reader_sees_the_old_rows_or_the_new(tmp_path):
    """--resume's repair of evals.jsonl (logging_io.repair_jsonl) drops a torn line and the rows after the
    checkpoint by writing a new file and renaming it over the log: a reader that opened the log before it
    (forecast watch following the run) reads the old rows whole, never a log emptied under it (kills the
    mutant rewriting the log in place, which truncated it for every reader first)."""
    from trainer_minimal.logging_io import repair_jsonl

    log = tmp_path / "evals.jsonl"
    old = "".join(json.dumps(dict(step=step, metric=step / 10)) + "\n" for step in (2, 4, 6)) + '{"step": 8, "met'
    log.write_text(old)
    with open(log) as reader:
        kept = repair_jsonl(log, 4)
        assert reader.read() == old
    assert [r["step"] for r in kept] == [2, 4] == [r["step"] for r in read_jsonl(log)]
    assert log.read_text().endswith("}\n")


def test_an_evaluation_row_is_synced_to_disk_before_append_returns(tmp_path, monkeypatch):
    """evals.jsonl's row is fsynced before the checkpoint that follows it ('Crash safety' in train.py): a
    power loss cannot leave a checkpoint whose evaluation was never on disk. train_log.jsonl's rows are
    not (fsync=False: one per step). Kills the mutant that dropped the sync."""
    from trainer_minimal.logging_io import append_jsonl

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    append_jsonl(tmp_path / "evals.jsonl", dict(step=2))
    assert len(synced) == 1
    append_jsonl(tmp_path / "train_log.jsonl", dict(step=2), fsync=False)
    assert len(synced) == 1
    assert [r["step"] for r in read_jsonl(tmp_path / "evals.jsonl")] == [2]


def test_each_planned_run_s_command_trains_the_config_the_sweep_planned(tmp_path):
    """A sweep plans each run's config (checked against the runs already there, keyed for its warm start)
    and starts the run with a command line: the command, parsed as `train` parses it, is that config, an
    off switch included (kills the mutants giving every recipe the first preset's knobs under its own
    name, and passing a switch set off as --zero-var-filter, which turned it on)."""
    from trainer_minimal.cli import build_parser, resolve_train_config
    from trainer_minimal.sweep import plan_sweep

    overrides = dict(TINY, zero_var_filter=False, fp32_logits=False, max_steps=4, eval_every=2)
    plan = plan_sweep("grpo,dapo,scalerl", "0,1", str(tmp_path / "sweep"), overrides)
    assert [(p["cfg"].recipe, p["cfg"].seed) for p in plan] == [(r, s) for r in ("grpo", "dapo", "scalerl") for s in (0, 1)]
    for p in plan:
        assert resolve_train_config(build_parser().parse_args(["train", *p["argv"]])) == p["cfg"], p["argv"]
    loss_types = {p["cfg"].recipe: (p["cfg"].loss_type, p["cfg"].aggregation, p["cfg"].zero_var_filter) for p in plan}
    assert loss_types == {"grpo": ("ppo", "sample", False), "dapo": ("ppo", "token", False), "scalerl": ("cispo", "prompt", False)}
