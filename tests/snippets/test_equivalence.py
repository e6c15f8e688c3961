"""Tests for tests/snippets/equivalence.py's as_spec_layer and as_specs: a fused layer
(the plain one, TamedAttention) as the spec layer of the same function, and what they
refuse by name (from_per_head and from_kv_heads: in test_model and the lessons' tests).
The whole-GPT check of every such variant is a column of the protocol matrix
(tests/snippets/test_protocol.py)."""

import pytest
import torch
from torch.testing import assert_close

from snippets.core.attention import CausalSelfAttention
from snippets.core.model import GPT, GPTConfig
from snippets.layers.configurable import ConfigurableAttention
from snippets.layers.taming import TamedAttention
from tests.snippets.equivalence import as_spec_layer, as_specs


def noisy(layer):
    torch.manual_seed(0)
    layer = layer.double()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return layer.eval()


X = torch.randn(2, 9, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize(
    "layer",
    [
        lambda: TamedAttention(4, 32, 16, position="rope", qk_norm="all", soft_cap=3.0,
                               sinks=True, gate="elementwise"),
        lambda: TamedAttention(4, 32, 16, position="alibi", qk_norm="head", sinks=True),
        lambda: CausalSelfAttention(4, 32, 16, position="alibi"),
    ],
    ids=["tamed", "tamed-alibi", "plain-alibi"],
)  # fmt: skip
@torch.no_grad()
def test_a_teaching_layer_and_its_spec_layer_are_one_function(layer):
    teaching = noisy(layer())
    spec = as_spec_layer(teaching)
    assert type(spec) is ConfigurableAttention
    for ours, its in zip(
        spec(X, return_weights=True), teaching(X, return_weights=True), strict=True
    ):
        assert_close(ours, its, rtol=1e-12, atol=1e-12)  # the output, then the weights
    mine, theirs = spec.new_cache(2, 9), teaching.new_cache(2, 9)
    for a, b in ((0, 4), (4, 5), (5, 9)):
        assert_close(spec(X[:, a:b], mine), teaching(X[:, a:b], theirs), rtol=1e-12, atol=1e-12)


def test_what_has_no_spec_is_refused_by_name():
    with pytest.raises(TypeError, match=r"Linear is not a layer with a fused qkv and a proj"):
        as_spec_layer(torch.nn.Linear(2, 2))
    gpt = GPT(GPTConfig(vocab_size=20, n_embed=32, n_head=4, position="rope"))
    with pytest.raises(
        TypeError, match=r"AttentionSpec: not the spec of the plain or a tamed layer"
    ):
        as_specs(as_specs(gpt))  # a GPT of AttentionSpecs already
