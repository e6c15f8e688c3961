"""The one cache interface: what a layer keeps of the positions it has read.

Every attention layer a GPT block can hold takes `forward(x, cache=None)` and
makes its own cache with `new_cache(batch_size, max_length)`: without a cache,
x holds positions 0 .. T - 1; with one, x holds the positions right after
those the cache has seen. Every cache has one verb, `update(*new)`: it takes
what the layer makes of the new positions and returns what the layer reads,
the new positions last. It also says where the new tokens sit (`next_positions`)
and which keys each of them sees (`visible`).

- `LayerCache`: keys and values (or MLA's latents) of a full, window or chunk
  layer; a full layer's, written in place into buffers of max_length rows;
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

from snippets.core.masks import visible
from snippets.core.positions import apply_rope

# --8<-- [end:imports]

__all__ = [
    "Cache",
    "LayerCache",
    "RollingCache",
    "LinearState",
    "SharedCache",
    "ModelCache",
    "kv_cache",
    "read",
    "no_rolling",
    "A_STATE",
]


# --8<-- [start:interface]
class Cache:
    """What every kind of cache has: `update(*new)`, its one verb; `seen`,
    the positions read so far (the next position is `seen`); `len()`, the
    positions it holds; and `tensors()`, everything it holds (to count its
    bytes)."""

    seen: int = 0

    def update(self, *new: torch.Tensor):
        """Take what the layer makes of the new positions; return what the
        layer reads: for attention, the keys and values it attends to."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self.seen

    def tensors(self) -> list[torch.Tensor]:
        raise NotImplementedError

    def span(self, T_new: int) -> int:
        """How many positions the next T_new tokens' attention will cover: the
        largest relative position a layer must know (a table, RoPE's range)."""
        return self.seen + T_new

    def next_positions(self, T_new: int) -> torch.Tensor:
        """The positions of the next T_new tokens (T_new,), on the host."""
        return torch.arange(self.seen, self.seen + T_new)

    def visible(self, q_pos, k_pos, kind="full", size=None) -> torch.Tensor:
        """Which keys (at k_pos) each new query (at q_pos) sees, (T_new, T_all)
        bool. (A paged batch's cache also keeps each sequence to its own.)"""
        return visible(q_pos, k_pos, kind, size)


# --8<-- [end:interface]


# --8<-- [start:layer_cache]
class LayerCache(Cache):
    """One layer's keys and values (or latents) for a full, window or chunk
    layer: what its future queries can still see.

    Holds tensors with time on dim -2 (keys and values (B, G, T, D); MLA's
    latents (B, T, R)) and their positions. After each step a window layer
    keeps the size - 1 keys the next query sees besides its own (size with it),
    a chunk layer the keys of the next query's chunk, a full layer everything.
    A full layer's cache given max_length writes into buffers of max_length
    rows, made at its first step: appending never copies what is already
    there. A cache is for reading: what it holds carries no gradient.

    Layers that read this one's keys and values (a `SharedCache` on it each)
    count in `readers`; while there are any, the layer leaves what it
    attended to in its latest step in `attended` for them.
    """

    def __init__(self, kind="full", size=None, max_length=None):
        zero = torch.zeros(1, dtype=torch.long)
        visible(zero, zero, kind, size)  # checks kind and size
        self.kind, self.size, self.max_length = kind, size, max_length
        self.buffers: tuple[torch.Tensor, ...] = ()
        self.held: tuple[torch.Tensor, ...] = ()
        self.positions = torch.zeros(0, dtype=torch.long)
        self.seen = 0
        self.readers = 0
        self.attended = None  # (keys, values, their positions)

    def __len__(self) -> int:
        return self.positions.numel()

    def tensors(self) -> list[torch.Tensor]:
        return list(self.buffers or self.held)

    def update(self, *new: torch.Tensor, turn=None):
        """Append the new positions' tensors; return (all tensors this step
        attends to, their positions (T_all,)), and keep only what is needed.
        turn(t, offset), if given, turns the first tensor (the keys) to its
        positions, once, when it arrives (RoPE)."""
        T_new, device = new[0].size(-2), new[0].device
        if turn is not None:
            new = (turn(new[0], self.seen), *new[1:])
        end = self.seen + T_new
        if self.kind == "full" and self.max_length is not None:
            if end > self.max_length:
                raise ValueError(
                    f"{self.seen} cached + {T_new} new positions exceed the "
                    f"cache's {self.max_length} rows"
                )
            if not self.buffers:  # (..., max_length, ...) each, zeros
                self.buffers = tuple(
                    t.new_zeros(*t.shape[:-2], self.max_length, t.size(-1))
                    for t in new
                )
            for buffer, t in zip(self.buffers, new, strict=True):
                buffer[..., self.seen : end, :] = t.detach()
            self.seen, self.positions = end, torch.arange(end)
            self.held = tuple(b[..., :end, :] for b in self.buffers)
            return self.held, torch.arange(end, device=device)
        # Positions live on the host: choosing what to keep waits for no device.
        fresh = torch.cat([self.positions, torch.arange(self.seen, end)])
        if self.held:
            new = tuple(
                torch.cat([a, b], dim=-2)
                for a, b in zip(self.held, new, strict=True)
            )
        self.seen = end
        keep = visible(torch.tensor([end]), fresh, self.kind, self.size)[0]
        if keep.all():  # a full layer keeps everything: no copy
            self.held, self.positions = new, fresh
            return new, fresh.to(device)
        keep = keep.nonzero().flatten()  # (kept,)
        self.held = tuple(t.index_select(-2, keep.to(device)) for t in new)
        self.positions = fresh[keep]
        return new, fresh.to(device)


# --8<-- [end:layer_cache]


# --8<-- [start:rolling]
class RollingCache(Cache):
    """The keys and values of at most `window` tokens (StreamingLLM, Xiao et
    al. 2023): when full, the oldest token is dropped, except the first
    `sinks` tokens of the stream, which stay for good.

    Keys are held *before* RoPE's rotation: each step turns them to their
    place in the cache, 0 .. n - 1, so the distances a layer sees never exceed
    window - 1, however long the stream.
    """

    def __init__(self, window: int, sinks: int = 0):
        for name, value, low in (("window", window, 1), ("sinks", sinks, 0)):
            if type(value) is not int or value < low:
                raise ValueError(f"{name} ({value!r}) must be an int >= {low}")
        if sinks >= window:
            raise ValueError(
                f"sinks ({sinks}) must be < window ({window}): the window must "
                f"keep room for the newest token"
            )
        self.window, self.sinks = window, sinks
        self.held: tuple[torch.Tensor, ...] = ()
        self.seen = 0

    def __len__(self) -> int:
        return self.held[0].size(-2) if self.held else 0

    def tensors(self) -> list[torch.Tensor]:
        return list(self.held)

    def span(self, T_new: int) -> int:
        return min(len(self) + T_new, self.window)

    def update(self, *new: torch.Tensor, turn=None):
        """Make room, append one token's tensors (..., 1, ...); return all the
        tensors held (..., n, ...), the first turned by turn(t, 0) to places
        0 .. n - 1 if given, and those places (n,)."""
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
        if turn is not None:
            new = (turn(new[0], 0), *new[1:])
        return new, torch.arange(len(self), device=new[0].device)


# --8<-- [end:rolling]


# --8<-- [start:read]
def kv_cache(max_length: int, window: int | None = None, sinks: int = 0):
    """A softmax layer's keys and values: every position's, in buffers of
    max_length rows; or, given a window, a RollingCache of window and sinks."""
    if window is None:
        if sinks:
            raise ValueError(
                f"sinks ({sinks}) are for a rolling cache: give window"
            )
        return LayerCache("full", max_length=max_length)
    return RollingCache(window, sinks)


# Why a linear layer's cache cannot roll.
A_STATE = "it keeps a fixed-size state, never keys and values"


def no_rolling(layer, window, why: str) -> None:
    """A layer whose cache cannot roll refuses a window, saying why."""
    if window is not None:
        raise TypeError(f"{type(layer).__name__} keeps no rolling cache: {why}")


def read(cache, q, k, v, position: str):
    """A softmax layer's queries, keys and values, positioned, with the cache's.

    q (B, H, T, D), k and v (B, G, T, D) of the new positions, not yet turned;
    position: the layer's scheme ("rope" turns rows to their positions, every
    other scheme leaves them). -> q, and the keys and values the new queries
    attend to (B, G, T_all, D) with their positions (T_all,); the queries are
    the last T of them, and a query sits where its key does.
    """
    turn = apply_rope if position == "rope" else None
    if cache is None:  # positions 0 .. T - 1
        k_pos = torch.arange(k.size(-2), device=k.device)
        k = k if turn is None else turn(k, 0)
    else:  # keys turned by the cache: once, when new, or to their places
        (k, v), k_pos = cache.update(k, v, turn=turn)
    q = q if turn is None else turn(q, k_pos[k_pos.numel() - q.size(-2) :])
    return q, k, v, k_pos


# --8<-- [end:read]


# --8<-- [start:linear_state]
class LinearState(Cache):
    """A linear layer's memory of the positions read so far: its state S
    (B, H, K, V) (Gated DeltaNet's delta-rule state, Mamba2's (B, H, N, P), or
    another rule's) and the last `width` rows its short convolution reads, if
    it has one. The same bytes after 1 token or 100,000.

    `update(rows)` takes the rows the convolution reads at the new positions
    (B, T, channels) and returns the state so far and those rows after the
    cached ones (B, width + T, channels); the layer's rule reads S and writes
    the state after the new positions back into it (S.copy_), as a cache
    writes into its buffers in place.

    Args:
        batch_size: B.
        state: (H, K, V), the shape of one sequence's state.
        width: the convolution's width - 1 (0: no convolution).
    """

    def __init__(self, batch_size: int, state: tuple, width: int = 0):
        self.batch_size, self.state, self.width = batch_size, state, width
        self.S = self.recent = None
        self.seen = 0

    def update(self, rows: torch.Tensor):
        if self.S is None:  # zeros before the first position
            self.S = rows.new_zeros(self.batch_size, *self.state)
            self.recent = rows.new_zeros(self.batch_size, self.width, rows.size(-1))
        if rows.size(0) != self.batch_size:
            raise ValueError(
                f"x holds a batch of {rows.size(0)}, the state one of "
                f"{self.batch_size}: a cache serves the batch it was made for"
            )
        context = torch.cat([self.recent, rows], dim=1)  # (B, width + T, channels)
        self.recent = context[:, context.size(1) - self.width :]
        self.seen += rows.size(1)
        return self.S, context

    def __len__(self) -> int:
        return 0  # no position is held one by one

    def tensors(self) -> list[torch.Tensor]:
        return [] if self.S is None else [self.S, self.recent]

    def span(self, T_new: int) -> int:
        return 0  # no positions inside: any length reads the same


# --8<-- [end:linear_state]


# --8<-- [start:shared]
class SharedCache(Cache):
    """The cache of a layer that reads another layer's keys and values: it
    holds nothing; each step, once the source layer has read the new
    positions into its LayerCache, its update gives what that layer attended
    to: (keys, values (B, G, T_all, D)), their positions (T_all,).

    Gemma 4's last num_kv_shared_layers layers work so: each reuses the keys
    and values of the last earlier layer of its kind, and caches nothing.
    """

    def __init__(self, source: LayerCache):
        self.source, self.last_read = source, 0
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

    def update(self, *new: torch.Tensor):
        if self.source.attended is None or self.source.seen == self.last_read:
            raise ValueError(
                "the source layer has read no new positions since this "
                "layer's last step: run it first, on the same positions"
            )
        self.last_read = self.source.seen
        *held, k_pos = self.source.attended
        return tuple(held), k_pos


# --8<-- [end:shared]


# --8<-- [start:model_cache]
class ModelCache(Cache):
    """A model's cache: one per layer, `layers[i]` for block i."""

    def __init__(self, layers):
        self.layers = list(layers)

    @classmethod
    def for_layers(cls, layers, batch_size, max_length, *, window=None, sinks=0):
        """Each layer's new_cache, in order; window and sinks: a rolling cache,
        refused by the layers that cannot keep one. A layer that reads an
        earlier layer's keys and values (its kv_source) gets that layer's."""
        caches = []
        for layer in layers:
            i = getattr(layer, "kv_source", None)
            source = {} if i is None else {"source": caches[i]}
            rolling = {"window": window, "sinks": sinks}
            caches.append(
                layer.new_cache(batch_size, max_length, **rolling, **source)
            )
        return cls(caches)

    @classmethod
    def for_model(cls, model, batch_size: int, **rolling):
        """A GPT's cache: block.attn.new_cache(batch_size, T_max) for every
        block, T_max the longest sequence it accepts."""
        attn = [block.attn for block in model.blocks]
        return cls.for_layers(attn, batch_size, model.config.longest, **rolling)

    @property
    def seen(self) -> int:
        return self.layers[0].seen

    def __len__(self) -> int:
        return len(self.layers[0])

    def tensors(self) -> list[torch.Tensor]:
        return [t for layer in self.layers for t in layer.tensors()]

    def span(self, T_new: int) -> int:
        return max(layer.span(T_new) for layer in self.layers)

    def next_positions(self, T_new: int) -> torch.Tensor:
        return self.layers[0].next_positions(T_new)


# --8<-- [end:model_cache]
