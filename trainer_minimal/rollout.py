"""Sampling G completions per prompt, and re-scoring completions under the current weights.

Randomness: each prompt's sampling noise comes from its own generator seeded by
derive_seed(run seed, step, prompt), and tokens are drawn by inverse-CDF from that noise. A sample
therefore depends only on (seed, step, prompt, weights): not on the batch it sits in, on how a
batch is split across DDP ranks, or on whether the run was resumed.
"""

import hashlib

import torch
import torch.nn.functional as F

from .losses import token_entropy, token_logprobs
from .model import forward_logits


def derive_seed(*parts):
    """A 63-bit seed from any tuple of ints/strings, e.g. derive_seed(seed, "rollout", step, prompt)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def sampling_noise(seeds, n_samples, length):
    """Uniform noise (len(seeds) * n_samples, length): rows [i*n, (i+1)*n) come from seeds[i]."""
    rows = [torch.rand(n_samples, length, generator=torch.Generator().manual_seed(s)) for s in seeds]
    return torch.cat(rows)


def left_pad(seqs, pad_id, device="cpu"):
    """Lists of ids -> (ids (B, P), mask (B, P)); padding on the left so all prompts end together."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
        mask[i, width - len(s):] = 1
    return ids.to(device), mask.to(device)


@torch.no_grad()
def generate(model, prompt_ids, prompt_mask, noise, gen_len, eos_id, pad_id, temperature=1.0,
             fp32_logits=False, dtype="float32"):
    """Sample completions with a KV cache.

    prompt_ids, prompt_mask (B, P); noise (B, gen_len) uniform. Returns a dict with
    completion (B, L) token ids (pad after <eos>), completion_mask (B, L) 1 up to and including <eos>,
    logp_old (B, L) log-probabilities under the sampling policy, finished (B,) True if <eos> was
    produced, and decode_steps (forward calls after the prefill, for the FLOPs model).
    """
    B = prompt_ids.shape[0]
    noise = noise.to(prompt_ids.device)
    logits, cache = forward_logits(model, prompt_ids, prompt_mask, use_cache=True,
                                   fp32_logits=fp32_logits, dtype=dtype)
    next_logits, attn_mask = logits[:, -1], prompt_mask
    done = torch.zeros(B, dtype=torch.bool, device=prompt_ids.device)
    tokens, logps, live, decode_steps = [], [], [], 0
    for t in range(gen_len):
        logp_all = F.log_softmax(next_logits.float() / temperature, dim=-1)  # (B, V)
        cdf = logp_all.exp().cumsum(-1)
        tok = (cdf < noise[:, t : t + 1]).sum(-1).clamp(max=cdf.shape[-1] - 1)  # (B,)
        tok = torch.where(done, torch.full_like(tok, pad_id), tok)
        tokens.append(tok)
        logps.append(logp_all.gather(-1, tok[:, None])[:, 0])
        live.append(~done)
        done = done | (tok == eos_id)
        if t == gen_len - 1 or bool(done.all()):
            break
        attn_mask = torch.cat([attn_mask, live[-1].long()[:, None]], dim=1)
        logits, cache = forward_logits(model, tok[:, None], attn_mask, cache=cache, use_cache=True,
                                       fp32_logits=fp32_logits, dtype=dtype)
        next_logits = logits[:, -1]
        decode_steps += 1
    L = len(tokens)
    completion = torch.stack(tokens, 1)
    mask = torch.stack(live, 1).long()
    logp_old = torch.stack(logps, 1) * mask
    return dict(completion=completion, completion_mask=mask, logp_old=logp_old, finished=done,
                decode_steps=decode_steps, length=L)


def score(model, prompt_ids, prompt_mask, completion, completion_mask, temperature=1.0,
          fp32_logits=False, dtype="float32"):
    """Log-probs of the completion tokens under the current weights (with grad), and their entropy.

    One forward over prompt + completion. Returns (logp (B, L), entropy (B, L), detached).
    """
    ids = torch.cat([prompt_ids, completion], dim=1)  # (B, P + L)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    logits, _ = forward_logits(model, ids, mask, fp32_logits=fp32_logits, dtype=dtype)
    P = prompt_ids.shape[1]
    logits = logits[:, P - 1 : -1].float() / temperature  # (B, L, V): position t predicts token t+1
    return token_logprobs(logits, completion), token_entropy(logits.detach())
