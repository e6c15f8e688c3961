"""MLA as DeepSeek-V3.2, GLM-5 and Mistral 4 ship it: an indexer, a temperature.

Two variants of LatentAttention, each a small piece composed into it:

- DeepSeek Sparse Attention as shipped (DeepSeek-AI 2025, DeepSeek-V3.2): the
  lightning indexer of sparse_attention.py with three more parts. Its queries
  come from the MLA query latent (q_norm(q_down(x)), already computed), not
  from x; its one key per position goes through a LayerNorm; RoPE turns the
  first rope_dims of its head_size channels (DeepSeek-V3.2 pairs them as
  (i, i + R/2), GLM-5 as (2i, 2i + 1)). Each query's top_k keys by score,
  ANDed with the causal mask, are all the MLA layer attends to. GLM-5's config
  can let a layer skip the indexer and reuse the last one's choice.
- Mistral 4's query temperature: every query multiplied by
  1 + beta * log(1 + floor(t / length)), which grows with the position t.

Shape letters: B batch, T positions (Tn new, Ta attended), C channels, I
indexer heads, E their head size, R kv_latent.
"""

# --8<-- [start:imports]
import dataclasses

import torch
import torch.nn as nn

from snippets.core.checks import check_positive_int
from snippets.core.masks import visible
from snippets.core.rope_scaling import RopeSpec, rotate
from snippets.core.spec import LayerSpec, Spec
from snippets.layers.mla import LatentAttention, MLASpec
from snippets.layers.sparse_attention import index_scores

# --8<-- [end:imports]

__all__ = [
    "PAIRS",
    "IndexerSpec",
    "turn_part",
    "DSAIndexer",
    "choose",
    "Choice",
    "SparseLatentAttention",
    "DSASpec",
    "sparse_gathered",
    "position_temperature",
    "TemperedLatentAttention",
]

PAIRS = ("adjacent", "half")  # (2i, 2i + 1), or (i, i + R/2)


# --8<-- [start:turn_part]
def turn_part(x: torch.Tensor, rope: RopeSpec, dims: int, pairs: str, offset=0):
    """RoPE on the first `dims` channels of x (..., T, E), the rest unturned.

    pairs "adjacent" turns channels (2i, 2i + 1) together, "half" (i, i +
    dims/2): the same rotation on channels laid out otherwise, so "half" is
    carried to adjacent order, turned, and carried back.
    """
    if pairs not in PAIRS:
        raise ValueError(f"pairs ({pairs!r}) must be one of {PAIRS}")
    if dims < 2 or dims % 2 or dims > x.size(-1):
        raise ValueError(f"dims ({dims}) must be even, >= 2 and <= {x.size(-1)}")
    part = dataclasses.replace(rope, rotary_dim=dims)
    if pairs == "adjacent":
        return rotate(x, part, offset)
    half = torch.arange(dims // 2, device=x.device)
    # channels 0, R/2, 1, R/2 + 1, ...: each pair side by side
    pairs = torch.stack([half, half + dims // 2], dim=-1).flatten()
    order = torch.cat([pairs, torch.arange(dims, x.size(-1), device=x.device)])
    return rotate(x[..., order], part, offset)[..., order.argsort()]


# --8<-- [end:turn_part]


# --8<-- [start:indexer]
@dataclasses.dataclass(frozen=True)
class IndexerSpec(Spec):
    """A DSA indexer's numbers (DeepSeek-V3.2: 64 heads of 128, RoPE on 64,
    half pairs, top_k 2048; rope_dims 0: no RoPE, as GLM-5-Next's)."""

    n_head: int
    head_size: int
    rope_dims: int
    top_k: int
    pairs: str = "half"
    eps: float = 1e-6  # the key LayerNorm's

    def __post_init__(self):
        for name in ("n_head", "head_size", "top_k"):
            check_positive_int(name, getattr(self, name))
        if self.pairs not in PAIRS:
            raise ValueError(f"pairs ({self.pairs!r}) must be one of {PAIRS}")
        d = self.rope_dims
        if isinstance(d, bool) or not isinstance(d, int) or d < 0 or d % 2:
            raise ValueError(
                f"rope_dims ({d!r}) must be an even int >= 0 (0: no RoPE)"
            )
        if d > self.head_size:
            raise ValueError(
                f"rope_dims ({d}) must be <= head_size ({self.head_size})"
            )


class DSAIndexer(nn.Module):
    """Scores (B, Tn, Ta): how much each query wants each key, for the top-k.

    q_rank: the width of the MLA query latent its queries are read from.
    """

    def __init__(self, spec: IndexerSpec, n_embed: int, q_rank: int, rope):
        super().__init__()
        self.spec, self.rope = spec, rope  # rope: the layer's RopeSpec
        heads, E = spec.n_head, spec.head_size
        self.q = nn.Linear(q_rank, heads * E, bias=False)  # from the query latent
        self.k = nn.Linear(n_embed, E, bias=False)  # one key for all heads
        self.k_norm = nn.LayerNorm(E, eps=spec.eps)
        self.weights = nn.Linear(n_embed, heads, bias=False)

    def _turn(self, t, offset):
        if self.spec.rope_dims == 0:  # GLM-5-Next's indexer: no RoPE
            return t
        return turn_part(t, self.rope, self.spec.rope_dims, self.spec.pairs, offset)

    def keys(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x (B, T, C) -> keys (B, T, E), normed and turned: what a cache keeps."""
        return self._turn(self.k_norm(self.k(x)), offset)

    def forward(self, x, latent, keys, offset: int = 0) -> torch.Tensor:
        """x (B, Tn, C), latent (B, Tn, q_rank), keys (B, Ta, E) -> (B, Tn, Ta)."""
        B, T, _ = x.shape
        s = self.spec
        q = self.q(latent).view(B, T, s.n_head, s.head_size).transpose(1, 2)
        q = self._turn(q, offset).transpose(1, 2)  # (B, Tn, I, E)
        w = self.weights(x) * (s.n_head * s.head_size) ** -0.5  # (B, Tn, I)
        return index_scores(q, keys, w)

    def choose(self, x, latent, keys, offset: int, allowed) -> torch.Tensor:
        """The keys each query attends to, (B, Tn, Ta): its top_k allowed."""
        return choose(self(x, latent, keys, offset), allowed, self.spec.top_k)


def choose(scores: torch.Tensor, allowed: torch.Tensor, top_k: int) -> torch.Tensor:
    """(B, Tn, Ta) scores, (Tn, Ta) allowed (the causal mask) -> (B, Tn, Ta):
    True at each query's top_k allowed keys. A query with fewer allowed keys
    keeps all of them (top_k >= Ta: the layer is dense)."""
    check_positive_int("top_k", top_k)
    scores = scores.masked_fill(~allowed, -torch.inf)
    best = scores.topk(min(top_k, scores.size(-1)), dim=-1).indices
    chosen = torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, best, True)
    return chosen & allowed  # a key picked only to fill top_k stays out


# --8<-- [end:indexer]


# --8<-- [start:layer]
class Choice:
    """The keys the last indexer layer chose, (B, Tn, Ta): a GLM-5 layer that
    its config marks "shared" reuses them instead of running an indexer."""

    def __init__(self):
        self.chosen: torch.Tensor | None = None

    def read(self, Tn: int, Ta: int) -> torch.Tensor:
        if self.chosen is None or tuple(self.chosen.shape[-2:]) != (Tn, Ta):
            got = None if self.chosen is None else tuple(self.chosen.shape)
            raise ValueError(
                f"the shared choice holds {got}, not (B, {Tn}, {Ta}): run the "
                f"layer whose indexer it shares on the same positions first"
            )
        return self.chosen


class SparseLatentAttention(LatentAttention):
    """MLA that attends to each query's top_k keys by a DSA indexer.

    indexer None: no indexer of its own; the layer reads `choice`, which the
    caller sets to the indexer layer's (`layer.choice = earlier.choice`).
    A cache holds [c | k_rope | the indexer's key] of every position.
    """

    def __init__(self, spec: MLASpec, indexer: IndexerSpec | None):
        super().__init__(spec)
        if spec.q_rank is None:
            raise ValueError("q_rank (None): DSA's indexer reads the query latent")
        self.indexer = None
        self.choice = None
        if indexer is not None:
            self.indexer = DSAIndexer(indexer, spec.n_embed, spec.q_rank, spec.rope)
            self.choice = Choice()

    def forward(self, x: torch.Tensor, cache=None, *, return_weights=False):
        """x (B, T, C) at positions 0 .. T - 1, or after the cache's."""
        offset = 0 if cache is None else cache.seen
        # MLA's query latent, read by the indexer too
        latent = self.q_norm(self.q_down(x))
        q_nope, q_rope = self.queries(x, offset, latent=latent)
        new = self.latents(x, offset)  # (c, k_rope)
        if self.indexer is not None:
            new = (*new, self.indexer.keys(x, offset))
        q_pos = torch.arange(offset, offset + x.size(1), device=x.device)
        k_pos = q_pos
        if cache is not None:
            new, k_pos = cache.update(*new)
        allowed = visible(q_pos, k_pos)  # (Tn, Ta)
        if self.indexer is None:
            if self.choice is None:
                raise ValueError(
                    "this layer reuses an indexer layer's choice: set "
                    "layer.choice = that_layer.choice"
                )
            chosen = self.choice.read(x.size(1), k_pos.numel())
        else:
            chosen = self.indexer.choose(x, latent, new[2], offset, allowed)
            self.choice.chosen = chosen
        mask = chosen[:, None]  # (B, 1, Tn, Ta): every head the same keys
        if cache is None and not return_weights:
            return self.attend(q_nope, q_rope, new[0], new[1], mask)
        return self.attend_absorbed(
            q_nope, q_rope, new[0], new[1], mask, weights=return_weights
        )


# --8<-- [end:layer]


@dataclasses.dataclass(frozen=True)
class DSASpec(LayerSpec):
    """One DSA layer as a GPT's per-layer spec: its MLA and its indexer.

    indexer None: the layer reuses an earlier layer's choice (a "shared" layer
    of GLM-5's config, indexer_types), which a
    GPT built from specs refuses (check_in_gpt): it has no such link.
    """

    mla: MLASpec
    indexer: IndexerSpec | None

    def __post_init__(self):
        if not isinstance(self.mla, MLASpec):
            raise TypeError(
                f"mla must be an MLASpec, got {type(self.mla).__name__}"
            )
        if self.mla.q_rank is None:
            raise ValueError(
                "mla.q_rank (None): DSA's indexer reads the query latent"
            )
        if self.indexer is not None and not isinstance(self.indexer, IndexerSpec):
            got = type(self.indexer).__name__
            raise TypeError(f"indexer must be an IndexerSpec or None, got {got}")

    def check_in_gpt(self, i: int, config) -> None:
        super().check_in_gpt(i, config)
        if self.indexer is None:
            raise ValueError(
                f"layers[{i}].indexer (None): a GPT's DSA layers each run an "
                f"indexer of their own (reusing another layer's choice, as a "
                f"'shared' layer of GLM-5's config does, is a link between layers "
                f"that a spec does not hold)"
            )

    @property
    def n_embed(self) -> int:
        return self.mla.n_embed

    @property
    def n_head(self) -> int:
        return self.mla.n_head

    def build(self) -> nn.Module:
        return SparseLatentAttention(self.mla, self.indexer)

    def parameters(self) -> int:
        """build()'s parameters, counted by hand: the MLA's, and the indexer's
        queries (from the query latent), key, key LayerNorm and weights."""
        if self.indexer is None:
            return self.mla.parameters()
        heads, E, C = self.indexer.n_head, self.indexer.head_size, self.n_embed
        indexer = self.mla.q_rank * heads * E + C * E + 2 * E + C * heads
        return self.mla.parameters() + indexer


# --8<-- [start:gathered]
def sparse_gathered(layer: SparseLatentAttention, x: torch.Tensor, query_chunk=256):
    """layer(x) of a whole sequence (no cache), reading only the chosen keys.

    A chunk of query_chunk queries at a time: the indexer scores the keys up to
    the chunk's last query, (B, Tc, Ta), and each query's top_k [c | k_rope]
    rows are gathered, (B, Tc, top_k, R + Dr), and scored absorbed, as
    attend_absorbed does: O(T * top_k) for MLA. The indexer's scores stay
    O(T^2), but never (T, T) at once. It leaves layer.choice as it was: a
    layer sharing the choice (GLM-5) runs after its indexer layer's forward.
    """
    if layer.indexer is None:
        raise ValueError("sparse_gathered runs a layer with an indexer of its own")
    check_positive_int("query_chunk", query_chunk)
    (B, T, _), R = x.shape, layer.spec.kv_latent
    latent = layer.q_norm(layer.q_down(x))
    q_nope, q_rope = layer.queries(x, latent=latent)
    c, k_rope = layer.latents(x)
    index_keys = layer.indexer.keys(x)  # (B, T, E)
    w_k, w_v = layer._up()  # (H, Dn, R), (H, Dv, R)
    q = torch.cat([q_nope @ w_k, q_rope], dim=-1).transpose(
        1, 2
    )  # (B, T, H, R + Dr)
    kv = torch.cat([c, k_rope], dim=-1)  # (B, T, R + Dr)
    rows, pos, out = torch.arange(B)[:, None, None], torch.arange(T), []
    for a in range(0, T, query_chunk):
        b = min(a + query_chunk, T)
        t = pos[a:b]
        scores = layer.indexer(x[:, a:b], latent[:, a:b], index_keys[:, :b], a)
        scores = scores.masked_fill(~visible(t, pos[:b]), -torch.inf)
        best = scores.topk(min(layer.indexer.spec.top_k, b), dim=-1).indices
        chosen = kv[rows, best]  # (B, Tc, top_k, R + Dr)
        s = (
            q[:, a:b] @ chosen.transpose(-2, -1)
        ) * layer.scale  # (B, Tc, H, top_k)
        # a key later than its query, picked only to fill top_k, stays out
        s = s.masked_fill((best > t[:, None])[:, :, None], -torch.inf)
        out.append((s.softmax(-1) @ chosen)[..., :R])  # (B, Tc, H, R)
    y = torch.cat(out, dim=1).transpose(1, 2) @ w_v.transpose(1, 2)  # (B, H, T, Dv)
    return layer.proj(y.transpose(1, 2).reshape(B, T, -1))


# --8<-- [end:gathered]


# --8<-- [start:temperature]
def position_temperature(positions: torch.Tensor, length: int, beta: float):
    """Mistral 4's query multiplier (T,): 1 + beta * log(1 + floor(t / length)).

    1 over the first `length` positions (8,192, the length before YaRN), then
    up by beta * log 2 at t = length, beta * log 3 at 2 * length: every score
    of a later query multiplied by more, its softmax sharper.
    """
    check_positive_int("length", length)
    return 1 + beta * torch.log1p(torch.floor(positions.double() / length))


class TemperedLatentAttention(LatentAttention):
    """MLA whose queries (both parts) are multiplied by position_temperature."""

    def __init__(self, spec: MLASpec, length: int, beta: float):
        super().__init__(spec)
        check_positive_int("length", length)
        self.length, self.beta = length, float(beta)

    def queries(self, x, offset: int = 0, latent=None):
        q_nope, q_rope = super().queries(x, offset, latent)
        t = torch.arange(offset, offset + x.size(1), device=x.device)
        scale = position_temperature(t, self.length, self.beta).to(x.dtype)[:, None]
        return q_nope * scale, q_rope * scale


# --8<-- [end:temperature]
