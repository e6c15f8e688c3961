"""Tests for snippets/masks.py: the causal, padding and combined attention masks."""

import re

import pytest
import torch

from snippets.masks import attention_mask, causal_mask, padding_mask


def test_causal_mask_is_lower_triangular_bool():
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [1, 1, 1, 0, 0],
            [1, 1, 1, 1, 0],
            [1, 1, 1, 1, 1],
        ],
        dtype=torch.bool,
    )
    mask = causal_mask(5)
    assert mask.dtype == torch.bool
    assert torch.equal(mask, expected)


def test_causal_mask_rejects_bad_sizes():
    with pytest.raises(ValueError, match=re.escape("T (0) must be positive")):
        causal_mask(0)
    with pytest.raises(TypeError, match=re.escape("T (2.0) must be an int, got float")):
        causal_mask(2.0)
    with pytest.raises(TypeError, match=re.escape("T (True) must be an int, got bool")):
        causal_mask(True)


def test_padding_mask_left_padding():
    mask = padding_mask(torch.tensor([5, 3, 1]), 5)
    assert mask.shape == (3, 1, 5) and mask.dtype == torch.bool
    assert mask[:, 0].int().tolist() == [[1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 0, 1]]


@pytest.mark.parametrize("lengths", [[0], [6], [[2, 3]]])
def test_padding_mask_rejects_bad_lengths(lengths):
    with pytest.raises(ValueError, match="lengths must be 1-D, each in"):
        padding_mask(torch.tensor(lengths), 5)


def test_attention_mask_combines_causal_padding_and_diagonal():
    T = 6
    lengths = torch.tensor([6, 4, 1])
    mask = attention_mask(lengths, T)
    assert mask.shape == (3, T, T)
    assert torch.equal(mask[0], causal_mask(T))  # no padding: just causal
    for b, n in enumerate(lengths.tolist()):
        real = T - n  # the first real position
        assert torch.equal(mask[b, real:, real:], causal_mask(n))  # real sees real
        assert not mask[b, real:, :real].any()  # ...and never the padding
        assert torch.equal(mask[b, :real, :real], torch.eye(real, dtype=torch.bool))
    assert mask.any(dim=-1).all()  # every query keeps a key: no row of -inf
