"""Kimi Linear through the oracle: its Kimi Delta Attention layers and its MLA without RoPE.

compare("kimi_linear") (every layer whole and cached, within 1e-5) runs in
tests/lab/test_from_transformers.py with every family. Here: which layer is which, the
two planted faults the comparison must catch (a decay per head instead of per channel,
MLA with RoPE turned on), and the loader's refusals.
"""

import dataclasses
import functools

import pytest
import torch

pytest.importorskip("transformers")

from lab.oracle.from_transformers import load_attention  # noqa: E402
from lab.oracle.linear_from_transformers import load_linear_attention  # noqa: E402
from lab.oracle.tiny_models import record_layers, tiny_model  # noqa: E402
from lab.todays_models import BATCH, T, relative  # noqa: E402
from snippets.core.rope_scaling import RopeSpec  # noqa: E402
from snippets.layers.kda import KimiDeltaAttention  # noqa: E402
from snippets.layers.mla import LatentAttention  # noqa: E402


@functools.cache
def recorded():
    model = tiny_model("kimi_linear")
    tokens = torch.randint(0, 64, (BATCH, T), generator=torch.Generator().manual_seed(1))
    return model, record_layers(model, tokens)


def test_three_kda_layers_then_mla_without_rope():
    model, seen = recorded()
    layers = [load_attention(model, i) for i in range(4)]
    assert [type(layer) for layer in layers] == [KimiDeltaAttention] * 3 + [LatentAttention]
    assert layers[3].spec.rope is None
    assert [s["weights"] is None for s in seen] == [True] * 3 + [False]
    with torch.no_grad():
        assert relative(layers[0](seen[0]["x"]), seen[0]["y"]) < 1e-5
        assert seen[0]["y"].abs().max() > 1  # not a near-zero output anything would match


@torch.no_grad()
def test_a_decay_per_head_is_caught():
    """The planted fault: each head's channels share one decay (their mean)."""
    model, seen = recorded()
    layer = load_attention(model, 0)
    per_channel = layer.decay
    layer.decay = lambda x: per_channel(x).mean(-1, keepdim=True).expand(-1, -1, -1, layer.head_k)
    assert relative(layer(seen[0]["x"]), seen[0]["y"]) > 1e-2


@torch.no_grad()
def test_mla_with_rope_is_caught():
    model, seen = recorded()
    layer = load_attention(model, 3)
    assert relative(layer(seen[3]["x"]), seen[3]["y"]) < 1e-5
    layer.spec = dataclasses.replace(layer.spec, rope=RopeSpec(base=10000.0))
    assert relative(layer(seen[3]["x"]), seen[3]["y"]) > 1e-2


def test_the_loader_refuses_what_it_cannot_load():
    model, _ = recorded()
    with pytest.raises(ValueError, match=r"layer 3 is a 'full_attention' layer"):
        load_linear_attention(model, 3)
    config = model.config
    config.model_type = "other_linear"  # an instance attribute over the class's
    try:
        with pytest.raises(ValueError, match=r"config\.model_type \('other_linear'\)"):
            load_linear_attention(model, 0)
    finally:
        del config.model_type
    assert model.config.model_type == "kimi_linear"
