"""Tests for snippets/layers/configurable.py: the one layer that every family's spec builds.

Its equality with transformers, family by family, is tests/lab/test_from_transformers.py;
here: any head size, a cache equal to recompute for every kind and piece, windows that
really limit what is seen, and specs that refuse what they cannot mean."""

import dataclasses
import re

import pytest
import torch
from torch.testing import assert_close

from snippets.core.rope_scaling import RopeSpec
from snippets.layers.configurable import AttentionSpec, ConfigurableAttention

T = 20
BASE = AttentionSpec(n_embed=24, n_head=4, n_kv_head=2, head_size=10)  # H * D = 40 != C


def make(seed=0, **changes):
    torch.manual_seed(seed)
    layer = ConfigurableAttention(dataclasses.replace(BASE, **changes))
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.normal_(1.0 if "norm" in name else 0.0, 0.4)
    return layer, torch.randn(2, T, 24, generator=torch.Generator().manual_seed(seed + 1))


VARIANTS = {
    "plain": {},
    "window": {"kind": "window", "size": 6},
    "chunk": {"kind": "chunk", "size": 8},
    "partial yarn": {"rope": RopeSpec(rotary_dim=4, scaling="yarn", factor=4.0, original_length=8)},
    "nope warm": {"rope": None, "temperature": (4, 0.1)},
    "norm cap sinks gate": {
        "qk_norm": "head",
        "soft_cap": 5.0,
        "sinks": True,
        "gate": "elementwise",
    },
    "l2 after rope": {"qk_norm": "head", "qk_norm_weight": False, "qk_norm_after_rope": True},
}


@pytest.mark.parametrize("variant", list(VARIANTS))
@torch.no_grad()
def test_cached_steps_are_recomputing(variant):
    layer, x = make(**VARIANTS[variant])
    whole = layer(x)
    assert whole.shape == x.shape
    cache = layer.new_cache(2, T)
    steps = [layer(x[:, :9], cache=cache)] + [
        layer(x[:, t : t + 1], cache=cache) for t in range(9, T)
    ]
    assert_close(torch.cat(steps, 1), whole, rtol=1e-5, atol=1e-5)
    if layer.spec.kind != "full":
        assert len(cache) < layer.spec.size  # the window's W - 1, or the chunk's tail


@torch.no_grad()
def test_a_window_layer_does_not_see_past_its_window():
    layer, x = make(kind="window", size=6)
    changed = x.clone()
    changed[:, 3] += 5.0  # only position 3
    diff = (layer(changed) - layer(x)).abs().amax(dim=(0, 2))  # per position
    assert (diff[3:9] > 1e-3).all()  # positions 3 .. 3 + 6 - 1 see it
    assert (diff[9:] == 0).all() and (diff[:3] == 0).all()


@torch.no_grad()
def test_the_written_out_path_equals_the_fused_kernel():
    # A cap so large it changes nothing sends the same layer down the written-out path.
    layer, x = make()
    capped = ConfigurableAttention(dataclasses.replace(BASE, soft_cap=1e9))
    capped.load_state_dict(layer.state_dict())
    assert_close(capped(x), layer(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"n_kv_head": 3}, "n_kv_head (3) must divide n_head (4)"),
        ({"kind": "window"}, "size (None) is for window and chunk layers only"),
        ({"size": 4}, "size (4) is for window and chunk layers only"),
        ({"qk_norm": "layer"}, "qk_norm ('layer') must be one of"),
        ({"gate": "sigmoid"}, "gate ('sigmoid') must be one of"),
        ({"temperature": (8, 0.1)}, "temperature is Llama 4's for layers without RoPE"),
        ({"head_size": 0}, "head_size (0) must be positive"),
    ],
)
def test_bad_spec_names_the_value(changes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        dataclasses.replace(BASE, **changes)
