"""Tests for snippets/run/tokenizer.py: round trips, the BPE merge loop, bad input."""

import itertools
import re

import pytest
import torch

from snippets.run.corpus import guide_text
from snippets.run.tokenizer import (
    BPETokenizer,
    CharTokenizer,
    merge_pair,
    pair_counts,
    train_bpe,
)

TEXT = guide_text()
# Small enough that training takes a fraction of a second on 2 cores.
BPE_TRAIN = TEXT[:3000]
BPE_VOCAB = 300


@pytest.fixture(scope="module")
def bpe() -> BPETokenizer:
    return BPETokenizer.train(BPE_TRAIN, BPE_VOCAB)


# --- character tokenizer ----------------------------------------------------------------


def test_char_round_trip_whole_text():
    char = CharTokenizer.from_text(TEXT)
    assert char.decode(char.encode(TEXT)) == TEXT


def test_char_vocabulary_is_sorted_set_of_characters():
    char = CharTokenizer.from_text("hello world")
    assert char.chars == " dehlorw"
    assert char.vocab_size == 8
    assert char.encode("hello") == [3, 2, 4, 4, 5]


def test_char_decode_accepts_integer_tensor():
    char = CharTokenizer.from_text(TEXT)
    ids = char.encode("attention")
    assert char.decode(torch.tensor(ids)) == "attention"


def test_char_unknown_character_names_it_and_its_position():
    char = CharTokenizer.from_text("abc ")
    message = "character 'Z' at position 4 is not in the vocabulary (4 characters"
    with pytest.raises(ValueError, match=re.escape(message)):
        char.encode("abc Zebra")


def test_char_rejects_repeated_characters():
    with pytest.raises(ValueError, match="no character repeated"):
        CharTokenizer("abca")


# --- id checks, shared by both tokenizers -----------------------------------------------


@pytest.fixture(params=["char", "bpe"])
def tokenizer(request, bpe):
    return CharTokenizer.from_text(TEXT) if request.param == "char" else bpe


def test_decode_id_out_of_range(tokenizer):
    V = tokenizer.vocab_size
    message = (
        f"token id {V} at position 1 is out of range: ids run from 0 to vocab_size - 1 = {V - 1}"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        tokenizer.decode([0, V])
    with pytest.raises(ValueError, match=re.escape("token id -1 at position 0")):
        tokenizer.decode([-1])


def test_decode_float_ids(tokenizer):
    with pytest.raises(TypeError, match=re.escape("token id 3.0 at position 1 must be an int")):
        tokenizer.decode([1, 3.0])
    message = "token ids must be integers, got dtype torch.float32"
    with pytest.raises(TypeError, match=re.escape(message)):
        tokenizer.decode(torch.tensor([1.0, 2.0]))


def test_decode_two_dimensional_tensor(tokenizer):
    with pytest.raises(ValueError, match=re.escape("token ids must be 1-D, got shape (1, 2)")):
        tokenizer.decode(torch.tensor([[1, 2]]))


# --- BPE ----------------------------------------------------------------------------------


def test_pair_counts_and_merge_pair_on_overlaps():
    assert pair_counts([1, 1, 1]) == {(1, 1): 2}
    # Left to right, each member used once: "aaa" holds one "aa" to merge, not two.
    assert merge_pair([1, 1, 1], (1, 1), 256) == [256, 1]
    assert merge_pair([1, 2, 1, 2], (1, 2), 256) == [256, 256]
    assert merge_pair([2, 1], (1, 2), 256) == [2, 1]


def test_toy_example_and_tie_break():
    merges = train_bpe("aaabdaaabac", 258)
    # After (a, a) -> 256, the pairs (256, a) and (a, b) both occur twice: the smaller wins.
    assert merges == [(97, 97), (97, 98)]


def test_bpe_round_trip_on_training_text(bpe):
    assert bpe.decode(bpe.encode(BPE_TRAIN)) == BPE_TRAIN


@pytest.mark.parametrize(
    "text",
    [
        TEXT[5000:5600],  # held-out English from the same source
        "naïve café, Zürich: ∑ x² → ∞",
        "日本語のテキスト and emoji 🙂",
        "",
        "a",
    ],
    ids=["held-out", "accents and math", "cjk and emoji", "empty", "one char"],
)
def test_bpe_round_trip_on_unseen_text(bpe, text):
    # Byte-level: every text has an encoding, none is unknown.
    assert bpe.decode(bpe.encode(text)) == text


def test_bpe_every_merge_shortens_the_training_text(bpe):
    ids = list(BPE_TRAIN.encode("utf-8"))
    lengths = [len(ids)]
    for new_id, pair in enumerate(bpe.merges, start=256):
        ids = merge_pair(ids, pair, new_id)
        lengths.append(len(ids))
    assert len(bpe.merges) == BPE_VOCAB - 256
    assert all(b < a for a, b in itertools.pairwise(lengths))
    # A merge is learned only from a pair seen at least twice: it saves at least 2 ids.
    assert all(a - b >= 2 for a, b in itertools.pairwise(lengths))
    # Encoding replays the merges exactly as training applied them.
    assert bpe.encode(BPE_TRAIN) == ids
    assert len(ids) < 0.8 * len(BPE_TRAIN.encode("utf-8"))


def test_bpe_training_is_deterministic(bpe):
    assert train_bpe(BPE_TRAIN, BPE_VOCAB) == bpe.merges


def test_bpe_vocab_entries_are_concatenations(bpe):
    for new_id, (a, b) in enumerate(bpe.merges, start=256):
        assert bpe.vocab[new_id] == bpe.vocab[a] + bpe.vocab[b]


def test_bpe_stops_when_no_pair_repeats():
    assert train_bpe("abcdef", 400) == []
    assert BPETokenizer.train("abcdef", 400).vocab_size == 256


def test_bpe_decode_of_a_cut_character_does_not_fail(bpe):
    ids = bpe.encode("é")  # two bytes, no merge covers them in this training text
    assert len(ids) == 2
    assert bpe.decode(ids[:1]) == "\ufffd"


def test_bpe_bad_vocab_size():
    with pytest.raises(ValueError, match=re.escape("vocab_size (100) must be an int >= 256")):
        train_bpe("abc", 100)


def test_bpe_rejects_merges_using_undefined_ids():
    with pytest.raises(ValueError, match=re.escape("merge 0 (97, 256) uses an id not yet defined")):
        BPETokenizer([(97, 256)])
