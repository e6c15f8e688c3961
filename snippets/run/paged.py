"""A paged KV cache: the keys and values of many sequences in blocks of one
pool, found through a block table per sequence (vLLM's PagedAttention, Kwon et
al. 2023).

- `BlockPool`: the cache's memory cut into blocks of block_size positions,
  each with a count of the sequences that hold it.
- `block_slots`: where a sequence's positions sit, through its block table.
- `PagedCache`: a GPT's cache for many sequences. Every layer keeps its keys
  and values in the pool's blocks. One step packs the new tokens of several
  sequences into one row; each layer writes their keys and values through the
  tables, reads each sequence's keys back through its table, and its mask
  keeps each sequence to its own keys. Sequences that begin with the same
  tokens share those blocks; a shared block is copied before it is written
  (SGLang's RadixAttention shares prefixes so, Zheng et al. 2024).

snippets/run/serving.py runs many sequences through it. Shape letters: N the
tokens of one step, K the keys they read, G key/value heads, D head size.
"""

# --8<-- [start:imports]
import dataclasses
import math

import torch

from snippets.core.attention import CausalSelfAttention
from snippets.core.cache import Cache, ModelCache
from snippets.core.masks import visible
from snippets.core.model import GPT
from snippets.layers.configurable import ConfigurableAttention

# --8<-- [end:imports]

__all__ = ["BlockPool", "PoolFull", "PagedCache", "block_slots", "check_pageable"]


# --8<-- [start:pool]
class PoolFull(ValueError):
    """The pool has fewer free blocks than a step needs."""


class BlockPool:
    """n_blocks blocks of block_size positions: which are free, and how many
    sequences hold each (a block shared by a common prefix has more than one).
    """

    def __init__(self, n_blocks: int, block_size: int):
        for name, value in (("n_blocks", n_blocks), ("block_size", block_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} ({value!r}) must be an int >= 1")
        self.n_blocks, self.block_size = n_blocks, block_size
        self.refs = [0] * n_blocks  # how many sequences hold each block
        self.free = list(range(n_blocks - 1, -1, -1))  # pop() gives 0, 1, ...

    def allocate(self) -> int:
        """A free block, now held once."""
        if not self.free:
            raise PoolFull(f"all {self.n_blocks} blocks are in use")
        block = self.free.pop()
        self.refs[block] = 1
        return block

    def share(self, block: int) -> None:
        """One more sequence holds this block."""
        if self.refs[block] < 1:
            raise ValueError(f"block {block} is free: only a held block is shared")
        self.refs[block] += 1

    def release(self, block: int) -> None:
        """One sequence lets go; the last one to let go frees the block."""
        if self.refs[block] < 1:
            raise ValueError(f"block {block} is free already")
        self.refs[block] -= 1
        if self.refs[block] == 0:
            self.free.append(block)


# --8<-- [end:pool]


# --8<-- [start:block_slots]
def block_slots(
    table: torch.Tensor, positions: torch.Tensor, block_size: int
) -> torch.Tensor:
    """The rows of the storage that hold a sequence's positions (n,): position
    p is row p % block_size of block table[p // block_size], and block b's rows
    are b * block_size .. b * block_size + block_size - 1."""
    block = table[positions // block_size]  # (n,): which block, by the table
    return block * block_size + positions % block_size  # (n,)


# --8<-- [end:block_slots]


@dataclasses.dataclass
class Step:
    """What one forward pass reads and writes, for every layer alike.

    q_pos, q_seq (N,): each new token's position and sequence; slots (N,):
    where its keys and values go (block * block_size + offset); k_slots,
    k_pos, k_seq (K,): the keys the new tokens read, the new ones last.
    """

    q_pos: torch.Tensor
    q_seq: torch.Tensor
    slots: torch.Tensor
    k_slots: torch.Tensor
    k_pos: torch.Tensor
    k_seq: torch.Tensor


# --8<-- [start:paged_layer]
class PagedLayer(Cache):
    """One layer's keys and values in the pool's blocks: storage (G,
    n_blocks * block_size, D) each, made at the first step. The step (the
    owner's) says where the new rows go and which rows to read back."""

    readers = 0  # no layer reads another's keys from a paged cache

    def __init__(self, owner: "PagedCache"):
        self.owner = owner
        self.k = self.v = None

    @property
    def seen(self) -> int:
        return self.owner.seen

    def next_positions(self, T_new: int) -> torch.Tensor:
        return self.owner.next_positions(T_new)

    def span(self, T_new: int) -> int:
        return self.owner.span(T_new)

    def tensors(self) -> list[torch.Tensor]:
        return [] if self.k is None else [self.k, self.v]

    def update(self, k, v, turn=None):
        """k, v (1, G, N, D) of the step's new tokens -> every key and value
        they read (1, G, K, D), read through the block tables, and the keys'
        positions (K,)."""
        step = self.owner.step
        if turn is not None:  # RoPE: each key to its own position, once
            k = turn(k, step.q_pos)
        if self.k is None:  # (G, n_blocks * block_size, D) each
            rows = self.owner.pool.n_blocks * self.owner.pool.block_size
            self.k = k.new_zeros(k.size(1), rows, k.size(-1))
            self.v = v.new_zeros(v.size(1), rows, v.size(-1))
        slots = step.slots.to(k.device)
        self.k[:, slots] = k[0].detach()  # write through the tables
        self.v[:, slots] = v[0].detach()
        k_slots = step.k_slots.to(k.device)  # read through the tables
        keys = self.k[:, k_slots].unsqueeze(0)  # (1, G, K, D)
        values = self.v[:, k_slots].unsqueeze(0)  # (1, G, K, D)
        return (keys, values), step.k_pos.to(k.device)

    def visible(self, q_pos, k_pos, kind="full", size=None):
        """The layer's rule, and each query sees only its own sequence's keys."""
        step = self.owner.step
        own = step.q_seq[:, None] == step.k_seq[None, :]  # (N, K)
        return visible(q_pos, k_pos, kind, size) & own.to(q_pos.device)


# --8<-- [end:paged_layer]


def check_pageable(model: GPT) -> None:
    """Every layer of model must read keys and values a paged cache can hold:
    the batched causal layer (not ALiBi's, whose bias assumes one stream) or an
    AttentionSpec layer with its own keys, values and static positions."""
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a GPT, got {type(model).__name__}")
    for i, block in enumerate(model.blocks):
        layer, why = block.attn, None
        if isinstance(layer, CausalSelfAttention):
            if layer.position == "alibi":
                why = "ALiBi's bias here assumes one stream of positions"
        elif isinstance(layer, ConfigurableAttention):
            s = layer.spec
            if s.kv_source is not None:
                why = f"it reads layer {s.kv_source}'s keys and values"
            elif s.k_eq_v:
                why = "its values are its keys' projection (k_eq_v): one tensor"
            elif s.rope is not None and getattr(s.rope, "kind", "") == "dynamic":
                why = "dynamic NTK turns keys by the sequence's length"
        else:
            why = (
                "a paged cache holds the keys and values of CausalSelfAttention "
                "and AttentionSpec layers only"
            )
        if why:
            raise TypeError(
                f"block {i}'s layer ({type(layer).__name__}) cannot use a paged "
                f"cache: {why}"
            )


# --8<-- [start:paged_cache]
class PagedCache(ModelCache):
    """A GPT's keys and values for many sequences, in blocks of one pool.

    A sequence is a key (any hashable). `tables[s]` are its blocks, in order:
    position p sits in block `tables[s][p // block_size]` at row p % block_size.
    `tokens[s]` are the tokens whose keys and values are written. Before each
    forward pass, `plan` says which new tokens of which sequences it reads;
    `model(idx, cache=...)` then runs them as one packed row (1, N).
    """

    def __init__(self, model: GPT, n_blocks: int, block_size: int):
        check_pageable(model)
        self.pool = BlockPool(n_blocks, block_size)
        self.layers = [PagedLayer(self) for _ in model.blocks]
        self.tables: dict = {}
        self.tokens: dict = {}
        self.step: Step | None = None

    @property
    def seen(self) -> int:  # the longest sequence before the step
        return max((len(t) for t in self.tokens.values()), default=0)

    def next_positions(self, T_new: int) -> torch.Tensor:
        if self.step is None or self.step.q_pos.numel() != T_new:
            raise ValueError(
                f"this step was planned for "
                f"{0 if self.step is None else self.step.q_pos.numel()} new "
                f"tokens, got {T_new}: plan the step, then run its tokens"
            )
        return self.step.q_pos

    def span(self, T_new: int) -> int:
        return int(self.next_positions(T_new).max()) + 1

    def blocks_needed(self, positions: int) -> int:
        return math.ceil(positions / self.pool.block_size)

    def add(self, seq, prompt=()) -> int:
        """A new sequence; it shares the blocks of the longest run of prompt's
        tokens another sequence has written (never the prompt's last token,
        whose scores the caller needs). Returns how many positions it shares."""
        if seq in self.tables:
            raise ValueError(f"sequence {seq!r} exists already")
        prompt, shared, source = list(prompt), 0, None
        for other, written in self.tokens.items():
            n = 0
            limit = min(len(written), len(prompt) - 1)
            while n < limit and written[n] == prompt[n]:
                n += 1
            if n > shared:
                shared, source = n, other
        table = (
            []
            if source is None
            else self.tables[source][: self.blocks_needed(shared)]
        )
        for block in table:
            self.pool.share(block)
        self.tables[seq], self.tokens[seq] = list(table), prompt[:shared]
        return shared

    def _check_known(self, seq) -> None:
        if seq not in self.tables:
            raise ValueError(f"sequence {seq!r} is not in the cache: add it first")

    def free(self, seq) -> None:
        """Forget a sequence: each of its blocks is released once."""
        self._check_known(seq)
        for block in self.tables.pop(seq):
            self.pool.release(block)
        del self.tokens[seq]

    def truncate(self, seq, length: int) -> None:
        """Keep a sequence's first `length` positions; release the blocks
        past them (a rejected draft's, in speculative decoding)."""
        self._check_known(seq)
        written = len(self.tokens[seq])
        if type(length) is not int or not 0 <= length <= written:
            raise ValueError(
                f"length ({length!r}) must be an int in [0, {written}]: the "
                f"positions of sequence {seq!r} to keep"
            )
        keep = self.blocks_needed(length)
        for block in self.tables[seq][keep:]:
            self.pool.release(block)
        del self.tables[seq][keep:]
        del self.tokens[seq][length:]

    def _cost(self, seq, n_new: int) -> int:
        """Blocks a step of n_new tokens needs: new ones, and a copy of each
        shared block it writes into."""
        table, start = self.tables[seq], len(self.tokens[seq])
        first, last = (
            start // self.pool.block_size,
            self.blocks_needed(start + n_new),
        )
        copies = sum(self.pool.refs[b] > 1 for b in table[first:last])
        return max(0, last - len(table)) + copies

    def _own_block(self, seq, i: int) -> None:
        """Block i of seq, held by seq alone: a shared one is copied first."""
        table, pool = self.tables[seq], self.pool
        if i == len(table):
            table.append(pool.allocate())
            return
        old = table[i]
        if pool.refs[old] == 1:
            return
        new, bs = pool.allocate(), pool.block_size
        for layer in self.layers:  # copy on write, in every layer
            for store in layer.tensors():
                store[:, new * bs : (new + 1) * bs] = store[
                    :, old * bs : (old + 1) * bs
                ]
        pool.release(old)
        table[i] = new

    def slots(self, seq, positions: torch.Tensor) -> torch.Tensor:
        """Where positions (n,) of seq sit in the storage, through its table."""
        table = torch.tensor(self.tables[seq], dtype=torch.long)
        return block_slots(table, positions, self.pool.block_size)  # (n,)

    def plan(self, chunks) -> torch.Tensor:
        """The next step: chunks [(seq, new token ids)], in order. Makes room
        for the new positions (all or nothing: if the pool is short, nothing
        changes) and returns the packed ids (1, N) to run."""
        if not chunks:
            raise ValueError("chunks is empty: a step reads at least one token")
        for seq, _ in chunks:
            self._check_known(seq)
        need = sum(self._cost(seq, len(new)) for seq, new in chunks)
        if need > len(self.pool.free):
            raise PoolFull(
                f"this step needs {need} blocks of {self.pool.block_size} "
                f"positions; {len(self.pool.free)} of {self.pool.n_blocks} are free"
            )
        q_pos, q_seq, slots, k_slots, k_pos, k_seq, ids = [], [], [], [], [], [], []
        for number, (seq, new) in enumerate(chunks):
            start = len(self.tokens[seq])
            end = start + len(new)
            bs = self.pool.block_size
            for i in range(start // bs, self.blocks_needed(end)):
                self._own_block(seq, i)
            old, fresh = torch.arange(start), torch.arange(start, end)
            q_pos.append(fresh)
            q_seq.append(torch.full((len(new),), number))
            slots.append(self.slots(seq, fresh))
            k_slots.append(self.slots(seq, old))
            k_pos.append(old)
            k_seq.append(torch.full((start,), number))
            self.tokens[seq].extend(new)
            ids.extend(new)
        new_slots = torch.cat(slots)
        self.step = Step(
            q_pos=torch.cat(q_pos),
            q_seq=torch.cat(q_seq),
            slots=new_slots,
            k_slots=torch.cat([*k_slots, new_slots]),  # the new keys last
            k_pos=torch.cat([*k_pos, *q_pos]),
            k_seq=torch.cat([*k_seq, *q_seq]),
        )
        return torch.tensor([ids], dtype=torch.long)  # (1, N)


# --8<-- [end:paged_cache]
