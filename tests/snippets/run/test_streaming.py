"""Tests for snippets/run/streaming.py: the rolling KV cache, sinks, and RoPE by place in the cache.

Tiny untrained RoPE models: each test runs in well under a second on 2 CPU cores.
"""

import pytest
import torch
from torch.testing import assert_close

from snippets.core.cache import ModelCache
from snippets.core.model import GPT, GPTConfig
from snippets.layers.taming import TamedSpec
from snippets.run.streaming import (
    first_token_attention,
    recompute_logits,
    stream_logits,
    stream_step,
)


def rope_model(n_layer: int = 2, max_length: int = 64, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    config = GPTConfig(
        vocab_size=11,
        context_length=16,
        n_embed=16,
        n_head=2,
        n_layer=n_layer,
        position="rope",
        max_length=max_length,
    )
    return GPT(config).eval()


def tokens(B: int, T: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 11, (B, T), generator=torch.Generator().manual_seed(seed))


def test_a_window_longer_than_the_text_is_the_full_forward_pass():
    model = rope_model()
    idx = tokens(2, 40)
    full, _ = model(idx)
    assert_close(stream_logits(model, idx, window=40), full, rtol=1e-5, atol=1e-5)
    assert_close(stream_logits(model, idx, window=64, sinks=4), full, rtol=1e-5, atol=1e-5)


def test_one_layer_rolling_cache_is_recompute_over_the_last_W_tokens():
    # With one layer, a cached key depends on its own token only, so the cache of
    # the last W tokens holds what recomputing them would: an eviction one token
    # early or late changes the logits.
    model = rope_model(n_layer=1)
    idx = tokens(2, 30)
    W = 7
    streamed = stream_logits(model, idx, window=W)
    assert_close(streamed, recompute_logits(model, idx, window=W), rtol=1e-5, atol=1e-5)
    other = recompute_logits(model, idx, window=W + 1)
    assert not torch.allclose(streamed[:, W:], other[:, W:], atol=1e-4)


def test_sinks_are_the_first_tokens_placed_before_the_most_recent_ones():
    # One layer again: at step t the cache must hold tokens 0 .. k-1, then
    # t - (W - k) + 1 .. t, rotated to places 0 .. W - 1, as if that were the text.
    model = rope_model(n_layer=1)
    idx = tokens(1, 25)
    W, k = 8, 2
    streamed = stream_logits(model, idx, window=W, sinks=k)
    for t in range(W, idx.size(1)):
        kept = torch.cat([idx[:, :k], idx[:, t - (W - k) + 1 : t + 1]], dim=1)  # (1, W)
        assert kept.size(1) == W
        expected = model(kept)[0][:, -1]
        assert_close(streamed[:, t], expected, rtol=1e-5, atol=1e-5)


def test_sink_cache_differs_from_plain_rolling_cache_only_after_the_first_eviction():
    model = rope_model()
    idx = tokens(2, 30)
    W = 8
    plain = stream_logits(model, idx, window=W)
    sinks = stream_logits(model, idx, window=W, sinks=1)
    assert_close(sinks[:, :W], plain[:, :W], rtol=0, atol=0)  # nothing dropped yet
    assert not torch.allclose(sinks[:, W:], plain[:, W:], atol=1e-4)


def test_cache_never_holds_more_than_the_window():
    model = rope_model()
    idx = tokens(1, 20)
    cache = ModelCache.for_model(model, 1, window=5, sinks=2)
    for t in range(idx.size(1)):
        stream_step(model, idx[:, t : t + 1], cache)
        assert len(cache) == min(t + 1, 5)
        assert all(t.size(2) == len(cache) for t in cache.tensors())  # keys, values
    assert cache.seen == 20


def test_first_token_attention_is_a_share_per_layer_and_head():
    model = rope_model()
    idx = tokens(3, 16)
    shares = first_token_attention(model, idx, start=8)
    assert shares.shape == (2, 2)
    assert ((shares > 0) & (shares < 1)).all()
    # the same quantity from the weights the attention layer returns, layer 0
    x = model.embed(idx)
    _, weights = model.blocks[0].attn(model.blocks[0].ln1(x), return_weights=True)
    assert_close(shares[0], weights[:, :, 8:, 0].mean(dim=(0, 2)))


@pytest.mark.parametrize(
    "window, sinks, message",
    [(0, 0, r"window \(0\) must be an int >= 1"), (4, 4, r"sinks \(4\) must be < window \(4\)")],
)
def test_bad_window_or_sinks(window, sinks, message):
    with pytest.raises(ValueError, match=message):
        ModelCache.for_model(rope_model(1), 1, window=window, sinks=sinks)


def test_a_model_without_rope_is_refused():
    model = GPT(GPTConfig(vocab_size=11, context_length=8, n_embed=16, n_head=2, n_layer=1))
    with pytest.raises(ValueError, match=r"position \('learned'\) must be 'rope'"):
        stream_logits(model, tokens(1, 4), window=4)


@pytest.mark.parametrize(
    "pieces",
    [{"sinks": True}, {"gate": "elementwise"}, {"qk_norm": "head", "soft_cap": 3.0, "sinks": True}],
)
def test_the_taming_pieces_stream_as_they_train(pieces):
    # A tamed layer read token by token (its sinks, cap, norm and gate applied at every
    # step) gives the full forward pass, and with one layer recompute's logits.
    torch.manual_seed(0)
    layer = TamedSpec(16, 2, 16, "rope", 64, **pieces)
    config = GPTConfig(
        vocab_size=11, context_length=16, n_embed=16, n_head=2, n_layer=1,
        position="none", max_length=64, layers=(layer,),
    )  # fmt: skip
    model = GPT(config).eval()
    with torch.no_grad():  # sinks away from 0, gate and norm scales away from their start
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    idx = tokens(2, 30)
    full, _ = model(idx)
    assert_close(stream_logits(model, idx, window=30), full, rtol=1e-5, atol=1e-5)
    window = 8
    assert_close(
        stream_logits(model, idx, window=window),
        recompute_logits(model, idx, window=window),
        rtol=1e-5,
        atol=1e-5,
    )
