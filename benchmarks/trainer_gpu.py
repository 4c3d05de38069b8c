"""Time trainer_minimal's optimizer steps on the CPU and on a CUDA device: the same runs, side by side.

    python benchmarks/trainer_gpu.py [--steps 8] [--llama-widths 256,1024] [--cpu-threads N]

For each policy (the default recipe's tiny GPT, and Llama-architecture models of the given widths
built from a config, nothing downloaded) it trains the same scalerl run for --steps optimizer steps
on the CPU (float32, the CPU default) and on the GPU (bfloat16 with the FP32 head, the GPU
default), and prints seconds per step and the ratio. A step's time is the trainer's own
device-seconds (sampling and training; no evaluation, no warm start), the mean over whole
generation rounds after the first (CUDA's start-up lands in it; a round's sampling is charged to
its first step, so a mean over whole rounds is the fair one). Also printed: the policy's size and the
FLOP/s the GPU reached by the trainer's own count, to set against the chip's matrix rate.
Without a CUDA device it says so and exits 2.
"""

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from trainer_minimal import make_config  # noqa: E402
from trainer_minimal.logging_io import read_jsonl  # noqa: E402
from trainer_minimal.model import save_untrained_llama  # noqa: E402
from trainer_minimal.train import train  # noqa: E402

# A small evaluation set keeps the untimed parts short; no warm start: timing needs no skill.
FAST = dict(val_size=50, val_samples=4, warmup_steps=0)


def step_seconds(out):
    """Mean seconds and FLOPs per optimizer step over the steps after the first round (train_log.jsonl)."""
    log = read_jsonl(os.path.join(out, "train_log.jsonl"))
    later = log[1:]  # from the end of the first round (off_policy_k = 2 steps) on
    seconds = [b["device_seconds"] - a["device_seconds"] for a, b in itertools.pairwise(later)]
    flops = [b["compute"] - a["compute"] for a, b in itertools.pairwise(later)]
    return statistics.mean(seconds), statistics.mean(flops)


def timed_run(folder, name, device, dtype, steps, threads, model_path=""):
    out = os.path.join(folder, f"{name}-{device}")
    cfg = make_config("scalerl", out=out, device=device, dtype=dtype, threads=threads, model_path=model_path,
                      max_steps=steps, eval_every=steps, **FAST)
    summary = train(cfg)
    seconds, flops = step_seconds(out)
    return dict(seconds_per_step=seconds, flops_per_step=flops, steps=summary["steps"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per run (default 8; even: whole rounds)")
    parser.add_argument("--llama-widths", default="256,1024", help="hidden sizes of the Llama policies")
    parser.add_argument("--cpu-threads", type=int, default=os.cpu_count(), help="torch threads on the CPU")
    args = parser.parse_args(argv)
    if args.steps < 4 or args.steps % 2:
        # timed over the rounds after the first (2 steps each): 2 steps left none to time, and that
        # was found after the CPU run, on device time; an odd count failed in make_config
        parser.error(f"--steps must be an even number of at least 4 (whole rounds after the first), got {args.steps}")
    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark compares the CPU with a GPU", file=sys.stderr)
        return 2
    folder = tempfile.mkdtemp(prefix="trainer-gpu-")
    policies = [("tiny-gpt", "")]
    for width in (int(w) for w in args.llama_widths.split(",") if w):
        layers, heads = (4, 4) if width <= 256 else (8, max(4, width // 128))
        policies.append((f"llama-{width}x{layers}", save_untrained_llama(
            os.path.join(folder, f"llama-{width}"), hidden_size=width, n_layer=layers, n_head=heads)))
    print(f"GPU: {torch.cuda.get_device_name()}; CPU: {os.cpu_count()} cores, {args.cpu_threads} torch threads; "
          f"{args.steps} steps per run, scalerl recipe (batch 16 x group 8)")
    print(f"{'policy':<16} {'params':>9} {'CPU s/step':>11} {'GPU s/step':>11} {'CPU/GPU':>8} {'GPU TFLOP/s':>12}")
    results = []
    for name, model_path in policies:
        cpu = timed_run(folder, name, "cpu", "float32", args.steps, args.cpu_threads, model_path)
        gpu = timed_run(folder, name, "cuda", "bfloat16", args.steps, 1, model_path)
        ckpt = torch.load(os.path.join(folder, f"{name}-cuda", "ckpt.pt"), map_location="cpu", weights_only=False)
        n_params = sum(t.numel() for t in ckpt["model"].values())
        ratio = cpu["seconds_per_step"] / gpu["seconds_per_step"]
        tflops = gpu["flops_per_step"] / gpu["seconds_per_step"] / 1e12
        print(f"{name:<16} {n_params / 1e6:>8.2f}M {cpu['seconds_per_step']:>11.3f} {gpu['seconds_per_step']:>11.3f} "
              f"{ratio:>7.1f}x {tflops:>12.2f}")
        results.append(dict(policy=name, params=n_params, cpu=cpu, gpu=gpu, cpu_over_gpu=ratio, gpu_tflops=tflops))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
