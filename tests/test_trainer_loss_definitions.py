"""trainer_minimal's losses and recipe knobs against their published definitions, worked by hand.

Every expected number here is written from the paper's formula with Python floats and loops over
sequences and tokens, not with the implementation's tensor code (tests/test_trainer_losses.py checks
identities between the implementation's own functions). The batch is small but has what the
definitions care about: completions of unequal length with padding behind them, a prompt whose
samples all got the same reward, both signs of advantage, and ratios inside and outside the clip
range on both sides (and above CISPO's truncation).

Formulas, with rho = pi / pi_old per token and A the advantage of the token's sample:
  PPO-clip (GRPO, Shao et al. 2024; DAPO's clip-higher, Yu et al. 2025):
      loss = -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A); no gradient where the clip wins.
  CISPO (MiniMax-M1 2025; ScaleRL): loss = -sg(min(rho, eps_max)) A log pi; always a gradient.
  GSPO (Zheng et al. 2025): s = exp(mean_t log rho) per sequence,
      J = 1/n_samples sum_i min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i).
  Aggregation: sample = mean over a sample's tokens, then over samples (GRPO); token = mean over all
      tokens of the batch (DAPO); prompt = mean over the tokens of a prompt's samples, then over prompts
      (ScaleRL).
  Advantages: r - mean(group), divided by the group's std (GRPO), by the std of all centred rewards
      of the prompts trained on (ScaleRL's batch level), or by nothing (Dr. GRPO's advantage; its
      constant-length aggregation is not offered). Std with Bessel's correction (torch's and TRL's
      default). Zero-variance filtering drops all-equal groups (ScaleRL; DAPO's dynamic sampling
      without its refill).
"""

import math
import statistics

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trainer_minimal.train as train_module
from trainer_minimal import make_config
from trainer_minimal.flops import FlopsModel
from trainer_minimal.losses import (
    aggregation_weights,
    group_advantages,
    policy_loss,
    zero_variance_groups,
)
from trainer_minimal.model import TinyGPT, forward_logits
from trainer_minimal.rollout import generate, left_pad, sampling_noise, score
from trainer_minimal.tasks import make_problems
from trainer_minimal.tokenizer import CharTokenizer

G, WIDTH = 3, 4  # samples per prompt, completion width (the longest completion)
REWARDS = [[1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]]  # prompt 1: all passed (zero variance)
LENGTHS = [4, 2, 1, 3, 3, 4, 1, 2, 4]  # tokens of each completion, <eos> included; the rest is padding
# log(pi / pi_old) of each real token: ratios 1.05 (inside), 1.49 (above 1.28), 0.61 (below 0.8),
# 5.0 (above CISPO's 4), 0.90 and 1.22 (inside), 0.74 (below), 1.31 (above)
LOG_RATIOS = [0.05, 0.4, -0.5, math.log(5.0), -0.1, 0.2, -0.3, 0.27]
PAD_LOGP, PAD_LOGP_OLD = -3.0, 7.0  # garbage behind the completions: must count for nothing
EPS = 1e-6  # the implementation's guard against a zero std


def prompt_of(i):
    return i // G


def real_tokens(i):
    return range(LENGTHS[i])


def log_ratio(i, t, scale=1.0):
    return scale * LOG_RATIOS[(3 * i + t) % len(LOG_RATIOS)]


def logp_value(i, t):
    return -0.3 - 0.1 * ((i + 2 * t) % 5)  # log pi of each real token (for CISPO's loss value)


# ----------------------------------------------------------------------------- hand definitions


def hand_advantages(norm, kept_prompts):
    """{sample index: advantage} from the definitions, with statistics' Bessel-corrected stdev."""
    centred = {}
    for p, group in enumerate(REWARDS):
        mean = sum(group) / len(group)
        for g, r in enumerate(group):
            centred[p * G + g] = r - mean
    if norm == "none":
        return centred
    if norm == "group":
        out = {}
        for p, group in enumerate(REWARDS):
            sd = statistics.stdev(group)
            for g in range(G):
                out[p * G + g] = centred[p * G + g] / (sd + EPS)
        return out
    batch_sd = statistics.stdev([centred[i] for i in centred if prompt_of(i) in kept_prompts])
    return {i: c / (batch_sd + EPS) for i, c in centred.items()}


def hand_weight(i, mode, kept):
    """The weight of one real token of sample i in the chosen average over the kept samples."""
    if mode == "token":
        return 1.0 / sum(LENGTHS[j] for j in kept)
    if mode == "sample":
        return 1.0 / (LENGTHS[i] * len(kept))
    prompts = {prompt_of(j) for j in kept}
    group_tokens = sum(LENGTHS[j] for j in kept if prompt_of(j) == prompt_of(i))
    return 1.0 / (group_tokens * len(prompts))


def clip(x, lo, hi):
    return min(max(x, lo), hi)


def hand_token_loss(loss_type, i, t, adv, scale, clip_low, clip_high, cispo_max):
    """(per-token loss, d loss / d log pi of that token) of real token t of sample i.
    GSPO's token carries its sequence's objective; its gradient is s * A (GSPO-token's sg(s) pi / sg(pi))."""
    a = adv[i]
    if loss_type == "cispo":
        weight = min(math.exp(log_ratio(i, t, scale)), cispo_max)
        return -weight * a * logp_value(i, t), -weight * a
    if loss_type == "ppo":
        rho = math.exp(log_ratio(i, t, scale))
    else:  # gspo: the geometric mean of the sequence's token ratios
        rho = math.exp(sum(log_ratio(i, u, scale) for u in real_tokens(i)) / LENGTHS[i])
    unclipped, clipped = rho * a, clip(rho, 1 - clip_low, 1 + clip_high) * a
    if unclipped <= clipped:
        return -unclipped, -rho * a
    return -clipped, 0.0


def tensors(scale):
    """logp (a leaf, so its gradient is d loss / d log pi), logp_old, mask, prompt index, rewards."""
    n = len(LENGTHS)
    logp = torch.full((n, WIDTH), PAD_LOGP, dtype=torch.float64)
    logp_old = torch.full((n, WIDTH), PAD_LOGP_OLD, dtype=torch.float64)
    mask = torch.zeros(n, WIDTH, dtype=torch.long)
    for i in range(n):
        for t in real_tokens(i):
            logp[i, t] = logp_value(i, t)
            logp_old[i, t] = logp_value(i, t) - log_ratio(i, t, scale)
            mask[i, t] = 1
    prompt_index = torch.arange(n) // G
    return logp.requires_grad_(), logp_old, mask, prompt_index, torch.tensor(REWARDS, dtype=torch.float64)


# ----------------------------------------------------------------------------- advantages


@pytest.mark.parametrize("norm", ["group", "batch", "none"])
@pytest.mark.parametrize("filtered", [False, True])
def test_advantages_match_their_definitions(norm, filtered):
    rewards = torch.tensor(REWARDS, dtype=torch.float64)
    keep = ~zero_variance_groups(rewards) if filtered else torch.ones(len(REWARDS), dtype=torch.bool)
    assert (~zero_variance_groups(rewards)).tolist() == [True, False, True]
    kept_prompts = {p for p in range(len(REWARDS)) if keep[p]}
    expected = hand_advantages(norm, kept_prompts)
    got = group_advantages(rewards, norm, keep=keep).reshape(-1).tolist()
    assert got == pytest.approx([expected[i] for i in range(len(LENGTHS))], rel=1e-6, abs=1e-9)
    assert got[G:2 * G] == [0.0] * G  # the zero-variance prompt has no signal under any scale


def test_batch_scale_differs_with_and_without_the_filter():
    """Kept prompts only: the all-pass prompt's zeros would shrink the std and grow every advantage."""
    with_filter, without = hand_advantages("batch", {0, 2}), hand_advantages("batch", {0, 1, 2})
    assert with_filter[0] == pytest.approx(without[0] * math.sqrt(5 / 8))  # std sqrt(4/15) vs sqrt(1/6)


# ----------------------------------------------------------------------------- losses


CASES = [  # loss type, eps_low, eps_high, scale of the log ratios (GSPO's range is ~1e-3 wide)
    ("ppo", 0.2, 0.2, 1.0),  # GRPO
    ("ppo", 0.2, 0.28, 1.0),  # DAPO clip-higher
    ("cispo", 0.2, 0.28, 1.0),
    ("gspo", 0.2, 0.28, 1.0),
    ("gspo", 3e-4, 4e-4, 2e-3),  # GSPO's own range
]


@pytest.mark.parametrize("loss_type, clip_low, clip_high, scale", CASES)
@pytest.mark.parametrize("aggregation", ["sample", "token", "prompt"])
@pytest.mark.parametrize("norm, filtered", [("group", False), ("batch", True), ("none", True), ("batch", False)])
def test_loss_and_gradient_match_the_definitions(loss_type, clip_low, clip_high, scale, aggregation, norm, filtered):
    """The trainer's composition (update(): kept rows, weights over the whole batch, per-token loss,
    sum) against the loss and its gradient written token by token from the papers."""
    cispo_max = 4.0
    logp, logp_old, mask, prompt_index, rewards = tensors(scale)
    keep = ~zero_variance_groups(rewards) if filtered else torch.ones(len(REWARDS), dtype=torch.bool)
    adv = group_advantages(rewards, norm, keep=keep).reshape(-1)
    rows = keep.repeat_interleave(G).nonzero()[:, 0]
    weights = aggregation_weights(mask[rows], prompt_index[rows], aggregation)
    token_loss, _ = policy_loss(loss_type, logp[rows], logp_old[rows], adv[rows], mask[rows],
                                clip_low, clip_high, cispo_max)
    loss = (weights * token_loss).sum()
    loss.backward()

    kept = [i for i in range(len(LENGTHS)) if keep[prompt_of(i)]]
    hand_adv = hand_advantages(norm, {prompt_of(i) for i in kept})
    expected_loss, expected_grad = 0.0, torch.zeros_like(logp)
    for i in kept:
        w = hand_weight(i, aggregation, kept)
        for t in real_tokens(i):
            value, grad = hand_token_loss(loss_type, i, t, hand_adv, scale, clip_low, clip_high, cispo_max)
            expected_loss += w * value
            expected_grad[i, t] = w * grad
    assert loss.item() == pytest.approx(expected_loss, rel=1e-6, abs=1e-9)
    torch.testing.assert_close(logp.grad, expected_grad, rtol=1e-6, atol=1e-9)  # padding and filtered rows: 0


def test_the_batch_exercises_both_sides_of_every_clip():
    """The cases above are only as good as their batch: clipped and unclipped tokens of both signs."""
    adv = hand_advantages("group", {0, 1, 2})
    seen = set()
    for i in range(len(LENGTHS)):
        for t in real_tokens(i):
            if adv[i] == 0:
                continue
            rho = math.exp(log_ratio(i, t))
            _, grad = hand_token_loss("ppo", i, t, adv, 1.0, 0.2, 0.28, 4.0)
            seen.add((adv[i] > 0, rho > 1, grad == 0))
            if rho > 4.0:
                seen.add("above cispo_max")
    assert seen >= {(True, True, True), (True, False, False), (False, False, True), (False, True, False),
                    (True, True, False), (False, False, False), "above cispo_max"}
    gspo = {hand_token_loss("gspo", i, 0, adv, 2e-3, 3e-4, 4e-4, 4.0)[1] == 0 for i in range(9) if adv[i] != 0}
    assert gspo == {True, False}  # some sequences clipped at GSPO's own range, some not


def test_gspo_with_sample_average_is_the_sequence_objective():
    """GSPO's paper objective, written at the sequence level (no tokens): -1/n sum_i min(s_i A_i, clip(s_i) A_i),
    gradient -A_i s_i / |y_i| / n on each token of sample i where the unclipped branch wins."""
    logp, logp_old, mask, prompt_index, rewards = tensors(1.0)
    adv = group_advantages(rewards, "group").reshape(-1)
    weights = aggregation_weights(mask, prompt_index, "sample")
    token_loss, clipped = policy_loss("gspo", logp, logp_old, adv, mask, 0.2, 0.28, 4.0)
    (weights * token_loss).sum().backward()
    n = len(LENGTHS)
    hand_adv = hand_advantages("group", {0, 1, 2})
    objective, grad = 0.0, torch.zeros_like(logp)
    for i in range(n):
        s = math.exp(sum(log_ratio(i, t) for t in real_tokens(i)) / LENGTHS[i])
        a = hand_adv[i]
        objective += min(s * a, clip(s, 0.8, 1.28) * a) / n
        if s * a <= clip(s, 0.8, 1.28) * a:
            for t in real_tokens(i):
                grad[i, t] = -a * s / LENGTHS[i] / n
        assert bool(clipped[i, 0]) == (s * a > clip(s, 0.8, 1.28) * a)
    assert (weights * token_loss).sum().item() == pytest.approx(-objective, rel=1e-6)
    torch.testing.assert_close(logp.grad, grad, rtol=1e-6, atol=1e-9)


def test_old_log_probs_get_no_gradient_and_cispo_weight_is_detached():
    """pi_old is a constant of every objective; CISPO's truncated weight is sg(.) by definition, so a
    logp_old that carried a gradient (it does not in the trainer: generate runs under no_grad) gets none
    from CISPO, and the gradient of log pi is the weight alone."""
    logp, logp_old, mask, prompt_index, rewards = tensors(1.0)
    logp_old.requires_grad_()
    adv = group_advantages(rewards, "none").reshape(-1)
    loss, _ = policy_loss("cispo", logp, logp_old, adv, mask, 0.2, 0.28, 4.0)
    (loss * mask).sum().backward()
    assert logp_old.grad is None or torch.all(logp_old.grad == 0)
    torch.testing.assert_close(logp.grad, -(torch.exp(logp - logp_old).clamp(max=4.0) * adv[:, None] * mask).detach())


# ----------------------------------------------------------------------------- the trainer's step, end to end

TOK = CharTokenizer()
PROMPTS = ["12+3=", "9=", "s312:"]  # unequal lengths: left padding


def tiny_model():
    torch.manual_seed(0)
    return TinyGPT(TOK.vocab_size, n_layer=2, n_head=4, d_model=32)


def hand_batch():
    """Prompts (left-padded) with completions of LENGTHS, each ending in <eos>, padding behind."""
    g = torch.Generator().manual_seed(1)
    prompt_ids, prompt_mask = left_pad([TOK.encode(p) for p in PROMPTS for _ in range(G)], TOK.pad_id)
    completion = torch.full((len(LENGTHS), WIDTH), TOK.pad_id, dtype=torch.long)
    completion_mask = torch.zeros(len(LENGTHS), WIDTH, dtype=torch.long)
    for i, n in enumerate(LENGTHS):
        completion[i, : n - 1] = torch.randint(3, TOK.vocab_size, (n - 1,), generator=g)
        completion[i, n - 1] = TOK.eos_id
        completion_mask[i, :n] = 1
    return prompt_ids, prompt_mask, completion, completion_mask


def sequence_logprobs(model, i, temperature):
    """log pi of sample i's real tokens, from one unpadded forward of its prompt and completion alone."""
    prompt = TOK.encode(PROMPTS[prompt_of(i)])
    _, _, completion, _ = hand_batch()
    tokens = completion[i, : LENGTHS[i]].tolist()
    ids = torch.tensor([prompt + tokens])
    logits, _ = forward_logits(model, ids, torch.ones_like(ids))
    out = []
    for t, token in enumerate(tokens):
        out.append(F.log_softmax(logits[0, len(prompt) - 1 + t] / temperature, dim=-1)[token])
    return out


class NoStep(torch.optim.SGD):
    """Keeps the gradient update() leaves, and the weights as they were."""

    def step(self, closure=None):
        return None


@pytest.mark.parametrize("preset, knobs", [("grpo", {}), ("dapo", {}), ("cispo", {}), ("gspo", {}), ("scalerl", {}),
                                           ("cispo", {"cispo_max": 1.3})])
def test_update_matches_the_hand_written_objective(preset, knobs):
    """train.update (kept rows, batch-wide weights, micro-batches of 2, padded batch) gives the gradient
    of the preset's objective written per sequence from its definition, on unpadded forwards. CISPO at a
    truncation of 1.3 too, below three of the batch's ratios (kills the mutant that left cispo_max unwired,
    at its default 4 whatever the run set)."""
    cfg = make_config(preset, micro_batch=2, grad_clip=0.0, temperature=0.8, out="unused", **knobs)
    scale = 2e-3 if cfg.loss_type == "gspo" else 1.0
    model = tiny_model()
    prompt_ids, prompt_mask, completion, completion_mask = hand_batch()
    with torch.no_grad():
        on_policy, _ = score(model, prompt_ids, prompt_mask, completion, completion_mask, cfg.temperature)
    offsets = torch.tensor([[log_ratio(i, t, scale) if t < LENGTHS[i] else 0.0 for t in range(WIDTH)]
                            for i in range(len(LENGTHS))])
    logp_old = (on_policy - offsets) * completion_mask  # as generate leaves it: 0 behind <eos>
    rewards = torch.tensor(REWARDS)
    keep = ~zero_variance_groups(rewards) if cfg.zero_var_filter else torch.ones(len(REWARDS), dtype=torch.bool)
    kept = [i for i in range(len(LENGTHS)) if keep[prompt_of(i)]]
    hand_adv = hand_advantages(cfg.adv_norm, {prompt_of(i) for i in kept})
    mb = dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion=completion, completion_mask=completion_mask,
              logp_old=logp_old, adv=torch.tensor([hand_adv[i] for i in range(len(LENGTHS))], dtype=torch.float32),
              keep=keep.repeat_interleave(G), prompt_index=torch.arange(len(LENGTHS)) // G,
              n_samples=len(kept), n_prompts=len({prompt_of(i) for i in kept}),
              n_tokens=float(sum(LENGTHS[i] for i in kept)), reward=0.0, zero_var_frac=0.0,
              flops_width=prompt_ids.shape[1] + WIDTH)
    state = dict(step=0, flops_model=FlopsModel(model))
    metrics = train_module.update(cfg, model, NoStep(model.parameters(), lr=0.0), mb, state, world=1)
    got = [p.grad.clone() for p in model.parameters()]

    model.zero_grad(set_to_none=True)
    objective = 0.0
    for i in kept:
        logp = sequence_logprobs(model, i, cfg.temperature)
        old = [float(logp_old[i, t]) for t in real_tokens(i)]
        a, w = hand_adv[i], hand_weight(i, cfg.aggregation, kept)
        if cfg.loss_type == "gspo":  # -min(s A, clip(s) A) for the sequence, s = exp(mean log ratio)
            s = torch.exp(sum(lp - o for lp, o in zip(logp, old, strict=True)) / LENGTHS[i])
            term = -torch.minimum(s * a, s.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * a)
            objective = objective + w * LENGTHS[i] * term  # every token carries it, each with weight w
            continue
        for lp, o in zip(logp, old, strict=True):
            rho = torch.exp(lp - o)
            if cfg.loss_type == "ppo":
                term = -torch.minimum(rho * a, rho.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * a)
            else:  # cispo: the truncated weight is a number, not a function of the weights
                term = -min(rho.item(), cfg.cispo_max) * a * lp
            objective = objective + w * term
    objective.backward()
    for p, g in zip(model.parameters(), got, strict=True):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-7)
    assert metrics["loss"] == pytest.approx(objective.item(), rel=1e-4, abs=1e-7)
    assert metrics["kept_prompts"] == (2 if cfg.zero_var_filter else 3)
    # compute: forward + backward (3x the forward) of every kept sequence at the round's width, by hand
    n_params = 2 * (32 * 96 + 32 * 32 + 32 * 128 + 128 * 32) + 32 * TOK.vocab_size  # qkv, proj, mlp; head
    width = prompt_ids.shape[1] + WIDTH
    per_sequence = 3 * (2 * n_params * width + 4 * 2 * 32 * width * width)
    assert metrics["train_flops"] == len(kept) * per_sequence
    assert metrics["trained_tokens"] == len(kept) * width


def test_rollout_flops_count_prefill_and_each_decode_step_by_hand():
    """2N per token forwarded plus 4 * layers * d * queries * keys: a prefill over the prompt width, then
    one query per decode step attending to the prompt and the tokens so far (the last token is not fed)."""
    model = tiny_model()
    n_params = 2 * (32 * 96 + 32 * 32 + 32 * 128 + 128 * 32) + 32 * TOK.vocab_size
    prompt_ids, prompt_mask = left_pad([TOK.encode(p) for p in PROMPTS], TOK.pad_id)
    out = generate(model, prompt_ids, prompt_mask, sampling_noise([0, 1, 2], 1, 5), 5, eos_id=-1, pad_id=TOK.pad_id)
    assert out["decode_steps"] == 4
    width, n = prompt_ids.shape[1], len(PROMPTS)
    expected = n * (2 * n_params * width + 8 * 32 * width * width)
    for s in range(1, 5):
        expected += n * (2 * n_params + 8 * 32 * (width + s))
    assert FlopsModel(model).rollout(n, width, out["decode_steps"]) == expected


def test_fp32_head_under_bfloat16_autocast_on_the_cpu():
    """ScaleRL's FP32 LM head: under bfloat16 autocast the backbone runs in bfloat16, and with fp32_logits
    the head's matmul runs in float32 on that hidden state; without, the logits are bfloat16."""
    model = tiny_model()
    ids, mask = left_pad([TOK.encode(p) for p in PROMPTS], TOK.pad_id)
    with torch.no_grad():
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            hidden, _ = model.hidden(ids, mask.bool(), positions)
        by_hand = hidden.float() @ model.lm_head.weight.float().T
        fp32, _ = forward_logits(model, ids, mask, fp32_logits=True, dtype="bfloat16")
        bf16, _ = forward_logits(model, ids, mask, fp32_logits=False, dtype="bfloat16")
    assert fp32.dtype == torch.float32 and bf16.dtype == torch.bfloat16
    torch.testing.assert_close(fp32, by_hand)
    assert not torch.equal(bf16.float(), by_hand)  # the bfloat16 head rounds what the fp32 one keeps


def test_sample_round_hands_each_step_the_defined_advantages_and_normalisers(monkeypatch):
    """sample_round's wiring: a round of k=2 mini-batches of 4 prompts, with rewards fixed (two prompts all
    pass, two all fail). The batch std is over the kept prompts of the whole round (PPO-off-policy-k: the
    round is the batch generated at once); each mini-batch's counts are of its kept prompts alone, and
    No-Positive-Resampling retires the prompts at pass rate >= 0.9."""
    fixed = [[1, 0, 0], [1, 1, 1], [0, 1, 1], [0, 0, 0], [1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 1, 0]]
    monkeypatch.setattr(train_module, "rewards_of",
                        lambda tok, out, answers: torch.tensor(fixed, dtype=torch.float).reshape(-1)[: len(answers)])
    cfg = make_config("scalerl", batch_size=4, group_size=G, off_policy_k=2, train_size=16, gen_len=WIDTH, out="unused")
    pool = make_problems(0, 16, ["add", "rev"], 2)
    model = tiny_model()
    state = dict(step=0, retired=np.zeros(len(pool), dtype=bool), flops_model=FlopsModel(model))
    minibatches = train_module.sample_round(cfg, model, TOK, pool, state, 0, torch.device("cpu"), 0, 1)

    kept_prompts = [p for p, r in enumerate(fixed) if 0 < sum(r) < G]
    centred = {(p, g): r - sum(fixed[p]) / G for p in range(len(fixed)) for g, r in enumerate(fixed[p])}
    batch_sd = statistics.stdev([centred[p, g] for p in kept_prompts for g in range(G)])
    for j, mb in enumerate(minibatches):
        prompts = range(4 * j, 4 * j + 4)
        expected = [centred[p, g] / (batch_sd + EPS) for p in prompts for g in range(G)]
        assert mb["adv"].tolist() == pytest.approx(expected, rel=1e-6, abs=1e-9)
        assert mb["keep"].tolist() == [p in kept_prompts for p in prompts for _ in range(G)]
        assert mb["n_prompts"] == sum(p in kept_prompts for p in prompts)
        assert mb["n_samples"] == G * mb["n_prompts"]
        assert mb["n_tokens"] == float(sum(int(mb["completion_mask"][i].sum()) for i in range(4 * G) if mb["keep"][i]))
    assert int(state["retired"].sum()) == 2  # the two prompts at pass rate 1


class CallRecorder:
    """Stands in for FlopsModel: each count is the call's arguments, so the wiring can be read back."""

    n_params = 1

    def __init__(self, model):
        pass

    def rollout(self, n_seqs, prompt_width, decode_steps):
        return (n_seqs, prompt_width, decode_steps)

    def train(self, n_seqs, width):
        return n_seqs * width


def test_sample_round_charges_one_rollout_of_every_sample_at_the_round_s_widths(monkeypatch):
    """The round's sampling (8 prompts x G samples, at the padded prompt width) is charged once, to its first
    step, and each step trains at prompt width + completion width (kills the mutants charging len(prompts)
    sequences instead of len(prompts) * G, and a train width without the prompt)."""
    cfg = make_config("scalerl", batch_size=4, group_size=G, off_policy_k=2, train_size=16, gen_len=WIDTH, out="unused")
    pool = make_problems(0, 16, ["add", "rev"], 2)
    model = tiny_model()
    state = dict(step=0, retired=np.zeros(len(pool), dtype=bool), flops_model=CallRecorder(model))
    minibatches = train_module.sample_round(cfg, model, TOK, pool, state, 0, torch.device("cpu"), 0, 1)
    prompt_width, completion_width = minibatches[0]["prompt_ids"].shape[1], minibatches[0]["completion"].shape[1]
    n_seqs, width, decode_steps = minibatches[0]["gen_flops"]
    assert (n_seqs, width) == (8 * G, prompt_width) and decode_steps in (completion_width - 1, completion_width)
    assert [mb["gen_flops"] for mb in minibatches[1:]] == [0.0]
    assert [mb["flops_width"] for mb in minibatches] == [prompt_width + completion_width] * 2
    assert sum(mb["gen_tokens"] for mb in minibatches) == sum(
        int(mb["completion_mask"].sum()) + int(mb["prompt_mask"].sum()) for mb in minibatches)


@pytest.mark.parametrize("preset, knobs, kept, retired", [
    ("grpo", {}, range(8), 0),  # no filter, no No-Positive-Resampling: every prompt trained on, none retired
    ("scalerl", {"npr_threshold": 1.0}, [0, 2, 4, 7], 2),  # a pass rate of exactly 1 reaches a threshold of 1
    ("scalerl", {"npr_threshold": 0.5}, [0, 2, 4, 7], 4),  # 2/3 (twice) and 1 (twice); not 1/3 nor 0
])
def test_sample_round_filters_and_retires_as_the_recipe_says(monkeypatch, preset, knobs, kept, retired):
    """The recipe's zero_var_filter and npr_threshold, wired into sample_round, with the fixed rewards of the
    test above (prompts 1 and 6 all pass, 3 and 5 all fail, 0 and 7 pass 1 of 3, 2 and 4 pass 2 of 3): a recipe
    without the filter trains on every prompt, with group-normalised advantages; No-Positive-Resampling
    retires a prompt whose pass rate is at or above the threshold (kills the mutants filtering whatever the
    recipe says, and retiring only above the threshold)."""
    fixed = [[1, 0, 0], [1, 1, 1], [0, 1, 1], [0, 0, 0], [1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 1, 0]]
    monkeypatch.setattr(train_module, "rewards_of",
                        lambda tok, out, answers: torch.tensor(fixed, dtype=torch.float).reshape(-1)[: len(answers)])
    cfg = make_config(preset, batch_size=4, group_size=G, off_policy_k=2, train_size=16, gen_len=WIDTH, out="unused",
                      **knobs)
    pool = make_problems(0, 16, ["add", "rev"], 2)
    model = tiny_model()
    state = dict(step=0, retired=np.zeros(len(pool), dtype=bool), flops_model=FlopsModel(model))
    minibatches = train_module.sample_round(cfg, model, TOK, pool, state, 0, torch.device("cpu"), 0, 1)
    assert [p for j, mb in enumerate(minibatches) for p in range(4) if mb["keep"][p * G]] == [
        p - 4 * j for j in range(2) for p in kept if 4 * j <= p < 4 * j + 4]
    assert sum(mb["n_prompts"] for mb in minibatches) == len(kept)
    if preset == "grpo":
        for j, mb in enumerate(minibatches):
            expected = []
            for p in range(4 * j, 4 * j + 4):
                sd = statistics.stdev(fixed[p])
                expected += [(r - sum(fixed[p]) / G) / (sd + EPS) for r in fixed[p]]
            assert mb["adv"].tolist() == pytest.approx(expected, rel=1e-6, abs=1e-9)
    assert int(state["retired"].sum()) == retired


def test_a_mini_batch_with_nothing_kept_takes_no_optimizer_step():
    """Every prompt of the mini-batch filtered out (all its samples got one reward): no loss, no gradient, and
    no optimizer step, so the weights, AdamW's state and the logged gradient norm (None) say nothing was
    trained (kills the mutant stepping the optimizer anyway: one process logged a gradient norm of 0 for it,
    and under torchrun, where sync_gradients fills missing gradients with zeros, AdamW's momentum moved the
    weights)."""
    cfg = make_config("scalerl", micro_batch=2, out="unused")
    model = tiny_model()
    prompt_ids, prompt_mask, completion, completion_mask = hand_batch()
    n = len(LENGTHS)
    mb = dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion=completion, completion_mask=completion_mask,
              logp_old=torch.zeros(n, WIDTH), adv=torch.zeros(n), keep=torch.zeros(n, dtype=torch.bool),
              prompt_index=torch.arange(n) // G, n_samples=0, n_prompts=0, n_tokens=0.0, reward=1.0, zero_var_frac=1.0,
              flops_width=prompt_ids.shape[1] + WIDTH)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    metrics = train_module.update(cfg, model, optimizer, mb, dict(step=0, flops_model=FlopsModel(model)), world=1)
    assert metrics["grad_norm"] is None and metrics["train_flops"] == 0 and metrics["trained_tokens"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert not optimizer.state


def test_a_retired_prompt_stays_retired_when_nearly_all_are_and_the_whole_pool_is_drawn_again(monkeypatch):
    """No-Positive-Resampling retires a prompt for good (ScaleRL). With fewer prompts left than a round needs
    (4 of 16, for 2 x 4) the round draws from the whole pool, retired prompts included; those that now fail
    stay retired (kills the mutant that set a drawn prompt's retirement to this round's verdict, un-retiring them)."""
    monkeypatch.setattr(train_module, "rewards_of", lambda tok, out, answers: torch.zeros(len(answers)))
    cfg = make_config("scalerl", batch_size=4, group_size=G, off_policy_k=2, train_size=16, gen_len=WIDTH, out="unused")
    pool = make_problems(0, 16, ["add", "rev"], 2)
    model = tiny_model()
    retired = np.arange(16) >= 4
    state = dict(step=0, retired=retired.copy(), flops_model=FlopsModel(model))
    train_module.sample_round(cfg, model, TOK, pool, state, 0, torch.device("cpu"), 0, 1)
    assert state["retired"].tolist() == retired.tolist()


def test_the_paper_presets_take_their_papers_defining_knobs():
    """What names each paper's recipe (config.PRESETS): GRPO's symmetric PPO clip and sample average with group
    std; DAPO's clip-higher (a ceiling above the floor) and token average with zero-variance filtering; CISPO's
    truncated weights; GSPO's sequence-level clip of a few 1e-4 (kills the mutant giving DAPO GRPO's symmetric
    clip, which a sweep then compared as two recipes)."""
    grpo, dapo, cispo, gspo = (make_config(name, out="unused") for name in ("grpo", "dapo", "cispo", "gspo"))
    assert (grpo.loss_type, grpo.aggregation, grpo.adv_norm, grpo.zero_var_filter) == ("ppo", "sample", "group", False)
    assert grpo.clip_low == grpo.clip_high == 0.2
    assert (dapo.loss_type, dapo.aggregation, dapo.zero_var_filter) == ("ppo", "token", True)
    assert dapo.clip_high > dapo.clip_low == 0.2
    assert (cispo.loss_type, cispo.aggregation) == ("cispo", "token")
    assert gspo.loss_type == "gspo" and gspo.clip_low < gspo.clip_high < 1e-3
