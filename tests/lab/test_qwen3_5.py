"""Qwen3.5 through the oracle: Qwen3-Next's layers (Gated DeltaNet 3 : 1 gated softmax
attention) with Qwen3.5's own weight layout for the linear layers.

compare("qwen3_5_text") (every layer whole and cached, within 1e-5) runs in
tests/lab/test_from_transformers.py with every family. Here: which layer is which, and
the planted fault the comparison must catch: Qwen3.5's fused q, k, v projection read in
Qwen3-Next's layout (grouped per key head).
"""

import functools

import pytest
import torch

pytest.importorskip("transformers")

from lab.oracle.from_transformers import load_attention  # noqa: E402
from lab.oracle.tiny_models import record_layers, tiny_model  # noqa: E402
from lab.todays_models import BATCH, T, relative  # noqa: E402
from snippets.layers.configurable import ConfigurableAttention  # noqa: E402
from snippets.layers.linear_attention import GatedDeltaNet  # noqa: E402


@functools.cache
def recorded():
    model = tiny_model("qwen3_5_text")
    tokens = torch.randint(0, 64, (BATCH, T), generator=torch.Generator().manual_seed(1))
    return model, record_layers(model, tokens)


def test_three_gated_deltanet_layers_then_gated_attention():
    model, seen = recorded()
    layers = [load_attention(model, i) for i in range(4)]
    assert [type(layer) for layer in layers] == [GatedDeltaNet] * 3 + [ConfigurableAttention]
    assert (layers[0].n_head, layers[0].n_k_head) == (4, 2)  # value heads share key heads
    spec = layers[3].spec
    assert spec.gate == "elementwise" and spec.qk_norm == "head"
    assert spec.rope.rotary_dim == 4  # a quarter of the head of 16
    with torch.no_grad():
        assert relative(layers[0](seen[0]["x"]), seen[0]["y"]) < 1e-5
    assert seen[0]["y"].abs().max() > 1  # not a near-zero output anything would match


@torch.no_grad()
def test_qwen3_next_s_layout_is_caught():
    """The planted fault: in_proj_qkv cut per key head as Qwen3-Next's in_proj_qkvz."""
    model, seen = recorded()
    layer = load_attention(model, 0)
    theirs = model.model.layers[0].linear_attn
    Hk, K = layer.n_k_head, layer.head_k
    group_v = layer.v.out_features // Hk
    C = theirs.in_proj_qkv.in_features
    q, k, v = theirs.in_proj_qkv.weight.view(Hk, 2 * K + group_v, C).split([K, K, group_v], 1)
    for mine, w in ((layer.q, q), (layer.k, k), (layer.v, v)):
        mine.weight.copy_(w.reshape(-1, C))
    assert relative(layer(seen[0]["x"]), seen[0]["y"]) > 1e-2
