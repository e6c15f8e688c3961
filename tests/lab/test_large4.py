"""Mistral Large 4's loader: every layer equals transformers', whole and cached.

The tiny model (lab/oracle/tiny_models.py) has each kind of its layers: RoPE and NoPE,
latents stored and read by later layers (transformers' kv_sharing_modes store,
reuse, reuse_but_indexer), indexers of their own and "shared" ones, top 6 of up
to 24 keys. Each part of the mechanism, left out or done otherwise, is caught by
lab.todays_models' run_all (the layers in turn through their caches).
"""

import functools
import math
import re

import pytest
import torch

pytest.importorskip("transformers")

import snippets.layers.learned_temperature as lt  # noqa: E402
from lab.oracle.from_transformers import load_attention, load_attentions, spec_from_config  # noqa: E402
from lab.oracle.tiny_models import record_layers, tiny_model  # noqa: E402
from lab.todays_models import T, compare, run_all  # noqa: E402

FAMILY = "mistral_large4_text"


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


@functools.cache
def recorded():
    model = tiny_model(FAMILY)
    tokens = torch.randint(0, 64, (2, T), generator=torch.Generator().manual_seed(1))
    return model, record_layers(model, tokens)


def worst(change=lambda layers: None) -> tuple[float, float]:
    """Worst relative difference, whole and cached, the layers changed by `change`."""
    model, seen = recorded()
    layers = load_attentions(model)
    change(layers)
    with torch.no_grad():
        whole, cached, _ = run_all(layers, [s["x"] for s in seen])
    pairs = [(w, c, s["y"]) for w, c, s in zip(whole, cached, seen, strict=True)]
    return max(relative(w, y) for w, _, y in pairs), max(relative(c, y) for _, c, y in pairs)


def test_the_tiny_model_has_every_kind_of_layer():
    model, _ = recorded()
    config = model.config
    modes = ["store", "reuse", "store", "store", "reuse", "reuse_but_indexer"]
    assert config.kv_sharing_modes == modes
    assert 0 in config.no_rope_layers and "shared" in config.indexer_types
    assert config.index_topk < T // 3
    layers = load_attentions(model)
    assert [layer.spec.kv_source for layer in layers] == [None, 0, None, None, 2, 3]
    assert [layer.turn is None for layer in layers] == [False, False, True, False, True, False]
    assert [layer.indexer is None for layer in layers] == [False, True, False, False, True, False]
    assert layers[1].choice is layers[0].choice and layers[4].choice is layers[3].choice
    assert layers[0].turn.alpha.abs().min() > 0  # LeRoPE's learned frequencies, loaded


def test_every_layer_equals_transformers_whole_and_cached():
    r = compare(FAMILY)
    assert r["layers"] == 6 and r["sharpness"] > 0.4
    assert r["whole"] < 1e-5 and r["cached"] < 1e-5
    assert worst() == pytest.approx((r["whole"], r["cached"]))


def test_the_whole_model_loads_as_its_text_model():
    import transformers

    model, seen = recorded()
    vision = {"hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 1}
    vision |= {"num_attention_heads": 2, "image_size": 28, "patch_size": 14}
    config = transformers.MistralLarge4Config(
        text_config=model.config.to_dict(), vision_config={"model_type": "pixtral", **vision}
    )
    whole = transformers.MistralLarge4ForConditionalGeneration(config)
    whole.model.language_model.load_state_dict(model.state_dict())
    layer = load_attention(whole, 2)  # a NoPE layer with its own latents and indexer
    with torch.no_grad():
        assert relative(layer(seen[2]["x"]), seen[2]["y"]) < 1e-5


def _log_without_the_one(layers, monkeypatch):  # log t (log 1 at t = 0), not log(t + 1)
    def wrong(positions, scale, bias):
        return scale[:, None] * torch.log(positions.float().clamp(min=1))[None] + bias[:, None]

    monkeypatch.setattr(lt, "learned_temperature", wrong)


def _indexer_rope_half_split(layers, monkeypatch):  # pairs (i, i + R/2), not (2i, 2i + 1)
    for layer in layers:
        ix = layer.indexer
        if ix is not None and ix.turn is not None:
            R = 2 * ix.turn.theta.numel()
            half = torch.arange(R // 2)
            pairs = torch.stack([half, half + R // 2], -1).flatten()
            order = torch.cat([pairs, torch.arange(R, ix.spec.head_size)])

            def turn(t, offset, ix=ix, order=order):
                return ix.turn(t[..., order], offset)[..., order.argsort()]

            ix._turn = turn


def _reader_turns_again(layers, monkeypatch):  # a reading layer turns the keys it borrows
    update, turn = lt.SharedLatents.update, layers[0].turn

    def update_and_turn(self, *new):
        (c, k_rope, *own), k_pos = update(self, *new)
        return (c, turn(k_rope) if k_rope.size(-1) else k_rope, *own), k_pos

    monkeypatch.setattr(lt.SharedLatents, "update", update_and_turn)


def _nope_layers_with_rope(layers, monkeypatch):  # NoPE layers' indexers turned as RoPE's
    for layer in layers:
        if layer.turn is None and layer.indexer is not None:
            layer.indexer.turn = layers[0].turn


def _no_temperature(layers, monkeypatch):
    for layer in layers:
        for m in (layer.temperature, getattr(layer.indexer, "temperature", None)):
            if m is not None:
                m.scale.data.zero_()
                m.bias.data.fill_(1.0)


def _no_lerope(layers, monkeypatch):
    for layer in layers:
        if layer.turn is not None:
            layer.turn.alpha.zero_()


def _no_mscale(layers, monkeypatch):  # 1 / sqrt(Dn + Dr), without YaRN's mscale squared
    for layer in layers:
        layer.scale = 1 / math.sqrt(16)


@pytest.mark.parametrize(
    "fault",
    [
        _log_without_the_one,
        _indexer_rope_half_split,
        _reader_turns_again,
        _nope_layers_with_rope,
        _no_temperature,
        _no_lerope,
        _no_mscale,
    ],
)
def test_each_part_is_needed(fault, monkeypatch):
    whole, cached = worst(functools.partial(fault, monkeypatch=monkeypatch))
    assert whole > 1e-3 and cached > 1e-3


@pytest.mark.parametrize(
    "change, field",
    [
        ({"indexer_types": ["shared"] + ["full"] * 5}, "indexer_types"),
        # layer 5 (RoPE) pointed at layer 2 (NoPE): transformers would give it layer 0's
        ({"kv_source_layers": [0, 0, 2, 3, 2, 2]}, "kv_source_layers"),
    ],
)
def test_a_config_it_cannot_express_names_the_field(change, field):
    model = tiny_model(FAMILY, **change)
    index = {"indexer_types": 0, "kv_source_layers": 5}[field]
    with pytest.raises(ValueError, match=rf"config\.{re.escape(field)}"):
        load_attention(model, index)


def test_its_row_caches_latents_by_kind_and_nothing_for_a_reader():
    import transformers

    from lab.oracle.families import kv_bytes, specs_kv_bytes

    # the defaults: 72 layers, every 4th NoPE (a latent of 512), the others 512 + 64
    assert kv_bytes("Mistral Large 4 (defaults)", 1000) == (54 * 576 + 18 * 512) * 1000 * 2
    sources = [0, 1, 2, 3, 2, 5, 6, 3]  # 4 reads 2's (RoPE) latents, 7 3's (NoPE)
    config = transformers.MistralLarge4TextConfig(num_hidden_layers=8, kv_source_layers=sources)
    specs = [spec_from_config(config, i) for i in range(8)]
    assert [s.kv_source for s in specs] == [None] * 4 + [2, None, None, 3]
    assert specs_kv_bytes(specs, 10) == (5 * 576 + 512) * 10 * 2
