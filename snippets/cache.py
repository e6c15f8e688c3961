"""The one cache interface: what a layer keeps of the positions it has read.

Needs torch, snippets/layer_schedule.py (which keys a layer sees) and
snippets/positions.py (RoPE, which read applies). Every
attention layer a GPT block can hold takes `forward(x, cache=None)`: without a
cache, x holds positions 0 .. T - 1; with one, x holds the positions right after
those the cache has seen, and the layer adds what it must keep. Each kind of
layer has its kind of cache, and all of them are a `Cache`:

- `LayerCache`: keys and values (or MLA's latents) of a full, window or chunk
  layer, filled in place when given buffers;
- `RollingCache`: keys and values of the last `window` tokens, the first
  `sinks` kept for good (StreamingLLM), each turned to its place in the cache;
- `LinearState`: a linear layer's fixed-size state (Gated DeltaNet's,
  Mamba2's);
- `SharedCache`: nothing of its own, for a layer that reads another layer's
  keys and values (Gemma 4's num_kv_shared_layers).

A model's cache is a `ModelCache`, one per layer. Shape letters: B batch, G
key/value heads, T positions, D head size.
"""

# --8<-- [start:imports]
import torch

from snippets.layer_schedule import visible
from snippets.positions import apply_rope

# --8<-- [end:imports]

__all__ = [
    "Cache",
    "LayerCache",
    "RollingCache",
    "LinearState",
    "state_of",
    "SharedCache",
    "ModelCache",
    "read",
    "check_cache",
    "check_window",
    "check_fits",
]


# --8<-- [start:interface]
class Cache:
    """What every kind of cache has: its `kind` (which layers it serves),
    `seen`, the positions read so far (the next position is `seen`), `len()`,
    the positions it holds, and `tensors()`, everything it holds (to count its
    bytes)."""

    kind: str = ""
    seen: int = 0

    def __len__(self) -> int:
        return self.seen

    def tensors(self) -> list[torch.Tensor]:
        raise NotImplementedError

    def span(self, T_new: int) -> int:
        """How many positions the next T_new tokens' attention will cover: the
        largest relative position a layer must know (a table, RoPE's range)."""
        return self.seen + T_new


# --8<-- [end:interface]


def check_cache(cache, kinds: tuple, layer: str, why: str = "") -> None:
    """A layer given a cache of another kind: say which kinds it takes, and why.

    By the cache's `kind`, not its class: a page that defines LayerCache again
    makes a class of its own, and its caches still serve the guide's layers.
    """
    kind = getattr(cache, "kind", None)
    if kind not in kinds:
        raise TypeError(
            f"{layer} takes a cache of kind {' or '.join(map(repr, kinds))}, "
            f"got {type(cache).__name__} (kind {kind!r})"
            + (f": {why}" if why else "")
        )


# --8<-- [start:layer_cache]
class LayerCache(Cache):
    """One layer's keys and values (or latents) for a full, window or chunk
    layer: what its future queries can still see.

    Holds tensors with time on dim -2 (keys and values (B, G, T, D); MLA's
    latents (B, T, R)) and their positions. After each step a window layer
    keeps the size - 1 keys the next query sees besides its own (size with it),
    a chunk layer the keys of the next query's chunk, a full layer everything.
    A full layer given `buffers` (one per tensor, (..., T_max, ...)) writes
    into them in place: appending never copies what is already there. A
    cache is for reading: what it holds carries no gradient.

    Layers that read this one's keys and values (a `SharedCache` on it each)
    count in `readers`; while there are any, the layer leaves what it
    attended to in its latest step in `attended` for them.
    """

    def __init__(self, kind="full", size=None, buffers=()):
        zero = torch.zeros(1, dtype=torch.long)
        visible(zero, zero, kind, size)  # checks kind and size
        if buffers and kind != "full":
            raise ValueError(f"buffers are for full layers, got kind={kind!r}")
        self.kind, self.size, self.buffers = kind, size, tuple(buffers)
        self.held: tuple[torch.Tensor, ...] = ()
        self.positions = torch.zeros(0, dtype=torch.long)
        self.seen = 0
        self.readers = 0
        self.attended = None  # (keys, values, their positions, new positions)

    def __len__(self) -> int:
        return self.positions.numel()

    def tensors(self) -> list[torch.Tensor]:
        return list(self.buffers or self.held)

    def add(self, *new: torch.Tensor):
        """Append the new positions' tensors; return (all tensors this step
        attends to, their positions (T_all,)), and keep only what is needed."""
        T_new, device = new[0].size(-2), new[0].device
        fresh = torch.arange(self.seen, self.seen + T_new, device=device)
        if self.buffers:  # full: write into place, read everything so far
            end = self.seen + T_new
            if end > self.buffers[0].size(-2):
                raise ValueError(
                    f"{self.seen} cached + {T_new} new positions exceed the "
                    f"cache's {self.buffers[0].size(-2)} rows"
                )
            for buffer, t in zip(self.buffers, new, strict=True):
                buffer[..., self.seen : end, :] = t.detach()
            self.seen = end
            self.positions = torch.arange(end, device=device)
            self.held = tuple(b[..., :end, :] for b in self.buffers)
            return self.held, self.positions
        if self.held:
            new = tuple(
                torch.cat([a, b], dim=-2)
                for a, b in zip(self.held, new, strict=True)
            )
            fresh = torch.cat([self.positions.to(device), fresh])
        self.seen += T_new
        next_query = torch.tensor([self.seen], device=device)
        keep = visible(next_query, fresh, self.kind, self.size)[0]  # (T_all,)
        if keep.all():  # a full layer keeps everything: no copy
            self.held, self.positions = new, fresh
            return new, fresh
        keep = keep.nonzero().flatten()
        self.held = tuple(t.index_select(-2, keep) for t in new)
        self.positions = fresh[keep]
        return new, fresh


# --8<-- [end:layer_cache]


def check_window(window: int, sinks: int = 0) -> None:
    """A window of at least one token, with room beside the sinks."""
    for name, value, low in (("window", window, 1), ("sinks", sinks, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} ({value!r}) must be an int >= {low}")
    if sinks >= window:
        raise ValueError(
            f"sinks ({sinks}) must be < window ({window}): the window must "
            f"keep room for the newest token"
        )


# --8<-- [start:rolling]
class RollingCache(Cache):
    """The keys and values of at most `window` tokens (StreamingLLM, Xiao et
    al. 2023): when full, the oldest token is dropped, except the first
    `sinks` tokens of the stream, which stay for good.

    Keys are held *before* RoPE's rotation (`read` turns them): each step
    turns them to their place in the cache, 0 .. n - 1, so the distances a
    layer sees never exceed window - 1, however long the stream.
    """

    def __init__(self, window: int, sinks: int = 0):
        check_window(window, sinks)
        self.kind, self.window, self.sinks = "rolling", window, sinks
        self.held: tuple[torch.Tensor, ...] = ()
        self.seen = 0

    def __len__(self) -> int:
        return self.held[0].size(-2) if self.held else 0

    def tensors(self) -> list[torch.Tensor]:
        return list(self.held)

    def span(self, T_new: int) -> int:
        return min(len(self) + T_new, self.window)

    def add(self, *new: torch.Tensor):
        """Make room, append one token's tensors (..., 1, ...); return all the
        tensors held (..., n, ...) and their places 0 .. n - 1."""
        if new[0].size(-2) != 1:
            raise ValueError(
                f"a rolling cache reads one token at a time, got "
                f"{new[0].size(-2)}: feed the prompt token by token"
            )
        s = self.sinks
        if len(self) >= self.window:  # full: drop the oldest token after the sinks
            self.held = tuple(
                torch.cat([t[..., :s, :], t[..., s + 1 :, :]], dim=-2)
                for t in self.held
            )
        if self.held:
            new = tuple(
                torch.cat([a, b], dim=-2)
                for a, b in zip(self.held, new, strict=True)
            )
        self.held, self.seen = new, self.seen + 1
        return new, torch.arange(len(self), device=new[0].device)


# --8<-- [end:rolling]


# --8<-- [start:read]
def read(cache, q, k, v, position: str):
    """A softmax layer's queries, keys and values, positioned, with the cache's.

    q (B, H, T, D), k and v (B, G, T, D) of the new positions, not yet turned;
    position: the layer's scheme ("rope" turns rows to their positions, every
    other scheme leaves them). -> q, and the keys and values the new queries
    attend to (B, G, T_all, D); the queries are the last T of them.
    """

    def turn(t, offset):  # rows of t to positions offset, offset + 1, ...
        return apply_rope(t, offset) if position == "rope" else t

    if cache is None:  # positions 0 .. T - 1
        return turn(q, 0), turn(k, 0), v
    check_cache(cache, ("full", "rolling"), "a softmax layer")
    if cache.kind == "rolling":  # keys held unturned, turned to their places
        (k, v), places = cache.add(k, v)
        return turn(q, places.numel() - q.size(-2)), turn(k, 0), v
    start = cache.seen  # keys turned once, when new, to their own positions
    (k, v), _ = cache.add(turn(k, start), v)
    return turn(q, start), k, v


# --8<-- [end:read]


# --8<-- [start:linear_state]
class LinearState(Cache):
    """A linear layer's memory of the positions read so far: its state S
    (B, H, K, V) (Gated DeltaNet's delta-rule state, Mamba2's (B, H, N, P), or
    another rule's) and the last conv_size - 1 rows its short convolution
    reads, if it has one. The same bytes after 1 token or 100,000.

    Args:
        attn: the layer (gives H, K, V, C, the convolution's width, the dtype;
            conv_channels, if it has them: the width of the rows its
            convolution reads, else the input's C).
        batch_size: B; None: the batch of the first step.
    """

    def __init__(self, attn: torch.nn.Module, batch_size: int | None = None):
        first = attn.q if hasattr(attn, "q") else attn.in_proj
        self.like = {"dtype": first.weight.dtype, "device": first.weight.device}
        # The convolution reads conv_size - 1 earlier positions. Gated DeltaNet's
        # projections into it have no bias, so earlier *inputs* x (zeros before
        # the first token, as the layer's own padding) are as good as their
        # projections; Mamba2 keeps its convolution's own input rows (xBC).
        width = attn.conv.kernel_size[0] - 1 if hasattr(attn, "conv") else 0
        channels = getattr(attn, "conv_channels", first.in_features)
        self.shapes = (attn.n_head, attn.head_k, attn.head_v), (width, channels)
        self.S = self.recent = None
        self.kind, self.seen = "linear", 0
        if batch_size is not None:
            self.begin(batch_size)

    def begin(self, batch_size: int):
        """The state S and the recent rows for a batch of batch_size: zeros
        before the first step; another batch size later is refused."""
        if self.S is None:
            state, rows = self.shapes
            self.S = torch.zeros(batch_size, *state, **self.like)  # the rule's
            self.recent = torch.zeros(batch_size, *rows, **self.like)
        elif self.S.size(0) != batch_size:
            raise ValueError(
                f"x holds a batch of {batch_size}, the state one of "
                f"{self.S.size(0)}: a cache serves the batch it began with"
            )
        return self.S, self.recent

    def __len__(self) -> int:
        return 0  # no position is held one by one

    def tensors(self) -> list[torch.Tensor]:
        return [] if self.S is None else [self.S, self.recent]

    def span(self, T_new: int) -> int:
        return 0  # no positions inside: any length reads the same


def state_of(cache, layer: str, batch_size: int):
    """A linear layer's cache, checked, begun for its batch: -> (S, recent)."""
    why = "a linear layer keeps a fixed-size state, never keys and values"
    check_cache(cache, ("linear",), layer, why)
    return cache.begin(batch_size)


# --8<-- [end:linear_state]


# --8<-- [start:shared]
class SharedCache(Cache):
    """The cache of a layer that reads another layer's keys and values: it
    holds nothing; each step, once the source layer has read the new
    positions into its LayerCache, it gives what that layer attended to.

    Gemma 4's last num_kv_shared_layers layers work so: each reuses the keys
    and values of the last earlier layer of its kind, and caches nothing.
    """

    def __init__(self, source):
        check_cache(source, ("full", "window", "chunk"), "SharedCache")
        self.kind, self.source, self.last_read = "shared", source, 0
        source.readers += 1

    @property
    def seen(self) -> int:
        return self.source.seen

    def __len__(self) -> int:
        return 0  # the source holds the positions

    def tensors(self) -> list[torch.Tensor]:
        return []  # counted once, in the source

    def span(self, T_new: int) -> int:
        return self.source.span(T_new)  # what the source's attention covers

    def read(self, T_new: int):
        """The source's latest step: keys, values (B, G, T_all, D) and their
        positions (T_all,), if it read the same T_new positions."""
        if self.source.attended is None or self.source.seen == self.last_read:
            raise ValueError(
                "the source layer has read no new positions since this "
                "layer's last step: run it first, on the same positions"
            )
        k, v, k_pos, n = self.source.attended
        if n != T_new:
            raise ValueError(
                f"the source layer read {n} new positions, this layer {T_new}: "
                f"both must read the same positions"
            )
        self.last_read = self.source.seen
        return k, v, k_pos


# --8<-- [end:shared]


# --8<-- [start:model_cache]
class ModelCache(Cache):
    """A model's cache: one per layer, `layers[i]` for block i."""

    def __init__(self, layers):
        self.layers = list(layers)

    @property
    def seen(self) -> int:
        return self.layers[0].seen

    def __len__(self) -> int:
        return len(self.layers[0])

    def tensors(self) -> list[torch.Tensor]:
        return [t for layer in self.layers for t in layer.tensors()]

    def span(self, T_new: int) -> int:
        return max(layer.span(T_new) for layer in self.layers)


# --8<-- [end:model_cache]


def check_fits(cache, config, T: int) -> None:
    """A GPT's cache and its T new positions must fit its config: one cache
    per layer, and the positions within the table's rows (learned), or within
    max_length where attention covers them (a rolling cache's never pass its
    window). config: a GPTConfig."""
    if config.attention == "per-head":
        raise TypeError(
            "a cache needs attention='fused' or 'mla': the per-head layer "
            "keeps no keys; convert it with GPT.from_per_head(model)"
        )
    if len(getattr(cache, "layers", ())) != config.n_layer:
        raise ValueError(
            f"cache must be a ModelCache with one cache per layer "
            f"(n_layer={config.n_layer}), got {type(cache).__name__}"
        )
    limit = config.longest  # learned: context_length, the table's rows
    name = "max_length" if config.max_length else "context_length"
    # Positions in the embeddings count from the stream's start; RoPE's and
    # ALiBi's only across what attention covers.
    absolute = config.position in ("learned", "sinusoidal")
    if (cache.seen + T if absolute else cache.span(T)) > limit:
        raise ValueError(
            f"{cache.seen} cached + {T} new positions exceed {name}={limit}"
        )
