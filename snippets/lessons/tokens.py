"""Tokens as the tokens page builds them: a character tokenizer, a small byte-level
BPE, and batches of (x, y) windows cut from one stream of ids.

Plain Python and torch, and only what that page explains: no input checks (the
package's snippets.run.tokenizer and snippets.run.data compute the same and
name a bad value). Shape letters: B batch, T sequence length (context_length).
"""

# --8<-- [start:imports]
import itertools
import math
from collections import Counter

import torch

# --8<-- [end:imports]

__all__ = [
    "CharTokenizer",
    "pair_counts",
    "merge_pair",
    "train_bpe",
    "BPETokenizer",
    "get_batch",
]


# --8<-- [start:char]
class CharTokenizer:
    """One token per character; the vocabulary is a training text's characters."""

    def __init__(self, chars: str):
        self.chars = chars  # each character once: its position is its id
        self.vocab_size = len(chars)
        self.stoi = {ch: i for i, ch in enumerate(chars)}  # string to integer

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        # Sorted, so that the same text always gives each character the same id.
        return cls("".join(sorted(set(text))))

    def encode(self, text: str) -> list[int]:
        return [self.stoi[ch] for ch in text]

    def decode(self, ids) -> str:
        """ids (a list of ints, or a 1-D tensor of them) -> text."""
        return "".join(self.chars[i] for i in ids)


# --8<-- [end:char]


# --8<-- [start:bpe_steps]
def pair_counts(ids: list[int]) -> Counter:
    """How often each pair of neighbouring ids occurs: {(a, b): count}."""
    return Counter(itertools.pairwise(ids))


def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """ids with each occurrence of pair, scanning left to right, made new_id."""
    out = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2  # both members of the pair are used up
        else:
            out.append(ids[i])
            i += 1
    return out


# --8<-- [end:bpe_steps]


# --8<-- [start:bpe_train]
def train_bpe(text: str, vocab_size: int) -> list[tuple[int, int]]:
    """Learn up to vocab_size - 256 merges from text; merge k makes id 256 + k."""
    # Start from UTF-8 bytes: 256 base tokens spell every text, none is unknown.
    ids = list(text.encode("utf-8"))
    merges = []
    for new_id in range(256, vocab_size):
        counts = pair_counts(ids)
        if not counts:
            break
        # The most frequent pair; a tie goes to the smallest pair, so training is
        # deterministic and does not depend on dictionary order.
        pair = min(counts, key=lambda p: (-counts[p], p))
        if counts[pair] < 2:
            break  # a pair seen once would memorise the text, not compress it
        ids = merge_pair(ids, pair, new_id)
        merges.append(pair)
    return merges


# --8<-- [end:bpe_train]


# --8<-- [start:bpe_tokenizer]
class BPETokenizer:
    """Byte-level BPE: UTF-8 bytes, then the merges in the order learned."""

    def __init__(self, merges: list[tuple[int, int]]):
        self.merges = merges
        self.vocab_size = 256 + len(merges)
        self.vocab = [bytes([i]) for i in range(256)]  # id -> its bytes
        self.rank = {}  # pair -> the id it merges into; lower = learned earlier
        for new_id, (a, b) in enumerate(merges, start=256):
            self.vocab.append(self.vocab[a] + self.vocab[b])
            self.rank[(a, b)] = new_id

    @classmethod
    def train(cls, text: str, vocab_size: int) -> "BPETokenizer":
        return cls(train_bpe(text, vocab_size))

    def encode(self, text: str) -> list[int]:
        """text -> ids, merging as training did: earliest-learned merge first."""
        ids = list(text.encode("utf-8"))
        while len(ids) >= 2:
            pair = min(pair_counts(ids), key=lambda p: self.rank.get(p, math.inf))
            if pair not in self.rank:
                break  # no pair left that training ever merged
            ids = merge_pair(ids, pair, self.rank[pair])
        return ids

    def decode(self, ids) -> str:
        data = b"".join(self.vocab[i] for i in ids)
        # A slice of ids may cut a multi-byte character: show U+FFFD, do not fail.
        return data.decode("utf-8", errors="replace")


# --8<-- [end:bpe_tokenizer]


# --8<-- [start:get_batch]
def get_batch(data, batch_size, context_length, generator=None):
    """batch_size windows at random offsets of the stream data (N,): x, y (B, T).

    x[b, t] = data[i + t] and y[b, t] = data[i + t + 1]: at every position the
    target is the token that comes next, so T + 1 tokens give T examples.
    """
    T = context_length
    # Window starts i in [0, len(data) - T - 1], so that i + T + 1 <= len(data).
    starts = torch.randint(len(data) - T, (batch_size,), generator=generator)
    x = torch.stack([data[i : i + T] for i in starts])  # B x (T,) -> (B, T)
    y = torch.stack([data[i + 1 : i + T + 1] for i in starts])  # B x (T,) -> (B, T)
    return x, y


# --8<-- [end:get_batch]
