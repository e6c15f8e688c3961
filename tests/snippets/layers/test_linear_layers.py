"""Tests for snippets/layers/linear_layers.py: a LinearSpec builds the layer of its rule at its
sizes, counts its parameters by hand, and refuses a rule, a size or a slope it does not
know by name. (Every operation of a GPT made of these specs: test_protocol.py.)"""

import pytest
import torch

from snippets.layers.kda import KimiDeltaAttention
from snippets.layers.lightning import LightningAttention
from snippets.layers.linear_attention import GatedDeltaNet
from snippets.layers.linear_layers import RULES, LinearSpec
from snippets.layers.mamba2 import Mamba2

SIZES = [(4, 32, 8, 6), (2, 24, 4, 8), (1, 16, 16, 2)]  # (H, C, K, V)
KINDS = {
    "gated_deltanet": GatedDeltaNet,
    "kda": KimiDeltaAttention,
    "mamba2": Mamba2,
    "lightning": LightningAttention,
}


def spec_of(rule: str, H: int, C: int, K: int, V: int, **options) -> LinearSpec:
    """A LinearSpec of these sizes; lightning's heads are K wide, with slopes of their own."""
    if rule == "lightning":
        slopes = tuple(0.5**i for i in range(H))
        return LinearSpec(H, C, K, K, rule=rule, slopes=slopes, **options)
    return LinearSpec(H, C, K, V, rule=rule, **options)


def test_every_rule_has_its_layer():
    assert RULES == KINDS


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("sizes", SIZES, ids=str)
def test_the_count_by_hand_is_the_layers(rule, sizes):
    spec = spec_of(rule, *sizes)
    layer = spec.build()
    assert spec.parameters() == sum(p.numel() for p in layer.parameters())


@pytest.mark.parametrize("rule", KINDS)
def test_the_layer_is_the_rules_at_the_specs_sizes(rule):
    layer = spec_of(rule, 4, 32, 8, 6, chunk_size=16).build()
    V = 8 if rule == "lightning" else 6
    assert type(layer) is KINDS[rule] and layer.chunk_size == 16
    assert (layer.n_head, layer.head_k, layer.head_v) == (4, 8, V)  # Mamba2: N = 8, P = 6
    state = layer.new_cache(2, 3)
    layer(torch.randn(2, 3, 32), cache=state)
    assert tuple(state.S.shape) == (2, 4, 8, V)
    if rule == "lightning":
        assert layer.slope.tolist() == [1.0, 0.5, 0.25, 0.125]


def test_a_rule_a_size_or_a_slope_it_does_not_know_is_named():
    with pytest.raises(ValueError, match=r"rule \('retnet'\) must be one of \['gated_deltanet'"):
        LinearSpec(4, 32, 8, 8, rule="retnet")
    with pytest.raises(ValueError, match=r"head_k \(0\) must be positive"):
        LinearSpec(4, 32, 0, 8)
    with pytest.raises(TypeError, match=r"chunk_size \(1.5\) must be an int"):
        LinearSpec(4, 32, 8, 8, chunk_size=1.5)
    needs = r"rule='lightning' needs slopes, a tuple of n_head \(4\) decay rates >= 0"
    with pytest.raises(ValueError, match=needs + ", got None"):
        LinearSpec(4, 32, 8, 8, rule="lightning")
    with pytest.raises(ValueError, match=needs + r", got \(1.0, 1.0, 1.0\)"):
        LinearSpec(4, 32, 8, 8, rule="lightning", slopes=(1.0,) * 3)
    with pytest.raises(ValueError, match=needs + r", got \(1.0, -1.0, 1.0, 1.0\)"):
        LinearSpec(4, 32, 8, 8, rule="lightning", slopes=(1.0, -1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match=r"lightning's fixed decays; rule='kda' learns its own"):
        LinearSpec(4, 32, 8, 8, rule="kda", slopes=(1.0,) * 4)
    with pytest.raises(ValueError, match=r"head_k \(8\) must equal head_v \(6\)"):
        LinearSpec(4, 32, 8, 6, rule="lightning", slopes=(1.0,) * 4)
