"""Tokenizers: a character tokenizer for the generated tasks, and a thin adapter for a Hugging Face one.

Both expose the same attributes (vocab_size, pad_id, bos_id, eos_id, encode, decode), which is all the
loop uses. The character vocabulary is tiny (the tasks only use digits and a few symbols), so a tiny
model spends its parameters on the task rather than on an embedding table.
"""

import os

CHARS = "0123456789+*=:scrm"  # every character the tasks in tasks.py can produce
SPECIALS = ("<pad>", "<bos>", "<eos>")
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # what a tokenizer is loaded from
# tokenizer files without those two: a tokenizer the trainer does not load (a Llama-2 style tokenizer.model
# needs sentencepiece to be converted); *.model and *.tiktoken files count too
OTHER_TOKENIZER_FILES = ("vocab.json", "merges.txt", "vocab.txt", "special_tokens_map.json")


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


def folder_tokenizer(path, vocab_size):
    """The tokenizer for the model in folder `path`, whose embedding has vocab_size rows (None: not known).

    Its own (HFTokenizer) when the folder has tokenizer.json or tokenizer_config.json; the character
    tokenizer when it has no tokenizer files at all (a tiny model built from a config). ValueError, in
    words, for what would otherwise train wrongly or crash later: other tokenizer files only (the
    character tokenizer would silently stand in for a 32k vocabulary), a tokenizer that cannot be loaded,
    one without an end-of-sequence token, ids beyond the model's vocabulary.
    """
    names = sorted(os.listdir(path))
    if any(name in HF_TOKENIZER_FILES for name in names):
        return load_hf_tokenizer(path, vocab_size)
    others = [n for n in names if n in OTHER_TOKENIZER_FILES or n.endswith((".model", ".tiktoken"))]
    if others:
        raise setting_error(lambda n: f"{n.given('model_path', path)} has tokenizer files ({', '.join(others)}) but no "
                                      "tokenizer.json or tokenizer_config.json, the only ones the trainer loads a "
                                      "tokenizer from; it would fall back to its character tokenizer. Write them with "
                                      "transformers where the tokenizer loads (AutoTokenizer.from_pretrained(source)"
                                      ".save_pretrained(model_path); a tokenizer.model needs sentencepiece)")
    tok = CharTokenizer()
    if vocab_size is not None and vocab_size < tok.vocab_size:
        raise setting_error(lambda n: f"{n.given('model_path', path)} has no tokenizer and vocab_size={vocab_size} "
                                      f"< {tok.vocab_size} characters of the character tokenizer")
    return tok


def setting_error(message):
    """config.SettingError(message): a refusal of model_path, named by its flag at the command line. Imported
    here, not at the top: config imports this module."""
    from .config import SettingError

    return SettingError(message)


def load_hf_tokenizer(path, vocab_size):
    """HFTokenizer for the folder's own tokenizer, refused in words where the loop could not use it."""
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as err:  # a converter missing (sentencepiece, tiktoken), a broken file: a traceback otherwise
        said = f"{type(err).__name__}: {err}"  # err is unbound once the except ends, before with_flags() says it
        raise setting_error(lambda n: f"{n.given('model_path', path)}: its tokenizer could not be loaded "
                                      f"({said})") from err
    if hf.eos_token_id is None:  # answers end with it, and it pads when there is no pad token
        raise setting_error(lambda n: f"{n.given('model_path', path)}: its tokenizer has no end-of-sequence token "
                                      "(eos_token); set one and save it (tokenizer.eos_token = ...; "
                                      "tokenizer.save_pretrained(model_path))")
    n_ids = max(hf.get_vocab().values()) + 1
    if vocab_size is not None and n_ids > vocab_size:  # an embedding lookup past the table: IndexError, or a CUDA assert
        raise setting_error(lambda n: f"{n.given('model_path', path)}: its tokenizer has ids up to {n_ids - 1}, "
                                      f"beyond the model's vocab_size={vocab_size}")
    return HFTokenizer(hf)
