"""trainer_minimal's tokenizers with known answers: the character tokenizer's ids, what decode keeps and where
it stops, the Hugging Face adapter's <bos>, <eos> and padding, and which model folders' tokenizers are refused.
A reward is exact match on the decoded text, so a decode that keeps a special token or reads past <eos> fails
(or passes) every sample without an error anywhere."""

import numpy as np
import pytest

from trainer_minimal.tasks import make_problem
from trainer_minimal.tokenizer import CharTokenizer, HFTokenizer, folder_tokenizer

TOK = CharTokenizer()
TASKS = ("add", "mul", "sort", "rev", "max", "count")


def test_the_character_tokenizer_s_ids_by_hand():
    """<pad> 0, <bos> 1, <eos> 2, then the characters in order: '0' is 3, '+' 13, '=' 15, 'm' 20."""
    assert (TOK.pad_id, TOK.bos_id, TOK.eos_id, TOK.vocab_size) == (0, 1, 2, 21)
    assert TOK.encode("12+3=") == [1, 4, 5, 13, 6, 15]
    assert TOK.encode_answer("42") == [7, 5, 2]
    assert TOK.encode("m9=") == [1, 20, 12, 15]


def test_decode_is_encode_s_inverse_on_every_task_s_prompts_and_answers():
    rng = np.random.default_rng(0)
    for task in TASKS:
        for size in (1, 3):
            prompt, answer = make_problem(rng, task, size)
            assert TOK.decode(TOK.encode(prompt)) == prompt
            assert TOK.decode(TOK.encode_answer(answer)) == answer


def test_decode_drops_padding_and_bos_and_stops_at_the_first_eos():
    """A sampled completion is its tokens up to <eos>; what follows (padding, or tokens drawn after it) is not
    part of the answer graded (kills the mutants that kept <bos> or read on past <eos>)."""
    assert TOK.decode([0, 0, 1, 4, 5]) == "12"
    assert TOK.decode([7, 5, 2, 6, 2, 0]) == "42"
    assert TOK.decode([2, 7]) == ""


def test_a_character_the_tasks_never_produce_is_an_error_not_skipped():
    """Skipped, 'a1+2=' would be asked as '1+2=': a prompt the task did not write."""
    with pytest.raises(KeyError, match="'a'"):
        TOK.encode("a1+2=")


def hf_character_tokenizer(pad_token="<pad>"):
    """A Hugging Face tokenizer with the character tokenizer's vocabulary (ids alike), built here, nothing
    downloaded (pad_token None: one without a pad token)."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel(dict(zip(TOK.itos, range(TOK.vocab_size), strict=True)), unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")  # one token per character
    tokenizer.decoder = decoders.Fuse()
    specials = dict(bos_token="<bos>", eos_token="<eos>", **({"pad_token": pad_token} if pad_token else {}))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, **specials)


def test_the_hugging_face_adapter_adds_bos_and_eos_once_and_decodes_up_to_eos():
    """Its ids as the character tokenizer's; decode stops at <eos> as CharTokenizer.decode does, so text
    after it (drawn after the sample ended) is not graded (kills the mutants reading past <eos> and dropping
    <bos>); without a pad token it pads with <eos>, an id the model knows (kills the mutant padding with 0)."""
    tok = HFTokenizer(hf_character_tokenizer())
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.vocab_size) == (0, 1, 2, 21)
    assert tok.encode("12+3=") == TOK.encode("12+3=")
    assert tok.encode_answer("42") == TOK.encode_answer("42")
    assert tok.decode([7, 5, 2, 6, 6]) == "42"
    assert tok.decode([1, 4, 5]) == "12"
    assert HFTokenizer(hf_character_tokenizer(pad_token=None)).pad_id == 2


def test_which_model_folders_tokenizers_are_refused(tmp_path):
    """No tokenizer files: the character tokenizer, for an embedding of at least its 21 rows (21 is enough,
    20 is not); a tokenizer of its own: ids up to 20 fit 21 rows, not 20; other tokenizer files alone (a
    tiktoken file as much as a sentencepiece tokenizer.model) are refused, not run on characters."""
    bare = tmp_path / "bare"
    bare.mkdir()
    assert isinstance(folder_tokenizer(str(bare), 21), CharTokenizer)
    with pytest.raises(ValueError, match="no tokenizer and vocab_size=20 < 21 characters"):
        folder_tokenizer(str(bare), 20)
    own = tmp_path / "own"
    hf_character_tokenizer().save_pretrained(own)
    assert isinstance(folder_tokenizer(str(own), 21), HFTokenizer)
    with pytest.raises(ValueError, match="ids up to 20, beyond the model's vocab_size=20"):
        folder_tokenizer(str(own), 20)
    tiktoken = tmp_path / "tiktoken"
    tiktoken.mkdir()
    (tiktoken / "tokenizer.tiktoken").write_text("IQ== 0\n")
    with pytest.raises(ValueError, match=r"has tokenizer files \(tokenizer.tiktoken\) but no tokenizer.json"):
        folder_tokenizer(str(tiktoken), 21)
