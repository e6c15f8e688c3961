"""Fewer keys and values to cache: sharing key/value heads, and what a cache holds.

A GPT's grouped-query layer is an AttentionSpec with n_kv_head < n_head
(snippets/layers/configurable.py), its latent one an MLASpec
(snippets/layers/mla.py); the kv-heads page's readable layers are lessons
(snippets/lessons/kv_heads.py).
Shape letters: B batch, T sequence length, H query heads, G key/value heads
(n_kv_head), D head size, R the width of a latent (kv_latent).
"""

# --8<-- [start:imports]
import torch

from snippets.core.checks import check_positive_int

# --8<-- [end:imports]

__all__ = ["expand_kv", "kv_cache_bytes"]


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
