"""MiniMax through the oracle: its lightning-attention layers and its softmax layers.

compare("minimax") (every layer whole and cached, within 1e-5) runs in
tests/lab/test_from_transformers.py with every family. Here: which layer is which, and
the planted fault the comparison must catch: one slope for every head.
"""

import functools

import pytest
import torch

pytest.importorskip("transformers")

from lab.oracle.from_transformers import load_attention  # noqa: E402
from lab.oracle.tiny_models import record_layers, tiny_model  # noqa: E402
from lab.todays_models import BATCH, T, relative  # noqa: E402
from snippets.layers.configurable import ConfigurableAttention  # noqa: E402
from snippets.layers.lightning import LightningAttention  # noqa: E402


@functools.cache
def recorded():
    model = tiny_model("minimax")
    tokens = torch.randint(0, 64, (BATCH, T), generator=torch.Generator().manual_seed(1))
    return model, record_layers(model, tokens)


def test_three_lightning_layers_then_softmax():
    model, seen = recorded()
    layers = [load_attention(model, i) for i in range(4)]
    assert [type(layer) for layer in layers] == [LightningAttention] * 3 + [ConfigurableAttention]
    assert layers[0].chunk_size == 8 < T  # several chunks
    assert layers[0].slope.unique().numel() == 4  # a rate per head
    assert bool((layers[0].slope > layers[2].slope).all())  # slower decay deeper down
    with torch.no_grad():
        assert relative(layers[0](seen[0]["x"]), seen[0]["y"]) < 1e-5
    assert seen[0]["y"].abs().max() > 1  # not a near-zero output anything would match


@torch.no_grad()
def test_one_slope_for_every_head_is_caught():
    model, seen = recorded()
    layer = load_attention(model, 0)
    layer.slope.fill_(layer.slope.mean().item())
    assert relative(layer(seen[0]["x"]), seen[0]["y"]) > 1e-2
