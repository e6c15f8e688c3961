"""Fewer keys and values to cache: grouped-query and multi-head latent attention.

Shape letters: B batch, T sequence length, C channels (n_embed), H query heads,
G key/value heads (n_kv_head), D head size (C // H), R the width of the latent
(kv_latent).
"""

# --8<-- [start:imports]
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.attention import (
    CausalSelfAttention,
    alibi_mask,
    scaled_dot_product_attention,
)
from snippets.cache import kv_cache, read
from snippets.checks import check_config, check_input, check_positive_int
from snippets.layer_schedule import visible
from snippets.positions import check_position

# --8<-- [end:imports]

__all__ = [
    "MLA_ROPE",
    "check_kv_heads",
    "expand_kv",
    "GroupedQueryAttention",
    "MultiHeadLatentAttention",
    "kv_cache_bytes",
]


# --8<-- [start:shifted_mask]
def _last_rows(T_new: int, T_all: int, device) -> torch.Tensor:
    """Which of T_all keys each of the last T_new queries may see: (T_new, T_all).

    Query i sits at position T_all - T_new + i and sees keys 0 .. that position:
    the last T_new rows of the causal mask over T_all positions.
    """
    positions = torch.arange(T_all, device=device)
    return visible(positions[T_all - T_new :], positions)


def _position_bias(position: str, q: torch.Tensor, T_all: int):
    """ALiBi's (H, T_new, T_all) float bias, causal mask included; else None."""
    if position != "alibi":
        return None
    H, T_new = q.size(1), q.size(2)
    return alibi_mask(H, T_new, T_all).to(device=q.device, dtype=q.dtype)


def _fused_attention(q, k, v, bias=None, **options) -> torch.Tensor:
    """F.scaled_dot_product_attention of the last T_new queries on T_all keys.

    is_causal=True aligns the mask to the top left (query i sees keys 0..i),
    right only when T_new == T_all; after cached positions the mask is shifted.
    An ALiBi bias already holds the (shifted) causal mask as -inf entries.
    """
    T_new, T_all = q.size(-2), k.size(-2)
    if bias is not None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, **options)
    if T_new == T_all:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, **options)
    # One new query sees every key: no mask at all.
    mask = None if T_new == 1 else _last_rows(T_new, T_all, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **options)


# --8<-- [end:shifted_mask]


# --8<-- [start:expand_kv]
def expand_kv(kv: torch.Tensor, group_size: int) -> torch.Tensor:
    """One key (or value) head per query head: (B, G, T, D) -> (B, H, T, D).

    H = G * group_size. Query head h reads key/value head h // group_size: heads
    0 .. group_size - 1 share head 0, the next group_size share head 1, and so
    on. repeat_interleave puts the copies of one head next to each other, which
    is that order; repeat would tile the heads (0, 1, 0, 1, ...) and give each
    query the wrong group.
    """
    if isinstance(group_size, bool) or not isinstance(group_size, int):
        raise ValueError(f"group_size ({group_size!r}) must be an int")
    if group_size < 1:
        raise ValueError(
            f"group_size ({group_size}) must be >= 1: each key/value head "
            f"serves at least one query head"
        )
    return kv.repeat_interleave(group_size, dim=1)


# --8<-- [end:expand_kv]


# --8<-- [start:gqa]
class GroupedQueryAttention(nn.Module):
    """Causal self-attention whose H query heads share G key/value heads.

    Each group of H // G consecutive query heads reads one key/value head.
    G == H is multi-head attention (MHA), G == 1 multi-query attention (MQA).
    Only keys and values are shared: every query head keeps its own queries, so
    heads of a group still attend differently.

    Args:
        n_head: H, the number of query heads; must divide n_embed.
        n_kv_head: G, the number of key/value heads; must divide n_head.
        n_embed: C, the width of the input and output vectors.
        context_length: the longest sequence the layer trains on.
        position: a name in POSITIONS; "rope" and "alibi" act in this layer.
        max_length: the longest sequence accepted (None: context_length).
    """

    def __init__(
        self,
        n_head: int,
        n_kv_head: int,
        n_embed: int,
        context_length: int,
        *,
        position: str = "learned",
        max_length: int | None = None,
    ):
        super().__init__()
        check_config(n_head, n_embed, context_length)
        check_position(position, n_embed // n_head, context_length, max_length)
        check_positive_int("n_kv_head", n_kv_head)
        if n_head % n_kv_head != 0:
            raise ValueError(
                f"n_kv_head ({n_kv_head}) must divide n_head ({n_head}): each "
                f"key/value head serves the same number of query heads"
            )
        self.n_head = n_head
        self.n_kv_head = n_kv_head
        self.n_embed = n_embed
        self.context_length = context_length
        self.position = position
        self.max_length = max_length
        D = n_embed // n_head
        # One matmul for all three, as in CausalSelfAttention. Output channels:
        # H * D queries, then G * D keys, then G * D values. With G == H this is
        # CausalSelfAttention's layout exactly.
        self.qkv = nn.Linear(n_embed, (n_head + 2 * n_kv_head) * D, bias=False)
        self.proj = nn.Linear(n_embed, n_embed)

    def project(self, x: torch.Tensor):
        """x (B, T, C) -> q (B, H, T, D), k (B, G, T, D), v (B, G, T, D), before
        RoPE turns them (`turn`)."""
        B, T, C = x.shape
        H, G, D = self.n_head, self.n_kv_head, C // self.n_head
        q, k, v = self.qkv(x).split([H * D, G * D, G * D], dim=-1)
        q = q.view(B, T, H, D).transpose(1, 2)  # (B, T, H*D) -> (B, H, T, D)
        k = k.view(B, T, G, D).transpose(1, 2)  # (B, T, G*D) -> (B, G, T, D)
        v = v.view(B, T, G, D).transpose(1, 2)  # (B, T, G*D) -> (B, G, T, D)
        return q, k, v

    def attend(self, q, k, v, *, return_weights: bool = False):
        """The last T_new positions attend to all T_all: the cache uses this too.

        q (B, H, T_new, D); k, v (B, G, T_all, D) -> out (B, T_new, C), and the
        weights (B, H, T_new, T_all) with return_weights=True.
        """
        B, H, T_new, D = q.shape
        T_all = k.size(2)
        bias = _position_bias(self.position, q, T_all)  # ALiBi; else None
        if return_weights:
            # Written out: every query head gets its group's keys and values.
            k = expand_kv(k, H // self.n_kv_head)  # (B, G, T, D) -> (B, H, T, D)
            v = expand_kv(v, H // self.n_kv_head)  # (B, G, T, D) -> (B, H, T, D)
            mask = _last_rows(T_new, T_all, q.device)  # (T_new, T_all)
            y, weights = scaled_dot_product_attention(q, k, v, mask, bias=bias)
        else:
            # enable_gqa: the fused kernel reads head h // (H // G) for query
            # head h itself, without making H copies of the keys and values.
            # (B, H, T_new, D), (B, G, T_all, D) x2 -> (B, H, T_new, D)
            y = _fused_attention(q, k, v, bias, enable_gqa=True)
        y = y.transpose(1, 2).reshape(B, T_new, H * D)  # heads side by side
        y = self.proj(y)  # (B, T_new, C)
        return (y, weights) if return_weights else y

    def forward(self, x: torch.Tensor, cache=None, *, return_weights=False):
        """x (B, T, C) -> out (B, T, C); with return_weights=True, returns (out,
        weights (B, H, T, T_all)). A cache (snippets/cache.py) holds G heads."""
        check_input(x, self.n_embed, self.context_length, self.max_length)
        q, k, v, _ = read(cache, *self.project(x), self.position)  # RoPE; + cache
        return self.attend(q, k, v, return_weights=return_weights)

    def new_cache(self, batch_size, max_length, *, window=None, sinks=0):
        """An empty cache of G key/value heads (snippets/cache.py): max_length
        rows, or a rolling window with sinks."""
        return kv_cache(max_length, window, sinks)

    @classmethod
    def from_causal(cls, csa: CausalSelfAttention) -> "GroupedQueryAttention":
        """A GroupedQueryAttention with G == H computing exactly what csa does."""
        if not isinstance(csa, CausalSelfAttention):
            raise TypeError(
                f"csa must be a CausalSelfAttention, got {type(csa).__name__}"
            )
        new = cls(
            csa.n_head,
            csa.n_head,
            csa.n_embed,
            csa.context_length,
            position=csa.position,
            max_length=csa.max_length,
        )
        weight = csa.qkv.weight
        new = new.to(device=weight.device, dtype=weight.dtype)
        # Same (3C, C) layout when G == H: queries, keys, values, head by head.
        new.load_state_dict(csa.state_dict())
        return new


# --8<-- [end:gqa]


# --8<-- [start:mla]
# Why MultiHeadLatentAttention refuses rotary positions (see attend_absorbed).
MLA_ROPE = (
    "attention='mla' does not take position='rope': RoPE turns each key by its "
    "position, between the latent and the query, so the key up-projection can "
    "no longer be absorbed into the queries; DeepSeek-V2 adds a separate, "
    "decoupled RoPE key for that, which this guide's MLA leaves out"
)


class MultiHeadLatentAttention(nn.Module):
    """Causal self-attention whose keys and values come from one small latent.

    Each position's x is projected down to a latent c of R numbers, the only
    thing a cache must keep; every head's keys and values are projected up from
    it. Simplified from DeepSeek-V2's MLA (see the kv-heads page): no decoupled
    RoPE key (so position="rope" is refused), no low-rank query, no
    normalisation of the latent, and head size C // H: snippets/mla.py's
    LatentAttention with those parts off and a bias on its output
    projection.

    Args:
        n_head: H, the number of heads; must divide n_embed.
        n_embed: C, the width of the input and output vectors.
        context_length: the longest sequence the layer trains on.
        kv_latent: R, the width of the cached latent.
        position: a name in POSITIONS except "rope"; "alibi" acts here.
        max_length: the longest sequence accepted (None: context_length).
    """

    def __init__(
        self,
        n_head: int,
        n_embed: int,
        context_length: int,
        kv_latent: int,
        *,
        position: str = "learned",
        max_length: int | None = None,
    ):
        super().__init__()
        check_config(n_head, n_embed, context_length)
        check_position(position, n_embed // n_head, context_length, max_length)
        if position == "rope":
            raise ValueError(MLA_ROPE)
        check_positive_int("kv_latent", kv_latent)
        self.n_head = n_head
        self.n_embed = n_embed
        self.context_length = context_length
        self.kv_latent = kv_latent
        self.position = position
        self.max_length = max_length
        self.query = nn.Linear(n_embed, n_embed, bias=False)
        # Down to R numbers per position (cached), then up to H heads of D.
        self.kv_down = nn.Linear(n_embed, kv_latent, bias=False)
        self.key_up = nn.Linear(kv_latent, n_embed, bias=False)
        self.value_up = nn.Linear(kv_latent, n_embed, bias=False)
        self.proj = nn.Linear(n_embed, n_embed)

    def latent(self, x: torch.Tensor) -> torch.Tensor:
        """What a cache keeps of each position: x (B, T, C) -> c (B, T, R)."""
        return self.kv_down(x)

    def attend(self, x, c, *, return_weights: bool = False):
        """Training form: the last T_new positions x (B, T_new, C) attend to the
        keys and values projected up from all T_all latents c (B, T_all, R).

        Returns out (B, T_new, C), and weights (B, H, T_new, T_all) if asked.
        """
        B, T_new, C = x.shape
        T_all = c.size(1)
        H, D = self.n_head, C // self.n_head
        q = self.query(x).view(B, T_new, H, D).transpose(1, 2)  # (B, H, T_new, D)
        k = self.key_up(c).view(B, T_all, H, D).transpose(1, 2)  # (B, H, T_all, D)
        v = self.value_up(c).view(B, T_all, H, D).transpose(1, 2)  # same
        bias = _position_bias(self.position, q, T_all)  # ALiBi; else None
        if return_weights:
            mask = _last_rows(T_new, T_all, x.device)  # (T_new, T_all)
            y, weights = scaled_dot_product_attention(q, k, v, mask, bias=bias)
        else:
            y = _fused_attention(q, k, v, bias)  # (B, H, T_new, D)
        y = self.proj(y.transpose(1, 2).reshape(B, T_new, C))  # (B, T_new, C)
        return (y, weights) if return_weights else y

    def forward(self, x: torch.Tensor, cache=None, *, return_weights=False):
        """x (B, T, C) -> out (B, T, C); with return_weights=True, returns (out,
        weights (B, H, T, T_all)). A cache keeps the latents; a step reads them
        as they are (attend_absorbed)."""
        check_input(x, self.n_embed, self.context_length, self.max_length)
        c = self.latent(x)  # (B, T, R)
        if cache is None:
            return self.attend(x, c, return_weights=return_weights)
        (c,), _ = cache.update(c)  # (B, T_all, R): every latent so far
        if return_weights:  # the written-out form keeps the weights
            return self.attend(x, c, return_weights=True)
        return self.attend_absorbed(x, c)

    def new_cache(self, batch_size, max_length, *, window=None, sinks=0):
        """An empty cache of the latents (snippets/cache.py): max_length rows,
        or a rolling window with sinks."""
        return kv_cache(max_length, window, sinks)

    # --8<-- [end:mla]

    # --8<-- [start:absorbed]
    def attend_absorbed(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """What attend(x, c) computes, without projecting the latents up.

        Head h's score is q_h . (W_k,h c) = (W_k,h^T q_h) . c: move W_k,h to the
        query side and every head scores the latents directly; likewise
        sum_j w_j (W_v,h c_j) = W_v,h (sum_j w_j c_j). Per step, nothing of size
        T_all * C is made: this is how a latent cache is read at generation.
        x (B, T_new, C), c (B, T_all, R) -> (B, T_new, C).
        """
        B, T_new, C = x.shape
        H, D, R = self.n_head, C // self.n_head, self.kv_latent
        q = self.query(x).view(B, T_new, H, D).transpose(1, 2)  # (B, H, T_new, D)
        w_k = self.key_up.weight.view(H, D, R)  # head h: rows h*D .. h*D+D-1
        w_v = self.value_up.weight.view(H, D, R)
        q_latent = q @ w_k  # (B, H, T_new, D) x (H, D, R) -> (B, H, T_new, R)
        # One key/value "head" of width R shared by all H queries: multi-query
        # attention over the latents. The scale stays 1/sqrt(D), as in attend.
        bias = _position_bias(self.position, q, c.size(1))  # ALiBi; else None
        c = c.unsqueeze(1)  # (B, T_all, R) -> (B, 1, T_all, R)
        y_latent = _fused_attention(
            q_latent, c, c, bias, scale=1 / math.sqrt(D), enable_gqa=True
        )  # (B, H, T_new, R): each head's weighted mean of latents
        # (B, H, T_new, R) x (H, R, D) -> (B, H, T_new, D)
        y = y_latent @ w_v.transpose(1, 2)
        return self.proj(y.transpose(1, 2).reshape(B, T_new, C))  # (B, T_new, C)

    # --8<-- [end:absorbed]


# --8<-- [start:kv_cache_bytes]
def kv_cache_bytes(
    *,
    n_layer: int,
    tokens: int,
    n_kv_head: int | None = None,
    head_size: int | None = None,
    kv_latent: int | None = None,
    rope_head_size: int = 0,
    batch: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes a KV cache holds for `tokens` positions of `batch` sequences.

    Keys and values (MHA, GQA, MQA): 2 * n_layer * n_kv_head * head_size
    numbers per token. A latent (MLA): n_layer * (kv_latent + rope_head_size),
    where rope_head_size is DeepSeek-V2's decoupled RoPE key, one per token and
    layer (0 for this guide's layer, which has none). Give either n_kv_head and
    head_size, or kv_latent.
    """
    heads = {"n_kv_head": n_kv_head, "head_size": head_size, "kv_latent": kv_latent}
    given = [v is not None for v in heads.values()]
    if given not in ([True, True, False], [False, False, True]):
        raise ValueError(
            f"give n_kv_head and head_size (got {n_kv_head}, {head_size}) or "
            f"kv_latent (got {kv_latent}): not both, not neither"
        )
    sizes = {"n_layer": n_layer, "tokens": tokens, "batch": batch, **heads}
    for name, value in {**sizes, "bytes_per_element": bytes_per_element}.items():
        if value is not None:
            check_positive_int(name, value)
    if kv_latent is None:
        per_token_layer = 2 * n_kv_head * head_size  # one key and one value each
    else:  # the latent and the decoupled RoPE key
        per_token_layer = kv_latent + rope_head_size
    return n_layer * per_token_layer * tokens * batch * bytes_per_element


# --8<-- [end:kv_cache_bytes]


def check_kv_heads(config) -> None:
    """A GPTConfig's key/value options: n_kv_head belongs to the fused layer,
    kv_latent to attention="mla", which takes no RoPE."""
    for name in ("n_kv_head", "kv_latent"):
        value = getattr(config, name)
        if value is not None and (type(value) is not int or value <= 0):
            raise ValueError(f"{name} ({value!r}) must be a positive int or None")
    if config.n_kv_head is not None:
        if config.attention != "fused":
            raise ValueError(
                f"n_kv_head ({config.n_kv_head}) needs attention='fused', "
                f"got attention={config.attention!r}"
            )
        if config.n_head % config.n_kv_head != 0:
            raise ValueError(
                f"n_kv_head ({config.n_kv_head}) must divide "
                f"n_head ({config.n_head})"
            )
    if (config.attention == "mla") != (config.kv_latent is not None):
        raise ValueError(
            f"kv_latent ({config.kv_latent}) must be given exactly when "
            f"attention='mla' (got attention={config.attention!r})"
        )
    if config.attention == "mla" and config.position == "rope":
        raise ValueError(MLA_ROPE)
