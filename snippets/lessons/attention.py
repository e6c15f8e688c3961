"""Attention as the two attention pages build it: the equation, one head, many
heads, and the batched layer a model trains with.

Plain torch, and only what those pages explain: no cache (the generation page adds
one as a change of this code) and no position scheme (the positions page). Shape
letters: B batch, T sequence length, C channels, H heads, D head size (C // H).
"""

# --8<-- [start:imports]
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# --8<-- [end:imports]

__all__ = [
    "scaled_dot_product_attention",
    "Head",
    "MultiHeadAttention",
    "CausalSelfAttention",
]


# --8<-- [start:sdpa]
def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q @ k^T / sqrt(D)) @ v, term by term.

    q (..., T, D), k (..., T_k, D), v (..., T_k, D_v); mask, if given, is bool
    and True where a query may see a key. Returns out (..., T, D_v) and the
    weights (..., T, T_k).
    """
    D = q.size(-1)
    # Dividing by sqrt(D) keeps the scores' variance near 1 whatever the head size;
    # unscaled, it grows like D and softmax saturates towards a one-hot.
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (..., T, T_k)
    if mask is not None:
        # -inf becomes exactly 0 after softmax: a masked key gets no weight.
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)  # (..., T, T_k), each row sums to 1
    return weights @ v, weights  # (..., T, D_v), (..., T, T_k)


# --8<-- [end:sdpa]


# --8<-- [start:head]
class Head(nn.Module):
    """One head of causal self-attention: x (B, T, C) -> (B, T, D)."""

    def __init__(self, head_size: int, n_embed: int, context_length: int):
        super().__init__()
        self.key = nn.Linear(n_embed, head_size, bias=False)
        self.query = nn.Linear(n_embed, head_size, bias=False)
        self.value = nn.Linear(n_embed, head_size, bias=False)
        # A buffer, not a parameter: it moves with .to(device), is never trained.
        ones = torch.ones(context_length, context_length)
        self.register_buffer("tril", torch.tril(ones))  # (context_length, ...)

    def forward(self, x, *, return_weights=False):
        B, T, C = x.shape
        q = self.query(x)  # (B, T, C) -> (B, T, D)
        k = self.key(x)  # (B, T, C) -> (B, T, D)
        v = self.value(x)  # (B, T, C) -> (B, T, D)
        scores = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))  # (B, T, T)
        # Position i may not see later positions: -inf there, 0 after softmax.
        scores = scores.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        weights = F.softmax(scores, dim=-1)  # (B, T, T), each row sums to 1
        out = weights @ v  # (B, T, T) x (B, T, D) -> (B, T, D)
        return (out, weights) if return_weights else out


# --8<-- [end:head]


# --8<-- [start:multihead]
class MultiHeadAttention(nn.Module):
    """H heads side by side, each D = C // H wide: x (B, T, C) -> (B, T, C)."""

    def __init__(self, n_head: int, n_embed: int, context_length: int):
        super().__init__()
        D = n_embed // n_head
        self.heads = nn.ModuleList(
            [Head(D, n_embed, context_length) for _ in range(n_head)]
        )
        # Mixes the heads' findings; without it each head's D channels stay apart.
        self.proj = nn.Linear(n_embed, n_embed)

    def forward(self, x):
        # H x (B, T, D) -> (B, T, C): the heads' outputs side by side
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        return self.proj(out)  # (B, T, C)


# --8<-- [end:multihead]


# --8<-- [start:batched]
class CausalSelfAttention(nn.Module):
    """What MultiHeadAttention computes, with all heads in one batched matmul."""

    def __init__(self, n_head: int, n_embed: int):
        super().__init__()
        self.n_head = n_head
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
        # One fused kernel: scores, causal mask, softmax and weighted sum.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B,H,T,D)
        # Heads back side by side, the channel layout of MultiHeadAttention's cat.
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)  # (B, T, C)


# --8<-- [end:batched]
