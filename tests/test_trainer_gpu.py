"""trainer_minimal on a CUDA device: the path a GPU user takes (--device cuda, bfloat16, a local
Hugging Face LM). CI has no GPU, so every test here is skipped there. On a machine with one:

    python -m pytest tests/test_trainer_gpu.py

This file needs only torch, numpy, transformers and trainer_minimal (not forecast/'s PyMC stack),
so it also runs where the project's conftest cannot be imported: add --noconftest.
"""

import json
import os
import subprocess
import sys

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from trainer_minimal import make_config
from trainer_minimal.flops import FlopsModel
from trainer_minimal.logging_io import read_jsonl
from trainer_minimal.model import TinyGPT, forward_logits, load_hf_policy, save_untrained_llama
from trainer_minimal.rollout import generate, left_pad, sampling_noise, score
from trainer_minimal.tokenizer import CharTokenizer
from trainer_minimal.train import train

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOK = CharTokenizer()
# Reversing 3 digits: small enough that a few steps run in seconds (as in test_trainer_run.py).
# Nothing filtered: the warm start solves most of these, and a step must have something to train on.
SMALL = dict(tasks="rev", max_size=1, train_size=400, val_size=50, val_samples=4, warmup_steps=60,
             warmup_batch=32, batch_size=8, group_size=4, gen_len=5, lr=2e-3, zero_var_filter=False)


def prompts(n=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    seqs = [[TOK.bos_id] + torch.randint(3, TOK.vocab_size, (5 + i % 4,), generator=g).tolist() for i in range(n)]
    return left_pad(seqs, TOK.pad_id)


def tiny_gpt(seed=0):
    torch.manual_seed(seed)
    return TinyGPT(TOK.vocab_size, n_layer=2, n_head=4, d_model=64).eval()


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    return save_untrained_llama(tmp_path_factory.mktemp("llama") / "model", hidden_size=64, n_layer=2, n_head=4)


def test_cuda_samples_and_scores_what_the_cpu_does():
    """The same weights and noise give the same completions and log-probs in float32 on both devices
    (a few inverse-CDF draws may land on the other side of a rounding-level difference)."""
    model = tiny_gpt()
    ids, mask = prompts()
    noise = sampling_noise(range(len(ids)), 1, 8)
    on_cpu = generate(model, ids, mask, noise, 8, TOK.eos_id, TOK.pad_id)
    gpu_model = tiny_gpt().cuda()
    on_gpu = generate(gpu_model, ids.cuda(), mask.cuda(), noise, 8, TOK.eos_id, TOK.pad_id)
    assert on_gpu["completion"].device.type == "cuda"
    same = (on_gpu["completion"].cpu() == on_cpu["completion"]).float().mean().item()
    assert same >= 0.98, same
    completion, completion_mask = on_cpu["completion"], on_cpu["completion_mask"]
    with torch.no_grad():
        logp_cpu, _ = score(model, ids, mask, completion, completion_mask)
        logp_gpu, _ = score(gpu_model, ids.cuda(), mask.cuda(), completion.cuda(), completion_mask.cuda())
    assert torch.allclose(logp_gpu.cpu(), logp_cpu, atol=1e-4), (logp_gpu.cpu() - logp_cpu).abs().max()


@pytest.mark.parametrize("fp32_logits, logits_dtype", [(True, torch.float32), (False, torch.bfloat16)])
def test_bfloat16_autocast_on_cuda_and_the_fp32_head(fp32_logits, logits_dtype):
    """Under bfloat16 autocast the LM head runs in float32 only when asked (ScaleRL's FP32 head), and
    the log-probs stay near the float32 model's either way."""
    model = tiny_gpt().cuda()
    ids, mask = prompts()
    ids, mask = ids.cuda(), mask.cuda()
    with torch.no_grad():
        logits, _ = forward_logits(model, ids, mask, fp32_logits=fp32_logits, dtype="bfloat16")
        reference, _ = forward_logits(model, ids, mask)
    assert logits.dtype == logits_dtype and reference.dtype == torch.float32
    gap = (logits.float().log_softmax(-1) - reference.log_softmax(-1)).abs().max().item()
    assert gap < 0.1, gap


@pytest.mark.parametrize("kind", ["tiny-gpt", "hf-llama"])
def test_flops_model_matches_flop_counter_on_cuda(kind, llama_folder):
    """The FLOPs the trainer charges for training a batch match torch's count of what ran on the GPU."""
    model = tiny_gpt() if kind == "tiny-gpt" else load_hf_policy(llama_folder)[0]
    model.cuda()
    ids, mask = prompts()
    completion = torch.randint(3, TOK.vocab_size, (len(ids), 6), generator=torch.Generator().manual_seed(1))
    ids, mask, completion = ids.cuda(), mask.cuda(), completion.cuda()
    with FlopCounterMode(display=False) as counter:
        logp, _ = score(model, ids, mask, completion, torch.ones_like(completion), dtype="bfloat16")
        logp.sum().backward()
    predicted = FlopsModel(model).train(len(ids), ids.shape[1] + completion.shape[1])
    assert predicted == pytest.approx(counter.get_total_flops(), rel=0.10)


def test_hugging_face_llama_trains_on_cuda_and_resumes_on_the_cpu(tmp_path, llama_folder):
    """A bfloat16 run of a local HF model on the GPU writes the run format; its checkpoint resumes on
    a machine without one (the README lets a resume change --device)."""
    out = tmp_path / "run"
    cfg = make_config("scalerl", out=str(out), model_path=llama_folder, device="cuda", dtype="bfloat16",
                      max_steps=4, eval_every=2, **SMALL)
    summary = train(cfg)
    assert summary["steps"] == 4 and summary["compute"] > 0 and summary["device_seconds"] > 0
    rows = read_jsonl(out / "evals.jsonl")
    assert [r["step"] for r in rows] == [2, 4]
    assert all(0 <= r["metric"] <= 1 and r["n_eval"] == 200 for r in rows)
    assert all(r["grad_norm"] is not None for r in read_jsonl(out / "train_log.jsonl"))

    resumed = train(make_config("scalerl", out=str(out), model_path=llama_folder, device="cpu", dtype="bfloat16",
                                max_steps=6, eval_every=2, resume=True, **SMALL))
    assert resumed["steps"] == 6 and resumed["compute"] > summary["compute"]
    assert [r["step"] for r in read_jsonl(out / "evals.jsonl")] == [2, 4, 6]


def flag_of(key, value):
    name = key.replace("_", "-")
    if isinstance(value, bool):
        return f"--{name}" if value else f"--no-{name}"
    return f"--{name}={value}"


def test_cli_trains_the_tiny_gpt_on_cuda(tmp_path):
    """`python -m trainer_minimal train --device cuda` end to end, in its own process."""
    out = tmp_path / "cli"
    flags = [flag_of(key, value) for key, value in SMALL.items()]
    done = subprocess.run([sys.executable, "-m", "trainer_minimal", "train", "--preset", "grpo", "--device", "cuda",
                           "--dtype", "bfloat16", "--max-steps", "4", "--eval-every", "2", "--out", str(out), *flags],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    saved = json.loads((out / "config.json").read_text())
    assert saved["device"] == "cuda" and saved["dtype"] == "bfloat16"
    assert [r["step"] for r in read_jsonl(out / "evals.jsonl")] == [2, 4]


def test_a_cuda_run_is_reproducible_and_resumes_to_the_same_rows(tmp_path, llama_folder):
    """What the trainer promises on the CPU holds on the GPU too: the same run twice gives the same
    rows and weights, and a run resumed from its checkpoint gives the rows of the one never stopped."""
    def run(tag, steps, resume=False):
        out = tmp_path / tag
        train(make_config("scalerl", out=str(out), model_path=llama_folder, device="cuda", dtype="bfloat16",
                          max_steps=steps, eval_every=2, resume=resume, warmstart_cache=str(tmp_path / "warm"),
                          **SMALL))
        rows = [(r["step"], r["metric"], r["compute"]) for r in read_jsonl(out / "evals.jsonl")]
        return rows, torch.load(out / "ckpt.pt", map_location="cpu", weights_only=False)["model"]

    first, weights = run("first", 8)
    again, weights_again = run("again", 8)
    run("resumed", 4)
    resumed, weights_resumed = run("resumed", 8, resume=True)
    assert [step for step, _, _ in first] == [2, 4, 6, 8]
    assert again == first and resumed == first
    for name, tensor in weights.items():
        assert torch.equal(weights_again[name], tensor) and torch.equal(weights_resumed[name], tensor), name
