"""Synthetic tasks that need attention, with what a perfect model would score.

Needs torch only. Shape letters: B batch, T sequence length, V vocabulary.
"""

# --8<-- [start:imports]
import torch

# --8<-- [end:imports]

__all__ = ["BOS", "backcopy_chain", "bigram_backcopy", "backcopy_best_losses"]


# --8<-- [start:backcopy]
BOS = 0  # every Bigram-Backcopy sequence starts with this token, and only it


def _check_backcopy(vocab_size: int, n_triggers: int) -> None:
    if not 1 <= n_triggers <= vocab_size - 3:
        raise ValueError(
            f"n_triggers ({n_triggers}) must be in [1, vocab_size - 3 = "
            f"{vocab_size - 3}]: BOS and at least two ordinary tokens besides"
        )


def backcopy_chain(
    vocab_size: int,
    n_triggers: int,
    trigger_rate: float = 0.1,
    sharpness: float = 2.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """A random bigram chain for bigram_backcopy: transitions (V, V), rows sum to 1.

    Token 0 is BOS (never a next token), the last n_triggers ids are the
    triggers, which together get trigger_rate of every row. Each row is a
    softmax of sharpness * N(0, 1) scores: larger sharpness, a more peaked chain.
    """
    _check_backcopy(vocab_size, n_triggers)
    if not 0 < trigger_rate < 1:
        raise ValueError(f"trigger_rate ({trigger_rate}) must be in (0, 1)")
    V, first = vocab_size, vocab_size - n_triggers  # triggers: first .. V - 1
    scores = sharpness * torch.randn(V, V, generator=generator)
    scores[:, BOS] = float("-inf")  # BOS only ever opens a sequence
    ordinary = scores[:, :first].softmax(-1) * (1 - trigger_rate)  # (V, first)
    triggers = scores[:, first:].softmax(-1) * trigger_rate  # (V, n_triggers)
    return torch.cat([ordinary, triggers], dim=-1)  # (V, V)


def bigram_backcopy(
    batch_size: int,
    length: int,
    transitions: torch.Tensor,
    n_triggers: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Bigram-Backcopy sequences (Guo et al. 2024): token ids (B, length).

    Position 0 is BOS, position 1 an ordinary token drawn evenly. After that,
    the token following a trigger copies the token before the trigger; every
    other token follows the bigram chain. A model must look one token back
    after a trigger and needs no attention anywhere else: there its heads have
    nothing to do.
    """
    V = transitions.size(0)
    _check_backcopy(V, n_triggers)
    if length < 2:
        raise ValueError(f"length ({length}) must be >= 2: BOS and one token")
    first_trigger = V - n_triggers
    ids = torch.empty(batch_size, length, dtype=torch.long)
    ids[:, 0] = BOS
    shape = (batch_size,)
    ids[:, 1] = torch.randint(1, first_trigger, shape, generator=generator)
    for t in range(2, length):
        drawn = torch.multinomial(
            transitions[ids[:, t - 1]], 1, generator=generator
        )
        copy = ids[:, t - 1] >= first_trigger  # the last token was a trigger
        ids[:, t] = torch.where(copy, ids[:, t - 2], drawn[:, 0])
    return ids


def backcopy_best_losses(
    ids: torch.Tensor, transitions: torch.Tensor, n_triggers: int
) -> torch.Tensor:
    """What the rule itself scores on each next token: -log p, (B, T - 1).

    0 after a trigger (the copy is certain), -log transitions[prev, next]
    elsewhere; its mean is the lowest loss a model can reach.
    """
    prev, nxt = ids[:, :-1], ids[:, 1:]  # (B, T - 1) each
    losses = -transitions[prev, nxt].log()
    losses[:, 0] = torch.log(
        torch.tensor(float(transitions.size(0) - n_triggers - 1))
    )
    return torch.where(prev >= transitions.size(0) - n_triggers, 0.0, losses)


# --8<-- [end:backcopy]
