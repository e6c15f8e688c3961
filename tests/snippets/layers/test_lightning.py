"""Tests for snippets/layers/lightning.py: MiniMax's lightning attention.

The recurrent form is causal linear attention with weights (q_i . k_j) lambda^(i - j),
computed here as a (T, T) matrix; the chunked form equals the recurrent one (chunks that
divide T and chunks that do not, with and without a starting state); the layer is causal
and its LinearState (no convolution inputs) is all that passes between two parts of a
sequence; bad input is a ValueError naming it. Against transformers' MiniMax:
tests/lab/test_minimax.py.
"""

import pytest
import torch
from torch.testing import assert_close

from snippets.layers.lightning import LightningAttention, lightning_chunked, lightning_recurrent

B, H, T, D = 2, 3, 37, 8


def inputs(seed=0, T=T):
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    slope = torch.tensor([0.5, 0.1, 0.0], dtype=torch.float64)  # 0: no decay at all
    return randn(B, H, T, D), randn(B, H, T, D), randn(B, H, T, D), slope, randn(B, H, D, D)


def test_recurrent_is_decaying_linear_attention():
    """o_i = sum_{j <= i} (q_i . k_j) lambda^(i - j) v_j + lambda^(i + 1) S_0^T q_i."""
    q, k, v, slope, S = inputs()
    o, _ = lightning_recurrent(q, k, v, slope, S)
    i = torch.arange(T, dtype=torch.float64)
    gap = i[:, None] - i[None, :]
    weights = torch.exp(-slope[:, None, None] * gap.clamp(min=0)) * (gap >= 0)  # (H, T, T)
    from_state = (q * torch.exp(-slope[:, None, None] * (i[:, None] + 1))) @ S
    assert_close(o, (q @ k.transpose(-1, -2) * weights) @ v + from_state)


@pytest.mark.parametrize("chunk_size", [1, 5, 16, 64])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunked_equals_recurrent(chunk_size, with_state):
    q, k, v, slope, S = inputs()
    S = S if with_state else None
    o1, s1 = lightning_recurrent(q, k, v, slope, S)
    o2, s2 = lightning_chunked(q, k, v, slope, S, chunk_size=chunk_size)
    assert_close(o2, o1, rtol=0, atol=1e-10)
    assert_close(s2, s1, rtol=0, atol=1e-10)


def layer(seed=0):
    torch.manual_seed(seed)
    return LightningAttention(2, 16, 8, [0.3, 0.05], chunk_size=8).double()


def test_the_layer_is_causal_its_forms_agree_and_its_state_is_all_that_passes():
    attn = layer()
    x = torch.randn(2, 20, 16, dtype=torch.float64)
    y = attn(x)
    assert_close(attn(x, recurrent=True), y)
    x2 = x.clone()
    x2[:, 12:] = torch.randn(2, 8, 16, dtype=torch.float64)
    assert_close(attn(x2)[:, :12], y[:, :12])
    cache = attn.new_cache(2, 20)
    parts = [attn(x[:, :13], cache=cache)]
    parts += [attn(x[:, t : t + 1], cache=cache) for t in range(13, 20)]
    assert_close(torch.cat(parts, 1), y)
    assert cache.recent.shape == (2, 0, 16)  # no convolution: nothing but S
    assert cache.seen == 20 and cache.S.shape == (2, 2, 8, 8)


def test_bad_input_is_named():
    q, k, v, slope, S = inputs(T=4)
    with pytest.raises(ValueError, match=r"slope must be \(H,\) = \(3,\) and >= 0"):
        lightning_recurrent(q, k, v, -slope - 1, S)
    with pytest.raises(ValueError, match=r"q, k and v must all be \(B, H, T, D\)"):
        lightning_chunked(q, k, v[..., :4], slope, S)
    with pytest.raises(ValueError, match=r"state must be"):
        lightning_chunked(q, k, v, slope, S[:, :1])
    with pytest.raises(ValueError, match=r"chunk_size \(0\)"):
        lightning_chunked(q, k, v, slope, S, chunk_size=0)
    with pytest.raises(ValueError, match=r"slope must be 2 numbers >= 0"):
        LightningAttention(2, 16, 8, [0.1])
    attn = layer()
    x = torch.randn(1, 3, 16, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"LightningAttention has no attention weights"):
        attn(x, return_weights=True)
    with pytest.raises(TypeError, match=r"LightningAttention keeps no rolling cache"):
        attn.new_cache(1, 3, window=4)
