"""The DeepSeek-like families' loaders: DSA as shipped (DeepSeek-V3.2, GLM-5), Mistral 4.

tests/lab/test_from_transformers.py checks every layer of these families against
transformers, whole and cached (they are in FAMILIES). Here: the tiny models
exercise what they must (a sparse choice, shared layers, a temperature that
moves), and each part of the mechanism, left out or done otherwise, is caught.
"""

import dataclasses
import functools
import re

import pytest
import torch
import torch.nn as nn

pytest.importorskip("transformers")

from lab.oracle.from_transformers import load_attention, load_attentions  # noqa: E402
from lab.oracle.tiny_models import record_layers, tiny_config, tiny_model  # noqa: E402
from lab.todays_models import T  # noqa: E402
from snippets.core.positions import rope_frequencies  # noqa: E402
from snippets.layers.sparse_mla import turn_part  # noqa: E402


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


@functools.cache
def recorded(family: str):
    model = tiny_model(family)
    tokens = torch.randint(0, 64, (2, T), generator=torch.Generator().manual_seed(1))
    return model, record_layers(model, tokens)


def worst(family: str, change=lambda layer: None) -> float:
    """The worst relative difference over the layers, each changed by `change`."""
    model, seen = recorded(family)
    layers = load_attentions(model)
    for layer in layers:
        change(layer)
    out = 0.0
    with torch.no_grad():
        for layer, s in zip(layers, seen, strict=True):
            out = max(out, relative(layer(s["x"]), s["y"]))
    return out


@pytest.mark.parametrize("family", ["deepseek_v32", "glm_moe_dsa", "mistral4"])
def test_the_loaded_layers_equal_transformers(family):
    assert worst(family) < 1e-5


def test_the_tiny_models_choose_few_keys_and_glm_shares():
    config = tiny_config("deepseek_v32")
    assert config.index_topk < T // 3  # 6 of up to 24 keys
    model, _ = recorded("glm_moe_dsa")
    layers = load_attentions(model)
    assert [layer.indexer is None for layer in layers] == [False, True, False, True]
    assert layers[1].choice is layers[0].choice and layers[3].choice is layers[2].choice


def _dense(layer):
    if layer.indexer is not None:
        layer.indexer.spec = dataclasses.replace(layer.indexer.spec, top_k=T)


def _wrong_pairs(layer):
    if layer.indexer is not None:
        other = {"half": "adjacent", "adjacent": "half"}[layer.indexer.spec.pairs]
        layer.indexer.spec = dataclasses.replace(layer.indexer.spec, pairs=other)


def _rope_on_the_other_half(layer):
    ix = layer.indexer
    if ix is not None:  # turn channels E - Dr .. E - 1 instead of 0 .. Dr - 1

        def turn(t, offset, ix=ix):
            flipped = t.flip(-1)
            return turn_part(flipped, ix.rope, ix.spec.rope_dims, ix.spec.pairs, offset).flip(-1)

        ix._turn = turn


def _no_k_norm(layer):
    if layer.indexer is not None:
        layer.indexer.k_norm = nn.Identity()


def _query_from_x(layer):
    """The indexer's query projected from x (as DeepSeek-V3.2-Exp's paper
    sketch reads), by the composed projections, without the latent's RMSNorm."""
    ix = layer.indexer
    if ix is not None:
        q = nn.Linear(layer.q_down.in_features, ix.q.out_features, bias=False)
        q.weight.data = ix.q.weight @ layer.q_down.weight
        ix.q = q
        forward = ix.forward
        ix.forward = lambda x, latent, keys, offset=0: forward(x, x, keys, offset)


@pytest.mark.parametrize("family", ["deepseek_v32", "glm_moe_dsa"])
@pytest.mark.parametrize(
    "fault", [_dense, _wrong_pairs, _rope_on_the_other_half, _no_k_norm, _query_from_x]
)
def test_each_part_of_the_indexer_is_needed(family, fault):
    assert worst(family, fault) > 1e-3


def test_mistral4_needs_its_temperature_and_its_floor():
    assert worst("mistral4", lambda layer: setattr(layer, "beta", 0.0)) > 1e-3

    def llama4_floor(layer):  # floor((t + 1) / length), Llama 4's NoPE rule
        queries = type(layer).__mro__[1].queries

        def tempered(x, offset=0, latent=None):
            q_nope, q_rope = queries(layer, x, offset, latent)
            t = torch.arange(offset, offset + x.size(1)) + 1
            s = (1 + layer.beta * torch.log1p(torch.floor(t / layer.length))).float()[:, None]
            return q_nope * s, q_rope * s

        layer.queries = tempered

    assert worst("mistral4", llama4_floor) > 1e-4


def test_a_shared_layer_loaded_alone_says_how_to_wire_it():
    model, seen = recorded("glm_moe_dsa")
    layer = load_attention(model, 1)
    assert layer.source_index == 0
    with pytest.raises(ValueError, match=r"layer\.choice = "), torch.no_grad():
        layer(seen[1]["x"])


@pytest.mark.parametrize(
    "family, change, field",
    [
        ("glm_moe_dsa", {"indexer_types": ["shared", "full", "full", "full"]}, "indexer_types"),
        (
            "mistral4",
            {
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": 1e4,
                    "partial_rotary_factor": 0.5,
                }
            },
            "rope_parameters",
        ),
    ],
)
def test_a_config_it_cannot_express_names_the_field(family, change, field):
    model = tiny_model(family, **change)
    with pytest.raises(ValueError, match=rf"config\.{re.escape(field)}"):
        load_attention(model, 0)


# DeepSeek-V4: a window layer, compressed sparse (an entry per 2 tokens, top 3), heavily
# compressed (an entry per 6), compressed sparse.
def test_v4_layers_are_its_three_kinds_and_cache_window_plus_entries():
    model, seen = recorded("deepseek_v4")
    config = model.config
    layers = load_attentions(model)
    assert [layer.spec.ratio for layer in layers] == [None, 2, 6, 2]
    assert [layer.spec.overlap for layer in layers] == [False, True, False, True]
    assert T > 2 * config.sliding_window and T % 6 == 0
    with torch.no_grad():
        for layer, s in zip(layers, seen, strict=True):
            cache = layer.new_cache(s["x"].size(0), T)
            for t in range(T):
                layer(s["x"][:, t : t + 1], cache=cache)
            entries = T // layer.spec.ratio if layer.spec.ratio else 0
            assert len(cache) == config.sliding_window - 1 + entries
            _, weights = layer(s["x"], return_weights=True)
            assert weights.shape[-1] == T + entries
            if layer.spec.overlap:  # CSA: 3 of up to 12 entries kept, fewer than causal
                kept = (weights[..., T:] > 0).sum(-1)
                assert kept.max() == config.index_topk


def _mean_pooling(layer):  # gates all equal: the softmax over positions is a mean
    for comp in (layer.compressor, layer.indexer):
        if comp is not None:
            comp.z.weight.zero_()
            comp.bias.zero_()


def _window(change):
    def fault(layer):
        layer.spec = dataclasses.replace(layer.spec, window=layer.spec.window + change)

    return fault


def _no_sinks(layer):
    layer.sinks.fill_(-torch.inf)


def _dense_csa(layer):
    if layer.spec.overlap:
        layer.spec = dataclasses.replace(layer.spec, top_k=T)


def _no_yarn(layer):  # the compressed layers' RoPE at base 160,000, unscaled
    if layer.spec.ratio is not None:
        layer.theta = rope_frequencies(layer.spec.rope_dims, 160000.0).double()


@pytest.mark.parametrize(
    "fault", [_mean_pooling, _window(1), _window(-1), _no_sinks, _dense_csa, _no_yarn]
)
def test_each_part_of_v4s_attention_is_needed(fault):
    with torch.no_grad():
        assert worst("deepseek_v4", fault) > 1e-3


def test_v4_needs_its_unweighted_q_norm_and_its_output_turned_back(monkeypatch):
    import snippets.layers.compressed_attention as ca

    rms, turn = ca.rms, ca.turn_tail
    model, _ = recorded("deepseek_v4")
    weight = load_attention(model, 0).kv_norm.detach()  # a scale about 2, per channel
    monkeypatch.setattr(ca, "rms", lambda x, eps, w=None: rms(x, eps, weight if w is None else w))
    assert worst("deepseek_v4") > 1e-3
    monkeypatch.setattr(ca, "rms", rms)

    def not_back(x, theta, positions):  # the values keep their keys' RoPE
        return x if (positions < 0).any() else turn(x, theta, positions)

    monkeypatch.setattr(ca, "turn_tail", not_back)
    assert worst("deepseek_v4") > 1e-3
