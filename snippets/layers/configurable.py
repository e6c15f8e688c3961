"""One attention layer for today's models: every choice is a field of a spec.

A family is data: a list of AttentionSpec, one per layer (lab/oracle/families.py
builds them from published configs); the layer has no branch per family.

Shape letters: B batch, T positions, C channels, H query heads, G key/value
heads, D head size (any size: C need not be H * D).
"""

# --8<-- [start:imports]
import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.cache import LayerCache, SharedCache, no_rolling
from snippets.core.checks import check_positive_int
from snippets.core.masks import KINDS, nope_temperature, visible
from snippets.core.positions import alibi_at
from snippets.core.rope_scaling import RopeSpec, rotate
from snippets.core.spec import LayerSpec
from snippets.layers.kv_heads import expand_kv
from snippets.layers.taming import (
    GATES,
    QK_NORMS,
    gate_output,
    qk_norm,
    rms_norm,
    sink_softmax,
    soft_cap,
)

# --8<-- [end:imports]

__all__ = ["AttentionSpec", "ConfigurableAttention", "LayerCache"]


# Why a rolling cache does not fit: keys turn once, at their own positions.
WHY = "its keys turn once, at their own positions (a spec's window: kind='window')"


# --8<-- [start:spec]
@dataclasses.dataclass(frozen=True)
class AttentionSpec(LayerSpec):
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
        qk_norm: None, "head" or "all" (snippets.layers.taming).
        qk_norm_weight: False for a norm without learned scales (Llama 4).
        qk_norm_after_rope: normalise after RoPE (Llama 4), not before.
        eps: the norms' epsilon.
        soft_cap: Gemma 2's cap on the scores, None: none.
        sinks: a learned sink logit per head (gpt-oss).
        gate: None, "elementwise" or "head": the output gate (Qwen3-Next).
        temperature: (floor_scale, attn_scale) of Llama 4's NoPE layers.
        k_eq_v: the values are the key projection's output, before the keys'
            norm and RoPE (Gemma 4's full layers): no v weights, and a cache
            of one tensor, from which keys and values are derived on reading.
        v_norm: an RMSNorm without scales on each value head (Gemma 4).
        kv_source: the index of the layer whose keys and values this one
            reads, through a SharedCache on that layer's cache (Gemma 4's
            num_kv_shared_layers): no k and v weights. None: its own.
        alibi: ALiBi's distance penalty on the scores (with rope None).
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
    soft_cap: float | None = None
    sinks: bool = False
    gate: str | None = None
    temperature: tuple[int, float] | None = None
    k_eq_v: bool = False
    v_norm: bool = False
    kv_source: int | None = None
    alibi: bool = False

    def __post_init__(self):
        for name in ("n_embed", "n_head", "n_kv_head", "head_size"):
            check_positive_int(name, getattr(self, name))
        if self.n_head % self.n_kv_head:
            raise ValueError(
                f"n_kv_head ({self.n_kv_head}) must divide n_head ({self.n_head}): "
                f"each key/value head serves the same number of query heads"
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
        if self.alibi and self.rope is not None:
            raise ValueError(
                f"alibi=True with rope={self.rope!r}: ALiBi is a layer's one "
                f"position scheme (rope=None)"
            )
        if self.temperature is not None and self.rope is not None:
            raise ValueError(
                "temperature is Llama 4's for layers without RoPE (rope=None)"
            )
        if self.kv_source is not None:
            if (
                isinstance(self.kv_source, bool)
                or not isinstance(self.kv_source, int)
                or self.kv_source < 0
            ):
                raise ValueError(
                    f"kv_source ({self.kv_source!r}) must be a layer index"
                    " (an int >= 0)"
                )
            if self.k_eq_v or self.v_norm:
                raise ValueError(
                    f"kv_source ({self.kv_source}) with k_eq_v={self.k_eq_v}, "
                    f"v_norm={self.v_norm}: a sharing layer makes no keys or "
                    f"values; those choices are its source layer's"
                )

    def build(self) -> nn.Module:
        return ConfigurableAttention(self)

    def parameters(self) -> int:
        """build()'s parameters, counted by hand."""
        s = self
        C, H, G, D = s.n_embed, s.n_head, s.n_kv_head, s.head_size
        own = s.kv_source is None
        kv = (own + (own and not s.k_eq_v)) * (C * G * D + s.bias * G * D)
        count = C * H * D + s.bias * H * D + kv + H * D * C + s.out_bias * C
        if s.qk_norm and s.qk_norm_weight:  # a scale per channel of q, k
            count += D * (1 + own) if s.qk_norm == "head" else H * D + own * G * D
        width = H * D if s.gate == "elementwise" else H
        count += s.sinks * H + (s.gate is not None) * (C + s.bias) * width
        return count


# --8<-- [end:spec]


# --8<-- [start:layer]
class ConfigurableAttention(nn.Module):
    """Attention as the spec says; weights named and laid out as q, k, v, proj."""

    def __init__(self, spec: AttentionSpec):
        super().__init__()
        self.spec = s = spec
        H, G, D, C = s.n_head, s.n_kv_head, s.head_size, s.n_embed
        own_kv = s.kv_source is None
        self.q = nn.Linear(C, H * D, bias=s.bias)
        if own_kv:
            self.k = nn.Linear(C, G * D, bias=s.bias)
        if own_kv and not s.k_eq_v:
            self.v = nn.Linear(C, G * D, bias=s.bias)
        self.proj = nn.Linear(H * D, C, bias=s.out_bias)
        if s.qk_norm and s.qk_norm_weight:
            self.q_norm = nn.Parameter(
                torch.ones(D if s.qk_norm == "head" else H * D)
            )
        if s.qk_norm and s.qk_norm_weight and own_kv:
            self.k_norm = nn.Parameter(
                torch.ones(D if s.qk_norm == "head" else G * D)
            )
        if s.sinks:
            self.sinks = nn.Parameter(torch.zeros(H))
        if s.gate:
            width = H * D if s.gate == "elementwise" else H
            self.gate = nn.Linear(C, width, bias=s.bias)
        self.scale = s.scale or D**-0.5
        self.kv_source = s.kv_source  # the layer whose keys and values it reads

    def _norm(self, x, weight_name: str):
        s = self.spec
        weight = getattr(self, weight_name) if s.qk_norm_weight else None
        return qk_norm(x, weight, s.eps, across_heads=s.qk_norm == "all")

    def _turn(self, x, weight_name: str, offset):
        """Queries or keys (B, n, T, D) at positions offset..: normed, turned."""
        s = self.spec
        if s.qk_norm and not s.qk_norm_after_rope:
            x = self._norm(x, weight_name)  # Qwen3, Gemma 3: before RoPE
        if s.rope is not None:
            x = rotate(x, s.rope, offset)
        if s.qk_norm and s.qk_norm_after_rope:
            x = self._norm(x, weight_name)  # Llama 4: after RoPE
        return x

    def keys_values(self, k, v, offset=0):
        """The projections' k, v (B, G, T, D) at positions offset.. (or at
        each row's own, a (T,) tensor) -> the keys and values attended to. With
        k_eq_v, v is k's output itself, before the keys' norm and RoPE turn k."""
        s = self.spec
        v = k if s.k_eq_v else v
        if s.v_norm:
            v = rms_norm(v, None, s.eps)  # Gemma 4: no scales
        return self._turn(k, "k_norm", offset), v

    def project(self, x: torch.Tensor, offset=0):
        """x (B, T, C) at positions offset.. (or at each row's own, a (T,)
        tensor) -> q (B, H, T, D), and the projections k, v (B, G, T, D) not
        yet normed or turned (None: a sharing layer's; v None with k_eq_v)."""
        s, (B, T, _) = self.spec, x.shape
        q = self.q(x).view(B, T, s.n_head, -1).transpose(1, 2)
        q = self._turn(q, "q_norm", offset)
        if s.temperature is not None:  # Llama 4's NoPE layers
            t = torch.arange(offset, offset + T) if type(offset) is int else offset
            t = t.to(x.device)
            warm = nope_temperature(t, *s.temperature).to(q.dtype)  # (T,)
            q = q * warm[:, None]
        k = v = None
        if s.kv_source is None:
            k = self.k(x).view(B, T, s.n_kv_head, -1).transpose(1, 2)
        if s.kv_source is None and not s.k_eq_v:
            v = self.v(x).view(B, T, s.n_kv_head, -1).transpose(1, 2)
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
        if mask is not None and mask.is_floating_point():
            mask = mask.to(q.dtype)  # ALiBi's bias, in the scores' dtype
        group = s.n_head // s.n_kv_head
        # A copy of each key/value head per query head. enable_gqa is faster on
        # torch 2.13's CPU kernel but sums the shared heads' gradients in
        # another order: the committed models were trained with the copy.
        k, v = expand_kv(k, group), expand_kv(v, group)  # (B, H, Ta, D)
        if s.soft_cap is None and not s.sinks and not return_weights:
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=mask is None, scale=self.scale
            )
        scores = (q @ k.transpose(-2, -1)) * self.scale  # (B, H, Tn, Ta)
        if s.soft_cap is not None:
            scores = soft_cap(scores, s.soft_cap)  # before the mask, as Gemma 2
        if mask is None:
            T = q.size(-2)
            mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:  # ALiBi's bias, -inf where a key is hidden
            scores = scores + mask
        if s.sinks:
            weights = sink_softmax(scores, self.sinks)
        else:
            weights = scores.softmax(dim=-1)
        y = weights @ v  # (B, H, Tn, D)
        return (y, weights) if return_weights else y

    def forward(self, x, cache=None, *, return_weights=False):
        """x (B, T, C) at positions 0 .. T - 1, or, with a cache, right after
        the positions it has seen (which it then holds too) -> (B, T, C); with
        return_weights, also the weights (B, H, T, T_all). A layer with a
        kv_source takes a SharedCache, after its source has read x's positions."""
        s, (B, T, _) = self.spec, x.shape
        if s.kv_source is not None:
            y = self._shared(x, cache, return_weights)
        else:
            y = self._own(x, cache, return_weights)
        y, weights = y if return_weights else (y, None)
        y = y.transpose(1, 2).reshape(B, T, -1)  # (B, T, H * D)
        if s.gate:
            y = gate_output(y, self.gate(x), s.n_head)  # (B, T, H * D)
        y = self.proj(y)  # (B, T, C)
        return (y, weights) if return_weights else y

    def _mask(self, q_pos, k_pos, cache=None, square=False):
        """Which keys each query sees (Tn, Ta) bool, as the cache says; None
        for a full layer's square (the kernel's causal flag); with ALiBi, its
        float bias."""
        s = self.spec
        if square and s.kind == "full" and not s.alibi:
            return None
        if cache is None:
            mask = visible(q_pos, k_pos, s.kind, s.size)
        else:
            mask = cache.visible(q_pos, k_pos, s.kind, s.size)
        return alibi_at(s.n_head, q_pos, k_pos, mask) if s.alibi else mask

    def _own(self, x, cache, return_weights):
        s, T = self.spec, x.size(1)
        # The new tokens' positions: offset .. offset + T - 1, or, in a paged
        # batch, each token's place in its own sequence.
        where = torch.arange(T) if cache is None else cache.next_positions(T)
        q, k, v = self.project(x, where)  # turned on the host's positions
        q_pos = where.to(x.device)
        if cache is None:  # the square: causal is the kernel's own flag
            k, v = self.keys_values(k, v)
            mask = self._mask(q_pos, q_pos, square=True)
            return self.attend(q, k, v, mask, return_weights=return_weights)
        if s.k_eq_v:  # one tensor cached: keys and values derived from it
            (k,), k_pos = cache.update(k)
            start = cache.seen - k_pos.numel()  # held positions run on from here
            k, v = self.keys_values(k, None, start)
        else:  # keys turned once, when new
            (k, v), k_pos = cache.update(*self.keys_values(k, v, where))
        if cache.readers:  # layers reading this one's keys and values
            cache.attended = (k, v, k_pos)
        mask = self._mask(q_pos, k_pos, cache)
        return self.attend(q, k, v, mask, return_weights=return_weights)

    def _shared(self, x, cache, return_weights):
        s, T = self.spec, x.size(1)
        if cache is None:
            raise ValueError(
                f"this layer reads layer {s.kv_source}'s keys and values: "
                f"give it the cache new_cache(..., source=that layer's cache), "
                f"after that layer has read the same positions"
            )
        (k, v), k_pos = cache.update()
        q, _, _ = self.project(x, cache.seen - T)
        q_pos = torch.arange(cache.seen - T, cache.seen, device=x.device)
        mask = self._mask(q_pos, k_pos)
        return self.attend(q, k, v, mask, return_weights=return_weights)

    def new_cache(
        self, batch_size, max_length, *, window=None, sinks=0, source=None
    ):
        """An empty cache of this layer's kind, full ones max_length rows; for a
        layer with a kv_source, a SharedCache on its source layer's cache."""
        no_rolling(self, window, WHY)
        s = self.spec
        if (s.kv_source is None) != (source is None):
            raise ValueError(
                f"source ({type(source).__name__}) is for a layer with a "
                f"kv_source, and it needs one (kv_source={s.kv_source})"
            )
        if source is None:
            return LayerCache(s.kind, s.size, max_length)
        if (source.kind, source.size) != (s.kind, s.size):
            raise ValueError(
                f"a {s.kind} layer (size {s.size}) cannot read a {source.kind} "
                f"layer's cache (size {source.size}): its source must be its kind"
            )
        return SharedCache(source)


# --8<-- [end:attend]
