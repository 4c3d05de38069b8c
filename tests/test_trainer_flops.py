"""The FLOPs model of trainer_minimal.flops against torch's FlopCounterMode (within 10%)."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from trainer_minimal.flops import FlopsModel, matmul_params
from trainer_minimal.model import TinyGPT
from trainer_minimal.rollout import generate, left_pad, sampling_noise, score
from trainer_minimal.tokenizer import CharTokenizer

TOK = CharTokenizer()


def counted(fn):
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def batch(n=6, prompt_len=9, completion_len=5):
    g = torch.Generator().manual_seed(0)
    prompts = [[TOK.bos_id] + torch.randint(3, TOK.vocab_size, (prompt_len - i % 3,), generator=g).tolist()
               for i in range(n)]
    prompt_ids, prompt_mask = left_pad(prompts, TOK.pad_id)
    completion = torch.randint(3, TOK.vocab_size, (n, completion_len), generator=g)
    return prompt_ids, prompt_mask, completion, torch.ones_like(completion)


def tiny_gpt():
    torch.manual_seed(0)
    return TinyGPT(TOK.vocab_size, n_layer=2, n_head=4, d_model=64)


def tiny_llama():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=TOK.vocab_size, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def tiny_gpt2():
    """GPT-2: Conv1D layers and a head tied to the embedding, both counted as matmuls."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=TOK.vocab_size, n_embd=64, n_layer=2, n_head=4, n_positions=64)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval()


MODELS = pytest.mark.parametrize("make_model", [tiny_gpt, tiny_llama, tiny_gpt2], ids=["tiny-gpt", "hf-llama", "hf-gpt2"])


@MODELS
def test_training_flops_match_flop_counter(make_model):
    model = make_model()
    prompt_ids, prompt_mask, completion, completion_mask = batch()

    def forward_backward():
        logp, _ = score(model, prompt_ids, prompt_mask, completion, completion_mask)
        logp.sum().backward()

    measured = counted(forward_backward)
    predicted = FlopsModel(model).train(len(prompt_ids), prompt_ids.shape[1] + completion.shape[1])
    assert predicted == pytest.approx(measured, rel=0.10)


@MODELS
def test_rollout_flops_match_flop_counter(make_model):
    model = make_model()
    prompt_ids, prompt_mask, _, _ = batch()
    noise = sampling_noise(list(range(len(prompt_ids))), 1, 6)
    result = {}

    def sample():
        # eos_id -1: never stops early, so the number of decode steps is known
        result.update(generate(model, prompt_ids, prompt_mask, noise, 6, eos_id=-1, pad_id=TOK.pad_id))

    measured = counted(sample)
    predicted = FlopsModel(model).rollout(len(prompt_ids), prompt_ids.shape[1], result["decode_steps"])
    assert result["decode_steps"] == 5
    assert predicted == pytest.approx(measured, rel=0.10)


def test_matmul_params_excludes_embeddings_and_counts_a_tied_head():
    model = tiny_gpt()
    d, V = 64, TOK.vocab_size
    assert matmul_params(model) == 2 * (3 * d * d + d * d + 8 * d * d) + V * d
    model.lm_head.weight = model.tok_emb.weight  # tie: still a matmul per token
    assert matmul_params(model) == 2 * 12 * d * d + V * d
