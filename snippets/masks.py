"""Attention masks: which keys each query may see.

Needs only torch. A mask is a bool tensor, True where a query may attend to a
key, that broadcasts against the (B, H, T, T) scores: (T, T) for every row of a
batch, (B, T, T) or (B, 1, T) for one per row. Shape letters: B batch, H heads,
T sequence length.
"""

# --8<-- [start:imports]
import torch

# --8<-- [end:imports]

__all__ = ["causal_mask", "padding_mask", "attention_mask"]


# --8<-- [start:causal_mask]
def causal_mask(T: int) -> torch.Tensor:
    """The causal mask: query position i may attend to key positions j <= i.

    Args:
        T: sequence length, a positive int.

    Returns:
        A (T, T) bool tensor, True on and below the diagonal.
    """
    if isinstance(T, bool) or not isinstance(T, int):
        raise TypeError(f"T ({T!r}) must be an int, got {type(T).__name__}")
    if T <= 0:
        raise ValueError(f"T ({T}) must be positive")
    # Lower triangle: row i allows columns 0..i, so no token sees a later one.
    return torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T)


# --8<-- [end:causal_mask]


# --8<-- [start:padding_mask]
def padding_mask(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """Which keys are real tokens, for rows padded on the left to length T.

    Args:
        lengths: (B,) the number of real tokens of each row: its last ones.
        T: the padded length.

    Returns:
        (B, 1, T) bool, True at real keys: the same for every query.
    """
    if lengths.dim() != 1 or bool(((lengths < 1) | (lengths > T)).any()):
        raise ValueError(f"lengths must be 1-D, each in [1, T={T}], got {lengths}")
    real = torch.arange(T) >= T - lengths[:, None]  # (T,) vs (B, 1) -> (B, T)
    return real[:, None, :]  # (B, 1, T)


def attention_mask(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """Causal and padding masks combined: (B, T, T), True where query may see key.

    A padding query would see no key at all, and a row of -inf scores is NaN
    after softmax; it keeps its own position, and its output is never used.
    """
    mask = causal_mask(T) & padding_mask(lengths, T)  # (T, T) & (B, 1, T)
    return mask | torch.eye(T, dtype=torch.bool)  # (B, T, T)


# --8<-- [end:padding_mask]
