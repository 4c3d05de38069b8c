"""Compute accounting: FLOPs of the passes the loop actually runs.

A forward pass over n_query new tokens that attend to n_key keys costs
    2 * N * n_query                                 (every matmul weight: multiply + add per token)
  + 4 * n_layer * d_attn * n_query * n_key          (q.k scores and the weighted sum of values)
where N counts the weights of all matmuls, LM head included, embedding lookups excluded. The
attention term counts the full score matrix, as dense attention computes it (causal masking does
not skip work). A backward pass costs twice the forward, so a trained token costs ~6N and a
generated or re-scored token ~2N, plus attention. Evaluation is not training compute and is not
counted. tests/test_trainer_flops.py checks these numbers against torch's FlopCounterMode.
"""

import torch.nn as nn

from .model import TinyGPT, attention_shape


def matmul_params(model):
    """N: weights of every matmul (linear layers and the LM head), embeddings excluded."""
    embedding_ids = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    n = sum(p.numel() for p in model.parameters() if p.dim() == 2 and id(p) not in embedding_ids)
    head = model.lm_head.weight if isinstance(model, TinyGPT) else model.get_output_embeddings().weight
    if id(head) in embedding_ids:  # tied head: its storage is the embedding, its use is a matmul
        n += head.numel()
    return n


def forward_flops(n_params, n_layer, d_attn, n_query, n_key):
    """FLOPs of one sequence's forward over n_query new tokens attending to n_key keys."""
    return 2 * n_params * n_query + 4 * n_layer * d_attn * n_query * n_key


class FlopsModel:
    """The three numbers above, taken from a model once."""

    def __init__(self, model):
        self.n_params = matmul_params(model)
        self.n_layer, self.d_attn = attention_shape(model)

    def forward(self, n_seqs, n_query, n_key):
        return n_seqs * forward_flops(self.n_params, self.n_layer, self.d_attn, n_query, n_key)

    def rollout(self, n_seqs, prompt_width, decode_steps):
        """Prefill of the left-padded prompts, then one token per decode step with the KV cache."""
        flops = self.forward(n_seqs, prompt_width, prompt_width)
        for s in range(1, decode_steps + 1):
            flops += self.forward(n_seqs, 1, prompt_width + s)
        return flops

    def train(self, n_seqs, width):
        """Forward and backward over n_seqs sequences of `width` tokens (prompt + completion)."""
        return 3 * self.forward(n_seqs, width, width)
