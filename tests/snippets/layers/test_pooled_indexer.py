"""Tests for snippets/layers/pooled_indexer.py: GLM-5-Next's indexer over pools of keys.

A pool's entry is a per-channel softmax-weighted average of its keys (equal gates:
the mean; one gate far above the others: that key); an incomplete pool has none;
each query gets the positions of its best pools among those it sees whole (a brute
force over every query agrees) and of its own incomplete pool, nothing later; bad
input is a ValueError naming it. Against transformers' glm5_next:
tests/lab/test_glm5_next.py.
"""

import pytest
import torch
from torch.testing import assert_close

from snippets.core.masks import visible
from snippets.layers.pooled_indexer import PooledIndexer, pool_choice, pool_keys
from snippets.layers.sparse_mla import IndexerSpec

B, Ta, E, P = 2, 23, 6, 4


def test_equal_gates_give_each_pools_mean_and_no_incomplete_pool():
    keys = torch.randn(B, Ta, E, dtype=torch.float64)
    pooled = pool_keys(keys, torch.zeros(B, Ta, E, dtype=torch.float64), torch.zeros(P, E))
    assert pooled.shape == (B, Ta // P, E)  # 5 pools; positions 20 .. 22 have none
    assert_close(pooled, keys[:, :20].reshape(B, 5, P, E).mean(2))


def test_the_weights_are_a_softmax_per_channel():
    keys = torch.randn(B, Ta, E, dtype=torch.float64)
    gates = torch.zeros(B, Ta, E, dtype=torch.float64)
    gates[:, 1, :3] = 100.0  # pool 0: channels 0..2 take position 1's key
    place = torch.zeros(P, E, dtype=torch.float64)
    place[2, 3:] = 100.0  # every pool: channels 3.. take its third position's
    pooled = pool_keys(keys, gates, place)
    assert_close(pooled[:, 0, :3], keys[:, 1, :3])
    assert_close(pooled[:, :, 3:], keys[:, 2:20:P, 3:])


def test_each_query_gets_its_best_whole_pools_and_its_own_tail():
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(B, Ta, Ta // P, generator=gen)
    positions = torch.arange(Ta)
    chosen = pool_choice(scores, visible(positions, positions), P, 2 * P)
    for b in range(B):
        for t in range(Ta):
            whole = (t + 1) // P  # the pools ending at or before t
            best = scores[b, t, :whole].topk(min(2, whole)).indices.tolist()
            expected = {p * P + i for p in best for i in range(P)}
            expected |= set(range(whole * P, t + 1))  # its own pool, so far
            assert set(chosen[b, t].nonzero().flatten().tolist()) == expected
    assert not chosen.triu(1).any()  # nothing later than the query
    no_tail = pool_choice(scores, visible(positions, positions), P, 2 * P, tail=False)
    assert not no_tail[:, : P - 1].any() and (chosen & ~no_tail).any()


def test_bad_input_is_named():
    spec = IndexerSpec(n_head=2, head_size=E, rope_dims=0, top_k=6)
    with pytest.raises(ValueError, match=r"top_k \(6\) must be a multiple of pool \(4\)"):
        PooledIndexer(spec, 16, 8, None, pool=4)
    with pytest.raises(ValueError, match=r"pool \(0\)"):
        PooledIndexer(spec, 16, 8, None, pool=0)
    with pytest.raises(ValueError, match=r"gates must be \(B, T, E\)"):
        pool_keys(torch.zeros(B, Ta, E), torch.zeros(B, Ta - 1, E), torch.zeros(P, E))
    with pytest.raises(ValueError, match=r"keys must be \(B, T, E\) with E=6"):
        pool_keys(torch.zeros(B, Ta, E + 1), torch.zeros(B, Ta, E), torch.zeros(P, E))
    positions = torch.arange(Ta)
    with pytest.raises(ValueError, match=r"scores has 4 pools, not Ta // pool = 5"):
        pool_choice(torch.zeros(B, Ta, 4), visible(positions, positions), P, P)
