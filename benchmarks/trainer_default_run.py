"""Time one run of trainer_minimal's default preset on the CPU and report how far it rose.

    python benchmarks/trainer_default_run.py                   # 30-60 s on CPU
    python benchmarks/trainer_default_run.py --max-steps 320   # quick: half the steps, about 15 s
    python benchmarks/trainer_default_run.py --out DIR --seed 1   # keep the run folder; any train flag works

Prints wall-clock seconds (warm start included, from a cold cache), the trainer's device-seconds,
R0 (pass rate before RL), the final pass rate, and where the curve saturated: the first evaluation
at which the mean of the last three evaluations reached 90% of the total gain.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.provenance import print_provenance  # noqa: E402
from trainer_minimal.cli import add_config_flags, explicit_overrides  # noqa: E402
from trainer_minimal.config import make_config  # noqa: E402
from trainer_minimal.logging_io import read_jsonl  # noqa: E402
from trainer_minimal.train import train  # noqa: E402


def saturation_step(rows, r0, fraction=0.9):
    """First step where the trailing 3-eval mean reaches r0 + fraction * (final gain)."""
    metrics = [r["metric"] for r in rows]
    final = sum(metrics[-3:]) / len(metrics[-3:])
    for i in range(len(metrics)):
        window = metrics[max(0, i - 2) : i + 1]
        if sum(window) / len(window) >= r0 + fraction * (final - r0):
            return rows[i]["step"]
    return rows[-1]["step"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_flags(parser, exclude=("out", "warmstart_cache", "resume"))
    parser.add_argument("--out", default="", help="run folder to keep (default: a temporary folder, removed at the end)")
    args = parser.parse_args()
    print_provenance("benchmarks/trainer_default_run.py", vars(args))
    # without --out the run (checkpoint, logs, warm-start cache) goes to a folder removed at the end,
    # so that every `make bench` does not leave one more behind in the temp directory
    with tempfile.TemporaryDirectory(prefix="trainer-bench-") as scratch:
        out = args.out or os.path.join(scratch, "run")
        overrides = explicit_overrides(args, exclude=("out",))
        cfg = make_config(overrides.pop("preset", "scalerl"), out=out, **overrides)
        torch.set_num_threads(cfg.threads)
        t0 = time.perf_counter()
        summary = train(cfg)
        wall = time.perf_counter() - t0
        rows = read_jsonl(os.path.join(out, "evals.jsonl"))
    result = dict(
        preset=cfg.preset, seed=cfg.seed, steps=summary["steps"], evaluations=len(rows),
        wall_seconds=round(wall, 1), device_seconds=round(summary["device_seconds"], 1),
        r0=round(summary["r0"], 3), final=round(rows[-1]["metric"], 3),
        best=round(max(r["metric"] for r in rows), 3),
        saturation_step=saturation_step(rows, summary["r0"]), compute_flops=summary["compute"],
        load_average_1min=round(os.getloadavg()[0], 2), cpu_count=os.cpu_count(), out=args.out or None,
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
