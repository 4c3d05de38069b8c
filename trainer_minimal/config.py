"""The run configuration: one dataclass, the named presets, and validation.

Every field is also a command-line flag (cli.py generates the flags from this dataclass), and the
resolved config is written to config.json in the run folder and into every checkpoint. A preset is
a short dict of field overrides on top of the defaults; the defaults are the ScaleRL recipe.
"""

import dataclasses
import functools
import json
import math
import os
import re
from dataclasses import dataclass, fields

from .tokenizer import folder_tokenizer


@dataclass
class Config:
    # --- run --------------------------------------------------------------------------------
    out: str = "out/run"  # run folder: config.json, evals.jsonl, train_log.jsonl, ckpt.pt
    preset: str = "scalerl"  # named recipe whose overrides apply (`trainer-minimal presets` lists them)
    recipe: str = ""  # recipe name in the eval table; empty = the preset name
    run_id: str = ""  # run name in the eval table; empty = "{recipe}-s{seed}"
    seed: int = 0  # RL seed; every random draw is derived from (seed, step, prompt)
    max_steps: int = 640  # optimizer steps of RL
    eval_every: int = 16  # evaluate, log and checkpoint every E optimizer steps, and at max_steps
    resume: bool = False  # continue from the run folder's checkpoint (refused when there is none)
    device: str = "cpu"  # cpu | cuda | cuda:N; under torchrun each rank takes cuda:LOCAL_RANK
    dtype: str = "float32"  # matmul precision: float32 | bfloat16 (autocast; weights stay fp32)
    threads: int = 1  # torch CPU threads per process (sweeps run processes side by side)
    # --- policy -----------------------------------------------------------------------------
    model_path: str = ""  # local Hugging Face causal-LM folder; empty = the tiny GPT below
    n_layer: int = 2  # tiny GPT: transformer blocks
    n_head: int = 4  # tiny GPT: attention heads
    d_model: int = 64  # tiny GPT: residual width
    # --- tasks ------------------------------------------------------------------------------
    tasks: str = "sort,rev,add"  # comma list of generated task families (tasks.py)
    max_size: int = 3  # hardest problem size (digits per operand / extra list length)
    train_size: int = 4000  # prompts in the fixed training pool
    val_size: int = 300  # held-out validation prompts (disjoint from the pool)
    val_samples: int = 4  # samples per validation prompt; n_eval = val_size * val_samples
    data_seed: int = 1234  # seed of the training pool and validation set (shared by all runs)
    # --- warm start (supervised, cached) ----------------------------------------------------
    warmup_steps: int = 200  # supervised steps before RL so the pass rate starts above zero
    warmup_batch: int = 64  # prompts per supervised step
    warmup_lr: float = 3e-3  # supervised learning rate
    warmup_seed: int = 0  # seed of the warm start (shared by all runs, so all start equal)
    warmstart_cache: str = ""  # folder of cached warm starts; empty = <out>/warmstart
    # --- RL recipe knobs --------------------------------------------------------------------
    loss_type: str = "cispo"  # ppo (clipped, as GRPO/DAPO) | cispo | gspo
    clip_low: float = 0.2  # ppo/gspo: ratio floor is 1 - clip_low
    clip_high: float = 0.28  # ppo/gspo: ratio ceiling is 1 + clip_high (DAPO: > clip_low)
    cispo_max: float = 4.0  # cispo: truncation of the importance weight (epsilon_max)
    aggregation: str = "prompt"  # loss average: sample | token | prompt
    adv_norm: str = "batch"  # advantage scale: group (GRPO) | batch (ScaleRL) | none
    zero_var_filter: bool = True  # drop prompts whose samples all got the same reward
    npr_threshold: float = 0.9  # No-Positive-Resampling: retire prompts at this pass rate; 0 = off
    off_policy_k: int = 2  # optimizer steps per generation round (k mini-batches)
    fp32_logits: bool = True  # compute the LM head in fp32 (matters under bfloat16)
    batch_size: int = 16  # prompts per optimizer step
    group_size: int = 8  # samples per prompt (G)
    gen_len: int = 8  # max generated tokens, EOS included
    temperature: float = 1.0  # sampling temperature for training and evaluation
    lr: float = 5e-4  # RL learning rate (AdamW; constant after the warm-up below)
    lr_warmup: int = 10  # steps of linear learning-rate warm-up (Adam's first steps are noisy)
    weight_decay: float = 0.0  # AdamW weight decay
    grad_clip: float = 1.0  # max global gradient norm; 0 = off
    micro_batch: int = 64  # sequences per forward/backward (gradient accumulation)
    # --- early-stop advisor (forecast.early_stop) -------------------------------------------
    advisor_every: int = 0  # consult the forecaster every N evaluations; 0 = off
    advisor_reference: str = ""  # run table or folder of runs (a sweep) the advisor compares with; may be empty
    advisor_budget: float = 0.0  # planned compute of this run in FLOPs; 0 = estimate from max_steps
    advisor_rules: str = ""  # stop-rule settings NAME=VALUE,... of forecast.early_stop.EarlyStopConfig, e.g. target=0.5,margin=0.02
    advisor_priors: str = ""  # model priors NAME=VALUE,... of forecast.model.Priors, e.g. b_mu=0.5,m_mu=0.5


# Named recipes. Each is a few overrides of the defaults above (which are ScaleRL's choices).
# grpo/dapo/cispo/gspo take their papers' loss, aggregation and normalisation, without ScaleRL's
# filtering and FP32 head (but DAPO's own filter of zero-variance groups, its dynamic sampling), at the
# same off-policy k as ScaleRL (on-policy every loss is REINFORCE, so k > 1 is where loss types differ).
# The scalerl-* variants move one knob each.
PAPER_BASE = dict(adv_norm="group", zero_var_filter=False, npr_threshold=0.0, fp32_logits=False)
PRESETS = {
    "grpo": dict(PAPER_BASE, loss_type="ppo", clip_low=0.2, clip_high=0.2, aggregation="sample"),
    "dapo": dict(PAPER_BASE, loss_type="ppo", clip_low=0.2, clip_high=0.28, aggregation="token",
                 zero_var_filter=True),
    "cispo": dict(PAPER_BASE, loss_type="cispo", aggregation="token"),
    "gspo": dict(PAPER_BASE, loss_type="gspo", clip_low=3e-4, clip_high=4e-4, aggregation="sample"),
    "scalerl": dict(),
    "scalerl-g4": dict(group_size=4),  # half the samples per prompt
    "scalerl-g16": dict(group_size=16),  # twice the samples per prompt
    "scalerl-bs8": dict(batch_size=8),  # half the prompts per step
    "scalerl-k8": dict(off_policy_k=8),  # far more off-policy: 8 updates per generation round
    "scalerl-lr2e-3": dict(lr=2e-3),  # 4x the learning rate: falls below R0 (a run to stop early)
    "scalerl-nofilter": dict(zero_var_filter=False, npr_threshold=0.0),  # no prompt filtering
}

CHOICES = {
    "loss_type": ("ppo", "cispo", "gspo"),
    "aggregation": ("sample", "token", "prompt"),
    "adv_norm": ("group", "batch", "none"),
    "dtype": ("float32", "bfloat16"),
}
POSITIVE_INTS = (
    "max_steps", "eval_every", "threads", "n_layer", "n_head", "d_model", "max_size", "train_size",
    "val_size", "val_samples", "warmup_batch", "off_policy_k", "batch_size", "group_size",
    "gen_len", "micro_batch",
)
# the most a size, count or number of steps may be: torch takes a thread count as a C int, and a whole number past
# 64 bits failed in torch ("Overflow when unpacking long long", a traceback: --threads or --d-model given as
# 100000000000000000000). No setting of a run comes near it; seeds may be larger (numpy and torch hash them)
MAX_WHOLE_NUMBER = 2**31 - 1
# settings that reach float32 tensors (largest 3.4e38) as they are, or as AdamW's first step makes a learning
# rate (divided by 1 - beta1 = 0.1): past it `--lr 1e39` (--warmup-lr, --cispo-max, --clip-high 1e300) crashed
# in torch with "value cannot be converted to type float without overflow", a traceback at the first update
FLOAT32_SETTINGS = ("lr", "warmup_lr", "cispo_max", "clip_high")
MAX_FLOAT32_SETTING = 1e37
# logits are divided by the temperature in float32: `--temperature 1e-300` made them inf, every probability NaN,
# a pass rate of 0 from step 0 and a NaN loss. Far below what any sampling uses, far above an overflow
MIN_TEMPERATURE = 1e-6
TASK_NAMES = ("add", "mul", "sort", "count", "rev", "max")  # kept in sync with tasks.py (checked in tests)
# add and mul draw numbers of up to max_size digits as numpy's 64-bit integers (tasks._number): 10**19 is past
# them, and max_size 19 failed the data's generation with numpy's "high is out of bounds for int64", naming
# no setting (a model with the positions for such prompts, a Hugging Face one, passed every other check)
MAX_NUMBER_DIGITS = 18
NUMBER_TASKS = ("add", "mul")


# What --resume (and a sweep re-run) may change: where and how fast the run trains, how long it
# goes on, how often it is evaluated and whether the advisor is asked. Every other field defines
# the run: its identity, its policy, its recipe, or what its evaluations measure (val_samples,
# temperature, gen_len); changing one mid-run would append rows of a different run or a different
# measure under the same run_id, which the forecaster would read as one curve.
RESUMABLE_FIELDS = (
    "out", "resume", "max_steps", "eval_every", "device", "dtype", "threads", "micro_batch",
    "warmstart_cache", "advisor_every", "advisor_reference", "advisor_budget", "advisor_rules",
    "advisor_priors",
)


def field_names():
    return [f.name for f in fields(Config)]


# A refusal of a setting names it as its caller gave it: the Python API (Config, make_config, validate) by its
# field (seed, train_size=31), the command line by its flag, as the user typed it (--seed, --train-size 31).
# One mechanism for every check, not a rewrite of the message's words (a field's name is often an English word:
# seed, out, tasks): the check writes its message once, as a function of how settings are named (SettingNames),
# and raises SettingError, a ValueError whose str() names the fields; the CLI alone says it with the flags
# (SettingError.with_flags, in cli.settings_named_by_flags).
class SettingNames:
    """How a refusal names a setting: as_flags False, by its field ("train_size", "train_size=31"); True, by
    its command-line flag ("--train-size", "--train-size 31")."""

    def __init__(self, as_flags):
        self.as_flags = as_flags

    def __call__(self, name):
        return "--" + name.replace("_", "-") if self.as_flags else name

    def given(self, name, value):
        """The setting with the value it was given; a string quoted, as the messages always showed it. A switch
        (a bool) is its flag alone at the command line, as it is typed: --resume, --no-fp32-logits."""
        if self.as_flags and isinstance(value, bool):
            return self(name) if value else "--no-" + name.replace("_", "-")
        shown = repr(value) if isinstance(value, str) else value
        return f"{self(name)} {shown}" if self.as_flags else f"{name}={shown}"

    def folder(self, name, path):
        """A folder's setting with its path: at the command line as it is typed, unquoted (--out runs/a, as the
        messages about a folder always said it), in Python as given() says a value (out='runs/a')."""
        return f"{self(name)} {path}" if self.as_flags else self.given(name, path)


FIELD_NAMES, FLAG_NAMES = SettingNames(as_flags=False), SettingNames(as_flags=True)


class SettingError(ValueError):
    """A refusal of settings (validate), written once as message(names) -> str for a SettingNames: str() names
    the fields, with_flags() the command-line flags."""

    def __init__(self, message):
        super().__init__(message(FIELD_NAMES))
        self.message = message

    def with_flags(self):
        return self.message(FLAG_NAMES)

    def __reduce__(self):  # pickled (another process), it is the ValueError it says: its message is a function
        return ValueError, self.args


def changed_run_defining_fields(saved, cfg):
    """The fields that define a run (all but RESUMABLE_FIELDS) on which cfg differs from the run's saved config,
    in Config's order: what a refusal decides on, and says with settings_changed."""
    return [name for name in field_names()
            if name not in RESUMABLE_FIELDS and getattr(saved, name) != getattr(cfg, name)]


def settings_changed(names, saved, cfg, changed):
    """["lr 0.002 -> 0.001", ...] for the fields `changed`: the value each had in the run's saved config and
    the one cfg gives it, each named by names (a SettingNames: the field, or at the command line the flag,
    "--lr 0.002 -> 0.001")."""
    return [setting_change(names, name, getattr(saved, name), getattr(cfg, name)) for name in changed]


def setting_change(names, name, saved, new):
    """"lr 0.002 -> 0.001" (at the command line "--lr 0.002 -> 0.001"): a setting a run was started with, and
    the value it is given now."""
    return f"{names(name)} {saved!r} -> {new!r}"


def make_config(preset="scalerl", **overrides):
    """Defaults, then the preset's overrides, then explicit overrides; validated. Raises ValueError."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}{preset_suggestion(preset)}; choose one of {', '.join(PRESETS)}")
    unknown = sorted(set(overrides) - set(field_names()))
    if unknown:
        raise ValueError(f"unknown config field(s): {', '.join(unknown)}")
    cfg = dataclasses.replace(Config(), preset=preset, **PRESETS[preset])
    cfg = dataclasses.replace(cfg, **overrides)
    if not cfg.recipe:
        cfg.recipe = preset
    if not cfg.run_id:
        cfg.run_id = f"{cfg.recipe}-s{cfg.seed}"
    validate(cfg)
    return cfg


def preset_suggestion(name):
    """' (did you mean 'scalerl'?)' for a mistyped or wrongly cased preset name, else "": among
    eleven names, several alike (scalerl-g4, scalerl-g16, ...), the nearest is the one to point at.
    The forecaster's guess for a recipe or run name (forecast.formatting.close_names), its first."""
    from forecast.formatting import close_names  # forecast (pandas) loads on this error path only

    close = close_names(name, PRESETS)[:1]
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_task(name):
    """"unknown task 'rve' (did you mean 'rev'?); ": a preset's guess (forecast.formatting) for a task."""
    from forecast.formatting import did_you_mean  # forecast (pandas) loads on this error path only

    hint = did_you_mean(name, TASK_NAMES)
    return f"unknown task {name!r}{f' ({hint})' if hint else ''}; "


def validate(cfg, *, saved_max_steps=None):
    """Refuse bad values before any compute is spent. Raises SettingError (a ValueError) naming the field, and at
    the command line the flag (see SettingNames).
    saved_max_steps: on --resume, the run's own max_steps, kept even where it is not a multiple
    of off_policy_k (a run made before that was required: it can be resumed to say it finished)."""
    for name, allowed in CHOICES.items():
        value = getattr(cfg, name)
        if value not in allowed:
            raise SettingError(lambda n, name=name, value=value, allowed=allowed:
                               f"{n.given(name, value)} is not one of {', '.join(allowed)}")
    for f in fields(cfg):
        if f.type is float and not math.isfinite(getattr(cfg, f.name)):
            raise SettingError(lambda n, name=f.name: f"{n(name)} must be a finite number, got {getattr(cfg, name)}")
    for name in POSITIVE_INTS:
        if getattr(cfg, name) < 1:
            raise SettingError(lambda n, name=name: f"{n(name)} must be >= 1, got {getattr(cfg, name)}")
    for name in ("warmup_steps", "lr_warmup", "advisor_every", "weight_decay", "grad_clip", "advisor_budget"):
        if getattr(cfg, name) < 0:
            raise SettingError(lambda n, name=name: f"{n(name)} must be >= 0, got {getattr(cfg, name)}")
    for name in (*POSITIVE_INTS, "warmup_steps", "lr_warmup", "advisor_every"):
        if getattr(cfg, name) > MAX_WHOLE_NUMBER:
            raise SettingError(lambda n, name=name: f"{n(name)} must be at most {MAX_WHOLE_NUMBER}, "
                                                    f"got {getattr(cfg, name)}")
    for name in ("lr", "warmup_lr", "temperature", "cispo_max"):
        if not getattr(cfg, name) > 0:
            raise SettingError(lambda n, name=name: f"{n(name)} must be > 0, got {getattr(cfg, name)}")
    # AdamW shrinks every weight by lr x weight_decay at each step: at 1 or more it zeroes or flips them all, and
    # the run diverged to NaN (`--weight-decay 1e4` typed for 1e-4)
    if cfg.lr * cfg.weight_decay >= 1:
        raise SettingError(lambda n: f"{n('lr')} x {n('weight_decay')} must be below 1 (AdamW shrinks every weight by "
                                     f"that share at each step), got {cfg.lr:g} x {cfg.weight_decay:g}")
    if cfg.temperature < MIN_TEMPERATURE:
        raise SettingError(lambda n: f"{n('temperature')} must be at least {MIN_TEMPERATURE:g} (below it sampling is "
                                     f"greedy all the same, and the logits divided by it overflow), got {cfg.temperature:g}")
    for name in FLOAT32_SETTINGS:
        if getattr(cfg, name) > MAX_FLOAT32_SETTING:
            raise SettingError(lambda n, name=name: f"{n(name)} must be at most {MAX_FLOAT32_SETTING:g} (it reaches "
                                                    f"float32 tensors), got {getattr(cfg, name)}")
    if not 0 <= cfg.clip_low < 1 or cfg.clip_high < 0:
        raise SettingError(lambda n: f"clip range must satisfy 0 <= {n('clip_low')} < 1 and {n('clip_high')} >= 0, "
                                     f"got {n.given('clip_low', cfg.clip_low)}, {n.given('clip_high', cfg.clip_high)}")
    if not 0 <= cfg.npr_threshold <= 1:
        raise SettingError(lambda n: f"{n('npr_threshold')} must be in [0, 1] (0 = off), got {cfg.npr_threshold}")
    for name in ("seed", "data_seed", "warmup_seed"):
        if getattr(cfg, name) < 0:
            raise SettingError(lambda n, name=name: f"{n(name)} must be >= 0, got {getattr(cfg, name)}")
    # a run ends, is checkpointed and is evaluated only between generation rounds: a round's
    # k mini-batches share one sampling, and a run cut mid-round and extended later would sample
    # that round again from changed weights and charge it twice
    for name in ("eval_every", "max_steps"):
        if name == "max_steps" and cfg.max_steps == saved_max_steps:
            continue
        if getattr(cfg, name) % cfg.off_policy_k:
            raise SettingError(lambda n, name=name: f"{n.given(name, getattr(cfg, name))} must be a multiple of "
                                                    f"{n.given('off_policy_k', cfg.off_policy_k)} (one generation "
                                                    "round feeds off_policy_k optimizer steps)")
    if cfg.train_size < cfg.off_policy_k * cfg.batch_size:
        raise SettingError(lambda n: f"{n.given('train_size', cfg.train_size)} must be at least {n('off_policy_k')} * "
                                     f"{n('batch_size')} = {cfg.off_policy_k * cfg.batch_size} (the distinct prompts "
                                     "of one generation round)")
    if cfg.group_size < 2:
        raise SettingError(lambda n: f"{n('group_size')} must be >= 2 (advantages compare samples of a prompt), "
                                     f"got {cfg.group_size}")
    if not cfg.model_path and cfg.d_model % cfg.n_head:
        raise SettingError(lambda n: f"{n.given('d_model', cfg.d_model)} must be divisible by "
                                     f"{n.given('n_head', cfg.n_head)}")
    tasks = [t for t in cfg.tasks.split(",") if t]
    bad = [t for t in tasks if t not in TASK_NAMES]
    if not tasks or bad:
        raise SettingError(lambda n: f"{n.given('tasks', cfg.tasks)}: {unknown_task(bad[0]) if bad else ''}use a comma "
                                     f"list of {', '.join(TASK_NAMES)}")
    if cfg.max_size > MAX_NUMBER_DIGITS and (numbers := [t for t in NUMBER_TASKS if t in tasks]):
        raise SettingError(lambda n: f"{n.given('max_size', cfg.max_size)} must be at most {MAX_NUMBER_DIGITS} with "
                                     f"tasks {' and '.join(numbers)}, whose numbers of up to {n('max_size')} digits "
                                     "are 64-bit integers")
    from .tasks import distinct_prompts  # numpy loads with it

    # the validation prompts are distinct: past the tasks' own count, their generation drew 50 * val_size
    # problems before it failed (hours at a val_size of 10 million), or filled the memory first
    available = distinct_prompts(tasks, cfg.max_size, cfg.val_size)
    if cfg.val_size > available:
        raise SettingError(lambda n: f"{n.given('val_size', cfg.val_size)} is more than the {available} distinct prompts "
                                     f"of {n.given('tasks', cfg.tasks)} up to {n.given('max_size', cfg.max_size)} (the "
                                     f"validation prompts are distinct): lower {n('val_size')} or raise {n('max_size')}")
    # the training pool is drawn from the prompts the validation set left (tasks.build_datasets); it may repeat a
    # prompt, so one left is enough, but none left drew 50 * train_size problems before it failed, naming no cause
    if cfg.val_size == available:
        raise SettingError(lambda n: f"{n.given('val_size', cfg.val_size)} takes all {available} distinct prompts of "
                                     f"{n.given('tasks', cfg.tasks)} up to {n.given('max_size', cfg.max_size)}, and "
                                     "none is left for the training pool (it is drawn from the prompts the validation "
                                     f"set does not hold): lower {n('val_size')} or raise {n('max_size')}")
    if not re.fullmatch(r"cpu|cuda(:\d+)?", cfg.device):  # torch's own error came after the run folder was made
        raise SettingError(lambda n: f"{n.given('device', cfg.device)}: use cpu, cuda or cuda:N")
    if not cfg.out:
        raise SettingError(lambda n: f"{n('out')} (the run folder) must not be empty")
    for name in ("advisor_reference", "advisor_rules", "advisor_priors"):
        if getattr(cfg, name) and cfg.advisor_every == 0:
            raise SettingError(lambda n, name=name: f"{n(name)} is set but {n.given('advisor_every', 0)} "
                                                    "(the advisor is off)")
    if cfg.advisor_rules or cfg.advisor_priors:
        advisor_settings(cfg)  # read them now: a typo fails before any compute, not at the first advice


def check_advisor_reference(cfg):
    """Refuse an advisor_reference that does not exist. Left to the advisor, a wrong path only
    shows as "advisor_error" at every check while the run trains on without its comparison rules.
    Not part of validate(): a sweep may name its own folder, which exists only once the sweep
    starts, so this runs where a run starts (train.preflight) and where a sweep is planned."""
    if cfg.advisor_reference and not os.path.exists(cfg.advisor_reference):
        raise SettingError(lambda n: f"{n('advisor_reference')} {cfg.advisor_reference!r} does not exist "
                                     "(give a run table or a folder of runs to compare with)")


def check_device(cfg):
    """Refuse a CUDA device this machine does not have. Left to torch, it was a traceback after the
    run folder was made, and for a sweep one from its warm start, before any run. Under torchrun
    each rank takes cuda:LOCAL_RANK, so the index given is not checked there. Not part of
    validate() (it asks torch, which is imported once the arguments are known to be sane): like
    check_model_path, it runs where a run starts and where a sweep is planned."""
    if cfg.device == "cpu":
        return
    import torch

    if not torch.cuda.is_available():
        raise SettingError(lambda n: f"{n.given('device', cfg.device)} but this torch build sees no CUDA device")
    index, count = int(cfg.device.partition(":")[2] or 0), torch.cuda.device_count()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # every rank of the machine refuses alike (not only those beyond its GPUs, whose CUDA traceback
        # "invalid device ordinal" came once the others were waiting for them)
        here = processes_on_this_machine()
        if here > count:
            raise SettingError(lambda n: f"{n.given('device', cfg.device)} under torchrun: {here} processes on this "
                                         f"machine (--nproc_per_node), each on its own GPU cuda:LOCAL_RANK, but it has "
                                         f"{count} CUDA device(s): give --nproc_per_node {count} or fewer")
    elif index >= count:
        raise SettingError(lambda n: f"{n.given('device', cfg.device)} but this machine has {count} CUDA device(s): "
                                     f"use cuda:0{f' to cuda:{count - 1}' if count > 1 else ''}")


def processes_on_this_machine():
    """How many processes of the run this machine holds, at least: torchrun's LOCAL_WORLD_SIZE, or under a launch
    by hand that does not set it LOCAL_RANK + 1 (this process and those numbered below it); 1 for a single
    process (WORLD_SIZE unset or 1), whatever a shell left in the others. Each holds its own model, sequences
    and task data (check_device: its own GPU; train.check_memory_fits: on the CPU, one machine's memory)."""
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        return 1
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    if local.isdigit() and int(local) >= 1:
        return int(local)
    rank = os.environ.get("LOCAL_RANK", "0")
    return int(rank) + 1 if rank.isdigit() else 1


RUN_FILES = ("evals.jsonl", "ckpt.pt")  # what makes a folder a run's (train.preflight: "already holds a run")


def run_files_in(folder):
    """The RUN_FILES in folder (a run, started or done), or []."""
    return [name for name in RUN_FILES if os.path.isfile(os.path.join(folder, name))]


def sweep_contents(folder):
    """What makes folder a sweep's, in words: its runs.csv and its run folders (subfolders holding a
    run's files), e.g. ["runs.csv", "run folders grpo-s0, grpo-s1"]; [] for a folder that holds neither."""
    held = ["runs.csv"] if os.path.isfile(os.path.join(folder, "runs.csv")) else []
    try:
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    except OSError:  # unreadable: check_writable says why nothing can be written there
        names = []
    runs = [name for name in names if run_files_in(os.path.join(folder, name))]
    if runs:
        from forecast.formatting import names_shown

        held.append(f"run folder{'s' if len(runs) > 1 else ''} {names_shown(runs, 3)}")
    return held


def sibling_folder(folder, name):
    """A folder named `name` beside `folder` (not inside it), as a path to suggest for --out."""
    path = os.path.normpath(folder)
    if os.path.basename(path) in ("", ".", ".."):  # "." or "..": name the folder itself to go beside it
        path = os.path.abspath(path)
    beside = os.path.join(os.path.dirname(path), name)
    return beside + "-2" if os.path.normpath(beside) == path else beside


def check_not_a_sweep(cfg):
    """Refuse a new run whose out is a sweep's folder: written at its top, the run was read with
    the sweep's runs by forecast (which reads every evals.jsonl under a folder) but never listed in
    the sweep's runs.csv, and the folder was then neither a run nor a sweep. SettingError: out, or at
    the command line --out (the sweep's own command line is said as it is typed)."""
    held = sweep_contents(cfg.out)
    if held:
        raise SettingError(lambda n: f"{n.folder('out', cfg.out)} holds a sweep ({'; '.join(held)}), not a run: a run "
                                     "written at its top would be read with the sweep's runs by forecast but not "
                                     "listed in its runs.csv; give the run a folder beside it, e.g. "
                                     f"{n.folder('out', sibling_folder(cfg.out, cfg.run_id))} (or add it to the "
                                     f"sweep with `trainer-minimal sweep ... --out {cfg.out}`)")


def check_not_a_run(out):
    """Refuse a sweep whose --out is a run's folder: its runs would be nested inside the run, and
    forecast, reading every evals.jsonl under the folder, would take them all for one table."""
    held = run_files_in(out)
    if held:
        raise ValueError(f"--out {out} holds a run ({', '.join(held)}), not a sweep: the sweep's run folders would be "
                         "made inside it, and the run read as one of the sweep's; sweep into a folder beside it, "
                         f"e.g. --out {sibling_folder(out, os.path.basename(os.path.normpath(out)) + '-sweep')}")


def check_writable(folder, field):
    """Refuse a folder the run (or sweep) writes in that cannot be written: under a file, on a
    read-only file system, another user's. Left to the write, it was a traceback at the first file,
    and for the warm-start cache one after the warm-up had been trained. Like check_model_path,
    it runs where a run starts and where a sweep is planned. field: the setting that names the folder
    (out, warmstart_cache), said as SettingError says settings (at the command line --out DIR)."""
    existing = os.path.abspath(folder)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise SettingError(lambda n: f"{n.folder(field, folder)}: {existing} is a file, so nothing can be written "
                                     "under it")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise SettingError(lambda n: f"{n.folder(field, folder)}: cannot write in {existing} (read-only or not yours)")


def check_launch_environment():
    """Refuse a WORLD_SIZE or RANK that no launch sets, naming the variable: torchrun sets both, a launch by
    hand sets them on each process, and a single process needs neither. A WORLD_SIZE above 1 without a RANK
    (left in a shell from a launch by hand that gave RANK on each command line, or a scheduler's own) crashed
    in a KeyError traceback once the checks had passed, in every run of a sweep too; a WORLD_SIZE or RANK that
    is no number said only "invalid literal for int() with base 10: 'x'", and WORLD_SIZE=0 crashed in a
    ZeroDivisionError. Checked before any rank is told or waited for (cli.agreed_train_config)."""
    single = "for a single process, unset WORLD_SIZE"
    world = os.environ.get("WORLD_SIZE", "1")
    if not (world.isdigit() and int(world) >= 1):
        raise ValueError(f"WORLD_SIZE={world!r} in the environment is no number of processes (torchrun sets it); "
                         f"{single}")
    if int(world) == 1:
        return
    rank = os.environ.get("RANK")
    if rank is None:
        raise ValueError(f"WORLD_SIZE={world} in the environment but no RANK: a run of {world} processes is started "
                         f"by torchrun, which sets both (a launch by hand sets RANK on each process); {single}")
    if not (rank.isdigit() and int(rank) < int(world)):
        raise ValueError(f"RANK={rank!r} in the environment is not one of 0 to {int(world) - 1} (WORLD_SIZE={world}): "
                         f"torchrun sets both; {single}")


def process_rank():
    """This process's rank as setup_distributed will see it, known before the process group (and without
    torch, for a stop while it is imported: cli.said_stop): torchrun's RANK, or 0 for a single process (WORLD_SIZE unset or 1) whatever RANK its environment holds. A RANK
    left over in a shell (from a manual two-process launch), or set by a scheduler for its own ends,
    made a single process skip the run folder's checks as a non-zero rank would, and train into a
    folder that already held a run."""
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        return 0
    return int(os.environ.get("RANK", "0"))


# Hugging Face config fields that change the logits after the LM head. The trainer applies the head
# itself (model.forward_logits, for the fp32 option), so it must redo what the model's own forward does
# there: the softcap it does; the others it does not, and a model that sets one is refused.
SOFTCAP_FIELD = "final_logit_softcapping"  # Gemma 2: logits = tanh(logits / cap) * cap
UNSUPPORTED_HEAD_FIELDS = ("logit_scale", "logits_scaling", "lm_head_multiplier")  # Cohere; Granite, MiniCPM3; Falcon-H1


def check_model_path(cfg):
    """Refuse a model_path the trainer cannot load: not a local Hugging Face model folder (no
    config.json), a folder without weights, a model that scales its logits after the LM head (see
    UNSUPPORTED_HEAD_FIELDS), a tokenizer the loop cannot use (tokenizer.folder_tokenizer: loads it).
    Left to the loader, each is a traceback after the run folder was made, or a run on other logits
    or other token ids than the model's own. Not part of validate() (it reads
    files): it runs where a run starts and where a sweep is planned, like check_advisor_reference."""
    path = cfg.model_path
    if not path:
        return
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise SettingError(lambda n: f"{n.given('model_path', path)} is not a local Hugging Face model folder "
                                     "(no config.json)")
    if not any(name.endswith((".safetensors", ".bin")) for name in os.listdir(path)):
        raise SettingError(lambda n: f"{n.given('model_path', path)} has a config.json but no weights "
                                     "(*.safetensors or *.bin)")
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    check_head_fields(path, config)
    vocab_size = config.get("vocab_size", (config.get("text_config") or {}).get("vocab_size"))
    check_folder_tokenizer(path, vocab_size if isinstance(vocab_size, int) else None)  # else checked when loaded


@functools.cache  # a sweep checks every run's config, all with one model folder
def check_folder_tokenizer(path, vocab_size):
    folder_tokenizer(path, vocab_size)


def check_head_fields(path, config):
    """Refuse a model config (config.json as a dict) that sets a logit scale the trainer does not redo."""
    for part in (config, config.get("text_config") or {}):  # a multimodal config nests the text model's
        for name in UNSUPPORTED_HEAD_FIELDS:
            value = part.get(name)
            if value is not None and value != 1:
                raise SettingError(lambda n, name=name, value=value:
                                   f"{n.given('model_path', path)}: its config sets {name}={value}, which its model "
                                   "applies to the logits after the LM head; the trainer applies the head itself (for "
                                   "the fp32 option) and does not redo that, so it would train on other logits than "
                                   "the model's")


def advisor_settings(cfg):
    """(EarlyStopConfig, forecaster kwargs) for the advisor from advisor_rules and advisor_priors.
    SettingError naming the setting and the bad item. forecast is imported only here and in the
    advisor itself: the trainer runs without it while the advisor is off."""
    from forecast.early_stop import EarlyStopConfig
    from forecast.model import Priors
    from forecast.settings import parse_settings

    try:
        rule_items = parse_settings(cfg.advisor_rules, EarlyStopConfig, "advisor_rules")
        prior_items = parse_settings(cfg.advisor_priors, Priors, "advisor_priors")
    except ValueError as err:  # "advisor_rules 'taget=0.5': ...": parse_settings says the label given first
        setting, _, said = str(err).partition(" ")
        raise SettingError(lambda n: f"{n(setting)} {said}") from None
    try:
        rules = EarlyStopConfig(**rule_items)
    except ValueError as err:  # a value out of range: the dataclass names the field
        raise SettingError(lambda n, said=str(err): f"{n('advisor_rules')}: {said}") from None
    try:
        priors = Priors(**prior_items)
    except ValueError as err:
        raise SettingError(lambda n, said=str(err): f"{n('advisor_priors')}: {said}") from None
    return rules, ({"priors": priors} if prior_items else {})


def advisor_idle_note(cfg, names=FIELD_NAMES):
    """Why the advisor, although on, can never stop this run (a sentence, its settings named by names: the
    fields, or at the command line the flags, as SettingError names them), or "". It is asked after
    every advisor_every-th evaluation but not at max_steps, and its rules say nothing before
    min_evals evaluations: an advisor_every or eval_every too large for max_steps (say 4 and 16 of
    64 steps) left it silent for the whole run, without a word that the flag did nothing.
    For a run started now: a resumed run counts the evaluations it logged before."""
    if not cfg.advisor_every:
        return ""
    period = cfg.eval_every * cfg.advisor_every
    last_asked = (cfg.max_steps - 1) // period * period  # the last step before max_steps it is asked at
    settings = (f"{names.given('advisor_every', cfg.advisor_every)} with {names.given('eval_every', cfg.eval_every)} "
                f"and {names.given('max_steps', cfg.max_steps)}")
    if last_asked == 0:
        return (f"{settings}: the advisor would first be asked at step {period}, and it is not asked at or past "
                f"{names('max_steps')}, so it is never asked in this run")
    needed = max(advisor_settings(cfg)[0].min_evals, 2)
    if last_asked // cfg.eval_every < needed:
        return (f"{settings}: the advisor is last asked at step {last_asked}, after {last_asked // cfg.eval_every} "
                f"evaluation(s), and its rules start at min_evals={needed}, so it can never stop this run")
    return ""


def to_json(cfg):
    return json.dumps(dataclasses.asdict(cfg), indent=2, sort_keys=True)


def read_saved_config(path):
    """The Config in a run folder's config.json (--resume and a sweep re-run start from it).
    ValueError naming the file, and the field, when it is not one: a damaged or hand-edited file
    was a traceback (a field of the wrong type, a JSON array) or JSON's bare message, naming no file."""
    try:
        with open(path) as f:
            saved = json.load(f)
    except (OSError, ValueError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError(f"{path}: not a readable run config ({type(err).__name__}: {err})") from None
    if not isinstance(saved, dict):
        raise ValueError(f"{path}: not a run config (a JSON object of settings), but a {type(saved).__name__}")
    for f in fields(Config):
        if f.name in saved and not of_type(saved[f.name], f.type):
            raise ValueError(f"{path}: {f.name}={saved[f.name]!r} is not {JSON_KINDS[f.type]}")
    return from_dict(saved)


JSON_KINDS = {float: "a number", int: "a whole number", bool: "true or false", str: "a string"}


def of_type(value, kind):
    """Whether a JSON value can stand for a field of this type (JSON writes 1.0 as 1; true is no number)."""
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def from_dict(d):
    """Config from a saved config.json / checkpoint dict; fields added since are left at defaults."""
    known = {k: v for k, v in d.items() if k in field_names()}
    return dataclasses.replace(Config(), **known)
