"""Tests for snippets/layers/kda.py: Kimi Delta Attention, the delta rule with a decay per channel.

The recurrent form is the paper's update S_t = (I - beta k k^T) diag(alpha) S_{t-1} +
beta k v^T written with explicit matrices; the chunked form equals the recurrent one
(chunk sizes that divide T and sizes that do not, with and without a starting state);
the decay acts row by row (its defining property) and with one value for every channel it
is Gated DeltaNet; the bounded variant's (GLM-5-Next's) decay stays in (lower, 0);
the layer is causal, its LinearState is all that passes between two
parts of a sequence; bad input is a ValueError naming it. Against transformers' Kimi
Linear: tests/lab/test_kimi_linear.py.
"""

import pytest
import torch
from torch.testing import assert_close

from snippets.layers.kda import (
    BoundedKimiDeltaAttention,
    KimiDeltaAttention,
    kda_chunked,
    kda_recurrent,
)
from snippets.layers.linear_attention import gated_delta_chunked, gated_delta_recurrent, state_bytes

B, H, T, K, V = 2, 3, 37, 8, 6


def inputs(seed=0, T=T, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype)

    q = randn(B, H, T, K) * K**-0.5
    k = torch.nn.functional.normalize(randn(B, H, T, K), dim=-1)
    v = randn(B, H, T, V)
    g = -torch.rand(B, H, T, K, generator=gen, dtype=dtype)  # alpha in (0.37, 1) per channel
    beta = torch.rand(B, H, T, generator=gen, dtype=dtype)
    state = randn(B, H, K, V)
    return q, k, v, g, beta, state


def test_recurrent_is_the_papers_update():
    q, k, v, g, beta, S = inputs()
    o, S_end = kda_recurrent(q, k, v, g, beta, S)
    eye = torch.eye(K, dtype=q.dtype)
    for t in range(T):
        kt, vt = k[:, :, t, :, None], v[:, :, t, None, :]  # (B, H, K, 1), (B, H, 1, V)
        alpha = torch.diag_embed(g[:, :, t].exp())  # (B, H, K, K), diagonal
        b = beta[:, :, t, None, None]
        S = (eye - b * kt @ kt.transpose(-1, -2)) @ alpha @ S + b * kt @ vt
        assert_close(o[:, :, t], (S.transpose(-1, -2) @ q[:, :, t, :, None])[..., 0])
    assert_close(S_end, S)


@pytest.mark.parametrize("chunk_size", [1, 5, 16, 64])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunked_equals_recurrent(chunk_size, with_state):
    """5 does not divide 37 (padding), 64 exceeds it (one padded chunk)."""
    q, k, v, g, beta, S = inputs()
    S = S if with_state else None
    o1, s1 = kda_recurrent(q, k, v, g, beta, S)
    o2, s2 = kda_chunked(q, k, v, g, beta, S, chunk_size=chunk_size)
    assert_close(o2, o1, rtol=0, atol=1e-12)
    assert_close(s2, s1, rtol=0, atol=1e-12)


def test_each_channel_forgets_on_its_own():
    """alpha = 0 on key channel 0 alone erases row 0 of the state, the other rows
    only decay: nothing is written (beta = 0). Per head, all rows would go alike."""
    q, k, v, g, beta, S = inputs(T=3)
    g = torch.full_like(g, -0.1)
    g[:, :, 1, 0] = -60.0  # exp(-60) ~ 1e-26: channel 0 forgets all at t = 1
    for rule in (kda_recurrent, kda_chunked):
        _, S_end = rule(q, k, v, g, torch.zeros_like(beta), S)
        assert S_end[:, :, 0].abs().max() < 1e-20
        assert_close(S_end[:, :, 1:], S[:, :, 1:] * torch.exp(torch.tensor(-0.3)))


def test_one_decay_for_every_channel_is_gated_deltanet():
    q, k, v, g, beta, S = inputs()
    per_head = g[..., 0]
    same = per_head[..., None].expand_as(g)
    assert_close(
        kda_recurrent(q, k, v, same, beta, S), gated_delta_recurrent(q, k, v, per_head, beta, S)
    )
    assert_close(
        kda_chunked(q, k, v, same, beta, S, chunk_size=8),
        gated_delta_chunked(q, k, v, per_head, beta, S, chunk_size=8),
    )


def layer(seed=0, **kwargs):
    torch.manual_seed(seed)
    return KimiDeltaAttention(2, 16, 8, 6, chunk_size=8, **kwargs).double()


def test_the_layers_decay_is_per_channel_and_shaped_as_the_keys():
    attn = layer()
    x = torch.randn(2, 11, 16, dtype=torch.float64)
    q, k, v, g, beta = attn.gates(x)
    assert g.shape == k.shape == (2, 2, 11, 8)
    assert bool((g <= 0).all())
    assert g.std(-1).min() > 1e-3  # the channels of a head decay differently
    assert attn.a[1].out_features == attn.dt_bias.numel() == 2 * 8  # H * K, not H
    assert attn.A_log.shape == (2,)  # one rate per head scales each channel's step


def test_the_layer_is_causal_and_its_forms_agree():
    attn = layer()
    x = torch.randn(2, 20, 16, dtype=torch.float64)
    y = attn(x)
    assert_close(attn(x, recurrent=True), y)
    x2 = x.clone()
    x2[:, 12:] = torch.randn(2, 8, 16, dtype=torch.float64)
    assert_close(attn(x2)[:, :12], y[:, :12])


def test_the_state_is_all_that_passes_between_parts():
    """A LinearState of the same bytes as Gated DeltaNet's: prefill, then one token
    at a time, equals the whole sequence at once."""
    attn = layer()
    x = torch.randn(2, 20, 16, dtype=torch.float64)
    cache = attn.new_cache(2, 20)
    parts = [attn(x[:, :13], cache=cache)] + [
        attn(x[:, t : t + 1], cache=cache) for t in range(13, 20)
    ]
    assert_close(torch.cat(parts, 1), attn(x))
    assert cache.seen == 20 and cache.S.shape == (2, 2, 8, 6)
    numbers = sum(t.numel() for t in cache.tensors()) // 2
    assert numbers * 2 == state_bytes(
        2, 8, 6, conv_channels=16, conv_size=4, batch=2, bytes_per_element=1
    )


def test_bad_input_is_named():
    q, k, v, g, beta, S = inputs(T=4)
    with pytest.raises(
        ValueError, match=r"g must have the keys' shape .* one decay per key channel"
    ):
        kda_recurrent(q, k, v, g[..., 0], beta, S)  # a decay per head
    with pytest.raises(ValueError, match=r"g must be <= 0"):
        kda_chunked(q, k, v, g.abs(), beta, S)
    with pytest.raises(ValueError, match=r"chunk_size \(0\)"):
        kda_chunked(q, k, v, g, beta, S, chunk_size=0)
    with pytest.raises(ValueError, match=r"state must be"):
        kda_recurrent(q, k, v, g, beta, S[:, :1])
    with pytest.raises(ValueError, match=r"rank \(0\)"):
        KimiDeltaAttention(2, 16, 8, 6, rank=0)
    attn = layer()
    x = torch.randn(1, 3, 16, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"KimiDeltaAttention has no attention weights"):
        attn(x, return_weights=True)
    with pytest.raises(TypeError, match=r"KimiDeltaAttention keeps no rolling cache"):
        attn.new_cache(1, 3, window=4)
    with pytest.raises(ValueError, match=r"x must be \(B, T, 16\)"):
        attn(x[..., :4])


def test_the_bounded_decay_stays_above_its_bound():
    """GLM-5-Next's decay: lower * sigmoid(rate * a), every channel's in (lower, 0),
    however large the decay's input; the unbounded one passes the bound."""
    torch.manual_seed(0)
    bounded = BoundedKimiDeltaAttention(2, 16, 8, 6, lower=-2.0).double()
    free = KimiDeltaAttention(2, 16, 8, 6).double()
    free.load_state_dict(bounded.state_dict())
    x = torch.randn(2, 11, 16, dtype=torch.float64) * 50  # decay inputs of many units
    g = bounded.decay(x)
    assert g.shape == (2, 2, 11, 8)
    assert bool((g >= -2.0).all()) and bool((g <= 0).all())  # (lower, 0), up to rounding
    assert g.min() < -1.9  # the bound is reached, not merely respected
    assert free.decay(x).min() < -2.0
    a = (bounded.a(x) + bounded.dt_bias).view(2, 11, 2, 8)
    expected = -2.0 * torch.sigmoid(bounded.A_log.exp()[:, None] * a)
    assert_close(g, expected.transpose(1, 2))


def test_a_bound_that_is_not_negative_is_refused():
    for lower in (0.0, 1.5, True, "-5"):
        with pytest.raises(ValueError, match=r"lower \(.*\) must be a negative number"):
            BoundedKimiDeltaAttention(2, 16, 8, 6, lower=lower)
