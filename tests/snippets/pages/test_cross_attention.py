"""Tests for snippets/pages/cross_attention.py: queries from x, keys and values from a memory."""

import math
import re

import pytest
import torch
from torch.testing import assert_close

from snippets.pages.cross_attention import CrossAttention

B, T, S, C, H = 2, 3, 7, 16, 4  # T != S on purpose


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture
def cross() -> CrossAttention:
    torch.manual_seed(0)
    return CrossAttention(n_head=H, n_embed=C).eval()


def by_hand(cross: CrossAttention, x, memory, mask=None) -> torch.Tensor:
    """The same function, one batch row, one head and one query at a time."""
    D = C // H
    Wq, Wkv = cross.query.weight, cross.key_value.weight  # (C, C), (2C, C)
    Wk, Wv = Wkv[:C], Wkv[C:]
    out = torch.zeros(B, T, C)
    for b in range(B):
        for h in range(H):
            cols = slice(h * D, (h + 1) * D)
            for t in range(T):
                q = Wq[cols] @ x[b, t]  # (D,)
                scores = torch.stack([q @ (Wk[cols] @ memory[b, s]) for s in range(S)])
                scores = scores / math.sqrt(D)  # (S,)
                if mask is not None:
                    visible = mask.expand(B, T, S)[b, t]
                    scores = scores.masked_fill(~visible, float("-inf"))
                weights = torch.softmax(scores, dim=0)  # (S,)
                values = torch.stack([Wv[cols] @ memory[b, s] for s in range(S)])  # (S, D)
                out[b, t, cols] = weights @ values
    return cross.proj(out)


def test_equals_a_computation_by_hand(cross):
    x, memory = randn(B, T, C, seed=1), randn(B, S, C, seed=2)
    mask = randn(B, T, S, seed=3) > -0.5
    mask[..., 0] = True  # every query keeps a key
    with torch.no_grad():
        for m in (None, mask):
            expected = by_hand(cross, x, memory, m)
            assert_close(cross(x, memory, m), expected, atol=1e-5, rtol=1e-5)
            out, _ = cross(x, memory, m, return_weights=True)  # the written-out path
            assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_each_output_is_a_convex_combination_of_the_memory_values(cross):
    x, memory = randn(B, T, C, seed=4), randn(B, S, C, seed=5)
    with torch.no_grad():
        _, weights = cross(x, memory, return_weights=True)
    assert weights.shape == (B, H, T, S)
    assert (weights >= 0).all()
    assert_close(weights.sum(-1), torch.ones(B, H, T))
    # With every memory position the same vector, every weighted average is that value:
    # the output cannot depend on x at all.
    same = randn(1, 1, C, seed=6).expand(B, S, C)
    with torch.no_grad():
        outs = cross(randn(B, T, C, seed=7), same), cross(randn(B, T, C, seed=8), same)
    assert_close(outs[0], outs[1], atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "shape", [(T, S), (B, T, S), (B, 1, S), (1, T, S), (1, 1, S)], ids=lambda s: str(s)
)
def test_a_masked_key_gets_no_weight_and_no_say(cross, shape):
    mask = torch.ones(shape, dtype=torch.bool)
    mask[..., 4] = False  # memory position 4 hidden from every query
    x, memory = randn(B, T, C, seed=9), randn(B, S, C, seed=10)
    with torch.no_grad():
        out, weights = cross(x, memory, mask, return_weights=True)
        assert (weights[..., 4] == 0).all()
        changed = memory.clone()
        changed[:, 4] = 1000.0
        assert torch.equal(cross(x, changed, mask), cross(x, memory, mask))
        assert not torch.equal(cross(x, changed), cross(x, memory))  # unmasked: it matters


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (((T, C), (B, S, C)), ValueError, "x must have shape (B, length, C), got shape (3, 16)"),
        (((B, T, C), (B, S, 8)), ValueError, "last dimension of memory (8) must equal n_embed"),
        (((B, T, C), (3, S, C)), ValueError, "same batch size, got 2 and 3"),
    ],
)
def test_shape_errors_name_the_argument(cross, args, error, message):
    x_shape, memory_shape = args
    with pytest.raises(error, match=re.escape(message)):
        cross(torch.zeros(x_shape), torch.zeros(memory_shape))


def test_mask_errors(cross):
    x, memory = torch.zeros(B, T, C), torch.zeros(B, S, C)
    with pytest.raises(ValueError, match=re.escape("mask of shape (2, 3, 6) does not broadcast")):
        cross(x, memory, torch.ones(B, T, S - 1, dtype=torch.bool))
    with pytest.raises(TypeError, match="mask must be a bool tensor"):
        cross(x, memory, torch.ones(B, T, S))
    hidden = torch.ones(B, T, S, dtype=torch.bool)
    hidden[1, 2] = False  # query 2 of row 1 sees nothing: softmax would give NaN
    with pytest.raises(ValueError, match="hides every key from some query"):
        cross(x, memory, hidden)


def test_constructor_errors():
    with pytest.raises(ValueError, match=re.escape("n_embed (10) must be divisible by n_head (4)")):
        CrossAttention(4, 10)
    with pytest.raises(ValueError, match=re.escape("n_head (0) must be a positive int")):
        CrossAttention(0, 8)
