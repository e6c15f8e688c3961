"""Tests for snippets/layers/linear_attention.py: the gated delta rule and the layer.

The recurrent form is the paper's update written with an explicit (I - beta k k^T)
matrix; the chunked form equals the recurrent one for chunk sizes that divide T and
sizes that do not, from a zero state and from a given one; the state is all that
passes between two halves of a sequence; the layer is causal; bad input is a
ValueError naming the value. transformers' layer: tests/lab/test_linear_from_transformers.py.
"""

import dataclasses

import pytest
import torch
from torch.testing import assert_close

from snippets.layers.linear_attention import (
    GatedDeltaNet,
    gated_delta_chunked,
    gated_delta_recurrent,
    state_bytes,
)

B, H, T, K, V = 2, 3, 37, 8, 6


def inputs(seed=0, T=T, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype)

    q = randn(B, H, T, K) * K**-0.5
    k = torch.nn.functional.normalize(randn(B, H, T, K), dim=-1)
    v = randn(B, H, T, V)
    g = -torch.rand(B, H, T, generator=gen, dtype=dtype)  # alpha in (0.37, 1)
    beta = torch.rand(B, H, T, generator=gen, dtype=dtype)
    state = randn(B, H, K, V)
    return q, k, v, g, beta, state


def test_recurrent_is_the_papers_update():
    """S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = S_t^T q_t
    (the paper's eq. with S stored as (K, V)), one (K, K) matrix at a time."""
    q, k, v, g, beta, S = inputs()
    o, S_end = gated_delta_recurrent(q, k, v, g, beta, S)
    eye = torch.eye(K, dtype=q.dtype)
    for t in range(T):
        kt, vt = k[:, :, t, :, None], v[:, :, t, None, :]  # (B, H, K, 1), (B, H, 1, V)
        a, b = g[:, :, t].exp()[..., None, None], beta[:, :, t, None, None]
        S = a * (eye - b * kt @ kt.transpose(-1, -2)) @ S + b * kt @ vt
        assert_close(o[:, :, t], (S.transpose(-1, -2) @ q[:, :, t, :, None])[..., 0])
    assert_close(S_end, S)


@pytest.mark.parametrize("chunk_size", [1, 5, 16, 64])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunked_equals_recurrent(chunk_size, with_state):
    """5 does not divide 37 (padding), 64 exceeds it (one padded chunk)."""
    q, k, v, g, beta, S = inputs()
    S = S if with_state else None
    o1, s1 = gated_delta_recurrent(q, k, v, g, beta, S)
    o2, s2 = gated_delta_chunked(q, k, v, g, beta, S, chunk_size=chunk_size)
    assert_close(o2, o1, rtol=0, atol=1e-12)
    assert_close(s2, s1, rtol=0, atol=1e-12)


def test_the_state_is_all_that_passes_between_halves():
    q, k, v, g, beta, _ = inputs()
    whole, S_whole = gated_delta_chunked(q, k, v, g, beta, chunk_size=8)
    cut = 20
    first, S = gated_delta_chunked(*(x[:, :, :cut] for x in (q, k, v, g, beta)), chunk_size=8)
    second, S_end = gated_delta_recurrent(*(x[:, :, cut:] for x in (q, k, v, g, beta)), S)
    assert_close(torch.cat([first, second], dim=2), whole)
    assert_close(S_end, S_whole)


def test_forget_gate_and_write_strength_act():
    """alpha = 0 before a position erases everything before it; beta = 0 writes nothing."""
    q, k, v, g, beta, _ = inputs()
    g = g.clone()
    g[:, :, 10] = -60.0  # exp(g) ~ 1e-26 at position 10: S is wiped before its write
    o, _ = gated_delta_chunked(q, k, v, g, beta, chunk_size=8)
    tail, _ = gated_delta_recurrent(*(x[:, :, 10:] for x in (q, k, v, g, beta)))
    assert_close(o[:, :, 10:], tail)
    o, S = gated_delta_recurrent(q, k, v, g, torch.zeros_like(beta))
    assert o.abs().max() == 0 and S.abs().max() == 0


def layer(seed=0):
    torch.manual_seed(seed)
    m = GatedDeltaNet(4, 24, 8, 6, n_k_head=2, chunk_size=8)
    with torch.no_grad():  # away from initialisation: gates and norms matter
        for p in m.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return m.double()


def test_layer_chunked_equals_recurrent_and_is_causal():
    m = layer()
    x = torch.randn(2, 21, 24, dtype=torch.float64)
    y = m(x)
    assert_close(y, m(x, recurrent=True), rtol=0, atol=1e-10)
    changed = x.clone()
    changed[:, 13:] = torch.randn(2, 8, 24, dtype=torch.float64)
    y2 = m(changed)
    assert_close(y2[:, :13], y[:, :13], rtol=0, atol=1e-12)
    assert (y2[:, 13:] - y[:, 13:]).abs().max() > 1e-3


def test_state_bytes_counts_the_state():
    q, k, v, g, beta, _ = inputs(dtype=torch.float32)
    _, S = gated_delta_chunked(q, k, v, g, beta)
    assert S.numel() * S.element_size() == B * state_bytes(H, K, V, bytes_per_element=4)
    assert state_bytes(H, K, V, conv_channels=10, conv_size=4) == 2 * (H * K * V + 30)


def test_bad_input_names_the_value():
    q, k, v, g, beta, S = inputs()
    with pytest.raises(ValueError, match=r"chunk_size \(0\)"):
        gated_delta_chunked(q, k, v, g, beta, chunk_size=0)
    with pytest.raises(
        ValueError, match=r"state must be \(B, H, K, V\) = \(2, 3, 8, 6\), got \(2, 3, 6, 8\)"
    ):
        gated_delta_recurrent(q, k, v, g, beta, S.transpose(-1, -2))
    with pytest.raises(ValueError, match=r"state must be"):
        gated_delta_chunked(q, k, v, g, beta, S[:1])
    with pytest.raises(ValueError, match=r"beta must be \(B, H, T\)"):
        gated_delta_recurrent(q, k, v, g, beta[..., :-1])
    with pytest.raises(ValueError, match=r"n_k_head \(3\) must divide n_head \(4\)"):
        GatedDeltaNet(4, 24, 8, 8, n_k_head=3)
    with pytest.raises(ValueError, match=r"chunk_size \(-1\)"):
        GatedDeltaNet(4, 24, 8, 8, chunk_size=-1)
    with pytest.raises(ValueError, match=r"x must be \(B, T, 24\)"):
        layer()(torch.randn(2, 5, 12, dtype=torch.float64))


@pytest.mark.parametrize("form", [gated_delta_recurrent, gated_delta_chunked])
def test_no_positions_or_a_gate_above_one_is_refused(form):
    q, k, v, g, beta, S = inputs()
    empty = (t[:, :, :0] for t in (q, k, v, g, beta))
    with pytest.raises(
        ValueError,
        match=r"q and k must both be \(B, H, T, K\) with T >= 1, got \(2, 3, 0, 8\) and",
    ):
        form(*empty, S)
    g = g.clone()
    g[1, 2, 5] = 0.25  # alpha = exp(0.25) > 1: the state would grow without bound
    with pytest.raises(ValueError, match=r"g must be <= 0, got a largest value of 0.25"):
        form(q, k, v, g, beta, S)
    g[1, 2, 5] = 0.0  # alpha = 1: keeps the state, allowed
    form(q, k, v, g, beta, S)


def test_a_gpt_places_gated_deltanet_blocks_where_its_layers_say():
    from snippets.core.attention import CausalSpec
    from snippets.core.model import GPT, GPTConfig, parameter_count
    from snippets.layers.linear_layers import LinearSpec

    linear, softmax = LinearSpec(4, 64, 16, 16), CausalSpec(64, 4, 32)
    config = GPTConfig(n_layer=4, layers=(linear, softmax, linear, linear))
    model = GPT(config)
    kinds = [isinstance(b.attn, GatedDeltaNet) for b in model.blocks]
    assert kinds == [True, False, True, True]
    assert parameter_count(config) == sum(p.numel() for p in model.parameters())
    x = torch.randint(0, config.vocab_size, (2, config.context_length))
    _, loss = model(x, x)
    loss.backward()
    assert all(p.grad is not None for p in model.blocks[0].attn.parameters())
    small = LinearSpec(2, 64, 4, 4)  # 2 heads of a 4 x 4 state
    model = GPT(dataclasses.replace(config, layers=(linear, softmax, small, small)))
    assert [(b.attn.n_head, b.attn.head_k, b.attn.head_v) for b in model.blocks[2:]] == [
        (2, 4, 4)
    ] * 2
    assert parameter_count(model.config) == sum(p.numel() for p in model.parameters())
