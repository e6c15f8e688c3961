"""Tests for snippets/mla.py: DeepSeek's MLA with its decoupled RoPE key.

The absorbed form is the training form; a decode with a cache of latents and
rope keys is recomputing; the rope key is one per position, shared by every head,
and it carries the position; the cache holds R + Dr numbers per position. The
kv-heads page's MLA is this layer with its extra parts off: one MLA, the same
function of the same weights, in a layer and in a whole GPT."""

import re

import pytest
import torch
from torch.testing import assert_close

from snippets.cache import ModelCache
from snippets.kv_heads import MultiHeadLatentAttention
from snippets.mla import LatentAttention, MLASpec
from snippets.model import GPT, GPTConfig, parameter_count
from snippets.rope_scaling import RopeSpec
from tests.snippets.equivalence import as_specs, from_kv_heads

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
T = 12


def make(spec=SPEC, seed=0):
    torch.manual_seed(seed)
    layer = LatentAttention(spec)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)  # sharp attention
    x = torch.randn(2, T, spec.n_embed, generator=torch.Generator().manual_seed(seed + 1))
    return layer, x


@torch.no_grad()
def test_absorbed_equals_the_training_form():
    layer, x = make()
    parts = (*layer.queries(x), *layer.latents(x))
    assert_close(layer.attend_absorbed(*parts), layer.attend(*parts), rtol=1e-5, atol=1e-5)
    # Without a mask, the last queries take the causal mask's last rows (bottom right).
    q_nope, q_rope, c, k_rope = parts
    last = layer.attend_absorbed(q_nope[:, :, -3:], q_rope[:, :, -3:], c, k_rope)
    assert_close(last, layer.attend(*parts)[:, -3:], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("q_rank", [16, None])
@torch.no_grad()
def test_cached_decode_is_recomputing_and_keeps_latent_plus_rope_key(q_rank):
    layer, x = make(MLASpec(**{**SPEC.__dict__, "q_rank": q_rank}))
    whole = layer(x)
    cache = layer.new_cache(2, T)
    steps = [layer(x[:, :5], cache=cache)] + [
        layer(x[:, t : t + 1], cache=cache) for t in range(5, T)
    ]
    assert_close(torch.cat(steps, 1), whole, rtol=1e-5, atol=1e-5)
    latent, rope_key = cache.held
    assert latent.shape == (2, T, SPEC.kv_latent) and rope_key.shape == (2, T, SPEC.rope_head_size)


@torch.no_grad()
def test_the_rope_key_is_shared_by_all_heads_and_carries_the_position():
    layer, x = make()
    q_nope, q_rope = layer.queries(x)
    c, k_rope = layer.latents(x)
    assert k_rope.shape == (2, T, SPEC.rope_head_size)  # no head dimension: one for all
    # Moving the whole sequence by 7 positions changes no score (RoPE: relative)...
    q7, k7 = layer.queries(x, 7)[1], layer.latents(x, 7)[1]
    assert_close(
        q7 @ k7.unsqueeze(1).transpose(-2, -1),
        q_rope @ k_rope.unsqueeze(1).transpose(-2, -1),
        rtol=1e-4,
        atol=1e-4,
    )
    # ... but the keys themselves turned: the position is in the rope key.
    assert (k7 - k_rope).abs().max() > 0.1
    # And without it the layer is position-blind: reversing the keys' order changes the output.
    y = layer.attend(q_nope, q_rope, c, k_rope)
    y_shuffled = layer.attend(q_nope, q_rope, c, k_rope.flip(1))
    assert (y - y_shuffled).abs().max() > 1e-2


def test_bad_spec_names_the_value():
    with pytest.raises(ValueError, match=re.escape("rope_head_size (3) must be even")):
        MLASpec(**{**SPEC.__dict__, "rope_head_size": 3})
    with pytest.raises(ValueError, match=re.escape("kv_latent (0) must be positive")):
        MLASpec(**{**SPEC.__dict__, "kv_latent": 0})


@torch.no_grad()
def test_no_rope_part_at_all_is_mla_without_positions():
    """GLM-5-Next's MLA: rope_head_size 0, allowed only with rope None; whole and
    cached agree, the cache's rope key has no channels."""
    spec = MLASpec(**{**SPEC.__dict__, "rope_head_size": 0, "rope": None})
    layer, x = make(spec)
    whole = layer(x)
    cache = layer.new_cache(2, T)
    steps = [layer(x[:, :5], cache=cache)] + [
        layer(x[:, t : t + 1], cache=cache) for t in range(5, T)
    ]
    assert_close(torch.cat(steps, 1), whole, rtol=1e-5, atol=1e-5)
    assert cache.held[1].shape == (2, T, 0)
    with pytest.raises(ValueError, match=re.escape("rope_head_size (0) must be even")):
        MLASpec(**{**SPEC.__dict__, "rope_head_size": 0})  # a rope, nothing to turn


@pytest.mark.parametrize(
    "spec",
    [
        MLASpec(32, 4, 8, 6, 4, 6, q_rank=12),
        MLASpec(32, 4, 8, 6, 4, 6, q_rank=12, bias=True),
        MLASpec(32, 2, 8, 6, 0, 6, rope=None),
        MLASpec(32, 4, 8, 6, 4, 6, bias=True),
        MLASpec(32, 4, 8, 8, 0, 8, rope=None, latent_norm=False, proj_bias=True),
        MLASpec(32, 4, 8, 6, 4, 6, bias=True, proj_bias=False),
    ],
    ids=["q-rank", "q-rank-bias", "no-rope", "bias", "kv-heads-form", "no-proj-bias"],
)
def test_the_count_by_hand_is_the_layers(spec):
    assert spec.parameters() == sum(p.numel() for p in LatentAttention(spec).parameters())


@pytest.mark.parametrize("position", ["learned", "none"])
@torch.no_grad()
def test_the_kv_heads_mla_is_this_layer_with_its_extra_parts_off(position):
    torch.manual_seed(0)
    simple = MultiHeadLatentAttention(4, 32, 16, kv_latent=8, position=position).double()
    for p in simple.parameters():
        p.normal_(0, 0.5)
    layer = from_kv_heads(simple)
    spec = layer.spec
    assert (spec.rope_head_size, spec.q_rank, spec.latent_norm) == (0, None, False)
    x = torch.randn(2, T, 32, dtype=torch.float64)
    assert_close(layer(x), simple(x), rtol=1e-12, atol=1e-12)
    pairs = zip(layer(x, return_weights=True), simple(x, return_weights=True), strict=True)
    for ours, its in pairs:
        assert_close(ours, its, rtol=1e-12, atol=1e-12)  # the output, then the weights
    mine, theirs = layer.new_cache(2, T), simple.new_cache(2, T)
    steps = [(layer(x[:, a:b], cache=mine), simple(x[:, a:b], cache=theirs)) for a, b in
             ((0, 5), (5, 6), (6, T))]  # fmt: skip
    for ours, its in steps:
        assert_close(ours, its, rtol=1e-12, atol=1e-12)
    count = sum(p.numel() for p in simple.parameters())
    assert spec.parameters() == count == sum(p.numel() for p in layer.parameters())
    with pytest.raises(ValueError, match=r"position='alibi': LatentAttention adds no ALiBi"):
        from_kv_heads(MultiHeadLatentAttention(4, 32, 16, 8, position="alibi"))
    with pytest.raises(TypeError, match=r"must be a MultiHeadLatentAttention, got LatentAttention"):
        from_kv_heads(layer)


@torch.no_grad()
def test_a_teaching_mla_gpt_is_a_gpt_of_mla_specs():
    """GPTConfig(attention="mla") and GPTConfig(layers=(MLASpec, ...)) with the extra
    parts off: the same parameter count, and with the weights carried over (as_specs,
    through from_kv_heads) the same logits, whole and cached."""
    base = {"vocab_size": 20, "context_length": 16, "n_embed": 32, "n_head": 4}
    teaching = GPTConfig(**base, attention="mla", kv_latent=8)
    torch.manual_seed(0)
    gpt = GPT(teaching).double().eval()
    for p in gpt.parameters():
        p.add_(0.2 * torch.randn_like(p))
    same = as_specs(gpt)
    specs = same.config
    assert {type(s) for s in specs.layers} == {MLASpec}
    assert all(not s.latent_norm and s.rope_head_size == 0 for s in specs.layers)
    assert parameter_count(specs) == parameter_count(teaching)
    idx = torch.randint(0, 20, (2, 16), generator=torch.Generator().manual_seed(1))
    assert_close(same(idx)[0], gpt(idx)[0], rtol=1e-12, atol=1e-12)
    caches = ModelCache.for_model(same, 2), ModelCache.for_model(gpt, 2)
    for a, b in ((0, 7), (7, 8), (8, 16)):
        ours, its = (
            model(idx[:, a:b], cache=c)[0] for model, c in zip((same, gpt), caches, strict=True)
        )
        assert_close(ours, its, rtol=1e-12, atol=1e-12)
