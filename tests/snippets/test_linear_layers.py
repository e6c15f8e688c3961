"""Tests for snippets/linear_layers.py: a LinearSpec builds the layer of its rule at its
sizes, counts its parameters by hand, and refuses a rule or a size it does not know by
name. (Every operation of a GPT made of these specs: test_protocol.py.)"""

import pytest
import torch

from snippets.kda import KimiDeltaAttention
from snippets.linear_attention import GatedDeltaNet
from snippets.linear_layers import RULES, LinearSpec, linear_layer, linear_parameters
from snippets.mamba2 import Mamba2

SIZES = [(4, 32, 8, 6), (2, 24, 4, 8), (1, 16, 16, 2)]  # (H, C, K, V)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("sizes", SIZES, ids=str)
def test_the_count_by_hand_is_the_layers(rule, sizes):
    spec = LinearSpec(*sizes, rule=rule)
    layer = linear_layer(spec)
    assert linear_parameters(spec) == sum(p.numel() for p in layer.parameters())


@pytest.mark.parametrize(
    "rule, kind",
    [("gated_deltanet", GatedDeltaNet), ("kda", KimiDeltaAttention), ("mamba2", Mamba2)],
)
def test_the_layer_is_the_rules_at_the_specs_sizes(rule, kind):
    layer = linear_layer(LinearSpec(4, 32, 8, 6, rule=rule, chunk_size=16))
    assert type(layer) is kind and layer.chunk_size == 16
    assert (layer.n_head, layer.head_k, layer.head_v) == (4, 8, 6)  # Mamba2: N = 8, P = 6
    state = layer.new_cache()
    layer(torch.randn(2, 3, 32), cache=state)
    assert tuple(state.S.shape) == (2, 4, 8, 6)


def test_a_rule_or_a_size_it_does_not_know_is_named():
    with pytest.raises(ValueError, match=r"rule \('lightning'\) must be one of \['gated_deltanet'"):
        LinearSpec(4, 32, 8, 8, rule="lightning")
    with pytest.raises(ValueError, match=r"head_k \(0\) must be positive"):
        LinearSpec(4, 32, 0, 8)
    with pytest.raises(TypeError, match=r"chunk_size \(1.5\) must be an int"):
        LinearSpec(4, 32, 8, 8, chunk_size=1.5)
