"""Causal self-attention for a decoder-only transformer: readable and batched.

Shape letters: B batch, T sequence length, C channels (n_embed), H heads, D head
size (C // H).
"""

# --8<-- [start:imports]
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.checks import (
    check_config,
    check_input,
    check_positive_int,
    check_qkv,
)
from snippets.core.masks import causal_mask

# --8<-- [end:imports]
# isort: split
# --8<-- [start:batched_imports]
# RoPE and ALiBi act inside attention: the batched layer takes a position scheme,
# and a cache (snippets/core/cache.py) of the positions it has read.
from snippets.core.cache import kv_cache, read
from snippets.core.masks import visible
from snippets.core.positions import alibi_mask, check_position
from snippets.core.spec import LayerSpec

# --8<-- [end:batched_imports]

__all__ = [
    "causal_mask",
    "scaled_dot_product_attention",
    "Head",
    "MultiHeadAttention",
    "CausalSelfAttention",
    "CausalSpec",
]


# --8<-- [start:sdpa]
def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q @ k^T / sqrt(D) + bias) @ v, written out term by term.

    Args:
        q: queries (..., T, D).
        k: keys (..., T_k, D), the same width D as q.
        v: values (..., T_k, D_v), one per key. Leading dims of q, k and v
            must broadcast; T_k = T in self-attention.
        mask: optional bool tensor broadcastable to (..., T, T_k), True where a
            query may attend to a key.
        bias: optional float tensor broadcastable to (..., T, T_k), added to
            the scaled scores (ALiBi's distance penalty; -inf entries mask).

    Returns:
        out (..., T, D_v) and the attention weights (..., T, T_k).

    Raises:
        ValueError: if q and k differ in width, k and v in length, the
            leading dims do not broadcast, or the mask does not fit the scores.
        TypeError: if the mask is not bool.
    """
    check_qkv(q, k, v, mask)
    D = q.size(-1)
    # Dividing by sqrt(D) keeps the scores' variance near 1 whatever the head size;
    # unscaled, it grows like D and softmax saturates towards a one-hot.
    # (..., T, D) x (..., D, T) -> (..., T, T)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if bias is not None:
        scores = scores + bias  # (..., T, T)
    if mask is not None:
        # -inf becomes exactly 0 after softmax: a masked position gets no weight.
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)  # (..., T, T), each row sums to 1
    out = weights @ v  # (..., T, T) x (..., T, D) -> (..., T, D)
    return out, weights


# --8<-- [end:sdpa]


# --8<-- [start:head]
class Head(nn.Module):
    """One head of causal self-attention, written out step by step.

    Args:
        head_size: D, the width of this head's queries, keys and values.
        n_embed: C, the width of the input vectors.
        context_length: the longest T; the causal mask has this many rows.
    """

    def __init__(self, head_size: int, n_embed: int, context_length: int):
        super().__init__()
        check_positive_int("head_size", head_size)
        check_positive_int("n_embed", n_embed)
        check_positive_int("context_length", context_length)
        self.head_size = head_size
        self.n_embed = n_embed
        self.context_length = context_length
        self.key = nn.Linear(n_embed, head_size, bias=False)
        self.query = nn.Linear(n_embed, head_size, bias=False)
        self.value = nn.Linear(n_embed, head_size, bias=False)
        # A buffer, not a parameter: it moves with .to(device), is never trained.
        tril = torch.tril(torch.ones(context_length, context_length))
        self.register_buffer("tril", tril)  # (context_length, context_length)

    def forward(self, x: torch.Tensor, *, return_weights: bool = False):
        """x (B, T, C) -> out (B, T, D); with return_weights, also (B, T, T)."""
        check_input(x, self.n_embed, self.context_length)
        B, T, C = x.shape
        k = self.key(x)  # (B, T, C) -> (B, T, D)
        q = self.query(x)  # (B, T, C) -> (B, T, D)
        v = self.value(x)  # (B, T, C) -> (B, T, D)
        # How well each query matches each key, (B, T, D) x (B, D, T) -> (B, T, T);
        # scaling by 1/sqrt(D) keeps their variance near 1 (softmax not saturated).
        weights = q @ k.transpose(-2, -1) * self.head_size**-0.5  # (B, T, T)
        # Position i may not see later positions: -inf there, 0 after softmax.
        weights = weights.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        weights = F.softmax(weights, dim=-1)  # (B, T, T), each row sums to 1
        out = weights @ v  # (B, T, T) x (B, T, D) -> (B, T, D)
        if return_weights:
            return out, weights
        return out


# --8<-- [end:head]


# --8<-- [start:multihead]
class MultiHeadAttention(nn.Module):
    """H heads side by side, each D = C // H wide, concatenated back to width C.

    Args:
        n_head: H, the number of heads; must divide n_embed.
        n_embed: C, the width of the input and output vectors.
        context_length: the longest T, as in Head.
    """

    def __init__(self, n_head: int, n_embed: int, context_length: int):
        super().__init__()
        check_config(n_head, n_embed, context_length)
        self.n_head = n_head
        self.n_embed = n_embed
        self.context_length = context_length
        head_size = n_embed // n_head
        self.heads = nn.ModuleList(
            [self.make_head(h, head_size) for h in range(n_head)]
        )
        # Mixes the heads' findings; without it each head's D channels stay apart.
        self.proj = nn.Linear(n_embed, n_embed)

    def make_head(self, h: int, head_size: int) -> nn.Module:
        """Head h of n_head: a plain Head (a variant builds its own kind here)."""
        return Head(head_size, self.n_embed, self.context_length)

    def forward(self, x: torch.Tensor, *, return_weights: bool = False):
        """x (B, T, C) -> out (B, T, C); with return_weights, also (B, H, T, T).

        Each head checks x (its width, its length) before using it.
        """
        if not return_weights:
            # H x (B, T, D) -> (B, T, C)
            out = torch.cat([h(x) for h in self.heads], dim=-1)
            return self.proj(out)  # (B, T, C)
        # Same computation, keeping each head's weights as well.
        pairs = [h(x, return_weights=True) for h in self.heads]
        out = torch.cat([o for o, _ in pairs], dim=-1)  # H x (B, T, D) -> (B, T, C)
        # H x (B, T, T) -> (B, H, T, T)
        weights = torch.stack([w for _, w in pairs], dim=1)
        return self.proj(out), weights

    # --8<-- [end:multihead]

    def new_cache(self, batch_size, max_length, *, window=None, sinks=0):
        raise TypeError(
            "the per-head layer keeps no keys: a cache needs the batched layer "
            "(CausalSpec with per_head=False), its qkv the heads' query, key "
            "and value weights stacked in that order"
        )


# --8<-- [start:batched]
class CausalSelfAttention(nn.Module):
    """What MultiHeadAttention computes, with all heads in one batched matmul.

    Same arguments as MultiHeadAttention, and a position scheme: "rope" and
    "alibi" act here, the others in the embeddings (or nowhere).
    `from_multihead` copies a MultiHeadAttention's weights.
    """

    def __init__(
        self,
        n_head: int,
        n_embed: int,
        context_length: int,
        *,
        position: str = "learned",
        max_length: int | None = None,
    ):
        super().__init__()
        check_config(n_head, n_embed, context_length)
        check_position(position, n_embed // n_head, context_length, max_length)
        self.n_head = n_head
        self.n_embed = n_embed
        self.context_length = context_length
        self.position = position
        self.max_length = max_length
        # One (C -> 3C) matmul instead of 3H small ones. Output channels: [0, C)
        # queries, [C, 2C) keys, [2C, 3C) values; in each, H heads of D channels.
        self.qkv = nn.Linear(n_embed, 3 * n_embed, bias=False)
        self.proj = nn.Linear(n_embed, n_embed)

    def forward(self, x: torch.Tensor, cache=None, *, return_weights=False):
        """x (B, T, C) -> out (B, T, C); with return_weights=True, returns (out,
        weights (B, H, T, T_all)). With a cache (snippets/core/cache.py), x holds
        the positions after those it has seen, and T_all counts them all."""
        check_input(x, self.n_embed, self.context_length, self.max_length)
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=-1)  # (B, T, 3C) -> 3 x (B, T, C)
        # Split channels into heads, move H next to B: each head is a batch entry.
        q = q.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        k = k.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        v = v.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        q, k, v, k_pos = read(cache, q, k, v, self.position)  # RoPE; + the cache
        T_all = k.size(2)  # T, and the cached positions before them
        # ALiBi's bias holds the causal mask too: -inf above the diagonal.
        bias = None
        if self.position == "alibi":
            bias = alibi_mask(H, T, T_all).to(device=x.device, dtype=q.dtype)
        # With a cache, it says which keys each query sees (the queries are last).
        mask = None if cache is None else cache.visible(k_pos[-T:], k_pos)
        if return_weights:
            # The fused kernel never stores the (T, T) weights; this path does.
            mask = visible(k_pos, k_pos) if mask is None else mask  # (T, T_all)
            y, weights = scaled_dot_product_attention(q, k, v, mask, bias=bias)
        elif bias is not None:
            # A float attn_mask is added to the scaled scores inside the kernel.
            # (B, H, T, D) x3, (H, T, T) -> (B, H, T, D)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        elif mask is None:
            # is_causal=True masks inside the kernel: no tril buffer needed.
            # (B, H, T, D) x3 -> (B, H, T, D)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # after cached positions: the causal mask's last T rows
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        # Heads back side by side, the channel layout of MultiHeadAttention's cat.
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        y = self.proj(y)  # (B, T, C)
        if return_weights:
            return y, weights  # (B, T, C), (B, H, T, T)
        return y

    def new_cache(self, batch_size, max_length, *, window=None, sinks=0):
        """An empty cache of this layer's keys and values (snippets/core/cache.py):
        max_length rows, or a rolling window with sinks."""
        return kv_cache(max_length, window, sinks)

    @classmethod
    def from_multihead(cls, mha: MultiHeadAttention) -> "CausalSelfAttention":
        """A CausalSelfAttention computing exactly the function mha computes."""
        if not isinstance(mha, MultiHeadAttention):
            raise TypeError(
                f"mha must be a MultiHeadAttention, got {type(mha).__name__}"
            )
        proj = mha.proj.weight
        new = cls(
            mha.n_head,
            mha.n_embed,
            mha.context_length,
            # The readable layer has no position scheme; a positional variant does.
            position=getattr(mha, "position", "learned"),
            max_length=getattr(mha, "max_length", None),
        )
        new = new.to(device=proj.device, dtype=proj.dtype)
        with torch.no_grad():
            # Each head's Linear weight is (D, C); H of them stacked in head order
            # are the rows that .view(B, T, H, D) later splits into the same heads.
            # 3H x (D, C) -> (3C, C)
            stacked = torch.cat(
                [h.query.weight for h in mha.heads]
                + [h.key.weight for h in mha.heads]
                + [h.value.weight for h in mha.heads]
            )
            new.qkv.weight.copy_(stacked)
            new.proj.load_state_dict(mha.proj.state_dict())
        return new


# --8<-- [end:batched]


# --8<-- [start:causal_spec]
@dataclasses.dataclass(frozen=True)
class CausalSpec(LayerSpec):
    """The plain causal layer of a block: CausalSelfAttention's arguments.

    A GPTConfig without layers builds one per block, with its own sizes and
    position scheme. In a config's layers (with position "learned",
    "sinusoidal" or "none" there), it is how ALiBi or RoPE joins a mix.
    per_head: the readable MultiHeadAttention instead, the same function with
    its weights in H heads (no positions inside it, and no cache).
    """

    n_embed: int
    n_head: int
    context_length: int
    position: str = "none"
    max_length: int | None = None
    per_head: bool = False

    def __post_init__(self):
        check_config(self.n_head, self.n_embed, self.context_length)
        D = self.n_embed // self.n_head
        check_position(self.position, D, self.context_length, self.max_length)
        if self.per_head and (
            self.position in ("rope", "alibi") or self.max_length
        ):
            raise ValueError(
                f"per_head=True with position={self.position!r}, max_length="
                f"{self.max_length}: the readable layer has no position scheme "
                f"inside, and takes up to context_length positions"
            )

    def build(self) -> nn.Module:
        s = self
        if s.per_head:
            return MultiHeadAttention(s.n_head, s.n_embed, s.context_length)
        where = {"position": s.position, "max_length": s.max_length}
        return CausalSelfAttention(s.n_head, s.n_embed, s.context_length, **where)

    def parameters(self) -> int:
        """q, k and v: three (C, C) maps without bias; proj: C * C + C."""
        C = self.n_embed
        return 3 * C * C + C * C + C


# --8<-- [end:causal_spec]
