"""Differential attention (Ye et al. 2024, the Differential Transformer).

Each differential head computes two softmax maps from two halves of its
queries and keys and subtracts the second, scaled by a learned lambda, from
the first: weight that both maps put on the same keys cancels. The heads'
outputs are RMS-normed one by one and scaled by 1 - lambda_init.

The layout is transformers' DiffLlama's: H query heads make H softmax maps,
and differential head i pairs map i with map i + H / 2; its value is 2D wide,
the values of key/value heads g and g + G / 2 side by side (g the group of
query head i). RoPE turns adjacent channels, as everywhere in the guide.

Shape letters: B batch, T positions, C channels, H query heads (softmax
maps; H / 2 differential heads), G key/value heads, D head size.
"""

# --8<-- [start:imports]
import dataclasses
import math

import torch
import torch.nn as nn

from snippets.core.blocks import rms_norm
from snippets.core.cache import kv_cache
from snippets.core.checks import check_positive_int
from snippets.core.masks import visible
from snippets.core.rope_scaling import RopeSpec, rotate
from snippets.core.spec import LayerSpec
from snippets.layers.kv_heads import expand_kv

# --8<-- [end:imports]

__all__ = ["lambda_init", "differential_map", "DiffAttentionSpec", "DiffAttention"]


# --8<-- [start:lambda]
def lambda_init(depth: int) -> float:
    """lambda's constant part in the layer at depth (0 for the first layer):
    0.8 - 0.6 exp(-0.3 depth), the paper's 0.8 - 0.6 exp(-0.3 (l - 1))."""
    return 0.8 - 0.6 * math.exp(-0.3 * depth)


def differential_map(weights: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    """The H softmax maps (B, H, T, T_all) -> the H / 2 differential maps
    (B, H / 2, T, T_all): map i minus lam times map i + H / 2."""
    first, second = weights.chunk(2, dim=1)  # (B, H / 2, T, T_all) each
    return first - lam * second


# --8<-- [end:lambda]


# --8<-- [start:spec]
@dataclasses.dataclass(frozen=True)
class DiffAttentionSpec(LayerSpec):
    """One differential attention layer.

    Args:
        n_embed: C, the width of the input and output.
        n_head: H, query heads, two per differential head (even).
        n_kv_head: G, key/value heads: even, and divides H.
        head_size: D of each query and key head; a differential head's
            value is 2D wide.
        depth: the layer's index in the model (0 first), for lambda_init.
        rope: how queries and keys turn; None: no positions.
        bias: biases on the four projections (DiffLlama's attention_bias).
        eps: the per-head RMSNorm's epsilon.
    """

    n_embed: int
    n_head: int
    n_kv_head: int
    head_size: int
    depth: int = 0
    rope: RopeSpec | None = RopeSpec()
    bias: bool = False
    eps: float = 1e-5

    def __post_init__(self):
        for name in ("n_embed", "n_head", "n_kv_head", "head_size"):
            check_positive_int(name, getattr(self, name))
        if self.n_kv_head % 2 or self.n_head % self.n_kv_head:
            raise ValueError(
                f"n_kv_head ({self.n_kv_head}) must be even and divide n_head "
                f"({self.n_head}): a differential head reads two key heads"
            )
        if type(self.depth) is not int or self.depth < 0:
            raise ValueError(f"depth ({self.depth!r}) must be an int >= 0")
        if self.rope is not None:
            turned = self.rope.rotary_dim or self.head_size
            if turned > self.head_size or turned % 2:
                raise ValueError(
                    f"head_size ({self.head_size}): RoPE turns {turned} of its "
                    f"channels in pairs, an even number no more than head_size"
                )
        if not self.eps > 0:
            raise ValueError(f"eps ({self.eps!r}) must be > 0")

    def build(self) -> nn.Module:
        return DiffAttention(self)

    def parameters(self) -> int:
        """build()'s parameters, counted by hand: q, k, v, the output
        projection, and the four lambda vectors."""
        C, H, G, D = self.n_embed, self.n_head, self.n_kv_head, self.head_size
        projections = C * (H + 2 * G) * D + H * D * C
        biases = self.bias * ((H + 2 * G) * D + C)
        return projections + biases + 4 * D


# --8<-- [end:spec]


# --8<-- [start:layer]
class DiffAttention(nn.Module):
    """Differential attention as the spec says: weights q, k, v, proj and
    lambda_q1, lambda_k1, lambda_q2, lambda_k2."""

    def __init__(self, spec: DiffAttentionSpec):
        super().__init__()
        self.spec = s = spec
        C, H, G, D = s.n_embed, s.n_head, s.n_kv_head, s.head_size
        self.q = nn.Linear(C, H * D, bias=s.bias)
        self.k = nn.Linear(C, G * D, bias=s.bias)
        self.v = nn.Linear(C, G * D, bias=s.bias)
        self.proj = nn.Linear(H * D, C, bias=s.bias)
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            # N(0, 0.1), the paper's: each exp near 1, so lambda near lambda_init
            setattr(self, name, nn.Parameter(0.1 * torch.randn(D)))
        self.lambda_init = lambda_init(s.depth)

    def lam(self) -> torch.Tensor:
        """lambda, one number for the layer: a difference of two exps (each
        near 1 at the start) around lambda_init."""
        first = torch.exp(self.lambda_q1 @ self.lambda_k1)
        return first - torch.exp(self.lambda_q2 @ self.lambda_k2) + self.lambda_init

    def _turn(self, x, offset):
        """Queries or keys (B, n, T, D) turned to positions offset.."""
        return x if self.spec.rope is None else rotate(x, self.spec.rope, offset)

    def forward(self, x, cache=None, *, return_weights=False):
        """x (B, T, C) at positions 0 .. T - 1, or, with a cache, right after
        the positions it has seen -> (B, T, C); with return_weights, also the
        H softmax maps (B, H, T, T_all) (differential_map subtracts them)."""
        s, (B, T, _) = self.spec, x.shape
        H, G = s.n_head, s.n_kv_head
        q = self.q(x).view(B, T, H, -1).transpose(1, 2)  # (B, H, T, D)
        k = self.k(x).view(B, T, G, -1).transpose(1, 2)  # (B, G, T, D)
        v = self.v(x).view(B, T, G, -1).transpose(1, 2)  # (B, G, T, D)
        if cache is None:
            k, k_pos = self._turn(k, 0), torch.arange(T, device=x.device)
        else:  # keys turned once when new (to their places, if it rolls)
            (k, v), k_pos = cache.update(k, v, turn=self._turn)
        q = self._turn(q, k_pos.numel() - T)  # the last T of the positions
        k = expand_kv(k, H // G)  # (B, H, T_all, D)
        # Differential head i reads value heads g and g + G / 2, side by side.
        v = torch.cat(v.chunk(2, dim=1), dim=-1)  # (B, G / 2, T_all, 2D)
        v = expand_kv(v, H // G)  # (B, H / 2, T_all, 2D)
        scores = q @ k.transpose(-2, -1) * s.head_size**-0.5  # (B, H, T, T_all)
        mask = visible(k_pos[-T:], k_pos)  # (T, T_all): causal
        weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        # The maps subtracted before the values, as the paper writes it (DiffLlama
        # subtracts after, two fused calls: the same numbers, by linearity).
        y = differential_map(weights, self.lam()) @ v  # (B, H / 2, T, 2D)
        y = (1 - self.lambda_init) * rms_norm(y, None, s.eps)  # each head alone
        y = self.proj(y.transpose(1, 2).reshape(B, T, -1))  # (B, T, C)
        return (y, weights) if return_weights else y

    def new_cache(self, batch_size, max_length, *, window=None, sinks=0):
        """Keys and values of max_length positions; given a window, a rolling
        cache of window positions, sinks of them kept for good."""
        return kv_cache(max_length, window, sinks)


# --8<-- [end:layer]
