"""The tokens page's lesson code computes what the package's tokenizers and batcher
compute: the same vocabularies, ids, merges and windows on the same input. The lesson
has no input checks; the package's versions add them and nothing else."""

import random

import pytest
import torch

from snippets.lessons import tokens as lesson
from snippets.run import data as library_data
from snippets.run import tokenizer as library
from snippets.run.corpus import guide_text

TEXT = guide_text()
# Text the BPE never trains on: other pages' words, bytes it never saw (Z, ï, ẞ, 注意).
UNSEEN = "Zipf's law: naïve guesses fail. Straße ẞ 注意力 " + TEXT[9000:10500]


def test_char_tokenizer_equals_the_package_s():
    for train in (TEXT, "hello world", "ba"):
        mine = lesson.CharTokenizer.from_text(train)
        theirs = library.CharTokenizer.from_text(train)
        assert (mine.chars, mine.vocab_size) == (theirs.chars, theirs.vocab_size)
        assert mine.stoi == theirs.stoi
        ids = mine.encode(train)
        assert ids == theirs.encode(train)
        assert mine.decode(ids) == theirs.decode(ids) == train
        # The page decodes rows of a batch: a 1-D tensor of ids.
        assert mine.decode(torch.tensor(ids)) == theirs.decode(torch.tensor(ids))
    alphabet = " adeiklnost"  # a tokenizer made from a given alphabet, as on objectives
    mine, theirs = lesson.CharTokenizer(alphabet), library.CharTokenizer(alphabet)
    assert mine.encode("idle toast") == theirs.encode("idle toast")


def test_pair_counts_and_merge_pair_equal_the_package_s():
    rng = random.Random(0)
    cases = [[], [7], [97, 97, 97], [97, 97, 97, 97], list(b"aaabdaaabac")]
    cases += [[rng.randrange(4) for _ in range(rng.randrange(30))] for _ in range(200)]
    for ids in cases:
        assert lesson.pair_counts(ids) == library.pair_counts(ids)
        for pair in [(0, 0), (1, 2), (97, 97), (97, 98)]:
            assert lesson.merge_pair(ids, pair, 256) == library.merge_pair(ids, pair, 256)


@pytest.mark.parametrize(
    ("train", "vocab_size"),
    [
        (TEXT[:3000], 300),
        (TEXT[:8000], 352),  # the pages' tokenizer
        ("aaabdaaabac", 300),  # stops early: after 3 merges no pair occurs twice
        ("abcd", 260),  # no pair occurs twice: no merge at all
        ("注意力 注意力 naïve naïve", 280),  # multi-byte characters
        (TEXT[:500], 256),  # no room for a merge
    ],
)
def test_bpe_training_and_tokenizer_equal_the_package_s(train, vocab_size):
    merges = lesson.train_bpe(train, vocab_size)
    assert merges == library.train_bpe(train, vocab_size)
    mine = lesson.BPETokenizer.train(train, vocab_size)
    theirs = library.BPETokenizer.train(train, vocab_size)
    assert mine.merges == theirs.merges == merges
    assert mine.vocab_size == theirs.vocab_size
    assert mine.vocab == [theirs.vocab[i] for i in range(theirs.vocab_size)]
    assert mine.rank == theirs.rank
    for text in (train, UNSEEN, "", "a"):
        ids = mine.encode(text)
        assert ids == theirs.encode(text)
        assert mine.decode(ids) == theirs.decode(ids) == text
    # A slice that cuts a multi-byte character decodes to U+FFFD in both.
    ids = mine.encode("ï")[:1]
    assert mine.decode(ids) == theirs.decode(ids) == "\ufffd"
    assert mine.decode(torch.tensor(mine.encode(UNSEEN))) == UNSEEN


@pytest.mark.parametrize(("batch_size", "context_length"), [(4, 8), (1, 1), (3, 40)])
def test_get_batch_cuts_the_package_s_windows(batch_size, context_length):
    data = torch.tensor(lesson.CharTokenizer.from_text(TEXT).encode(TEXT[:2000]))
    for seed in range(3):
        mine = lesson.get_batch(
            data, batch_size, context_length, torch.Generator().manual_seed(seed)
        )
        theirs = library_data.get_batch(
            data, batch_size, context_length, torch.Generator().manual_seed(seed)
        )
        for a, b in zip(mine, theirs, strict=True):
            assert a.shape == (batch_size, context_length)
            assert a.dtype == b.dtype and torch.equal(a, b)
    # Without a generator, both draw from torch's global one.
    torch.manual_seed(5)
    mine = lesson.get_batch(data, batch_size, context_length)
    torch.manual_seed(5)
    theirs = library_data.get_batch(data, batch_size, context_length)
    assert all(torch.equal(a, b) for a, b in zip(mine, theirs, strict=True))
    # The shortest stream that holds a window: every batch is that one window.
    short = data[: context_length + 1]
    x, y = lesson.get_batch(short, batch_size, context_length)
    assert torch.equal(x, short[:-1].expand(batch_size, -1))
    assert torch.equal(y, short[1:].expand(batch_size, -1))
