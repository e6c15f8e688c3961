"""One attention layer for today's models: every choice is a field of a spec.

Needs torch and the guide's pieces: snippets/checks.py, snippets/cache.py (the
cache), snippets/rope_scaling.py (scaled and partial RoPE),
snippets/layer_schedule.py (window and chunk layers, the NoPE temperature),
snippets/taming.py (QK-norm, soft-cap, sinks, the output gate) and
snippets/kv_heads.py (expand_kv). A family is data: a list of
AttentionSpec, one per layer (lab/families.py builds them from published
configs); the layer has no branch per family.

Shape letters: B batch, T positions, C channels, H query heads, G key/value
heads, D head size (any size: C need not be H * D).
"""

# --8<-- [start:imports]
import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.cache import LayerCache, check_cache
from snippets.checks import check_positive_int
from snippets.kv_heads import expand_kv
from snippets.layer_schedule import KINDS, nope_temperature, visible
from snippets.rope_scaling import RopeSpec, rotate
from snippets.taming import (
    GATES,
    QK_NORMS,
    gate_output,
    qk_norm,
    sink_softmax,
    soft_cap,
)

# --8<-- [end:imports]

__all__ = ["AttentionSpec", "ConfigurableAttention", "LayerCache"]


# Why a rolling cache does not fit: keys turn once, at their own positions.
WHY = "its window layers are kind='window' in the spec, with its new_cache()"


# --8<-- [start:spec]
@dataclasses.dataclass(frozen=True)
class AttentionSpec:
    """The choices of one layer.

    Args:
        n_embed: C, the width of the input and output.
        n_head: H, query heads.
        n_kv_head: G, key/value heads; divides H.
        head_size: D, any size: H * D need not be C.
        kind: "full", "window" or "chunk".
        size: the window or chunk, in positions (None for "full").
        rope: how queries and keys turn; None: no positions (NoPE).
        scale: the scores' factor (None: 1 / sqrt(D); Gemma's 1 / sqrt(256)).
        bias: biases on the q, k, v projections.
        out_bias: a bias on the output projection.
        qk_norm: None, "head" or "all" (snippets.taming).
        qk_norm_weight: False for a norm without learned scales (Llama 4).
        qk_norm_after_rope: normalise after RoPE (Llama 4), not before.
        eps: the norms' epsilon.
        softcap: Gemma 2's cap on the scores, None: none.
        sinks: a learned sink logit per head (gpt-oss).
        gate: None, "elementwise" or "head": the output gate (Qwen3-Next).
        temperature: (floor_scale, attn_scale) of Llama 4's NoPE layers.
    """

    n_embed: int
    n_head: int
    n_kv_head: int
    head_size: int
    kind: str = "full"
    size: int | None = None
    rope: RopeSpec | None = RopeSpec()
    scale: float | None = None
    bias: bool = False
    out_bias: bool = False
    qk_norm: str | None = None
    qk_norm_weight: bool = True
    qk_norm_after_rope: bool = False
    eps: float = 1e-6
    softcap: float | None = None
    sinks: bool = False
    gate: str | None = None
    temperature: tuple[int, float] | None = None

    def __post_init__(self):
        for name in ("n_embed", "n_head", "n_kv_head", "head_size"):
            check_positive_int(name, getattr(self, name))
        if self.n_head % self.n_kv_head:
            raise ValueError(
                f"n_kv_head ({self.n_kv_head}) must divide n_head ({self.n_head})"
            )
        if self.kind not in KINDS:
            raise ValueError(f"kind ({self.kind!r}) must be one of {list(KINDS)}")
        if (self.kind == "full") != (self.size is None):
            raise ValueError(
                f"size ({self.size!r}) is for window and chunk layers only, "
                f"and they need one (kind={self.kind!r})"
            )
        if self.qk_norm not in QK_NORMS:
            raise ValueError(
                f"qk_norm ({self.qk_norm!r}) must be one of {QK_NORMS}"
            )
        if self.gate not in GATES:
            raise ValueError(f"gate ({self.gate!r}) must be one of {GATES}")
        if self.temperature is not None and self.rope is not None:
            raise ValueError(
                "temperature is Llama 4's for layers without RoPE (rope=None)"
            )


# --8<-- [end:spec]


# --8<-- [start:layer]
class ConfigurableAttention(nn.Module):
    """Attention as the spec says; weights named and laid out as q, k, v, proj."""

    def __init__(self, spec: AttentionSpec):
        super().__init__()
        self.spec = s = spec
        H, G, D, C = s.n_head, s.n_kv_head, s.head_size, s.n_embed
        self.q = nn.Linear(C, H * D, bias=s.bias)
        self.k = nn.Linear(C, G * D, bias=s.bias)
        self.v = nn.Linear(C, G * D, bias=s.bias)
        self.proj = nn.Linear(H * D, C, bias=s.out_bias)
        if s.qk_norm and s.qk_norm_weight:
            self.q_norm = nn.Parameter(
                torch.ones(D if s.qk_norm == "head" else H * D)
            )
            self.k_norm = nn.Parameter(
                torch.ones(D if s.qk_norm == "head" else G * D)
            )
        if s.sinks:
            self.sinks = nn.Parameter(torch.zeros(H))
        if s.gate:
            width = H * D if s.gate == "elementwise" else H
            self.gate = nn.Linear(C, width, bias=s.bias)
        self.scale = s.scale or D**-0.5

    def _norm(self, q, k):
        s = self.spec
        weights = (self.q_norm, self.k_norm) if s.qk_norm_weight else (None, None)
        across = s.qk_norm == "all"
        q = qk_norm(q, weights[0], s.eps, across_heads=across)
        return q, qk_norm(k, weights[1], s.eps, across_heads=across)

    def project(self, x: torch.Tensor, offset: int = 0):
        """x (B, T, C) at positions offset.. -> q (B, H, T, D), k, v (B, G, T, D)"""
        s, (B, T, _) = self.spec, x.shape
        q = self.q(x).view(B, T, s.n_head, -1).transpose(1, 2)
        k = self.k(x).view(B, T, s.n_kv_head, -1).transpose(1, 2)
        v = self.v(x).view(B, T, s.n_kv_head, -1).transpose(1, 2)
        if s.qk_norm and not s.qk_norm_after_rope:
            q, k = self._norm(q, k)  # Qwen3, Gemma 3: before RoPE
        if s.rope is not None:
            q, k = rotate(q, s.rope, offset), rotate(k, s.rope, offset)
        if s.qk_norm and s.qk_norm_after_rope:
            q, k = self._norm(q, k)  # Llama 4: after RoPE
        if s.temperature is not None:  # Llama 4's NoPE layers
            t = torch.arange(offset, offset + T, device=x.device)
            warm = nope_temperature(t, *s.temperature).to(q.dtype)  # (T,)
            q = q * warm[:, None]
        return q, k, v

    # --8<-- [end:layer]

    # --8<-- [start:attend]
    def attend(self, q, k, v, mask=None, *, return_weights=False):
        """q (B, H, Tn, D), k, v (B, G, Ta, D), mask (Tn, Ta) bool (None:
        causal, Tn == Ta) -> the heads' outputs (B, H, Tn, D), and with
        return_weights the weights (B, H, Tn, Ta).

        Without a cap or sinks, the fused kernel; with them, written out.
        """
        s = self.spec
        group = s.n_head // s.n_kv_head
        # A copy of each key/value head per query head, not enable_gqa: the
        # faster of the two for the fused kernel on CPU.
        k, v = expand_kv(k, group), expand_kv(v, group)  # (B, H, Ta, D)
        if s.softcap is None and not s.sinks and not return_weights:
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=mask is None, scale=self.scale
            )
        scores = (q @ k.transpose(-2, -1)) * self.scale  # (B, H, Tn, Ta)
        if s.softcap is not None:
            scores = soft_cap(scores, s.softcap)  # before the mask, as Gemma 2
        if mask is None:
            T = q.size(-2)
            mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        if s.sinks:
            weights = sink_softmax(scores, self.sinks)
        else:
            weights = scores.softmax(dim=-1)
        y = weights @ v  # (B, H, Tn, D)
        return (y, weights) if return_weights else y

    def forward(self, x, cache=None, *, return_weights=False):
        """x (B, T, C) at positions 0 .. T - 1, or, with a cache, right after
        the positions it has seen (which it then holds too) -> (B, T, C); with
        return_weights, also the weights (B, H, T, T_all)."""
        s, (B, T, _) = self.spec, x.shape
        offset = 0 if cache is None else cache.seen
        q, k, v = self.project(x, offset)
        q_pos = torch.arange(offset, offset + T, device=x.device)
        if cache is not None:
            check_cache(cache, KINDS, "ConfigurableAttention", WHY)
            (k, v), k_pos = cache.add(k, v)
            mask = visible(q_pos, k_pos, s.kind, s.size)
        else:  # the square: causal is the kernel's own flag
            mask = (
                None if s.kind == "full" else visible(q_pos, q_pos, s.kind, s.size)
            )
        y = self.attend(q, k, v, mask, return_weights=return_weights)
        y, weights = y if return_weights else (y, None)
        y = y.transpose(1, 2).reshape(B, T, -1)  # (B, T, H * D)
        if s.gate:
            y = gate_output(y, self.gate(x), s.n_head)  # (B, T, H * D)
        y = self.proj(y)  # (B, T, C)
        return (y, weights) if return_weights else y

    def new_cache(self) -> LayerCache:
        """An empty cache of this layer's kind."""
        return LayerCache(self.spec.kind, self.spec.size)


# --8<-- [end:attend]
