"""Pure-function tests of trainer_minimal.losses: identities, aggregation, advantage normalisation."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer_minimal.losses import (
    aggregation_weights,
    cispo_loss,
    group_advantages,
    gspo_loss,
    ppo_clip_loss,
    reinforce_loss,
    token_entropy,
    token_logprobs,
    zero_variance_groups,
)

P, G, L, V = 3, 4, 5, 7  # prompts, samples per prompt, completion tokens, vocabulary


def make_batch(seed=0):
    """Logits that require grad, sampled targets, a ragged mask, advantages, prompt ids."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(P * G, L, V, generator=g, requires_grad=True)
    targets = torch.randint(0, V, (P * G, L), generator=g)
    lengths = torch.randint(1, L + 1, (P * G,), generator=g)
    mask = (torch.arange(L)[None, :] < lengths[:, None]).float()
    adv = torch.randn(P * G, generator=g)
    prompt_index = torch.arange(P).repeat_interleave(G)
    return logits, targets, mask, adv, prompt_index


def grad_of(loss_fn, logits):
    logits.grad = None
    loss_fn().backward()
    return logits.grad.clone()


def aggregate(token_loss, mask, prompt_index, mode):
    return (aggregation_weights(mask, prompt_index, mode) * token_loss).sum()


# ----------------------------------------------------------------------------- loss identities


def test_on_policy_ppo_clip_gradient_equals_reinforce():
    logits, targets, mask, adv, idx = make_batch()
    for mode in ("sample", "token", "prompt"):
        def ppo(mode=mode):
            logp = token_logprobs(logits, targets)
            return aggregate(ppo_clip_loss(logp, logp.detach(), adv, 0.2, 0.28)[0], mask, idx, mode)

        def reinforce(mode=mode):
            return aggregate(reinforce_loss(token_logprobs(logits, targets), adv), mask, idx, mode)

        torch.testing.assert_close(grad_of(ppo, logits), grad_of(reinforce, logits))


def test_cispo_gradient_equals_reinforce_on_policy():
    logits, targets, mask, adv, idx = make_batch(1)

    def cispo():
        logp = token_logprobs(logits, targets)
        return aggregate(cispo_loss(logp, logp.detach(), adv, 4.0)[0], mask, idx, "token")

    def reinforce():
        return aggregate(reinforce_loss(token_logprobs(logits, targets), adv), mask, idx, "token")

    torch.testing.assert_close(grad_of(cispo, logits), grad_of(reinforce, logits))


def test_gspo_equals_grpo_when_all_ratios_are_one():
    logits, targets, mask, adv, idx = make_batch(2)

    def gspo():
        logp = token_logprobs(logits, targets)
        return aggregate(gspo_loss(logp, logp.detach(), adv, mask, 3e-4, 4e-4)[0], mask, idx, "sample")

    def grpo():
        logp = token_logprobs(logits, targets)
        return aggregate(ppo_clip_loss(logp, logp.detach(), adv, 0.2, 0.2)[0], mask, idx, "sample")

    torch.testing.assert_close(gspo(), grpo())
    torch.testing.assert_close(grad_of(gspo, logits), grad_of(grpo, logits))


def test_gspo_gradient_is_sequence_ratio_times_mean_token_gradient():
    """Off-policy, GSPO's token form has GSPO's sequence gradient: s * A * mean_t grad log pi."""
    logits, targets, mask, adv, idx = make_batch(3)
    logp_old = (token_logprobs(logits, targets) + 0.0001 * torch.randn(P * G, L)).detach()
    adv = adv.abs()  # positive advantages, ratios inside the clip range: nothing clipped

    def gspo():
        logp = token_logprobs(logits, targets)
        return aggregate(gspo_loss(logp, logp_old, adv, mask, 1.0, 1.0)[0], mask, idx, "sample")

    def sequence_objective():
        logp = token_logprobs(logits, targets)
        seq_ratio = torch.exp(((logp - logp_old) * mask).sum(1) / mask.sum(1))
        return -(seq_ratio * adv).mean()

    torch.testing.assert_close(grad_of(gspo, logits), grad_of(sequence_objective, logits))


def test_ppo_clip_drops_gradient_outside_the_trust_region_and_cispo_keeps_it():
    logp = torch.zeros(2, 1, requires_grad=True)
    logp_old = torch.log(torch.tensor([[1 / 1.5], [1 / 0.5]]))  # ratios 1.5 and 0.5
    adv = torch.tensor([1.0, -1.0])  # ratio 1.5 with A > 0 and 0.5 with A < 0: both clipped
    loss, clipped = ppo_clip_loss(logp, logp_old, adv, 0.2, 0.28)
    assert clipped.all()
    loss.sum().backward()
    assert torch.all(logp.grad == 0)

    logp.grad = None
    loss, truncated = cispo_loss(logp, torch.log(torch.tensor([[0.1], [2.0]])), adv, max_ratio=4.0)
    loss.sum().backward()  # weights: min(10, 4) = 4 and 0.5, detached
    torch.testing.assert_close(logp.grad, torch.tensor([[-4.0], [0.5]]))
    assert truncated.tolist() == [[True], [False]]


# ----------------------------------------------------------------------------- aggregation


def test_aggregation_modes_match_their_definitions():
    _, _, mask, _, idx = make_batch(4)
    token_loss = torch.randn(P * G, L)
    token = (token_loss * mask).sum() / mask.sum()
    sample = ((token_loss * mask).sum(1) / mask.sum(1)).mean()
    prompt = torch.stack([(token_loss * mask)[idx == p].sum() / mask[idx == p].sum() for p in range(P)]).mean()
    for mode, expected in (("token", token), ("sample", sample), ("prompt", prompt)):
        torch.testing.assert_close(aggregate(token_loss, mask, idx, mode), expected)


def test_aggregation_is_invariant_under_micro_batching():
    """Weights from the whole batch, then any split into micro-batches: the same gradient."""
    logits, targets, mask, adv, idx = make_batch(5)
    for mode in ("sample", "token", "prompt"):
        weights = aggregation_weights(mask, idx, mode)
        full = grad_of(lambda w=weights: (w * reinforce_loss(token_logprobs(logits, targets), adv)).sum(), logits)
        for micro in (1, 5, 7):
            logits.grad = None
            for start in range(0, P * G, micro):
                rows = slice(start, start + micro)
                loss = (weights[rows] * reinforce_loss(token_logprobs(logits[rows], targets[rows]), adv[rows])).sum()
                loss.backward()
            torch.testing.assert_close(logits.grad, full, msg=f"{mode}, micro-batch {micro}")


def test_token_mean_per_micro_batch_would_differ():
    """Why weights are global: averaging inside each micro-batch changes the token average."""
    _, _, mask, _, idx = make_batch(6)
    token_loss = torch.randn(P * G, L)
    whole = aggregate(token_loss, mask, idx, "token")
    halves = [slice(0, 5), slice(5, P * G)]
    per_micro = sum(aggregate(token_loss[h], mask[h], idx[h], "token") for h in halves) / 2
    assert not torch.allclose(whole, per_micro)


def test_global_normalisers_split_a_batch_across_ranks():
    """Two 'ranks' with the global token count give the single-process weights."""
    _, _, mask, _, idx = make_batch(7)
    whole = aggregation_weights(mask, idx, "token")
    parts = [aggregation_weights(mask[r], idx[r], "token", n_tokens=mask.sum()) for r in (slice(0, 4), slice(4, None))]
    torch.testing.assert_close(torch.cat(parts), whole)


# ----------------------------------------------------------------------------- advantages


def test_advantage_normalisations():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    group = group_advantages(rewards, "group")
    torch.testing.assert_close(group.mean(1), torch.zeros(3))
    torch.testing.assert_close(group[[0, 2]].std(1), torch.ones(2), atol=1e-4, rtol=0)
    assert torch.all(group[1] == 0)  # zero-variance group: no signal
    batch = group_advantages(rewards, "batch")
    torch.testing.assert_close(batch.std(), torch.tensor(1.0), atol=1e-4, rtol=0)
    none = group_advantages(rewards, "none")
    torch.testing.assert_close(none, rewards - rewards.mean(1, keepdim=True))
    # batch scaling keeps the ratio between groups; group scaling does not
    torch.testing.assert_close(batch[0] / batch[2, 3], none[0] / none[2, 3])
    assert zero_variance_groups(rewards).tolist() == [False, True, False]


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=4, max_size=4), min_size=1, max_size=6),
    st.floats(0.5, 10.0),
    st.floats(-3.0, 3.0),
)
def test_advantages_are_invariant_to_affine_reward_changes(rows, scale, shift):
    rewards = torch.tensor(rows)
    for norm in ("group", "batch"):
        torch.testing.assert_close(group_advantages(rewards * scale + shift, norm, eps=0.0).nan_to_num(),
                                   group_advantages(rewards, norm, eps=0.0).nan_to_num(), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(group_advantages(rewards + shift, "none"), group_advantages(rewards, "none"),
                               atol=1e-5, rtol=0)


def test_batch_std_counts_only_the_prompts_kept():
    """Zero-variance filtering drops a prompt from the batch, so from the batch std too: an informative
    prompt's advantages do not grow with the number of all-pass / all-fail prompts beside it."""
    informative = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    alone = group_advantages(informative, "batch")
    for n_flat in (1, 6):
        rewards = torch.cat([informative, torch.ones(n_flat, 4), torch.zeros(n_flat, 4)])
        keep = ~zero_variance_groups(rewards)
        adv = group_advantages(rewards, "batch", keep=keep)
        torch.testing.assert_close(adv[:2], alone)  # counted, the flat rows' zeros scaled these by ~1.5 and ~2.8
        torch.testing.assert_close(adv[keep].std(), torch.tensor(1.0), atol=1e-4, rtol=0)
        assert torch.all(adv[2:] == 0)
    everything_flat = torch.cat([torch.ones(2, 4), torch.zeros(2, 4)])
    assert torch.all(group_advantages(everything_flat, "batch", keep=~zero_variance_groups(everything_flat)) == 0)


# ----------------------------------------------------------------------------- logged numbers, by hand


def test_ppo_clip_flag_marks_only_tokens_where_the_clip_wins():
    """clip_frac counts tokens whose clipped branch won. Ratios 1.1 (inside), 1.5 and 0.5 with both signs of A,
    and A = 0: only 1.5 with A > 0 and 0.5 with A < 0 are clipped (kills the mutant flagging ties with >=,
    which counted every token inside the trust region as clipped)."""
    ratios = torch.tensor([1.1, 1.5, 0.5, 1.5, 0.5, 1.5])
    adv = torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, 0.0])
    logp = torch.zeros(6, 1)
    loss, clipped = ppo_clip_loss(logp, -torch.log(ratios)[:, None], adv, 0.2, 0.28)
    assert clipped[:, 0].tolist() == [False, True, False, False, True, False]
    torch.testing.assert_close(loss[:, 0], torch.tensor([-1.1, -1.28, -0.5, 1.5, 0.8, 0.0]))


def test_token_entropy_known_answers():
    """Uniform over V tokens: log V; a near one-hot: about 0; two equal tokens: log 2 (kills a sign flip)."""
    logits = torch.tensor([[[0.0] * V, [50.0] + [0.0] * (V - 1), [0.0, 0.0] + [-1e4] * (V - 2)]])
    entropy = token_entropy(logits)
    torch.testing.assert_close(entropy, torch.tensor([[float(torch.log(torch.tensor(float(V)))), 0.0, 0.6931472]]),
                               atol=1e-5, rtol=1e-5)


def test_token_logprobs_of_bfloat16_logits_are_float32():
    """log_softmax runs in float32, as documented: bfloat16 logits give float32 log-probs equal to those of the
    float32 logits (kills the mutant running log_softmax in bfloat16, off by ~1e-2)."""
    g = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(2, 3, 50, generator=g)).to(torch.bfloat16)
    targets = torch.randint(0, 50, (2, 3), generator=g)
    got = token_logprobs(logits, targets)
    assert got.dtype == torch.float32
    expected = torch.log_softmax(logits.double(), dim=-1).gather(-1, targets[..., None])[..., 0].float()
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_sample_and_prompt_averages_leave_out_samples_and_prompts_with_no_tokens():
    """Masks by hand: samples with 2, 1 and 0 tokens, prompts [0, 0, 1]. Sample average over the 2 samples with
    tokens: weights 1/(2*2) and 1/(1*2); prompt average over the 1 prompt with tokens: 1/3 each (kills the
    mutants counting the empty sample or the empty prompt in the denominator)."""
    mask = torch.tensor([[1, 1], [1, 0], [0, 0]])
    idx = torch.tensor([0, 0, 1])
    torch.testing.assert_close(aggregation_weights(mask, idx, "sample"),
                               torch.tensor([[0.25, 0.25], [0.5, 0.0], [0.0, 0.0]]))
    torch.testing.assert_close(aggregation_weights(mask, idx, "prompt"),
                               torch.tensor([[1 / 3, 1 / 3], [1 / 3, 0.0], [0.0, 0.0]]))
    torch.testing.assert_close(aggregation_weights(mask, idx, "token"),
                               torch.tensor([[1 / 3, 1 / 3], [1 / 3, 0.0], [0.0, 0.0]]))
