"""DeepSeek-V4's attention: a window of raw tokens beside compressed ones.

One layer kind, CompressedAttention, three ways:

- window only: each query attends to the last `window` tokens, itself included;
- heavily compressed (HCA): also to one entry per `ratio` tokens (128 in
  DeepSeek-V4), a softmax over the block's positions, per channel, of their
  projections: entry w = sum_j softmax_j(z_j + b_j) * c_j, j in block w;
- compressed sparse (CSA): one entry per `ratio` tokens (4) pooled over 2 *
  ratio (two series: the previous block's first half of channels, its own
  block's second half), of which a lightning indexer keeps `top_k`.

In all three one head of keys, which is also the values (K = V), RoPE on the last
rope_dims channels of each head (pairs (2i, 2i + 1)), turned back at the query's
position on the output; a sink logit per head in the softmax; queries through an
RMSNorm without weight; the output projected by groups of heads. Shape letters:
B batch, T positions (Tn new), C channels, H heads, D head size, N compressed
entries, I indexer heads, E their size.
"""

# --8<-- [start:imports]
import dataclasses

import torch
import torch.nn as nn

from snippets.core.cache import Cache, LayerCache, no_rolling
from snippets.core.checks import check_positive_int
from snippets.core.masks import visible
from snippets.core.rope_scaling import RopeSpec, frequencies
from snippets.core.spec import LayerSpec
from snippets.layers.sparse_attention import index_scores
from snippets.layers.sparse_mla import choose

# --8<-- [end:imports]

__all__ = [
    "CompressedSpec",
    "turn_tail",
    "rms",
    "pool",
    "Compressor",
    "CompressedCache",
    "CompressedAttention",
    "compressed_gathered",
]

WHY = "it keeps a window of its own, and entries pooled from fixed blocks"


# --8<-- [start:spec]
@dataclasses.dataclass(frozen=True)
class CompressedSpec(LayerSpec):
    """One DeepSeek-V4 layer's numbers (V4-Flash: C 4096, H 64 of D 512,
    R 64, q_rank 1024, window 128, 8 groups of rank 1024; ratio 4 with 64
    indexer heads of 128 keeping 512, or ratio 128).

    ratio None: a window layer. overlap: entries pooled over 2 * ratio tokens
    (CSA), with its indexer (indexer_heads, indexer_size, top_k). rope: the
    turned channels' frequencies (V4: base 10,000 on window layers, 160,000
    with YaRN on compressed ones).
    """

    n_embed: int
    n_head: int
    head_size: int
    rope_dims: int
    q_rank: int
    window: int
    o_groups: int
    o_rank: int
    ratio: int | None = None
    overlap: bool = False
    indexer_heads: int | None = None
    indexer_size: int | None = None
    top_k: int | None = None
    eps: float = 1e-6
    rope: RopeSpec = RopeSpec()

    def __post_init__(self):
        for name in (
            "n_embed",
            "n_head",
            "head_size",
            "q_rank",
            "window",
            "o_groups",
            "o_rank",
        ):
            check_positive_int(name, getattr(self, name))
        R = self.rope_dims
        if isinstance(R, bool) or not isinstance(R, int) or R < 2 or R % 2:
            raise ValueError(f"rope_dims ({R!r}) must be an even int >= 2")
        if R > self.head_size:
            raise ValueError(
                f"rope_dims ({R}) must be <= head_size ({self.head_size})"
            )
        if not isinstance(self.rope, RopeSpec):
            got = type(self.rope).__name__
            raise TypeError(f"rope must be a RopeSpec, got {got}")
        if self.rope.scaling == "dynamic":
            raise ValueError(
                "rope.scaling='dynamic' changes with the length; this layer's "
                "frequencies are fixed when it is made"
            )
        if self.rope.rotary_dim not in (None, R):
            raise ValueError(
                f"rope.rotary_dim ({self.rope.rotary_dim}) must be None or "
                f"rope_dims ({R}): the layer turns its last rope_dims channels"
            )
        if (self.n_head * self.head_size) % self.o_groups:
            raise ValueError(
                f"o_groups ({self.o_groups}) must divide n_head * head_size "
                f"({self.n_head * self.head_size})"
            )
        sparse = (self.indexer_heads, self.indexer_size, self.top_k)
        if self.ratio is None:
            if self.overlap or any(v is not None for v in sparse):
                raise ValueError("overlap and an indexer need a ratio (ratio=None)")
            return
        check_positive_int("ratio", self.ratio)
        if self.overlap != all(v is not None for v in sparse):
            raise ValueError(
                f"an indexer (indexer_heads, indexer_size, top_k = {sparse}) "
                f"goes with overlap ({self.overlap}): both or neither (CSA or HCA)"
            )
        if self.overlap:
            for name in ("indexer_heads", "indexer_size", "top_k"):
                check_positive_int(name, getattr(self, name))
            if self.indexer_size < R:
                raise ValueError(
                    f"indexer_size ({self.indexer_size}) must be >= rope_dims ({R})"
                )

    @property
    def kind(self) -> str:
        return "window" if self.ratio is None else "compressed"

    def build(self) -> nn.Module:
        return CompressedAttention(self)

    def parameters(self) -> int:
        """build()'s parameters, counted by hand."""
        s, HD = self, self.n_head * self.head_size
        count = s.n_embed * s.q_rank + s.q_rank + s.q_rank * HD  # q: down, norm, up
        count += (
            s.n_embed * s.head_size + s.head_size + s.n_head
        )  # K = V, norm; sinks
        count += s.o_rank * HD + s.o_groups * s.o_rank * s.n_embed  # out, by groups

        def compressor(size: int, overlap: bool) -> int:  # c, z, b; the norm
            width = 2 * size if overlap else size
            return 2 * s.n_embed * width + s.ratio * width + size

        if s.ratio is not None:
            count += compressor(s.head_size, s.overlap)
        if s.overlap:  # CSA's indexer: its compressor, queries, weights
            heads, E = s.indexer_heads, s.indexer_size
            count += compressor(E, True) + s.q_rank * heads * E + s.n_embed * heads
        return count


# --8<-- [end:spec]


# --8<-- [start:pieces]
def turn_tail(x: torch.Tensor, theta: torch.Tensor, positions: torch.Tensor):
    """RoPE on the last 2 * len(theta) channels of x (..., T, D), pairs
    (2i, 2i + 1), row t turned to positions[t] (a negative one turns back)."""
    R = 2 * theta.numel()
    angles = positions.double()[:, None] * theta.double()[None, :]  # (T, R/2)
    work = torch.promote_types(x.dtype, torch.float32)
    cos, sin = angles.cos().to(x.device, work), angles.sin().to(x.device, work)
    x1, x2 = x[..., -R::2].to(work), x[..., -R + 1 :: 2].to(work)
    turned = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return torch.cat([x[..., :-R], turned.flatten(-2).to(x.dtype)], dim=-1)


def rms(x: torch.Tensor, eps: float, weight: torch.Tensor | None = None):
    """x / RMS(x) over the last dim, times weight if given."""
    y = x * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + eps).to(x.dtype)
    return y if weight is None else y * weight


def pool(c: torch.Tensor, z: torch.Tensor, ratio: int, overlap: bool, before: bool):
    """Entries (B, N, D) from whole blocks of projections c, z (B, T, D') (z
    with its position bias): per channel, a softmax over the block weighs c.

    overlap: D' = 2D; entry w pools the first D channels of block w - 1 with
    the last D of block w (block 0 the last D only). before: the first block
    given only lends its first half to the next (it was pooled already).
    """
    B, T, Dp = c.shape
    if T % ratio:
        raise ValueError(f"pool takes whole blocks of {ratio}, got {T} positions")
    c, z = c.view(B, T // ratio, ratio, Dp), z.view(B, T // ratio, ratio, Dp)
    if overlap:
        D = Dp // 2
        earlier = torch.full_like(z[:, :, :, :D], -torch.inf)  # no block before 0
        earlier[:, 1:] = z[:, :-1, :, :D]
        c_early = torch.zeros_like(c[:, :, :, :D])
        c_early[:, 1:] = c[:, :-1, :, :D]
        c = torch.cat([c_early, c[..., D:]], dim=2)  # (B, n, 2 ratio, D)
        z = torch.cat([earlier, z[..., D:]], dim=2)
        if before:
            c, z = c[:, 1:], z[:, 1:]
    w = z.softmax(dim=2, dtype=torch.float32).to(c.dtype)
    return (w * c).sum(dim=2)


class Compressor(nn.Module):
    """c = x W_c, z = x W_z + b (b per position in the block, per channel),
    pooled, an RMSNorm, RoPE at each entry's first position."""

    def __init__(
        self, n_embed: int, size: int, ratio: int, overlap: bool, eps: float
    ):
        super().__init__()
        width = 2 * size if overlap else size
        self.ratio, self.overlap, self.eps = ratio, overlap, eps
        self.c = nn.Linear(n_embed, width, bias=False)
        self.z = nn.Linear(n_embed, width, bias=False)
        self.bias = nn.Parameter(torch.zeros(ratio, width))
        self.norm = nn.Parameter(torch.ones(size))

    def project(self, x: torch.Tensor):
        """x (B, T, C) -> c, z (B, T, D'): what waits in a cache for its block."""
        return self.c(x), self.z(x)

    def forward(self, c, z, start: int, first: int, theta) -> torch.Tensor:
        """c, z of positions start ..; -> the entries of every block that ends
        at or after position `first` and within c (B, n, D)."""
        m, end = self.ratio, start + c.size(1)
        w0, w1 = first // m, end // m  # blocks w0 .. w1 - 1
        lo = max(w0 - 1, 0) * m if self.overlap else w0 * m
        if w1 <= w0:
            return c.new_zeros(c.size(0), 0, self.norm.numel())
        if lo < start:
            raise ValueError(f"block {w0} needs position {lo}, given from {start}")
        bias = self.bias.repeat(w1 - lo // m, 1)
        c, z = (
            c[:, lo - start : w1 * m - start],
            z[:, lo - start : w1 * m - start] + bias,
        )
        entries = rms(
            pool(c, z, m, self.overlap, before=lo < w0 * m), self.eps, self.norm
        )
        return turn_tail(entries, theta, torch.arange(w0, w1, device=c.device) * m)


# --8<-- [end:pieces]


# --8<-- [start:cache]
class CompressedCache(Cache):
    """A compressed layer's cache, three LayerCaches: `raw`, a window of the
    last window - 1 keys (= values); `waiting`, a window of the projections
    of the tokens its next entry pools (ratio - 1, or 2 ratio - 1 with
    overlap); `entries`, a full cache of every entry so far (with the
    indexer's keys) of up to max_length positions. Grows by one entry per
    ratio tokens, no more. The layer updates each part in turn."""

    def __init__(self, spec: CompressedSpec, max_length: int):
        self.spec = spec
        self.raw = LayerCache("window", spec.window)
        self.waiting = self.entries = None
        if spec.ratio is not None:
            self.waiting = LayerCache(
                "window", spec.ratio * (2 if spec.overlap else 1)
            )
            self.entries = LayerCache("full", max_length=max_length // spec.ratio)

    @property
    def parts(self) -> list[LayerCache]:
        return [p for p in (self.raw, self.waiting, self.entries) if p is not None]

    @property
    def seen(self) -> int:
        return self.raw.seen

    def __len__(self) -> int:
        return len(self.raw) + (
            len(self.entries) if self.entries is not None else 0
        )

    def tensors(self) -> list[torch.Tensor]:
        return [t for p in self.parts for t in p.tensors()]


# --8<-- [end:cache]


# --8<-- [start:layer]
class CompressedAttention(nn.Module):
    """A DeepSeek-V4 layer behind the layer protocol; theta (R/2,), the RoPE
    frequencies of its queries, keys and entries, from spec.rope."""

    def __init__(self, spec: CompressedSpec):
        super().__init__()
        if not isinstance(spec, CompressedSpec):
            raise TypeError(
                f"spec must be a CompressedSpec, got {type(spec).__name__}"
            )
        turned = dataclasses.replace(spec.rope, rotary_dim=spec.rope_dims)
        theta, factor = frequencies(turned, spec.head_size)
        if factor != 1.0:  # V4's reference scales by none (transformers: 1)
            raise ValueError(
                f"spec.rope's attention factor is {factor}: this layer scales "
                f"by 1 / sqrt(head_size) only (set rope.attention_factor=1.0)"
            )
        s, H, D = spec, spec.n_head, spec.head_size
        self.spec = spec
        self.register_buffer("theta", theta, persistent=False)  # float64
        self.q_down = nn.Linear(s.n_embed, s.q_rank, bias=False)
        self.q_norm = nn.Parameter(torch.ones(s.q_rank))
        self.q_up = nn.Linear(s.q_rank, H * D, bias=False)
        self.kv = nn.Linear(s.n_embed, D, bias=False)  # one head: keys = values
        self.kv_norm = nn.Parameter(torch.ones(D))
        self.sinks = nn.Parameter(torch.zeros(H))
        group = H * D // s.o_groups  # each group of heads to o_rank, then mixed
        self.o_down = nn.Parameter(torch.zeros(s.o_groups, s.o_rank, group))
        self.proj = nn.Linear(s.o_groups * s.o_rank, s.n_embed, bias=False)
        self.compressor = self.indexer = None
        if s.ratio is not None:
            self.compressor = Compressor(s.n_embed, D, s.ratio, s.overlap, s.eps)
        if s.overlap:
            E, heads = s.indexer_size, s.indexer_heads
            self.indexer = Compressor(s.n_embed, E, s.ratio, True, s.eps)
            self.index_q = nn.Linear(s.q_rank, heads * E, bias=False)
            self.index_w = nn.Linear(s.n_embed, heads, bias=False)

    def new_cache(self, batch_size, max_length, *, window=None, sinks=0):
        no_rolling(self, window, WHY)
        return CompressedCache(self.spec, max_length)

    def _entries(self, x, cache, first: int):
        """Every entry so far (B, N, D) and the indexer's keys (B, N, E)."""
        parts = [self.compressor] + (
            [self.indexer] if self.indexer is not None else []
        )
        new, start = [t for part in parts for t in part.project(x)], 0
        if cache is not None:  # with the tokens still waiting for their block
            new, k_pos = cache.waiting.update(*new)
            start = cache.waiting.seen - k_pos.numel()  # the positions run on
        pairs = [new[i : i + 2] for i in range(0, len(new), 2)]
        out = [
            part(c, z, start, first, self.theta)
            for part, (c, z) in zip(parts, pairs, strict=True)
        ]
        if cache is not None:
            out, _ = cache.entries.update(*out)
        return out

    def _index_scores(self, x, latent, keys, t_pos):
        """CSA: the indexer's scores of the entries' keys (B, N, E), (B, Tn, N)."""
        s, (B, T, _) = self.spec, x.shape
        q = self.index_q(latent).view(B, T, s.indexer_heads, s.indexer_size)
        q = turn_tail(q.transpose(1, 2), self.theta, t_pos).transpose(1, 2)
        w = self.index_w(x) * (s.indexer_heads * s.indexer_size) ** -0.5
        return index_scores(q, keys, w)

    def _chosen(self, x, latent, keys, t_pos, allowed):
        """CSA: each query's top_k entries by the indexer, (B, Tn, N)."""
        scores = self._index_scores(x, latent, keys, t_pos)
        return choose(scores, allowed, self.spec.top_k)

    def _output(self, out, t_pos):
        """The heads' sums (B, H, Tn, D), RoPE turned back -> (B, Tn, C)."""
        B, _, T, _ = out.shape
        # the values are the keys: their RoPE turned back at the query's position
        out = turn_tail(out, self.theta, -t_pos)
        out = out.transpose(1, 2).reshape(B, T, self.spec.o_groups, -1)
        out = torch.einsum("btgi,goi->btgo", out, self.o_down).flatten(2)
        return self.proj(out)  # (B, T, g, HD/g) -> (B, T, g, o_rank) -> (B, T, C)

    def forward(self, x: torch.Tensor, cache=None, *, return_weights=False):
        """x (B, T, C) at positions 0 .. T - 1, or after the cache's."""
        s, H, D = self.spec, self.spec.n_head, self.spec.head_size
        if x.dim() != 3 or x.size(-1) != s.n_embed:
            raise ValueError(f"x must be (B, T, {s.n_embed}), got {tuple(x.shape)}")
        if cache is not None and cache.spec != s:
            raise ValueError(
                "the cache was made for another spec: use the layer's new_cache"
            )
        B, T, _ = x.shape
        first = 0 if cache is None else cache.seen
        t_pos = torch.arange(first, first + T, device=x.device)
        latent = rms(self.q_down(x), s.eps, self.q_norm)
        q = self.q_up(latent).view(B, T, H, D).transpose(1, 2)
        q = turn_tail(rms(q, s.eps), self.theta, t_pos)  # an RMSNorm without weight
        kv = rms(self.kv(x), s.eps, self.kv_norm)[:, None]  # (B, 1, T, D)
        kv = turn_tail(kv, self.theta, t_pos)
        k_pos = t_pos
        if cache is not None:
            (kv,), k_pos = cache.raw.update(kv)
        keys, mask = kv, visible(t_pos, k_pos, "window", s.window)  # (Tn, Ta)
        mask = mask.expand(B, T, -1)
        if self.compressor is not None:
            entries = self._entries(x, cache, first)
            n = torch.arange(entries[0].size(1), device=x.device)
            # entry n pools positions up to (n + 1) ratio - 1
            allowed = (n[None] + 1) * s.ratio <= t_pos[:, None] + 1  # (Tn, N)
            if self.indexer is not None:
                allowed = self._chosen(x, latent, entries[1], t_pos, allowed)
            keys = torch.cat([kv, entries[0][:, None]], dim=2)
            mask = torch.cat([mask, allowed.expand(B, T, -1)], dim=-1)
        scores = (q @ keys.transpose(-2, -1)) * D**-0.5  # (B, H, Tn, Ta + N)
        scores = scores.masked_fill(~mask[:, None], -torch.inf)
        sink = self.sinks.view(1, H, 1, 1).expand(B, H, T, 1)
        weights = torch.cat([scores, sink], dim=-1).softmax(dim=-1)[..., :-1]
        y = self._output(weights @ keys, t_pos)
        return (y, weights) if return_weights else y


# --8<-- [end:layer]


# --8<-- [start:gathered]
def compressed_gathered(layer: CompressedAttention, x, query_chunk: int = 128):
    """layer(x) of a whole sequence (no cache), a chunk of queries at a time.

    A chunk of Tc queries scores only the raw keys its windows cover (Tc +
    window - 1) and the entries complete by its last query: all of them (HCA,
    T / ratio: quadratic, ratio times smaller), or each query's top_k by the
    indexer, gathered (CSA; its scores O(T^2 / ratio)); never forward's square.
    """
    check_positive_int("query_chunk", query_chunk)
    s, (B, T, _) = layer.spec, x.shape
    H, D = s.n_head, s.head_size
    pos = torch.arange(T, device=x.device)
    latent = rms(layer.q_down(x), s.eps, layer.q_norm)
    q = layer.q_up(latent).view(B, T, H, D).transpose(1, 2)
    q = turn_tail(rms(q, s.eps), layer.theta, pos) * D**-0.5  # (B, H, T, D)
    kv = turn_tail(rms(layer.kv(x), s.eps, layer.kv_norm), layer.theta, pos)
    entries = layer._entries(x, None, 0) if s.ratio is not None else None
    rows, out = torch.arange(B)[:, None, None], []
    for a in range(0, T, query_chunk):
        b = min(a + query_chunk, T)
        t, lo, qc = pos[a:b], max(0, a - s.window + 1), q[:, :, a:b]
        raw = (qc @ kv[:, None, lo:b].transpose(-2, -1)).masked_fill(
            ~visible(t, pos[lo:b], "window", s.window), -torch.inf
        )  # (B, H, Tc, Tw)
        sink = layer.sinks.view(1, H, 1, 1).expand(B, H, b - a, 1)
        parts, n = [raw], b // s.ratio if entries is not None else 0
        if n:
            ents = entries[0][:, :n]  # the entries some query of the chunk sees
            allowed = (pos[:n] + 1) * s.ratio <= t[:, None] + 1  # (Tc, n)
            if layer.indexer is None:  # HCA: every complete entry
                parts.append((qc @ ents[:, None].transpose(-2, -1)).masked_fill(
                    ~allowed, -torch.inf))  # fmt: skip
            else:  # CSA: the top_k entries by the indexer, gathered
                scores = layer._index_scores(
                    x[:, a:b], latent[:, a:b], entries[1][:, :n], t
                ).masked_fill(~allowed, -torch.inf)
                best = scores.topk(min(s.top_k, n), dim=-1).indices  # (B, Tc, k)
                ents = ents[rows, best]  # (B, Tc, k, D)
                parts.append(torch.einsum("bhtd,btkd->bhtk", qc, ents).masked_fill(
                    ~allowed[None].expand(B, -1, -1).gather(-1, best)[:, None],
                    -torch.inf))  # fmt: skip
        w = torch.cat([*parts, sink], dim=-1).softmax(dim=-1)
        y = w[..., : raw.size(-1)] @ kv[:, None, lo:b]  # (B, H, Tc, D)
        if len(parts) > 1 and layer.indexer is None:
            y = y + w[..., raw.size(-1) : -1] @ ents[:, None]
        elif len(parts) > 1:
            y = y + torch.einsum("bhtk,btkd->bhtd", w[..., raw.size(-1) : -1], ents)
        out.append(y)
    return layer._output(torch.cat(out, dim=2), pos)


# --8<-- [end:gathered]
