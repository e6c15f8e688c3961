"""Positions as the positions page builds them: a fixed sinusoidal table, RoPE
(each head's queries and keys turned by their position) and ALiBi (a penalty on
each score that grows with the distance), then the attention page's batched layer
with the two schemes that act inside attention.

Plain torch, and only what the attention page and the positions page explain.
Shape letters: B batch, T sequence length, C channels, H heads, D head size.
"""

# --8<-- [start:imports]
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# --8<-- [end:imports]

__all__ = [
    "sinusoidal_positions",
    "rope_frequencies",
    "apply_rope",
    "alibi_slopes",
    "alibi_bias",
    "CausalSelfAttention",
]


# --8<-- [start:sinusoidal]
def sinusoidal_positions(T: int, C: int, base: float = 10000.0) -> torch.Tensor:
    """The (T, C) table of Vaswani et al.: row t is added to token t's embedding.

    Channels 2i and 2i + 1 hold sin(t w_i) and cos(t w_i), w_i = base ** (-2i / C).
    """
    t = torch.arange(T, dtype=torch.float64)  # (T,)
    w = base ** (-torch.arange(0, C, 2, dtype=torch.float64) / C)  # (C/2,)
    # In float64, t * w_i keeps its digits for large t; rounded once, at the end.
    angles = t[:, None] * w[None, :]  # (T, 1) x (1, C/2) -> (T, C/2)
    table = torch.empty(T, C, dtype=torch.float64)
    table[:, 0::2] = angles.sin()  # even channels
    table[:, 1::2] = angles.cos()  # odd channels
    return table.float()  # (T, C)


# --8<-- [end:sinusoidal]


# --8<-- [start:rope]
def rope_frequencies(D: int, base: float = 10000.0) -> torch.Tensor:
    """theta_i = base ** (-2i / D): the radians pair i turns per position."""
    return base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)


def apply_rope(x: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Turn the channel pair (2i, 2i + 1) of row t of x (..., T, D), queries or
    keys, by the angle (offset + t) * theta_i: row t is position offset + t."""
    T, D = x.shape[-2:]
    t = torch.arange(offset, offset + T, dtype=torch.float64)  # (T,)
    angles = t[:, None] * rope_frequencies(D)[None, :]  # (T, D/2), in float64
    cos, sin = angles.cos().to(x), angles.sin().to(x)  # (T, D/2), x's dtype
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., T, D/2): each pair's two channels
    # The 2x2 rotation [[cos, -sin], [sin, cos]] applied to every (x1, x2).
    y1 = x1 * cos - x2 * sin  # (..., T, D/2)
    y2 = x1 * sin + x2 * cos  # (..., T, D/2)
    # Interleave back: channel 2i from y1, 2i + 1 from y2.
    return torch.stack([y1, y2], dim=-1).flatten(-2)  # (..., T, D)


# --8<-- [end:rope]


# --8<-- [start:alibi]
def alibi_slopes(n_head: int) -> torch.Tensor:
    """One slope per head, steepest first: for H a power of two, 2 ** (-8 / H)
    and its powers down to 2 ** -8; for other H, the rule of the paper's code."""

    def geometric(n):  # the slopes of n heads, n a power of two
        return [2 ** (-8 * (h + 1) / n) for h in range(n)]

    p = 2 ** math.floor(math.log2(n_head))  # the largest power of two <= H
    # The other H - p: every other slope of 2p heads, falling between p's.
    return torch.tensor(geometric(p) + geometric(2 * p)[0::2][: n_head - p])  # (H,)


def alibi_bias(n_head: int, T: int) -> torch.Tensor:
    """(H, T, T): -slope_h * (i - j) for a key j <= query i, -inf for j > i."""
    i = torch.arange(T)
    back = (i[None, :] - i[:, None]).float()  # (T, T): j - i, <= 0 for j <= i
    bias = alibi_slopes(n_head)[:, None, None] * back  # (H, 1, 1) x (T, T)
    # -inf above the diagonal: the bias is the whole causal mask as well.
    return bias.masked_fill(back > 0, float("-inf"))  # (H, T, T)


# --8<-- [end:alibi]


# --8<-- [start:attention]
class CausalSelfAttention(nn.Module):
    """What MultiHeadAttention computes, with all heads in one batched matmul."""

    def __init__(self, n_head: int, n_embed: int, position: str = "learned"):
        super().__init__()
        self.n_head = n_head
        self.position = position  # "rope" and "alibi" act here, the others do not
        # One (C -> 3C) matmul instead of 3H small ones. Output channels: [0, C)
        # queries, [C, 2C) keys, [2C, 3C) values; in each, H heads of D channels.
        self.qkv = nn.Linear(n_embed, 3 * n_embed, bias=False)
        self.proj = nn.Linear(n_embed, n_embed)

    def forward(self, x):
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=-1)  # (B, T, 3C) -> 3 x (B, T, C)
        # Split channels into heads, move H next to B: each head is a batch entry.
        q = q.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        k = k.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        v = v.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        if self.position == "rope":  # each head turns its own D channels
            q, k = apply_rope(q), apply_rope(k)  # row t by t * theta; v stays
        if self.position == "alibi":  # a float mask, added to the scaled scores
            bias = alibi_bias(H, T).to(x)  # (H, T, T), -inf above the diagonal
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # (B,H,T,D)
        else:
            # One fused kernel: scores, causal mask, softmax and weighted sum.
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B,H,T,D)
        # Heads back side by side, the channel layout of MultiHeadAttention's cat.
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)  # (B, T, C)


# --8<-- [end:attention]
