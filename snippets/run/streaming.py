"""Reading a text longer than the context: a rolling KV cache, with attention sinks.

A model trained on T tokens meets a stream of any length. Three ways to read it
with a window of W tokens: recompute the last W tokens for each new token; keep
a rolling KV cache of the last W tokens; or keep the first `sinks` tokens in the
cache for good as well (StreamingLLM, Xiao et al. 2023). Shape letters: B batch,
T sequence length, C channels, H heads, D head size, L layers, V vocabulary.
"""

# --8<-- [start:imports]
import torch

from snippets.core.cache import ModelCache
from snippets.core.checks import check_positive_int
from snippets.core.model import GPT

# --8<-- [end:imports]

__all__ = [
    "stream_step",
    "stream_logits",
    "recompute_logits",
    "first_token_attention",
]


def _check_rope(model: GPT) -> None:
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a GPT, got {type(model).__name__}")
    for i, spec in enumerate(model.config.layer_specs()):
        position = getattr(spec, "position", None)  # CausalSpec's, TamedSpec's
        if position != "rope":
            raise ValueError(
                f"layer {i}'s position ({position!r}) must be 'rope': positions "
                f"are given by the place in the cache, which needs relative "
                f"positions inside attention"
            )


# --8<-- [start:step]
@torch.no_grad()
def stream_step(model: GPT, token: torch.Tensor, cache: ModelCache) -> torch.Tensor:
    """Read one token of each stream: token (B, 1) -> next-token logits (B, V).

    GPT.forward for one position, each layer attending to its rolling cache.
    RoPE: the cached keys sit at places 0 .. n - 1, the new query at n - 1.
    """
    _check_rope(model)
    return model(token, cache=cache)[0][:, -1]  # (B, 1, V) -> (B, V)


def stream_logits(model: GPT, idx: torch.Tensor, window: int, sinks: int = 0):
    """Read idx (B, T) token by token through a rolling cache: logits (B, T, V).

    Row t predicts token t + 1 from at most `window` tokens: the first `sinks`
    of the stream and the most recent ones, token t included.
    """
    cache = ModelCache.for_model(model, idx.size(0), window=window, sinks=sinks)
    T = idx.size(1)
    steps = [stream_step(model, idx[:, t : t + 1], cache) for t in range(T)]
    return torch.stack(steps, dim=1)  # T x (B, V) -> (B, T, V)


# --8<-- [end:step]


# --8<-- [start:recompute]
@torch.no_grad()
def recompute_logits(model: GPT, idx: torch.Tensor, window: int, chunk: int = 256):
    """For each t, run the model afresh on tokens t - window + 1 .. t: (B, T, V).

    No cache at all: every window starts at position 0, so its first token
    sees nothing before it. Costs a whole forward pass per token; the windows
    are batched `chunk` at a time.
    """
    check_positive_int("window", window)
    B, T = idx.shape
    rows = []
    for t in range(min(window, T)):  # the first windows: the stream's start
        rows.append(model(idx[:, : t + 1])[0][:, -1])  # (B, V)
    if T > window:
        windows = idx.unfold(1, window, 1)[:, 1:]  # (B, T - W, W): ends at W .. T-1
        for start in range(0, windows.size(1), chunk):
            part = windows[:, start : start + chunk]  # (B, n, W)
            n = part.size(1)
            logits, _ = model(part.reshape(B * n, window))  # (B n, W, V)
            rows.extend(logits[:, -1].view(B, n, -1).unbind(1))  # n x (B, V)
    return torch.stack(rows, dim=1)  # (B, T, V)


# --8<-- [end:recompute]


# --8<-- [start:first_token]
@torch.no_grad()
def first_token_attention(
    model: GPT, idx: torch.Tensor, start: int
) -> torch.Tensor:
    """How much attention each layer and head puts on token 0: (L, H).

    The weight of key 0, averaged over the batch and over the queries at
    positions start .. T - 1 (far from the start, where a uniform spread
    would give key 0 only 1 / (t + 1)). idx (B, T), T <= context_length.
    """
    if not 0 <= start < idx.size(1):
        raise ValueError(f"start ({start}) must be in [0, T={idx.size(1)})")
    _, _, weights = model(idx, return_weights=True)  # L x (B, H, T, T)
    shares = [w[:, :, start:, 0].mean(dim=(0, 2)) for w in weights]  # L x (H,)
    return torch.stack(shares)  # (L, H)


# --8<-- [end:first_token]
