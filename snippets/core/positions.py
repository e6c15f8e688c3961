"""How a Transformer learns token order: sinusoids, rotations (RoPE), linear biases.

Shape letters: T sequence length, C channels (n_embed), H heads, D head size.
The learned table of GPT-2 is an nn.Embedding in snippets/core/model.py; "none"
needs no code at all.
"""

# --8<-- [start:imports]
import math

import torch

from snippets.core.checks import check_positive_int

# --8<-- [end:imports]

__all__ = [
    "POSITIONS",
    "check_position",
    "sinusoidal_positions",
    "rope_frequencies",
    "apply_rope",
    "alibi_slopes",
    "alibi_bias",
    "apply_position",
    "alibi_mask",
    "alibi_at",
]

# The schemes a GPTConfig may name. "learned" and "sinusoidal" add a vector to
# each token's embedding; "rope" and "alibi" act inside attention; "none" adds
# nothing and leaves the causal mask as the only source of order.
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "none")
# Schemes whose position information has no table: they can run on sequences
# longer than the ones they were trained on (how well is an experiment).
WITHOUT_TABLE = ("sinusoidal", "rope", "alibi", "none")


# --8<-- [start:checks]
def _check_size(name: str, value: int, *, even: bool = False) -> None:
    """A positive int (and even where channels are used in pairs)."""
    check_positive_int(name, value)
    if even and value % 2:
        raise ValueError(
            f"{name} ({value}) must be even: channels are used in pairs "
            f"(2i, 2i + 1), one pair per frequency"
        )


def _check_base(base: float) -> None:
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(f"base ({base!r}) must be a number")
    if not base > 1:
        raise ValueError(
            f"base ({base}) must be > 1: the frequencies base ** (-2i / D) "
            f"must fall from 1 towards 0"
        )


def check_position(
    position: str, head_size: int, context_length: int, max_length: int | None
) -> None:
    """For an attention layer: a known scheme, an even head size D for RoPE,
    and a max_length (the longest T accepted) that the scheme can serve."""
    if position not in POSITIONS:
        raise ValueError(
            f"position ({position!r}) must be one of {list(POSITIONS)}"
        )
    if position == "rope" and head_size % 2:
        raise ValueError(
            f"position='rope' needs an even head size, got D={head_size}: "
            f"RoPE rotates channels in pairs"
        )
    if max_length is None:
        return
    _check_size("max_length", max_length)
    if max_length < context_length:
        raise ValueError(
            f"max_length ({max_length}) must be >= "
            f"context_length ({context_length})"
        )
    if max_length > context_length and position not in WITHOUT_TABLE:
        raise ValueError(
            f"max_length ({max_length}) > context_length ({context_length}) "
            f"needs a position scheme without a table: 'learned' has "
            f"{context_length} rows"
        )


# --8<-- [end:checks]


# --8<-- [start:sinusoidal]
def sinusoidal_positions(T: int, C: int, base: float = 10000.0) -> torch.Tensor:
    """The (T, C) table of Vaswani et al.: row t is added to token t's embedding.

    Channel 2i holds sin(t * w_i) and channel 2i + 1 holds cos(t * w_i), with
    w_i = base ** (-2i / C): the first pair turns once every 2 pi positions,
    the last almost never, so together they tell positions far apart.

    Args:
        T: number of positions, a positive int.
        C: channels, a positive even int.
        base: the longest wavelength is about 2 pi * base.

    Returns:
        A (T, C) float32 tensor with values in [-1, 1].
    """
    _check_size("T", T)
    _check_size("C", C, even=True)
    _check_base(base)
    t = torch.arange(T, dtype=torch.float64)  # (T,)
    w = base ** (-torch.arange(0, C, 2, dtype=torch.float64) / C)  # (C/2,)
    angles = t[:, None] * w[None, :]  # (T, 1) x (1, C/2) -> (T, C/2)
    table = torch.empty(T, C, dtype=torch.float64)
    table[:, 0::2] = angles.sin()  # even channels
    table[:, 1::2] = angles.cos()  # odd channels
    # Angles in float64: t * w_i keeps its digits for large t, rounded once.
    return table.float()  # (T, C)


# --8<-- [end:sinusoidal]


# --8<-- [start:rope]
def rope_frequencies(D: int, base: float = 10000.0) -> torch.Tensor:
    """theta_i = base ** (-2i / D) for i = 0 .. D/2 - 1: radians per position.

    Returns:
        A (D/2,) float64 tensor, from 1 down to nearly 1 / base.
    """
    _check_size("D", D, even=True)
    _check_base(base)
    return base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)


def apply_rope(
    x: torch.Tensor,
    offset: int = 0,
    base: float = 10000.0,
    theta: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rotate each pair of channels (2i, 2i + 1) of x by (offset + t) * theta_i.

    The pairs are adjacent channels, as in the RoFormer paper's equations.
    A query rotated to position t and a key rotated to position s score
    q . k after both rotations = q^T R((s - t) theta) k: only the distance
    s - t is left, whatever t and s are.

    Args:
        x: queries or keys (..., T, D), D even; row t sits at position
            offset + t.
        offset: the position of row 0, e.g. the number of tokens already in a
            KV cache; or every row's own position, a (T,) integer tensor (the
            sequences of a batch packed into one row, snippets/run/serving.py).
        base: as in rope_frequencies.
        theta: other frequencies (D/2,) in place of rope_frequencies(D, base),
            e.g. a context extension's (snippets/core/rope_scaling.py).

    Returns:
        A tensor like x, each pair of channels turned, its length unchanged.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        raise ValueError("x must be a tensor of shape (..., T, D)")
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(
            f"apply_rope needs an even head size D, got D={D}: channels are "
            f"rotated in pairs (2i, 2i + 1)"
        )
    if isinstance(offset, torch.Tensor):  # each row's position, given
        if offset.shape != (T,) or offset.is_floating_point():
            raise ValueError(
                f"offset as a tensor holds each row's position: ({T},) integers, "
                f"got {tuple(offset.shape)} {offset.dtype}"
            )
        positions = offset.to(torch.float64)  # (T,)
    elif isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset ({offset!r}) must be an int >= 0")
    else:
        positions = torch.arange(offset, offset + T, dtype=torch.float64)  # (T,)
    if theta is None:
        theta = rope_frequencies(D, base)  # (D/2,)
    elif theta.shape != (D // 2,):
        raise ValueError(
            f"theta has shape {tuple(theta.shape)}: one frequency per pair, "
            f"({D // 2},) for D={D}"
        )
    # Where the positions are (a cache's may be on x's device): no copy back.
    theta = theta.to(device=positions.device, dtype=torch.float64)
    angles = (positions[:, None] * theta[None, :]).to(x.device)  # (T, D/2)
    # Rotate in float32 at least (float64 stays float64) and round once at the
    # end: in bfloat16, rounding cos, sin and each product would add up errors.
    work = torch.promote_types(x.dtype, torch.float32)
    cos, sin = angles.cos().to(work), angles.sin().to(work)  # (T, D/2) each
    x1, x2 = x[..., 0::2].to(work), x[..., 1::2].to(work)  # (..., T, D/2): pairs
    # The 2x2 rotation [[cos, -sin], [sin, cos]] applied to every (x1, x2).
    y1 = x1 * cos - x2 * sin  # (..., T, D/2)
    y2 = x1 * sin + x2 * cos  # (..., T, D/2)
    # Interleave back: channel 2i from y1, 2i + 1 from y2. (..., T, D)
    return torch.stack([y1, y2], dim=-1).flatten(-2).to(x.dtype)


# --8<-- [end:rope]


# --8<-- [start:alibi]
def alibi_slopes(n_head: int) -> torch.Tensor:
    """ALiBi's slope per head: a geometric sequence, steepest first.

    For H a power of two: 2 ** (-8 / H), its square, cube, ... up to 2 ** -8;
    H = 8 gives 1/2, 1/4, ..., 1/256. For other H (the rule of the paper's
    code): the slopes of the largest power of two p below H, then every other
    slope of the 2p sequence, which fall between those, until H are taken.

    Returns:
        An (H,) float32 tensor.
    """
    _check_size("n_head", n_head)

    def geometric(n: int) -> list[float]:  # n a power of two
        first = 2.0 ** (-8.0 / n)
        return [first ** (h + 1) for h in range(n)]

    p = 2 ** math.floor(math.log2(n_head))  # the largest power of two <= H
    slopes = geometric(p) + geometric(2 * p)[0::2][: n_head - p]
    return torch.tensor(slopes, dtype=torch.float32)  # (H,)


def alibi_bias(n_head: int, T: int) -> torch.Tensor:
    """The (H, T, T) float mask: -slope_h * (i - j) for key j <= query i.

    0 on the diagonal, falling by slope_h per step back; -inf above the
    diagonal, so it is the whole causal attention mask for the fused kernel
    (softmax turns -inf into weight 0). Added to the scaled scores.
    """
    _check_size("T", T)
    slopes = alibi_slopes(n_head)  # (H,)
    i = torch.arange(T)
    back = (i[None, :] - i[:, None]).float()  # (T, T): j - i, <= 0 for j <= i
    bias = slopes[:, None, None] * back  # (H, 1, 1) x (T, T) -> (H, T, T)
    return bias.masked_fill(back > 0, float("-inf"))  # (H, T, T)


# --8<-- [end:alibi]


# --8<-- [start:in_attention]
def apply_position(
    q: torch.Tensor, k: torch.Tensor, position: str, offset: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries and keys (..., T, D) as the scheme wants them inside attention.

    "rope" rotates both, row t to position offset + t; every other scheme
    leaves them alone (its positions are in the embeddings, in a bias, or
    nowhere). Applied after the head split: each head rotates its own D.
    """
    if position == "rope":
        return apply_rope(q, offset), apply_rope(k, offset)
    return q, k


def alibi_mask(n_head: int, T_new: int, T_total: int) -> torch.Tensor:
    """ALiBi's float mask for queries at the last T_new of T_total positions.

    (H, T_new, T_total): row i is query position T_total - T_new + i, so a KV
    cache holding T_total - T_new positions gets the right distances.
    """
    return alibi_bias(n_head, T_total)[:, T_total - T_new :, :]


def alibi_at(n_head: int, q_pos, k_pos, mask) -> torch.Tensor:
    """ALiBi's float mask for queries at q_pos (Tn,) over keys at k_pos (Ta,):
    -slope_h * (i - j) where mask (Tn, Ta) lets query i see key j, -inf
    elsewhere -> (H, Tn, Ta); alibi_mask's values where the mask is causal."""
    back = (k_pos[None, :] - q_pos[:, None]).float()  # (Tn, Ta): j - i
    slopes = alibi_slopes(n_head).to(back.device)  # (H,)
    bias = slopes[:, None, None] * back  # (H, Tn, Ta)
    return bias.masked_fill(~mask, float("-inf"))


# --8<-- [end:in_attention]
