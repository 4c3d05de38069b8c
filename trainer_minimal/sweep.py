"""Recipes x seeds: one run folder each, run as separate processes, then one combined table.

  trainer-minimal sweep --presets grpo,dapo,cispo,scalerl --seeds 0,1,2 --out out/sweep --workers 2

Every run is `python -m trainer_minimal train --preset P --seed S --out DIR/P-sS [overrides]`, so a
sweep run is exactly reproducible on its own. The warm starts are computed once, before any run
starts, into DIR/_warmstart (all runs with the same model and task settings share one). Re-running
the same command skips finished runs (summary.json) and resumes interrupted ones (ckpt.pt), so a
killed sweep is continued by running it again. A re-run may extend the runs (a larger --max-steps)
and change what a resume may change (threads, device, evaluation interval, advisor); one whose
flags would change an existing run's recipe or measure is refused before anything runs, since the
sweep's table would mix two settings under one recipe name; so is a new run that would (a seed with
other settings than its recipe's runs there, a recipe trained or measured otherwise than the others).
DIR/runs.csv concatenates every run's evals.jsonl, with an `ended` column saying which runs ended
(docs/run_format.md).
"""

import dataclasses
import glob
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from forecast.data import ENDED_COLUMN, how_run_folder_ended
from forecast.io import atomic_path

from .config import (
    FIELD_NAMES,
    PRESETS,
    RESUMABLE_FIELDS,
    SettingError,
    changed_run_defining_fields,
    check_advisor_reference,
    check_device,
    check_model_path,
    check_not_a_run,
    check_writable,
    make_config,
    settings_changed,
)
from .logging_io import open_log_alone, read_jsonl
from .tasks import build_datasets

RUN_FORMAT_FIRST = ("run_id", "recipe", "seed", "compute", "compute_unit", "metric", "n_eval", "step",
                    "device_seconds", ENDED_COLUMN)


def plan_sweep(presets, seeds, out, overrides, workers=1):
    """Validated configs for every (preset, seed); raises ValueError before anything runs. workers: the runs
    run_sweep runs at a time, whose memory is checked together (check_runs_side_by_side_fit)."""
    check_single_process_environment()
    names = [p for p in presets.split(",") if p]
    try:
        seed_values = [int(s) for s in seeds.split(",") if s]
    except ValueError:
        raise ValueError(f"--seeds must be a comma list of integers, got {seeds!r}") from None
    # each said with its flag: `--seeds "$SEEDS"` with SEEDS unset was "a sweep needs at least one preset and
    # one seed", naming neither flag nor what it was given
    if not names:
        raise ValueError(f"--presets {presets!r} names no preset: a sweep needs at least one, e.g. --presets scalerl")
    if not seed_values:
        raise ValueError(f"--seeds {seeds!r} names no seed: a sweep needs at least one, e.g. --seeds 0,1,2")
    # here, not by each run's config: that said "seed must be >= 0, got -1", naming neither the flag nor its value
    if negative := [seed for seed in seed_values if seed < 0]:
        raise ValueError(f"--seeds {seeds!r}: each seed must be a whole number >= 0, got {negative[0]}")
    if len(set(names)) < len(names) or len(set(seed_values)) < len(seed_values):
        raise ValueError(f"duplicate presets or seeds in --presets {presets} --seeds {seeds}")
    overrides = dict(overrides)
    cache = overrides.pop("warmstart_cache", "") or os.path.join(out, "_warmstart")
    check_not_a_run(out)
    check_writable(out, "out")
    # on a re-run, an existing run is resumed with the flags a resume may change, and no others
    resume_flags = override_flags({k: v for k, v in overrides.items() if k in RESUMABLE_FIELDS})
    plan, conflicts = [], []
    started = started_run_configs(out)
    for name in names:
        for seed in seed_values:
            run_dir = os.path.join(out, f"{name}-s{seed}")
            cfg = make_config(name, seed=seed, out=run_dir, warmstart_cache=cache, **overrides)
            if not same_path(cfg.advisor_reference, out):  # the sweep's own folder is made when it starts
                check_advisor_reference(cfg)
            check_model_path(cfg)
            state, problem = existing_run_state(cfg, max_steps_given="max_steps" in overrides)
            if state != "finished":  # else a traceback from the warm start, which runs in the sweep's own process
                check_device(cfg)
            if state == "new":
                problem = mixed_settings(cfg, started)
            if problem:
                conflicts.append((run_dir, problem))
            resume_argv = ["--out", run_dir, "--resume", *resume_flags]
            plan.append(dict(cfg=cfg, state=state, resume_argv=resume_argv, max_steps_given="max_steps" in overrides,
                             argv=resume_argv if state == "resume" else
                             ["--preset", name, "--seed", str(seed), "--out", run_dir,
                              "--warmstart-cache", cache, *override_flags(overrides)]))
    if conflicts:
        raise SettingError(lambda n: "this sweep's flags differ from the runs already in " + out + ":\n  "
                           + "\n  ".join(f"{run_dir}: {why(n)}" for run_dir, why in conflicts)
                           + "\nrerun with the flags those runs were started with (their config.json), "
                             "or sweep into another --out")
    check_runs_side_by_side_fit(plan, workers)  # before the data is generated, as check_task_data's own check
    check_task_data([p["cfg"] for p in plan])
    check_runs_table(out, [p["cfg"] for p in plan])
    from .train import warm_start_path

    if any(p["state"] == "new" and p["cfg"].warmup_steps > 0 and not os.path.exists(warm_start_path(p["cfg"]))
           for p in plan):  # a warm start to train and save: refused now, not after its warm-up
        check_writable(cache, "warmstart_cache")
    return plan


def check_single_process_environment():
    """Refuse a sweep whose environment says it is one process of several (WORLD_SIZE other than 1: torchrun's,
    a job script's exports, a shell kept from a launch by hand). Its runs inherit it: each took itself for a
    rank of a multi-process run, rank 0 hosting the store at MASTER_PORT, and waited minutes for ranks that
    never came, or crashed in a traceback where another run held the port ('address already in use')."""
    world = os.environ.get("WORLD_SIZE")
    if world is not None and world != "1":
        raise ValueError(f"WORLD_SIZE={world!r} in the environment (torchrun's, or left in the shell), and a sweep "
                         "starts each run as one process, which would take itself for a rank of a launch of several "
                         "and wait for the others: unset WORLD_SIZE (a run of several processes is "
                         "`torchrun ... -m trainer_minimal train`)")


def existing_run_state(cfg, max_steps_given):
    """("new" | "resume" | "finished", why the run in cfg.out cannot be part of this sweep, or None): why(names)
    says it, its settings named by names (config.SettingNames: the fields, or at the command line the flags).

    A run folder with a checkpoint or a summary was started by an earlier invocation: it is
    resumed (or skipped when finished) only if this sweep would have started it the same way. Its
    max_steps may grow when --max-steps is given (the runs are extended), never shrink, and never
    change because the flag was left out of the re-run."""
    ckpt, summary = (os.path.exists(os.path.join(cfg.out, n)) for n in ("ckpt.pt", "summary.json"))
    config_path = os.path.join(cfg.out, "config.json")
    if not (ckpt or summary):
        return "new", None
    if not (ckpt or os.path.exists(config_path)):  # started as new, `train` refused it as "already holds a run" at every re-run
        return "", lambda n: ("has a summary.json but neither config.json nor ckpt.pt, so the settings it ran with are "
                              "unknown: put back its config.json, or move the run folder away")
    from .train import saved_run_config

    # config.json deleted: the checkpoint holds the run's settings, and its resume writes config.json again
    saved = saved_run_config(cfg.out)
    shortened = cfg.max_steps < saved.max_steps or (cfg.max_steps != saved.max_steps and not max_steps_given)
    changed = [*changed_run_defining_fields(saved, cfg), *(["max_steps"] if shortened else [])]
    if changed:
        return "", lambda n: "; ".join(settings_changed(n, saved, cfg, changed))
    extend = cfg.max_steps > saved.max_steps
    if summary and not extend:
        return "finished", None
    if not ckpt:
        return "", lambda n: (f"has no checkpoint (ckpt.pt; the sweep was --slim), so it cannot go on to "
                              f"{n('max_steps')} {cfg.max_steps}")
    return "resume", None


SEED_FIELDS = ("seed", "run_id")  # what the seeds of one recipe differ in
RECIPE_FIELDS = ("preset", "recipe", *sorted(set().union(*PRESETS.values())))  # what recipes differ in


def started_run_configs(out):
    """{run folder: its Config} of the runs in a sweep folder that have started (a checkpoint or a
    summary), sorted by folder; a folder whose settings cannot be read is left to the checks of its own."""
    from .train import saved_run_config

    configs = {}
    for folder in sorted(glob.glob(os.path.join(glob.escape(out), "*", ""))):
        folder = os.path.normpath(folder)
        if not any(os.path.exists(os.path.join(folder, n)) for n in ("ckpt.pt", "summary.json")):
            continue
        try:
            configs[folder] = saved_run_config(folder)
        except ValueError:
            continue
    return configs


def mixed_settings(cfg, started):
    """Why the new run cfg cannot join the sweep's started runs ({folder: Config}), as why(names) for a
    config.SettingNames (existing_run_state's), or None. Its recipe's
    runs there must have its settings but the seed, and the other recipes' runs those no preset sets
    (the model, tasks, evaluation, warm start): else the table pools two settings under one recipe as
    its seeds, or compares recipes trained or measured otherwise. A re-run checked only the runs it
    resumed, so a new seed with another --lr, or a recipe added without the sweep's --tasks, went in
    without a word. What a resume may change (how long, where, how often evaluated) may differ."""
    for folder, saved in started.items():
        same_recipe = saved.recipe == cfg.recipe
        free = (*RESUMABLE_FIELDS, *SEED_FIELDS, *(() if same_recipe else RECIPE_FIELDS))
        changed = [f.name for f in dataclasses.fields(cfg)
                   if f.name not in free and getattr(saved, f.name) != getattr(cfg, f.name)]
        if changed:
            joins = f"a new seed of {cfg.recipe}" if same_recipe else "a new recipe"
            return lambda n, folder=folder, saved=saved, changed=changed: (
                f"{joins} beside {os.path.basename(folder)}, which was started with other settings: "
                + "; ".join(settings_changed(n, saved, cfg, changed)))
    return None


def check_runs_table(out, configs):
    """Refuse a sweep whose DIR/runs.csv holds runs that no run folder in DIR (nor this sweep) makes:
    combine() rewrites the table from the run folders, so their rows would be lost. A runs.csv kept
    after its run folders were deleted (or copied in from elsewhere), or a file of the user's that is
    no run table at all, was silently replaced by the new runs' rows."""
    path = os.path.join(out, "runs.csv")
    if not os.path.isfile(path):
        return
    try:
        table = pd.read_csv(path, dtype=str)
    except pd.errors.EmptyDataError:  # a sweep that had no rows yet wrote an empty table
        return
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise ValueError(f"{path} is not a run table ({type(err).__name__}) and the sweep would replace it with "
                         "one; move it away or sweep into another --out") from None
    if "run_id" not in table:
        if table.empty and not len(table.columns):
            return
        raise ValueError(f"{path} has no run_id column, so it is no run table, and the sweep would replace it "
                         "with one; move it away or sweep into another --out")
    known = {cfg.run_id for cfg in configs}
    for log in glob.glob(os.path.join(glob.escape(out), "*", "evals.jsonl")):
        known.update(str(row.get("run_id")) for row in read_jsonl(log))
    lost = sorted(set(table["run_id"].dropna()) - known)
    if lost:
        shown = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
        raise ValueError(f"{path} holds runs that no run folder in {out} has ({shown}): the sweep rewrites runs.csv "
                         "from its run folders and would drop their rows; move runs.csv away (or delete it if "
                         "those runs should go) or sweep into another --out")


# What a run holds for its whole life once it is set up (memory_estimate's parts): its model and AdamW state, its
# task data. The sequences are held only at times, at most at a rollout, an evaluation or an update.
LASTING_PARTS = ("the model and its AdamW state", "the task data")


def check_runs_side_by_side_fit(plan, workers):
    """Refuse a sweep whose runs started together (run_sweep starts the first `workers` of those it runs at once)
    cannot fit in this machine's memory side by side. check_memory_fits judges one run at a time, each against
    the whole machine: --workers 4 of runs that each fit alone, and not four together, passed, and the machine
    ran out of memory once they were all generating their data or training. Only what each run holds for its
    whole life is summed (LASTING_PARTS, memory_estimate's lower bounds): the sequences are held at times, and the
    runs need not hold them at once, so the sum stays a lower bound. On a CUDA device the runs' models are in
    its memory (every run of a sweep has the sweep's --device), their task data in the machine's."""
    from .train import (
        cuda_device_memory,
        machine_memory,
        memory_estimate,
        memory_said,
        refuse_what_does_not_fit,
    )

    together = [p["cfg"] for p in plan if p["state"] != "finished"][:max(workers, 0)]
    if len(together) < 2:  # one run alone: check_memory_fits
        return
    device, machine = cuda_device_memory(together[0]), machine_memory()

    def checks(names):  # [(parts held, memory available, where)], the settings named by names
        held = side_by_side([memory_estimate(cfg, names=names) for cfg in together])
        if device is None:
            return [(held, machine, "this machine")]
        data = {"the task data": held.pop("the task data")}
        return [(held, device, f"the CUDA device {together[0].device}"), (data, machine, "this machine")]

    refuse_what_does_not_fit(checks, lambda n, *check: (
        f"{n.given('workers', workers)} runs {len(together)} runs side by side, which together need "
        f"{memory_said(*check)}: lower {n('workers')} or the settings"))


def side_by_side(estimates):
    """The LASTING_PARTS of runs' memory_estimate()s, each summed over the runs, with the settings that size it
    (each once, where runs share them)."""
    summed = {}
    for part in LASTING_PARTS:
        held = [estimate[part] for estimate in estimates if part in estimate]  # a Hugging Face model: no size
        if held:
            settings = " / ".join(dict.fromkeys(settings for _size, settings in held))
            summed[part] = (sum(size for size, _settings in held),
                            f"{settings}; {len(held)} runs side by side, each its own")
    return summed


def check_task_data(configs):
    """Generate each distinct training pool and validation set once: a val_size or train_size the
    tasks cannot supply is refused here, before the warm starts, not as a traceback in every run; so are
    sequences longer than the model's positions (train.check_sequences_fit), and before the data is
    generated, a run that cannot fit in memory (train.check_memory_fits)."""
    from .train import check_memory_fits, check_sequences_fit

    keys = set()
    for cfg in configs:
        check_memory_fits(cfg)  # before the data is generated (train.check_this_machine's order)
        key = (cfg.tasks, cfg.max_size, cfg.train_size, cfg.val_size, cfg.data_seed, cfg.gen_len,
               cfg.warmup_steps > 0, cfg.model_path)
        if key not in keys:
            keys.add(key)
            check_sequences_fit(cfg, *build_datasets(cfg))


def same_path(a, b):
    return bool(a) and os.path.abspath(a) == os.path.abspath(b)


def override_flags(overrides):
    flags = []
    for key, value in overrides.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + key.replace("_", "-"))
        else:
            flags += [flag, str(value)]
    return flags


def run_sweep(plan, out, workers, slim=False, stop_grace=None, kill_grace=None, names=FIELD_NAMES):
    """Run the plan with at most `workers` processes at a time; write out/runs.csv. Returns exit code.
    stop_grace, kill_grace: how the runs in flight are stopped when the sweep is (stop_runs).
    names: how its refusals name settings (config.SettingNames: the fields, or at the command line the flags)."""
    if workers < 1:
        print(f"trainer-minimal: error: --workers must be >= 1, got {workers}", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    # only a new run starts from the warm start: a resumed one loads its checkpoint, a finished one is
    # skipped (after --slim deleted the cache, a re-run of a finished sweep trained it again for nothing)
    try:
        prepare_warm_starts([p["cfg"] for p in plan if p["state"] == "new"])
    except SettingError as err:  # a model refused as it is loaded (model.check_own_logits), before any run started,
        from .train import RefusedWhereItStarts

        raise RefusedWhereItStarts(err.message(names)) from None  # is said in one line as train() says it, not a traceback
    queue, running, failed = [], [], []
    refused = {}  # run_id -> why its `train` refused to run
    crashed = {}  # run_id -> (what it died of, its stdout.log), for a run that failed without a refusal
    log_starts = {}  # run_id -> where this attempt's output begins in its stdout.log (appended to)
    for p in plan:
        if p["state"] == "finished":
            print(f"[sweep] {p['cfg'].run_id}: finished, skipped", flush=True)
            continue
        queue.append(p)
    try:
        while queue or running:
            while queue and len(running) < workers:
                p = queue.pop(0)
                run_id, run_dir, argv = p["cfg"].run_id, p["cfg"].out, p["argv"]
                os.makedirs(run_dir, exist_ok=True)
                # the log first: whoever holds it runs the run, so what the run's folder holds is read after
                log = open_log_alone(os.path.join(run_dir, "stdout.log"))
                refusal = "" if log is not None else (
                    f"{run_dir} is being run by another process (another sweep into {out}, or a run a killed "
                    "sweep left training), which has its stdout.log (its .lock names the process training it); rerun once "
                    "it has ended")
                if not refusal and p["state"] == "new" and os.path.exists(os.path.join(run_dir, "ckpt.pt")):
                    argv, refusal = started_since_the_plan(p, names)
                if refusal:
                    if log is not None:
                        log.close()
                    print(f"[sweep] {run_id}: not started: {refusal}", flush=True)
                    failed.append(run_id)
                    refused[run_id] = refusal
                    continue
                log_starts[run_id] = log.tell()
                cmd = [sys.executable, "-m", "trainer_minimal", "train", *argv]
                print(f"[sweep] start {run_id}: {shlex.join(cmd)}", flush=True)  # pasteable, interpreter and all
                running.append((run_id, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log, time.time()))
            time.sleep(0.2)
            for item in list(running):
                run_id, proc, log, t0 = item
                if proc.poll() is None:
                    continue
                running.remove(item)
                log.close()
                refusal = refusal_in_log(log.name, log_starts[run_id]) if proc.returncode != 0 else ""
                crash = "" if refusal or proc.returncode == 0 else crash_in_log(log.name, log_starts[run_id], proc.returncode)
                print(f"[sweep] done  {run_id}: exit {proc.returncode} after {time.time() - t0:.0f}s"
                      + (f": {refusal or crash}" if refusal or crash else ""), flush=True)
                if proc.returncode != 0:
                    failed.append(run_id)
                    if refusal and proc.returncode == 2:  # refused (exit 2); exit 1 failed mid-run (a full disk)
                        refused[run_id] = refusal
                    else:
                        crashed[run_id] = (crash, log.name)
    except BaseException:
        # Ctrl-C, or the sweep's own failure (too many open files to start another run): the runs in flight
        # are stopped too, else they trained on as orphans holding their folders' locks against the rerun
        stop_runs(running, stop_grace, kill_grace)
        raise
    try:
        table = combine(out, [p["cfg"].out for p in plan])
    except ValueError as err:  # a damaged line in a run's log (read_jsonl names it): runs.csv as it was
        print(f"[sweep] {os.path.join(out, 'runs.csv')} was not rewritten: {err}; remove or repair that line "
              "(the runs' own logs are as they were), then re-run: finished runs are skipped", file=sys.stderr)
        return 1
    n_runs = table["run_id"].nunique() if len(table) else 0
    print(f"[sweep] {len(table)} rows from {n_runs} run{'' if n_runs == 1 else 's'} -> "
          f"{os.path.join(out, 'runs.csv')}", flush=True)
    if slim and not failed:
        slim_down(out, [p["cfg"].out for p in plan])
    if failed:
        for line in failed_runs_lines(crashed, refused):
            print(line, file=sys.stderr)
        return 1
    return 0


def failed_runs_lines(crashed, refused):
    """The sweep's closing lines on the runs that did not finish: those that failed mid-run (crashed: run_id ->
    (what it died of, its stdout.log)), which the same command again resumes, then those refused (run_id -> why),
    which it refuses again until what each names is fixed. Both were listed as 'failed runs: ... rerun to resume'."""
    lines = []
    if crashed:
        its = "its" if len(crashed) == 1 else "their"
        lines.append(f"[sweep] failed runs: {', '.join(crashed)} (see {its} stdout.log; rerun to resume)")
        lines += [f"[sweep]   {run_id} {crash or 'failed'} (its log: {log_path})"
                  for run_id, (crash, log_path) in crashed.items()]
    if refused:
        one = len(refused) == 1
        lines.append(f"[sweep] refused runs: {', '.join(refused)} (a rerun refuses {'it' if one else 'them'} again "
                     f"until what {'its' if one else 'each'} line below names is fixed)")
        lines += [f"[sweep]   {run_id} was refused: {refusal}" for run_id, refusal in refused.items()]
    return lines


def started_since_the_plan(p, names=FIELD_NAMES):
    """(argv, "") to launch a run planned as new that has a checkpoint by now, or (None, why not): another
    sweep into this folder started it since this one was planned. Launched as new, `train` refused it
    ('already holds a run; pass --resume'), though it was training or done: it is resumed on the terms
    a plan made now would set (a resume says it has finished, or that another process trains it), and
    one started with other settings is refused as the plan would have refused it."""
    try:
        why = existing_run_state(p["cfg"], p["max_steps_given"])[1]
        problem = why(names) if why else ""
    except ValueError as err:  # its settings cannot be read
        problem = str(err)
    if problem:
        return None, f"{p['cfg'].out} was started since this sweep was planned, with other settings: {problem}"
    print(f"[sweep] {p['cfg'].run_id}: started since this sweep was planned (another sweep into this folder?): "
          "resumed", flush=True)
    return p["resume_argv"], ""


REFUSAL_PREFIX = "trainer-minimal: error: "  # how `train` says why it refused to run (cli.main)


def attempt_lines(path, start):
    """The lines this attempt of a run wrote to its stdout.log (appended to by every attempt), from byte `start`."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read().decode(errors="replace").splitlines()
    except OSError:
        return []


def refusal_in_log(path, start):
    """Why a run's `train` refused to run (its last error line in what this attempt wrote to its
    stdout.log, from byte `start`), or "" when it said none (a crash: its traceback is in the log).
    The sweep said only 'exit 2', and then 'rerun to resume', which a refused run is not."""
    said = [line[len(REFUSAL_PREFIX):] for line in attempt_lines(path, start) if line.startswith(REFUSAL_PREFIX)]
    return said[-1] if said else ""


TRACEBACK_START = "Traceback (most recent call last):"


def crash_in_log(path, start, returncode):
    """What a run that failed without a refusal died of, in a few words: 'was killed by SIGKILL' (the
    kernel's OOM killer, say) or 'crashed: ERROR: MESSAGE' from the last traceback this attempt wrote
    to its stdout.log; "" when neither is known. The sweep said only 'exit 1' (or 'exit -9'), and the
    user had to find the run's log to learn what went wrong."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    lines = attempt_lines(path, start)
    if TRACEBACK_START not in lines:
        return ""
    after = lines[len(lines) - lines[::-1].index(TRACEBACK_START):]
    said = [line for line in after if line.strip() and not line[0].isspace()]  # the frames are indented
    return f"crashed: {said[0]}" if said else ""


STOP_GRACE_S = 2.0  # on Ctrl-C, how long the runs in flight get to stop on their own
# then how long a run has to stop on the signal the sweep sends it before it is killed: Python takes a
# signal only once the C call it is in returns (a large model's forward pass, a GPU sync), so seconds
# are not enough, and a kill costs the run no more than the stop would (its last checkpoint stands)
KILL_GRACE_S = 30.0
# after SIGKILL, how long the sweep waits for a run to end: one that outlives it is stuck in the kernel
# (uninterruptible sleep, D state: a hung NFS mount or device), which no signal ends
REAP_GRACE_S = 5.0


def stop_runs(running, grace=None, kill_grace=None):
    """On Ctrl-C (or SIGTERM, SIGHUP: cli.Stopped), stop the runs in flight before the sweep exits. A
    terminal's Ctrl-C reaches them too, and they stop within the grace period; a signal to the sweep
    alone (`kill PID`, a scheduler's time limit, `timeout`) left them training on as orphans, which
    then held their folders' locks against the rerun the sweep's message advises (every run refused,
    exit 2). A run still
    going after the grace period gets SIGINT (it stops where it is; its last checkpoint stands), or SIGTERM
    where the sweep ignores SIGINT (see run_stop_signal). One still going kill_grace seconds after that
    takes neither (a hung data loader, a run stuck in C code, a wrapper that traps signals): the sweep
    waited on it for good, so `kill PID` or `timeout` never ended it, and nothing said why. It is killed
    (SIGKILL), which a run survives as a crash (its last checkpoint stands), and killed_run_line says so.
    One that has not ended REAP_GRACE_S after SIGKILL is stuck in the kernel, where the sweep would wait on
    it for good as before: it is left behind, and unreaped_run_line says so.
    running: (run_id, process, log, start time) of each run in flight."""
    deadline = time.time() + (STOP_GRACE_S if grace is None else grace)
    stop_signal = run_stop_signal()
    for _, proc, _, _ in running:
        try:
            proc.wait(timeout=max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            if os.name == "nt":  # Windows cannot send a process SIGINT: ended as by kill -9, which a run survives
                proc.terminate()
            else:
                proc.send_signal(stop_signal)
    kill_grace = KILL_GRACE_S if kill_grace is None else kill_grace
    deadline = time.time() + kill_grace
    for run_id, proc, log, _ in running:
        try:
            proc.wait(timeout=max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            run_dir = os.path.dirname(log.name)
            said_killed(log, killed_run_line(run_id, run_dir, stop_signal, kill_grace) if ended_within(proc, REAP_GRACE_S)
                        else unreaped_run_line(run_id, run_dir, proc.pid, stop_signal, kill_grace))
        log.close()


def ended_within(proc, seconds):
    """Whether proc ended within `seconds` (reaped if so)."""
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def killed_run_line(run_id, run_dir, stop_signal, kill_grace):
    """What the sweep says of a run it killed after it took no stop: it has not finished, and the rerun goes on with it."""
    return (f"[sweep] {run_id}: killed (SIGKILL): still running {kill_grace:g} s after its "
            f"{signal.Signals(stop_signal).name}; it has not finished: the same command again {rerun_goes_on(run_dir)}")


def rerun_goes_on(run_dir):
    """How the same sweep command again goes on with a run it stopped: from its checkpoint, or anew."""
    return ("resumes it from its last checkpoint" if os.path.exists(os.path.join(run_dir, "ckpt.pt"))
            else "starts it anew (it had no checkpoint)")


def unreaped_run_line(run_id, run_dir, pid, stop_signal, kill_grace):
    """What the sweep says of a run SIGKILL did not end: it goes on without it, and the rerun goes on with it
    once the process has ended (until then its folder's lock refuses the rerun that run)."""
    return (f"[sweep] {run_id}: could not be reaped: still running {kill_grace:g} s after its "
            f"{signal.Signals(stop_signal).name}, and not ended {REAP_GRACE_S:g} s after SIGKILL (process {pid}, stuck "
            f"in the kernel); left behind, it has not finished: once that process has ended, the same command again "
            f"{rerun_goes_on(run_dir)}")


def said_killed(log, line):
    """line on the sweep's stderr and at the end of the run's stdout.log (appended to, as its own stop line
    is), where whoever reads the run finds why it ended without a word of its own."""
    print(line, file=sys.stderr, flush=True)
    try:  # a handle of its own: a write that fails leaves nothing in the run's handle for its close to raise
        with open(log.name, "a") as own:
            own.write(line + "\n")
    except OSError:  # a full disk, the folder deleted: said on stderr, and the other runs are still to be stopped
        pass


def run_stop_signal():
    """The signal that stops a run in flight: SIGINT, as Ctrl-C does, unless this sweep ignores it. A
    script's background job (`nohup trainer-minimal sweep ... &`) starts with SIGINT ignored, and its
    runs inherit that, so a SIGTERM to such a sweep sent its runs a SIGINT they never took, and the sweep
    waited on them for good. SIGTERM stops a run at the same place (cli.Stopped)."""
    return signal.SIGTERM if signal.getsignal(signal.SIGINT) == signal.SIG_IGN else signal.SIGINT


def prepare_warm_starts(configs):
    """Compute each distinct warm start once, here, so parallel runs never race to build it."""
    from .model import build_policy
    from .rollout import derive_seed
    from .train import warm_start, warm_start_path

    done = set()
    for cfg in configs:
        path = warm_start_path(cfg)
        if path in done or os.path.exists(path):
            done.add(path)
            continue
        import torch

        torch.set_num_threads(cfg.threads)
        t0 = time.time()
        model, tok = build_policy(cfg, init_seed=derive_seed(cfg.warmup_seed, "init"))
        model.to(cfg.device)
        pool, _ = build_datasets(cfg)
        warm_start(cfg, model, tok, pool, torch.device(cfg.device), rank=0, world=1)
        print(f"[sweep] warm start {os.path.basename(path)} in {time.time() - t0:.0f}s", flush=True)
        done.add(path)


def combine(out, run_dirs):
    """Concatenate the runs' evals.jsonl into out/runs.csv (run-format columns first): this sweep's
    runs and every other run folder in out, so that a re-run with fewer presets or seeds (or one that
    adds a recipe to the folder) does not drop the others' rows from the table, which
    forecast.load_runs(out), reading the run logs, would still see."""
    found = [os.path.dirname(p) for p in sorted(glob.glob(os.path.join(glob.escape(out), "*", "evals.jsonl")))]
    run_dirs = list(dict.fromkeys(os.path.normpath(d) for d in [*run_dirs, *found]))
    # each run's rows say whether it ended (its stopped.json or summary.json), as forecast reads the
    # folder: without it the table advised a finished or stopped run as if it were still in flight
    rows = [{**r, ENDED_COLUMN: how_run_folder_ended(Path(d))} for d in run_dirs for r in read_jsonl(os.path.join(d, "evals.jsonl"))]
    table = pd.DataFrame(rows)
    if len(table):
        first = [c for c in RUN_FORMAT_FIRST if c in table.columns]
        table = table[first + [c for c in table.columns if c not in first]]
        # a run folder another tool wrote into the sweep's folder may log no seed (or step): sorted by what it has
        order = [c for c in ("recipe", "seed", "step") if c in table.columns]
        table = table.sort_values(order, kind="stable").reset_index(drop=True)
    # atomically (a reader, or a kill, never sees half a table), through a temporary file of this
    # process's own: two sweeps into one folder (a re-run that adds a recipe while the first still runs)
    # may combine at once
    with atomic_path(os.path.join(out, "runs.csv")) as tmp:
        table.to_csv(tmp, index=False)
    return table


def slim_down(out, run_dirs):
    """Keep what a reader of the sweep needs (config, evals, baseline, summary); drop the rest."""
    for d in run_dirs:
        for name in ("ckpt.pt", "train_log.jsonl", "stdout.log", ".lock", "advisor_asking.json"):
            path = os.path.join(d, name)
            if os.path.exists(path):
                os.remove(path)
    shutil.rmtree(os.path.join(out, "_warmstart"), ignore_errors=True)  # only the sweep's own cache
