"""Fewer keys and values to cache, as the kv-heads page builds them: the generation
page's cached layer with G key/value heads shared by the H query heads (GQA; G = H
is MHA, G = 1 MQA), the same layer with keys and values made from a latent of R
numbers (MLA), and the bytes a cache holds.

Plain torch, and only what those pages and the kv-heads page explain: no position
scheme inside the layer, no checks. Shape letters: B batch, T new positions, S all
positions (the cached ones and the new), C channels, H query heads, G key/value
heads, D head size (C // H), R the latent's width.
"""

# --8<-- [start:imports]
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# --8<-- [end:imports]

__all__ = [
    "GroupedQueryAttention",
    "LatentCache",
    "MultiHeadLatentAttention",
    "kv_cache_bytes",
]


# --8<-- [start:gqa]
class GroupedQueryAttention(nn.Module):
    """CausalSelfAttention whose H query heads share G key/value heads."""

    def __init__(self, n_head: int, n_kv_head: int, n_embed: int):
        super().__init__()
        self.n_head = n_head
        self.n_kv_head = n_kv_head
        D = n_embed // n_head
        # One matmul for all three. Output channels: H heads of D queries, then G
        # of keys, then G of values (with G = H, CausalSelfAttention's layout).
        self.qkv = nn.Linear(n_embed, (n_head + 2 * n_kv_head) * D, bias=False)
        self.proj = nn.Linear(n_embed, n_embed)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        H, G, D = self.n_head, self.n_kv_head, C // self.n_head
        q, k, v = self.qkv(x).split([C, G * D, G * D], dim=-1)  # C + 2GD channels
        # Split channels into heads, move H next to B: each head is a batch entry.
        q = q.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        k = k.view(B, T, G, D).transpose(1, 2)  # (B, T, G*D) -> (B, G, T, D)
        v = v.view(B, T, G, D).transpose(1, 2)  # (B, T, G*D) -> (B, G, T, D)
        if cache is not None:  # the earlier positions' keys and values, then these
            k, v = cache.update(k, v)  # (B, G, T, D) -> (B, G, S, D)
        S = k.size(2)
        # Query head h reads key/value head h // (H // G): the copies of one head
        # side by side (repeat would tile them, 0 1 0 1, and pair the wrong ones).
        k = k.repeat_interleave(H // G, dim=1)  # (B, G, S, D) -> (B, H, S, D)
        v = v.repeat_interleave(H // G, dim=1)  # (B, G, S, D) -> (B, H, S, D)
        # The T queries are the last T of S positions: the causal mask's last T
        # rows (aligned bottom right). Without a cache S = T: the full mask.
        mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)
        # One fused kernel: scores, causal mask, softmax and weighted sum.
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B,H,T,D)
        # Heads back side by side, the channel layout of MultiHeadAttention's cat.
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)  # (B, T, C)


# --8<-- [end:gqa]


# --8<-- [start:latent_cache]
class LatentCache:
    """One MLA layer's latents of every position so far, (B, seen, R)."""

    def __init__(self):
        self.c = None
        self.seen = 0  # positions cached: the next new one is position `seen`

    def update(self, c):
        """Append the new positions' latents (B, T, R); return all of them."""
        if self.c is not None:
            c = torch.cat([self.c, c], dim=1)  # (B, seen + T, R)
        self.c, self.seen = c, c.size(1)
        return c  # (B, S, R)


# --8<-- [end:latent_cache]


# --8<-- [start:mla]
class MultiHeadLatentAttention(nn.Module):
    """CausalSelfAttention whose keys and values come from a latent of R numbers."""

    def __init__(self, n_head: int, n_embed: int, kv_latent: int):
        super().__init__()
        self.n_head = n_head
        # Queries as before. Keys and values: down to R numbers per position (all
        # a cache keeps), then up to H heads of D each.
        self.query = nn.Linear(n_embed, n_embed, bias=False)
        self.kv_down = nn.Linear(n_embed, kv_latent, bias=False)
        self.key_up = nn.Linear(kv_latent, n_embed, bias=False)
        self.value_up = nn.Linear(kv_latent, n_embed, bias=False)
        self.proj = nn.Linear(n_embed, n_embed)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head
        c = self.kv_down(x)  # (B, T, C) -> (B, T, R)
        if cache is not None:  # the earlier positions' latents, then these
            c = cache.update(c)  # (B, T, R) -> (B, S, R)
        S = c.size(1)
        q, k, v = self.query(x), self.key_up(c), self.value_up(c)  # (B, T|S, C)
        # Split channels into heads, move H next to B: each head is a batch entry.
        q = q.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        k = k.view(B, S, H, D).transpose(1, 2)  # (B, S, C) -> (B, H, S, D)
        v = v.view(B, S, H, D).transpose(1, 2)  # (B, S, C) -> (B, H, S, D)
        # The T queries are the last T of S positions: the causal mask's last T
        # rows (aligned bottom right). Without a cache S = T: the full mask.
        mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)
        # One fused kernel: scores, causal mask, softmax and weighted sum.
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B,H,T,D)
        # Heads back side by side, the channel layout of MultiHeadAttention's cat.
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)  # (B, T, C)

    # --8<-- [end:mla]

    # --8<-- [start:absorbed]
    def attend_absorbed(self, x, c):
        """What forward computes for the T positions of x, the last T of the S
        whose latents are c (B, S, R), without projecting c up: (B, T, C).

        Head h's score q_h . (W_k,h c) is (W_k,h^T q_h) . c, and its output
        sum_j w_j (W_v,h c_j) is W_v,h (sum_j w_j c_j): W_k,h moves to the query,
        W_v,h after the weighted sum, and every head reads the latents as they are.
        """
        B, T, C = x.shape
        S, R = c.shape[1:]
        H, D = self.n_head, C // self.n_head
        q = self.query(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        w_k = self.key_up.weight.view(H, D, R)  # head h: rows h*D .. h*D + D - 1
        w_v = self.value_up.weight.view(H, D, R)
        q = q @ w_k  # (B, H, T, D) x (H, D, R) -> (B, H, T, R)
        c = c.unsqueeze(1)  # (B, S, R) -> (B, 1, S, R): one key/value head, R wide
        mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)
        # Multi-query attention over the latents (enable_gqa: one head serves all
        # H), scaled by 1/sqrt(D) as forward's scores are.
        y = F.scaled_dot_product_attention(
            q, c, c, attn_mask=mask, scale=1 / math.sqrt(D), enable_gqa=True
        )  # (B, H, T, R): each head's weighted mean of the latents
        y = y @ w_v.transpose(1, 2)  # (B, H, T, R) x (H, R, D) -> (B, H, T, D)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)  # (B, T, C)

    # --8<-- [end:absorbed]


# --8<-- [start:kv_cache_bytes]
def kv_cache_bytes(
    *,
    n_layer,
    tokens,
    n_kv_head=0,
    head_size=0,
    kv_latent=0,
    rope_head_size=0,
    batch=1,
    bytes_per_element=2,
):
    """Bytes a cache holds for `tokens` positions of `batch` sequences: per token
    and layer, a key and a value of head_size for each of n_kv_head heads (MHA,
    GQA, MQA), or a latent of kv_latent numbers and DeepSeek-V2's decoupled RoPE
    key of rope_head_size (MLA; this page's layer has no RoPE key)."""
    per_token_and_layer = 2 * n_kv_head * head_size + kv_latent + rope_head_size
    return n_layer * per_token_and_layer * tokens * batch * bytes_per_element


# --8<-- [end:kv_cache_bytes]
