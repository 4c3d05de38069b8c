"""The algorithm as pure functions over tensors: advantages, token log-probs, losses, aggregation.

Shapes: P prompts, G samples per prompt, B = P*G sequences, L completion tokens, V vocabulary.
Every loss returns a per-token loss (B, L); aggregation_weights() turns the choice of average
(sample / token / prompt) into per-token weights computed once over the whole optimizer batch, so
that sum(weights * loss) over micro-batches is exactly the full-batch loss. (Averaging inside each
micro-batch and then across micro-batches would weigh tokens differently with every split.)
"""

import torch
import torch.nn.functional as F


def group_advantages(rewards, norm="group", eps=1e-6, keep=None):
    """rewards (P, G) -> advantages (P, G): reward minus its group mean, then scaled.

    norm="group": divide by each group's std (GRPO); "batch": by the std of all centred rewards
    in the batch (ScaleRL; keeps rare successes on hard prompts from being blown up); "none".
    Groups with identical rewards get advantage 0 under every choice.
    keep (P,) bool: the prompts trained on (zero-variance filtering); None = all. The batch std is
    taken over these only: a filtered prompt is out of the batch (ScaleRL's objective holds only
    prompts with 0 < mean reward < 1; verl filters groups before computing advantages). Counted,
    its zeros would shrink the std, and scale every kept advantage by about
    1 / sqrt(fraction of prompts kept): a step size that grows as more prompts are all-pass or all-fail.
    """
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if norm == "group":
        return centred / (rewards.std(dim=1, keepdim=True) + eps)
    if norm == "batch":
        kept = centred if keep is None or not keep.any() else centred[keep]  # none kept: all zero anyway
        return centred / (kept.std() + eps)
    if norm == "none":
        return centred
    raise ValueError(f"unknown advantage normalisation {norm!r}")


def zero_variance_groups(rewards):
    """rewards (P, G) -> (P,) bool, True where all samples of the prompt got the same reward."""
    return (rewards == rewards[:, :1]).all(dim=1)


def token_logprobs(logits, targets):
    """logits (B, L, V), targets (B, L) -> log pi(target) (B, L). log_softmax runs in float32."""
    return F.log_softmax(logits.float(), dim=-1).gather(-1, targets[..., None])[..., 0]


def token_entropy(logits):
    """logits (B, L, V) -> entropy of each token's distribution (B, L)."""
    logp = F.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def ppo_clip_loss(logp, logp_old, adv, clip_low=0.2, clip_high=0.2):
    """PPO-clip per token (GRPO: clip_low = clip_high = 0.2; DAPO: clip_high 0.28).

    logp, logp_old (B, L); adv (B,) -> (loss (B, L), clipped (B, L) bool).
    loss = -min(rho * A, clip(rho, 1 - clip_low, 1 + clip_high) * A), rho = pi / pi_old.
    """
    ratio = torch.exp(logp - logp_old)
    a = adv[:, None]
    clipped_ratio = ratio.clamp(1 - clip_low, 1 + clip_high)
    loss = -torch.minimum(ratio * a, clipped_ratio * a)
    clipped = (ratio * a) > (clipped_ratio * a)  # where the clipped branch won (no gradient)
    return loss, clipped


def cispo_loss(logp, logp_old, adv, max_ratio=4.0):
    """CISPO per token: -sg(min(rho, max_ratio)) * A * log pi.

    The importance weight is truncated and detached, so every token keeps a gradient (PPO-clip
    drops the gradient of clipped tokens). On-policy (rho = 1) this is REINFORCE: -A * log pi.
    logp, logp_old (B, L); adv (B,) -> (loss (B, L), truncated (B, L) bool).
    """
    ratio = torch.exp(logp - logp_old).detach()
    weight = ratio.clamp(max=max_ratio)
    return -weight * adv[:, None] * logp, ratio > max_ratio


def gspo_loss(logp, logp_old, adv, mask, clip_low=3e-4, clip_high=4e-4):
    """GSPO in its token form: the clipped objective on the sequence ratio s = exp(mean_t log rho).

    Each token carries the ratio sg(s) * pi / sg(pi), whose value is s and whose gradient is
    s * grad log pi; averaged over a sample's tokens this is exactly GSPO's sequence objective.
    logp, logp_old, mask (B, L); adv (B,) -> (loss (B, L), clipped (B, L) bool).
    """
    n_tokens = mask.sum(1).clamp(min=1)
    log_seq_ratio = ((logp - logp_old) * mask).sum(1) / n_tokens  # (B,)
    ratio = torch.exp(log_seq_ratio.detach())[:, None] * torch.exp(logp - logp.detach())
    a = adv[:, None]
    clipped_ratio = ratio.clamp(1 - clip_low, 1 + clip_high)
    loss = -torch.minimum(ratio * a, clipped_ratio * a)
    return loss, (ratio * a) > (clipped_ratio * a)


def reinforce_loss(logp, adv):
    """Plain policy gradient per token, -A * log pi: the reference for the identities in the tests."""
    return -adv[:, None] * logp


def aggregation_weights(mask, prompt_index, mode, n_tokens=None, n_samples=None, n_prompts=None):
    """Per-token weights (B, L) so that sum(weights * token_loss) is the chosen average.

    mask (B, L) 1 for completion tokens that count; prompt_index (B,) groups samples of a prompt.
      sample: mean over each sample's tokens, then over samples (GRPO)
      token:  mean over all tokens of the batch (DAPO, CISPO)
      prompt: mean over the tokens of each prompt's group, then over prompts (ScaleRL)
    n_tokens / n_samples / n_prompts override the batch totals; pass the global ones when the batch
    is spread over DDP ranks so that every rank divides by the same number.
    """
    mask = mask.float()
    if mask.shape[0] == 0:  # nothing kept on this rank
        return mask
    if mode == "token":
        total = mask.sum() if n_tokens is None else n_tokens
        return mask / max(float(total), 1.0)
    if mode == "sample":
        per_sample = mask.sum(1, keepdim=True).clamp(min=1)
        samples = (mask.sum(1) > 0).sum() if n_samples is None else n_samples
        return mask / per_sample / max(float(samples), 1.0)
    if mode == "prompt":
        _, inverse = torch.unique(prompt_index, return_inverse=True)
        group_tokens = torch.zeros(int(inverse.max()) + 1, device=mask.device).index_add_(0, inverse, mask.sum(1))
        prompts = (group_tokens > 0).sum() if n_prompts is None else n_prompts
        return mask / group_tokens[inverse].clamp(min=1)[:, None] / max(float(prompts), 1.0)
    raise ValueError(f"unknown aggregation {mode!r}")


def policy_loss(loss_type, logp, logp_old, adv, mask, clip_low, clip_high, cispo_max):
    """Dispatch on the loss type -> (per-token loss (B, L), clipped-or-truncated (B, L) bool)."""
    if loss_type == "ppo":
        return ppo_clip_loss(logp, logp_old, adv, clip_low, clip_high)
    if loss_type == "cispo":
        return cispo_loss(logp, logp_old, adv, cispo_max)
    if loss_type == "gspo":
        return gspo_loss(logp, logp_old, adv, mask, clip_low, clip_high)
    raise ValueError(f"unknown loss type {loss_type!r}")
