"""Tests for snippets/layers/mamba2.py: the Mamba2 layer and its SSD recurrence.

The recurrent form is masked attention y_i = sum_{j <= i} (C_i . B_j) a_{j+1..i} dt_j x_j
(the SSD duality, Dao and Gu 2024, section 5), computed here as a (T, T) matrix; with no
decay (A -> 0) it is the plain causal linear-attention sum; the chunked form equals the
recurrent one (chunks that divide T and chunks that do not, with and without a starting
state); the layer is causal, its forms agree, and its LinearState (the state and the
convolution's last rows) is all that passes between two parts of a sequence; bad input
is refused by name. Against transformers: tests/lab/test_mamba2_hybrids.py.
"""

import pytest
import torch
from torch.testing import assert_close

from snippets.layers.mamba2 import Mamba2, mamba2_state_bytes, ssd_chunked, ssd_recurrent

Bt, H, T, P, N = 2, 3, 37, 4, 5


def inputs(seed=0, T=T):
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    dt = torch.nn.functional.softplus(randn(Bt, H, T))
    A = -torch.tensor([0.5, 0.1, 2.0], dtype=torch.float64)
    return randn(Bt, H, T, P), dt, A, randn(Bt, H, T, N), randn(Bt, H, T, N), randn(Bt, H, N, P)


def test_recurrent_is_masked_attention_with_a_decay_per_head():
    """y_i = sum_{j <= i} (C_i . B_j) exp(l_i - l_j) dt_j x_j + exp(l_i) C_i^T h_0,
    l the running sum of dt A: one number per head and position decays all channels."""
    x, dt, A, B, C, h0 = inputs()
    y, _ = ssd_recurrent(x, dt, A, B, C, h0)
    run = (dt * A[:, None]).cumsum(-1)  # (B, H, T)
    gap = run[..., :, None] - run[..., None, :]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    weights = (C @ B.transpose(-1, -2)) * gap.masked_fill(~mask, -torch.inf).exp()
    expected = weights @ (dt[..., None] * x) + (C * run.exp()[..., None]) @ h0
    assert_close(y, expected)


def test_no_decay_and_a_constant_step_is_plain_linear_attention():
    """A -> 0 (a = 1) and dt = 1: y_i = sum_{j <= i} (C_i . B_j) x_j, causal linear
    attention with C as the query, B as the key and x as the value."""
    x, _, _, B, C, _ = inputs()
    A = torch.full((H,), -1e-300, dtype=torch.float64)  # exp(dt A) == 1 in float64
    y, h = ssd_chunked(x, torch.ones(Bt, H, T, dtype=torch.float64), A, B, C, chunk_size=8)
    causal = torch.ones(T, T, dtype=torch.float64).tril()
    assert_close(y, (C @ B.transpose(-1, -2) * causal) @ x)
    assert_close(h, B.transpose(-1, -2) @ x)  # the sum of every k v^T


@pytest.mark.parametrize("chunk_size", [1, 5, 16, 64])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunked_equals_recurrent(chunk_size, with_state):
    x, dt, A, B, C, h0 = inputs()
    h0 = h0 if with_state else None
    y1, s1 = ssd_recurrent(x, dt, A, B, C, h0)
    y2, s2 = ssd_chunked(x, dt, A, B, C, h0, chunk_size=chunk_size)
    assert_close(y2, y1, rtol=0, atol=1e-10)
    assert_close(s2, s1, rtol=0, atol=1e-10)


def layer(seed=0, **changes):
    torch.manual_seed(seed)
    fields = {"n_groups": 2, "conv_size": 4, "chunk_size": 8, "bias": True, **changes}
    attn = Mamba2(4, 16, 6, 5, **fields).double()
    with torch.no_grad():  # off Mamba2's start: D, the norm and the biases not 1 or 0
        for p in (attn.D, attn.norm_weight, attn.in_proj.bias, attn.conv.bias):
            p.copy_(torch.randn_like(p))
    return attn


@pytest.mark.parametrize("norm", ["gate_first", "norm_first", "none"])
def test_the_layer_is_causal_its_forms_agree_and_its_state_is_all_that_passes(norm):
    attn = layer(norm=norm)
    x = torch.randn(2, 21, 16, dtype=torch.float64)
    y = attn(x)
    assert_close(attn(x, recurrent=True), y)
    x2 = x.clone()
    x2[:, 12:] = torch.randn(2, 9, 16, dtype=torch.float64)
    assert_close(attn(x2)[:, :12], y[:, :12])
    cache = attn.new_cache(2, 21)
    parts = [attn(x[:, :10], cache=cache)]  # beyond a chunk and the convolution
    parts += [attn(x[:, t : t + 1], cache=cache) for t in range(10, 14)]
    parts += [attn(x[:, 14:], cache=cache)]  # a piece again, after single steps
    assert_close(torch.cat(parts, 1), y)
    assert cache.seen == 21
    assert cache.recent.shape == (2, 3, 4 * 6 + 2 * 2 * 5)  # xBC's last conv_size - 1 rows
    assert cache.S.shape == (2, 4, 5, 6)  # (B, H, N, P)


def test_the_skip_and_the_gate_matter():
    """D x enters the output, and the three gate placements are three functions."""
    attn = layer()
    x = torch.randn(1, 9, 16, dtype=torch.float64)
    y = attn(x)
    with torch.no_grad():
        attn.D.zero_()
    assert (attn(x) - y).abs().max() > 1e-3
    ys = [layer(norm=n)(x) for n in ("gate_first", "norm_first", "none")]
    pairs = zip(ys, ys[1:] + ys[:1], strict=True)
    assert min((a - b).abs().max() for a, b in pairs) > 1e-3


def test_the_state_has_the_same_bytes_whatever_t():
    attn = layer()
    cache = attn.new_cache(1, 31)
    attn(torch.randn(1, 1, 16, dtype=torch.float64), cache=cache)
    before = sum(t.numel() for t in cache.tensors())
    attn(torch.randn(1, 30, 16, dtype=torch.float64), cache=cache)
    assert sum(t.numel() for t in cache.tensors()) == before
    assert mamba2_state_bytes(4, 6, 5, n_groups=2, bytes_per_element=1) == before


def test_bad_input_is_named():
    x, dt, A, B, C, h0 = inputs(T=4)
    with pytest.raises(ValueError, match=r"x must hold T >= 1"):
        ssd_recurrent(x[:, :, :0], dt[:, :, :0], A, B[:, :, :0], C[:, :, :0])
    with pytest.raises(ValueError, match=r"A must be < 0 and dt > 0"):
        ssd_recurrent(x, dt, -A, B, C)
    with pytest.raises(ValueError, match=r"C must be \(B, H, T, N\)"):
        ssd_chunked(x, dt, A, B, C[..., :2])
    with pytest.raises(ValueError, match=r"state must be \(B, H, N, P\)"):
        ssd_chunked(x, dt, A, B, C, h0[..., :1])
    with pytest.raises(ValueError, match=r"chunk_size \(0\) must be positive"):
        ssd_chunked(x, dt, A, B, C, chunk_size=0)
    with pytest.raises(ValueError, match=r"n_groups \(3\) must divide n_head \(4\)"):
        Mamba2(4, 16, 6, 5, n_groups=3)
    with pytest.raises(ValueError, match=r"chunk_size \(-1\) must be positive"):
        Mamba2(4, 16, 6, 5, chunk_size=-1)
    with pytest.raises(ValueError, match=r"norm \('after'\) must be one of"):
        Mamba2(4, 16, 6, 5, norm="after")
    attn = layer()
    with pytest.raises(ValueError, match=r"x must be \(B, T, C\) with C=16"):
        attn(torch.randn(1, 3, 15, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"x must hold T >= 1"):
        attn(torch.randn(1, 0, 16, dtype=torch.float64))
    x = torch.randn(1, 3, 16, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"Mamba2 has no attention weights"):
        attn(x, return_weights=True)
    with pytest.raises(TypeError, match=r"Mamba2 keeps no rolling cache"):
        attn.new_cache(1, 3, window=4)
