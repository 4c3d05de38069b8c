"""trainer_minimal's sampling and grading worked by hand: the tokens generate() draws, the log-probs it keeps,
the mask of what a completion is, the reward of a completion cut off, and the temperature and the ranks'
shares of the validation set the loop hands it. A sampler at the wrong temperature, or a pass rate graded
on the wrong samples, moves every evaluation the forecaster fits without any error."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trainer_minimal.train as train_module
from trainer_minimal import make_config
from trainer_minimal.flops import FlopsModel
from trainer_minimal.model import TinyGPT, forward_logits
from trainer_minimal.rollout import generate, left_pad, sampling_noise
from trainer_minimal.tasks import make_problems
from trainer_minimal.tokenizer import CharTokenizer

TOK = CharTokenizer()
PROMPTS = ["12+3=", "9=", "s312="]  # unequal lengths: left padding
NEVER = -1  # an <eos> id no token has


def tiny_model():
    torch.manual_seed(0)
    return TinyGPT(TOK.vocab_size, n_layer=1, n_head=2, d_model=16)


def sampled(model, eos_id, temperature, gen_len=5):
    prompt_ids, prompt_mask = left_pad([TOK.encode(p) for p in PROMPTS], TOK.pad_id)
    noise = sampling_noise([11, 12, 13], 1, gen_len)
    return generate(model, prompt_ids, prompt_mask, noise, gen_len, eos_id, TOK.pad_id, temperature), noise


def test_generate_draws_each_token_by_inverse_cdf_of_the_tempered_distribution_and_keeps_its_log_prob():
    """Each token is the first whose cumulative probability under softmax(logits / T) reaches the row's
    uniform draw, and logp_old is log softmax(logits / T) of it, on an unpadded forward of the prompt and
    the tokens so far (kills the mutant sampling, and logging pi_old, at T = 1 whatever the temperature)."""
    model, temperature = tiny_model(), 0.4
    out, noise = sampled(model, NEVER, temperature)
    assert out["completion"].shape == (3, 5) and out["completion_mask"].all()
    with torch.no_grad():
        for i, prompt in enumerate(PROMPTS):
            ids = TOK.encode(prompt)
            for t in range(5):
                logits, _ = forward_logits(model, torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long))
                logp = F.log_softmax(logits[0, -1].double() / temperature, dim=-1)
                cdf = logp.exp().cumsum(0)
                token = int((cdf < float(noise[i, t])).sum())
                assert int(out["completion"][i, t]) == token, (i, t)
                assert float(out["logp_old"][i, t]) == pytest.approx(float(logp[token]), abs=1e-5), (i, t)
                ids.append(token)


def test_a_completion_is_its_tokens_up_to_and_including_its_eos():
    """completion_mask is 1 up to and including <eos> and 0 after it (padding, log-prob 0): the <eos> is a
    trained token, the decision to stop (kills the mutant that marked the <eos> itself as padding)."""
    model = tiny_model()
    free, _ = sampled(model, NEVER, 1.0)
    eos = int(free["completion"][0, 1])  # a token row 0 draws at its second step: it ends there, or before
    out, _ = sampled(model, eos, 1.0)
    for i in range(3):
        drawn = free["completion"][i].tolist()
        ends = drawn.index(eos) if eos in drawn else None
        n = out["completion"].shape[1]
        expected = [1] * n if ends is None else [1 if t <= ends else 0 for t in range(n)]
        assert out["completion_mask"][i].tolist() == expected, i
        assert out["completion"][i].tolist() == [d if m else TOK.pad_id for d, m in zip(drawn, expected, strict=False)]
        assert bool(out["finished"][i]) == (ends is not None)
        assert all(float(v) == 0.0 for v, m in zip(out["logp_old"][i], expected, strict=True) if not m)
    assert 0 < out["completion_mask"][0].sum() <= 2


def test_a_completion_cut_off_before_its_eos_fails_even_when_its_tokens_spell_the_answer():
    """gen_len 3 and the answer '432': a completion that drew 4, 3, 2 and had no room left for <eos> did not
    answer (it might have gone on), so it gets 0; the same tokens ended by <eos> get 1, and '43' ended by
    <eos> gets 0 (kills the mutant grading a completion that never finished)."""
    digits = [TOK.stoi[c] for c in "432"]
    cut_off = dict(completion=torch.tensor([digits]), finished=torch.tensor([False]))
    assert train_module.rewards_of(TOK, cut_off, ["432"]).tolist() == [0.0]
    ended = dict(completion=torch.tensor([digits + [TOK.eos_id], digits[:2] + [TOK.eos_id, TOK.pad_id]]),
                 finished=torch.tensor([True, True]))
    assert train_module.rewards_of(TOK, ended, ["432", "432"]).tolist() == [1.0, 0.0]


class GenerateRecorder:
    """Stands in for train.generate: records the temperature and the prompts it is asked to sample, and
    samples as generate does."""

    def __init__(self):
        self.temperatures, self.prompts = [], []

    def __call__(self, model, prompt_ids, prompt_mask, noise, gen_len, eos_id, pad_id, temperature, *args):
        self.temperatures.append(temperature)
        self.prompts += [TOK.decode(row) for row in prompt_ids.tolist()]
        return generate(model, prompt_ids, prompt_mask, noise, gen_len, eos_id, pad_id, temperature, *args)


def test_evaluation_and_rollouts_sample_at_the_run_s_temperature(monkeypatch):
    """The temperature is a run-defining knob of training and evaluation alike (config: 'sampling
    temperature for training and evaluation'): kills the mutants sampling either at T = 1."""
    recorder = GenerateRecorder()
    monkeypatch.setattr(train_module, "generate", recorder)
    cfg = make_config("scalerl", temperature=0.7, batch_size=4, group_size=2, off_policy_k=2, train_size=16,
                      val_samples=2, gen_len=3, out="unused")
    model, pool = tiny_model(), make_problems(0, 16, ["rev"], 1)
    train_module.evaluate(cfg, model, TOK, pool[:5], 0, torch.device("cpu"), 0, 1)
    assert recorder.temperatures == [0.7]
    state = dict(step=0, retired=np.zeros(len(pool), dtype=bool), flops_model=FlopsModel(model))
    train_module.sample_round(cfg, model, TOK, pool, state, 0, torch.device("cpu"), 0, 1)
    assert recorder.temperatures == [0.7, 0.7]


def test_the_ranks_evaluate_every_validation_prompt_once_between_them(monkeypatch):
    """Under torchrun each rank grades its own share of the validation set and the sums are all-reduced:
    each prompt val_samples times over all ranks, none twice (kills the mutant giving every rank rank 0's
    share, which graded half the prompts twice and left the others out; the two-process run of
    test_trainer_ddp.py let it through, its n_eval right on 20 prompts and its metric within 0.03)."""
    recorder = GenerateRecorder()
    monkeypatch.setattr(train_module, "generate", recorder)
    cfg = make_config("scalerl", val_samples=2, gen_len=3, out="unused")
    val = make_problems(5, 7, ["rev", "sort"], 2, unique=True)
    monkeypatch.setattr(train_module, "all_sum", lambda tensor, world: tensor)  # each rank's own sums
    n_eval = [train_module.evaluate(cfg, tiny_model(), TOK, val, 4, torch.device("cpu"), rank, 2)[1] for rank in range(2)]
    assert n_eval == [4 * cfg.val_samples, 3 * cfg.val_samples]
    assert sorted(recorder.prompts) == sorted(p["prompt"] for p in val for _ in range(cfg.val_samples))
