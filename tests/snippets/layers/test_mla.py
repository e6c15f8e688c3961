"""Tests for snippets/layers/mla.py: DeepSeek's MLA with its decoupled RoPE key.

The absorbed form is the training form; a decode with a cache of latents and
rope keys is recomputing; the rope key is one per position, shared by every head,
and it carries the position; the cache holds R + Dr numbers per position. (The
kv-heads page's MLA is this layer with its extra parts off: the lesson's test,
tests/snippets/lessons/test_kv_heads.py.)"""

import re

import pytest
import torch
from torch.testing import assert_close

from snippets.core.rope_scaling import RopeSpec
from snippets.layers.mla import LatentAttention, MLASpec

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
