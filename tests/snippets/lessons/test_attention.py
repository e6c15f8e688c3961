"""The attention page's lesson code computes what the package's layers compute.

The lesson's classes are copies sized to the page (no checks, no cache, no position
scheme); each is proven equal to the package's layer here, weights copied, rather than
by a converter in the package.
"""

import pytest
import torch

from snippets.core import attention as library
from snippets.core.masks import causal_mask
from snippets.lessons import attention as lesson


def stacked_qkv(mha) -> torch.Tensor:
    """The per-head layers' weights as one (3C, C) qkv matrix: H heads' (D, C) query
    rows in head order, then the keys', then the values' (the rows .view(B, T, H, D)
    splits back into the same heads)."""
    return torch.cat(
        [h.query.weight for h in mha.heads]
        + [h.key.weight for h in mha.heads]
        + [h.value.weight for h in mha.heads]
    )


def test_sdpa_equals_the_package_s_and_torch_s():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 4, 6, 8).unbind(0)
    mask = causal_mask(6)
    out, weights = lesson.scaled_dot_product_attention(q, k, v, mask)
    ref_out, ref_weights = library.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)
    fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, fused, atol=1e-6, rtol=1e-5)


def test_head_and_multihead_equal_the_package_s():
    torch.manual_seed(0)
    mine = lesson.MultiHeadAttention(n_head=4, n_embed=32, context_length=8)
    theirs = library.MultiHeadAttention(n_head=4, n_embed=32, context_length=8)
    theirs.load_state_dict(mine.state_dict())  # same names, same shapes
    x = torch.randn(2, 8, 32)
    torch.testing.assert_close(mine(x), theirs(x))
    out, weights = mine.heads[1](x, return_weights=True)
    ref_out, ref_weights = theirs.heads[1](x, return_weights=True)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)


def test_the_same_seed_gives_the_package_s_initial_weights():
    """The attention page prints numbers from freshly seeded lesson layers; they are
    the package's numbers only if the layers draw their weights in the same order."""
    pairs = [
        (
            lambda: lesson.MultiHeadAttention(n_head=4, n_embed=32, context_length=8),
            lambda: library.MultiHeadAttention(n_head=4, n_embed=32, context_length=8),
        ),
        (
            lambda: lesson.CausalSelfAttention(n_head=4, n_embed=32),
            lambda: library.CausalSelfAttention(4, 32, 8),
        ),
    ]
    for make_mine, make_theirs in pairs:
        torch.manual_seed(0)
        mine = make_mine().state_dict()
        torch.manual_seed(0)
        theirs = make_theirs().state_dict()
        assert mine.keys() == theirs.keys()
        for name in mine:
            assert torch.equal(mine[name], theirs[name]), name


@pytest.mark.parametrize("T", [1, 5, 8])
def test_batched_equals_multihead_and_the_package_s_layer(T):
    torch.manual_seed(0)
    mha = lesson.MultiHeadAttention(n_head=4, n_embed=32, context_length=8)
    batched = lesson.CausalSelfAttention(n_head=4, n_embed=32)
    with torch.no_grad():
        batched.qkv.weight.copy_(stacked_qkv(mha))
        batched.proj.load_state_dict(mha.proj.state_dict())
    x = torch.randn(2, T, 32, requires_grad=True)
    torch.testing.assert_close(batched(x), mha(x), atol=1e-6, rtol=1e-5)
    # The package's layer (the GPT's default) has the same parameters, same names.
    package = library.CausalSelfAttention(4, 32, 8)
    package.load_state_dict(batched.state_dict())
    assert torch.equal(package(x), batched(x))
    # and the same gradients
    (g1,) = torch.autograd.grad(batched(x).square().sum(), x)
    (g2,) = torch.autograd.grad(package(x).square().sum(), x)
    assert torch.equal(g1, g2)
