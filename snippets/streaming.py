"""Reading a text longer than the context: a rolling KV cache, with attention sinks.

A model trained on T tokens meets a stream of any length. Three ways to read it
with a window of W tokens: recompute the last W tokens for each new token; keep
a rolling KV cache of the last W tokens; or keep the first `sinks` tokens in the
cache for good as well (StreamingLLM, Xiao et al. 2023). Needs torch and, from
this folder, model.py (the GPT), positions.py (RoPE) and taming.py (its layer).
Shape letters: B batch, T sequence length, C channels, H heads, D head size,
L layers, V vocabulary.
"""

# --8<-- [start:imports]
import torch
import torch.nn.functional as F

from snippets.model import GPT
from snippets.positions import apply_rope
from snippets.taming import TamedAttention

# --8<-- [end:imports]

__all__ = [
    "RollingKVCache",
    "stream_step",
    "stream_logits",
    "recompute_logits",
    "first_token_attention",
]


def _check_window(window: int, sinks: int) -> None:
    for name, value, low in (("window", window, 1), ("sinks", sinks, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} ({value!r}) must be an int >= {low}")
    if sinks >= window:
        raise ValueError(
            f"sinks ({sinks}) must be < window ({window}): the window must keep "
            f"room for the newest token"
        )


def _check_rope(model: GPT) -> None:
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a GPT, got {type(model).__name__}")
    if model.config.position != "rope":
        raise ValueError(
            f"model.config.position ({model.config.position!r}) must be 'rope': "
            f"positions are given by the place in the cache, which needs "
            f"relative positions inside attention"
        )


# --8<-- [start:cache]
class RollingKVCache:
    """Keys and values of at most `window` tokens for every layer.

    When full, the oldest token is dropped, except the first `sinks` tokens of
    the stream, which stay for good. Keys are stored *before* RoPE's rotation:
    each step rotates them to their place in the cache, 0 .. n - 1, so the
    distances the model sees never exceed window - 1 (StreamingLLM's rule).

    Args:
        n_layer: L. window: W, the most tokens held, the newest included.
        sinks: how many of the stream's first tokens are never dropped, < W.
    """

    def __init__(self, n_layer: int, window: int, sinks: int = 0):
        _check_window(window, sinks)
        self.window, self.sinks = window, sinks
        self.k: list[torch.Tensor | None] = [None] * n_layer  # (B, H, n, D) each
        self.v: list[torch.Tensor | None] = [None] * n_layer
        self.seen = 0  # tokens of the stream read so far

    def __len__(self) -> int:
        return 0 if self.k[0] is None else self.k[0].size(2)

    def make_room(self) -> None:
        """Drop the oldest non-sink token of every layer if the cache is full."""
        if len(self) < self.window:
            return
        s = self.sinks
        for layer in range(len(self.k)):
            for store in (self.k, self.v):
                kept = store[layer]  # (B, H, W, D)
                # the sinks, then every token but the oldest after them
                kept = torch.cat([kept[:, :, :s], kept[:, :, s + 1 :]], dim=2)
                store[layer] = kept  # (B, H, W - 1, D)

    def add(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Append a token's key and value (B, H, 1, D); return all (B, H, n, D)."""
        if self.k[layer] is None:
            self.k[layer], self.v[layer] = k, v
        else:
            self.k[layer] = torch.cat([self.k[layer], k], dim=2)  # (B, H, n, D)
            self.v[layer] = torch.cat([self.v[layer], v], dim=2)
        return self.k[layer], self.v[layer]


# --8<-- [end:cache]


# --8<-- [start:step]
@torch.no_grad()
def stream_step(
    model: GPT, token: torch.Tensor, cache: RollingKVCache
) -> torch.Tensor:
    """Read one token of each stream: token (B, 1) -> next-token logits (B, V).

    The same steps as GPT.forward for one position, attending to the cache.
    RoPE: the cached keys sit at positions 0 .. n - 1, the new query at n - 1.
    """
    _check_rope(model)
    cache.make_room()
    x = model.tok_emb(token)  # (B, 1) -> (B, 1, C); RoPE adds no position vector
    B, _, C = x.shape
    for layer, block in enumerate(model.blocks):
        attn, h = block.attn, block.ln1(x)  # (B, 1, C)
        tamed = isinstance(attn, TamedAttention)  # the taming-softmax pieces
        if tamed:
            q, k, v = attn.heads(h)  # (B, H, 1, D) each, QK-norm applied
        else:
            H, D = attn.n_head, C // attn.n_head
            q, k, v = attn.qkv(h).split(C, dim=-1)  # 3 x (B, 1, C)
            # (B, 1, C) -> (B, H, 1, D) each
            q, k, v = (t.view(B, 1, H, D).transpose(1, 2) for t in (q, k, v))
        keys, values = cache.add(layer, k, v)  # (B, H, n, D), keys not yet rotated
        n = keys.size(2)
        q = apply_rope(q, offset=n - 1)  # the newest token: the last place
        keys = apply_rope(keys)  # places 0 .. n - 1
        # no mask: the newest token may see all n cached tokens
        if tamed:  # sinks, cap and gate as in training
            y = attn.attend(q, keys, values, h, causal=False)  # (B, 1, C)
        else:
            y = F.scaled_dot_product_attention(q, keys, values)  # (B, H, 1, D)
            y = attn.proj(y.transpose(1, 2).reshape(B, 1, C))  # (B, 1, C)
        x = x + block.drop(y)
        x = x + block.mlp(block.ln2(x))  # (B, 1, C)
    cache.seen += 1
    return model.lm_head(model.ln_f(x))[:, 0]  # (B, V)


def stream_logits(model: GPT, idx: torch.Tensor, window: int, sinks: int = 0):
    """Read idx (B, T) token by token through a RollingKVCache: logits (B, T, V).

    Row t predicts token t + 1 from at most `window` tokens: the first `sinks`
    of the stream and the most recent ones, token t included.
    """
    cache = RollingKVCache(len(model.blocks), window, sinks)
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
    _check_window(window, 0)
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
    x = model.drop(model.embed(idx))  # (B, T, C)
    shares = []
    for block in model.blocks:
        out, weights = block.attn(block.ln1(x), return_weights=True)  # (B, H, T, T)
        shares.append(weights[:, :, start:, 0].mean(dim=(0, 2)))  # (H,)
        x = x + block.drop(out)
        x = x + block.mlp(block.ln2(x))
    return torch.stack(shares)  # (L, H)


# --8<-- [end:first_token]
