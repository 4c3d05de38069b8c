"""The RL loop: warm start, group sampling, k off-policy updates per round, evaluation, checkpoints.

What it does, per generation round (one round = off_policy_k optimizer steps):
  1. Pick k * batch_size prompts from the training pool, seeded by (seed, step); prompts retired by
     No-Positive-Resampling (latest pass rate >= npr_threshold) are not picked again.
  2. Sample group_size completions per prompt with the current weights (rollout.generate); keep
     the sampler's token log-probs as pi_old. Reward = exact match with the answer.
  3. Advantages: reward minus the group mean, scaled by the group std, the batch std (over the
     prompts kept), or nothing. Zero-variance filtering drops prompts whose samples all got the same reward.
  4. Split the round into k mini-batches; each is one optimizer step: re-score the tokens under the
     current weights (pi), apply the loss (PPO-clip, CISPO or GSPO) to the ratio pi / pi_old, and
     average with per-token weights computed over the whole mini-batch (sample / token / prompt),
     accumulating gradients over micro-batches. The first mini-batch is on-policy (ratio 1); later
     ones are increasingly off-policy, which is what the clipping / truncation is for.
  5. Every eval_every steps: pass rate on the held-out set (val_samples samples per prompt),
     one row appended to evals.jsonl, then a checkpoint; optionally ask the early-stop advisor.

Compute: cumulative FLOPs of sampling (2N per prompt or generated token), re-scoring and training
(6N per trained token), plus attention (flops.py), at the widths one process pads a round to, so a
run's compute is the same on any number of processes (a rank pads only to its share). device_seconds: wall-clock seconds of sampling
and training times the number of processes (device-seconds, like GPU-hours); evaluation, logging
and checkpoints are excluded, as is the warm start (it plays the role of the base model).

What it leaves out, and why:
  - PipelineRL's streaming generators (ScaleRL uses PipelineRL-8): PPO-off-policy-k gives the same
    kind of staleness (k updates per generation) in a single process, without an inference server.
  - Length interruptions / penalties: generations here are a few tokens long.
  - A KL penalty and a reference model: ScaleRL, DAPO and CISPO all train without one.
  - DAPO's dynamic-sampling refill (re-sampling until the batch is full): zero-variance groups are
    dropped instead (ScaleRL's choice), so a step may train on fewer prompts.
  - Learning-rate decay: constant LR after a short linear warm-up, as in the ScaleRL runs.

Data parallelism: under torchrun every rank picks the same prompts, samples its share of each
mini-batch, and all-gathers the rewards, so advantages, filtering and No-Positive-Resampling are
identical on all ranks. Gradients are summed with one explicit all_reduce per step (what DDP does
with buckets); DDP's wrapper is not used because after filtering ranks may train on different
numbers of micro-batches, which its backward hooks do not allow. Rank 0 alone reads and writes the
run folder (under a multi-machine torchrun, --out may be on its machine's disk only): on --resume it
sends the others the run's settings, its verdict, and the checkpoint's weights, optimizer and loop state.

Crash safety: an eval row is appended (and fsynced) before the checkpoint is written. --resume loads
the checkpoint, drops a torn last line and any rows logged after the checkpoint's step (atomic
rewrite; zeros a crash of the machine left at a log's end are dropped too, and said on stderr), and continues; every random draw is derived from (seed, step, prompt), so the resumed run
reproduces the rows it dropped. A log without the checkpoint's own row (cut short, emptied, deleted)
lost rows no resume can reproduce: it is refused, and left as it was; so, with the advisor on, is a row
edited into one the advisor cannot read (forecast's error, naming its line). A run that already
ended (stopped.json, or max_steps reached) is not resumed: --resume says so and writes nothing (delete stopped.json or raise --max-steps to go on).
A run raised past where it ended drops its summary.json as it trains on (it is in flight again, for
forecast watch and backtest) and writes a new one when it ends.
A resume may change only where and how long the run trains, how often it is evaluated and its
advisor (config.RESUMABLE_FIELDS); a changed recipe knob or evaluation setting is refused, since
the rows after it would be another run's, or another measure, under the same run_id.
A run killed while the advisor was being asked is asked again on --resume, before it trains, and
one killed after stopped.json but before summary.json stays stopped. While a run trains, its
folder is locked (.lock, released when the process ends, kill -9 included): a second process
(say a sweep rerun while an orphaned run of the killed sweep still trains) is refused, exit 2.

Commands:
  CPU (about a minute):  trainer-minimal train --preset scalerl --max-steps 640 --eval-every 16 --out out/scalerl-s0
  one GPU, local HF LM:  trainer-minimal train --preset scalerl --device cuda --dtype bfloat16 \\
                             --model-path /models/my-causal-lm --max-steps 2000 --eval-every 50 --out out/gpu
  torchrun (8 GPUs):     torchrun --standalone --nproc_per_node 8 -m trainer_minimal train --preset scalerl --device cuda \\
                             --dtype bfloat16 --model-path /models/my-causal-lm --batch-size 64 --out out/ddp
  torchrun on CPU:       torchrun --standalone --nproc_per_node 2 -m trainer_minimal train --preset scalerl --out out/ddp-cpu
"""

import ctypes
import dataclasses
import datetime
import functools
import importlib
import json
import math
import os
import pickle
import re
import socket
import sys
import threading
import time
import warnings
import zipfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from forecast.formatting import fmt_compute
from forecast.io import remove_stale_temps

from .config import (
    FIELD_NAMES,
    SettingError,
    advisor_settings,
    changed_run_defining_fields,
    check_advisor_reference,
    check_device,
    check_model_path,
    check_not_a_sweep,
    check_writable,
    from_dict,
    process_rank,
    processes_on_this_machine,
    settings_changed,
    to_json,
)
from .flops import FlopsModel
from .logging_io import (
    RunFolderBusy,
    append_jsonl,
    atomic_torch_save,
    atomic_write_json,
    atomic_write_text,
    lock_run_folder,
    read_jsonl,
    read_numbered_jsonl,
    repair_jsonl,
    run_folder_guarded,
)
from .losses import aggregation_weights, group_advantages, policy_loss, zero_variance_groups
from .model import (
    ARCHITECTURE,
    MAX_POSITIONS,
    build_policy,
    learned_positions,
    model_folder_fingerprint,
    tiny_gpt_parameters,
)
from .rollout import derive_seed, generate, left_pad, sampling_noise, score
from .tasks import build_datasets, reward
from .tokenizer import CharTokenizer, folder_tokenizer

KNOB_COLUMNS = (
    "loss_type", "aggregation", "adv_norm", "zero_var_filter", "npr_threshold", "off_policy_k",
    "fp32_logits", "batch_size", "group_size", "gen_len", "lr",
)
EVAL_CHUNK = 1024  # sequences per generation call during evaluation (bounds memory)


def run_paths(cfg):
    join = os.path.join
    return dict(
        config=join(cfg.out, "config.json"), evals=join(cfg.out, "evals.jsonl"),
        train_log=join(cfg.out, "train_log.jsonl"), ckpt=join(cfg.out, "ckpt.pt"),
        baseline=join(cfg.out, "baseline.json"), stopped=join(cfg.out, "stopped.json"),
        summary=join(cfg.out, "summary.json"), asking=join(cfg.out, "advisor_asking.json"),
    )


def resume_refused(reason):
    """A refusal of a resume, said after the setting that asked for it: "resume=True: ..." in Python, "--resume: ..."
    at the command line. reason: the rest of the message, a str, or a function of SettingNames where it names
    settings too."""
    return SettingError(lambda n: f"{n.given('resume', True)}: {reason(n) if callable(reason) else reason}")


def preflight(cfg, this_machine=True):
    """Refuse, before any compute, what would fail later: a resume without a checkpoint, or of a
    checkpoint taken with other settings (config.json edited or copied from another run), a fresh
    run over an existing one or into a sweep's folder, a checkpoint taken mid-round, a batch that does not split over the ranks,
    an advisor reference that is not there, a model folder that cannot be loaded, a run too large for this
    machine's memory (or its CUDA device's), a run folder or warm-start cache that cannot be written (not for a resumed run that has ended: it writes nothing).
    Under torchrun, ranks other than 0 check only their own machine (check_this_machine): rank 0 alone
    reads and writes the run folder, the warm-start cache and the advisor's reference, and under a
    multi-machine torchrun with --out on each machine's own disk only its machine has them.
    this_machine=False: this machine's part is left out, already checked with cfg (train's machine_checked)."""
    if process_rank() != 0:
        if this_machine:
            check_this_machine(cfg)
        return
    paths = run_paths(cfg)
    if cfg.resume and not os.path.exists(paths["ckpt"]):
        raise resume_refused(f"no checkpoint at {paths['ckpt']}")
    if not cfg.resume and (os.path.exists(paths["evals"]) or os.path.exists(paths["ckpt"])):
        raise SettingError(lambda n: f"{cfg.out} already holds a run (evals.jsonl or ckpt.pt); pass "
                                     f"{n.given('resume', True)} to continue it or choose another {n('out')}")
    if not cfg.resume:
        check_not_a_sweep(cfg)
    if this_machine:
        check_this_machine(cfg)
    check_advisor_reference(cfg)
    if cfg.resume:
        step = checkpoint_step(paths["ckpt"])
        check_checkpoint_whole(paths["ckpt"])
        if step % cfg.off_policy_k and cfg.max_steps > step:  # ended mid-round by an older version
            raise resume_refused(lambda n: f"the checkpoint in {cfg.out} is at step {step}, inside a generation round "
                                           f"of {n.given('off_policy_k', cfg.off_policy_k)} steps; the run cannot be "
                                           "extended exactly (its unfinished round was not saved): start a new run "
                                           f"with another {n('out')}")
        if cfg.max_steps < step:
            raise resume_refused(lambda n: f"{n.given('max_steps', cfg.max_steps)} is below the step of the "
                                           f"checkpoint in {cfg.out} ({step}); a run cannot be shortened (give "
                                           f"{n.given('max_steps', step)} or more)")
    if cfg.resume:
        saved_summary(cfg)  # a damaged one is refused here: a resume reads it under the lock, or returns it
    if ended_note(cfg) is None:  # (a malformed stopped.json is refused here) a run that ended writes nothing
        if cfg.resume:  # the checkpoint's run is the one that goes on: a config.json edited, or copied from
            # another run, passed the CLI's comparison and was refused only under the lock, as a traceback
            saved = checkpoint_config(paths["ckpt"])
            changed = changed_run_defining_fields(saved, cfg)
            if changed:
                raise SettingError(lambda n: f"{n.given('resume', True)} with other settings than the checkpoint in "
                                             f"{cfg.out}: {'; '.join(settings_changed(n, saved, cfg, changed))}; these "
                                             f"cannot change mid-run: start a new run with another {n('out')} (if "
                                             f"{paths['config']} was edited or copied from another run, put back the "
                                             "run's own)")
        if cfg.resume:
            numbered_rows_of = check_logs_readable(paths)  # read once here, for the checks of the logs below
            eval_rows = [row for _line, row in numbered_rows_of["evals"]]
            check_eval_log_reaches(paths, checkpoint_step(paths["ckpt"]), eval_rows)
            check_log_counts(cfg, paths, checkpoint_step(paths["ckpt"]), numbered_rows_of)
            check_eval_rows_for_the_advisor(cfg, paths, checkpoint_step(paths["ckpt"]), eval_rows)
        check_writable(cfg.out, "out")
        if not cfg.resume and cfg.warmup_steps > 0 and not os.path.exists(warm_start_path(cfg)):
            check_writable(os.path.dirname(warm_start_path(cfg)), "warmstart_cache")  # before the warm-up


def check_this_machine(cfg):
    """What every rank needs of its own machine: the model folder it loads, its device, its share of
    the batch, the memory to hold the run (check_memory_fits), the tasks' data (built on every rank)."""
    check_model_path(cfg)
    check_device(cfg)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if cfg.batch_size % world:
        raise SettingError(lambda n: f"{n.given('batch_size', cfg.batch_size)} must be divisible by the {world} "
                                     "processes")
    check_memory_fits(cfg)  # before the data is generated: 2e9 prompts filled the memory, or ran for hours
    check_sequences_fit(cfg, *build_datasets(cfg))  # a val_size or train_size the tasks cannot supply fails here


# Lower bounds of what a run holds, so that the memory check refuses only what cannot fit. A task's problem
# is a dict of four items and two strings: about 300 bytes each as measured (tracemalloc, the default tasks)
PROMPT_BYTES = 250
PARAMETER_COPIES = 4  # float32 weights, their gradients and AdamW's two moments (weights stay fp32 under bf16)
# What the tiny GPT's backward keeps of each token in each block, at least: its two LayerNorms' inputs in float32
# (2 x 4 bytes x d_model) and the MLP's hidden layer twice (the GELU's input and the second Linear's), in bfloat16
# at least (2 x 2 bytes x 4 d_model). Counted with torch's saved-tensor hooks, a block keeps 2 to 3 times this
# in float32 and 2 to 7 times in bfloat16 (its weights' bfloat16 copies): the rest is left out, as a lower bound
KEPT_BYTES_PER_TOKEN_AND_D_MODEL = 2 * 4 + 2 * 2 * 4
# the shortest prompt of any task, in the tiny GPT's tokens: <bos> and "3+4=" (add and mul at size 1; every
# other task's is longer). A scored sequence is that and at least one answer token (the warm start's: an answer
# digit and <eos>)
SHORTEST_PROMPT_TOKENS = 5


def memory_estimate(cfg, world=1, warm_start=False, names=FIELD_NAMES):
    """{part: (bytes, the settings that size it)} of what one process of a run holds at once, each part a lower
    bound: the tiny GPT and its AdamW state (a Hugging Face model's size is its folder's, not the settings'), the
    sequences held at once, and the generated task data. The sequences are the most of: a rollout's
    off_policy_k * batch_size * group_size split over the ranks, an evaluation chunk's val_samples per prompt
    (each with its noise and ids, and for the tiny GPT its logits row and one position of KV cache in every
    layer), and for the tiny GPT what a backward keeps (scored_sequences) of a micro-batch of the update and,
    where this process trains the warm start (warm_start: trains_warm_start), of its warmup_batch. The settings
    are named by names (config.SettingNames: the fields, or at the command line the flags)."""
    n = names
    per_sequence = 4 * cfg.gen_len + 16
    parts = {}
    if not cfg.model_path:
        vocab = CharTokenizer().vocab_size
        parts["the model and its AdamW state"] = (
            tiny_gpt_parameters(vocab, cfg.n_layer, cfg.d_model) * 4 * PARAMETER_COPIES,
            f"{n.given('n_layer', cfg.n_layer)}, {n.given('d_model', cfg.d_model)}")
        per_sequence += 4 * vocab + 2 * 4 * cfg.n_layer * cfg.d_model
    rollout = cfg.off_policy_k * cfg.batch_size // world * cfg.group_size
    evaluation = min(cfg.val_size, max(1, EVAL_CHUNK // cfg.val_samples)) * cfg.val_samples
    held = [(rollout * per_sequence, f"{rollout} in a rollout: {n.given('off_policy_k', cfg.off_policy_k)} x "
                                     f"{n.given('batch_size', cfg.batch_size)} x {n.given('group_size', cfg.group_size)}"),
            (evaluation * per_sequence, f"{evaluation} in an evaluation: {n.given('val_samples', cfg.val_samples)} "
                                        "per prompt")]
    if not cfg.model_path:
        held += scored_sequences(cfg, world, warm_start, names)
    # max() keeps the first of equal sizes: a rollout's, as before scored sequences were counted
    parts["the sequences held at once"] = max(held, key=lambda size_and_settings: size_and_settings[0])
    parts["the task data"] = ((cfg.train_size + cfg.val_size) * PROMPT_BYTES,
                              f"{n.given('train_size', cfg.train_size)}, {n.given('val_size', cfg.val_size)}")
    return parts


def scored_sequences(cfg, world, warm_start, names=FIELD_NAMES):
    """[(bytes, settings)] of the tiny GPT's sequences scored with gradients (rollout.score), held with what their
    backward keeps (backward_kept_bytes) until it runs: a micro-batch of the update, and the warm start's batch
    where this process trains it. A micro-batch holds micro_batch of the mini-batch's sequences on this rank,
    batch_size / world * group_size, only without the zero-variance filter: with it, a step may keep none (every
    group solved, or none of it), and a run whose groups all score alike never runs the update's forward.
    The first forward of each (the run's first update, the warm start's first step) is held beside the weights
    alone, not the four copies memory_estimate counts: no gradients yet, and AdamW makes its moments at its
    first step. The other three copies are taken off each, so that with them the sum stays a lower bound."""
    weights_alone_short_by = (PARAMETER_COPIES - 1) * 4 * tiny_gpt_parameters(CharTokenizer().vocab_size, cfg.n_layer,
                                                                              cfg.d_model)
    n = names
    model = f"{n.given('n_layer', cfg.n_layer)}, {n.given('d_model', cfg.d_model)}"
    held = []
    if not cfg.zero_var_filter:
        rows = min(cfg.micro_batch, cfg.batch_size // world * cfg.group_size)
        held.append((max(0, backward_kept_bytes(cfg, rows, SHORTEST_PROMPT_TOKENS + 1, 1) - weights_alone_short_by),
                     f"{rows} in a micro-batch of the update, with what its backward keeps: "
                     f"{n.given('micro_batch', cfg.micro_batch)}, {model}"))
    if warm_start:
        kept = backward_kept_bytes(cfg, cfg.warmup_batch, SHORTEST_PROMPT_TOKENS + 2, 2)
        held.append((max(0, kept - weights_alone_short_by),
                     f"{cfg.warmup_batch} in a warm-start step, with what its backward keeps: "
                     f"{n.given('warmup_batch', cfg.warmup_batch)}, {model}"))
    return held


def backward_kept_bytes(cfg, rows, tokens, scored):
    """What the tiny GPT's backward keeps, at least, of `rows` sequences of `tokens` tokens whose last `scored`
    are scored: KEPT_BYTES_PER_TOKEN_AND_D_MODEL of every token in every block, and log_softmax's float32 row of
    each scored token."""
    vocab = CharTokenizer().vocab_size
    return rows * (tokens * cfg.n_layer * cfg.d_model * KEPT_BYTES_PER_TOKEN_AND_D_MODEL + scored * 4 * vocab)


def trains_warm_start(cfg):
    """Whether this process trains the warm start (train.warm_start): rank 0 of a new run, where the warm start
    has steps and is not cached already; another rank, a resumed run, or a cached warm start loads weights."""
    return process_rank() == 0 and not cfg.resume and cfg.warmup_steps > 0 and not os.path.exists(warm_start_path(cfg))


def machine_memory():
    """This machine's physical memory in bytes, or None where the system does not say (no sysconf)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def cuda_device_memory(cfg):
    """The memory of the CUDA device this process trains on (under torchrun cuda:LOCAL_RANK), in bytes;
    None on the CPU or where torch sees no CUDA (check_device refuses that)."""
    if cfg.device == "cpu" or not torch.cuda.is_available():
        return None
    index = int(os.environ.get("LOCAL_RANK", "0")) if int(os.environ.get("WORLD_SIZE", "1")) > 1 \
        else int(cfg.device.partition(":")[2] or 0)
    return torch.cuda.get_device_properties(index).total_memory


def check_memory_fits(cfg):
    """Refuse settings whose run cannot fit in memory, before anything is allocated: --n-layer 100000000 or
    --train-size 2000000000 passed every check and then ran for minutes building the model or the data
    until the machine ran out of memory. The estimate is a lower bound (memory_estimate), so a run that
    fits is never refused. On a CUDA device the model and the sequences are checked against the device's
    memory and the task data against the machine's; on the CPU all of it against the machine's. Every
    process of the run on this machine (processes_on_this_machine: torchrun's LOCAL_WORLD_SIZE) holds its
    own task data, and on the CPU its own model and sequences too: the machine's memory holds them all.
    Rank 0 alone trains the warm start, while the others wait holding less than in the RL steps: its batch
    is checked for rank 0's own process (with the others', the total was no lower bound)."""
    world, processes = int(os.environ.get("WORLD_SIZE", "1")), processes_on_this_machine()
    warm_start, device, machine = trains_warm_start(cfg), cuda_device_memory(cfg), machine_memory()

    def checks(names):  # [(parts held, memory available, where)], the settings named by names
        steps = memory_estimate(cfg, world, names=names)  # what every process holds at once in the RL steps
        own = memory_estimate(cfg, world, warm_start=warm_start, names=names)  # and this one, in its warm start too
        if device is None:
            held = [(times(steps, processes), machine, "this machine")] if processes > 1 else []
            return [*held, (own, machine, "this machine")]
        data = {"the task data": own.pop("the task data")}
        return [(own, device, f"the CUDA device {cfg.device}"), (times(data, processes), machine, "this machine")]

    refuse_what_does_not_fit(checks, lambda n, *check: f"these settings need {memory_said(*check)}: lower them")


def refuse_what_does_not_fit(checks, refusal):
    """SettingError for the first of checks(names) (each (parts held, memory available or None, where), the parts
    memory_estimate's, their settings named by names) whose parts need more than is available; its message
    refusal(names, held, available, where), with the settings named by names (str(): the fields)."""
    for index, (held, available, _where) in enumerate(checks(FIELD_NAMES)):
        if available is not None and sum(size for size, _settings in held.values()) > available:
            raise SettingError(lambda n, index=index: refusal(n, *checks(n)[index]))


def memory_said(held, available, where):
    """'an estimated X GiB of memory (each part, its GiB and the settings that size it), more than the Y GiB
    `where` has': what a memory refusal says of the parts held (memory_estimate's)."""
    needed = sum(size for size, _settings in held.values())
    said = "; ".join(f"{part} {size / 2**30:.3g} GiB ({settings})" for part, (size, settings) in held.items())
    return f"an estimated {needed / 2**30:.3g} GiB of memory ({said}), more than the {available / 2**30:.3g} GiB {where} has"


def times(parts, processes):
    """memory_estimate's parts held by each of `processes` processes of this machine, summed over them."""
    if processes == 1:
        return parts
    return {part: (size * processes, f"{settings}; {processes} processes on this machine, each its own")
            for part, (size, settings) in parts.items()}


def check_sequences_fit(cfg, pool, val):
    """The tiny GPT has MAX_POSITIONS learned positions, one per real token of a sequence: a prompt and what
    follows it (gen_len generated tokens; in the warm start a pool answer and its <eos>) longer than that
    crashed at the position lookup, after the warm start had begun (IndexError: index out of range in self).
    Refused here, with the sizes that make the longest sequence. A Hugging Face model with learned positions
    (GPT-2's n_positions) crashed the same way past its own, counted in its own tokenizer's tokens; one
    without (rotary) has no hard limit and is not checked."""
    if cfg.model_path:
        positions = learned_positions(cfg.model_path)
        if positions is None:
            return
        limit, said = positions
        tok = folder_tokenizer(cfg.model_path, None)  # its vocabulary was checked by check_model_path
        def has_positions(n):
            return f"the model in {n.given('model_path', cfg.model_path)} has {limit} learned positions ({said})"
    else:
        limit, tok = MAX_POSITIONS, CharTokenizer()

        def has_positions(n):
            return f"the tiny GPT has {MAX_POSITIONS} positions"
    prompt = max(len(tok.encode(p["prompt"])) for p in pool + val)
    sampled = prompt + cfg.gen_len
    taught = max(len(tok.encode(p["prompt"])) + len(tok.encode_answer(p["answer"])) for p in pool) \
        if cfg.warmup_steps > 0 else 0
    if max(sampled, taught) <= limit:
        return
    def longest(n):
        return (f"{sampled} tokens (a prompt of {prompt}, then {n.given('gen_len', cfg.gen_len)} generated)"
                if sampled >= taught else f"{taught} tokens (a prompt and its answer with <eos>, in the warm start)")

    raise SettingError(lambda n: f"{has_positions(n)}, and the longest sequence would be {longest(n)} with "
                                 f"{n.given('tasks', cfg.tasks)} up to {n.given('max_size', cfg.max_size)}: lower "
                                 f"{n('max_size')} or {n('gen_len')}")


def _is_a_step_number(step) -> bool:
    """Whether a log row's step is a number a resume can compare: not true/false, text, NaN, or an integer beyond a
    float's range."""
    if isinstance(step, bool) or not isinstance(step, (int, float)):
        return False
    try:
        return not math.isnan(step)
    except OverflowError:
        return False


def check_logs_readable(paths):
    """A resume rewrites evals.jsonl and train_log.jsonl (repair_jsonl), so a damaged line in either, not
    a torn last line, is refused here, naming the file and line. It raised under the lock, after the
    model and checkpoint were loaded: a traceback, exit 1. Returns each log's rows with their lines
    (read_numbered_jsonl's), by name ("evals", "train_log"), which the resume's other checks of the logs take
    rather than read them again.
    A row is named by its line in the file, as forecast names it (not by its place among the rows, which a
    blank line put one before forecast's)."""
    rows_of = {}
    for name in ("evals", "train_log"):
        try:
            rows = read_numbered_jsonl(paths[name])
        except OSError as err:  # a folder where the log was, a log without read permission
            said = f"{paths[name]}: cannot be read ({type(err).__name__}: {err.strerror})"
            raise resume_refused(said) from None
        except ValueError as err:
            raise resume_refused(f"{err}; only a torn last line (a write cut off) is dropped on resume: correct or "
                                 "delete that line, then resume again") from None
        for number, row in rows:  # repair_jsonl keeps the rows up to the checkpoint's step
            step = row.get("step", 0)
            if not _is_a_step_number(step):
                # an integer of 400 digits (JSON keeps it whole) said by its length: math.isnan raised OverflowError on it
                shown = f"of {len(str(abs(step)))} digits" if isinstance(step, int) and not isinstance(step, bool) else repr(step)
                raise resume_refused(f"{paths[name]}: row {number} has step {shown}, not a number (a resume keeps "
                                     "the rows up to the checkpoint's step): correct or delete that row, then resume again")
        rows_of[name] = rows
    return rows_of


def check_eval_log_reaches(paths, step, eval_rows):
    """The eval row of the checkpoint's step is in evals.jsonl: it is written (and synced) before the
    checkpoint, so a kill leaves it there, and a log that lacks it was cut short (a copy or sync cut off),
    emptied, deleted or edited. Resumed, its torn rest was dropped and the run went on past a gap in its
    curve in silence, its summary's final_metric an earlier evaluation's. Refused naming the log and the
    step, before anything is written, so what is left of the log stays for its owner to restore.
    eval_rows: the log's rows, as read_jsonl reads them (check_logs_readable's)."""
    if step == 0:  # checkpointed after R0 alone (baseline.json): no evaluation is owed yet
        return
    if any(row.get("step") == step for row in eval_rows):
        return
    steps = [row["step"] for row in eval_rows if isinstance(row.get("step"), (int, float))]
    if not os.path.exists(paths["evals"]):
        what = "it is not there"
    elif steps:
        what = f"its last evaluation is at step {max(steps):g}"
    else:
        what = "it holds no evaluation"
    raise resume_refused(lambda n: f"{paths['evals']} holds no evaluation at step {step}, the step of the checkpoint "
                                   f"{paths['ckpt']} ({what}): the log was cut short, emptied or edited, and the run "
                                   "would go on past the gap; put back its lost rows (from a copy of the run folder), "
                                   f"then resume again, or start the run anew with another {n('out')}")


# what counts from a run's start in train_log.jsonl, checked as forecast checks its run log's counts: there compute
# too (an evaluation's compute is forecast's to refuse, at 0 as well: validate_runs)
STEP_LOG_COUNTS = {"compute": "the compute spent"}


def check_log_counts(cfg, paths, step, numbered_rows_of):
    """A step or device_seconds below 0 in the eval rows a resume keeps (those up to the checkpoint's step, as
    repair_jsonl keeps them) is refused with forecast's own check of them (forecast.data.refuse_negative_counts,
    which the advisor's reading of the log makes too): without the advisor such a log was resumed, and forecast
    refused it at every reading after. So is a step, compute or device_seconds below 0 in train_log.jsonl's rows,
    which no reading checked: a resume kept them in silence (a step of -1 is never after the checkpoint's).
    Named by the log, column, run and row, the row by its line in the file, as forecast names it (train_log's rows
    name no run: the run is cfg's). numbered_rows_of: each log's rows with their lines (check_logs_readable's):
    the logs are not read again (a sweep's log of thousands of rows, on a network disk)."""
    from forecast.data import COUNTS_FROM_THE_START, RunDataError

    for name, counts, why in (("evals", COUNTS_FROM_THE_START, "forecast refuses such a log: "),
                              ("train_log", {**COUNTS_FROM_THE_START, **STEP_LOG_COUNTS}, "")):
        try:
            refuse_negative_counts_kept(paths[name], numbered_rows_of[name], step, counts, cfg.run_id)
        except RunDataError as err:
            raise resume_refused(f"{err}; {why}correct or delete that row, then resume again") from None


def refuse_negative_counts_kept(path, numbered_rows, step, counts, run_id):
    """forecast.data.refuse_negative_counts of the rows a resume keeps of one log (step up to `step`), numbered by
    their lines; a row that names no run is of `run_id`."""
    kept = [(number, row) for number, row in numbered_rows if row.get("step", 0) <= step]
    if not kept:
        return
    import pandas as pd

    from forecast.data import refuse_negative_counts

    table = pd.DataFrame([{"run_id": run_id, **row} for _, row in kept]).assign(_source=str(path),
                                                                               _line=[n for n, _ in kept])
    refuse_negative_counts(table, counts)


def check_eval_rows_for_the_advisor(cfg, paths, step, eval_rows):
    """The eval rows a resume keeps (those up to the checkpoint's step, as repair_jsonl keeps them) are a run
    table the advisor can read, where it is on: one edited by hand (a pass rate of 1.5, a compute deleted)
    was resumed, trained, and at the advisor's next check raised RunDataError out of the run, a traceback
    naming no file, exit 1, after the compute was spent; and a resume after that asked again and failed at
    once. Refused here, as forecast reads the log (its file, column, run and line), before anything runs.
    eval_rows: the log's rows, as read_jsonl reads them (check_logs_readable's). The log is read once more, by
    forecast, where the advisor is on: forecast's reading numbers each row by its line, which the messages name."""
    # none kept (a log emptied by the resume of a run checkpointed at step 0 alone): nothing for the advisor to read
    if not cfg.advisor_every or not any(row.get("step", 0) <= step for row in eval_rows):
        return
    import warnings

    from forecast.data import RunDataError, read_table, validate_runs

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the data's warnings: the advisor says them, once, when it reads the rows
            rows = read_table(paths["evals"])
            kept = rows[rows["step"].fillna(0) <= step] if "step" in rows else rows
            if len(kept):
                validate_runs(kept.drop(columns="ended", errors="ignore"), min_points=1)
    except RunDataError as err:
        said = str(err)  # bound here: an except clause unbinds err, and the message is written again at the CLI
        raise resume_refused(lambda n: f"{said}; the advisor ({n('advisor_every')}) reads the run's evaluations, and "
                                       "would fail on it after the run trained: correct or delete that row, then "
                                       "resume again") from None


class UnreadableCheckpoint(SettingError):
    """A ckpt.pt that torch cannot load: cut short (a full disk in an older version, a copy cut off),
    empty, or another file under that name. Refused naming the file, before anything is written,
    where --resume was a torch traceback (RuntimeError, OSError, pickle's errors) and a sweep's
    re-run of the run failed with it. A SettingError: the setting a new run would change is out, or at
    the command line --out."""

    def __init__(self, path, err, reason=None):
        self.path, self.reason = path, reason or checkpoint_damage(path, err)
        super().__init__(lambda n: f"{path} is {self.reason}, so the run cannot be resumed from it: restore the "
                                   f"checkpoint (from a copy), or start a new run with another {n('out')}")


def checkpoint_damage(path, err):
    """What is wrong with a checkpoint torch.load failed on, in a user's words. A checkpoint is a zip
    archive whose directory is at its end, so one cut short is no zip file at all (torch's own message
    then speaks of mmap and _use_new_zipfile_serialization, which misleads)."""
    size = os.path.getsize(path) if os.path.isfile(path) else None
    if size == 0:
        return "empty (0 bytes)"
    if size is not None and not zipfile.is_zipfile(path):
        return f"not a whole checkpoint ({size} bytes, cut short, or not a torch file)"
    said = str(err).splitlines()[0].split(". ")[0] if str(err) else ""  # torch's advice after it misleads
    return f"a torch file that cannot be read as a checkpoint ({type(err).__name__}: {said})"


# The checkpoints this process has found whole, by path: the identity of the file it read (file_identity).
# A resume checks its run folder twice, in the CLI and again in train() (rank 0 may have waited minutes for
# the other ranks since), then loads the checkpoint: a checkpoint of gigabytes (a Hugging Face model's, with
# its optimizer state) was read in full for its checksums twice. The same file, unchanged since, is not read
# again; one replaced (another run's checkpoint, written by rename) or written over in place is.
_found_whole = {}


def file_identity(path):
    """What changes when a file is replaced or written: its device and inode, size, and change times."""
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def check_checkpoint_whole(path):
    """UnreadableCheckpoint when a part of the checkpoint fails the CRC-32 its zip record carries.
    torch.load does not check them: bytes flipped inside the weights (a failing disk, a bad copy)
    loaded, and the run resumed from weights it never had, exit 0. Reads the whole file once, and not
    again for the same file unchanged (_found_whole)."""
    key = os.path.realpath(path)
    try:
        identity = file_identity(path)  # before the read: a file changed during it is not the one found whole
    except OSError:
        identity = None  # refused below, in ZipFile's words
    if identity is not None and _found_whole.get(key) == identity:
        return
    try:
        with zipfile.ZipFile(path) as archive:
            failed = archive.testzip()
    except Exception as err:  # a record's header damaged (BadZipFile), or the file unreadable
        raise UnreadableCheckpoint(path, err) from None
    if failed is not None:
        part = failed.split("/", 1)[-1]  # torch names the parts under the name the file was saved as (a temp file's)
        raise UnreadableCheckpoint(path, None, reason=f"damaged: its part {part} fails its checksum (bytes changed)")
    if identity is not None:
        _found_whole[key] = identity


def read_checkpoint(path, part):
    """part(the checkpoint's dict), memory-mapped (the weights are not read); UnreadableCheckpoint when
    the file cannot be loaded or lacks that part."""
    try:
        return part(torch.load(path, map_location="cpu", weights_only=False, mmap=True))
    except Exception as err:  # torch.load's errors on a damaged file are of many kinds (pickle, zip, EOF)
        raise UnreadableCheckpoint(path, err) from None


def checkpoint_config(path):
    """The Config a checkpoint was saved with (memory-mapped: the weights are not read)."""
    return read_checkpoint(path, lambda ckpt: from_dict(ckpt["config"]))


def read_checkpoint_config(path):
    """checkpoint_config, for a run whose config.json is gone (a resume, a sweep re-run): ValueError
    naming the file when it is no checkpoint (cut short, or another file of that name)."""
    try:
        return checkpoint_config(path)
    except UnreadableCheckpoint as err:
        raise ValueError(f"{os.path.join(os.path.dirname(path), 'config.json')} is missing and {path} is not a "
                         f"readable checkpoint to read the run's settings from ({err.reason})") from None


def saved_run_config(out):
    """The Config the run in folder `out` was started with: its config.json, or where that was deleted,
    its checkpoint's own (ValueError naming the file where neither can be read)."""
    from .config import read_saved_config

    config = os.path.join(out, "config.json")
    if os.path.exists(config):
        return read_saved_config(config)
    return read_checkpoint_config(os.path.join(out, "ckpt.pt"))


def checkpoint_step(path):
    """The optimizer step a checkpoint was taken at (memory-mapped: the weights are not read)."""
    return read_checkpoint(path, lambda ckpt: ckpt["state"]["step"])


def read_stop_record(path):
    """The advisor's stop record (stopped.json) as a dict, or None when there is none. ValueError when
    the file is not one (refused like other bad input, before anything runs)."""
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            stopped = json.load(f)
        advice = stopped["advice"]
        _ = (advice["rule"], advice["action"], stopped["step"])  # what a stop record holds
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a stop record ({type(err).__name__}: {err}); "
                         "delete it to train on") from None
    return stopped


def ended_note(cfg, names=FIELD_NAMES):
    """On --resume, why there is nothing to train, or None: the advisor stopped the run
    (stopped.json; resuming would train past its advice and overwrite it) or it reached max_steps.
    Read before anything is written, so resuming an ended run changes no file. names: how it names the
    setting that trains on (config.SettingNames: max_steps, or at the command line --max-steps)."""
    if not cfg.resume:
        return None
    paths = run_paths(cfg)
    stopped = read_stop_record(paths["stopped"])
    if not os.path.exists(paths["summary"]):
        return None  # ended but killed before summary.json: the normal resume path writes it
    if stopped is not None:
        advice, step = stopped["advice"], stopped["step"]
        details = advice.get("details") or {}
        return (f"[{cfg.run_id}] already stopped by the advisor at step {step}: {advice['rule']}: "
                f"{advice_reason(advice['action'], advice.get('message', ''))}"
                f"{convergence_note(details, advice['rule'])}{shape_said(details)} (delete {paths['stopped']} to train on)")
    step = checkpoint_step(paths["ckpt"])
    if step >= cfg.max_steps:
        return (f"[{cfg.run_id}] already finished at step {step} of {cfg.max_steps} (pass a larger "
                f"{names('max_steps')} to train on)")
    return None


def saved_summary(cfg):
    """The run's summary.json as a dict, or None when there is none. ValueError naming the file where it
    is not one (cut short, emptied, a folder): --resume of an ended run raised JSONDecodeError."""
    path = run_paths(cfg)["summary"]
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            summary = json.load(f)
        if not isinstance(summary, dict):
            raise TypeError(f"a JSON {type(summary).__name__}, not an object")
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(f"{path}: not a run summary ({type(err).__name__}: {err}); delete it and resume "
                         "again, which writes it anew") from None
    return summary


# ---------------------------------------------------------------------------------------------
# distributed helpers (no-ops in a single process)


# While rank 0 asks the advisor (a fit: 40 s against the shipped reference here, minutes against a large
# one) the other ranks wait in a broadcast. NCCL gives up on a collective after 10 minutes by default
# (gloo after 30), and a run that crashed there would ask the same question on --resume and crash again;
# both backends wait 30 minutes.
COLLECTIVE_TIMEOUT_MINUTES = 30


class RefusedOnRank0(ValueError):
    """Rank 0's refusal, on the other ranks of a torchrun: they were sent it (decided_by_rank_0,
    resume_from_checkpoint) where they would have waited for rank 0, which had ended, in a collective."""


class RefusedOnAnotherRank(ValueError):
    """Another rank's refusal of rank 0's decision (its own machine's checks of the settings decided), on
    rank 0: sent back through the store (decided_by_rank_0) as rank 0 sends its own refusals."""


class RefusedWhereItStarts(ValueError):
    """A refusal of train()'s own checks of the run where it starts (preflight again: the run folder may have
    changed since the command's checks, config.json edited, a checkpoint replaced, another run started in it),
    its settings named as train()'s caller names them: cli.run_command says it in one line, exit 2, as the
    command's own checks' refusal, where it was a traceback naming the fields."""


@contextmanager
def refused_where_it_starts(names):
    """A ValueError of the checks inside (a SettingError too) raised as RefusedWhereItStarts, its settings named
    by names (config.SettingNames: the fields, or at the command line the flags), before rank 0 sends it to the
    other ranks (decided_by_rank_0); an UnreadableCheckpoint too (a SettingError: it says out, or --out)."""
    try:
        yield
    except SettingError as err:
        raise RefusedWhereItStarts(err.message(names)) from None
    except ValueError as err:
        raise RefusedWhereItStarts(str(err)) from None


_rendezvous_store = None  # torchrun's key-value store, once reached (rendezvous_store)

C10_LOG_FATAL = 3  # c10's log levels: 0 INFO, 1 WARNING (torch's default), 2 ERROR, 3 FATAL


@functools.cache
def c10_log_level():
    """c10's minimum log level (a ctypes.c_int on its flag FLAGS_caffe2_log_level), or None where this
    torch build does not export it. torch reads TORCH_CPP_LOG_LEVEL into it once, when it is imported."""
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    for name in ("libc10.so", "libc10.dylib", "c10.dll"):
        try:
            return ctypes.c_int.in_dll(ctypes.CDLL(os.path.join(lib, name)), "FLAGS_caffe2_log_level")
        except (OSError, ValueError):  # no such library here; a build that does not export the flag
            continue
    return None


@contextmanager
def store_wait_logs_quieted():
    """torch's C++ log muted while this rank, joined, waits on the store: for rank 0's decision, or rank 0
    for the other ranks' answers (decided_by_rank_0). The store is reached, so a failure there is a rank
    that ended (its store lost: 'Failed to recv, got 0 bytes') or a wait that timed out, both raised to
    Python and said in one line (lost_rank_line, RankLost), and the log had said the same first, above
    that line: warnings with a C++ stack trace. TORCH_CPP_LOG_LEVEL is read only at torch's import, so the
    flag it sets is set here and put back after. Left alone where the user set TORCH_CPP_LOG_LEVEL (they
    asked to see the log), or where the flag cannot be found."""
    level = None if "TORCH_CPP_LOG_LEVEL" in os.environ else c10_log_level()
    if level is None:
        yield
        return
    before, level.value = level.value, C10_LOG_FATAL
    try:
        yield
    finally:
        level.value = before


def rendezvous_store(wait_s=None):
    """torchrun's key-value store (MASTER_ADDR:MASTER_PORT), reached before the process group: on --resume
    the ranks other than 0 learn the run's settings through it, and with them the device that decides
    the group's backend. setup_distributed starts the group on this same store. wait_s: how long the
    join may take (JOIN_WAIT_S unless given)."""
    global _rendezvous_store
    if _rendezvous_store is None:
        deadline = time.monotonic() + (JOIN_WAIT_S if wait_s is None else wait_s)
        if process_rank() != 0 and not store_opened_before(deadline):  # rank 0 hosts it under a launch by hand
            raise RankLost(not_joined_line(process_rank(), int(os.environ["WORLD_SIZE"])))
        try:  # the join alone is bounded by JOIN_WAIT_S: see there. Its C++ log is left as it is (unlike
            # store_wait_logs_quieted's): only there does torch say why a connect fails (a MASTER_ADDR that does
            # not resolve, a network it cannot reach), where the error it raises says only 'timed out'
            wait = datetime.timedelta(seconds=max(deadline - time.monotonic(), STORE_CONNECT_S))
            store = store_joined_within(wait)
        except dist.DistError as err:
            if "timed out" not in str(err).lower():  # MASTER_PORT in use, a MASTER_ADDR that is not a host
                raise
            raise RankLost(not_joined_line(process_rank(), int(os.environ["WORLD_SIZE"]))) from None
        store.set_timeout(datetime.timedelta(minutes=COLLECTIVE_TIMEOUT_MINUTES))  # rank 0's checks (a large CRC)
        _rendezvous_store = store
    return _rendezvous_store


# How long past its own timeout torch's client is given to answer (store_joined_within): it says a timeout itself.
STORE_ANSWER_S = 5


def store_joined_within(wait):
    """The store dist.rendezvous joins within wait (a timedelta). On a rank other than 0 whose MASTER_PORT another
    program listens on, one that takes the connection and answers nothing (a web server waits for a request line
    torch's client never sends), the knock found it open (store_opened_before) and torch's client waited for its
    answer forever, past its timeout, deaf to Ctrl-C: no line, no end. Joined in a thread, and given up
    STORE_ANSWER_S after wait, naming the address; its errors are raised here. Rank 0 hosts the store: joined here."""
    if process_rank() == 0:
        return next(dist.rendezvous("env://", timeout=wait))[0]
    outcome = {}

    def join():
        try:
            outcome["store"] = next(dist.rendezvous("env://", timeout=wait))[0]
        except BaseException as err:  # raised below, in the caller's thread
            outcome["error"] = err

    joining = threading.Thread(target=join, daemon=True)  # daemon: a client that never returns ends with the process
    joining.start()
    joining.join(wait.total_seconds() + STORE_ANSWER_S)
    if "error" in outcome:
        raise outcome["error"]
    if "store" not in outcome:
        raise RankLost(f"rank {process_rank()} of {os.environ['WORLD_SIZE']}: the program at {os.environ.get('MASTER_ADDR')}:"
                       f"{os.environ.get('MASTER_PORT')} took the connection but did not answer as the store within "
                       f"{wait.total_seconds() + STORE_ANSWER_S:.0f} s: the port may be another program's (MASTER_ADDR and "
                       "MASTER_PORT must be rank 0's)")
    return outcome["store"]


# How often a rank other than 0 knocks at the store rank 0 has not opened yet (store_opened_before), and how long
# torch's client is given at least to join it once it is open: it is listening, so a moment.
STORE_KNOCK_EVERY_S = 0.25
STORE_CONNECT_S = 2


def store_opened_before(deadline):
    """Whether the store at MASTER_ADDR:MASTER_PORT takes connections before deadline (time.monotonic()), knocked
    at every STORE_KNOCK_EVERY_S with a bare connection: False where it refused them (or did not answer) until
    then. torch's client, left to wait for the store, retries its connection ever less often (its backoff
    grows by half each try): a rank that had waited 30 s for rank 0 joined 8 s after rank 0 opened the store,
    one that had waited 90 s, 31 s after, and a refusal of rank 0's, held there TELL_WAIT_S (30 s) for the
    others to read (told_the_other_ranks), was gone by then; that rank waited out JOIN_WAIT_S, and a backoff
    more past it, to say that rank 0 did not open the store. torch's client now starts once the store is
    open, and joins at once. Any other failure (a MASTER_ADDR that does not resolve, a network it cannot
    reach, a MASTER_PORT that is no port, or unset) is left to torch's client, whose log and error say it: True."""
    host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not (host and port and port.isdigit()):
        return True
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, int(port)), timeout=min(max(left, 0.1), 1)):
                return True
        except (ConnectionRefusedError, TimeoutError):  # rank 0 has not opened it yet
            if left <= STORE_KNOCK_EVERY_S:
                return False
            time.sleep(STORE_KNOCK_EVERY_S)
        except (OSError, OverflowError):  # said by torch; a port past 65535 (OverflowError)
            return True


# How long the ranks wait for each other to reach the store, rank 0 for the others to join it and the others
# for rank 0 to open it. Under a launch without torchrun's agent (MASTER_ADDR, RANK and WORLD_SIZE set by
# hand) rank 0 hosts the store, and a rank that failed its own machine's checks before it joined (a model
# folder or device only it lacks), or crashed, or was never started, held rank 0 there for the whole
# 30-minute timeout without a word (deaf to SIGTERM and Ctrl-C, inside torch's C++); as did rank 0, failed
# before it opened the store, hold the others. Generous for ranks started by hand on several machines,
# and for rank 0's own checks, done before it opens the store (a large checkpoint's CRC). A rank whose own
# checks fail before it joins now joins to say so (told_rank_0): rank 0 waits this long only for a rank that
# crashed or was never started, or one that gave up telling it (TELL_WAIT_S). A new run's rank 0 refused by its
# own checks, or crashed in them, opens the store to say so (told_the_other_ranks), for TELL_WAIT_S, no longer.
JOIN_WAIT_S = 300


class RankLost(RuntimeError):
    """Another rank of the run never joined, or ended (its connection lost): said in one line by the rank
    that is left, exit 1, where it was a torch traceback (DistNetworkError, gloo's 'Connection reset by
    peer') or a silent wait. The rank that ended says its own error (a traceback is the real one)."""


def not_joined_line(rank, world):
    """Why the store's join failed, from this rank's side (see JOIN_WAIT_S)."""
    if rank != 0:
        return (f"rank 0 of {world} did not open the store at {os.environ.get('MASTER_ADDR')}:"
                f"{os.environ.get('MASTER_PORT')} within {JOIN_WAIT_S} s: see its output (it may have ended, "
                "or not been started; MASTER_ADDR and MASTER_PORT must be rank 0's)")
    missing = "rank 1 of 2" if world == 2 else f"not every one of ranks 1 to {world - 1} (of {world})"
    return f"{missing} did not join within {JOIN_WAIT_S} s: see its output (it may have ended, or not been started)"


def lost_rank_line(err, rank, world):
    """One line for an error that says another rank is gone (the store's connection closed under it, gloo's
    peer reset), or None for any other error (a bug's traceback stands). Under a manual launch rank 0
    hosts the store, so a rank that lost the store lost rank 0."""
    text = str(err)
    # only a store this rank had reached can be lost: an error opening it (MASTER_PORT another program's,
    # 'address already in use') is this rank's own, said as torch says it
    store_lost = isinstance(err, dist.DistNetworkError) and _rendezvous_store is not None
    peer_lost = isinstance(err, RuntimeError) and any(
        said in text for said in ("Connection reset by peer", "Connection closed by peer", "Broken pipe"))
    if world < 2 or not (store_lost or peer_lost):
        return None
    if rank != 0 and (store_lost or world == 2):
        gone = "rank 0"
    else:
        gone = "rank 1" if world == 2 else "another rank"
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    first = re.sub(r"^\[[^\]]*\]\s*", "", first).split(". ")[0]  # without gloo's source file and its advice
    return f"{gone} ended: see its output (this rank, {rank} of {world}, lost its connection: {first[:200]})"


def decided_by_rank_0(name, decide, check_here=None):
    """decide() on rank 0, and its result on every rank (through torchrun's store: before the process
    group). Rank 0 alone reads the run folder: under a multi-machine torchrun with --out on each
    machine's own disk only its machine has it, and every rank reading it refused the resume on the
    others ('no checkpoint') or started them afresh. A refusal of rank 0's (ValueError, RunFolderBusy)
    ends the others too, with its message (RefusedOnRank0). name: the decision's key in the store.
    check_here(result): the other ranks' own checks of it (their machine's part of preflight), whose
    verdict each sends back to rank 0 the same way: a refusal there ends rank 0 too, naming the rank and
    its message (RefusedOnAnotherRank), where rank 0 went on to wait for that rank in the process group."""
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        return decide()
    key = decision_key(name)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if rank != 0:
        store = rendezvous_store()  # joined first: the join's log stays (see there)
        with store_wait_logs_quieted():  # rank 0 may end meanwhile: its store with it (lost_rank_line)
            outcome, value = pickle.loads(store.get(key))
        if outcome == "refused":
            said_read(key, rank)
            raise RefusedOnRank0(value)
        if outcome == "ended":  # rank 0 crashed in its checks (told_the_other_ranks): its traceback is the error
            said_read(key, rank)
            raise RankLost(ended_line(0, world, value))
        if outcome == "interrupted":  # rank 0 was stopped in its checks (Ctrl-C, SIGTERM): told_the_other_ranks
            said_read(key, rank)
            raise RankLost(interrupted_line(0, world, value))
        try:
            if check_here is not None:
                check_here(value)
        except BaseException as err:  # a Ctrl-C or a bug too: rank 0 would wait for this rank in vain
            said_read(key, rank, err)
            raise
        said_read(key, rank)
        return value
    try:
        value = decide()
    except (ValueError, RunFolderBusy) as err:
        try:
            rendezvous_store().set(key, pickle.dumps(("refused", str(err))))
        except RankLost:  # no other rank joined to be told: the refusal is still this run's to say
            raise err from None
        wait_until_read(key, world, wait_s=DECISION_READ_WAIT_S)
        raise
    except (Exception, KeyboardInterrupt) as err:  # a crash or a stop (Ctrl-C, SIGTERM): before rank 0 opened the
        told_the_other_ranks(name, err)  # store the others waited JOIN_WAIT_S to join it, then said it did not come
        raise
    rendezvous_store().set(key, pickle.dumps(("decided", value)))
    verdicts = wait_until_read(key, world, wait_s=JOIN_WAIT_S)  # they check it on their machines first
    refused_elsewhere(verdicts, world)
    if len(verdicts) < world - 1:  # starting the group would wait for them for torch's 30 minutes, deaf to Ctrl-C
        raise RankLost(not_answered_line(verdicts, world))
    return value


def decision_key(name):
    """The store's key of rank 0's decision `name` (decided_by_rank_0): a restart under torchrun decides anew."""
    return f"trainer_minimal/{name}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"


# How long a rank whose own checks failed before it joined the store waits for rank 0 to open it, to tell it
# (told_rank_0): under a launch by hand rank 0 hosts the store, and opens it once its own checks are done, a
# moment after this rank's when both were started together. Not longer: this rank's user waits for its error.
TELL_WAIT_S = 30
# As long, at most, for a rank stopped in its checks (Ctrl-C, SIGTERM: a KeyboardInterrupt) to tell the others so,
# its join and their reading of it together: its user asked it to end, and waits for that, not for the others. A
# rank waiting for the store joins in a moment (it knocks a few times a second: store_opened_before); one not
# there yet is not told, and says after JOIN_WAIT_S, as before, that this rank did not come.
STOPPED_TELL_WAIT_S = 2


def told_rank_0(name, err):
    """A rank other than 0 whose own checks failed before it joined the store (a new run's flags, checked on
    its machine: cli.agreed_train_config) joins it only to tell rank 0, as it would have once it had read
    the decision `name` (said_read): rank 0 ends at once naming this rank and its reason (refused_elsewhere).
    It waited for this rank to join for JOIN_WAIT_S (300 s), then said only that it did not. The join is
    tried a second at a time for TELL_WAIT_S at most (STOPPED_TELL_WAIT_S, without a word, where this rank
    was stopped: err a KeyboardInterrupt), and Ctrl-C skips it: a rank 0 not there by then, or
    gone, is not told (it says, as before, that this rank did not join). Nothing on rank 0, or without a
    store to join (one process, or MASTER_ADDR or MASTER_PORT unset)."""
    rank = process_rank()
    where = (os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT"))
    if rank == 0 or not all(where):
        return
    stopped = isinstance(err, KeyboardInterrupt)
    wait_s = STOPPED_TELL_WAIT_S if stopped else TELL_WAIT_S
    deadline, said = time.monotonic() + wait_s, stopped  # a stopped rank's user hears of no wait
    try:
        with store_wait_logs_quieted():  # torch logs each connect refused while rank 0 is not there yet
            while True:
                try:
                    rendezvous_store(wait_s=min(1, max(deadline - time.monotonic(), 0.1)))  # none past the deadline
                    break
                except RankLost:  # not there within the second
                    if time.monotonic() >= deadline:
                        return
                    if not said:
                        print(f"trainer-minimal: rank {rank} cannot start (said below); waiting up to {wait_s} s for "
                              f"rank 0 to open the store at {where[0]}:{where[1]} to tell it, so that it ends too "
                              "(Ctrl-C skips this)", file=sys.stderr, flush=True)
                        said = True
    except (KeyboardInterrupt, dist.DistError, ValueError):  # skipped; a MASTER_ADDR that is not a host, a
        return  # MASTER_PORT that is no number (torch's ValueError, which took the place of this rank's own error)
    said_read(decision_key(name), rank, err)


def told_the_other_ranks(name, err):
    """Rank 0, whose own checks refused a new run's flags before it opened the store it hosts under a launch by
    hand (cli.agreed_train_config): it opens the store only to put its refusal there under the decision
    `name`, as decided_by_rank_0 puts a refusal of its decision, so that a rank that passed its own checks
    ends at once with rank 0's message (it waited JOIN_WAIT_S to join, then said only that rank 0 did not
    open the store), and one that refused too is told by it (it waited TELL_WAIT_S to tell rank 0, which
    had ended). The others are waited for TELL_WAIT_S at most to join, silently for a second (started
    together, they are joining already), and Ctrl-C skips it. A crash in those checks, or in decided_by_rank_0's
    decide(), is sent as said_read sends another rank's: the others end naming rank 0 and the error's type
    (its traceback is this rank's to show). A stop there (Ctrl-C, SIGTERM: err a KeyboardInterrupt) is sent
    too, the others ending with 'rank 0 of N was interrupted while it checked ...', where they waited JOIN_WAIT_S
    (300 s) and said rank 0 did not come: its join and their reading are waited for STOPPED_TELL_WAIT_S (2 s)
    at most, without a word, and the stop goes on. Nothing on another rank, or without a store (one process,
    or MASTER_ADDR or MASTER_PORT unset)."""
    where = (os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if process_rank() != 0 or world == 1 or not all(where):
        return
    joined = {}
    stopped = isinstance(err, KeyboardInterrupt)
    wait_s = STOPPED_TELL_WAIT_S if stopped else TELL_WAIT_S
    deadline = time.monotonic() + wait_s

    def join():  # the host waits for the others inside torch's C++, deaf to Ctrl-C: in a thread, waited for below
        try:
            joined["store"] = rendezvous_store(wait_s=wait_s)
        except (RankLost, dist.DistError, ValueError):  # no other rank joined in time; the port another program's,
            pass  # or no number (torch's ValueError): the refusal is said here all the same

    key = decision_key(name)
    try:
        with store_wait_logs_quieted():
            joining = threading.Thread(target=join, daemon=True)  # daemon: a Ctrl-C ends the process without it
            joining.start()
            joining.join(1)
            if joining.is_alive() and not stopped:  # a stopped rank's user hears of no wait
                print(f"trainer-minimal: rank 0 cannot start (said below); waiting up to {wait_s} s for the other "
                      f"ranks to join the store at {where[0]}:{where[1]} to tell them, so that they end too "
                      "(Ctrl-C skips this)", file=sys.stderr, flush=True)
            while joining.is_alive() and not (stopped and time.monotonic() >= deadline):  # a stop waits no longer
                joining.join(0.2)
            if "store" not in joined:
                return
            joined["store"].set(key, pickle.dumps(verdict_of(err)))
        # the others, joined, read it in a moment: a stop waits the rest of its bound, or half a second
        wait_until_read(key, world, wait_s=max(deadline - time.monotonic(), 0.5) if stopped else DECISION_READ_WAIT_S)
    except (KeyboardInterrupt, dist.DistError):  # skipped; a rank that ended meanwhile
        return


# How long rank 0 waits for the other ranks to read its refusal before it ends. They reach the store only once
# they are ready to read (rendezvous_store), and read it after their own machine's checks. A decision that
# goes ahead is waited for as long as their join (JOIN_WAIT_S): they check it on their machines before they
# answer, and rank 0 must know whether they refused it before it starts the process group with them.
DECISION_READ_WAIT_S = 60


def said_read(key, rank, err=None):
    """Tell rank 0 that this rank has read the decision under key (see wait_until_read), and its verdict
    on it: None (it goes on), or the error its own checks ended in. Where rank 0 is gone already (it
    waited out DECISION_READ_WAIT_S), there is no one to tell."""
    verdict = ("read", None) if err is None else verdict_of(err)
    store = rendezvous_store()
    try:
        with store_wait_logs_quieted():  # what it would log is this error, left unsaid
            store.set(f"{key}/read/{rank}", pickle.dumps(verdict))
    except dist.DistError:
        pass


def verdict_of(err):
    """What a rank that ends in err tells the others through the store: ("refused", its message),
    ("interrupted", "" or the signal's name) for a stop (Ctrl-C; SIGTERM or SIGHUP: cli.Stopped, whose message
    is the signal's name), or ("ended", the error's type name) for a bug, whose traceback is this rank's to
    show: the others are told where to look (ended_line)."""
    if isinstance(err, (ValueError, RunFolderBusy)):
        return "refused", str(err)
    if isinstance(err, KeyboardInterrupt):
        return "interrupted", str(err)
    return "ended", type(err).__name__


def wait_until_read(key, world, wait_s):
    """Rank 0: wait until every other rank has read the decision under key, for wait_s at most, and
    return {rank: its verdict} of the ranks that read it (said_read). Under a launch without
    torchrun's agent (MASTER_ADDR and RANK set by hand) rank 0 hosts the store itself, and when it ended
    as soon as it had put a refusal (or an ended run's note) there, a rank that came to read it a moment
    later found no store: 'DistNetworkError: Failed to recv, got 0 bytes', a traceback where it should
    say rank 0's refusal. A rank that never reads (it failed its own checks before it joined, or was
    never started) holds rank 0 up to the limit, no longer; one that read and refused says so at once."""
    store = rendezvous_store()
    keys = {rank: f"{key}/read/{rank}" for rank in range(1, world)}
    try:
        with store_wait_logs_quieted():
            store.wait(list(keys.values()), datetime.timedelta(seconds=wait_s))
    except dist.DistError:
        pass
    return {rank: pickle.loads(store.get(name)) for rank, name in keys.items() if store.check([name])}


def refused_elsewhere(verdicts, world):
    """Rank 0: end with the first other rank's refusal of its decision (RefusedOnAnotherRank), or its end
    in an error (RankLost), among verdicts ({rank: (outcome, said)}: wait_until_read)."""
    for rank, (outcome, said) in sorted(verdicts.items()):
        if outcome == "refused":
            raise RefusedOnAnotherRank(f"rank {rank} of {world} refused: {said}")
        if outcome == "ended":
            raise RankLost(ended_line(rank, world, said))
        if outcome == "interrupted":
            raise RankLost(interrupted_line(rank, world, said))


def ended_line(rank, world, error_type):
    """The line of another rank that ended in an error, not a refusal, while it checked this run's settings."""
    return f"rank {rank} of {world} ended ({error_type}) while it checked this run's settings: see its output"


def interrupted_line(rank, world, signal_name):
    """The line of another rank stopped while it checked this run's settings (verdict_of): by Ctrl-C (signal_name
    "") or a signal, SIGTERM or SIGHUP (cli.Stopped). No error of its own to look for: it was asked to end."""
    how = f"stopped by {signal_name}" if signal_name else "interrupted"
    return f"rank {rank} of {world} was {how} while it checked this run's settings"


def not_answered_line(verdicts, world):
    """Rank 0: which ranks did not answer its decision within JOIN_WAIT_S (verdicts: wait_until_read's)."""
    silent = [rank for rank in range(1, world) if rank not in verdicts]
    who = f"rank {silent[0]} of {world}" if len(silent) == 1 else f"ranks {', '.join(map(str, silent))} of {world}"
    return (f"{who} did not answer within {JOIN_WAIT_S} s once it had joined: see its output (it may have ended, "
            "or be stuck in its checks of this run's settings)")


def setup_distributed(cfg):
    """(rank, world size, device). torchrun sets WORLD_SIZE/RANK/LOCAL_RANK."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, torch.device(cfg.device)
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    if cfg.device.startswith("cuda"):
        device = torch.device(f"cuda:{local_rank}")
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    # torch.optim imports torch._dynamo (and with it torch._inductor) on first use. Imported after
    # init_process_group, those modules keep a reference to the default group, so destroy_process_group
    # cannot free it: gloo's threads then outlive it and are torn down during interpreter exit, which
    # now and then aborts a finished run ("terminate called without an active exception", exit -6).
    # Imported first, they hold nothing, and end_distributed frees the group while Python is alive.
    importlib.import_module("torch._dynamo")  # a plain `import torch._dynamo` here would shadow torch

    if not dist.is_initialized():
        # the store the ranks decided the run's settings through, where they did (a manual launch whose
        # rank 0 hosts the store cannot host it twice)
        on_store = {} if _rendezvous_store is None else dict(store=_rendezvous_store, rank=rank, world_size=world)
        dist.init_process_group(backend, timeout=datetime.timedelta(minutes=COLLECTIVE_TIMEOUT_MINUTES), **on_store)
    return rank, world, device


def end_distributed():
    """Destroy the process group, if one was started, while the interpreter is alive: left to
    interpreter exit, gloo's threads can die in a C++ terminate ("terminate called without an
    active exception", exit -6) after training finished. See setup_distributed for the import
    that lets this call really free the group."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def collective_device():
    """NCCL only moves CUDA tensors, gloo CPU ones; small metric tensors live on the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def all_sum(tensor, world):
    """Sum a tensor over ranks (returned where it came from)."""
    if world == 1:
        return tensor
    buffer = tensor.to(collective_device())
    dist.all_reduce(buffer)
    return buffer.to(tensor.device)


def all_max(values, world):
    """The largest of each of a list of ints over ranks."""
    if world == 1:
        return values
    buffer = torch.tensor(values, dtype=torch.int64, device=collective_device())
    dist.all_reduce(buffer, op=dist.ReduceOp.MAX)
    return buffer.tolist()


def all_gather(tensor, world):
    """[tensor of rank 0, tensor of rank 1, ...], on the tensor's device."""
    buffers = [torch.zeros_like(tensor, device=collective_device()) for _ in range(world)]
    dist.all_gather(buffers, tensor.to(collective_device()))
    return [b.to(tensor.device) for b in buffers]


def sync_gradients(params, world):
    """Sum gradients over ranks with one flat all_reduce (weights already hold global normalisers)."""
    if world == 1:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    offset = 0
    for p in params:
        p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
        offset += p.numel()


def broadcast_in_place(tensor):
    """Rank 0's values of a tensor on every rank, written into it (by way of the backend's device)."""
    buffer = tensor.to(collective_device())
    dist.broadcast(buffer, src=0)
    if buffer is not tensor:
        tensor.copy_(buffer)


def broadcast_object(obj, world):
    if world == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


# ---------------------------------------------------------------------------------------------
# warm start


def warm_start_path(cfg):
    keys = ("model_path", "n_layer", "n_head", "d_model", "tasks", "max_size", "train_size",
            "val_size", "data_seed", "warmup_steps", "warmup_batch", "warmup_lr", "warmup_seed", "dtype")
    parts = [getattr(cfg, k) for k in keys]
    if cfg.model_path:  # what the folder holds, not only its name; the tiny GPT's key is as it was
        parts.append(model_folder_fingerprint(cfg.model_path))
    key = derive_seed(ARCHITECTURE, *parts)
    folder = cfg.warmstart_cache or os.path.join(cfg.out, "warmstart")
    return os.path.join(folder, f"warmstart-{key:016x}.pt")


def warm_start(cfg, model, tok, pool, device, rank, world):
    """Supervised warm-up on (prompt, answer) pairs, cached by its settings; loads it when cached.

    Short on purpose: the policy should solve some problems (pass rate above zero) and leave room
    for RL. Rank 0 trains and saves, and sends its weights to the other ranks: a rank that loaded the
    file only if it saw it kept its random start where it did not (a cache on a machine's own disk
    under a multi-machine torchrun, or one that a network file system showed late), and trained
    another model than rank 0's without a word.
    """
    path = warm_start_path(cfg)
    if rank == 0 and not os.path.exists(path) and cfg.warmup_steps > 0:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.warmup_lr, betas=(0.9, 0.95))
        for step in range(cfg.warmup_steps):
            rng = np.random.default_rng(derive_seed(cfg.warmup_seed, "warmup", step))
            batch = [pool[i] for i in rng.integers(len(pool), size=cfg.warmup_batch)]
            prompt_ids, prompt_mask = left_pad([tok.encode(p["prompt"]) for p in batch], tok.pad_id, device)
            answers = [tok.encode_answer(p["answer"]) for p in batch]
            width = max(len(a) for a in answers)
            answer_ids = torch.tensor([a + [tok.pad_id] * (width - len(a)) for a in answers], device=device)
            answer_mask = torch.tensor([[1] * len(a) + [0] * (width - len(a)) for a in answers], device=device)
            logp, _ = score(model, prompt_ids, prompt_mask, answer_ids, answer_mask, dtype=cfg.dtype)
            loss = -(logp * answer_mask).sum() / answer_mask.sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        # a cache may be shared by runs started side by side (two sweeps, or train commands, given one
        # --warmstart-cache): each writes through its own temporary file
        atomic_torch_save(model.state_dict(), path)
    if rank == 0 and os.path.exists(path):
        model.load_state_dict(torch.load(path, map_location=device, weights_only=True))
    broadcast_weights(model, world)
    return path


def broadcast_weights(model, world):
    """Rank 0's weights (and buffers) on every rank, as DDP's wrapper makes them when it starts."""
    if world == 1:
        return
    for tensor in model.state_dict().values():  # tensors that share the weights' storage: filled in place
        dist.broadcast(tensor, src=0)


# ---------------------------------------------------------------------------------------------
# evaluation


@torch.no_grad()
def evaluate(cfg, model, tok, val, step, device, rank, world):
    """Pass rate on the held-out prompts, val_samples samples each -> (metric, n_eval, per task).

    Per task: {"pass_add": ..., ...}, the same mean restricted to one task family (diagnostics).
    """
    indices = list(range(rank, len(val), world))
    task_names = sorted({v["task"] for v in val})
    sums = torch.zeros(len(task_names), 2, dtype=torch.float64)  # (task, [correct, graded])
    per_chunk = max(1, EVAL_CHUNK // cfg.val_samples)
    for start in range(0, len(indices), per_chunk):
        chunk = indices[start : start + per_chunk]
        prompts = [tok.encode(val[i]["prompt"]) for i in chunk for _ in range(cfg.val_samples)]
        prompt_ids, prompt_mask = left_pad(prompts, tok.pad_id, device)
        noise = sampling_noise([derive_seed(cfg.seed, "eval", step, i) for i in chunk], cfg.val_samples, cfg.gen_len)
        out = generate(model, prompt_ids, prompt_mask, noise, cfg.gen_len, tok.eos_id, tok.pad_id,
                       cfg.temperature, cfg.fp32_logits, cfg.dtype)
        rewards = rewards_of(tok, out, [val[i]["answer"] for i in chunk for _ in range(cfg.val_samples)])
        for i, r in zip(chunk, rewards.view(len(chunk), cfg.val_samples).sum(1).tolist(), strict=True):
            sums[task_names.index(val[i]["task"])] += torch.tensor([r, cfg.val_samples], dtype=torch.float64)
    sums = all_sum(sums, world)
    by_task = {f"pass_{t}": (sums[j, 0] / sums[j, 1]).item() for j, t in enumerate(task_names)}
    total = sums.sum(0)
    return total[0].item() / total[1].item(), int(total[1].item()), by_task


def rewards_of(tok, out, answers):
    """Exact-match rewards (B,); a completion that never produced <eos> gets 0."""
    texts = [tok.decode(ids) for ids in out["completion"].tolist()]
    finished = out["finished"].tolist()
    return torch.tensor([reward(t, a) if f else 0.0 for t, a, f in zip(texts, answers, finished, strict=True)])


# ---------------------------------------------------------------------------------------------
# one generation round -> k mini-batches


def sample_round(cfg, model, tok, pool, state, step, device, rank, world):
    """Pick prompts, sample G completions each, compute advantages; return this rank's mini-batches.

    Prompt order: the round's k * batch_size prompts form k mini-batches; each mini-batch is split
    evenly over the ranks, so every rank holds a slice of every mini-batch.
    """
    k, bs, G = cfg.off_policy_k, cfg.batch_size, cfg.group_size
    active = np.flatnonzero(~state["retired"])
    if len(active) < k * bs:  # nearly everything retired: draw from the whole pool again
        active = np.arange(len(pool))
    rng = np.random.default_rng(derive_seed(cfg.seed, "batch", step))
    chosen = rng.choice(active, size=k * bs, replace=False)  # (k * bs,) pool indices
    layout = np.arange(k * bs).reshape(k, world, bs // world)  # round positions per (mini-batch, rank)
    mine = layout[:, rank].reshape(-1)  # this rank's round positions
    prompt_ids, prompt_mask = left_pad(
        [tok.encode(pool[chosen[p]]["prompt"]) for p in mine for _ in range(G)], tok.pad_id, device)
    noise = sampling_noise([derive_seed(cfg.seed, "rollout", step, int(chosen[p])) for p in mine], G, cfg.gen_len)
    out = generate(model, prompt_ids, prompt_mask, noise, cfg.gen_len, tok.eos_id, tok.pad_id,
                   cfg.temperature, cfg.fp32_logits, cfg.dtype)
    local_rewards = rewards_of(tok, out, [pool[chosen[p]]["answer"] for p in mine for _ in range(G)])
    rewards = torch.zeros(k * bs, G)
    if world > 1:
        for r, gathered in enumerate(all_gather(local_rewards.view(len(mine), G), world)):
            rewards[layout[:, r].reshape(-1)] = gathered
    else:
        rewards[mine] = local_rewards.view(len(mine), G)

    keep = ~zero_variance_groups(rewards) if cfg.zero_var_filter else torch.ones(k * bs, dtype=torch.bool)
    advantages = group_advantages(rewards, cfg.adv_norm, keep=keep)  # (k * bs, G), identical on every rank
    if cfg.npr_threshold > 0:
        state["retired"][chosen] |= rewards.mean(1).numpy() >= cfg.npr_threshold

    seq_keep = keep[mine].repeat_interleave(G).to(device)  # (B_local,) sequences that are trained on
    per_mb = len(mine) // k  # prompts of one mini-batch on this rank
    minibatches = []
    for j in range(k):
        rows = slice(j * per_mb * G, (j + 1) * per_mb * G)
        positions = mine[j * per_mb : (j + 1) * per_mb]
        mb_rewards, mb_keep = rewards[j * bs : (j + 1) * bs], keep[j * bs : (j + 1) * bs]
        minibatches.append(dict(
            prompt_ids=prompt_ids[rows], prompt_mask=prompt_mask[rows],
            completion=out["completion"][rows], completion_mask=out["completion_mask"][rows],
            logp_old=out["logp_old"][rows],
            adv=advantages[positions].reshape(-1).to(device),  # (B_mb,) one advantage per sequence
            keep=seq_keep[rows],
            prompt_index=torch.from_numpy(np.repeat(positions, G)).to(device),
            n_samples=int(mb_keep.sum()) * G, n_prompts=int(mb_keep.sum()),
            reward=mb_rewards.mean().item(), zero_var_frac=zero_variance_groups(mb_rewards).float().mean().item(),
            gen_flops=0.0, gen_tokens=0,
        ))
    # global kept-token count of each mini-batch: the token average divides by the same number everywhere
    kept_tokens = torch.tensor([float((mb["completion_mask"] * mb["keep"][:, None]).sum()) for mb in minibatches])
    for mb, n in zip(minibatches, all_sum(kept_tokens, world).tolist(), strict=True):
        mb["n_tokens"] = n
    # FLOPs are counted at the round's widths over all ranks, as one process pads and decodes the round: a
    # rank pads to its own prompts and stops once its own samples have ended, so its own widths summed over
    # ranks gave a run less compute the more processes trained it (7% at a step with 2 on mixed tasks)
    prompt_width, decode_steps, completion_width = all_max([prompt_ids.shape[1], out["decode_steps"], out["length"]], world)
    for mb in minibatches:
        mb["flops_width"] = prompt_width + completion_width
    # the round's sampling is charged to its first step
    minibatches[0]["gen_flops"] = state["flops_model"].rollout(len(mine) * G, prompt_width, decode_steps)
    minibatches[0]["gen_tokens"] = int(out["completion_mask"].sum()) + int(prompt_mask.sum())
    return minibatches


# ---------------------------------------------------------------------------------------------
# one optimizer step


def update(cfg, model, optimizer, mb, state, world):
    """Loss on the kept sequences of one mini-batch, accumulated over micro-batches; one step.

    Returns the step's metrics (local sums are all-reduced, so every rank logs the same numbers).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    idx = mb["keep"].nonzero()[:, 0]  # kept sequences on this rank
    mask = mb["completion_mask"][idx]
    weights = aggregation_weights(mask, mb["prompt_index"][idx], cfg.aggregation,
                                  n_tokens=mb["n_tokens"], n_samples=mb["n_samples"], n_prompts=mb["n_prompts"])
    optimizer.zero_grad(set_to_none=True)
    # local sums: flops, trained tokens, loss, entropy * tokens, clipped tokens, loss tokens
    stats = torch.zeros(6, dtype=torch.float64)
    width = mb["flops_width"]  # the round's widest rank's (sample_round), so compute is the same on any number of ranks
    for start in range(0, len(idx), cfg.micro_batch):
        rows = idx[start : start + cfg.micro_batch]
        w = weights[start : start + cfg.micro_batch]  # (b, L)
        m = mb["completion_mask"][rows]
        logp, entropy = score(model, mb["prompt_ids"][rows], mb["prompt_mask"][rows], mb["completion"][rows], m,
                              cfg.temperature, cfg.fp32_logits, cfg.dtype)
        token_loss, clipped = policy_loss(cfg.loss_type, logp, mb["logp_old"][rows], mb["adv"][rows], m,
                                          cfg.clip_low, cfg.clip_high, cfg.cispo_max)
        loss = (w * token_loss).sum()
        loss.backward()
        stats += torch.tensor([state["flops_model"].train(len(rows), width), len(rows) * width, loss.item(),
                               float((entropy * m).sum()), float((clipped * m).sum()), float(m.sum())],
                              dtype=torch.float64)
    stats = all_sum(stats, world)
    grad_norm = float("nan")
    if mb["n_samples"] > 0:  # a step with nothing kept changes nothing (AdamW would still move)
        for group in optimizer.param_groups:
            group["lr"] = cfg.lr * min(1.0, (state["step"] + 1) / max(cfg.lr_warmup, 1))
        sync_gradients(params, world)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip if cfg.grad_clip > 0 else math.inf))
        # the same numbers on every rank (summed, and the gradients synced), so every rank ends here together
        if not (math.isfinite(stats[2].item()) and math.isfinite(grad_norm)):
            raise TrainingDiverged(state["step"] + 1, stats[2].item(), grad_norm, cfg.lr)
        optimizer.step()
    n_loss_tokens = max(stats[5].item(), 1.0)
    return dict(
        reward=mb["reward"], zero_var_frac=mb["zero_var_frac"], kept_prompts=mb["n_prompts"],
        loss=stats[2].item(), entropy=stats[3].item() / n_loss_tokens if stats[5] > 0 else None,
        clip_frac=stats[4].item() / n_loss_tokens if stats[5] > 0 else None,
        grad_norm=grad_norm if math.isfinite(grad_norm) else None,
        trained_tokens=int(stats[1].item()), train_flops=stats[0].item(),
    )


class TrainingDiverged(RuntimeError):
    """A step whose loss or gradient norm is not finite: AdamW took it and every weight became NaN, and the run
    went on to its end, exit 0, its pass rate 0 from then on, read by forecast as a recipe that collapsed (a
    --weight-decay 1e4 typed for 1e-4). The step is not taken and the run ends here, exit 1: its evaluations and
    last checkpoint stand, all from finite weights."""

    def __init__(self, step, loss, grad_norm, lr):
        super().__init__(f"step {step}: the loss is {loss:g} and the gradient norm {grad_norm:g}, so training diverged; "
                         "the step was not taken and the run ends (its evaluations and last checkpoint stand, and a "
                         f"resume would diverge again): start it anew with a lower learning rate (lr {lr:g}), weight "
                         "decay or temperature, or with gradient clipping")


# ---------------------------------------------------------------------------------------------
# checkpoints and the early-stop hook


def save_checkpoint(cfg, model, optimizer, state):
    saved = {k: v for k, v in state.items() if k != "flops_model"}
    atomic_torch_save(dict(config=dataclasses.asdict(cfg), model=model.state_dict(),
                           optimizer=optimizer.state_dict(), state=saved), run_paths(cfg)["ckpt"])


def consult_advisor(cfg, eval_rows, planned_compute):
    """Ask forecast.early_stop whether this run should continue; imported lazily (optional)."""
    import pandas as pd

    from forecast.early_stop import trainer_advice

    rules, forecaster_kwargs = advisor_settings(cfg)
    with warnings.catch_warnings(record=True) as caught:
        rec = trainer_advice(evals=pd.DataFrame(eval_rows), reference_path=cfg.advisor_reference or None,
                             planned_compute=planned_compute, config=rules, forecaster_kwargs=forecaster_kwargs)
    said_by_advise = set(rec.details.get("data_warnings") or [])  # printed once, in the trainer's words
    for w in caught:
        if str(w.message) not in said_by_advise:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return rec


# ---------------------------------------------------------------------------------------------
# the loop


def train(cfg, machine_checked=False, names=FIELD_NAMES):
    """Run (or resume) one RL run in cfg.out. Returns a summary dict (also written to summary.json);
    on --resume of a run that already ended, says so and returns its summary.json (None if absent).
    machine_checked: this process has checked its machine's part of cfg (check_this_machine) a moment ago
    (cli.agreed_train_config), and it is not checked again. The run folder is checked again: rank 0 may have
    waited minutes for the other ranks since, and another run may have started in the folder meanwhile (the
    checkpoint's checksums are read again only where the file changed: check_checkpoint_whole). A refusal of these
    checks is a RefusedWhereItStarts, its settings named by names (config.SettingNames; at the command line the flags)."""
    lock = None

    def checked_and_locked():  # rank 0: the run folder's checks, and its lock (rank 0 writes)
        nonlocal lock
        with refused_where_it_starts(names):  # the note's read of the checkpoint too (replaced since preflight?)
            preflight(cfg, this_machine=not machine_checked)
            note = ended_note(cfg, names)
        if note:
            print(note, flush=True)
            return note, saved_summary(cfg)
        lock = lock_run_folder(cfg.out)
        remove_dead_writes(cfg)
        return None, None

    def checked_here(decided):  # the other ranks: this machine's part, and rank 0 is told its verdict
        note, _ = decided
        if not note and not machine_checked:  # an ended run trains nowhere
            with refused_where_it_starts(names):
                preflight(cfg)

    try:
        note, summary = decided_by_rank_0("train", checked_and_locked, check_here=checked_here)
        if note:
            return summary
        return run_training(cfg, names)
    finally:
        if lock is not None:
            lock.close()


def remove_dead_writes(cfg):
    """Remove the temporary files a killed process left in the run folder mid-write (a checkpoint's
    is as large as the checkpoint). Under the folder's lock no other process writes there, so every
    one is a dead writer's. forecast.io.atomic_path removes such files only once an hour old: a run
    resumed sooner and ended kept a hidden copy of its checkpoint for good, where the fixed name
    ckpt.pt.tmp of before was taken over by the next checkpoint. Not where the folder is not locked
    (Windows, a file system without locks: logging_io.run_folder_guarded), so a second writer's file may
    be in flight."""
    if os.name == "nt" or not run_folder_guarded(cfg.out):
        return
    for path in run_paths(cfg).values():
        remove_stale_temps(Path(path), max_age_s=0)


def run_training(cfg, names=FIELD_NAMES):
    """train() past its checks, with the run folder locked; names: how its refusals name settings (train's)."""
    torch.set_num_threads(cfg.threads)
    rank, world, device = setup_distributed(cfg)
    paths = run_paths(cfg)
    if rank == 0:
        os.makedirs(cfg.out, exist_ok=True)
    try:
        model, tok = build_policy(cfg, init_seed=derive_seed(cfg.warmup_seed, "init"))
    except SettingError as err:  # the model's own check at its load (model.check_own_logits): a traceback before
        raise RefusedWhereItStarts(err.message(names)) from None
    model.to(device)
    pool, val = build_datasets(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    state = dict(step=0, compute=0.0, device_seconds=0.0, r0=None, retired=np.zeros(len(pool), dtype=bool))

    if cfg.resume:
        resume_from_checkpoint(cfg, model, optimizer, state, device, rank, world, names)
        if rank == 0:  # drop a torn line and rows after the checkpoint: they will be produced again
            repair_jsonl(paths["evals"], state["step"])
            repair_jsonl(paths["train_log"], state["step"])
    else:
        warm_start(cfg, model, tok, pool, device, rank, world)
    if rank == 0:  # the resolved config (on --resume: with the flags given this time)
        atomic_write_text(paths["config"], to_json(cfg) + "\n")
    state["flops_model"] = FlopsModel(model)
    if state["r0"] is None:  # R0: the starting policy's pass rate, at zero RL compute
        r0, n_eval, by_task = evaluate(cfg, model, tok, val, 0, device, rank, world)
        state["r0"] = r0
        if rank == 0:
            atomic_write_json(paths["baseline"], dict(step=0, compute=0.0, metric=r0, n_eval=n_eval, **by_task,
                                                      warm_start=warm_start_path(cfg)))
            save_checkpoint(cfg, model, optimizer, state)
            print(f"[{cfg.run_id}] step 0  R0 {r0:.3f}  (n_eval {n_eval})", flush=True)

    eval_rows = read_jsonl(paths["evals"]) if rank == 0 else []
    knobs = {k: getattr(cfg, k) for k in KNOB_COLUMNS}
    n_params = state["flops_model"].n_params
    # rank 0 alone reads the run folder and decides: it rewrites advisor_asking.json and summary.json as
    # it goes, so another rank reading them on its own, later, could skip the broadcast it answers with
    stopped = broadcast_object(resumed_advice(cfg, eval_rows, state) if cfg.resume and rank == 0 else None, world)
    if rank == 0 and stopped is None and state["step"] < cfg.max_steps and os.path.exists(paths["summary"]):
        # extended past where it ended: in flight again, not finished (watch and backtest read summary.json
        # as the end of a run); the new summary is written when it ends
        os.remove(paths["summary"])
    pending = []
    while state["step"] < cfg.max_steps and stopped is None:
        t0 = time.perf_counter()
        if not pending:
            pending = sample_round(cfg, model, tok, pool, state, state["step"], device, rank, world)
        mb = pending.pop(0)
        metrics = update(cfg, model, optimizer, mb, state, world)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        state["step"] += 1
        state["device_seconds"] += (time.perf_counter() - t0) * world
        gen_flops, gen_tokens = all_sum(torch.tensor([mb["gen_flops"], mb["gen_tokens"]], dtype=torch.float64), world).tolist()
        state["compute"] += metrics.pop("train_flops") + gen_flops
        step = state["step"]
        if rank == 0:
            append_jsonl(paths["train_log"], dict(
                step=step, **metrics, gen_tokens=int(gen_tokens), active_prompts=int((~state["retired"]).sum()),
                compute=state["compute"], device_seconds=state["device_seconds"], lr=optimizer.param_groups[0]["lr"]), fsync=False)
        if step % cfg.eval_every == 0 or step == cfg.max_steps:
            metric, n_eval, by_task = evaluate(cfg, model, tok, val, step, device, rank, world)
            row = dict(run_id=cfg.run_id, recipe=cfg.recipe, seed=cfg.seed, compute=state["compute"],
                       compute_unit="flops", metric=metric, n_eval=n_eval, step=step,
                       device_seconds=state["device_seconds"], r0=state["r0"], n_params=n_params, **knobs,
                       **by_task)
            if rank == 0:
                append_jsonl(paths["evals"], row)  # before the checkpoint: see "Crash safety" above
                eval_rows.append(row)
                if advisor_due(cfg, step):  # the question is open from before the checkpoint: see advise()
                    atomic_write_json(paths["asking"], dict(step=step))
                if not pending:  # round boundary (always: validate() keeps eval_every and max_steps multiples of k)
                    save_checkpoint(cfg, model, optimizer, state)
                print(f"[{cfg.run_id}] step {step}  pass {metric:.3f}  reward {metrics['reward']:.3f}  "
                      f"compute {fmt_compute(state['compute'])} flops  {state['device_seconds']:.1f}s", flush=True)
            if advisor_due(cfg, step):
                stopped = broadcast_object(advise(cfg, eval_rows, state) if rank == 0 else None, world)

    if rank == 0:
        save_checkpoint(cfg, model, optimizer, state)
        if stopped is not None:
            atomic_write_json(paths["stopped"], dict(step=state["step"], compute=state["compute"], advice=stopped))
        if os.path.exists(paths["asking"]):  # the question is answered, and its answer recorded
            os.remove(paths["asking"])
        summary = dict(run_id=cfg.run_id, recipe=cfg.recipe, seed=cfg.seed, r0=state["r0"],
                       final_metric=eval_rows[-1]["metric"] if eval_rows else state["r0"],
                       steps=state["step"], compute=state["compute"], device_seconds=state["device_seconds"],
                       world_size=world, stopped=stopped is not None)
        atomic_write_json(paths["summary"], summary)
    else:
        summary = None
    summary = broadcast_object(summary, world)
    if world > 1:
        dist.barrier()
    return summary


def resume_from_checkpoint(cfg, model, optimizer, state, device, rank, world, names=FIELD_NAMES):
    """Rank 0 loads the checkpoint and checks it, and sends the other ranks its weights, optimizer state
    and loop state (step, compute, R0, retired prompts): only rank 0's machine may hold the run folder.
    A checkpoint it refuses ends every rank with its message, where the others waited for its weights; one
    replaced since preflight by another run's, a RefusedWhereItStarts naming its settings by names."""
    refusal = None
    if rank == 0:
        path = run_paths(cfg)["ckpt"]
        try:
            # the file preflight found whole is not read for its checksums again; one replaced or written since
            # (before the run folder was locked) is
            check_checkpoint_whole(path)
            # memory-mapped: the weights go from the file (in the page cache since the checksums were read, where
            # memory allows) into the model and optimizer, not into a second full copy of the checkpoint first
            ckpt = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
        except torch.OutOfMemoryError:
            raise
        except UnreadableCheckpoint as err:
            refusal = RefusedWhereItStarts(err.message(names))
        except Exception as err:  # a traceback under the lock; cli.run_command refuses it like preflight
            refusal = RefusedWhereItStarts(UnreadableCheckpoint(path, err).message(names))
        else:
            saved = from_dict(ckpt["config"])
            changed = changed_run_defining_fields(saved, cfg)
            if changed:  # a traceback on rank 0 before: cli.run_command refuses it, exit 2
                said = "; ".join(settings_changed(names, saved, cfg, changed))
                refusal = RefusedWhereItStarts(f"{names.given('resume', True)} with other settings than the "
                                               f"checkpoint in {cfg.out}: {said}")
    said = broadcast_object(None if refusal is None else str(refusal), world)
    if refusal is not None:
        raise refusal
    if said is not None:
        raise RefusedOnRank0(said)
    if rank == 0:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        detach_from_file(optimizer)
        state.update(ckpt["state"])
        del ckpt  # the other ranks' copies are sent from the model and optimizer, not from it
    broadcast_weights(model, world)
    broadcast_optimizer_state(optimizer, rank, world)
    state.update(broadcast_object(state if rank == 0 else None, world))


def detach_from_file(optimizer):
    """Copy the optimizer state that still lies in the memory-mapped checkpoint into memory of its own, one
    tensor at a time. optimizer.load_state_dict keeps a tensor already on its parameter's device (the CPU)
    as it is: AdamW's moments were pages of ckpt.pt, which the next checkpoint replaces (on Windows a
    mapped file cannot be replaced at all)."""
    for held in optimizer.state.values():
        for key, value in held.items():
            if torch.is_tensor(value) and value.device.type == "cpu":
                held[key] = value.clone()


def broadcast_optimizer_state(optimizer, rank, world):
    """Rank 0's optimizer state (AdamW's moments and step counts) on every rank, one tensor at a time:
    the others load a state of rank 0's shapes, which is then filled in place (no pickled copy of it)."""
    if world == 1:
        return
    layout = None
    if rank == 0:
        saved = optimizer.state_dict()
        layout = dict(param_groups=saved["param_groups"],
                      shapes={i: {k: (v.shape, v.dtype) for k, v in s.items() if torch.is_tensor(v)}
                              for i, s in saved["state"].items()},
                      values={i: {k: v for k, v in s.items() if not torch.is_tensor(v)} for i, s in saved["state"].items()})
    layout = broadcast_object(layout, world)
    if rank != 0:
        optimizer.load_state_dict(dict(param_groups=layout["param_groups"], state={
            i: {**layout["values"][i], **{k: torch.empty(shape, dtype=dtype) for k, (shape, dtype) in shapes.items()}}
            for i, shapes in layout["shapes"].items()}))
    for param in (p for group in optimizer.param_groups for p in group["params"]):  # the same order on every rank
        held = optimizer.state.get(param, {})
        for key in sorted(held):
            if torch.is_tensor(held[key]):
                broadcast_in_place(held[key])


def advisor_due(cfg, step):
    """Whether the advisor is consulted after the evaluation at this step. Not at max_steps: the
    run ends there anyway, and a recorded "budget_reached" stop would refuse a later --max-steps
    extension as if the advisor had judged the run."""
    return (bool(cfg.advisor_every) and 0 < step < cfg.max_steps and step % cfg.eval_every == 0
            and (step // cfg.eval_every) % cfg.advisor_every == 0)


def resumed_advice(cfg, eval_rows, state):
    """On --resume, the advice owed at the checkpoint's step, so that a resumed run stops where the
    run that was never killed would have. The checkpoint is taken after an evaluation and before
    the advisor is asked about it, and a kill often lands during that (slow) question:
      - stopped.json is there but summary.json is not (killed after the stop was recorded): the stop
        stands, and the run only writes its summary;
      - the question at the checkpoint's step was left open (advisor_asking.json names that step):
        it is asked again now, before any training, instead of skipping to the advisor's next turn
        with the stop it may have said unheard. An answered question is not asked again: after a
        continue, or a stop whose stopped.json the user deleted to train on, the run trains on;
      - the run ended at its old max_steps (summary.json at this step), where the advisor is not
        asked, and a larger --max-steps extends it: the question owed at this step is asked now.
    Returns the stop advice (a dict) or None. Rank 0 only (it holds eval_rows): see run_training."""
    paths = run_paths(cfg)
    record = read_stop_record(paths["stopped"])
    if record is not None:
        return record["advice"]
    step = state["step"]
    summary = saved_summary(cfg)
    # extended past the max_steps it ended at, where the advisor is not asked: asked now, as the run
    # trained straight to the new max_steps was at this step
    extended = summary is not None and not summary.get("stopped") and summary.get("steps") == step
    if not advisor_due(cfg, step) or (asked_at(paths["asking"]) != step and not extended):
        # answered (a continue, or a stop whose stopped.json the user deleted to train on) or never asked
        return None
    logged = bool(eval_rows) and eval_rows[-1].get("step") == step
    return advise(cfg, eval_rows, state) if logged else None


_SAID_DATA_WARNINGS = set()  # the advisor's warnings about the data, said once per process


def advise(cfg, eval_rows, state):
    """The advisor's recommendation as a dict when it says stop, else None. While the (slow)
    question is open, advisor_asking.json names its step (written before the checkpoint of that
    step, so no kill falls between them): a run killed then asks it again on --resume. It goes
    when the answer is a continue, or once a stop is recorded in stopped.json."""
    asking = run_paths(cfg)["asking"]
    atomic_write_json(asking, dict(step=state["step"]))  # again: a resumed run asks from here
    planned = cfg.advisor_budget or state["compute"] / state["step"] * cfg.max_steps
    rec = consult_advisor(cfg, eval_rows, planned)
    for text in rec.details.get("data_warnings") or []:  # said once; stopped.json keeps them with the advice
        if text not in _SAID_DATA_WARNINGS:
            _SAID_DATA_WARNINGS.add(text)
            print(f"[{cfg.run_id}] advisor: warning: {text}", flush=True)
    print(f"[{cfg.run_id}] {advice_line(rec.action, rec.rule, rec.message, rec.details)}", flush=True)
    if rec.action != "stop":
        os.remove(asking)
        return None
    return rec.to_dict()


def asked_at(path):
    """The step of a question to the advisor left open by a kill, or None."""
    try:
        with open(path) as f:
            return json.load(f)["step"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def advice_reason(action, message):
    """The message without its leading "stop: " / "continue: ": the printed line names the action."""
    return message.removeprefix(f"{action}: ")


def convergence_note(details, rule):
    """A warning when the fit behind the advice did not converge ("" when it did, or is unknown):
    a stop decided on such a fit deserves a second look. budget_reached reads no fit: it compares
    compute with the planned budget."""
    if rule == "budget_reached" or details.get("converged", True):
        return ""
    from forecast.early_stop import what_did_not_converge

    return f" (warning: the forecaster's fit did not converge: {what_did_not_converge(details)})"


def advice_line(action, rule, message, details):
    """One printed line per advice: 'advisor: stop (beats_best): P(...) < 0.1', plus the convergence
    warning on a stop (a continue costs nothing if the fit was off; a stop ends the run), and the
    shape note of a run whose end falls away from its fitted curve (forecast.shape_check), whichever
    the action: its forecasts, which the advice read, are likely too high."""
    # budget_reached compares compute with the budget and reads no fit
    note = convergence_note(details, rule) if action == "stop" else ""
    return f"advisor: {action} ({rule}): {advice_reason(action, message)}{note}{shape_said(details)}"


def shape_said(details):
    """The advice's shape note (forecast.early_stop.noting_misshapen_runs), as its line says it: " (shape:
    ...)", or "" without one. The same words on --resume of a run it stopped, from stopped.json."""
    shape = details.get("shape_note")
    return f" ({shape})" if shape else ""


if __name__ == "__main__":  # `python -m trainer_minimal.train ARGS` is `trainer-minimal train ARGS`
    import sys

    from trainer_minimal.cli import main

    sys.exit(main(["train", *sys.argv[1:]]))
