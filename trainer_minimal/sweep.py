"""Recipes x seeds: one run folder each, run as separate processes, then one combined table.

  trainer-minimal sweep --presets grpo,dapo,cispo,scalerl --seeds 0,1,2 --out out/sweep --workers 2

Every run is `python -m trainer_minimal train --preset P --seed S --out DIR/P-sS [overrides]`, so a
sweep run is exactly reproducible on its own. The warm starts are computed once, before any run
starts, into DIR/_warmstart (all runs with the same model and task settings share one). Re-running
the same command skips finished runs (summary.json) and resumes interrupted ones (ckpt.pt), so a
killed sweep is continued by running it again. DIR/runs.csv concatenates every run's evals.jsonl.
"""

import os
import shutil
import subprocess
import sys
import time

import pandas as pd

from .config import check_advisor_reference, make_config
from .logging_io import read_jsonl

RUN_FORMAT_FIRST = ("run_id", "recipe", "seed", "compute", "compute_unit", "metric", "n_eval", "step",
                    "device_seconds")


def plan_sweep(presets, seeds, out, overrides):
    """Validated configs for every (preset, seed); raises ValueError before anything runs."""
    names = [p for p in presets.split(",") if p]
    try:
        seed_values = [int(s) for s in seeds.split(",") if s]
    except ValueError:
        raise ValueError(f"--seeds must be a comma list of integers, got {seeds!r}") from None
    if not names or not seed_values:
        raise ValueError("a sweep needs at least one preset and one seed")
    if len(set(names)) < len(names) or len(set(seed_values)) < len(seed_values):
        raise ValueError(f"duplicate presets or seeds in --presets {presets} --seeds {seeds}")
    overrides = dict(overrides)
    cache = overrides.pop("warmstart_cache", "") or os.path.join(out, "_warmstart")
    plan = []
    for name in names:
        for seed in seed_values:
            run_dir = os.path.join(out, f"{name}-s{seed}")
            cfg = make_config(name, seed=seed, out=run_dir, warmstart_cache=cache, **overrides)
            if not same_path(cfg.advisor_reference, out):  # the sweep's own folder is made when it starts
                check_advisor_reference(cfg)
            plan.append(dict(cfg=cfg, argv=["--preset", name, "--seed", str(seed), "--out", run_dir,
                                            "--warmstart-cache", cache, *override_flags(overrides)]))
    return plan


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


def run_sweep(plan, out, workers, slim=False):
    """Run the plan with at most `workers` processes at a time; write out/runs.csv. Returns exit code."""
    if workers < 1:
        print("trainer-minimal: error: --workers must be >= 1", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    prepare_warm_starts([p["cfg"] for p in plan])
    queue, running, failed = [], [], []
    for p in plan:
        run_dir = p["cfg"].out
        if os.path.exists(os.path.join(run_dir, "summary.json")):
            print(f"[sweep] {p['cfg'].run_id}: finished, skipped", flush=True)
            continue
        argv = (["--out", run_dir, "--resume"] if os.path.exists(os.path.join(run_dir, "ckpt.pt"))
                else p["argv"])
        queue.append((p["cfg"].run_id, run_dir, argv))
    while queue or running:
        while queue and len(running) < workers:
            run_id, run_dir, argv = queue.pop(0)
            os.makedirs(run_dir, exist_ok=True)
            log = open(os.path.join(run_dir, "stdout.log"), "a")
            cmd = [sys.executable, "-m", "trainer_minimal", "train", *argv]
            print(f"[sweep] start {run_id}: {' '.join(cmd[1:])}", flush=True)
            running.append((run_id, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log, time.time()))
        time.sleep(0.2)
        for item in list(running):
            run_id, proc, log, t0 = item
            if proc.poll() is None:
                continue
            running.remove(item)
            log.close()
            print(f"[sweep] done  {run_id}: exit {proc.returncode} after {time.time() - t0:.0f}s", flush=True)
            if proc.returncode != 0:
                failed.append(run_id)
    table = combine(out, [p["cfg"].out for p in plan])
    print(f"[sweep] {len(table)} rows from {table['run_id'].nunique() if len(table) else 0} runs -> "
          f"{os.path.join(out, 'runs.csv')}", flush=True)
    if slim and not failed:
        slim_down(out, [p["cfg"].out for p in plan])
    if failed:
        print(f"[sweep] failed runs: {', '.join(failed)} (see their stdout.log; rerun to resume)", file=sys.stderr)
        return 1
    return 0


def prepare_warm_starts(configs):
    """Compute each distinct warm start once, here, so parallel runs never race to build it."""
    from .model import build_policy
    from .rollout import derive_seed
    from .tasks import build_datasets
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
    """Concatenate the runs' evals.jsonl into out/runs.csv (run-format columns first)."""
    rows = [r for d in run_dirs for r in read_jsonl(os.path.join(d, "evals.jsonl"))]
    table = pd.DataFrame(rows)
    if len(table):
        first = [c for c in RUN_FORMAT_FIRST if c in table.columns]
        table = table[first + [c for c in table.columns if c not in first]]
        table = table.sort_values(["recipe", "seed", "step"]).reset_index(drop=True)
    path = os.path.join(out, "runs.csv")  # atomically: a reader (or a kill) never sees half a table
    table.to_csv(f"{path}.tmp", index=False)
    os.replace(f"{path}.tmp", path)
    return table


def slim_down(out, run_dirs):
    """Keep what a reader of the sweep needs (config, evals, baseline, summary); drop the rest."""
    for d in run_dirs:
        for name in ("ckpt.pt", "train_log.jsonl", "stdout.log", ".lock", "advisor_asking.json"):
            path = os.path.join(d, name)
            if os.path.exists(path):
                os.remove(path)
    shutil.rmtree(os.path.join(out, "_warmstart"), ignore_errors=True)  # only the sweep's own cache
