"""The readable per-head attention with a position scheme inside it: RoPE, ALiBi.

The attention page's Head and MultiHeadAttention know no positions; these
subclasses add what the positions page explains, and let a scheme without a
table run longer than context_length (max_length). Shape letters: B batch, T
sequence length, C channels (n_embed), H heads, D head size (C // H).
"""

# --8<-- [start:imports]
import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.attention import Head, MultiHeadAttention
from snippets.checks import check_config, check_input
from snippets.masks import causal_mask
from snippets.positions import alibi_slopes, apply_position, check_position

# --8<-- [end:imports]

__all__ = ["PositionalHead", "PositionalMultiHeadAttention"]


# --8<-- [start:head]
class PositionalHead(Head):
    """Head, with RoPE turning q and k or ALiBi's distance penalty on the scores.

    Args:
        head_size: D, as in Head.
        n_embed: C, as in Head.
        context_length: the training length, as in Head.
        position: a name in POSITIONS; only "rope" and "alibi" act here.
        alibi_slope: this head's slope, for position="alibi" and only then.
        max_length: the longest T accepted (default context_length); longer
            than context_length only for a scheme without a position table.
    """

    def __init__(
        self,
        head_size: int,
        n_embed: int,
        context_length: int,
        *,
        position: str = "learned",
        alibi_slope: float | None = None,
        max_length: int | None = None,
    ):
        super().__init__(head_size, n_embed, context_length)
        check_position(position, head_size, context_length, max_length)
        if (position == "alibi") != (alibi_slope is not None):
            raise ValueError(
                f"alibi_slope ({alibi_slope!r}) must be given for "
                f"position='alibi' and only then (position={position!r})"
            )
        self.position = position
        self.alibi_slope = alibi_slope
        self.max_length = max_length

    def forward(self, x: torch.Tensor, *, return_weights: bool = False):
        """x (B, T, C) -> out (B, T, D); with return_weights, also (B, T, T)."""
        check_input(x, self.n_embed, self.context_length, self.max_length)
        B, T, C = x.shape
        k, q, v = self.key(x), self.query(x), self.value(x)  # (B, T, D) each
        q, k = apply_position(q, k, self.position)  # RoPE turns q and k
        weights = q @ k.transpose(-2, -1) * self.head_size**-0.5  # (B, T, T)
        if self.position == "alibi":
            # ALiBi: a penalty growing linearly with the distance i - j back.
            i = torch.arange(T, device=x.device)
            distance = (i[:, None] - i[None, :]).clamp(min=0)  # (T, T)
            weights = weights - self.alibi_slope * distance  # (B, T, T)
        # Built for this T, which may exceed the tril buffer's context_length rows.
        future = ~causal_mask(T).to(x.device)  # (T, T), True above the diagonal
        weights = weights.masked_fill(future, float("-inf"))
        weights = F.softmax(weights, dim=-1)  # (B, T, T), each row sums to 1
        out = weights @ v  # (B, T, T) x (B, T, D) -> (B, T, D)
        if return_weights:
            return out, weights
        return out


# --8<-- [end:head]


# --8<-- [start:multihead]
class PositionalMultiHeadAttention(MultiHeadAttention):
    """MultiHeadAttention made of PositionalHeads; ALiBi gives each its slope.

    Args:
        n_head: H, as in MultiHeadAttention.
        n_embed: C, as in MultiHeadAttention.
        context_length: the training length, as in MultiHeadAttention.
        position: as in PositionalHead; ALiBi gets one slope per head.
        max_length: as in PositionalHead.
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
        check_config(n_head, n_embed, context_length)
        check_position(position, n_embed // n_head, context_length, max_length)
        # Plain attributes first: MultiHeadAttention.__init__ calls make_head,
        # which reads them (nn.Module accepts non-tensor attributes this early).
        self.position = position
        self.max_length = max_length
        # ALiBi gives every head its own slope: some look far back, some near.
        self.slopes = alibi_slopes(n_head).tolist() if position == "alibi" else None
        super().__init__(n_head, n_embed, context_length)

    def make_head(self, h: int, head_size: int) -> nn.Module:
        return PositionalHead(
            head_size,
            self.n_embed,
            self.context_length,
            position=self.position,
            alibi_slope=None if self.slopes is None else self.slopes[h],
            max_length=self.max_length,
        )

    # --8<-- [end:multihead]

    def new_cache(self, batch_size, max_length, *, window=None, sinks=0):
        raise TypeError(
            "the per-head layer keeps no keys: a cache needs the batched layer; "
            "make the GPT with attention='fused' and copy the weights over "
            "(CausalSelfAttention.from_multihead(layer) for each block's "
            "attention; every other weight has the same name)"
        )
