"""trainer_minimal's tiny GPT against a forward pass written out by hand: per-head softmax attention over the
earlier real tokens only, learned positions counted from <bos>, pre-LayerNorm blocks, a final LayerNorm and an
untied head. The sampler and the trainer both score tokens with this forward, and the rollout tests compare it
with itself on last tokens, so a model that looks ahead passed them while training on nonsense. Also what
model.py hands the rest of the trainer: the attention width of the FLOPs model, the model folder's fingerprint in
the warm-start cache key, and the seeded initial weights."""

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from trainer_minimal import make_config
from trainer_minimal.model import (
    TinyGPT,
    attention_shape,
    build_policy,
    forward_logits,
    model_folder_fingerprint,
    tiny_gpt_parameters,
)
from trainer_minimal.rollout import left_pad
from trainer_minimal.tokenizer import CharTokenizer

TOK = CharTokenizer()
PROMPTS = ["12+3=", "9=", "s312:"]  # unequal lengths: the shorter ones are left-padded


def tiny_model():
    torch.manual_seed(0)
    model = TinyGPT(TOK.vocab_size, n_layer=2, n_head=2, d_model=16)
    with torch.no_grad():  # weights well away from the 0.02 init, so every term shows in the logits
        for p in model.parameters():
            p.normal_(0, 0.5)
    return model


def logits_by_hand(model, ids):
    """Logits of one unpadded sequence (a list of ids starting with <bos>), a token and a head at a time."""
    n, d = len(ids), model.d_model
    x = [model.tok_emb.weight[t] + model.pos_emb.weight[pos] for pos, t in enumerate(ids)]
    for block in model.blocks:
        n_head = block.n_head
        hd = d // n_head
        qkv = [block.qkv(F.layer_norm(v, (d,), block.ln1.weight, block.ln1.bias)) for v in x]
        q, k, v = ([row[j * d:(j + 1) * d] for row in qkv] for j in range(3))
        attended = []
        for t in range(n):
            heads = []
            for h in range(n_head):
                part = slice(h * hd, (h + 1) * hd)
                scores = torch.stack([q[t][part] @ k[s][part] / math.sqrt(hd) for s in range(t + 1)])  # s <= t only
                weights = torch.softmax(scores, dim=0)
                heads.append(sum(weights[s] * v[s][part] for s in range(t + 1)))
            attended.append(torch.cat(heads))
        x = [x[t] + block.proj(attended[t]) for t in range(n)]
        x = [v + block.mlp(F.layer_norm(v, (d,), block.ln2.weight, block.ln2.bias)) for v in x]
    return torch.stack([model.lm_head(F.layer_norm(v, (d,), model.ln_f.weight, model.ln_f.bias)) for v in x])


def test_the_logits_of_a_left_padded_batch_are_each_prompt_s_own_worked_by_hand():
    """Each real token's logits are those of the forward by hand on its prompt alone: attention looks back,
    never ahead, and never at padding; positions count from <bos>, not from the padded row's start; the
    heads are put back side by side; the final LayerNorm is applied. Kills the mutant that dropped the causal
    mask, which the sampling tests let through: they score a sequence's last token, which sees every key."""
    model = tiny_model()
    seqs = [TOK.encode(p) for p in PROMPTS]
    ids, mask = left_pad(seqs, TOK.pad_id)
    with torch.no_grad():
        logits, _ = forward_logits(model, ids, mask)
        for i, seq in enumerate(seqs):
            real = logits[i, ids.shape[1] - len(seq):]
            torch.testing.assert_close(real, logits_by_hand(model, seq), rtol=1e-4, atol=1e-4)
    assert torch.isfinite(logits).all()  # the padding's own rows too: they are never all masked


def test_a_token_s_logits_do_not_change_with_the_tokens_after_it():
    """Causality without the forward by hand: changing the last token changes no earlier token's logits."""
    model = tiny_model()
    a, b = TOK.encode("12+3=4"), TOK.encode("12+3=7")
    with torch.no_grad():
        la, _ = forward_logits(model, torch.tensor([a]), torch.ones(1, len(a), dtype=torch.long))
        lb, _ = forward_logits(model, torch.tensor([b]), torch.ones(1, len(b), dtype=torch.long))
    torch.testing.assert_close(la[0, :-1], lb[0, :-1], rtol=0, atol=0)
    assert not torch.allclose(la[0, -1], lb[0, -1])


def test_decoding_with_the_kv_cache_gives_the_logits_of_the_whole_sequence():
    """Prefill a left-padded batch, then feed one token at a time with the cache: each step's logits are those
    of a forward over the whole sequence so far (the new query sits after the cached keys, at the next
    position)."""
    model = tiny_model()
    ids, mask = left_pad([TOK.encode(p) for p in PROMPTS], TOK.pad_id)
    extra = torch.tensor([[4, 5], [6, 7], [8, 9]])
    with torch.no_grad():
        _, cache = forward_logits(model, ids, mask, use_cache=True)
        for t in range(extra.shape[1]):
            ids, mask = torch.cat([ids, extra[:, t:t + 1]], 1), torch.cat([mask, torch.ones(3, 1, dtype=torch.long)], 1)
            step, cache = forward_logits(model, extra[:, t:t + 1], mask, cache=cache, use_cache=True)
            whole, _ = forward_logits(model, ids, mask)
            torch.testing.assert_close(step[:, 0], whole[:, -1], rtol=1e-5, atol=1e-5)


def test_attention_shape_reads_a_head_dim_of_the_model_s_own():
    """d_attn of the FLOPs model is heads x head_dim: Gemma-style configs set a head_dim other than
    hidden_size / heads, and the attention term then counts that width (kills the mutant that took
    hidden_size / heads whatever head_dim says)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                      num_attention_heads=2, num_key_value_heads=1, head_dim=8)
    assert attention_shape(SimpleNamespace(config=config)) == (3, 2 * 8)
    config.head_dim = None  # not given: hidden_size / heads
    assert attention_shape(SimpleNamespace(config=config)) == (3, 32)
    assert attention_shape(TinyGPT(TOK.vocab_size, n_layer=2, n_head=4, d_model=16)) == (2, 16)


def test_a_model_folder_s_fingerprint_reads_its_tokenizer_and_the_windows_of_a_large_file(tmp_path):
    """The warm-start cache key's digest of a model folder changes with a tokenizer file's content, with a
    byte of a large weights file inside one of its windows however far into the file (the last window ends
    at the file's end), and with a file's name (the same bytes as another file the loader reads otherwise);
    not with files it does not read (kills the mutants that skipped tokenizer files, read every window from
    the file's start, or left the names out or the .bin weights)."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "tokenizer.json").write_text('{"vocab": "abc"}')
    (folder / "model.safetensors").write_bytes(bytes(1000))

    def fingerprint():  # files over 100 bytes are read in 4 windows of 10 bytes: 0-10, 330-340, 660-670, 990-1000
        return model_folder_fingerprint(str(folder), whole_up_to=100, windows=4, window=10)

    def changed(name, at, value=b"\x01"):
        before = fingerprint()
        data = bytearray((folder / name).read_bytes())
        old = data[at:at + len(value)]
        data[at:at + len(value)] = value
        (folder / name).write_bytes(bytes(data))
        after = fingerprint()
        data[at:at + len(value)] = old
        (folder / name).write_bytes(bytes(data))
        assert fingerprint() == before
        return after != before

    assert changed("tokenizer.json", 11, b"x")
    assert changed("model.safetensors", 999) and changed("model.safetensors", 665)
    (folder / "pytorch_model.bin").write_bytes(bytes(50))  # weights saved without safetensors: read whole
    assert changed("pytorch_model.bin", 25)
    assert not changed("model.safetensors", 500)  # between windows: the price of reading 1 MiB of a 5 GB shard
    before = fingerprint()
    (folder / "README.md").write_text("not read")
    assert fingerprint() == before
    (folder / "tokenizer.json").rename(folder / "tokenizer_config.json")
    assert fingerprint() != before


def test_the_tiny_gpt_s_initial_weights_are_its_init_seed_s():
    """build_policy seeds the initialisation: the warm start trains from it, so a run's first warm start
    (nothing cached yet) and every rank's model must not depend on what drew random numbers before (kills the
    mutant that dropped the seeding)."""
    cfg = make_config("scalerl", n_layer=1, n_head=2, d_model=16)

    def weights(seed):
        torch.rand(7)  # whatever ran before
        model, tok = build_policy(cfg, init_seed=seed)
        assert isinstance(tok, CharTokenizer)
        return model.state_dict()

    first, again, other = weights(7), weights(7), weights(8)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not torch.equal(first["tok_emb.weight"], other["tok_emb.weight"])


@pytest.mark.parametrize("n_layer, d_model", [(1, 8), (2, 64), (3, 48)])
def test_the_tiny_gpt_s_parameter_count_is_that_of_the_model_built(n_layer, d_model):
    """The memory check before a run counts the parameters without building the model (train.memory_estimate)."""
    vocab = CharTokenizer().vocab_size
    built = TinyGPT(vocab, n_layer, 4, d_model)
    assert tiny_gpt_parameters(vocab, n_layer, d_model) == sum(p.numel() for p in built.parameters())
