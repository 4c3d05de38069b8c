"""Tokenizers: a character tokenizer for the generated tasks, and a thin adapter for a Hugging Face one.

Both expose the same attributes (vocab_size, pad_id, bos_id, eos_id, encode, decode), which is all the
loop uses. The character vocabulary is tiny (the tasks only use digits and a few symbols), so a tiny
model spends its parameters on the task rather than on an embedding table.
"""

CHARS = "0123456789+*=:scrm"  # every character the tasks in tasks.py can produce
SPECIALS = ("<pad>", "<bos>", "<eos>")
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # a model folder with a tokenizer has one


class CharTokenizer:
    def __init__(self, chars=CHARS):
        self.itos = list(SPECIALS) + list(chars)
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id = 0, 1, 2
        self.vocab_size = len(self.itos)

    def encode(self, text):
        """Prompt text -> ids, starting with <bos>. Unknown characters are an error, not skipped."""
        return [self.bos_id] + [self.stoi[c] for c in text]

    def encode_answer(self, text):
        """Answer text -> ids ending with <eos> (the supervised target of the warm start)."""
        return [self.stoi[c] for c in text] + [self.eos_id]

    def decode(self, ids):
        """Ids -> text, stopping at the first <eos>; special tokens are dropped."""
        out = []
        for i in ids:
            if i == self.eos_id:
                break
            if i >= len(SPECIALS):
                out.append(self.itos[i])
        return "".join(out)


class HFTokenizer:
    """Adapter so a local Hugging Face tokenizer looks like CharTokenizer to the loop."""

    def __init__(self, hf_tokenizer):
        self.hf = hf_tokenizer
        self.eos_id = hf_tokenizer.eos_token_id
        self.pad_id = hf_tokenizer.pad_token_id if hf_tokenizer.pad_token_id is not None else self.eos_id
        self.bos_id = hf_tokenizer.bos_token_id
        self.vocab_size = len(hf_tokenizer)

    def encode(self, text):
        ids = self.hf.encode(text, add_special_tokens=False)
        return ([self.bos_id] if self.bos_id is not None else []) + ids

    def encode_answer(self, text):
        return self.hf.encode(text, add_special_tokens=False) + [self.eos_id]

    def decode(self, ids):
        ids = list(ids)
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        return self.hf.decode(ids, skip_special_tokens=True).strip()
