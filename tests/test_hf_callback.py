"""ForecastCallback: the Hugging Face Trainer's evaluations logged in the run format, and the
trainer's advisor asked every few of them. Driven by hand with TrainerState and TrainerControl
(no model) for the rows, the refusals and a stop; one real tiny Trainer run for the rows it logs."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("transformers")

from transformers import TrainerControl, TrainerState  # noqa: E402

from forecast.curves import sigmoid_curve  # noqa: E402
from forecast.data import how_run_folder_ended, load_runs  # noqa: E402
from forecast.hf_callback import ForecastCallback  # noqa: E402

FLOPS_PER_STEP = 1e9


@pytest.fixture
def args():
    """The Trainer's arguments as the callback reads them (the seed); a TrainingArguments needs accelerate."""
    return SimpleNamespace(seed=3)


def evaluate(callback, args, state, step, metrics, flops_per_step=FLOPS_PER_STEP):
    """One evaluation as the Trainer makes it: the step's end (which may ask for a log), then on_evaluate."""
    control = TrainerControl(should_evaluate=True)
    state.global_step = step
    state.total_flos = step * flops_per_step
    callback.on_step_end(args, state, control)
    assert control.should_log  # the Trainer brings total_flos up to date before it evaluates
    return callback.on_evaluate(args, state, control, metrics=metrics)


def log_lines(folder):
    return (folder / "evals.jsonl").read_text().splitlines()


def test_importing_forecast_does_not_import_transformers():
    code = "import sys, forecast, forecast.early_stop; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_each_evaluation_is_appended_as_a_row_of_the_run_format(tmp_path, args):
    folder = tmp_path / "runs" / "lr3e-4"
    callback = ForecastCallback(folder, metric="pass_rate", recipe="sft-lr3e-4", n_eval=500)
    state = TrainerState(max_steps=100)
    callback.on_train_begin(args, state, TrainerControl())
    evaluate(callback, args, state, 0, {"eval_pass_rate": 0.10})  # before training: no compute, not logged
    assert not (folder / "evals.jsonl").exists()
    evaluate(callback, args, state, 10, {"eval_pass_rate": 0.25, "eval_loss": 2.1})
    first = log_lines(folder)
    evaluate(callback, args, state, 20, {"eval_pass_rate": 0.31, "eval_loss": 1.9})
    lines = log_lines(folder)
    assert len(lines) == 2 and lines[0] == first[0]  # appended; the earlier row as it was
    assert json.loads(lines[1]) == {"run_id": "lr3e-4", "recipe": "sft-lr3e-4", "compute": 20 * FLOPS_PER_STEP,
                                    "compute_unit": "flops", "metric": 0.31, "step": 20, "seed": 3, "n_eval": 500,
                                    "planned_compute": 100 * FLOPS_PER_STEP}  # compute per step x max_steps
    evaluate(callback, args, state, 20, {"eval_pass_rate": 0.33})  # trainer.evaluate() after train(): logged already
    assert len(log_lines(folder)) == 2

    runs = load_runs(tmp_path / "runs")  # forecast reads the folder as a folder of run logs
    assert list(runs["metric"]) == [0.25, 0.31] and set(runs["run_id"]) == {"lr3e-4"}
    assert how_run_folder_ended(folder) == ""  # in flight
    callback.on_train_end(args, state, TrainerControl())
    assert how_run_folder_ended(folder) == "finished"
    assert json.loads((folder / "summary.json").read_text())["stopped"] is False


@pytest.mark.parametrize("value, said", [(1.5, "is 1.5"), (37.0, "divide it by 100"), (100.0, "divide it by 100"),
                                         (float("nan"), "not a finite")])
def test_a_metric_that_is_not_a_rate_is_refused_naming_key_and_step(tmp_path, args, value, said):
    callback = ForecastCallback(tmp_path / "run", metric="eval_pass_rate")
    state = TrainerState(max_steps=100)
    callback.on_train_begin(args, state, TrainerControl())
    with pytest.raises(ValueError, match=rf"'eval_pass_rate' at step 10 .*{said}|'eval_pass_rate' at step 10 is {said}"):
        evaluate(callback, args, state, 10, {"eval_pass_rate": value})
    assert not (tmp_path / "run" / "evals.jsonl").exists()


def test_a_metric_missing_from_the_evaluation_is_refused_naming_what_it_has(tmp_path, args):
    callback = ForecastCallback(tmp_path / "run", metric="accuracy")
    with pytest.raises(ValueError, match=r"'eval_accuracy' is not among the evaluation's metrics at step 4 \(it has: eval_loss\)"):
        evaluate(callback, args, TrainerState(max_steps=10), 4, {"eval_loss": 0.3})


@pytest.mark.parametrize("n_eval", [0, -3, 2.5, True, 10**30, 2**53 + 1, 10**12 + 1])
def test_an_n_eval_the_fit_cannot_use_is_refused_when_the_callback_is_made(tmp_path, n_eval):
    """10**30 was taken, written on every row of the run's log, and fitted as another number (the fit
    reads n_eval as a float, exact to 2**53); the same rule as a run table's column and the pruner's."""
    with pytest.raises(ValueError, match=re.escape("n_eval must be a whole number of graded samples from 1 to 10**12, "
                                                   f"or None, got {n_eval!r}")):
        ForecastCallback(tmp_path / "run", n_eval=n_eval)
    assert ForecastCallback(tmp_path / "run", n_eval=10**12).n_eval == 10**12


@pytest.mark.parametrize("kwargs, said", [({"priros": None}, "priros"), ({"robust": "yes"}, "robust"),
                                           ("priors", "a dict")])
def test_forecaster_kwargs_the_fit_would_refuse_are_refused_when_the_callback_is_made(tmp_path, kwargs, said):
    # not at the advisor's first ask, after the compute of advise_every evaluations was spent
    with pytest.raises((TypeError, ValueError), match=rf"forecaster_kwargs.*{said}"):
        ForecastCallback(tmp_path / "run", forecaster_kwargs=kwargs)


def test_compute_that_does_not_grow_is_refused_naming_the_step(tmp_path, args):
    callback = ForecastCallback(tmp_path / "run")
    state = TrainerState(max_steps=100)
    evaluate(callback, args, state, 10, {"eval_pass_rate": 0.2})
    with pytest.raises(ValueError, match=r"state.total_flos at step 20 is 1e\+10, not above 1e\+10 at step 10"):
        evaluate(callback, args, state, 20, {"eval_pass_rate": 0.3}, flops_per_step=FLOPS_PER_STEP / 2)
    no_flops = ForecastCallback(tmp_path / "other")  # a model the Trainer cannot count FLOPs for
    with pytest.raises(ValueError, match=r"total_flos at step 10 is 0.*give compute_fn"):
        evaluate(no_flops, args, TrainerState(max_steps=100), 10, {"eval_pass_rate": 0.2}, flops_per_step=0)


def test_compute_fn_gives_the_compute_and_its_unit(tmp_path, args):
    callback = ForecastCallback(tmp_path / "run", compute_fn=lambda state: state.global_step * 0.5,
                                compute_unit="gpu_hours")
    control = TrainerControl(should_evaluate=True)
    callback.on_step_end(args, TrainerState(global_step=8), control)
    assert not control.should_log  # the Trainer's own count is not read: no log asked for
    callback.on_evaluate(args, TrainerState(global_step=8, max_steps=80), control, metrics={"eval_pass_rate": 0.4})
    row = json.loads(log_lines(tmp_path / "run")[0])
    assert (row["compute"], row["compute_unit"]) == (4.0, "gpu_hours")


def test_a_resumed_run_drops_the_rows_after_its_checkpoint(tmp_path, args):
    folder = tmp_path / "run"
    callback = ForecastCallback(folder)
    state = TrainerState(max_steps=100)
    for step, metric in ((10, 0.2), (20, 0.3), (30, 0.4)):
        evaluate(callback, args, state, step, {"eval_pass_rate": metric})
    callback.on_train_end(args, state, TrainerControl())

    resumed = ForecastCallback(folder)  # a new process, resuming from the checkpoint at step 20
    resumed.on_train_begin(args, TrainerState(global_step=20, max_steps=100), TrainerControl())
    assert [json.loads(line)["step"] for line in log_lines(folder)] == [10, 20]
    assert how_run_folder_ended(folder) == ""  # in flight again
    evaluate(resumed, args, TrainerState(max_steps=100), 30, {"eval_pass_rate": 0.45})
    assert [json.loads(line)["metric"] for line in log_lines(folder)] == [0.2, 0.3, 0.45]

    with pytest.raises(RuntimeError, match=r"already holds 3 evaluation\(s\).*another run_dir"):
        ForecastCallback(folder).on_train_begin(args, TrainerState(), TrainerControl())  # a new run from step 0
    (folder / "evals.jsonl").write_text(log_lines(folder)[0] + "\n" + '{"run_id": "run", "recipe": "run", '
                                        '"compute": 2e10, "metric": 1.5, "step": 20}\n')
    with pytest.raises(Exception, match=r"evals.jsonl.*metric"):  # an edited row: refused before training
        ForecastCallback(folder).on_train_begin(args, TrainerState(global_step=20), TrainerControl())


def test_a_row_cut_off_by_a_kill_is_dropped_when_the_run_resumes(tmp_path, args):
    """The torn last line a kill leaves is skipped by readers; appended to, it became a broken line in
    the middle of the log, which forecast (load_runs, watch, report) and the next resume refuse."""
    folder = tmp_path / "run"
    callback = ForecastCallback(folder)
    state = TrainerState(max_steps=100)
    for step, metric in ((10, 0.2), (20, 0.3)):
        evaluate(callback, args, state, step, {"eval_pass_rate": metric})
    with open(folder / "evals.jsonl", "a") as log:
        log.write('{"run_id": "run", "recipe": "run", "comp')  # killed while it wrote the row of step 30

    resumed = ForecastCallback(folder)  # from the checkpoint at step 20
    resumed.on_train_begin(args, TrainerState(global_step=20, max_steps=100), TrainerControl())
    evaluate(resumed, args, TrainerState(max_steps=100), 30, {"eval_pass_rate": 0.4})
    assert list(load_runs(folder)["step"]) == [10, 20, 30]
    ForecastCallback(folder).on_train_begin(args, TrainerState(global_step=30, max_steps=100), TrainerControl())


def test_zeros_a_crash_left_at_the_log_s_end_are_dropped_on_resume_and_said(tmp_path, args, caplog):
    """A crash leaves zeros (NUL bytes) where writes were lost: at the log's end, the resume dropped them as a torn
    line without a word, where the trainer's --resume says them (repair_jsonl): rows up to the checkpoint may be gone
    for good. Zeros followed by rows are refused, naming the log, as the trainer's resume and forecast refuse them."""
    folder = tmp_path / "run"
    callback = ForecastCallback(folder)
    for step, metric in ((10, 0.2), (20, 0.3), (30, 0.4)):
        evaluate(callback, args, TrainerState(max_steps=100), step, {"eval_pass_rate": metric})
    rows = (folder / "evals.jsonl").read_bytes()
    last_row = rows.splitlines(keepends=True)[-1]
    (folder / "evals.jsonl").write_bytes(rows[: -len(last_row)] + b"\x00" * 4096)  # the page of step 30, never written

    with caplog.at_level(logging.WARNING, logger="forecast.hf_callback"):
        ForecastCallback(folder).on_train_begin(args, TrainerState(global_step=30, max_steps=100), TrainerControl())
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == [f"ForecastCallback: {folder / 'evals.jsonl'}: dropped its last 4096 bytes, zeros (NUL bytes) a "
                    "crash left where writes were lost; its rows now end at step 20, and the run resumes after step 30"]
    assert [json.loads(line)["step"] for line in log_lines(folder)] == [10, 20]

    kept = (folder / "evals.jsonl").read_bytes()
    (folder / "evals.jsonl").write_bytes(b"\x00" * 64 + b"\n" + kept)  # zeros, then rows: damage, not a torn line
    with pytest.raises(Exception, match=re.escape("evals.jsonl: holds NUL bytes (zeros) from byte offset 0, on line 1")):
        ForecastCallback(folder).on_train_begin(args, TrainerState(global_step=20, max_steps=100), TrainerControl())
    assert (folder / "evals.jsonl").read_bytes() == b"\x00" * 64 + b"\n" + kept  # not rewritten without them


def test_a_log_line_that_is_not_utf8_is_refused_naming_the_log_and_line(tmp_path, args):
    """A resumed run whose evals.jsonl holds bytes that are not UTF-8 (a file edited by a tool saving Latin-1)
    was refused by a bare UnicodeDecodeError naming neither the file nor the line."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "evals.jsonl").write_bytes(b'{"run_id": "run", "step": 10}\n{"recipe": "caf\xe9"}\n')
    with pytest.raises(Exception, match=r"evals.jsonl.*line 2 is not UTF-8 text") as refused:
        ForecastCallback(folder).on_train_begin(args, TrainerState(global_step=10), TrainerControl())
    assert not isinstance(refused.value, UnicodeDecodeError)


def test_a_log_line_that_is_not_json_is_refused_with_what_json_said(tmp_path, args):
    """A resumed run whose evals.jsonl holds a broken line (a row edited by hand, a trailing comma) was
    refused as "line 2 is not valid JSON" alone: json's own account of what is wrong, and where on the
    line, was dropped, so a long row had to be searched by eye."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "evals.jsonl").write_text('{"run_id": "run", "step": 10}\n{"run_id": "run", "step": 20,}\n')
    with pytest.raises(Exception, match=r"evals\.jsonl.*line 2 is not valid JSON "
                                        r"\(Expecting property name enclosed in double quotes: column 30\)"):
        ForecastCallback(folder).on_train_begin(args, TrainerState(global_step=20), TrainerControl())


def test_an_evaluation_of_the_best_checkpoint_after_training_is_not_logged_as_the_last_step(tmp_path):
    """With load_best_model_at_end the Trainer loads the best checkpoint's weights when training ends, so
    a trainer.evaluate() after train() measures that checkpoint, not the run at its last step: a training
    ended at a step not evaluated (a time limit's callback) logged the best one's metric at the last
    step's compute, a point of no curve, after summary.json."""
    args = SimpleNamespace(seed=0, load_best_model_at_end=True)
    callback = ForecastCallback(tmp_path / "run")
    state = TrainerState(max_steps=12)
    callback.on_train_begin(args, state, TrainerControl())
    for step, metric in ((3, 0.05), (6, 0.17)):
        evaluate(callback, args, state, step, {"eval_pass_rate": metric})
    state.global_step, state.total_flos, state.best_model_checkpoint = 7, 7 * FLOPS_PER_STEP, "hf/checkpoint-6"
    callback.on_train_end(args, state, TrainerControl())
    callback.on_evaluate(args, state, TrainerControl(), metrics={"eval_pass_rate": 0.17})  # the best's weights
    assert [json.loads(line)["step"] for line in log_lines(tmp_path / "run")] == [3, 6]


# ----------------------------------------------------------------------------- a stop

GRID = [1e11 * 1.25**i for i in range(16)]  # FLOPs at each evaluation: the reference run's, and the live run's
N_EVAL = 1000


def curve(asymptote, seed):
    rng = np.random.default_rng(seed)
    return [rng.binomial(N_EVAL, sigmoid_curve(c, asymptote, 1.5, 4e11, 0.2)) / N_EVAL for c in GRID]


def test_a_run_clearly_worse_than_the_reference_is_stopped_with_the_rule_and_numbers(tmp_path, args, caplog):
    reference = tmp_path / "reference.csv"
    pd.DataFrame({"run_id": "better-s0", "recipe": "better", "compute": GRID, "compute_unit": "flops",
                  "metric": curve(0.72, 0), "n_eval": N_EVAL, "ended": "finished"}).to_csv(reference, index=False)
    folder = tmp_path / "runs" / "worse-s0"
    # asked once, at the 8th evaluation: from there the budget is 6x out, inside the rules' 8x
    callback = ForecastCallback(folder, recipe="worse", reference=reference, advise_every=8, budget=GRID[-1],
                                n_eval=N_EVAL)
    state = TrainerState(max_steps=len(GRID) * 10)
    callback.on_train_begin(args, state, TrainerControl())
    control = TrainerControl()
    for i, metric in enumerate(curve(0.42, 1)[:8], start=1):
        control = TrainerControl(should_evaluate=True)
        state.global_step, state.total_flos = 10 * i, GRID[i - 1]
        with caplog.at_level(logging.INFO, logger="forecast.hf_callback"):
            control = callback.on_evaluate(args, state, control, metrics={"eval_pass_rate": metric})
        assert control.should_training_stop == (i == 8)

    advice = json.loads((folder / "stopped.json").read_text())
    assert (advice["step"], advice["compute"]) == (80, GRID[7])
    assert advice["advice"]["action"] == "stop" and advice["advice"]["rule"] in ("beats_best", "gain_per_compute")
    assert advice["advice"]["value"] < advice["advice"]["threshold"]
    assert advice["advice"]["message"] == callback.advice.message
    assert any(r.levelno == logging.WARNING and "worse-s0 at step 80: advisor: stop: " in r.getMessage() for r in caplog.records)
    callback.on_train_end(args, state, control)
    assert how_run_folder_ended(folder) == "advisor_stopped"  # forecast watch and report say it ended so
    assert json.loads((folder / "summary.json").read_text())["stopped"] is True
    with pytest.raises(RuntimeError, match="advisor stopped this run; delete it to train on"):
        ForecastCallback(folder).on_train_begin(args, TrainerState(global_step=80), TrainerControl())


def test_a_reference_the_advisor_cannot_use_is_said_where_a_script_shows_it(tmp_path, args, caplog):
    """The advisor keeps a run training when its reference is unusable; a script without logging set
    up must still be told, or the run trains to its end never advised, and nobody knows why."""
    reference = tmp_path / "reference.csv"
    pd.DataFrame({"run_id": "better-s0", "recipe": "better", "compute": GRID, "compute_unit": "gpu_hours",
                  "metric": curve(0.72, 0), "ended": "finished"}).to_csv(reference, index=False)
    callback = ForecastCallback(tmp_path / "run", reference=reference, advise_every=4, budget=GRID[-1])
    state = TrainerState(max_steps=160)
    for i, metric in enumerate(curve(0.42, 1)[:4], start=1):
        control = TrainerControl(should_evaluate=True)
        state.global_step, state.total_flos = 10 * i, GRID[i - 1]
        with caplog.at_level(logging.WARNING, logger="forecast.hf_callback"):
            control = callback.on_evaluate(args, state, control, metrics={"eval_pass_rate": metric})
    assert callback.advice.rule == "advisor_error" and not control.should_training_stop  # trains on, as the trainer
    said = [r for r in caplog.records if r.levelno >= logging.WARNING and "reference runs unusable" in r.getMessage()]
    assert said and "compute units" in said[0].getMessage()


# ----------------------------------------------------------------------------- a real Trainer


def test_a_real_tiny_trainer_run_logs_its_evaluations(tmp_path):
    pytest.importorskip("accelerate")  # the Trainer needs it (transformers[torch])
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=16, n_positions=16))
    # a counting task: each sequence is a run of consecutive tokens, so the next token is learnable
    starts = torch.randint(0, 8, (64,))
    sequences = [{"input_ids": (s + torch.arange(8)) % 16, "labels": (s + torch.arange(8)) % 16} for s in starts]

    def pass_rate(prediction):  # share of next tokens predicted right: a rate in [0, 1]
        logits, labels = prediction
        return {"pass_rate": float((logits[:, :-1].argmax(-1) == labels[:, 1:]).mean())}

    args = TrainingArguments(output_dir=str(tmp_path / "hf"), max_steps=6, eval_strategy="steps", eval_steps=2,
                             logging_steps=100,  # no log of its own before the evaluations: the callback asks for them
                             per_device_train_batch_size=8, per_device_eval_batch_size=32, learning_rate=1e-2,
                             save_strategy="no", report_to="none", use_cpu=True, disable_tqdm=True, seed=0)
    callback = ForecastCallback(tmp_path / "runs" / "tiny", metric="pass_rate", advise_every=0)
    trainer = Trainer(model=model, args=args, train_dataset=sequences, eval_dataset=sequences[:32],
                      compute_metrics=pass_rate, callbacks=[callback])
    trainer.train()

    runs = load_runs(tmp_path / "runs")
    assert list(runs["step"]) == [2, 4, 6]
    compute = runs["compute"].to_numpy()
    assert compute[0] > 0 and np.all(np.diff(compute) > 0)
    assert compute[-1] == pytest.approx(trainer.state.total_flos)  # the Trainer's own count, up to date at each evaluation
    assert runs["metric"].between(0, 1).all()
    assert how_run_folder_ended(tmp_path / "runs" / "tiny") == "finished"


def test_a_trainer_that_counts_no_flops_is_refused_after_its_first_step(tmp_path):
    """A Trainer that counts no FLOPs (a model without floating_point_ops, as here; batches without
    input_ids, as TRL's GRPOTrainer's) left state.total_flos at 0, refused only at the first evaluation:
    after eval_steps steps of compute, which in an RL run is hours of generation."""
    pytest.importorskip("accelerate")
    import torch
    from transformers import Trainer, TrainingArguments

    class Regression(torch.nn.Module):  # no floating_point_ops: the Trainer's count of its FLOPs is 0
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(1, 1)

        def forward(self, x, labels=None):
            prediction = self.linear(x)
            return {"loss": torch.nn.functional.mse_loss(prediction, labels), "logits": prediction}

    points = [{"x": torch.tensor([float(i)]), "labels": torch.tensor([2.0 * i])} for i in range(16)]
    args = TrainingArguments(output_dir=str(tmp_path / "hf"), max_steps=6, eval_strategy="steps", eval_steps=3,
                             logging_steps=100, per_device_train_batch_size=4, save_strategy="no", report_to="none",
                             use_cpu=True, disable_tqdm=True)
    trainer = Trainer(model=Regression(), args=args, train_dataset=points, eval_dataset=points,
                      compute_metrics=lambda prediction: {"pass_rate": 0.5},
                      callbacks=[ForecastCallback(tmp_path / "run", metric="pass_rate")])
    with pytest.raises(ValueError, match=r"counted no FLOPs in training step 1 \(state.total_flos is 0\).*give compute_fn"):
        trainer.train()
    assert trainer.state.global_step == 1  # not after the compute of eval_steps steps
    assert not (tmp_path / "run" / "evals.jsonl").exists()


def test_evaluations_of_other_datasets_are_not_this_metrics(tmp_path):
    """Several eval datasets (eval_dataset={"a": ..., "b": ...}) are evaluated one by one, each its own
    on_evaluate with keys eval_<name>_*, and a test set evaluated after training has keys test_*: neither
    is the metric's evaluation, and neither may end training or the user's evaluate() with an error."""
    pytest.importorskip("accelerate")
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=16, n_positions=16))
    starts = torch.randint(0, 8, (64,))
    sequences = [{"input_ids": (s + torch.arange(8)) % 16, "labels": (s + torch.arange(8)) % 16} for s in starts]

    def pass_rate(prediction):
        logits, labels = prediction
        return {"pass_rate": float((logits[:, :-1].argmax(-1) == labels[:, 1:]).mean())}

    args = TrainingArguments(output_dir=str(tmp_path / "hf"), max_steps=4, eval_strategy="steps", eval_steps=2,
                             per_device_train_batch_size=8, per_device_eval_batch_size=32, learning_rate=1e-2,
                             save_strategy="no", report_to="none", use_cpu=True, disable_tqdm=True, seed=0)
    callback = ForecastCallback(tmp_path / "runs" / "tiny", metric="eval_hard_pass_rate", advise_every=0)
    trainer = Trainer(model=model, args=args, train_dataset=sequences,
                      eval_dataset={"easy": sequences[:16], "hard": sequences[16:32]},
                      compute_metrics=pass_rate, callbacks=[callback])
    trainer.train()
    history = [(h["step"], h["eval_hard_pass_rate"]) for h in trainer.state.log_history if "eval_hard_pass_rate" in h]
    assert [(r["step"], r["metric"]) for r in map(json.loads, log_lines(tmp_path / "runs" / "tiny"))] == history
    assert trainer.evaluate(sequences[32:], metric_key_prefix="test")["test_pass_rate"] >= 0  # not refused
    assert len(log_lines(tmp_path / "runs" / "tiny")) == 2

    unnamed = ForecastCallback(tmp_path / "other", metric="pass_rate")  # which dataset's? said, not guessed
    metrics = {"eval_easy_loss": 2.0, "eval_easy_pass_rate": 0.3, "eval_easy_runtime": 0.1}
    with pytest.raises(ValueError, match=r"'eval_pass_rate' is not among .* at step 2 .*'eval_easy_pass_rate'"):
        evaluate(unnamed, SimpleNamespace(seed=0), TrainerState(max_steps=10), 2, metrics)


def test_forecast_watch_takes_the_planned_budget_from_the_callbacks_log(tmp_path, args):
    """The callback's folder has no trainer config.json (it may be the Trainer's output_dir, whose
    config.json is the model's): watch read no budget and said "continue: no planned budget known"
    at every check. The log's planned_compute gives it."""
    from forecast.watch import planned_budget

    folder = tmp_path / "runs" / "a"
    callback = ForecastCallback(folder, metric="pass_rate", advise_every=0)
    state = TrainerState(max_steps=50)
    callback.on_train_begin(args, state, TrainerControl())
    for step in (10, 20):
        evaluate(callback, args, state, step, {"eval_pass_rate": 0.2 + step / 100})
    rows = load_runs(tmp_path / "runs")
    assert planned_budget(folder, rows) == pytest.approx(50 * FLOPS_PER_STEP)
    assert planned_budget(folder, rows, override=7.0) == 7.0

    fixed = ForecastCallback(tmp_path / "runs" / "b", metric="pass_rate", advise_every=0, budget=3e12)
    fixed_state = TrainerState(max_steps=50)
    fixed.on_train_begin(args, fixed_state, TrainerControl())
    for step in (10, 20):
        evaluate(fixed, args, fixed_state, step, {"eval_pass_rate": 0.2 + step / 100})
    assert planned_budget(tmp_path / "runs" / "b", load_runs(tmp_path / "runs" / "b")) == 3e12


# ----------------------------------------------------------------------------- TRL's GRPOTrainer


def tiny_grpo_trainer(tmp_path, max_steps):
    """A GRPOTrainer on a GPT-2 of 15k parameters with a character tokenizer (nothing downloaded),
    rewarded 1 for a completion that starts with the sum its prompt asks for."""
    pytest.importorskip("trl")
    import torch
    import transformers
    from datasets import Dataset
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from trl import GRPOConfig, GRPOTrainer

    from trainer_minimal.tokenizer import CharTokenizer

    torch.manual_seed(0)
    chars = CharTokenizer()
    characters = Tokenizer(models.WordLevel(dict(zip(chars.itos, range(chars.vocab_size), strict=True)), unk_token="<pad>"))
    characters.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")  # one token per character
    characters.decoder = decoders.Fuse()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=characters, bos_token="<bos>", pad_token="<pad>",
                                                     eos_token="<eos>")
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=chars.vocab_size, n_embd=32, n_layer=1, n_head=2, n_positions=64, bos_token_id=1, eos_token_id=2,
        pad_token_id=0))
    sums = Dataset.from_dict({"prompt": [f"{a}+{b}=" for a in range(4) for b in range(4)],
                              "answer": [str(a + b) for a in range(4) for b in range(4)]})

    def pass_rate(completions, answer, **kwargs):
        return [float(completion.startswith(right)) for completion, right in zip(completions, answer, strict=True)]

    args = GRPOConfig(output_dir=str(tmp_path / "hf"), max_steps=max_steps, per_device_train_batch_size=4,
                      num_generations=2, max_completion_length=4, eval_strategy="steps", eval_steps=2,
                      per_device_eval_batch_size=4, logging_steps=100, save_strategy="no", report_to="none",
                      use_cpu=True, disable_tqdm=True, seed=0, bf16=False)
    return GRPOTrainer(model=model, reward_funcs=pass_rate, args=args, train_dataset=sums,
                       eval_dataset=sums.select(range(4)), processing_class=tokenizer)


def test_in_trls_grpo_trainer_the_generation_compute_comes_from_compute_fn(tmp_path):
    """As the README says: GRPOTrainer's evaluation has each reward function's mean (a pass rate for a
    0/1 reward) among its metrics, and its total_flos stays 0, so compute_fn gives the compute."""
    trainer = tiny_grpo_trainer(tmp_path, max_steps=4)
    n_params = trainer.model.num_parameters()

    def generation_flops(state):  # the README's: about 2 FLOPs a parameter to generate each token, 6 to train on it
        return 8 * n_params * state.num_input_tokens_seen

    trainer.add_callback(ForecastCallback(tmp_path / "runs" / "grpo", metric="rewards/pass_rate/mean",
                                          advise_every=0, compute_fn=generation_flops))
    trainer.train()
    assert trainer.state.total_flos == 0
    history = [(h["step"], h["eval_rewards/pass_rate/mean"]) for h in trainer.state.log_history
               if "eval_rewards/pass_rate/mean" in h]
    runs = load_runs(tmp_path / "runs")
    assert list(zip(runs["step"], runs["metric"], strict=True)) == history and list(runs["step"]) == [2, 4]
    assert np.all(np.diff(runs["compute"]) > 0)
    assert runs["compute"].iloc[-1] == 8 * n_params * trainer.state.num_input_tokens_seen
    assert how_run_folder_ended(tmp_path / "runs" / "grpo") == "finished"

    counting_nothing = tiny_grpo_trainer(tmp_path, max_steps=4)
    counting_nothing.add_callback(ForecastCallback(tmp_path / "runs" / "grpo-flops", metric="rewards/pass_rate/mean"))
    with pytest.raises(ValueError, match=r"counted no FLOPs in training step 1 .*GRPOTrainer.*give compute_fn"):
        counting_nothing.train()  # at once, not after the steps up to the first evaluation


@pytest.mark.parametrize("seed", [-1, "0", True, 1.5])
def test_a_random_seed_the_fit_would_refuse_is_refused_when_the_callback_is_made(tmp_path, seed):
    # it failed at the advisor's first ask, out of trainer.train(), after that compute was spent
    with pytest.raises(ValueError, match=re.escape(f"random_seed must be an integer >= 0 or None, got {seed!r}")):
        ForecastCallback(tmp_path / "run", random_seed=seed)


def test_a_random_seed_of_none_or_numpy_reaches_the_advisor(tmp_path, args, monkeypatch):
    """None leaves the advisor's fits unseeded (it was "unsupported operand type(s) for +: 'NoneType' and
    'int'" at the first ask); a numpy integer is a seed like any other."""
    import forecast.hf_callback as hf_callback

    asked = []

    def advice(**kwargs):
        asked.append(kwargs["random_seed"])
        return hf_callback.Recommendation("continue", "too_early", "continue: too early")

    monkeypatch.setattr(hf_callback, "trainer_advice", advice)
    for folder, seed in (("unseeded", None), ("numpy", np.int64(3))):
        callback = ForecastCallback(tmp_path / folder, random_seed=seed)
        state = TrainerState(max_steps=100)
        callback.on_train_begin(args, state, TrainerControl())
        evaluate(callback, args, state, 10, {"eval_pass_rate": 0.2})
    assert asked == [None, 4]


def test_stop_rules_given_as_a_dict_are_refused_in_the_words_of_every_other_front_door(tmp_path):
    # ForecastCallback had a check of its own, without the example the others give
    with pytest.raises(TypeError, match=re.escape("config must be a forecast.early_stop.EarlyStopConfig (e.g. "
                                                  "EarlyStopConfig(margin=0.02)), got dict")):
        ForecastCallback(tmp_path / "run", config={"margin": 0.02})


# ----------------------------------------------------------------------------- edges of the rows and the asks


def test_a_pass_rate_of_zero_at_the_first_step_is_logged_and_a_bool_is_refused(tmp_path, args):
    """An RL run's first evaluations often solve nothing (a pass rate of 0.0), and a run may evaluate
    after its first step: both are points of the curve. True is not a rate, though Python counts it 1."""
    callback = ForecastCallback(tmp_path / "run")
    state = TrainerState(max_steps=100)
    callback.on_train_begin(args, state, TrainerControl())
    evaluate(callback, args, state, 1, {"eval_pass_rate": 0.0})
    assert [(row["step"], row["metric"]) for row in map(json.loads, log_lines(tmp_path / "run"))] == [(1, 0.0)]
    with pytest.raises(ValueError, match=r"'eval_pass_rate' at step 2 is True, not a finite number"):
        evaluate(callback, args, state, 2, {"eval_pass_rate": True})
    assert len(log_lines(tmp_path / "run")) == 1


def test_a_metric_under_its_own_name_is_read_as_given(tmp_path, args):
    # metrics a caller hands on_evaluate without the Trainer's "eval_" prefix are read under the name given
    callback = ForecastCallback(tmp_path / "run", metric="pass_rate")
    evaluate(callback, args, TrainerState(max_steps=100), 10, {"pass_rate": 0.3})
    assert json.loads(log_lines(tmp_path / "run")[0])["metric"] == 0.3


def test_a_row_of_a_run_without_max_steps_or_budget_carries_no_planned_compute(tmp_path, args):
    # a planned_compute of 0 is no budget: forecast watch would read it as one
    callback = ForecastCallback(tmp_path / "run", advise_every=0)
    evaluate(callback, args, TrainerState(), 10, {"eval_pass_rate": 0.3})
    assert "planned_compute" not in json.loads(log_lines(tmp_path / "run")[0])


def test_the_advisor_is_not_asked_at_max_steps(tmp_path, args, monkeypatch):
    """The run ends at max_steps anyway: a fit there costs time and a stop would mark a finished run
    as stopped by its advisor."""
    import forecast.hf_callback as hf_callback

    asked = []

    def advice(**kwargs):
        asked.append(len(kwargs["evals"]))
        return hf_callback.Recommendation("continue", "too_early", "continue: too early")

    monkeypatch.setattr(hf_callback, "trainer_advice", advice)
    callback = ForecastCallback(tmp_path / "run")
    state = TrainerState(max_steps=30)
    callback.on_train_begin(args, state, TrainerControl())
    for step in (10, 20, 30):
        evaluate(callback, args, state, step, {"eval_pass_rate": step / 100})
    assert asked == [1, 2] and len(log_lines(tmp_path / "run")) == 3


def test_a_log_before_the_first_step_is_not_taken_for_a_trainer_that_counts_no_flops(tmp_path, args):
    """eval_on_start evaluates, and logs its metrics, at step 0, before any step trained: total_flos is
    still 0 there, which says nothing of whether the Trainer counts FLOPs."""
    callback = ForecastCallback(tmp_path / "run")
    state = TrainerState(max_steps=10)
    callback.on_train_begin(args, state, TrainerControl())
    callback.on_log(args, state, TrainerControl(), logs={"eval_pass_rate": 0.0})  # step 0: not refused
    state.global_step, state.total_flos = 1, FLOPS_PER_STEP
    callback.on_log(args, state, TrainerControl(), logs={"loss": 2.0})
    state.global_step = 2  # a second step the Trainer counted nothing for is not asked about again
    callback.on_log(args, state, TrainerControl(), logs={"loss": 1.9})


def test_a_misnamed_metric_of_the_trainers_one_eval_dataset_is_refused_not_passed_over(tmp_path, args):
    # the Trainer adds eval_runtime to each evaluation's metrics: a typo must not read as another dataset's
    callback = ForecastCallback(tmp_path / "run", metric="eval_pass_rat")
    metrics = {"eval_loss": 0.3, "eval_pass_rate": 0.2, "eval_runtime": 0.1}
    with pytest.raises(ValueError, match=r"'eval_pass_rat' is not among the evaluation's metrics at step 4"):
        evaluate(callback, args, TrainerState(max_steps=10), 4, metrics)
    # a metric of compute_metrics' own ending in _runtime makes the evaluation's prefix unknown: refused all the same
    metrics = {"eval_generation_runtime": 3.0, "eval_loss": 0.3, "eval_runtime": 0.1}
    with pytest.raises(ValueError, match=r"'eval_pass_rat' is not among the evaluation's metrics at step 4"):
        evaluate(callback, args, TrainerState(max_steps=10), 4, metrics)
