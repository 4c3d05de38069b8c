"""Early-stop advice inside Hugging Face's Trainer (and TRL's trainers, which subclass it).

    from transformers import Trainer
    from forecast.hf_callback import ForecastCallback

    advisor = ForecastCallback("runs/my-run", metric="eval_pass_rate", recipe="my-recipe",
                               reference="out/trainer_sweep", advise_every=2)
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=val,
                      compute_metrics=pass_rate, callbacks=[advisor])
    trainer.train()

What it does at each evaluation (on_evaluate, with the Trainer's metrics dict): takes the metric
named by `metric` (a pass rate in [0, 1]; "pass_rate" is read as "eval_pass_rate", as the Trainer's
own metric_for_best_model reads it) and the compute so far, and appends one row in the run format
(docs/run_format.md) to RUN_DIR/evals.jsonl: append-only, flushed at once, as trainer_minimal logs,
so `forecast watch`, `report` and `backtest` read the folder as one of trainer_minimal's run
folders. Every `advise_every` evaluations it asks the trainer's advisor
(forecast.early_stop.trainer_advice: the same rules, defaults and fits as `trainer-minimal train
--advisor-every`), comparing the run with the runs of `reference` (finished runs of other recipes,
a run table or folder, as --advisor-reference) at its planned budget. On "stop" it sets
`control.should_training_stop`, writes RUN_DIR/stopped.json (step, compute and the advice: rule,
probability, value, threshold, message, details), as trainer_minimal writes it, and logs the advice
(logger "forecast.hf_callback": a stop at warning level, which a script without logging set up still
shows; a continue at info, but one given for want of a usable reference at warning). When
training ends, RUN_DIR/summary.json marks the run as ended (stopped by its advisor when stopped.json
is there, finished otherwise), so `forecast watch` stops advising it. It is not asked at max_steps: the run ends there anyway.

Compute: by default `state.total_flos`, the FLOPs the Trainer counts for training (6 x parameters x
tokens of each batch it trains on, summed over processes). It leaves out the FLOPs of generation,
which in an RL trainer are most of the run (TRL's GRPOTrainer counts none at all, see below): give
`compute_fn(state) -> float` (FLOPs of your own count, GPU-hours, ...; with `compute_unit` naming
the unit) for those.
The Trainer adds its count into total_flos only when it logs or saves, so at an evaluation
between two logging steps total_flos lags behind (at an evaluation before the first log, it is 0):
this callback asks the Trainer to log at every step it evaluates (control.should_log, in on_step_end
and on_epoch_end), which puts the count up to date first (one more line of training loss in the
logs per evaluation), and at the first step it trains, where a Trainer that counts no FLOPs is
refused at once, not after the compute of the steps up to the first evaluation. The Trainer counts
them only for a model with floating_point_ops (a PreTrainedModel) on batches holding its main input
("input_ids"), which TRL's GRPOTrainer's and RLOOTrainer's do not (they are the dataset's prompts,
tokenized as they generate), so their total_flos stays 0: give compute_fn there. A compute that
does not grow from one evaluation to the next is refused, naming the step.

Planned budget (what the run is forecast at): `budget` in compute units, or by default the compute
per step so far times the Trainer's max_steps; each row carries it (column planned_compute), where
`forecast watch` takes it (the folder has no trainer config.json: it may be the Trainer's output_dir,
whose config.json is the model's). Rows of the reference must be in the same compute unit.

Refused with a ValueError that names the key and the step, before anything is written: a metric
outside [0, 1] (a loss, a percentage), missing from the evaluation's metrics, or not a number. The
evaluation of another of several eval datasets (eval_dataset={"easy": ..., "hard": ...}: metric
"eval_hard_pass_rate" is read at the "hard" one's) or of a test set after training
(trainer.evaluate(test, metric_key_prefix="test")) is not the metric's, and is passed over. An
evaluation before training (eval_on_start: no compute yet, which the run format cannot hold) is not
logged; a second evaluation at a step already logged (trainer.evaluate() after train()) is not
logged again, nor one after train() of the best checkpoint that load_best_model_at_end loaded (it is
not the run at its last step).

Resuming (trainer.train(resume_from_checkpoint=...)): rows logged after the checkpoint's step are
dropped from the log (the resumed run logs them again), and a last row cut off by a kill, as
trainer_minimal's --resume does, and a summary.json from an earlier end is removed (the run is in
flight again). Zeros (NUL bytes) a crash left at the log's end are dropped too, and said at warning
level, naming the log, how many bytes and where its rows now end; zeros followed by rows are refused.
A run its advisor stopped (stopped.json) is not trained on: delete stopped.json to go on. A run
started from step 0 in a folder whose log holds rows is refused: those rows belong to another run
(give another folder). The log's rows are checked as forecast reads them before any training, so an edited row fails at once, naming
the log, column and row, not at the advisor's next check.

Several processes (torchrun, accelerate): the first process writes the files and asks the advisor,
and its answer is sent to the others (torch.distributed), so every process stops at the same step.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
from collections.abc import Callable
from pathlib import Path

from transformers import TrainerCallback

from .data import N_EVAL_RULE, RunDataError, is_usable_n_eval
from .early_stop import (
    EarlyStopConfig,
    Recommendation,
    check_random_seed,
    checked_forecaster_kwargs,
    checked_rules,
    rests_on_an_unconverged_fit,
    seed_of_fit,
    trainer_advice,
    what_did_not_converge,
)
from .io import (
    atomic_write_json,
    atomic_write_text,
    dropped_zeros_message,
    read_complete_jsonl,
    torn_last_line,
)

__all__ = ["ForecastCallback"]

logger = logging.getLogger(__name__)

RUN_LOG = "evals.jsonl"  # forecast.data.RUN_LOG_NAME, without importing pandas at import time
STOPPED = "stopped.json"
SUMMARY = "summary.json"
NO_FLOPS_COUNTED = ("; the Trainer counts FLOPs only for a model with floating_point_ops (a PreTrainedModel) on "
                    "batches holding its main input ('input_ids'), which TRL's GRPOTrainer's and RLOOTrainer's do not "
                    "(their batches are the dataset's prompts, tokenized as they generate): give compute_fn(state), "
                    "a count of your own (from state.num_input_tokens_seen, say), with compute_unit")


def metric_key(metric: str, metrics: dict) -> str:
    """The key of `metric` in the Trainer's metrics: the name as given, or with the "eval_" prefix
    the Trainer puts before compute_metrics' keys (as its metric_for_best_model is read)."""
    if metric in metrics or metric.startswith("eval_"):
        return metric
    return f"eval_{metric}"


def evaluation_prefix(metrics: dict) -> str | None:
    """This evaluation's metric_key_prefix ("eval", "eval_<dataset>" for one of several eval datasets,
    "test" for a trainer.evaluate(..., metric_key_prefix="test")), read from the <prefix>_runtime the
    Trainer adds to each evaluation's metrics; None where it is not there to read."""
    prefixes = [key[:-len("_runtime")] for key in metrics if isinstance(key, str) and key.endswith("_runtime")]
    return prefixes[0] if len(prefixes) == 1 else None


def of_another_evaluation(key: str, metrics: dict) -> bool:
    """True when `key` is missing because these metrics are another evaluation's: another of several
    eval datasets (each is evaluated, and on_evaluate called, on its own), or a test set evaluated
    after training. A metric named without its dataset ("eval_pass_rate" where the datasets' keys
    are "eval_<name>_pass_rate") is this evaluation's, so that it is refused, not never logged."""
    prefix = evaluation_prefix(metrics)
    if key in metrics or prefix is None or key.startswith(f"{prefix}_"):
        return False
    return not (prefix.startswith("eval_") and key.startswith("eval_") and f"{prefix}_{key[5:]}" in metrics)


def checked_rate(metrics: dict | None, metric: str, step: int) -> float:
    """The metric's value at this step as a float in [0, 1], else a ValueError naming key and step."""
    metrics = metrics or {}
    key = metric_key(metric, metrics)
    if key not in metrics:
        shown = ", ".join(sorted(map(str, metrics))) or "none"
        prefix = evaluation_prefix(metrics) or ""
        hint = (f"; with several eval datasets, name the dataset's: '{prefix}_{key[5:]}'"
                if f"{prefix}_{key[5:]}" in metrics and prefix.startswith("eval_") else "")
        raise ValueError(f"ForecastCallback: metric {key!r} is not among the evaluation's metrics at step {step} "
                         f"(it has: {shown}); name one of them (compute_metrics' keys get the prefix 'eval_'){hint}")
    value = metrics[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"ForecastCallback: metric {key!r} at step {step} is {value!r}, not a finite number")
    value = float(value)
    if not 0.0 <= value <= 1.0:
        hint = " (a percentage? divide it by 100)" if 1.0 < value <= 100.0 else ""
        raise ValueError(f"ForecastCallback: metric {key!r} at step {step} is {value:g}; the forecaster needs a "
                         f"rate in [0, 1] that rises with compute, such as a pass rate{hint}")
    return value


def read_log_rows(path: Path) -> list[dict]:
    """The complete rows of a run log; a torn last line (a write cut off by a kill) is left out."""
    return read_complete_jsonl(path, lambda what: RunDataError(what, source=path))


def ends_in_a_torn_line(path: Path) -> bool:
    """Whether the log's last line was cut off by a kill (it does not end in a newline)."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb") as log:
        log.seek(-1, os.SEEK_END)
        return log.read(1) != b"\n"


def broadcast_from_first_process(value):
    """`value` as the first process has it, on every process of a torch.distributed group; as it is
    where there is no group (one process). Every process calls it at the same evaluation."""
    try:
        import torch.distributed as dist
    except ImportError:
        return value
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


class ForecastCallback(TrainerCallback):
    """Log each evaluation in the run format and stop training when the forecaster advises it.

    Parameters
    ----------
    run_dir : the run's folder: evals.jsonl, stopped.json and summary.json go there (made if missing).
        Give each run its own; a sweep's runs side by side in one parent folder read as a sweep.
    metric : key of the evaluation metric, a rate in [0, 1] that rises (default "eval_pass_rate";
        "pass_rate" is read as "eval_pass_rate").
    run_id, recipe : the run's names in the log (default: the folder's name, and the run_id). Runs of
        one recipe are pooled as seeds of it: name the recipe as the reference names it only for a
        seed of that same recipe.
    reference : run table or folder of other runs to compare with (finished runs of other recipes,
        an earlier sweep; trainer-minimal's --advisor-reference). None: only the target and
        saturation rules can stop the run.
    advise_every : ask the advisor every this many evaluations (each ask is a fit: about a second
        once compiled; the first in a process compiles the model, 20-40 s on two cores). 0: log only.
    budget : the planned compute the run is forecast at (default: compute per step so far x the
        Trainer's max_steps).
    config : EarlyStopConfig (default: its defaults, as trainer-minimal's advisor and forecast watch).
    compute_fn : compute so far from the TrainerState (default: state.total_flos, training FLOPs only;
        TRL's GRPOTrainer counts none: give one there).
    compute_unit : the unit of that compute (default "flops").
    n_eval : graded samples behind each metric, if known (enables the binomial noise term).
    random_seed : seed of the advisor's fits (None: unseeded).
    forecaster_kwargs : passed to the fit (e.g. {"priors": Priors(b_mu=0.5)}; --advisor-priors); what
        ScalingForecaster refuses is refused here.

    After training, `advice` holds the last Recommendation (None before the first ask).
    """

    def __init__(
        self,
        run_dir,
        metric: str = "eval_pass_rate",
        *,
        run_id: str | None = None,
        recipe: str | None = None,
        reference=None,
        advise_every: int = 1,
        budget: float | None = None,
        config: EarlyStopConfig | None = None,
        compute_fn: Callable | None = None,
        compute_unit: str = "flops",
        n_eval: int | None = None,
        random_seed: int = 0,
        forecaster_kwargs: dict | None = None,
    ):
        # refused here, where the mistake is made, not at the first evaluation after compute was spent
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"metric must be the name of an evaluation metric, got {metric!r}")
        if isinstance(advise_every, bool) or not isinstance(advise_every, numbers.Integral) or advise_every < 0:
            raise ValueError(f"advise_every must be a whole number >= 0 (0: log only), got {advise_every!r}")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, numbers.Real)
                                   or not (math.isfinite(budget) and budget > 0)):
            raise ValueError(f"budget must be a finite compute > 0, or None, got {budget!r}")
        if n_eval is not None and not is_usable_n_eval(n_eval):
            raise ValueError(f"n_eval must be {N_EVAL_RULE}, or None, got {n_eval!r}")
        if compute_fn is not None and not callable(compute_fn):
            raise TypeError(f"compute_fn must be a function of the TrainerState, got {compute_fn!r}")
        config = checked_rules(config)
        if forecaster_kwargs is not None:
            checked_forecaster_kwargs(forecaster_kwargs)
        check_random_seed(random_seed)  # -1 failed at the advisor's first ask, out of trainer.train()
        if reference is not None and not Path(reference).exists():
            raise FileNotFoundError(f"reference {str(reference)!r} does not exist (a run table or a folder of run logs)")
        self.run_dir = Path(run_dir)
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise NotADirectoryError(f"run_dir {str(self.run_dir)!r} is a file; the run's logs need a folder")
        self.metric = metric
        self.run_id = str(run_id) if run_id is not None else self.run_dir.resolve().name
        self.recipe = str(recipe) if recipe is not None else self.run_id
        self.reference = reference
        self.advise_every = int(advise_every)
        self.budget = None if budget is None else float(budget)
        self.config = config
        self.compute_fn = compute_fn
        self.compute_unit = compute_unit
        self.n_eval = None if n_eval is None else int(n_eval)
        self.random_seed = random_seed
        self.forecaster_kwargs = forecaster_kwargs or {}
        self.advice: Recommendation | None = None
        self.stopped = False
        self._rows: list[dict] | None = None  # this run's rows, read from the log at the first need
        self._best_loaded = False  # training ended with the best checkpoint's weights loaded (load_best_model_at_end)
        # (step, total_flos) as training began, until the log after its first step shows the Trainer counts FLOPs
        self._flos_unchecked_since: tuple[int, float] | None = None

    # ------------------------------------------------------------------ the files

    @property
    def log_path(self) -> Path:
        return self.run_dir / RUN_LOG

    def _rows_so_far(self) -> list[dict]:
        if self._rows is None:
            self._rows = read_log_rows(self.log_path)
        return self._rows

    def _append(self, row: dict) -> None:
        """One line, flushed and synced before training goes on (a kill leaves at most a torn last
        line, which readers skip)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(row) + "\n")
            log.flush()
            os.fsync(log.fileno())
        self._rows_so_far().append(row)

    def _resumed_at(self, step: int) -> None:
        """Make the run folder fit a run starting (or resuming) at `step`; see the module docstring."""
        stopped = self.run_dir / STOPPED
        if stopped.exists():
            raise RuntimeError(f"ForecastCallback: {stopped} says the advisor stopped this run; delete it to train "
                               "on, or give the new run another run_dir")
        rows = self._rows_so_far()
        if rows and step == 0:
            raise RuntimeError(f"ForecastCallback: {self.log_path} already holds {len(rows)} evaluation(s) of a run "
                               "that this one, starting at step 0, would be logged after as one run; give this run "
                               "another run_dir (or resume it from a checkpoint)")
        if rows:  # checked as forecast reads them, so an edited row fails now, not at the advisor's next check
            import pandas as pd

            from .data import validate_runs

            validate_runs(pd.DataFrame(rows), source=self.log_path, min_points=1)
        kept = [row for row in rows if not _logged_after(row, step)]
        # the resumed run logs the rows after its step again; a torn last line (a kill mid-write) goes too,
        # or the next row, appended to it, would make one broken line in the middle of the log
        if len(kept) < len(rows) or ends_in_a_torn_line(self.log_path):
            torn = torn_last_line(self.log_path.read_bytes())
            atomic_write_text(self.log_path, "".join(json.dumps(row) + "\n" for row in kept))
            self._rows = kept
            # zeros a crash left are dropped as a torn line is, but said, as the trainer's --resume says them: rows
            # up to the checkpoint may be lost for good (at warning level: a script without logging set up shows it)
            if dropped := dropped_zeros_message(self.log_path, torn, kept, step):
                logger.warning("ForecastCallback: %s", dropped)
        summary = self.run_dir / SUMMARY
        if summary.exists():  # in flight again: forecast watch reads summary.json as the run's end
            summary.unlink()

    # ------------------------------------------------------------------ the Trainer's events

    def on_train_begin(self, args, state, control, **kwargs):
        self._best_loaded = False
        if self.compute_fn is None:
            self._flos_unchecked_since = (int(state.global_step), float(state.total_flos or 0))
        if state.is_world_process_zero:
            self._resumed_at(int(state.global_step))
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self.compute_fn is None and (control.should_evaluate or self._flos_unchecked_since is not None):
            control.should_log = True  # total_flos is brought up to date when the Trainer logs
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        # the first log after a step trained: total_flos holds that step's count (the same on every process)
        if self._flos_unchecked_since is None or int(state.global_step) <= self._flos_unchecked_since[0]:
            return control
        _, flos_at_begin = self._flos_unchecked_since
        self._flos_unchecked_since = None
        if not float(state.total_flos or 0) > flos_at_begin:
            raise ValueError(f"ForecastCallback: the Trainer counted no FLOPs in training step {state.global_step} "
                             f"(state.total_flos is {float(state.total_flos or 0):g}){NO_FLOPS_COUNTED}")
        return control

    def on_epoch_end(self, args, state, control, **kwargs):
        return self.on_step_end(args, state, control, **kwargs)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        step = int(state.global_step)
        if self._best_loaded:  # the model is the best checkpoint's, not the run's at this step: the same on every process
            logger.info("%s: an evaluation after training of the best checkpoint (load_best_model_at_end) is not the run "
                        "at step %d: not logged", self.run_id, step)
            return control
        if of_another_evaluation(metric_key(self.metric, metrics or {}), metrics or {}):
            return control  # another eval dataset's, or a test set's: the same on every process
        rate = checked_rate(metrics, self.metric, step)  # on every process: they all hold the same metrics
        compute = self._compute(state, step)
        stop = False
        if state.is_world_process_zero and compute is not None and self._logged(
                step, compute, rate, args, planned=self._planned(state, step, compute)):
            stop = self._advise(state, step, compute)
        if broadcast_from_first_process(stop):
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        # the Trainer has loaded the best checkpoint's weights by now: an evaluate() after train() measures those
        self._best_loaded = bool(getattr(args, "load_best_model_at_end", False) and state.best_model_checkpoint)
        if state.is_world_process_zero and self._rows_so_far():
            last = self._rows_so_far()[-1]
            atomic_write_json(self.run_dir / SUMMARY, dict(
                run_id=self.run_id, recipe=self.recipe, final_metric=last["metric"], steps=int(state.global_step),
                compute=last["compute"], compute_unit=self.compute_unit, stopped=self.stopped))
        return control

    # ------------------------------------------------------------------ one evaluation

    def _compute(self, state, step: int) -> float | None:
        """Compute so far; None for an evaluation before training, which the run format cannot hold."""
        if step == 0:
            logger.info("%s: the evaluation at step 0 (before training) is not logged: a run's compute must be > 0",
                        self.run_id)
            return None
        source = "compute_fn(state)" if self.compute_fn is not None else "state.total_flos"
        raw = self.compute_fn(state) if self.compute_fn is not None else state.total_flos
        try:
            compute = float(raw) if not isinstance(raw, (bool, str, bytes)) else math.nan
        except (TypeError, ValueError):
            compute = math.nan
        if not (math.isfinite(compute) and compute > 0):
            why = NO_FLOPS_COUNTED if self.compute_fn is None else ""
            raise ValueError(f"ForecastCallback: {source} at step {step} is {raw!r}; the run format needs a "
                             f"compute > 0{why}")
        return compute

    def _planned(self, state, step: int, compute: float) -> float:
        """The compute the run is forecast at: `budget`, else compute per step so far x max_steps (0: not known)."""
        max_steps = int(state.max_steps or 0)
        return self.budget or (compute / step * max_steps if max_steps else 0.0)

    def _logged(self, step: int, compute: float, rate: float, args, planned: float = 0.0) -> bool:
        """Append this evaluation's row; False when its step is logged already (an evaluate() after train())."""
        rows = self._rows_so_far()
        if rows and step <= int(rows[-1].get("step", -1)):
            logger.info("%s: an evaluation at step %d is logged already; this one is not logged again", self.run_id, step)
            return False
        if rows and compute <= float(rows[-1]["compute"]):
            source = "compute_fn(state)" if self.compute_fn is not None else "state.total_flos"
            raise ValueError(f"ForecastCallback: {source} at step {step} is {compute:g}, not above {rows[-1]['compute']:g} "
                             f"at step {rows[-1].get('step')}: compute must grow from one evaluation to the next")
        row = dict(run_id=self.run_id, recipe=self.recipe, compute=compute, compute_unit=self.compute_unit,
                   metric=rate, step=step)
        seed = getattr(args, "seed", None)
        if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
            row["seed"] = int(seed)
        if self.n_eval:
            row["n_eval"] = self.n_eval
        if planned > 0:  # forecast watch's planned budget for this run: the folder has no trainer config.json
            row["planned_compute"] = planned
        self._append(row)
        return True

    def _advise(self, state, step: int, compute: float) -> bool:
        """Ask the advisor when it is due; True on a stop (recorded in stopped.json and logged)."""
        max_steps = int(state.max_steps or 0)
        due = (self.advise_every and len(self._rows_so_far()) % self.advise_every == 0
               and not (max_steps and step >= max_steps))
        if not due:
            return False
        planned = self._planned(state, step, compute)
        rec = trainer_advice(evals=self._rows_so_far(), reference_path=self.reference, planned_compute=planned,
                             config=self.config, random_seed=seed_of_fit(self.random_seed, len(self._rows_so_far())),
                             forecaster_kwargs=self.forecaster_kwargs)
        self.advice = rec
        line = f"{self.run_id} at step {step}: advisor: {rec.message}{_convergence_note(rec)}"
        if rec.details.get("shape_note"):
            line += f" ({rec.details['shape_note']})"
        if not rec.stop:
            # an advisor that cannot advise (an unusable reference) keeps the run training, as the
            # trainer's does; said at warning level, or a script without logging set up never hears why
            logger.log(logging.WARNING if rec.rule == "advisor_error" else logging.INFO, line)
            return False
        self.stopped = True
        atomic_write_json(self.run_dir / STOPPED, dict(step=step, compute=compute, advice=rec.to_dict()))
        logger.warning(line)
        return True


def _logged_after(row: dict, step: int) -> bool:
    try:
        return int(row.get("step", 0)) > step
    except (TypeError, ValueError):
        return False


def _convergence_note(rec: Recommendation) -> str:
    """As the trainer says it on a stop: a stop decided on a fit that did not converge deserves a second look."""
    if not rests_on_an_unconverged_fit(rec):
        return ""
    return f" (warning: the forecaster's fit did not converge: {what_did_not_converge(rec.details)})"
