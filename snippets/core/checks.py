"""Argument checks the layers share: each names the argument, its value or shape
and the rule it breaks.

A layer checks at its boundary because torch's own errors come from deep inside
a matmul, a view or masked_fill, and name none of its arguments. Shape letters:
B batch, T sequence length, C channels (n_embed), D head size.
"""

import torch

__all__ = [
    "check_positive_int",
    "check_config",
    "check_input",
    "check_qkv",
    "check_shape",
]


# --8<-- [start:layer]
def check_positive_int(name: str, value: int) -> None:
    """Reject a size that is not a positive int, naming the argument."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{name} ({value!r}) must be an int, got {type(value).__name__}"
        )
    if value <= 0:
        raise ValueError(f"{name} ({value}) must be positive")


def check_config(n_head: int, n_embed: int, context_length: int) -> None:
    """Sizes of a multi-head module: every head gets D = C // H channels."""
    check_positive_int("n_head", n_head)
    check_positive_int("n_embed", n_embed)
    check_positive_int("context_length", context_length)
    if n_embed % n_head != 0:
        raise ValueError(
            f"n_embed ({n_embed}) must be divisible by n_head ({n_head})"
        )


def check_input(
    x: torch.Tensor,
    n_embed: int,
    context_length: int,
    max_length: int | None = None,
) -> None:
    """x must be (B, T, C), C == n_embed and T <= context_length (max_length)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 3:
        raise ValueError(
            f"expected input of shape (B, T, C) with 3 dimensions, "
            f"got {x.dim()} dimensions with shape {tuple(x.shape)}"
        )
    B, T, C = x.shape
    if C != n_embed:
        raise ValueError(
            f"last dimension of input ({C}) must equal n_embed ({n_embed})"
        )
    # The causal mask covers context_length positions; a longer T has no mask rows.
    if T > context_length and max_length is None:
        raise ValueError(f"T={T} exceeds context_length={context_length}")
    if max_length is not None and T > max_length:
        raise ValueError(
            f"T={T} exceeds max_length={max_length} "
            f"(context_length={context_length})"
        )


def check_qkv(q, k, v, mask: torch.Tensor | None = None) -> None:
    """q (..., T_q, D), k (..., T_k, D), v (..., T_k, D_v); leading dims broadcast.

    mask: None, or bool (True = may attend) broadcastable to (..., T_q, T_k).
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"{name} must be a torch.Tensor, got {type(t).__name__}"
            )
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., T, D), "
                f"got shape {tuple(t.shape)}"
            )
    # Every query is dotted with every key: both need the same width D.
    if q.size(-1) != k.size(-1):
        raise ValueError(
            f"q and k must have the same last dimension (D), got q "
            f"{tuple(q.shape)} and k {tuple(k.shape)}"
        )
    # One value per key: the weights (..., T_q, T_k) multiply v's T_k rows.
    if k.size(-2) != v.size(-2):
        raise ValueError(
            f"k and v must have the same length (dimension -2), got k "
            f"{tuple(k.shape)} and v {tuple(v.shape)}"
        )
    try:
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading dimensions of q {tuple(q.shape)}, k {tuple(k.shape)} and "
            f"v {tuple(v.shape)} must be broadcastable"
        ) from None
    if mask is None:
        return
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor (True = may attend), got {mask.dtype}"
        )
    scores = (*lead, q.size(-2), k.size(-2))  # (..., T_q, T_k)
    pairs = zip(mask.shape[::-1], scores[::-1], strict=False)  # from the right
    if mask.dim() > len(scores) or any(m not in (1, s) for m, s in pairs):
        raise ValueError(
            f"mask {tuple(mask.shape)} must broadcast to the scores (..., T_q, "
            f"T_k) = {scores}"
        )


# --8<-- [end:layer]


# --8<-- [start:shape]
def check_shape(name: str, t, dims: str, **sizes: int) -> tuple[int, ...]:
    """t must have one dimension per letter of dims ("B T C"); returns its shape.

    A letter given in sizes must have that size (C=16); a letter written twice
    must have the same size twice ("B T T": square scores).
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    letters, known = dims.split(), dict(sizes)
    fits = t.dim() == len(letters)
    for letter, size in zip(letters, t.shape, strict=False):
        fits = fits and known.setdefault(letter, size) == size
    if not fits:
        rule = ", ".join(f"{letter}={size}" for letter, size in sizes.items())
        raise ValueError(
            f"{name} must be ({', '.join(letters)})"
            f"{' with ' + rule if rule else ''}, got shape {tuple(t.shape)}"
        )
    return tuple(t.shape)


# --8<-- [end:shape]
