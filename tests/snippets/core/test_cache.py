"""Tests for snippets/core/cache.py, the one cache interface. Here: generation through a
GPT of mixed layers, whose Gated DeltaNet blocks carry a fixed-size LinearState where
softmax blocks carry a KV cache (every kind against every layer: test_protocol.py).

Fed in pieces (a prompt, single tokens, chunks), the cached logits equal one full
forward pass; greedy generation with the cache equals recomputing everything; the
linear state's bytes do not grow with the tokens read.
"""

import pytest
import torch
from torch.testing import assert_close

from snippets.core.attention import CausalSpec
from snippets.core.cache import LinearState, ModelCache
from snippets.core.model import GPT, GPTConfig
from snippets.layers.linear_layers import LinearSpec
from snippets.run.generate import generate


def hybrid(seed: int = 0, chunk_size: int = 64) -> GPT:
    torch.manual_seed(seed)
    linear = LinearSpec(2, 32, 8, 8, chunk_size=chunk_size)  # Gated DeltaNet
    softmax = CausalSpec(32, 4, 24, position="rope")
    config = GPTConfig(vocab_size=24, context_length=24, n_embed=32, n_head=4, n_layer=4,
                       position="none", layers=(linear, linear, softmax, linear))  # fmt: skip
    model = GPT(config).double().eval()
    for p in model.parameters():  # away from the small init: every path matters
        p.data += 0.1 * torch.randn_like(p)
    return model


def ids(B: int, T: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 24, (B, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("chunk_size", [64, 3])  # 3: a prompt of several chunks
def test_cached_hybrid_logits_equal_a_full_forward_pass(chunk_size):
    model = hybrid(chunk_size=chunk_size)
    idx = ids(2, 20)
    cache = ModelCache.for_model(model, batch_size=2)
    linear = [i for i, c in enumerate(cache.layers) if isinstance(c, LinearState)]
    assert linear == [0, 1, 3]
    cuts = ((0, 7), (7, 8), (8, 9), (9, 15), (15, 20))  # prompt, 1, 1, chunks
    pieces = [model(idx[:, a:b], cache=cache)[0] for a, b in cuts]
    with torch.no_grad():
        full = model(idx)[0]
    assert_close(torch.cat(pieces, dim=1), full, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("new", [5, 30])  # 30: past context_length, the states start again
def test_greedy_hybrid_with_the_cache_is_the_recomputed_output(new):
    model = hybrid(seed=2)
    idx = ids(3, 6, seed=3)
    cached = generate(model, idx, new, greedy=True)
    assert torch.equal(cached, generate(model, idx, new, greedy=True, kv_cache=False))


def test_the_linear_state_does_not_grow():
    model = hybrid()
    cache = ModelCache.for_model(model, batch_size=1)
    state = cache.layers[0]
    model(ids(1, 3), cache=cache)
    before = [t.shape for t in state.tensors()]
    model(ids(1, 1), cache=cache)
    assert [t.shape for t in state.tensors()] == before
    assert before == [(1, 2, 8, 8), (1, 3, 32)]  # S (B, H, K, V); 3 earlier inputs (B, 3, C)
    assert isinstance(state, LinearState) and state.S.abs().sum() > 0


@pytest.mark.parametrize("index", [0, 1, 3])  # every linear block's own new_cache
def test_a_linear_layers_state_is_read_and_written_through_update(index):
    """One verb: update hands the layer its state so far and the rows its convolution
    reads; the layer writes the state past the new positions back into it."""
    model = hybrid()
    layer = model.blocks[index].attn
    x = torch.randn(2, 5, 32, dtype=torch.double)
    cache = layer.new_cache(2, 24)
    assert isinstance(cache, LinearState) and cache.tensors() == []  # nothing read yet
    with torch.no_grad():
        first = layer(x[:, :4], cache=cache)
        S = cache.S.clone()
        pieces = torch.cat([first, layer(x[:, 4:], cache=cache)], 1)
        assert_close(pieces, layer(x), rtol=1e-10, atol=1e-10)
        assert not torch.equal(S, cache.S) and cache.seen == 5  # written past position 4
    assert [tuple(t.shape) for t in cache.tensors()] == [(2, 2, 8, 8), (2, 3, 32)]
    with pytest.raises(ValueError, match="x holds a batch of 3, the state one of 2"):
        layer(x[:1, :1].expand(3, 1, 32), cache=cache)
    with pytest.raises(TypeError, match="GatedDeltaNet keeps no rolling cache"):
        layer.new_cache(2, 24, window=4)
