"""Gemma 4 (text) in the oracle: its schedule and layers read from the config, its RoPE
rule against transformers', and the faults the every-layer comparison must catch.

The comparison itself (every layer, whole and cached, within 1e-5) is
tests/lab/test_from_transformers.py's; here, each of Gemma 4's pieces planted wrong must
make that comparison fail: values turned by RoPE, values without their norm, full RoPE in
place of proportional, a sharing layer on its own keys and values, and values left in the
projection's order when they came out of the permuted key projection.
"""

import dataclasses
import functools

import pytest
import torch

pytest.importorskip("transformers")

from lab.oracle.from_transformers import _load_gqa, load_attention, spec_from_config  # noqa: E402
from lab.oracle.tiny_models import record_layers, tiny_config, tiny_model  # noqa: E402
from lab.todays_models import T, relative, run_all  # noqa: E402
from snippets.core.rope_scaling import RopeSpec, frequencies, rotate  # noqa: E402

FAMILY = "gemma4_text"
FAULT = 1e-3  # a planted fault must move some output by more than this, relative


@functools.cache
def recorded():
    model = tiny_model(FAMILY)
    tokens = torch.randint(0, 64, (2, T), generator=torch.Generator().manual_seed(1))
    return model, record_layers(model, tokens)


@torch.no_grad()
def worst(i: int, layer, records=None) -> float:
    """The worse of the whole and cached relative differences of layer i."""
    model, seen = recorded()
    records = records or seen
    layers = [layer if j == i else load_attention(model, j) for j in range(len(records))]
    whole, cached, _ = run_all(layers, [r["x"] for r in records])
    return max(relative(whole[i], seen[i]["y"]), relative(cached[i], seen[i]["y"]))


def test_the_schedule_and_the_layers_are_the_config_s():
    config = tiny_config(FAMILY)
    specs = [spec_from_config(config, i) for i in range(config.num_hidden_layers)]
    assert [s.kind for s in specs] == ["window"] * 5 + ["full", "window", "full"]
    assert [s.kv_source for s in specs] == [None] * 6 + [4, 5]  # the last of each kind
    assert [s.k_eq_v for s in specs] == [False] * 5 + [True, False, False]
    assert [s.v_norm for s in specs] == [True] * 6 + [False] * 2  # the readers make no V
    assert {(s.kind, s.head_size, s.n_kv_head) for s in specs} == {
        ("window", 16, 2),
        ("full", 32, 1),
    }
    full = specs[5].rope
    assert (full.scaling, full.rotary_dim, full.base) == ("proportional", 8, 1e6)
    assert specs[0].rope == RopeSpec(base=10000.0)
    assert all(s.scale == 1.0 and s.qk_norm == "head" for s in specs)


def test_proportional_rope_is_transformers_rule():
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    for factor in (1.0, 8.0):
        config = tiny_config(
            FAMILY,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {
                    "rope_type": "proportional",
                    "partial_rotary_factor": 0.25,
                    "rope_theta": 1e6,
                    "factor": factor,
                },
            },
        )
        theirs, _ = ROPE_INIT_FUNCTIONS["proportional"](config, None, layer_type="full_attention")
        spec = spec_from_config(config, 5)
        ours, _ = frequencies(spec.rope, spec.head_size)
        assert theirs.numel() == spec.head_size // 2  # the head's pairs, the slow ones zero
        assert torch.count_nonzero(theirs) == ours.numel() == 4
        torch.testing.assert_close(ours.float(), theirs[:4], rtol=1e-6, atol=0)


def test_each_piece_is_needed():
    model, _ = recorded()
    for i in (4, 5, 6, 7):  # a source of each kind, and their readers
        assert worst(i, load_attention(model, i)) < 1e-5


def replaced(layer, **changes):
    layer.spec = dataclasses.replace(layer.spec, **changes)
    return layer


def test_values_turned_by_rope_are_caught():
    model, _ = recorded()
    layer = load_attention(model, 5)  # the K=V full layer
    keys_values = layer.keys_values

    def turned(k, v, offset=0):
        k, v = keys_values(k, v, offset)
        return k, rotate(v, layer.spec.rope, offset)

    layer.keys_values = turned
    assert worst(5, layer) > FAULT


def test_values_without_their_norm_are_caught():
    model, _ = recorded()
    for i in (0, 5):  # a window layer with v_proj, the K=V full layer
        assert worst(i, replaced(load_attention(model, i), v_norm=False)) > FAULT


def test_full_or_partial_rope_in_place_of_proportional_is_caught():
    model, _ = recorded()
    base = 1e6
    for rope in (RopeSpec(base=base), RopeSpec(base=base, rotary_dim=8)):
        assert worst(5, replaced(load_attention(model, 5), rope=rope)) > FAULT


def test_a_sharing_layer_on_its_own_keys_and_values_is_caught():
    # The source's weights on the reader's own hidden states: what a layer that
    # ignored the sharing and kept its own K and V would see.
    model, seen = recorded()
    for i, source in ((6, 4), (7, 5)):
        own = list(seen)
        own[source] = {**seen[source], "x": seen[i]["x"]}
        assert worst(i, load_attention(model, i), records=own) > FAULT


def test_values_in_the_projection_s_order_are_caught():
    # K=V: the values come out of the key rows permuted for RoPE's pairs; the output
    # projection's columns must follow, in the K=V layer and in the layer reading it.
    model, _ = recorded()
    config = model.config
    for i in (5, 7):
        module = model.model.layers[i].self_attn
        layer = _load_gqa(module, spec_from_config(config, i), FAMILY, values_turned=False)
        assert worst(i, layer.eval()) > FAULT


@pytest.mark.parametrize("mode", ["vision", "all"])
def test_a_bidirectional_gemma4_names_the_field(mode):
    # Gemma 4's vision tokens (or all) see each other both ways: the guide's layer is causal.
    config = tiny_config(FAMILY, use_bidirectional_attention=mode)
    with pytest.raises(ValueError, match=r"config\.use_bidirectional_attention"):
        spec_from_config(config, 0)
