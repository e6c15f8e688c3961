"""Which keys a layer sees, layer by layer: full, window and chunked layers.

Today's models mix layers: Gemma 3 has five sliding-window layers to one global,
gpt-oss alternates window and full, Llama 4 has chunked layers with RoPE and,
every fourth layer, a full layer without positions (NoPE) whose queries are
warmed by a temperature that grows with the position.

A mask here is built from positions, not from a square: queries at positions
q_pos see keys at positions k_pos, so one rule serves a whole sequence and a
decode step whose keys come from a cache. Shape letters: T_new queries, T_all
keys.
"""

# --8<-- [start:imports]
import torch

from snippets.checks import check_positive_int

# --8<-- [end:imports]

__all__ = [
    "KINDS",
    "visible",
    "repeat_schedule",
    "nope_temperature",
]

# The kinds of layer: every earlier key, the last `window` keys, or the keys of
# the query's own chunk of `chunk` positions.
KINDS = ("full", "window", "chunk")


# --8<-- [start:visible]
def visible(
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    kind: str = "full",
    size: int | None = None,
) -> torch.Tensor:
    """(T_new, T_all) bool: may the query at q_pos[i] see the key at k_pos[j]?

    full: k <= q (causal). window: also q - k < size, the query and the
    size - 1 keys before it (transformers' sliding_window). chunk: also
    k // size == q // size, the keys of its own chunk (Llama 4).
    """
    if kind not in KINDS:
        raise ValueError(f"kind ({kind!r}) must be one of {list(KINDS)}")
    q, k = q_pos[:, None], k_pos[None, :]  # (T_new, 1), (1, T_all)
    seen = k <= q  # (T_new, T_all): causal
    if kind == "full":
        return seen
    check_positive_int(f"size of a {kind} layer", size)
    if kind == "window":
        return seen & (q - k < size)
    return seen & (k // size == q // size)


# --8<-- [end:visible]


# --8<-- [start:schedule]
def repeat_schedule(pattern: list[str], n_layer: int) -> list[str]:
    """The kinds of n_layer layers: pattern repeated, e.g. Gemma 3's
    ["window"] * 5 + ["full"] or gpt-oss's ["window", "full"]."""
    check_positive_int("n_layer", n_layer)
    if not pattern or any(kind not in KINDS for kind in pattern):
        raise ValueError(
            f"pattern ({pattern!r}) must be a non-empty list of {list(KINDS)}"
        )
    return [pattern[i % len(pattern)] for i in range(n_layer)]


# --8<-- [end:schedule]


# --8<-- [start:temperature]
def nope_temperature(
    positions: torch.Tensor, floor_scale: int, attn_scale: float
) -> torch.Tensor:
    """Llama 4's query multiplier on its NoPE layers, one per position (T,).

    1 + attn_scale * log(1 + floor((t + 1) / floor_scale)): 1 for the first
    floor_scale - 1 positions, then a slow logarithmic rise, which keeps
    attention over ever more keys from flattening out.
    """
    check_positive_int("floor_scale", floor_scale)
    steps = torch.floor((positions.double() + 1) / floor_scale)
    return 1 + attn_scale * torch.log1p(steps)  # (T,) float64


# --8<-- [end:temperature]
