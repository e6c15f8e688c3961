"""Tests for snippets/layers/sparse_mla.py: DSA's indexer as shipped, sparse MLA,
Mistral 4's temperature.

RoPE on part of the indexer's channels keeps the rest and gives scores that depend
on distance only, in either pair layout; the indexer's scores are the published
formula; a query attends to exactly its top_k earlier keys; with top_k >= T the
layer is DeepSeek-V3's MLA; a cache (latents, rope keys, indexer keys) decodes
what the whole sequence gives; a layer reusing another's choice reads it; the
temperature is 1 over the first `length` positions and grows after.
"""

import dataclasses

import pytest
import torch
from torch.testing import assert_close

from snippets.core.rope_scaling import RopeSpec
from snippets.layers.mla import LatentAttention, MLASpec
from snippets.layers.sparse_mla import (
    Choice,
    IndexerSpec,
    SparseLatentAttention,
    TemperedLatentAttention,
    choose,
    position_temperature,
    sparse_gathered,
    turn_part,
)

SPEC = MLASpec(
    n_embed=32,
    n_head=4,
    kv_latent=12,
    nope_head_size=8,
    rope_head_size=4,
    v_head_size=6,
    q_rank=16,
    rope=RopeSpec(base=100.0),
)
INDEXER = IndexerSpec(n_head=8, head_size=8, rope_dims=4, top_k=3)
T = 12


def make(cls=SparseLatentAttention, *args, seed=0):
    torch.manual_seed(seed)
    layer = cls(SPEC, *args)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)  # sharp attention, and an indexer that discriminates
    x = torch.randn(2, T, SPEC.n_embed, generator=torch.Generator().manual_seed(seed + 1))
    return layer.eval(), x


def steps(layer, x, prefill=5):
    cache = layer.new_cache(x.size(0), x.size(1))
    out = [layer(x[:, :prefill], cache=cache)]
    out += [layer(x[:, t : t + 1], cache=cache) for t in range(prefill, x.size(1))]
    return torch.cat(out, 1), cache


@pytest.mark.parametrize("pairs", ["adjacent", "half"])
def test_partial_rope_keeps_the_rest_and_scores_depend_on_distance(pairs):
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 1, 8, generator=g), torch.randn(1, 1, 8, generator=g)
    rope = RopeSpec(base=100.0)
    turned = turn_part(q.expand(1, 6, 8), rope, 4, pairs)
    assert torch.equal(turned[..., 4:], q.expand(1, 6, 8)[..., 4:])  # the rest unturned
    assert not torch.allclose(turned[..., :4], q.expand(1, 6, 8)[..., :4])

    def score(m, n):
        return (turn_part(q, rope, 4, pairs, m) * turn_part(k, rope, 4, pairs, n)).sum()

    assert_close(score(5, 2), score(9, 6))  # distance 3 both times
    assert not torch.allclose(score(5, 2), score(5, 4))


def test_half_pairs_are_the_adjacent_rotation_of_moved_channels():
    x = torch.randn(2, 5, 8)
    moved = x[..., [0, 2, 1, 3, 4, 5, 6, 7]]  # (0, 2), (1, 3): the halves of 4 channels
    rope = RopeSpec(base=100.0)
    half = turn_part(x, rope, 4, "half", 3)
    assert_close(half[..., [0, 2, 1, 3, 4, 5, 6, 7]], turn_part(moved, rope, 4, "adjacent", 3))
    assert not torch.allclose(half, turn_part(x, rope, 4, "adjacent", 3))


@torch.no_grad()
def test_indexer_scores_are_the_published_formula():
    layer, x = make(SparseLatentAttention, INDEXER)
    ix = layer.indexer
    latent = layer.q_norm(layer.q_down(x))  # the query latent, not x
    keys = ix.keys(x)
    B, heads, E = 2, INDEXER.n_head, INDEXER.head_size
    q = ix.q(latent).view(B, T, heads, E).transpose(1, 2)
    q = turn_part(q, SPEC.rope, 4, "half").transpose(1, 2)  # (B, T, I, E)
    k = turn_part(
        torch.layer_norm(ix.k(x), (E,), ix.k_norm.weight, ix.k_norm.bias, 1e-6),
        SPEC.rope,
        4,
        "half",
    )
    assert_close(keys, k)
    w = ix.weights(x) * heads**-0.5  # per head, then softmax_scale E^-0.5 inside the ReLU
    expected = torch.einsum(
        "bti,btsi->bts", w, torch.relu(torch.einsum("btie,bse->btsi", q, k) * E**-0.5)
    )
    assert_close(ix(x, latent, keys), expected, rtol=1e-5, atol=1e-5)


def test_choose_keeps_the_top_k_allowed_keys():
    scores = torch.randn(2, 6, 6)
    allowed = torch.ones(6, 6, dtype=torch.bool).tril()
    chosen = choose(scores, allowed, 3)
    assert chosen.sum(-1).tolist() == [[1, 2, 3, 3, 3, 3]] * 2  # min(t + 1, top_k)
    assert not (chosen & ~allowed).any()
    best = scores.masked_fill(~allowed, -torch.inf).topk(3, -1).values[:, 3:, -1:]
    assert (scores[:, 3:].masked_fill(~chosen[:, 3:], torch.inf) >= best).all()
    assert torch.equal(choose(scores, allowed, 6), allowed.expand(2, 6, 6))


@torch.no_grad()
def test_each_query_attends_to_its_top_k_keys_only():
    layer, x = make(SparseLatentAttention, INDEXER)
    _, w = layer(x, return_weights=True)  # (B, H, T, T)
    attended = (w > 0).sum(-1)
    assert (attended <= INDEXER.top_k).all() and (attended[..., INDEXER.top_k :] == 3).all()
    assert torch.equal(w > 0, layer.choice.chosen[:, None].expand_as(w))


@torch.no_grad()
def test_with_top_k_of_every_key_it_is_deepseek_v3s_mla():
    dense, x = make(SparseLatentAttention, dataclasses.replace(INDEXER, top_k=T))
    plain = LatentAttention(SPEC)
    plain.load_state_dict(dense.state_dict(), strict=False)
    assert_close(dense(x), plain(x), rtol=1e-5, atol=1e-5)
    sparse, _ = make(SparseLatentAttention, INDEXER)
    assert (sparse(x) - plain(x)).abs().max() > 1e-2  # top 3 of 12 is not dense


@torch.no_grad()
@pytest.mark.parametrize("query_chunk", [1, 5, 64])
def test_gathering_the_chosen_keys_gives_the_masked_layers_output(query_chunk):
    layer, x = make(SparseLatentAttention, INDEXER)
    layer, x = layer.double(), torch.cat([x, x.flip(1)], dim=1).double()  # T = 24
    with torch.no_grad():
        assert_close(sparse_gathered(layer, x, query_chunk), layer(x), rtol=1e-12, atol=1e-12)
        shared = SparseLatentAttention(SPEC, None)
        with pytest.raises(ValueError, match="an indexer of its own"):
            sparse_gathered(shared, x.float())
        with pytest.raises(ValueError, match="query_chunk"):
            sparse_gathered(layer, x, 0)


def test_cached_decode_is_recomputing_and_the_cache_holds_the_indexer_keys():
    layer, x = make(SparseLatentAttention, INDEXER)
    cached, cache = steps(layer, x)
    assert_close(cached, layer(x), rtol=1e-5, atol=1e-5)
    c, k_rope, k_index = cache.held
    assert c.shape == (2, T, 12) and k_rope.shape == (2, T, 4) and k_index.shape == (2, T, 8)
    later = x.clone()
    later[:, 8:] = torch.randn(2, T - 8, SPEC.n_embed)
    assert_close(layer(later)[:, :8], layer(x)[:, :8])  # causal, the choice too


@torch.no_grad()
def test_a_layer_without_indexer_reuses_the_choice_it_is_given():
    first, x = make(SparseLatentAttention, INDEXER)
    second, _ = make(SparseLatentAttention, None, seed=3)
    with pytest.raises(ValueError, match=r"layer\.choice = "):
        second(x)
    second.choice = first.choice
    first(x)
    y = second(x)
    _, w = second(x, return_weights=True)
    assert torch.equal(w > 0, first.choice.chosen[:, None].expand_as(w))
    with pytest.raises(ValueError, match=r"not \(B, 5, 5\)"):  # a choice of 12 positions
        second(x[:, :5])
    c1, c2 = first.new_cache(2, T), second.new_cache(2, T)
    out = []
    for t0, t1 in [(0, 5)] + [(t, t + 1) for t in range(5, T)]:  # as a model steps its layers
        first(x[:, t0:t1], cache=c1)
        out.append(second(x[:, t0:t1], cache=c2))
    assert_close(torch.cat(out, 1), y, rtol=1e-5, atol=1e-5)
    assert len(c2.held) == 2  # no indexer keys in a layer without indexer


def test_position_temperature_is_one_then_grows():
    t = position_temperature(torch.arange(24), 8, 0.1)
    assert torch.equal(t[:8], torch.ones(8, dtype=torch.float64))
    assert_close(
        t[8], torch.tensor(1 + 0.1 * torch.log(torch.tensor(2.0)).item(), dtype=torch.float64)
    )
    assert (t[16:] > t[15]).all() and torch.equal(t[8:16], t[8].expand(8))


@torch.no_grad()
def test_tempered_mla_with_beta_zero_is_mla_and_caches_alike():
    tempered, x = make(TemperedLatentAttention, 4, 0.5)
    plain = LatentAttention(SPEC)
    plain.load_state_dict(tempered.state_dict())
    y = tempered(x)
    assert_close(y[:, :4], plain(x)[:, :4])  # positions below `length`: temperature 1
    assert (y[:, 4:] - plain(x)[:, 4:]).abs().max() > 1e-3
    assert_close(steps(tempered, x)[0], y, rtol=1e-5, atol=1e-5)
    flat = TemperedLatentAttention(SPEC, 4, 0.0)
    flat.load_state_dict(tempered.state_dict())
    assert_close(flat(x), plain(x))


@pytest.mark.parametrize(
    "make_bad, match",
    [
        (lambda: IndexerSpec(8, 8, 3, 4), r"rope_dims \(3\) must be an even int"),
        (lambda: IndexerSpec(8, 8, 10, 4), r"rope_dims \(10\) must be <= head_size \(8\)"),
        (lambda: IndexerSpec(8, 8, 4, 0), r"top_k"),
        (lambda: IndexerSpec(8, 8, 4, 4, pairs="interleaved"), r"pairs \('interleaved'\)"),
        (
            lambda: SparseLatentAttention(dataclasses.replace(SPEC, q_rank=None), INDEXER),
            r"q_rank \(None\)",
        ),
        (lambda: turn_part(torch.zeros(1, 2, 8), RopeSpec(), 4, "halves"), r"pairs \('halves'\)"),
        (lambda: turn_part(torch.zeros(1, 2, 8), RopeSpec(), 12, "half"), r"dims \(12\)"),
        (lambda: TemperedLatentAttention(SPEC, 0, 0.1), r"length"),
        (lambda: position_temperature(torch.arange(3), -1, 0.1), r"length"),
        (lambda: Choice().read(2, 2), r"holds None"),
    ],
)
def test_bad_input_is_refused_by_name(make_bad, match):
    with pytest.raises(ValueError, match=match):
        make_bad()


def test_a_rolling_cache_is_refused():
    layer, _ = make(SparseLatentAttention, INDEXER)
    with pytest.raises(TypeError, match="SparseLatentAttention keeps no rolling cache"):
        layer.new_cache(2, T, window=4)
