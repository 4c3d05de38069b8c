"""The policy: a tiny decoder-only transformer, or a Hugging Face causal LM from a local folder.

Both are driven through one function, forward_logits(), which takes left-padded token ids, an
attention mask over all keys (cached and new) and an optional KV cache, and returns logits. It is
also where the FP32 LM head lives: the hidden state may come out of a bfloat16 autocast region,
but with fp32_logits the last matmul and the softmax after it run in float32, which keeps the
sampler's and the trainer's token probabilities close (ScaleRL's "FP32 precision at the LM head").
Applying the head here bypasses what a Hugging Face model's own forward does after it: Gemma 2's
logit softcap is redone here; a model that does something else is refused (check_own_logits).
"""

import contextlib
import functools
import hashlib
import inspect
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import SOFTCAP_FIELD, SettingError
from .tokenizer import OTHER_TOKENIZER_FILES, CharTokenizer, folder_tokenizer

ARCHITECTURE = "tiny-gpt-1"  # part of the warm-start cache key: bump when TinyGPT changes
MAX_POSITIONS = 64  # learned positions; prompts are <= 16 tokens and generations short


class Block(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x, key_mask, kv=None):
        # x (B, Tq, D); key_mask (B, Tk) bool, True for real tokens; kv: cached (k, v) of Tk - Tq keys
        B, Tq, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (t.view(B, Tq, self.n_head, D // self.n_head).transpose(1, 2) for t in (q, k, v))
        if kv is not None:
            k, v = torch.cat([kv[0], k], dim=2), torch.cat([kv[1], v], dim=2)  # (B, H, Tk, hd)
        Tk = k.shape[2]
        query_pos = torch.arange(Tq, device=x.device)[:, None] + (Tk - Tq)
        key_pos = torch.arange(Tk, device=x.device)[None, :]
        # causal and not padding; every query may see itself, so a left-pad row is never all masked
        # (an all-masked row gives NaN, which would then leak into real rows through the values)
        allowed = ((key_pos <= query_pos) & key_mask[:, None, None, :]) | (key_pos == query_pos)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # (B, H, Tq, hd)
        x = x + self.proj(y.transpose(1, 2).reshape(B, Tq, D))
        x = x + self.mlp(self.ln2(x))
        return x, (k, v)


class TinyGPT(nn.Module):
    """GPT-2 style: learned positions, pre-LayerNorm blocks, untied LM head.

    Learned absolute positions rather than rotary ones: positions count real tokens from <bos>,
    and on these short prompts they were learnt faster (rotary was tried; reversal learnt slower).
    """

    def __init__(self, vocab_size, n_layer, n_head, d_model):
        super().__init__()
        self.n_layer, self.d_model = n_layer, d_model
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(MAX_POSITIONS, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def hidden(self, ids, key_mask, positions, cache=None):
        # ids (B, Tq); key_mask (B, Tk); positions (B, Tq) -> hidden (B, Tq, D), new cache
        x = self.tok_emb(ids) + self.pos_emb(positions)
        new_cache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, key_mask, None if cache is None else cache[i])
            new_cache.append(kv)
        return self.ln_f(x), new_cache


def tiny_gpt_parameters(vocab_size, n_layer, d_model):
    """How many parameters TinyGPT(vocab_size, n_layer, _, d_model) has, without building it (the memory
    check before a run, train.check_memory_fits, for sizes that could not be built): its two embeddings
    and untied head, and per block two LayerNorms, the qkv and output projections and the 4x MLP."""
    per_block = 2 * 2 * d_model + (3 * d_model * d_model + 3 * d_model) + (d_model * d_model + d_model) \
        + (4 * d_model * d_model + 4 * d_model) + (4 * d_model * d_model + d_model)
    return 2 * vocab_size * d_model + MAX_POSITIONS * d_model + n_layer * per_block + 2 * d_model


def forward_logits(model, ids, attn_mask, cache=None, use_cache=False, fp32_logits=False, dtype="float32"):
    """Logits for the new tokens `ids` (B, Tq) given attn_mask (B, Tk) over cached + new tokens.

    Positions count only real tokens, so left padding does not shift them. Returns
    (logits (B, Tq, V), cache or None); logits are float32 when fp32_logits, else the compute dtype.
    """
    Tq = ids.shape[1]
    positions = (attn_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -Tq:]
    device_type = ids.device.type
    autocast = torch.autocast(device_type, dtype=torch.bfloat16, enabled=dtype == "bfloat16")
    with autocast:
        if isinstance(model, TinyGPT):
            h, new_cache = model.hidden(ids, attn_mask.bool(), positions, cache)
            head = model.lm_head
        else:  # Hugging Face: run the backbone, apply the head ourselves (for the fp32 option)
            name = hf_cache_argument(type(model.base_model))
            out = model.base_model(input_ids=ids, attention_mask=attn_mask.long(), position_ids=positions,
                                   use_cache=use_cache, **{name: cache})
            h, new_cache = out.last_hidden_state, getattr(out, name)
            head = model.get_output_embeddings()
        with torch.autocast(device_type, enabled=False) if fp32_logits else contextlib.nullcontext():
            if fp32_logits:
                bias = None if head.bias is None else head.bias.float()
                logits = F.linear(h.float(), head.weight.float(), bias)
            else:
                logits = head(h)
            cap = None if isinstance(model, TinyGPT) else getattr(model.config.get_text_config(), SOFTCAP_FIELD, None)
            if cap:  # what the model's own forward does after its head (Gemma 2): logits into (-cap, cap)
                logits = torch.tanh(logits / cap) * cap
    return logits, (new_cache if use_cache else None)


@functools.cache
def hf_cache_argument(backbone_class):
    """The KV-cache argument's name: `cache` in transformers >= 5.x, `past_key_values` before."""
    return "cache" if "cache" in inspect.signature(backbone_class.forward).parameters else "past_key_values"


def build_policy(cfg, init_seed):
    """(model, tokenizer) for the config: the tiny GPT, or the local Hugging Face model in model_path."""
    if not cfg.model_path:
        tok = CharTokenizer()
        torch.manual_seed(init_seed)
        return TinyGPT(tok.vocab_size, cfg.n_layer, cfg.n_head, cfg.d_model), tok
    return load_hf_policy(cfg.model_path)


def load_hf_policy(path):
    """A causal LM from a local folder; nothing is downloaded (local_files_only).

    The folder's own tokenizer is used when it has one; a folder without tokenizer files (e.g. a
    tiny model built from a config) uses the character tokenizer (tokenizer.folder_tokenizer).
    """
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    model.eval()  # no dropout: the sampler and the trainer must see the same policy
    check_own_logits(model, path)
    return model, folder_tokenizer(path, model.get_input_embeddings().num_embeddings)


# config fields that hold a model's position count, in the order they are named when one matches its table
POSITION_FIELDS = ("n_positions", "max_position_embeddings", "n_ctx")


@functools.cache  # a sweep checks every run's config, all with one model folder
def learned_positions(path):
    """(n, said) for the model in folder `path`: the n positions of its learned position table (GPT-2's
    wpe, OPT's embed_positions), past which its position lookup fails (IndexError: index out of range in
    self), and how to name them; None for a model without one (rotary, ALiBi: its max_position_embeddings
    is no hard limit). Read from the model built on the meta device, so no weights are loaded."""
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(config)
    except Exception:  # a model the probe cannot build: the loader says why in its own words, or runs it
        return None
    words = model.get_input_embeddings()
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if isinstance(module, nn.Embedding) and module is not words and ("pos" in leaf or leaf == "wpe"):
            n = module.num_embeddings - getattr(module, "offset", 0)  # OPT's table has 2 rows before position 0
            text_config = config.get_text_config()
            field = next((f for f in POSITION_FIELDS if getattr(text_config, f, None) == n), None)
            return n, f"its {field}={n}" if field else f"its {name}"
    return None


def model_folder_fingerprint(path, whole_up_to=16 << 20, windows=256, window=4096):
    """A digest of what in a model folder decides its warm start, for the warm-start cache key: keyed
    by the path alone, a folder replaced by another model of the same shape loaded the old model's warm
    start, silently. config.json and the tokenizer files are read whole; so is a weights file up to
    16 MiB, and a larger one by `windows` evenly spaced 4 KiB windows (1 MiB read of a 5 GB shard).
    Its name and size alone would not do: a model of the same shape has the same config and sizes.
    The content, not the modification time, so every rank and a copy of the folder agree."""
    digest = hashlib.sha256()
    for name in sorted(os.listdir(path)):
        file = os.path.join(path, name)
        wanted = (name == "config.json" or name.startswith("tokenizer") or name in OTHER_TOKENIZER_FILES
                  or name.endswith((".safetensors", ".bin")))
        if not wanted or not os.path.isfile(file):
            continue
        size = os.path.getsize(file)
        digest.update(f"{name}\0{size}\0".encode())
        with open(file, "rb") as f:
            if size <= whole_up_to:
                digest.update(f.read())
                continue
            for i in range(windows):
                f.seek(i * (size - window) // (windows - 1))
                digest.update(f.read(window))
    return digest.hexdigest()


@torch.no_grad()
def check_own_logits(model, path, tolerance=1e-4):
    """Refuse a model whose own forward gives other logits than forward_logits, which runs the backbone
    and applies the LM head itself: a model that changes its logits after the head in a way forward_logits
    does not redo (config.check_model_path refuses the fields known to) would be sampled and trained on
    logits that are not its own, silently. One forward of a few tokens, in float32, on the CPU. Refused as a
    config.SettingError: at the command line it names --model-path (train.run_training)."""
    n_vocab = model.get_input_embeddings().num_embeddings
    ids = (torch.arange(1, 7) % n_vocab)[None]
    mask = torch.ones_like(ids)
    own = model(input_ids=ids, attention_mask=mask).logits.float()
    ours, _ = forward_logits(model, ids, mask, fp32_logits=True)
    gap = (own - ours).abs().max().item()
    if gap > tolerance * max(1.0, own.abs().max().item()):
        fields = {k: v for k, v in model.config.get_text_config().to_dict().items()
                  if ("logit" in k or "lm_head" in k) and not any(w in k for w in ("attn", "attention", "router"))}
        raise SettingError(lambda n: f"{n.given('model_path', path)}: the model's own logits differ from the trainer's "
                                     f"(LM head on the backbone's output) by up to {gap:.3g}; its forward changes the "
                                     f"logits after the head in a way the trainer does not redo (its config's logit "
                                     f"fields: {fields or 'none'})")


def save_untrained_llama(folder, hidden_size=64, n_layer=2, n_head=4, seed=0):
    """A Llama-architecture causal LM with random weights, built from a config and saved to folder:
    the Hugging Face path (--model-path) where no model hub can be reached. It has no tokenizer
    files, so the trainer uses its character tokenizer; the warm start then teaches it the tasks."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=CharTokenizer().vocab_size, hidden_size=hidden_size,
                         intermediate_size=4 * hidden_size, num_hidden_layers=n_layer,
                         num_attention_heads=n_head, num_key_value_heads=max(1, n_head // 2),
                         max_position_embeddings=MAX_POSITIONS)
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(folder)
    return str(folder)


def attention_shape(model):
    """(n_layer, d_attn) for the attention term of the FLOPs model."""
    if isinstance(model, TinyGPT):
        return model.n_layer, model.d_model
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return c.num_hidden_layers, c.num_attention_heads * head_dim
