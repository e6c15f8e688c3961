"""GLM-5-Next (transformers' glm5_next text model) through the oracle.

Its "linear_attention" layers are Kimi Delta Attention with a bounded decay
(snippets/layers/kda.py's BoundedKimiDeltaAttention, loaded by
lab/oracle/linear_from_transformers.py's load_kda): every layer whole and through its
LinearState, a prefill then one token at a
time, within 1e-5. The planted faults the comparison must catch: a decay per head instead
of per channel, and Kimi Linear's unbounded decay in place of the bounded one.
Its "indexed_attention" layer is MLA without RoPE whose DSA indexer scores pools of
keys (snippets/layers/pooled_indexer.py's PooledIndexer in snippets/layers/sparse_mla.py's
SparseLatentAttention); compare("glm5_next_text") (every layer, whole and cached) runs
in tests/lab/test_from_transformers.py with every family. Planted faults it must catch:
the pooled keys without their gate (a plain mean), no tail, single keys for pools.
"""

import functools

import pytest
import torch

pytest.importorskip("transformers")

from lab.oracle.from_transformers import load_attention  # noqa: E402
from lab.oracle.tiny_models import record_layers, tiny_model  # noqa: E402
from lab.todays_models import BATCH, T, compare, relative, run_all  # noqa: E402
from snippets.layers.kda import BoundedKimiDeltaAttention, KimiDeltaAttention  # noqa: E402
from snippets.layers.pooled_indexer import PooledIndexer  # noqa: E402
from snippets.layers.sparse_mla import DSAIndexer, SparseLatentAttention  # noqa: E402

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


def test_every_layer_equals_and_the_indexed_one_is_sparse():
    result = compare("glm5_next_text")
    assert result["kinds"] == ["linear"] * 3 + ["full"]
    assert result["whole"] < 1e-5 and result["cached"] < 1e-5
    model, seen = recorded()
    layer = load_attention(model, 3)
    assert type(layer) is SparseLatentAttention and type(layer.indexer) is PooledIndexer
    assert layer.spec.rope is None and layer.indexer.pool == 4
    with torch.no_grad():
        layer(seen[3]["x"])
    counts = layer.choice.chosen.sum(-1)  # 2 whole pools of 4 and up to 3 of its own
    assert counts.max() <= 8 + 3 and counts[:, -1].max() < T


def caught(change) -> float:
    model, seen = recorded()
    layer = load_attention(model, 3)
    with torch.no_grad():
        assert relative(layer(seen[3]["x"]), seen[3]["y"]) < 1e-5
        change(layer.indexer)
        return relative(layer(seen[3]["x"]), seen[3]["y"])


def test_pooled_keys_without_their_gate_are_caught():
    """The planted fault: each pool's entry the mean of its keys."""

    def plain_mean(indexer):
        indexer.gate.weight.zero_()
        indexer.place.zero_()

    assert caught(plain_mean) > 1e-2


def test_no_tail_is_caught():
    assert caught(lambda indexer: setattr(indexer, "tail", False)) > 1e-2


def test_single_keys_for_pools_are_caught():
    """The planted fault: DSA's choice, the top 8 single keys, on the same indexer."""

    def single(indexer):
        E = indexer.spec.head_size
        indexer.choose = lambda x, latent, keys, offset, allowed: DSAIndexer.choose(
            indexer, x, latent, keys[..., :E], offset, allowed
        )

    assert caught(single) > 1e-2
