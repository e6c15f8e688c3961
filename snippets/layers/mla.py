"""Multi-head latent attention as DeepSeek-V2 and V3 run it: with RoPE.

snippets/layers/kv_heads.py has the simple MLA, without RoPE, which is this one with
its extra parts off and a bias on its output projection (ALiBi, which this
layer does not add, aside); this is the full one (DeepSeek-V2, section 2.1):

- the query is compressed too: x -> q_rank numbers -> RMSNorm -> heads;
- the latent c (kv_latent numbers per position) is RMSNorm-ed; it is what the
  cache keeps, with
- one decoupled RoPE key of rope_head_size per position, shared by all heads:
  RoPE cannot sit between the latent and the query (it would turn the key
  up-projection differently at every position), so each head's query has a
  second part that meets this one turned key;
- the absorbed decode (section 2.1.3): the key up-projection moves to the
  query side and the value up-projection after the weighted sum, so a step
  reads the latents and rope keys directly.

Shape letters: B batch, T positions, C channels, H heads, R kv_latent, Dn the
no-RoPE part of a query/key head, Dr its RoPE part, Dv a value head.
"""

# --8<-- [start:imports]
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.cache import LayerCache, no_rolling
from snippets.core.checks import check_positive_int
from snippets.core.masks import visible
from snippets.core.positions import alibi_at
from snippets.core.rope_scaling import RopeSpec, rotate
from snippets.core.spec import LayerSpec

# --8<-- [end:imports]

__all__ = ["MLASpec", "LatentAttention"]


# Why a rolling cache does not fit: the rope keys turn once, when new.
WHY = "it caches rope keys turned at their own positions"


# --8<-- [start:spec]
@dataclasses.dataclass(frozen=True)
class MLASpec(LayerSpec):
    """One MLA layer's numbers (DeepSeek-V3: C=7168, H=128, q_rank=1536,
    kv_latent=512, Dn=128, Dr=64, Dv=128).

    q_rank None: queries projected straight from x (DeepSeek-V2-Lite).
    scale None: 1 / sqrt(Dn + Dr). rope None: the Dr part unturned (Kimi Linear).
    proj_bias None: as bias. With rope_head_size 0, q_rank None, latent_norm
    False and proj_bias True, the kv-heads page's MLA.
    """

    n_embed: int
    n_head: int
    kv_latent: int
    nope_head_size: int
    rope_head_size: int
    v_head_size: int
    q_rank: int | None = None
    rope: RopeSpec | None = RopeSpec()
    scale: float | None = None
    eps: float = 1e-6
    bias: bool = False
    latent_norm: bool = True
    proj_bias: bool | None = None
    alibi: bool = False  # ALiBi's distance penalty (no RoPE part: Dr = 0)

    def __post_init__(self):
        for name in (
            "n_embed",
            "n_head",
            "kv_latent",
            "nope_head_size",
            "v_head_size",
        ):
            check_positive_int(name, getattr(self, name))
        none = self.rope_head_size == 0 and self.rope is None  # GLM-5-Next: NoPE
        if not none and (self.rope_head_size < 2 or self.rope_head_size % 2):
            raise ValueError(
                f"rope_head_size ({self.rope_head_size}) must be even and >= 2"
                " (0 only without RoPE)"
            )
        if self.alibi and not none:
            raise ValueError(
                f"alibi=True with rope_head_size={self.rope_head_size}, "
                f"rope={self.rope!r}: ALiBi is a layer's one position scheme "
                f"(rope_head_size 0, rope None)"
            )

    def build(self) -> nn.Module:
        return LatentAttention(self)

    def parameters(self) -> int:
        """build()'s parameters, counted by hand."""
        s, C, H = self, self.n_embed, self.n_head
        R, Dq = s.kv_latent, s.nope_head_size + s.rope_head_size
        if s.q_rank is None:
            q = C * H * Dq
        else:  # down (and its bias), the norm's scales, up
            q = C * s.q_rank + s.bias * s.q_rank + s.q_rank + s.q_rank * H * Dq
        kv = (C + s.bias) * (R + s.rope_head_size) + s.latent_norm * R  # down; norm
        kv += R * H * (s.nope_head_size + s.v_head_size)  # up
        proj_bias = s.bias if s.proj_bias is None else s.proj_bias
        return q + kv + H * s.v_head_size * C + proj_bias * C  # and proj


# --8<-- [end:spec]


# --8<-- [start:layer]
class LatentAttention(nn.Module):
    """DeepSeek's MLA; the weights are laid out as in its checkpoints."""

    def __init__(self, spec: MLASpec):
        super().__init__()
        self.spec = s = spec
        H, C = s.n_head, s.n_embed
        Dq = s.nope_head_size + s.rope_head_size  # a query (and key) head
        if s.q_rank is None:
            self.q_proj = nn.Linear(C, H * Dq, bias=False)
        else:  # x -> q_rank -> RMSNorm -> H heads
            self.q_down = nn.Linear(C, s.q_rank, bias=s.bias)
            self.q_norm = nn.RMSNorm(s.q_rank, eps=s.eps)
            self.q_up = nn.Linear(s.q_rank, H * Dq, bias=False)
        # x -> [latent (R) | the shared rope key (Dr)]: all a cache keeps.
        self.kv_down = nn.Linear(C, s.kv_latent + s.rope_head_size, bias=s.bias)
        self.kv_norm = nn.RMSNorm(s.kv_latent, eps=s.eps)
        if not s.latent_norm:
            self.kv_norm = nn.Identity()
        # latent -> per head [key without RoPE (Dn) | value (Dv)]
        self.kv_up = nn.Linear(
            s.kv_latent, H * (s.nope_head_size + s.v_head_size), bias=False
        )
        proj_bias = s.bias if s.proj_bias is None else s.proj_bias
        self.proj = nn.Linear(H * s.v_head_size, C, bias=proj_bias)
        self.scale = s.scale or 1 / math.sqrt(Dq)

    def queries(self, x: torch.Tensor, offset: int = 0, latent=None):
        """x (B, T, C) -> q_nope (B, H, T, Dn), q_rope (B, H, T, Dr) turned.
        latent: q_norm(q_down(x)) if the caller has it (DSA's indexer reads it)."""
        s, (B, T, _) = self.spec, x.shape
        if s.q_rank is None:
            q = self.q_proj(x)
        else:
            q = self.q_up(self.q_norm(self.q_down(x)) if latent is None else latent)
        q = q.view(B, T, s.n_head, -1).transpose(1, 2)  # (B, H, T, Dn + Dr)
        q_nope, q_rope = q.split([s.nope_head_size, s.rope_head_size], dim=-1)
        return q_nope, q_rope if s.rope is None else rotate(q_rope, s.rope, offset)

    def latents(self, x: torch.Tensor, offset: int = 0):
        """x (B, T, C) -> c (B, T, R) normed, k_rope (B, T, Dr) turned."""
        c, k_rope = self.kv_down(x).split(
            [self.spec.kv_latent, self.spec.rope_head_size], -1
        )
        if self.spec.rope is not None:
            k_rope = rotate(k_rope, self.spec.rope, offset)
        return self.kv_norm(c), k_rope

    def _up(self):
        """kv_up's weight per head: keys (H, Dn, R), values (H, Dv, R)."""
        s = self.spec
        w = self.kv_up.weight.view(s.n_head, s.nope_head_size + s.v_head_size, -1)
        return w.split([s.nope_head_size, s.v_head_size], dim=1)

    def attend(self, q_nope, q_rope, c, k_rope, mask=None) -> torch.Tensor:
        """Training form: every head's keys and values projected up from c.

        q_nope (B, H, Tn, Dn), q_rope (B, H, Tn, Dr), c (B, Ta, R), k_rope
        (B, Ta, Dr), mask (Tn, Ta) bool or None (causal) -> (B, Tn, C).
        """
        s, (B, H, Tn, _) = self.spec, q_nope.shape
        kv = self.kv_up(c).view(B, c.size(1), H, -1).transpose(1, 2)
        k_nope, v = kv.split([s.nope_head_size, s.v_head_size], dim=-1)
        k_rope = k_rope.unsqueeze(1).expand(-1, H, -1, -1)  # one key, all heads
        q = torch.cat([q_nope, q_rope], dim=-1)  # (B, H, Tn, Dn + Dr)
        k = torch.cat([k_nope, k_rope], dim=-1)  # (B, H, Ta, Dn + Dr)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None, scale=self.scale
        )  # (B, H, Tn, Dv)
        return self.proj(y.transpose(1, 2).reshape(B, Tn, -1))

    # --8<-- [end:layer]

    # --8<-- [start:absorbed]
    def attend_absorbed(
        self, q_nope, q_rope, c, k_rope, mask=None, *, weights=False
    ):
        """attend's result, reading the latents and rope keys as they are.

        Score of head h: q_nope . (W_uk,h c) + q_rope . k_rope
                       = (W_uk,h^T q_nope) . c + q_rope . k_rope,
        so each head scores [c | k_rope] with the query [W_uk,h^T q_nope |
        q_rope]: one shared key "head" of width R + Dr. The output
        sum_j w_j W_uv,h c_j = W_uv,h (sum_j w_j c_j). Same arguments as attend;
        weights=True returns the weights (B, H, Tn, Ta) too.
        """
        B, H, Tn, _ = q_nope.shape
        w_k, w_v = self._up()  # (H, Dn, R), (H, Dv, R)
        q_latent = q_nope @ w_k  # (B, H, Tn, Dn) x (H, Dn, R) -> (B, H, Tn, R)
        q = torch.cat([q_latent, q_rope], dim=-1)  # (B, H, Tn, R + Dr)
        k = torch.cat([c, k_rope], dim=-1).unsqueeze(1)  # (B, 1, Ta, R + Dr)
        scores = (q @ k.transpose(-2, -1)) * self.scale  # (B, H, Tn, Ta)
        if mask is None:  # causal: the queries are the last Tn of Ta positions
            k_pos = torch.arange(c.size(1), device=c.device)
            mask = visible(k_pos[-Tn:], k_pos)  # (Tn, Ta)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:  # ALiBi's bias, -inf where a key is hidden
            scores = scores + mask
        w = scores.softmax(dim=-1)
        y_latent = w @ c.unsqueeze(1)  # (B, H, Tn, R)
        y = y_latent @ w_v.transpose(1, 2)  # (B, H, Tn, R) x (H, R, Dv)
        y = self.proj(y.transpose(1, 2).reshape(B, Tn, -1))
        return (y, w) if weights else y

    # --8<-- [end:absorbed]

    def forward(self, x: torch.Tensor, cache=None, *, return_weights=False):
        """x (B, T, C) at positions 0 .. T - 1, or after the cache's positions:
        then only [c | k_rope] of the new positions join the cache, and the
        step reads it absorbed (as return_weights does, to keep the weights)."""
        alibi = self.spec.alibi
        if cache is None and not return_weights and not alibi:
            q_nope, q_rope = self.queries(x)
            return self.attend(q_nope, q_rope, *self.latents(x))
        offset = 0 if cache is None else cache.seen
        q_nope, q_rope = self.queries(x, offset)
        c, k_rope = self.latents(x, offset)
        q_pos = k_pos = torch.arange(offset, offset + x.size(1), device=x.device)
        if cache is not None:
            (c, k_rope), k_pos = cache.update(c, k_rope)
        mask = visible(q_pos, k_pos)  # (T, T_all)
        if alibi:  # its float bias, -inf where a key is hidden
            mask = alibi_at(self.spec.n_head, q_pos, k_pos, mask).to(c.dtype)
        if cache is None and not return_weights:  # the training form
            return self.attend(q_nope, q_rope, c, k_rope, mask)
        return self.attend_absorbed(
            q_nope, q_rope, c, k_rope, mask, weights=return_weights
        )

    def new_cache(self, batch_size, max_length, *, window=None, sinks=0):
        """An empty cache of max_length rows: latents and rope keys."""
        no_rolling(self, window, WHY)
        return LayerCache("full", max_length=max_length)
