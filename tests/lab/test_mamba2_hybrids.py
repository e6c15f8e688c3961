"""The Mamba2 hybrids through the oracle: Nemotron-H, Granite 4 and Falcon-H1.

compare(family) (every layer whole and cached, within 1e-5, T beyond the chunk and the
convolution) runs in tests/lab/test_from_transformers.py with every family; Falcon-H1's
attention half (part="self_attn") here. Here: which layer is which, what the loader
reads of each mixer (the gate's place, Falcon-H1's multipliers), and the planted faults
the comparison must catch: D skipped, the gate on the other side of the norm, the
convolution's rows dropped across a cache step, Falcon-H1's key multiplier dropped.
"""

import functools
import re

import pytest
import torch

pytest.importorskip("transformers")

from lab.oracle.from_transformers import load_attention  # noqa: E402
from lab.oracle.tiny_models import record_layers, tiny_model  # noqa: E402
from lab.todays_models import BATCH, PREFILL, T, compare, relative, run_all  # noqa: E402
from snippets.layers.configurable import ConfigurableAttention  # noqa: E402
from snippets.layers.mamba2 import Mamba2  # noqa: E402

HYBRIDS = ("nemotron_h", "granitemoehybrid", "falcon_h1")


@functools.cache
def recorded(family: str, part: str | None = None, **changes):
    model = tiny_model(family, **changes)
    tokens = torch.randint(0, 64, (BATCH, T), generator=torch.Generator().manual_seed(1))
    return model, record_layers(model, tokens, part)


def test_which_layer_is_which():
    kinds = {f: [type(load_attention(recorded(f)[0], i)) for i in range(4)] for f in HYBRIDS}
    assert kinds["nemotron_h"] == [Mamba2, Mamba2, ConfigurableAttention, Mamba2]
    assert kinds["granitemoehybrid"] == [Mamba2] * 3 + [ConfigurableAttention]
    assert kinds["falcon_h1"] == [Mamba2] * 4  # each layer's Mamba2 half
    falcon = load_attention(recorded("falcon_h1")[0], 1, part="self_attn")
    assert isinstance(falcon, ConfigurableAttention) and falcon.spec.rope is not None
    assert load_attention(recorded("falcon_h1")[0], 1, part="mamba").__class__ is Mamba2
    nemotron = load_attention(recorded("nemotron_h")[0], 2)
    granite = load_attention(recorded("granitemoehybrid")[0], 3)
    assert nemotron.spec.rope is None and granite.spec.rope is None  # NoPE
    assert granite.spec.scale == 0.3  # its attention_multiplier, not 1 / sqrt(D)
    layer = load_attention(recorded("nemotron_h")[0], 0)
    assert (layer.n_head, layer.n_groups, layer.head_v, layer.head_k) == (4, 2, 12, 5)
    assert layer.chunk_size * 2 < T and PREFILL > layer.conv.kernel_size[0]


@pytest.mark.parametrize(
    ("family", "changes", "norm"),
    [
        ("nemotron_h", {}, "gate_first"),
        ("granitemoehybrid", {}, "gate_first"),
        ("falcon_h1", {}, "none"),
        ("falcon_h1", {"mamba_rms_norm": True}, "norm_first"),
    ],
)
@torch.no_grad()
def test_the_gate_is_where_transformers_puts_it(family, changes, norm):
    model, seen = recorded(family, **changes)
    layer = load_attention(model, 0)
    assert layer.norm == norm
    y = layer(seen[0]["x"])
    assert relative(y, seen[0]["y"]) < 1e-5
    assert seen[0]["y"].abs().max() > 0.1  # not a near-zero output anything would match
    for other in {"gate_first", "norm_first", "none"} - {norm}:  # planted: moved
        layer.norm = other
        assert relative(layer(seen[0]["x"]), seen[0]["y"]) > 1e-2, other


@torch.no_grad()
def test_falcon_h1s_multipliers_are_folded_in():
    model, seen = recorded("falcon_h1")
    layer = load_attention(model, 1)
    assert relative(layer(seen[1]["x"]), seen[1]["y"]) < 1e-5
    theirs = model.model.layers[1].mamba
    layer.in_proj.weight.copy_(theirs.in_proj.weight)  # planted: multipliers left out
    layer.in_proj.bias.copy_(theirs.in_proj.bias)
    assert relative(layer(seen[1]["x"]), seen[1]["y"]) > 1e-2


@pytest.mark.parametrize("family", HYBRIDS)
@torch.no_grad()
def test_skipping_d_is_caught(family):
    model, seen = recorded(family)
    layer = load_attention(model, 0)
    layer.D.zero_()
    assert relative(layer(seen[0]["x"]), seen[0]["y"]) > 1e-2


class ForgetsItsConv(Mamba2):
    """A planted fault: Mamba2 with its convolution's rows dropped before every step."""

    def forward(self, x, cache=None, **kwargs):
        if cache is not None and cache.recent is not None:  # after the first step
            cache.recent = torch.zeros_like(cache.recent)
        return super().forward(x, cache=cache, **kwargs)


@pytest.mark.parametrize("family", HYBRIDS)
@torch.no_grad()
def test_the_conv_without_its_state_across_a_cache_step_is_caught(family):
    model, seen = recorded(family)
    layer = load_attention(model, 0)
    _, cached, _ = run_all([layer], [seen[0]["x"]])
    assert relative(cached[0], seen[0]["y"]) < 1e-5
    layer.__class__ = ForgetsItsConv
    _, cached, _ = run_all([layer], [seen[0]["x"]])
    assert relative(cached[0], seen[0]["y"]) > 1e-2


@torch.no_grad()
def test_falcon_h1s_attention_half_equals_transformers_whole_and_cached():
    r = compare("falcon_h1", part="self_attn")
    assert r["layers"] == 4 and r["kinds"] == ["full"] * 4 and r["sharpness"] > 0.4
    assert r["whole"] < 1e-5 and r["cached"] < 1e-5
    # its in and out multipliers belong to the decoder layer around it: what the attention
    # gets is what the Mamba2 half gets, times attention_in_multiplier
    model, attention = recorded("falcon_h1", "self_attn")
    _, mamba = recorded("falcon_h1")
    scale = model.config.attention_in_multiplier
    assert scale != 1 and torch.allclose(attention[2]["x"], mamba[2]["x"] * scale)


@torch.no_grad()
def test_falcon_h1s_key_multiplier_dropped_is_caught():
    model, seen = recorded("falcon_h1", "self_attn")
    scale = model.config.key_multiplier
    assert scale != 1
    layer = load_attention(model, 2, part="self_attn")
    layer.k.weight /= scale  # planted: the key multiplier left out of k's weights and bias
    layer.k.bias /= scale
    whole, cached, _ = run_all([layer], [seen[2]["x"]])
    assert relative(whole[0], seen[2]["y"]) > 1e-3 and relative(cached[0], seen[2]["y"]) > 1e-3


@pytest.mark.parametrize(("family", "part"), [("falcon_h1", "mlp"), ("nemotron_h", "self_attn")])
def test_a_part_the_layer_does_not_have_is_named(family, part):
    with pytest.raises(ValueError, match=rf"part \('{re.escape(part)}'\)"):
        load_attention(recorded(family)[0], 0, part=part)
