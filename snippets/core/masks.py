"""Attention masks: which keys each query may see.

A mask is a bool tensor, True where a query may attend to a key, that broadcasts
against the (B, H, T, T) scores: (T, T) for every row of a batch, (B, T, T) or
(B, 1, T) for one per row. Shape letters: B batch, H heads, T sequence length.

Each mask beyond causal and padding also comes as a FlexAttention `mask_mod`: a
function (b, h, q_idx, kv_idx) -> bool tensor answering the same question for
index tensors. FlexAttention calls it to find which blocks of the (T, T) score
matrix hold any visible key, and skips the others: a sliding window then costs
time linear in T. The mask_mods need nothing from FlexAttention, only torch.

Which keys a layer sees, layer by layer (visible): today's models mix full,
sliding-window and chunked layers (Gemma 3 has five window layers to one
global, gpt-oss alternates window and full, Llama 4 has chunked layers with
RoPE and, every fourth layer, a full layer without positions whose queries are
warmed by a temperature that grows with the position). Such a mask is built
from positions, not from a square: queries at positions q_pos see keys at
positions k_pos, so one rule serves a whole sequence and a decode step whose
keys come from a cache (T_new queries, T_all keys).
"""

# --8<-- [start:imports]
import torch

from snippets.core.checks import check_positive_int

# --8<-- [end:imports]

__all__ = [
    "causal_mask",
    "padding_mask",
    "attention_mask",
    "causal_mask_mod",
    "bidirectional_mask",
    "bidirectional_mask_mod",
    "sliding_window_mask",
    "sliding_window_mask_mod",
    "prefix_lm_mask",
    "prefix_lm_mask_mod",
    "document_mask",
    "document_mask_mod",
    "KINDS",
    "visible",
    "repeat_schedule",
    "nope_temperature",
]


# --8<-- [start:causal_mask]
def causal_mask(T: int) -> torch.Tensor:
    """The causal mask: query position i may attend to key positions j <= i.

    Args:
        T: sequence length, a positive int.

    Returns:
        A (T, T) bool tensor, True on and below the diagonal.
    """
    check_positive_int("T", T)
    # Lower triangle: row i allows columns 0..i, so no token sees a later one.
    return torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T)


# --8<-- [end:causal_mask]


# --8<-- [start:padding_mask]
def padding_mask(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """Which keys are real tokens, for rows padded on the left to length T.

    Args:
        lengths: (B,) the number of real tokens of each row: its last ones.
        T: the padded length.

    Returns:
        (B, 1, T) bool, True at real keys: the same for every query.
    """
    if lengths.dim() != 1 or bool(((lengths < 1) | (lengths > T)).any()):
        raise ValueError(f"lengths must be 1-D, each in [1, T={T}], got {lengths}")
    real = torch.arange(T) >= T - lengths[:, None]  # (T,) vs (B, 1) -> (B, T)
    return real[:, None, :]  # (B, 1, T)


def attention_mask(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """Causal and padding masks combined: (B, T, T), True where query may see key.

    A padding query would see no key at all, and a row of -inf scores is NaN
    after softmax; it keeps its own position, and its output is never used.

    Args:
        lengths: (B,) the number of real tokens of each row: its last ones.
        T: the padded length.

    Returns:
        (B, T, T) bool.
    """
    mask = causal_mask(T) & padding_mask(lengths, T)  # (T, T) & (B, 1, T)
    return mask | torch.eye(T, dtype=torch.bool)  # (B, T, T)


# --8<-- [end:padding_mask]


# --8<-- [start:checks]
def _check_int(name: str, value: int, low: int, high: int | None = None) -> None:
    """Reject a size that is not an int in [low, high], naming the argument."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{name} ({value!r}) must be an int, got {type(value).__name__}"
        )
    if value < low:
        raise ValueError(f"{name} ({value}) must be at least {low}")
    if high is not None and value > high:
        raise ValueError(f"{name} ({value}) must be at most T ({high})")


def _is_integer(t: torch.Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex())


def _check_doc_ids(doc_ids: torch.Tensor) -> None:
    """doc_ids must be a (B, T) tensor of integers: one document id per token."""
    if not isinstance(doc_ids, torch.Tensor):
        raise TypeError(
            f"doc_ids must be a torch.Tensor, got {type(doc_ids).__name__}"
        )
    if doc_ids.dim() != 2:
        raise ValueError(
            f"doc_ids must have shape (B, T), got shape {tuple(doc_ids.shape)}"
        )
    # Float ids would compare equal only by accident of rounding; bool has two ids.
    if doc_ids.dtype == torch.bool or not _is_integer(doc_ids):
        raise TypeError(f"doc_ids must hold integers, got {doc_ids.dtype}")


# --8<-- [end:checks]


# --8<-- [start:bidirectional]
def bidirectional_mask(T: int) -> torch.Tensor:
    """No mask at all: every query sees every key, as in an encoder.

    Args:
        T: sequence length, a positive int.

    Returns:
        A (T, T) bool tensor, all True.
    """
    _check_int("T", T, 1)
    return torch.ones(T, T, dtype=torch.bool)  # (T, T)


def bidirectional_mask_mod(b, h, q_idx, kv_idx):
    """FlexAttention twin of bidirectional_mask: True for every index pair."""
    return q_idx >= 0  # always True, shaped like the index tensors


# --8<-- [end:bidirectional]


# --8<-- [start:causal_mod]
def causal_mask_mod(b, h, q_idx, kv_idx):
    """FlexAttention twin of causal_mask: query i sees key j if j <= i."""
    return kv_idx <= q_idx


# --8<-- [end:causal_mod]


# --8<-- [start:sliding_window]
def sliding_window_mask(T: int, window: int) -> torch.Tensor:
    """Causal, and only the last `window` positions: keys i - window + 1 .. i.

    Args:
        T: sequence length, a positive int.
        window: how many keys a query sees at most, itself included; >= 1.
            window >= T gives the causal mask.

    Returns:
        A (T, T) bool tensor: a band of width `window` ending on the diagonal.
    """
    _check_int("T", T, 1)
    _check_int("window", window, 1)
    ones = torch.ones(T, T, dtype=torch.bool)
    # tril keeps j <= i (causal); triu(diagonal=-(window - 1)) keeps
    # j >= i - window + 1, so that row i has at most `window` True entries.
    return torch.tril(ones) & torch.triu(ones, diagonal=-(window - 1))  # (T, T)


def sliding_window_mask_mod(window: int):
    """FlexAttention twin of sliding_window_mask(T, window), for any T."""
    _check_int("window", window, 1)

    def mask_mod(b, h, q_idx, kv_idx):
        # Not in the future, and less than `window` steps in the past.
        return (kv_idx <= q_idx) & (q_idx - kv_idx < window)

    return mask_mod


# --8<-- [end:sliding_window]


# --8<-- [start:prefix_lm]
def prefix_lm_mask(T: int, prefix_length: int) -> torch.Tensor:
    """Bidirectional over the first `prefix_length` positions, causal after.

    The prefix (a prompt, a source sentence) is read as a whole, like an
    encoder reads it; the positions after it are generated one at a time, so
    they see the whole prefix and the positions before them, never later ones.

    Args:
        T: sequence length, a positive int.
        prefix_length: P, in [0, T]. P = 0 gives the causal mask, P = T the
            bidirectional one.

    Returns:
        A (T, T) bool tensor.
    """
    _check_int("T", T, 1)
    _check_int("prefix_length", prefix_length, 0, high=T)
    mask = causal_mask(T)  # (T, T)
    # The prefix block: every prefix query sees every prefix key, both ways.
    mask[:prefix_length, :prefix_length] = True
    return mask


def prefix_lm_mask_mod(prefix_length: int):
    """FlexAttention twin of prefix_lm_mask(T, prefix_length), for T >= it."""
    _check_int("prefix_length", prefix_length, 0)

    def mask_mod(b, h, q_idx, kv_idx):
        # A prefix key is visible from every query: from the prefix (both
        # ways) and from later positions (which are past it). Others: causal.
        return (kv_idx < prefix_length) | (kv_idx <= q_idx)

    return mask_mod


# --8<-- [end:prefix_lm]


# --8<-- [start:document]
def document_mask(doc_ids: torch.Tensor) -> torch.Tensor:
    """Causal within each document of a packed row, nothing across documents.

    Training packs several short documents into one row of T tokens to waste
    no compute on padding. Without this mask, a document's tokens would attend
    to the end of the document packed before it.

    Args:
        doc_ids: (B, T) integers, the document each token belongs to; tokens
            with the same id in a row are one document.

    Returns:
        A (B, T, T) bool tensor, True where query i and key j <= i are in the
        same document.
    """
    _check_doc_ids(doc_ids)
    B, T = doc_ids.shape
    # (B, T, 1) == (B, 1, T) -> (B, T, T): the two tokens share a document.
    same_doc = doc_ids[:, :, None] == doc_ids[:, None, :]
    return same_doc & causal_mask(T)  # (B, T, T) & (T, T) -> (B, T, T)


def document_mask_mod(doc_ids: torch.Tensor):
    """FlexAttention twin of document_mask(doc_ids).

    The ids are read inside the mask_mod by indexing, so one function serves
    every row of the batch (b) and every position pair.
    """
    _check_doc_ids(doc_ids)

    def mask_mod(b, h, q_idx, kv_idx):
        same_doc = doc_ids[b, q_idx] == doc_ids[b, kv_idx]
        return same_doc & (kv_idx <= q_idx)

    return mask_mod


# --8<-- [end:document]


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
