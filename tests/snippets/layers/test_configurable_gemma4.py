"""Gemma 4's pieces in snippets/layers/configurable.py, snippets/core/cache.py and
snippets/core/rope_scaling.py:
K=V, the unweighted norm on V, proportional RoPE and a layer reading another layer's keys
and values (SharedCache). Each piece's defining property, and its bad inputs refused.

Their equality with transformers' Gemma 4 is tests/lab/test_gemma4.py."""

import dataclasses
import itertools
import re

import pytest
import torch
from torch.testing import assert_close

from snippets.core.blocks import rms_norm
from snippets.core.cache import LayerCache, ModelCache, SharedCache
from snippets.core.positions import rope_frequencies
from snippets.core.rope_scaling import RopeSpec, frequencies, proportional_frequencies, rotate
from snippets.layers.configurable import AttentionSpec, ConfigurableAttention

T = 20
BASE = AttentionSpec(n_embed=24, n_head=4, n_kv_head=2, head_size=16, qk_norm="head")
PROPORTIONAL = RopeSpec(base=1e6, rotary_dim=4, scaling="proportional")


def make(seed=0, **changes):
    torch.manual_seed(seed)
    layer = ConfigurableAttention(dataclasses.replace(BASE, **changes))
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.normal_(1.0 if "norm" in name else 0.0, 0.4)
    return layer


def inputs(seed=1, B=2):
    return torch.randn(B, T, 24, generator=torch.Generator().manual_seed(seed))


# --- proportional RoPE ------------------------------------------------------------------


def test_proportional_rope_turns_the_fastest_pairs_of_the_whole_head():
    theta, factor = frequencies(PROPORTIONAL, 16)
    assert factor == 1.0
    # The first R/2 = 2 frequencies of a 16-channel head's RoPE, not a 4-channel one's.
    assert_close(theta, rope_frequencies(16, 1e6)[:2])
    partial, _ = frequencies(RopeSpec(base=1e6, rotary_dim=4), 16)
    assert_close(partial, rope_frequencies(4, 1e6))
    assert not torch.allclose(theta, partial)  # the slow pair differs: 1e6^(-2/16) vs 1e6^(-1/2)
    # The channels past R pass unturned; a factor divides the frequencies (linear).
    x = torch.randn(1, 1, T, 16, dtype=torch.float64)
    turned = rotate(x, PROPORTIONAL, offset=3)
    assert torch.equal(turned[..., 4:], x[..., 4:])
    assert not torch.allclose(turned[..., :4], x[..., :4])
    slow, _ = frequencies(dataclasses.replace(PROPORTIONAL, factor=4.0), 16)
    assert_close(slow, theta / 4)


def test_proportional_rope_scores_depend_on_the_distance_only():
    q, k = torch.randn(2, 1, 1, 1, 16, dtype=torch.float64).unbind(0)
    scores = [
        (rotate(q, PROPORTIONAL, t) * rotate(k, PROPORTIONAL, s)).sum().item()
        for t, s in ((5, 2), (12, 9), (40, 37))
    ]
    assert scores[0] == pytest.approx(scores[1]) == pytest.approx(scores[2])


def test_proportional_frequencies_refuse_more_pairs_than_the_head():
    with pytest.raises(ValueError, match=re.escape("rotary_dim (32) must be <= head_size (16)")):
        proportional_frequencies(16, 32, 1e4)


# --- K=V and the norm on V --------------------------------------------------------------


@torch.no_grad()
def test_k_eq_v_is_a_layer_whose_value_weights_are_its_key_weights():
    for rope in (RopeSpec(), PROPORTIONAL):
        shared = make(k_eq_v=True, v_norm=True, rope=rope)
        assert not hasattr(shared, "v")
        twin = make(v_norm=True, rope=rope)
        twin.load_state_dict(shared.state_dict(), strict=False)
        twin.v.weight.copy_(shared.k.weight)
        x = inputs()
        assert_close(shared(x), twin(x), rtol=1e-6, atol=1e-6)
        # The values: the projection normed without scales, before the keys' norm and RoPE.
        projected = shared.project(x)[1]
        _, v = shared.keys_values(projected, None)
        assert_close(v, rms_norm(projected, None, BASE.eps))


@torch.no_grad()
def test_k_eq_v_caches_one_tensor_and_equals_recompute():
    layer, x = make(k_eq_v=True, v_norm=True, rope=PROPORTIONAL), inputs()
    for kind, size in (("full", None), ("window", 6)):
        layer.spec = dataclasses.replace(layer.spec, kind=kind, size=size)
        cache = layer.new_cache(2, T)
        steps = [layer(x[:, :7], cache=cache)] + [
            layer(x[:, t : t + 1], cache=cache) for t in range(7, T)
        ]
        assert_close(torch.cat(steps, 1), layer(x), rtol=1e-5, atol=1e-5)
        assert len(cache.tensors()) == 1  # keys and values derived from it on reading


@torch.no_grad()
def test_the_norm_on_v_makes_the_values_scale_free():
    normed, plain, x = make(v_norm=True).double(), make().double(), inputs().double()
    before = normed(x), plain(x)
    for layer in (normed, plain):
        layer.v.weight.mul_(10.0)  # values 10x larger
    assert_close(normed(x), before[0], rtol=1e-5, atol=1e-5)  # unchanged, but for eps
    assert_close(plain(x), 10 * before[1])  # 10x


# --- a layer reading another layer's keys and values --------------------------------------


def pair(seed=0, kind="full", size=None, k_eq_v=True):
    source = make(seed, kind=kind, size=size, k_eq_v=k_eq_v, v_norm=True)
    reader = make(seed + 7, kind=kind, size=size, kv_source=3)
    return source, reader


@torch.no_grad()
def test_a_sharing_layer_attends_with_its_queries_over_the_source_s_keys_and_values():
    source, reader = pair()
    assert not any(hasattr(reader, n) for n in ("k", "v", "k_norm"))
    x_source, x = inputs(1), inputs(2)
    cache = source.new_cache(2, T)
    shared = reader.new_cache(2, T, source=cache)
    source(x_source, cache=cache)
    y = reader(x, cache=shared)
    # By hand: the reader's queries, the source's keys and values, the causal mask.
    q = reader.project(x)[0]
    k, v = source.keys_values(*source.project(x_source)[1:])
    heads = reader.attend(q, k, v)
    assert_close(y, reader.proj(heads.transpose(1, 2).reshape(2, T, -1)))
    assert shared.tensors() == [] and len(shared) == 0 and shared.seen == T
    # Counted once: a model's cache with the source and the reader holds the source's bytes.
    assert ModelCache([cache, shared]).tensors() == cache.tensors()


@pytest.mark.parametrize("kind, size, k_eq_v", [("full", None, True), ("window", 5, False)])
@torch.no_grad()
def test_a_sharing_layer_s_cached_steps_equal_one_step(kind, size, k_eq_v):
    source, reader = pair(kind=kind, size=size, k_eq_v=k_eq_v)
    x_source, x = inputs(1), inputs(2)
    outputs = []
    for cuts in ([0, T], [0, 7, *range(8, T + 1)]):
        cache = source.new_cache(2, T)
        shared = reader.new_cache(2, T, source=cache)
        pieces = []
        for a, b in itertools.pairwise(cuts):
            source(x_source[:, a:b], cache=cache)
            pieces.append(reader(x[:, a:b], cache=shared))
        outputs.append(torch.cat(pieces, 1))
    assert_close(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)
    if size:
        assert len(cache) == size - 1  # the window the source keeps serves both


@torch.no_grad()
def test_a_sharing_layer_refuses_what_it_cannot_read():
    source, reader = pair()
    x = inputs()
    with pytest.raises(
        ValueError, match=r"reads layer 3's keys and values: give it the cache new_cache"
    ):
        reader(x)
    cache = source.new_cache(2, T)
    shared = reader.new_cache(2, T, source=cache)
    with pytest.raises(ValueError, match=r"source layer has read no new positions"):
        reader(x, cache=shared)  # the source has not run
    source(x, cache=cache)
    reader(x, cache=shared)
    with pytest.raises(ValueError, match=r"source layer has read no new positions"):
        reader(x, cache=shared)  # twice on one step of the source
    window = make(kind="window", size=4, kv_source=3)
    with pytest.raises(ValueError, match=r"a window layer \(size 4\) cannot read a full layer"):
        window.new_cache(2, T, source=source.new_cache(2, T))
    with pytest.raises(ValueError, match=r"source \(NoneType\) is for a layer with a kv_source"):
        reader.new_cache(2, T)
    with pytest.raises(ValueError, match=r"source \(LayerCache\) is for a layer with a kv_source"):
        source.new_cache(2, T, source=LayerCache())
    with pytest.raises(TypeError, match=r"ConfigurableAttention keeps no rolling cache"):
        source.new_cache(2, T, window=4)


def test_a_model_cache_gives_a_sharing_layer_its_source_s_cache():
    source, reader = pair()
    others = [make(seed) for seed in (1, 2, 3)]
    cache = ModelCache.for_layers([*others, source, reader], 2, T)  # reader: kv_source=3
    assert type(cache.layers[4]) is SharedCache and cache.layers[4].source is cache.layers[3]
    assert [type(c) for c in cache.layers[:4]] == [LayerCache] * 4


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"kv_source": -1}, "kv_source (-1) must be a layer index"),
        ({"kv_source": True}, "kv_source (True) must be a layer index"),
        ({"kv_source": 2, "k_eq_v": True}, "kv_source (2) with k_eq_v=True"),
        ({"kv_source": 2, "v_norm": True}, "v_norm=True: a sharing layer makes no keys"),
    ],
)
def test_bad_gemma4_specs_name_the_value(changes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        dataclasses.replace(BASE, **changes)
