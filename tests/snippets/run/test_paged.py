"""Tests for snippets/run/paged.py: a paged KV cache equal to the contiguous one, checked
against PyTorch's own paged-attention helper; copy on write of a partly filled shared block;
bad input refused with nothing left allocated. Batching and speculative decoding through it
are tests/snippets/run/test_serving.py; the checks against transformers are
tests/lab/test_serving_oracle.py.

Tolerances, measured on torch 2.13's CPU kernels: a packed paged step against each sequence run
alone in a ModelCache differs by at most 5e-6 in float32 (2e-5 asserted; logits of std > 0.5)
and 6e-15 in float64 (1e-12 asserted), not 0: the packed row's sdpa reads the other sequences'
keys too, masked out, and its sums run in another order.
"""

import dataclasses
import math
import re
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from snippets.core.attention import CausalSpec
from snippets.core.cache import ModelCache
from snippets.core.model import GPT
from snippets.run.paged import BlockPool, PagedCache, PoolFull
from snippets.run.serving import generate_batch, speculative_generate
from tests.snippets.run.paged_models import (
    MODELS,
    SPEC,
    C,
    T,
    ids,
    make,
    pool_is_empty,
)

# --- paged equals contiguous ------------------------------------------------------------------

# Steps of one paged run: (sequence, new tokens) packed into one row each. Chunked prefill
# beside decode steps; B leaves after step 3 and D joins in its freed blocks.
SCHEDULE = (
    (("A", 7), ("B", 3)),
    (("B", 5), ("A", 5), ("C", 4)),
    (("A", 1), ("B", 1), ("C", 11)),
    (("C", 1), ("A", 1)),
    (("D", 6), ("A", 1), ("C", 1)),
    (("D", 6), ("C", 3), ("A", 6)),
    (("A", 1), ("C", 1), ("D", 1)),
)
LENGTHS = Counter()
for _step in SCHEDULE:
    for _seq, _n in _step:
        LENGTHS[_seq] += _n  # A 22, B 9, C 21, D 13


def paged_run(model: GPT, block_size: int):
    """Logits of every sequence's tokens from one PagedCache run of SCHEDULE, the cache, and
    the streams. The pool holds A's, C's and D's blocks only: B's are reused."""
    streams = {s: ids(n, seed=i) for i, (s, n) in enumerate(sorted(LENGTHS.items()))}
    n_blocks = sum(math.ceil(LENGTHS[s] / block_size) for s in "ACD")
    cache = PagedCache(model, n_blocks, block_size)
    done, logits, freed = Counter(), {s: [] for s in streams}, {}
    for step in SCHEDULE:
        for s, _ in step:
            if s not in cache.tables:
                cache.add(s)
        chunks = [(s, streams[s][done[s] : done[s] + n]) for s, n in step]
        with torch.no_grad():
            out, _ = model(cache.plan(chunks), cache=cache)  # (1, N, V)
        for piece, (s, n) in zip(out[0].split([n for _, n in step]), step, strict=True):
            logits[s].append(piece)
            done[s] += n
            if done[s] == LENGTHS[s]:
                freed[s] = list(cache.tables[s])
                cache.free(s)
    later = set().union(*(freed[s] for s in "ACD"))
    assert set(freed["B"]) & later, "B's freed blocks were to be reused"
    return {s: torch.cat(p) for s, p in logits.items()}, cache, streams


def contiguous_run(model: GPT, streams: dict) -> dict:
    """Each sequence alone in a ModelCache, read in the same chunks as SCHEDULE reads it."""
    out = {}
    for s, stream in streams.items():
        cache, at, pieces = ModelCache.for_model(model, 1), 0, []
        for step in SCHEDULE:
            for seq, n in step:
                if seq == s:
                    with torch.no_grad():
                        logits, _ = model(torch.tensor([stream[at : at + n]]), cache=cache)
                    pieces.append(logits[0])
                    at += n
        out[s] = torch.cat(pieces)
    return out


@pytest.mark.parametrize("block_size", [1, 3, 16])
@pytest.mark.parametrize("name", list(MODELS))
def test_a_paged_run_equals_each_sequence_alone(name, block_size):
    model = make(MODELS[name])
    paged, cache, streams = paged_run(model, block_size)
    alone = contiguous_run(model, streams)
    for s in streams:
        assert paged[s].std() > 0.5  # sharp enough that a wrong key shows
        assert_close(paged[s], alone[s], rtol=0, atol=2e-5, msg=f"{name}, sequence {s}")
    assert pool_is_empty(cache.pool) and cache.tables == {}


@pytest.mark.parametrize("name", ["learned", "gqa rope", "window", "sinks"])
def test_in_float64_the_paged_run_is_the_contiguous_one(name):
    model = make(MODELS[name]).double()
    paged, _, streams = paged_run(model, 3)
    alone = contiguous_run(model, streams)
    for s in streams:
        assert_close(paged[s], alone[s], rtol=0, atol=1e-12, msg=f"{name}, sequence {s}")


# --- PyTorch's own paged attention (FlexAttention) --------------------------------------------


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("block_size", [1, 4])
def test_flex_attentions_paged_helper_stores_and_reads_as_ours(block_size, monkeypatch):
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    model = make(MODELS["gqa rope"])
    G, D, H = SPEC.n_kv_head, SPEC.head_size, SPEC.n_head
    streams = {0: ids(13, 1), 1: ids(6, 2), 2: ids(10, 3)}
    n_blocks = sum(math.ceil(len(t) / block_size) for t in streams.values()) + 2
    cache = PagedCache(model, n_blocks, block_size)
    for s in streams:
        cache.add(s)
    steps = [[(0, 5), (1, 2)], [(2, 8), (0, 6), (1, 2)], [(0, 2), (1, 2), (2, 2)]]
    done = Counter()
    seen = []  # the last step's (q, output) of each layer's sdpa
    sdpa = F.scaled_dot_product_attention
    for i, step in enumerate(steps):
        if i == len(steps) - 1:  # the last step: every sequence two new tokens

            def spy(q, k, v, **kw):
                y = sdpa(q, k, v, **kw)
                seen.append((q, y))
                return y

            monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
        chunks = [(s, streams[s][done[s] : done[s] + n]) for s, n in step]
        with torch.no_grad():
            model(cache.plan(chunks), cache=cache)
        done.update(dict(step))
    monkeypatch.undo()
    tables = [cache.tables[s] for s in streams]
    assert any(b != a + 1 for t in tables for a, b in zip(t, t[1:], strict=False)), (
        "blocks interleave"
    )
    # Their page table from our block tables; the keys and values from contiguous runs.
    B, L = len(streams), torch.tensor([done[s] for s in streams])
    paged = PagedAttention(n_blocks, block_size, B, device="cpu")
    for b, table in enumerate(tables):
        pages = torch.tensor(table)
        paged.page_table[b, : len(table)] = pages
        paged.physical_to_logical[b, pages] = torch.arange(len(table))
        paged.capacity[b] = len(table) * block_size
    alone = {}
    for s, stream in streams.items():
        alone[s] = ModelCache.for_model(model, 1)
        with torch.no_grad():
            model(torch.tensor([stream]), cache=alone[s])
    start = L - 2  # each sequence's two queries follow start positions

    def causal(b, h, q_idx, kv_idx):
        return kv_idx <= start[b] + q_idx

    longest = max(len(t) for t in tables) * block_size
    logical = create_block_mask(
        causal, B, None, 2, longest, device="cpu", BLOCK_SIZE=(2, block_size)
    )
    physical = paged.convert_logical_block_mask(logical, kv_len=L)
    for i, layer in enumerate(cache.layers):
        k_cache = torch.zeros(1, G, n_blocks * block_size, D)
        v_cache = torch.zeros_like(k_cache)
        for b, s in enumerate(streams):
            k, v = (t[..., : L[b], :] for t in alone[s].layers[i].tensors())  # (1, G, L, D)
            paged.assign(torch.tensor([b]), torch.arange(L[b])[None], k, v, k_cache, v_cache)
        # The same rows in the same slots (a later layer's inputs went through a packed
        # row: their last bits may differ).
        assert_close(k_cache[0], layer.k, rtol=0, atol=1e-5)
        assert_close(v_cache[0], layer.v, rtol=0, atol=1e-5)
        q, ours = seen[i]  # (1, H, 2B, D), the queries of the sequences in turn
        q = q[0].view(H, B, 2, D).transpose(0, 1)  # (B, H, 2, D)
        theirs = flex_attention(q, k_cache, v_cache, block_mask=physical, enable_gqa=True)
        assert_close(theirs, ours[0].view(H, B, 2, D).transpose(0, 1), rtol=0, atol=1e-5)


def blocks_of(cache: PagedCache, block: int) -> list[torch.Tensor]:
    """Every layer's keys and values in one block."""
    bs = cache.pool.block_size
    return [
        t[:, block * bs : (block + 1) * bs].clone()
        for layer in cache.layers
        for t in layer.tensors()
    ]


def test_a_partly_filled_shared_block_is_copied_before_it_is_written():
    model = make(MODELS["rope"])
    prompt = ids(6, 7)  # blocks of 4: one full, one holding 2 positions
    cache = PagedCache(model, 6, 4)
    cache.add("a")
    with torch.no_grad():
        model(cache.plan([("a", prompt)]), cache=cache)
    a0, a1 = cache.tables["a"]
    before = blocks_of(cache, a1)
    new = ids(3, 8)
    assert cache.add("b", prompt + new) == 6  # all of a's positions
    assert cache.tables["b"] == [a0, a1] and cache.pool.refs[a0] == cache.pool.refs[a1] == 2
    free = len(cache.pool.free)
    with torch.no_grad():
        b_logits, _ = model(cache.plan([("b", new)]), cache=cache)  # positions 6, 7, 8
        a_logits, _ = model(cache.plan([("a", new[:1])]), cache=cache)  # a's own position 6
    b0, b1, b2 = cache.tables["b"]
    assert (b0, cache.pool.refs[a0]) == (a0, 2)  # the full block: still shared
    assert b1 != a1 and cache.pool.refs[a1] == cache.pool.refs[b1] == 1  # copied
    assert len(cache.pool.free) == free - 2  # the copy and b's third block
    after = blocks_of(cache, a1)
    for old, now in zip(before, after, strict=True):
        assert torch.equal(now[:, :2], old[:, :2])  # a's two positions, untouched by b
        assert now[:, 3].abs().sum() == 0  # b's position 7 went to its copy
    for s, tokens, got in (("b", prompt + new, b_logits), ("a", prompt + new[:1], a_logits)):
        with torch.no_grad():
            whole, _ = model(torch.tensor([tokens]))
        assert_close(got[0], whole[0, 6:], rtol=0, atol=2e-5, msg=s)
    cache.free("a"), cache.free("b")
    assert pool_is_empty(cache.pool)


# --- bad input --------------------------------------------------------------------------------


def test_a_step_that_needs_more_blocks_than_are_free_changes_nothing():
    model = make({})
    cache = PagedCache(model, 4, 4)
    cache.add("a"), cache.add("b")
    with torch.no_grad():
        model(cache.plan([("a", ids(6, 1))]), cache=cache)  # 2 blocks
    tables, tokens, free = {s: list(t) for s, t in cache.tables.items()}, dict(cache.tokens), 2
    message = "this step needs 3 blocks of 4 positions; 2 of 4 are free"
    with pytest.raises(PoolFull, match=re.escape(message)):
        cache.plan([("a", ids(1, 2)), ("b", ids(9, 3))])  # a fits, b's 3 blocks do not
    assert len(cache.pool.free) == free and cache.tables == tables
    assert {s: list(t) for s, t in cache.tokens.items()} == tokens
    # A copy on write counts too: c shares a's partly filled block.
    cache.add("c", cache.tokens["a"] + [1])
    cache.plan([("b", ids(5, 4))])  # the last two blocks
    refs = list(cache.pool.refs)
    with pytest.raises(PoolFull, match=re.escape("needs 1 blocks of 4 positions; 0 of 4")):
        cache.plan([("c", [1])])
    assert cache.pool.refs == refs and cache.tables["c"] == cache.tables["a"]


def test_a_sequence_not_in_the_cache_or_a_bad_length_is_named():
    model = make({})
    cache = PagedCache(model, 4, 4)
    cache.add("a")
    cache.plan([("a", ids(5, 1))])
    free = len(cache.pool.free)
    for call in (lambda: cache.plan([("a", [1]), ("b", [2])]), lambda: cache.free("b")):
        with pytest.raises(ValueError, match=re.escape("sequence 'b' is not in the cache")):
            call()
    with pytest.raises(ValueError, match=re.escape("chunks is empty")):
        cache.plan([])
    for length in (-1, 6, 2.0):
        rule = f"length ({length!r}) must be an int in [0, 5]: the positions of sequence 'a'"
        with pytest.raises(ValueError, match=re.escape(rule)):
            cache.truncate("a", length)
    with pytest.raises(ValueError, match=re.escape("sequence 'a' exists already")):
        cache.add("a")
    assert len(cache.pool.free) == free and len(cache.tokens["a"]) == 5


@pytest.mark.parametrize("size", [0, -1, True, 2.0])
def test_a_block_size_must_be_a_positive_int(size):
    model = make({})
    rule = f"block_size ({size!r}) must be an int >= 1"
    with pytest.raises(ValueError, match=re.escape(rule)):
        PagedCache(model, 4, size)
    with pytest.raises(ValueError, match=re.escape(rule)):
        generate_batch(model, [[1, 2]], 2, block_size=size)
    with pytest.raises(ValueError, match=re.escape("n_blocks (0) must be an int >= 1")):
        BlockPool(0, 4)


@pytest.mark.parametrize(
    ("changes", "bad", "why"),
    [
        ({"position": "alibi"}, 0, "ALiBi's bias here assumes one stream of positions"),
        (
            {"position": "none", "layers": (SPEC, dataclasses.replace(SPEC, k_eq_v=True))},
            1,
            "its values are its keys' projection (k_eq_v): one tensor",
        ),
        (
            {"layers": (CausalSpec(C, 4, T, per_head=True),) * 2},
            0,
            "holds the keys and values of CausalSelfAttention and AttentionSpec layers only",
        ),
    ],
)
def test_a_layer_a_paged_cache_cannot_hold_is_named(changes, bad, why):
    model = make(changes)
    name = type(model.blocks[bad].attn).__name__
    start = f"block {bad}'s layer ({name}) cannot use a paged cache: "
    for call in (
        lambda: PagedCache(model, 4, 4),
        lambda: generate_batch(model, [[1, 2]], 2),
        lambda: speculative_generate(model, model, [1, 2], 2),
    ):
        with pytest.raises(TypeError, match=re.escape(start) + ".*" + re.escape(why)):
            call()
