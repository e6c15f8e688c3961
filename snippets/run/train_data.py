"""What a training run reads: its corpus as token ids, and each step's batches.

snippets/run/train.py trains on it. Shape letters: B batch, T sequence length.
"""

# TrainConfig (snippets/run/train.py, which imports this module) is named in an
# annotation only, never evaluated: importing it would make a circle.
# ruff: noqa: F821
from __future__ import annotations

# --8<-- [start:imports]
import dataclasses

import torch

from snippets.run.corpus import MarkovLanguage, guide_text
from snippets.run.data import get_batch
from snippets.run.tokenizer import CharTokenizer

# --8<-- [end:imports]

__all__ = [
    "MARKOV",
    "Corpus",
    "load_corpus",
    "markov_loss",
    "val_windows",
    "micro_batches",
]


# --8<-- [start:corpus]
# The Markov language of the objectives page: its entropy rate is the best loss.
MARKOV = MarkovLanguage.random(" adeiklnost", concentration=0.3, seed=0)


@dataclasses.dataclass
class Corpus:
    """A corpus as token ids, split into training and validation text."""

    tokenizer: CharTokenizer
    train: torch.Tensor  # (N,) token ids to draw training windows from
    val: torch.Tensor  # (M,) held-out ids, cut into fixed windows
    best_loss: float | None  # the lowest loss any model can reach, if known


def load_corpus(name: str, n_chars: int = 200_000) -> Corpus:
    """Character-level token ids of a corpus: "markov" or "guide".

    Args:
        name: "markov", text of the Markov language (its best loss is known), or
            "guide", the snapshot of the guide's pages (its last tenth held out).
        n_chars: the length of the Markov training text.

    Returns:
        The corpus: tokenizer, train ids (N,), val ids (M,), best loss or None.

    Raises:
        ValueError: name is neither "markov" nor "guide".
    """
    if name == "markov":
        tokenizer = CharTokenizer(MARKOV.alphabet)
        train_text = MARKOV.sample(n_chars, seed=1)
        val_text = MARKOV.sample(max(n_chars // 10, 20_000), seed=2)  # other seed
        best = MARKOV.entropy_rate()
    elif name == "guide":
        text = guide_text()
        tokenizer = CharTokenizer.from_text(text)
        split = int(0.9 * len(text))  # the last tenth is never trained on
        train_text, val_text, best = text[:split], text[split:], None
    else:
        raise ValueError(f"corpus ({name!r}) must be 'markov' or 'guide'")

    def ids(text: str) -> torch.Tensor:
        return torch.tensor(tokenizer.encode(text), dtype=torch.long)

    return Corpus(tokenizer, ids(train_text), ids(val_text), best)


def markov_loss(x: torch.Tensor, y: torch.Tensor) -> float:
    """The loss of the Markov chain itself on windows x, y (N, T) of its text.

    Args:
        x: token ids (N, T) of the Markov corpus.
        y: the next token at every position (N, T).

    Returns:
        The mean of -ln p(y | x) in nats per token.
    """
    P = torch.tensor(MARKOV.transitions)  # (V, V): P[i, j] = p(next j | now i)
    return -P[x, y].log().mean().item()  # -ln p(y_t | x_t), averaged


def val_windows(val: torch.Tensor, T: int, n: int) -> tuple[torch.Tensor, ...]:
    """The first n non-overlapping windows of val: x, y (n, T), no randomness.

    Args:
        val: token ids (M,).
        T: the window length.
        n: how many windows at most; fewer if val is too short.

    Returns:
        x and y, each (n, T); y is x shifted by one token.
    """
    n = min(n, (len(val) - 1) // T)
    x = val[: n * T].view(n, T)  # (n * T,) -> (n, T)
    y = val[1 : n * T + 1].view(n, T)  # the same windows shifted by one
    return x, y


# --8<-- [end:corpus]


# --8<-- [start:batches]
def micro_batches(
    data: torch.Tensor,
    config: TrainConfig,
    generator: torch.Generator,
    rank: int = 0,
    world_size: int = 1,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """This process's share of each of the grad_accum micro-batches of one step.

    Every process draws the same batch_size windows from the same generator, cuts
    them into grad_accum micro-batches and keeps its slice of each: the optimizer
    sees the same batch whatever world_size and grad_accum are.

    Args:
        data: token ids (N,) to draw windows from.
        config: gives batch_size, grad_accum and context_length (T).
        generator: the same seeded generator in every process.
        rank: this process's index, in [0, world_size).
        world_size: the number of processes.

    Returns:
        grad_accum pairs (x, y), each (batch_size // grad_accum // world_size, T).

    Raises:
        ValueError: batch_size // grad_accum is not divisible by world_size.
    """
    per_micro = config.batch_size // config.grad_accum
    if per_micro % world_size != 0:
        raise ValueError(
            f"batch_size // grad_accum ({per_micro}) must be divisible by the "
            f"number of processes ({world_size})"
        )
    share = per_micro // world_size
    mine = slice(rank * share, (rank + 1) * share)
    x, y = get_batch(data, config.batch_size, config.context_length, generator)
    pieces = zip(x.split(per_micro), y.split(per_micro), strict=True)
    return [(xs[mine], ys[mine]) for xs, ys in pieces]  # (share, T) each


# --8<-- [end:batches]
