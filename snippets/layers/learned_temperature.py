"""Mistral Large 4's attention: DSA with a query temperature learned per head.

What is new, each a small piece composed into MLA:

- a temperature learned per head: every query of head h at position t
  multiplied by scale_h * log(t + 1) + bias_h (scale 0, bias 1: unchanged),
  on the attention's queries and on the indexer's;
- the indexer's queries read from x through a LayerNorm (there is no query
  latent: the queries come from x directly), its RoPE on adjacent pairs;
- RoPE frequencies learned per pair (theta_i * exp(alpha_i)), and NoPE layers:
  no rope key and no query rope part at all, the indexer unturned too;
- layers that read an earlier layer's latents (kv_source) instead of caching
  their own, with their own up-projections, and, if they run an indexer, a
  cache of its keys (SharedLatents).

Shape letters: B batch, T positions (Tn new, Ta attended), C channels, H heads,
I indexer heads, E their head size, R kv_latent, Dn, Dr, Dv as in mla.py.
"""

# --8<-- [start:imports]
import dataclasses

import torch
import torch.nn as nn

from snippets.core.cache import LayerCache, SharedCache, no_rolling
from snippets.core.checks import check_positive_int
from snippets.core.masks import visible
from snippets.core.positions import apply_rope
from snippets.core.rope_scaling import RopeSpec, frequencies
from snippets.layers.mla import WHY, LatentAttention, MLASpec
from snippets.layers.sparse_attention import index_scores
from snippets.layers.sparse_mla import Choice, DSAIndexer, IndexerSpec, choose

# --8<-- [end:imports]

__all__ = [
    "learned_temperature",
    "LearnedTemperature",
    "LearnedRope",
    "XQueryIndexer",
    "Large4Spec",
    "SharedLatents",
    "LearnedTemperatureAttention",
]


# --8<-- [start:temperature]
def learned_temperature(positions, scale, bias) -> torch.Tensor:
    """(H, T): scale_h * log(t + 1) + bias_h, the multiplier of head h's query
    at position t. Mistral 4's rule is fixed and steps (1 + beta * log(1 +
    floor(t / L))); this one is learned per head and grows from t = 0 on."""
    return scale[:, None] * torch.log1p(positions.float())[None] + bias[:, None]


class LearnedTemperature(nn.Module):
    """Per-head query multipliers, learned: scale and bias (H,) each."""

    def __init__(self, n_head: int):
        super().__init__()
        check_positive_int("n_head", n_head)
        self.scale = nn.Parameter(torch.zeros(n_head))  # 0 and 1: the identity
        self.bias = nn.Parameter(torch.ones(n_head))

    def forward(self, q: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """q (B, H, T, D) at positions offset .. offset + T - 1 -> q tempered."""
        if q.dim() != 4 or q.size(1) != self.scale.numel():
            raise ValueError(
                f"q has shape {tuple(q.shape)}: (B, H, T, D) with H = "
                f"{self.scale.numel()} heads expected"
            )
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset ({offset!r}) must be an int >= 0")
        t = torch.arange(offset, offset + q.size(2), device=q.device)
        m = learned_temperature(t, self.scale, self.bias)  # (H, T)
        return q * m.to(q.dtype)[:, :, None]


# --8<-- [end:temperature]


# --8<-- [start:rope]
class LearnedRope(nn.Module):
    """RoPE on adjacent pairs whose frequencies are scaled by learned factors:
    theta_i * exp(alpha_i) (alpha 0: the RopeSpec's own frequencies)."""

    def __init__(self, rope: RopeSpec, dims: int):
        super().__init__()
        check_positive_int("dims", dims)
        theta, gain = frequencies(rope, dims)  # (dims / 2,) float64, YaRN's factor
        self.register_buffer("theta", theta)
        self.register_buffer("alpha", torch.zeros_like(theta, dtype=torch.float32))
        self.gain = gain

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Turn the first dims channels of x (..., T, E) to positions offset ..;
        the others pass unchanged."""
        R = 2 * self.theta.numel()
        theta = self.theta * self.alpha.double().exp()
        turned = apply_rope(x[..., :R], offset, theta=theta) * self.gain
        return torch.cat([turned, x[..., R:]], dim=-1)


# --8<-- [end:rope]


# --8<-- [start:indexer]
class XQueryIndexer(DSAIndexer):
    """DSA's indexer with its queries from x: LayerNorm(x) -> heads, tempered.

    turn: the layer's LearnedRope (on its first rope_dims channels), None on a
    NoPE layer (its queries and keys unturned too).
    """

    def __init__(self, spec: IndexerSpec, n_embed: int, turn: LearnedRope | None):
        if spec.pairs != "adjacent":
            raise ValueError(
                f"pairs ({spec.pairs!r}): this indexer turns adjacent pairs"
            )
        super().__init__(spec, n_embed, n_embed, rope=None)  # q: C -> I * E
        self.q_norm = nn.LayerNorm(n_embed, eps=spec.eps)
        self.temperature = LearnedTemperature(spec.n_head)
        self.turn = turn
        if turn is not None and 2 * turn.theta.numel() != spec.rope_dims:
            raise ValueError(
                f"rope_dims ({spec.rope_dims}) must be the layer's turned "
                f"channels ({2 * turn.theta.numel()})"
            )

    def _turn(self, t, offset):
        return t if self.turn is None else self.turn(t, offset)

    def forward(self, x, keys, offset: int = 0) -> torch.Tensor:
        """x (B, Tn, C), keys (B, Ta, E) -> scores (B, Tn, Ta)."""
        B, T, _ = x.shape
        s = self.spec
        q = self.q(self.q_norm(x)).view(B, T, s.n_head, s.head_size).transpose(1, 2)
        q = self._turn(self.temperature(q, offset), offset).transpose(1, 2)
        w = self.weights(x) * (s.n_head * s.head_size) ** -0.5  # (B, Tn, I)
        return index_scores(q, keys, w)  # (B, Tn, I, E) -> (B, Tn, Ta)


# --8<-- [end:indexer]


@dataclasses.dataclass(frozen=True)
class Large4Spec(MLASpec):
    """MLASpec for Mistral Large 4's layers. rope None and rope_head_size 0: a
    NoPE layer (no rope key at all). kv_source: the layer whose latents this
    one reads instead of its own."""

    kv_source: int | None = None
    kind = "full"  # every query sees all earlier positions, before the top-k

    def __post_init__(self):
        if self.rope_head_size != 0 or self.rope is not None:
            super().__post_init__()
        for name in (
            "n_embed",
            "n_head",
            "kv_latent",
            "nope_head_size",
            "v_head_size",
        ):
            check_positive_int(name, getattr(self, name))  # NoPE: MLASpec's others
        if self.q_rank is not None:
            raise ValueError(
                f"q_rank ({self.q_rank}): queries come from x directly"
            )
        k = self.kv_source
        if k is not None and (
            isinstance(k, bool) or not isinstance(k, int) or k < 0
        ):
            raise ValueError(f"kv_source ({k!r}) must be a layer index")

    def check_in_gpt(self, i: int, config) -> None:
        raise TypeError(
            f"layers[{i}] is a Large4Spec, which builds no layer alone (its "
            f"layer takes an indexer too): a GPT's block builds its layer from "
            f"the spec"
        )

    def build(self):
        """Refused: MLASpec's build would make a LatentAttention, and this
        spec's layer takes an indexer (or an earlier layer's choice) too."""
        raise TypeError(
            "a Large4Spec builds no layer alone: its layer is "
            "LearnedTemperatureAttention(spec, indexer)"
        )

    def parameters(self):
        """Refused, as build()."""
        self.build()


# --8<-- [start:shared]
class SharedLatents(SharedCache):
    """A SharedCache on the source layer's cache, plus, for a layer that runs
    an indexer of its own, a LayerCache of that indexer's keys (`own`): its
    update(*keys) gives the source's latents and rope keys, then its own."""

    def __init__(self, source: LayerCache, own: LayerCache | None):
        super().__init__(source)
        self.own = own

    def update(self, *new: torch.Tensor):
        held, k_pos = super().update()
        if self.own is not None:
            mine, k_pos = self.own.update(*new)
            held = (*held, *mine)
        return held, k_pos

    def __len__(self) -> int:
        return 0 if self.own is None else len(self.own)

    def tensors(self) -> list[torch.Tensor]:
        return [] if self.own is None else self.own.tensors()


# --8<-- [end:shared]


# --8<-- [start:layer]
class LearnedTemperatureAttention(LatentAttention):
    """MLA with queries from x, the learned temperature, learned RoPE
    frequencies (or none), an indexer (or the choice of an earlier one's,
    indexer None: set layer.choice = that_layer.choice) and, with
    spec.kv_source, an earlier layer's latents. Weights laid out as MLA's;
    a cache holds [c | k_rope | the indexer's keys]."""

    def __init__(self, spec: Large4Spec, indexer: IndexerSpec | None):
        super().__init__(
            dataclasses.replace(spec, rope=None) if spec.rope else spec
        )
        self.spec = spec
        Dr = spec.rope_head_size
        self.turn = None if spec.rope is None else LearnedRope(spec.rope, Dr)
        self.temperature = LearnedTemperature(spec.n_head)
        if spec.kv_source is not None:  # no latents of its own
            del self.kv_down, self.kv_norm
        self.kv_source = spec.kv_source  # the layer whose latents it reads
        self.indexer, self.choice = None, None
        if indexer is not None:
            self.indexer = XQueryIndexer(indexer, spec.n_embed, self.turn)
            self.choice = Choice()

    def queries(self, x, offset: int = 0, latent=None):
        """x (B, T, C) -> q_nope (B, H, T, Dn), q_rope (B, H, T, Dr): turned
        and tempered."""
        s, (B, T, _) = self.spec, x.shape
        q = self.q_proj(x).view(B, T, s.n_head, -1).transpose(1, 2)
        q = self.temperature(q, offset)  # one number per head and position
        q_nope, q_rope = q.split([s.nope_head_size, s.rope_head_size], dim=-1)
        return q_nope, q_rope if self.turn is None else self.turn(q_rope, offset)

    def latents(self, x, offset: int = 0):
        """x (B, T, C) -> c (B, T, R) normed, k_rope (B, T, Dr) turned."""
        c, k_rope = self.kv_down(x).split(
            [self.spec.kv_latent, self.spec.rope_head_size], -1
        )
        return self.kv_norm(c), k_rope if self.turn is None else self.turn(
            k_rope, offset
        )

    def forward(self, x: torch.Tensor, cache=None, *, return_weights=False):
        """x (B, T, C) at positions 0 .. T - 1, or after the cache's; a layer
        with a kv_source takes a SharedLatents, after its source's step."""
        T, sharing = x.size(1), self.spec.kv_source is not None
        if sharing and cache is None:
            raise ValueError(
                f"this layer reads layer {self.spec.kv_source}'s latents: "
                f"give it new_cache(..., source=its cache), after that layer's step"
            )
        offset = 0 if cache is None else cache.seen - T * sharing
        q_nope, q_rope = self.queries(x, offset)
        new = () if sharing else self.latents(x, offset)  # (c, k_rope)
        if self.indexer is not None:
            new = (*new, self.indexer.keys(x, offset))
        k_pos = torch.arange(offset, offset + T, device=x.device)
        if cache is not None:  # a sharing layer's: its source's latents first
            new, k_pos = cache.update(*new)
            if not sharing and cache.readers:  # layers reading its latents
                cache.attended = (*new[:2], k_pos)
        c, k_rope = new[:2]
        keys = None if self.indexer is None else new[2]
        q_pos = torch.arange(offset, offset + T, device=x.device)
        allowed = visible(q_pos, k_pos)  # (Tn, Ta)
        if self.indexer is None:
            if self.choice is None:
                raise ValueError("set layer.choice = the indexer layer's choice")
            chosen = self.choice.read(T, k_pos.numel())
        else:
            scores = self.indexer(x, keys, offset)
            chosen = choose(scores, allowed, self.indexer.spec.top_k)
            self.choice.chosen = chosen
        mask = chosen[:, None]  # (B, 1, Tn, Ta): every head the same keys
        if cache is None and not return_weights:
            return self.attend(q_nope, q_rope, c, k_rope, mask)
        return self.attend_absorbed(
            q_nope, q_rope, c, k_rope, mask, weights=return_weights
        )

    def new_cache(
        self, batch_size, max_length, *, window=None, sinks=0, source=None
    ):
        """An empty cache of max_length rows; for a layer with a kv_source, a
        SharedLatents on its source layer's cache `source`."""
        no_rolling(self, window, WHY)
        if (self.spec.kv_source is None) != (source is None):
            raise ValueError(
                f"source ({type(source).__name__}) is for a layer with a "
                f"kv_source, and it needs one (kv_source={self.spec.kv_source})"
            )
        own = LayerCache("full", max_length=max_length)
        if source is None:
            return own
        return SharedLatents(source, own if self.indexer is not None else None)


# --8<-- [end:layer]
