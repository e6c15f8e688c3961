"""Tests for snippets/layers/learned_temperature.py: Mistral Large 4's attention pieces.

The learned temperature with scale 0 and bias 1 is the identity and grows as
log(t + 1) with its scale; learned RoPE frequencies with alpha 0 are the
RopeSpec's and with alpha = log 2 turn as the position 2t; a NoPE layer is blind
to the order of the earlier tokens; a cache decodes what the whole sequence
gives, for a layer with its own latents and for one reading them; bad input is
refused by name.
"""

import dataclasses
import math
import re

import pytest
import torch
from torch.testing import assert_close

from snippets.core.positions import apply_rope
from snippets.core.rope_scaling import RopeSpec, rotate
from snippets.layers.learned_temperature import (
    Large4Spec,
    LearnedRope,
    LearnedTemperature,
    LearnedTemperatureAttention,
    SharedLatents,
    XQueryIndexer,
    learned_temperature,
)
from snippets.layers.sparse_mla import IndexerSpec

ROPE = RopeSpec(base=100.0)
SPEC = Large4Spec(
    n_embed=32,
    n_head=4,
    kv_latent=12,
    nope_head_size=8,
    rope_head_size=4,
    v_head_size=6,
    rope=ROPE,
)
NOPE = dataclasses.replace(SPEC, nope_head_size=12, rope_head_size=0, rope=None)
INDEXER = IndexerSpec(n_head=8, head_size=8, rope_dims=4, top_k=3, pairs="adjacent")
T = 12


def make(spec=SPEC, indexer=INDEXER, seed=0):
    torch.manual_seed(seed)
    layer = LearnedTemperatureAttention(spec, indexer)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)  # sharp attention, a temperature far from 1
        if layer.turn is not None:
            layer.turn.alpha.normal_(0, 0.5)
    return layer.eval()


def x_of(seed=1):
    return torch.randn(2, T, SPEC.n_embed, generator=torch.Generator().manual_seed(seed))


def test_scale_0_bias_1_is_the_identity():
    q = torch.randn(2, 4, T, 8)
    assert torch.equal(LearnedTemperature(4)(q, offset=5), q)  # its initial values


def test_it_grows_as_the_log_of_the_position_plus_one():
    scale, bias = torch.tensor([0.5, -2.0]), torch.tensor([1.0, 3.0])
    t = torch.tensor([0, 1, 6, 99])
    m = learned_temperature(t, scale, bias)
    expected = [[s * math.log(p + 1) + b for p in (0, 1, 6, 99)] for s, b in ((0.5, 1), (-2, 3))]
    assert_close(m, torch.tensor(expected))
    assert_close(m[:, 0], bias)  # t = 0: log 1 = 0, only the bias


def test_the_temperature_reads_the_positions_after_the_offset():
    layer = LearnedTemperature(4)
    with torch.no_grad():
        layer.scale.normal_()
    q = torch.randn(2, 4, T, 8)
    assert_close(layer(q[:, :, 5:], offset=5), layer(q)[:, :, 5:])


def test_bad_input_to_the_temperature_is_named():
    with pytest.raises(ValueError, match=r"n_head \(0\)"):
        LearnedTemperature(0)
    with pytest.raises(ValueError, match=r"H = 4 heads"):
        LearnedTemperature(4)(torch.randn(2, 3, T, 8))
    with pytest.raises(ValueError, match=r"offset \(-1\)"):
        LearnedTemperature(4)(torch.randn(2, 4, T, 8), offset=-1)


def test_learned_frequencies_alpha_0_are_the_specs_and_log_2_doubles_them():
    rope = LearnedRope(ROPE, 4)
    x = torch.randn(2, T, 8)
    assert_close(rope(x, 3), torch.cat([rotate(x[..., :4], ROPE, 3), x[..., 4:]], -1))
    rope.alpha.fill_(math.log(2))  # theta * 2: position t turns as 2t did
    doubled = apply_rope(x[..., :4], 0, theta=2 * rope.theta)
    assert_close(rope(x)[..., :4], doubled)


def test_a_nope_layer_does_not_see_the_order_of_earlier_tokens():
    layer, x = make(NOPE), x_of()
    shuffled = torch.cat([x[:, torch.randperm(T - 1)], x[:, -1:]], 1)
    with torch.no_grad():
        assert_close(layer(shuffled)[:, -1], layer(x)[:, -1])
        rope_layer = make(SPEC)  # the RoPE layer does
        assert not torch.allclose(rope_layer(shuffled)[:, -1], rope_layer(x)[:, -1])


@pytest.mark.parametrize("spec", [SPEC, NOPE])
def test_a_cache_decodes_what_the_whole_sequence_gives(spec):
    layer, x = make(spec), x_of()
    cache = layer.new_cache(x.size(0), T)
    with torch.no_grad():
        out = [layer(x[:, :5], cache=cache)] + [
            layer(x[:, t : t + 1], cache=cache) for t in range(5, T)
        ]
        assert_close(torch.cat(out, 1), layer(x), rtol=1e-5, atol=1e-6)
        y, w = layer(x, return_weights=True)
    assert ((w > 0).sum(-1) <= INDEXER.top_k).all()  # each query: its top 3 keys
    assert_close(w.sum(-1), torch.ones_like(w[..., 0]))


def _pair(indexer):
    """A layer with its latents, and one reading them (kv_source 0) with its own
    up-projections and `indexer` (None: the first layer's choice)."""
    source = make(SPEC)
    reader = make(dataclasses.replace(SPEC, kv_source=0), indexer, seed=2)
    reader.turn.alpha.copy_(source.turn.alpha)  # one RoPE for the whole model
    if indexer is None:
        reader.choice = source.choice
    return source, reader


@pytest.mark.parametrize("indexer", [INDEXER, None])
def test_a_layer_reading_anothers_latents_attends_to_them(indexer):
    source, reader = _pair(indexer)
    x, x2 = x_of(), x_of(3)
    own = make(SPEC, indexer)  # the reader's weights, with the source's latents
    with torch.no_grad():
        missing, _ = own.load_state_dict(reader.state_dict(), strict=False)
        assert sorted(missing) == ["kv_down.weight", "kv_norm.weight"]
        own.kv_down.load_state_dict(source.kv_down.state_dict())
        own.kv_norm.load_state_dict(source.kv_norm.state_dict())
    with torch.no_grad():
        caches = [source.new_cache(x.size(0), T)]
        caches.append(reader.new_cache(x.size(0), T, source=caches[0]))
        ys = [[], []]
        for a, b in [(0, 5), *((t, t + 1) for t in range(5, T))]:
            ys[0].append(source(x[:, a:b], cache=caches[0]))
            ys[1].append(reader(x2[:, a:b], cache=caches[1]))
        if indexer is None:
            own.choice = source.choice
            source(x)  # the choice over all T positions
        # the reader on x2 equals a layer of its own whose latents are x's
        own.kv_down.forward = lambda _, x=x, down=own.kv_down.forward: down(x)
        assert_close(torch.cat(ys[1], 1), own(x2), rtol=1e-5, atol=1e-6)
    assert isinstance(caches[1], SharedLatents)
    assert len(caches[1]) == (T if indexer else 0)  # its indexer's keys, or nothing


def test_a_reader_without_its_sources_cache_says_how():
    source, reader = _pair(INDEXER)
    with pytest.raises(ValueError, match=r"reads layer 0's latents"):
        reader(x_of())
    with pytest.raises(ValueError, match=r"needs one \(kv_source=0\)"):
        reader.new_cache(2, T)
    with pytest.raises(ValueError, match=r"is for a layer with a kv_source"):
        source.new_cache(2, T, source=source.new_cache(2, T))
    with pytest.raises(TypeError, match=r"LearnedTemperatureAttention keeps no rolling cache"):
        source.new_cache(2, T, window=4)


def test_bad_specs_are_named():
    with pytest.raises(ValueError, match=re.escape("rope_head_size (0) must be even")):
        dataclasses.replace(SPEC, rope_head_size=0)  # a rope, nothing to turn
    with pytest.raises(ValueError, match=r"q_rank \(16\)"):
        dataclasses.replace(SPEC, q_rank=16)
    with pytest.raises(ValueError, match=r"kv_source \(-1\)"):
        dataclasses.replace(SPEC, kv_source=-1)
    with pytest.raises(ValueError, match=r"kv_latent \(0\)"):
        dataclasses.replace(NOPE, kv_latent=0)
    with pytest.raises(ValueError, match=r"pairs \('half'\)"):
        XQueryIndexer(dataclasses.replace(INDEXER, pairs="half"), 32, None)
    with pytest.raises(ValueError, match=r"rope_dims \(6\)"):
        XQueryIndexer(dataclasses.replace(INDEXER, rope_dims=6), 32, LearnedRope(ROPE, 4))


def test_a_large4_spec_builds_no_layer_alone_and_a_gpt_refuses_it():
    from snippets.core.model import GPTConfig

    with pytest.raises(TypeError, match=r"Large4Spec builds no layer alone.*\(spec, indexer\)"):
        SPEC.build()  # MLASpec's would be a LatentAttention, the wrong layer
    with pytest.raises(TypeError, match=r"Large4Spec builds no layer alone"):
        SPEC.parameters()
    with pytest.raises(
        TypeError, match=r"layers\[0\] is a Large4Spec, which builds no layer alone"
    ):
        GPTConfig(
            n_embed=SPEC.n_embed, n_head=SPEC.n_head, n_layer=1, layers=(SPEC,), position="none"
        )
