"""Text to token ids and back: a character tokenizer and a small byte-level BPE.

Both tokenizers offer encode(text) -> list of ids, decode(ids) -> text, and
vocab_size.
"""

# --8<-- [start:imports]
import itertools
import math
from collections import Counter

import torch

# --8<-- [end:imports]

__all__ = [
    "CharTokenizer",
    "BPETokenizer",
    "pair_counts",
    "merge_pair",
    "train_bpe",
]


# --8<-- [start:check_ids]
def _check_ids(ids, vocab_size: int) -> list[int]:
    """ids as a list of ints, each in [0, vocab_size); the first bad one named."""
    if isinstance(ids, torch.Tensor):
        if ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise TypeError(f"token ids must be integers, got dtype {ids.dtype}")
        if ids.dim() != 1:
            raise ValueError(f"token ids must be 1-D, got shape {tuple(ids.shape)}")
        ids = ids.tolist()
    for position, i in enumerate(ids):
        if type(i) is not int:
            raise TypeError(
                f"token id {i!r} at position {position} must be an int, "
                f"got {type(i).__name__}"
            )
        if not 0 <= i < vocab_size:
            raise ValueError(
                f"token id {i} at position {position} is out of range: "
                f"ids run from 0 to vocab_size - 1 = {vocab_size - 1}"
            )
    return list(ids)


# --8<-- [end:check_ids]


# --8<-- [start:char]
class CharTokenizer:
    """One token per character; the vocabulary is a training text's characters.

    Args:
        chars: the vocabulary, each character once; its position is its id.

    Raises:
        ValueError: chars is empty or repeats a character.
    """

    def __init__(self, chars: str):
        if not chars or len(set(chars)) != len(chars):
            raise ValueError("chars must be non-empty, with no character repeated")
        self.chars = chars
        self.vocab_size = len(chars)
        self.stoi = {ch: i for i, ch in enumerate(chars)}  # string to integer

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        """The tokenizer of text's distinct characters, in sorted order."""
        # Sorted, so that the same text always gives each character the same id.
        return cls("".join(sorted(set(text))))

    def encode(self, text: str) -> list[int]:
        """text -> one id per character.

        Raises:
            ValueError: a character is not in the vocabulary (named, with its
                position).
        """
        ids = []
        for position, ch in enumerate(text):
            if ch not in self.stoi:
                raise ValueError(
                    f"character {ch!r} at position {position} is not in the "
                    f"vocabulary ({self.vocab_size} characters seen in training)"
                )
            ids.append(self.stoi[ch])
        return ids

    def decode(self, ids) -> str:
        """ids (a list, or a 1-D integer tensor) -> text.

        Raises:
            TypeError: an id is not an int.
            ValueError: an id is outside [0, vocab_size), or a tensor is not 1-D.
        """
        return "".join(self.chars[i] for i in _check_ids(ids, self.vocab_size))


# --8<-- [end:char]


# --8<-- [start:bpe_steps]
def pair_counts(ids: list[int]) -> Counter:
    """How often each pair of neighbouring ids occurs.

    Args:
        ids: a sequence of token ids.

    Returns:
        A Counter mapping (a, b) to how often b directly follows a.
    """
    return Counter(itertools.pairwise(ids))


def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """ids with each occurrence of pair, scanning left to right, made new_id.

    Args:
        ids: a sequence of token ids.
        pair: the two neighbouring ids to replace.
        new_id: the id that replaces them.

    Returns:
        A new list, shorter by one for each pair replaced.
    """
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
    """Learn up to vocab_size - 256 merges from text; merge k makes id 256 + k.

    Args:
        text: the training text.
        vocab_size: 256 byte tokens plus at most this many minus 256 merges.

    Returns:
        The merges (a, b) in the order learned; fewer when no pair occurs twice.

    Raises:
        ValueError: vocab_size is not an int >= 256.
    """
    if type(vocab_size) is not int or vocab_size < 256:
        raise ValueError(f"vocab_size ({vocab_size!r}) must be an int >= 256")
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
    """Byte-level BPE: UTF-8 bytes, then the merges in the order learned.

    Args:
        merges: pairs (a, b) as train_bpe returns them; merge k makes id 256 + k.

    Raises:
        ValueError: a merge uses an id not defined before it.
    """

    def __init__(self, merges: list[tuple[int, int]]):
        self.merges = [tuple(pair) for pair in merges]
        self.vocab_size = 256 + len(self.merges)
        self.vocab = {i: bytes([i]) for i in range(256)}  # id -> its bytes
        self.rank = {}  # pair -> the id it merges into; lower = learned earlier
        for new_id, (a, b) in enumerate(self.merges, start=256):
            if not (0 <= a < new_id and 0 <= b < new_id):
                raise ValueError(
                    f"merge {new_id - 256} ({a}, {b}) uses an id not yet defined"
                )
            self.vocab[new_id] = self.vocab[a] + self.vocab[b]
            self.rank[(a, b)] = new_id

    @classmethod
    def train(cls, text: str, vocab_size: int) -> "BPETokenizer":
        """The tokenizer of train_bpe(text, vocab_size)."""
        return cls(train_bpe(text, vocab_size))

    def encode(self, text: str) -> list[int]:
        """text -> ids, merging as training did: earliest-learned merge first.

        Any text encodes: every byte is a token.
        """
        ids = list(text.encode("utf-8"))
        while len(ids) >= 2:
            pair = min(pair_counts(ids), key=lambda p: self.rank.get(p, math.inf))
            if pair not in self.rank:
                break  # no pair left that training ever merged
            ids = merge_pair(ids, pair, self.rank[pair])
        return ids

    def decode(self, ids) -> str:
        """ids (a list, or a 1-D integer tensor) -> text.

        Bytes that do not form a UTF-8 character decode as U+FFFD.

        Raises:
            TypeError: an id is not an int.
            ValueError: an id is outside [0, vocab_size), or a tensor is not 1-D.
        """
        data = b"".join(self.vocab[i] for i in _check_ids(ids, self.vocab_size))
        # A slice of ids may cut a multi-byte character: show U+FFFD, do not fail.
        return data.decode("utf-8", errors="replace")


# --8<-- [end:bpe_tokenizer]
