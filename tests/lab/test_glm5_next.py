"""GLM-5-Next (transformers' glm5_next text model) through the oracle: its linear layers.

Its "linear_attention" layers are Kimi Delta Attention with a bounded decay
(snippets/kda.py's BoundedKimiDeltaAttention, loaded by lab/linear_from_transformers.py's
load_kda): every layer whole and through its LinearState, a prefill then one token at a
time, within 1e-5. The planted faults the comparison must catch: a decay per head instead
of per channel, and Kimi Linear's unbounded decay in place of the bounded one.
"""

import functools

import pytest
import torch

pytest.importorskip("transformers")

from lab.from_transformers import load_attention  # noqa: E402
from lab.tiny_models import record_layers, tiny_model  # noqa: E402
from lab.todays_models import BATCH, T, relative, run_all  # noqa: E402
from snippets.kda import BoundedKimiDeltaAttention, KimiDeltaAttention  # noqa: E402

LINEAR = range(3)  # 3 KDA layers : 1 indexed MLA layer


@functools.cache
def recorded():
    model = tiny_model("glm5_next_text")
    tokens = torch.randint(0, 64, (BATCH, T), generator=torch.Generator().manual_seed(1))
    return model, record_layers(model, tokens)


@torch.no_grad()
def test_three_bounded_kda_layers_equal_whole_and_cached():
    model, seen = recorded()
    assert model.config.layer_types == ["linear_attention"] * 3 + ["indexed_attention"]
    layers = [load_attention(model, i) for i in LINEAR]
    assert [type(layer) for layer in layers] == [BoundedKimiDeltaAttention] * 3
    assert layers[0].lower == model.config.linear_lower_bound == -5.0
    whole, cached, _ = run_all(layers, [seen[i]["x"] for i in LINEAR])
    for i in LINEAR:
        assert seen[i]["y"].abs().max() > 1  # not a near-zero output anything would match
        assert relative(whole[i], seen[i]["y"]) < 1e-5
        assert relative(cached[i], seen[i]["y"]) < 1e-5


@torch.no_grad()
def test_a_decay_per_head_is_caught():
    """The planted fault: each head's channels share one decay (their mean)."""
    model, seen = recorded()
    layer = load_attention(model, 0)
    per_channel = layer.decay
    layer.decay = lambda x: per_channel(x).mean(-1, keepdim=True).expand(-1, -1, -1, layer.head_k)
    assert relative(layer(seen[0]["x"]), seen[0]["y"]) > 1e-2


@torch.no_grad()
def test_the_unbounded_decay_is_caught():
    """The planted fault: Kimi Linear's decay, -exp(A_log) softplus(a), the same weights."""
    model, seen = recorded()
    layer = load_attention(model, 0)
    layer.decay = KimiDeltaAttention.decay.__get__(layer)
    assert relative(layer(seen[0]["x"]), seen[0]["y"]) > 1e-2
