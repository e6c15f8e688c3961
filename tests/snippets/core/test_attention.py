"""Tests for snippets/core/attention.py: the claims the attention page makes, measured."""

import re

import pytest
import torch
from torch.testing import assert_close

from snippets.core.attention import (
    CausalSelfAttention,
    Head,
    MultiHeadAttention,
    causal_mask,
    scaled_dot_product_attention,
)

# Small sizes: the whole file runs in a few seconds on 2 CPU cores.
B, T, C, H, CONTEXT = 2, 8, 32, 4, 16
D = C // H

IMPLEMENTATIONS = ["head", "multihead", "batched", "batched_from_multihead"]


def make(kind: str) -> torch.nn.Module:
    """A module of the given kind, built from a fixed seed."""
    torch.manual_seed(0)
    if kind == "head":
        return Head(C, C, CONTEXT)  # head_size == n_embed: a single head of full width
    if kind == "multihead":
        return MultiHeadAttention(H, C, CONTEXT)
    if kind == "batched":
        return CausalSelfAttention(H, C, CONTEXT)
    if kind == "batched_from_multihead":
        return CausalSelfAttention.from_multihead(MultiHeadAttention(H, C, CONTEXT))
    raise AssertionError(kind)


@pytest.fixture(params=IMPLEMENTATIONS)
def module(request) -> torch.nn.Module:
    return make(request.param)


def randn(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- scaled_dot_product_attention -------------------------------------------------------


def test_sdpa_matches_torch_causal():
    q, k, v = randn(B, H, T, D, seed=1), randn(B, H, T, D, seed=2), randn(B, H, T, D, seed=3)
    out, _ = scaled_dot_product_attention(q, k, v, causal_mask(T))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(out, expected)


def test_sdpa_matches_torch_without_mask():
    q, k, v = randn(B, H, T, D, seed=1), randn(B, H, T, D, seed=2), randn(B, H, T, D, seed=3)
    out, _ = scaled_dot_product_attention(q, k, v)
    assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("D_", [16, 64, 256])
def test_dot_product_variance_grows_like_D_and_scaling_restores_1(D_):
    # The claim behind 1/sqrt(D): q.k sums D products of unit-variance terms, so its
    # variance is D; dividing by sqrt(D) brings it back to 1.
    n = 20_000
    q, k = randn(n, D_, seed=10), randn(n, D_, seed=11)
    dots = (q * k).sum(dim=-1)  # (n,)
    assert 0.8 < dots.var().item() / D_ < 1.2
    assert 0.8 < (dots / D_**0.5).var().item() < 1.2


@pytest.mark.parametrize("D_", [16, 64, 256])
def test_sdpa_scores_have_unit_variance(D_):
    # The same claim, measured on our function: with two keys,
    # log(w0 / w1) = s0 - s1, whose variance is 2 if each score has variance 1.
    n = 20_000
    q = randn(n, 1, D_, seed=20).double()
    k = randn(n, 2, D_, seed=21).double()
    _, weights = scaled_dot_product_attention(q, k, k)  # (n, 1, 2)
    score_diff = weights[:, 0, 0].log() - weights[:, 0, 1].log()  # (n,)
    assert 0.8 < score_diff.var().item() / 2 < 1.2


def test_sdpa_without_positions_is_permutation_equivariant():
    # Attention alone has no notion of order: shuffling the tokens shuffles the outputs.
    x = randn(T, C, seed=4)
    wq, wk, wv = randn(C, D, seed=5), randn(C, D, seed=6), randn(C, D, seed=7)
    perm = torch.arange(T - 1, -1, -1)  # reverse the sequence

    def attend(tokens, mask=None):
        return scaled_dot_product_attention(tokens @ wq, tokens @ wk, tokens @ wv, mask)[0]

    assert_close(attend(x[perm]), attend(x)[perm])
    # The causal mask is what breaks the symmetry: order now matters.
    mask = causal_mask(T)
    assert (attend(x[perm], mask) - attend(x, mask)[perm]).abs().max() > 1e-3


def test_sdpa_rejects_non_bool_mask():
    q = randn(1, T, D)
    with pytest.raises(TypeError, match=re.escape("mask must be a bool tensor")):
        scaled_dot_product_attention(q, q, q, causal_mask(T).float())


def test_sdpa_rejects_a_mask_that_does_not_fit_the_scores():
    q, k = randn(2, H, T, D), randn(2, H, T + 1, D)
    scaled_dot_product_attention(q, k, k, torch.ones(T, T + 1, dtype=torch.bool))
    for bad in ((T, T), (3, 1, T, T + 1)):
        with pytest.raises(
            ValueError,
            match=re.escape(f"mask {bad} must broadcast to the scores (..., T_q, T_k) = "),
        ):
            scaled_dot_product_attention(q, k, k, torch.ones(bad, dtype=torch.bool))


@pytest.mark.parametrize(
    "shapes, message",
    [
        (
            ((2, T, D), (2, T, D // 2), (2, T, D)),
            f"q and k must have the same last dimension (D), got q (2, {T}, {D}) "
            f"and k (2, {T}, {D // 2})",
        ),
        (
            ((2, T, D), (2, T, D), (2, T - 1, D)),
            f"k and v must have the same length (dimension -2), got k (2, {T}, {D}) "
            f"and v (2, {T - 1}, {D})",
        ),
        (
            ((2, T, D), (3, T, D), (3, T, D)),
            f"the leading dimensions of q (2, {T}, {D}), k (3, {T}, {D}) and "
            f"v (3, {T}, {D}) must be broadcastable",
        ),
        (
            (((D,)), (T, D), (T, D)),
            f"q must have at least 2 dimensions (..., T, D), got shape ({D},)",
        ),
    ],
)
def test_sdpa_rejects_mismatched_shapes_naming_both(shapes, message):
    # Without the check these fail inside a matmul with a RuntimeError naming neither tensor.
    q, k, v = (randn(*shape) for shape in shapes)
    with pytest.raises(ValueError, match=re.escape(message)):
        scaled_dot_product_attention(q, k, v)


def test_sdpa_accepts_other_query_lengths_and_broadcast_leading_dims():
    # Cross-attention shapes stay legal: 3 queries on 5 keys, values 6 wide, heads broadcast.
    q, k, v = randn(2, 4, 3, D), randn(1, 4, 5, D), randn(2, 1, 5, 6)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 4, 3, 6) and weights.shape == (2, 4, 3, 5)


# --- the modules: causality and weights -------------------------------------------------


def test_causality_future_tokens_do_not_change_past_outputs(module):
    x = randn(B, T, C, seed=1)
    out = module(x)
    for t in range(T - 1):
        x_changed = x.clone()
        x_changed[:, t + 1 :] = randn(B, T - t - 1, C, seed=100 + t)
        out_changed = module(x_changed)
        assert_close(out_changed[:, : t + 1], out[:, : t + 1], atol=1e-6, rtol=0)
        # Not vacuous: the changed positions do change the outputs there.
        assert (out_changed[:, t + 1 :] - out[:, t + 1 :]).abs().max() > 1e-3


def test_weights_zero_above_diagonal_and_rows_sum_to_one(module):
    _, weights = module(randn(B, T, C), return_weights=True)
    expected_shape = (B, T, T) if isinstance(module, Head) else (B, H, T, T)
    assert weights.shape == expected_shape
    above_diagonal = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    assert (weights[..., above_diagonal] == 0.0).all()
    assert_close(weights.sum(dim=-1), torch.ones(weights.shape[:-1]), atol=1e-6, rtol=0)


def test_return_weights_does_not_change_output(module):
    # For CausalSelfAttention this compares the explicit path with the fused kernel.
    x = randn(B, T, C)
    out_with_weights, _ = module(x, return_weights=True)
    assert_close(out_with_weights, module(x), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("T_", [1, T, CONTEXT])
def test_output_shape(module, T_):
    # The Head under test has head_size == n_embed, so every kind maps (B, T, C) -> (B, T, C).
    out = module(randn(B, T_, C))
    assert out.shape == (B, T_, C)


def test_multihead_concatenates_back_to_n_embed():
    mha = make("multihead")
    x = randn(B, T, C)
    concatenated = torch.cat([h(x) for h in mha.heads], dim=-1)
    assert len(mha.heads) == H
    assert concatenated.shape == (B, T, C)
    assert mha(x).shape == (B, T, C)


def test_head_matches_torch_sdpa():
    head = make("head")
    x = randn(B, T, C)
    q, k, v = head.query(x), head.key(x), head.value(x)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(head(x), expected, atol=1e-6, rtol=1e-5)


# --- readable and batched paths agree ---------------------------------------------------


def test_batched_matches_multihead_outputs_weights_and_gradients():
    mha = make("multihead")
    batched = CausalSelfAttention.from_multihead(mha)
    x_mha = randn(B, T, C).requires_grad_()
    x_batched = x_mha.detach().clone().requires_grad_()
    projection = randn(B, T, C, seed=2)  # a random direction, so every output element counts

    out_mha, weights_mha = mha(x_mha, return_weights=True)
    out_batched = batched(x_batched)
    assert_close(out_batched, out_mha, atol=1e-5, rtol=1e-5)
    assert_close(batched(x_batched, return_weights=True)[1], weights_mha, atol=1e-5, rtol=1e-5)

    (out_mha * projection).sum().backward()
    (out_batched * projection).sum().backward()
    assert_close(x_batched.grad, x_mha.grad, atol=1e-5, rtol=1e-5)
    # The fused weight's gradient is the per-head gradients stacked the same way.
    heads = mha.heads
    expected_qkv_grad = torch.cat(
        [h.query.weight.grad for h in heads]
        + [h.key.weight.grad for h in heads]
        + [h.value.weight.grad for h in heads]
    )
    assert_close(batched.qkv.weight.grad, expected_qkv_grad, atol=1e-5, rtol=1e-5)
    assert_close(batched.proj.weight.grad, mha.proj.weight.grad, atol=1e-5, rtol=1e-5)


def test_from_multihead_keeps_dtype():
    mha = make("multihead").double()
    batched = CausalSelfAttention.from_multihead(mha)
    x = randn(B, T, C).double()
    assert batched.qkv.weight.dtype == torch.float64
    assert_close(batched(x), mha(x))


@pytest.mark.parametrize("return_weights", [False, True])
def test_gradients_reach_every_parameter(module, return_weights):
    x = randn(B, T, C)
    out = module(x, return_weights=True)[0] if return_weights else module(x)
    (out * randn(B, T, C, seed=2)).sum().backward()
    for name, parameter in module.named_parameters():
        assert parameter.grad is not None, name
        assert parameter.grad.abs().sum() > 0, name


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [MultiHeadAttention, CausalSelfAttention])
def test_n_embed_not_divisible_by_n_head(cls):
    with pytest.raises(ValueError, match=re.escape("n_embed (32) must be divisible by n_head (5)")):
        cls(5, 32, CONTEXT)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Head(0, C, CONTEXT), "head_size (0) must be positive"),
        (lambda: Head(D, -1, CONTEXT), "n_embed (-1) must be positive"),
        (lambda: MultiHeadAttention(0, C, CONTEXT), "n_head (0) must be positive"),
        (lambda: CausalSelfAttention(H, C, 0), "context_length (0) must be positive"),
        (lambda: causal_mask(0), "T (0) must be positive"),
    ],
)
def test_non_positive_sizes(build, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build()


def test_non_int_sizes():
    with pytest.raises(TypeError, match=re.escape("T (2.0) must be an int, got float")):
        causal_mask(2.0)
    with pytest.raises(TypeError, match=re.escape("n_head (True) must be an int, got bool")):
        MultiHeadAttention(True, C, CONTEXT)


def test_from_multihead_rejects_other_modules():
    with pytest.raises(TypeError, match=re.escape("mha must be a MultiHeadAttention, got Head")):
        CausalSelfAttention.from_multihead(make("head"))


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (
            randn(8, C),
            f"expected input of shape (B, T, C) with 3 dimensions, "
            f"got 2 dimensions with shape (8, {C})",
        ),
        (randn(B, T, 16), f"last dimension of input (16) must equal n_embed ({C})"),
        (randn(B, CONTEXT + 4, C), f"T={CONTEXT + 4} exceeds context_length={CONTEXT}"),
    ],
    ids=["2-D input", "wrong last dim", "T too long"],
)
@pytest.mark.parametrize("return_weights", [False, True])
def test_bad_input(module, x, message, return_weights):
    with pytest.raises(ValueError, match=re.escape(message)):
        module(x, return_weights=return_weights)
