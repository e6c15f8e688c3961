"""Tests for snippets/positional_attention.py: the readable per-head layers with RoPE and
ALiBi inside, equal to the batched layer, and the attention page's Head left plain."""

import inspect
import re

import pytest
import torch
from torch.testing import assert_close

from snippets.attention import CausalSelfAttention, Head, MultiHeadAttention
from snippets.positional_attention import PositionalHead, PositionalMultiHeadAttention
from snippets.positions import POSITIONS

B, C, H, CONTEXT = 2, 32, 4, 16


def randn(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# 3 * CONTEXT: past the training length, for the schemes without a table.
CASES = [(p, CONTEXT) for p in POSITIONS] + [(p, 3 * CONTEXT) for p in POSITIONS if p != "learned"]


@pytest.mark.parametrize(("position", "T"), CASES)
def test_batched_matches_per_head_for_every_position_scheme(position, T):
    max_length = None if position == "learned" else 3 * CONTEXT
    torch.manual_seed(0)
    mha = PositionalMultiHeadAttention(H, C, CONTEXT, position=position, max_length=max_length)
    batched = CausalSelfAttention.from_multihead(mha)
    assert (batched.position, batched.max_length) == (position, max_length)
    x = randn(B, T, C)
    out_mha, weights_mha = mha(x, return_weights=True)
    assert_close(batched(x), out_mha, atol=1e-5, rtol=1e-5)
    out_b, weights_b = batched(x, return_weights=True)
    assert_close(out_b, out_mha, atol=1e-5, rtol=1e-5)
    assert_close(weights_b, weights_mha, atol=1e-5, rtol=1e-5)
    assert torch.equal(weights_b.triu(1), torch.zeros_like(weights_b))  # still causal


def test_without_a_scheme_inside_attention_it_is_the_plain_layer():
    # Same seed, same weights in the same order, same numbers: make_head keeps the
    # plain layer's order of initialisation.
    torch.manual_seed(0)
    plain = MultiHeadAttention(H, C, CONTEXT)
    torch.manual_seed(0)
    positional = PositionalMultiHeadAttention(H, C, CONTEXT, position="learned")
    x = randn(B, CONTEXT, C)
    assert all(isinstance(h, PositionalHead) for h in positional.heads)
    assert torch.equal(positional(x), plain(x))


def test_alibi_heads_get_the_slopes_in_order():
    mha = PositionalMultiHeadAttention(8, C, CONTEXT, position="alibi")
    assert [h.alibi_slope for h in mha.heads] == [2.0**-k for k in range(1, 9)]


def test_the_readable_head_knows_no_position_scheme():
    # The attention page's Head is the seed's: about 30 lines of code, no branches.
    source = inspect.getsource(Head)
    code = [line for line in source.splitlines() if line.strip() and '"""' not in line]
    assert not re.search(r"\bposition\b|alibi|rope|max_length", source)
    assert len(code) <= 40, len(code)
    assert list(inspect.signature(Head).parameters) == ["head_size", "n_embed", "context_length"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: PositionalMultiHeadAttention(4, 16, 8, position="learned", max_length=9),
            "max_length (9) > context_length (8) needs a position scheme without a table",
        ),
        (
            lambda: PositionalHead(4, 16, 8, position="alibi"),
            "alibi_slope (None) must be given for position='alibi'",
        ),
        (
            lambda: PositionalMultiHeadAttention(4, 12, 8, position="rope"),
            "position='rope' needs an even head size, got D=3",
        ),
        (
            lambda: PositionalMultiHeadAttention(5, 32, 8),
            "n_embed (32) must be divisible by n_head (5)",
        ),
    ],
)
def test_bad_settings_are_named(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def test_longer_than_max_length_is_refused():
    mha = PositionalMultiHeadAttention(H, C, CONTEXT, position="rope", max_length=2 * CONTEXT)
    with pytest.raises(ValueError, match=re.escape("T=33 exceeds max_length=32")):
        mha(randn(1, 2 * CONTEXT + 1, C))
