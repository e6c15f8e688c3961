"""Tests for snippets/core/checks.py: each check refuses what breaks its rule with a message that
names the argument, its value or shape and the rule, and lets every good input through."""

import re

import pytest
import torch

from snippets.core.checks import (
    check_config,
    check_input,
    check_positive_int,
    check_qkv,
    check_shape,
)


def raises(error, message):
    return pytest.raises(error, match=re.escape(message))


def test_positive_int():
    for good in (1, 7):
        check_positive_int("n", good)
    with raises(ValueError, "n (0) must be positive"):
        check_positive_int("n", 0)
    with raises(ValueError, "n (-2) must be positive"):
        check_positive_int("n", -2)
    with raises(TypeError, "n (2.0) must be an int, got float"):
        check_positive_int("n", 2.0)
    with raises(TypeError, "n (True) must be an int, got bool"):
        check_positive_int("n", True)


def test_config():
    check_config(4, 32, 8)
    with raises(ValueError, "n_embed (30) must be divisible by n_head (4)"):
        check_config(4, 30, 8)
    with raises(ValueError, "context_length (0) must be positive"):
        check_config(4, 32, 0)


def test_input():
    check_input(torch.zeros(2, 8, 16), 16, 8)
    check_input(torch.zeros(2, 12, 16), 16, 8, max_length=12)
    with raises(TypeError, "x must be a torch.Tensor, got list"):
        check_input([[0.0]], 16, 8)
    with raises(ValueError, "got 2 dimensions with shape (8, 16)"):
        check_input(torch.zeros(8, 16), 16, 8)
    with raises(ValueError, "last dimension of input (12) must equal n_embed (16)"):
        check_input(torch.zeros(2, 8, 12), 16, 8)
    with raises(ValueError, "T=9 exceeds context_length=8"):
        check_input(torch.zeros(2, 9, 16), 16, 8)
    with raises(ValueError, "T=13 exceeds max_length=12 (context_length=8)"):
        check_input(torch.zeros(2, 13, 16), 16, 8, max_length=12)


def test_qkv_and_its_mask():
    q, k, v = torch.zeros(2, 4, 5, 8), torch.zeros(2, 4, 6, 8), torch.zeros(2, 4, 6, 3)
    check_qkv(q, k, v)
    for good in ((5, 6), (1, 6), (2, 1, 5, 6), (2, 4, 5, 1)):  # broadcast to (2, 4, 5, 6)
        check_qkv(q, k, v, torch.ones(good, dtype=torch.bool))
    with raises(ValueError, "q and k must have the same last dimension (D)"):
        check_qkv(q, k[..., :4], v)
    with raises(ValueError, "k and v must have the same length (dimension -2)"):
        check_qkv(q, k, v[..., :5, :])
    with raises(TypeError, "mask must be a bool tensor (True = may attend), got torch.float32"):
        check_qkv(q, k, v, torch.ones(5, 6))
    for bad in ((5, 5), (6, 5), (3, 5, 6), (1, 2, 4, 5, 6)):
        with raises(ValueError, f"mask {bad} must broadcast to the scores (..., T_q, T_k) = "):
            check_qkv(q, k, v, torch.ones(bad, dtype=torch.bool))
    with raises(ValueError, "= (2, 4, 5, 6)"):
        check_qkv(q, k, v, torch.ones(5, 5, dtype=torch.bool))


def test_shape():
    assert check_shape("x", torch.zeros(2, 3, 4), "B T C") == (2, 3, 4)
    assert check_shape("x", torch.zeros(2, 3, 4), "B T C", C=4) == (2, 3, 4)
    assert check_shape("s", torch.zeros(2, 3, 3), "B T T") == (2, 3, 3)
    with raises(TypeError, "x must be a torch.Tensor, got tuple"):
        check_shape("x", (2, 3), "B T C")
    with raises(ValueError, "x must be (B, T, C), got shape (3, 4)"):
        check_shape("x", torch.zeros(3, 4), "B T C")
    with raises(ValueError, "x must be (B, T, C) with C=5, got shape (2, 3, 4)"):
        check_shape("x", torch.zeros(2, 3, 4), "B T C", C=5)
    with raises(ValueError, "scores must be (B, T, T), got shape (2, 3, 4)"):
        check_shape("scores", torch.zeros(2, 3, 4), "B T T")
    with raises(ValueError, "k must be (B, T) with B=2, T=3, got shape (2, 4)"):
        check_shape("k", torch.zeros(2, 4), "B T", B=2, T=3)
