"""Tests for snippets/core/masks.py: causal, padding, sliding-window, prefix-LM, document and
bidirectional masks and their FlexAttention twins, run uncompiled. The compiled kernel
(lab.masks.flex_forward) and `python -m lab.masks` are tested in tests/lab/test_masks.py."""

import functools
import re

import pytest
import torch
from torch.nn.attention.flex_attention import create_mask
from torch.testing import assert_close

from lab.masks import block_mask_for
from snippets.core.masks import (
    attention_mask,
    bidirectional_mask,
    bidirectional_mask_mod,
    causal_mask,
    causal_mask_mod,
    document_mask,
    document_mask_mod,
    padding_mask,
    prefix_lm_mask,
    prefix_lm_mask_mod,
    sliding_window_mask,
    sliding_window_mask_mod,
)
from snippets.pages.attention_cost import eager_flex_attention as eager_flex


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


# --- masks beyond causal, and their FlexAttention twins --------------------------------------


def rows(*lines: str) -> torch.Tensor:
    """A mask written as strings of 0s and 1s, one per query row."""
    return torch.tensor([[c == "1" for c in line] for line in lines])


def test_sliding_window_mask_is_a_band_ending_on_the_diagonal():
    expected = rows("100000", "110000", "111000", "011100", "001110", "000111")
    assert torch.equal(sliding_window_mask(6, 3), expected)
    assert torch.equal(sliding_window_mask(6, 1), torch.eye(6, dtype=torch.bool))
    # A window as long as the sequence (or longer) is just the causal mask.
    assert torch.equal(sliding_window_mask(6, 6), causal_mask(6))
    assert torch.equal(sliding_window_mask(6, 100), causal_mask(6))


def test_prefix_lm_mask_is_bidirectional_over_the_prefix_then_causal():
    expected = rows("11000", "11000", "11100", "11110", "11111")
    assert torch.equal(prefix_lm_mask(5, 2), expected)
    assert torch.equal(prefix_lm_mask(5, 0), causal_mask(5))
    assert torch.equal(prefix_lm_mask(5, 1), causal_mask(5))  # one token: nothing to add
    assert torch.equal(prefix_lm_mask(5, 5), bidirectional_mask(5))


def test_document_mask_is_causal_within_each_document_only():
    ids = torch.tensor([[0, 0, 1, 1, 1], [4, 4, 4, 4, 4]])
    mask = document_mask(ids)
    assert mask.shape == (2, 5, 5) and mask.dtype == torch.bool
    assert torch.equal(mask[0], rows("10000", "11000", "00100", "00110", "00111"))
    assert torch.equal(mask[1], causal_mask(5))  # one document: causal


def test_bidirectional_mask_hides_nothing():
    assert torch.equal(bidirectional_mask(4), torch.ones(4, 4, dtype=torch.bool))


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: sliding_window_mask(8, 0), ValueError, "window (0) must be at least 1"),
        (lambda: sliding_window_mask(8, -3), ValueError, "window (-3) must be at least 1"),
        (lambda: sliding_window_mask(8, 2.0), TypeError, "window (2.0) must be an int"),
        (lambda: sliding_window_mask_mod(0), ValueError, "window (0) must be at least 1"),
        (lambda: prefix_lm_mask(5, 6), ValueError, "prefix_length (6) must be at most T (5)"),
        (lambda: prefix_lm_mask(5, -1), ValueError, "prefix_length (-1) must be at least 0"),
        (lambda: prefix_lm_mask_mod(-1), ValueError, "prefix_length (-1) must be at least 0"),
        (lambda: bidirectional_mask(0), ValueError, "T (0) must be at least 1"),
        (lambda: document_mask(torch.zeros(5, dtype=torch.long)), ValueError, "shape (B, T)"),
        (lambda: document_mask(torch.zeros(1, 2, 5).long()), ValueError, "got shape (1, 2, 5)"),
        (lambda: document_mask(torch.zeros(2, 5)), TypeError, "got torch.float32"),
        (lambda: document_mask(torch.zeros(2, 5).bool()), TypeError, "got torch.bool"),
        (lambda: document_mask([[0, 1]]), TypeError, "must be a torch.Tensor, got list"),
        (lambda: document_mask_mod(torch.zeros(5).long()), ValueError, "shape (B, T)"),
    ],
)
def test_masks_reject_bad_arguments(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


# Each mask_mod, evaluated by torch at every (query, key) pair, gives its dense mask exactly.
# T = 200 is not a multiple of FlexAttention's 128-blocks: the last block is partial.
IDS = torch.tensor([[0] * 50 + [1] * 90 + [2] * 60, [7] * 120 + [3] * 80])
TWINS = {
    "causal": (causal_mask_mod, causal_mask(200)),
    "bidirectional": (bidirectional_mask_mod, bidirectional_mask(200)),
    "window 1": (sliding_window_mask_mod(1), sliding_window_mask(200, 1)),
    "window 64": (sliding_window_mask_mod(64), sliding_window_mask(200, 64)),
    "window 300": (sliding_window_mask_mod(300), sliding_window_mask(200, 300)),
    "prefix 0": (prefix_lm_mask_mod(0), prefix_lm_mask(200, 0)),
    "prefix 70": (prefix_lm_mask_mod(70), prefix_lm_mask(200, 70)),
    "prefix 200": (prefix_lm_mask_mod(200), prefix_lm_mask(200, 200)),
    "documents": (document_mask_mod(IDS), document_mask(IDS)),
}


@pytest.mark.parametrize("name", TWINS)
def test_mask_mod_twin_gives_the_dense_mask(name):
    mask_mod, dense = TWINS[name]
    B = IDS.size(0) if dense.dim() == 3 else None
    from_mod = create_mask(mask_mod, B, None, 200, 200)  # (B or 1, 1, T, T)
    assert torch.equal(from_mod[:, 0], dense.expand_as(from_mod[:, 0]))


# --- one attention layer, through SDPA with the dense mask or FlexAttention ------------------

C, H = 128, 4  # D = 32


@functools.cache
def _qkv_weight() -> torch.Tensor:
    return torch.randn(3 * C, C, generator=torch.Generator().manual_seed(0)) / C**0.5


def attend(x: torch.Tensor, mask=None, block_mask=None) -> torch.Tensor:
    """One attention layer without positions: x (B, T, C) -> (B, T, C).

    With `mask` it runs SDPA with that dense mask; with `block_mask`, FlexAttention
    uncompiled (it computes every score, then applies the block mask's mask_mod).
    """
    B, T, _ = x.shape
    q, k, v = (x @ _qkv_weight().T).split(C, dim=-1)  # 3 x (B, T, C)
    q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
    if block_mask is None:
        mask = mask if mask is None or mask.dim() == 2 else mask[:, None]  # heads share it
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    else:
        y = eager_flex(q, k, v, block_mask)
    return y.transpose(1, 2).reshape(B, T, C)


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def window_outputs_move(run, T: int, window: int, t: int) -> tuple[bool, bool]:
    """Does the output at t change when token t - window (just outside the window)
    changes, and when token t - window + 1 (the oldest one inside) changes?"""
    x = randn(1, T, C, seed=1)
    base = run(x)[0, t]
    moved = []
    for s in (t - window, t - window + 1):
        x2 = x.clone()
        x2[0, s] += 5.0
        moved.append(not torch.equal(run(x2)[0, t], base))
    return moved[0], moved[1]


@pytest.mark.parametrize("window", [1, 3, 8])
def test_sliding_window_sdpa_sees_exactly_the_last_window_tokens(window):
    T = 16
    mask = sliding_window_mask(T, window)
    for t in range(window, T):
        outside, inside = window_outputs_move(lambda x: attend(x, mask), T, window, t)
        assert not outside, f"t={t}: the output moved when token t-window={t - window} did"
        assert inside, f"t={t}: the output ignored token t-window+1={t - window + 1}"


# One case per kind of mask: each mask_mod traces anew even uncompiled (about a second each),
# and the twin test above already covers every parameter value exactly.
@pytest.mark.parametrize("name", ["causal", "bidirectional", "window 64", "prefix 70", "documents"])
def test_flex_attention_equals_sdpa_with_the_dense_mask(name):
    mask_mod, dense = TWINS[name]
    x = randn(IDS.size(0), 200, C, seed=2)
    B = IDS.size(0) if dense.dim() == 3 else None
    block_mask = block_mask_for(mask_mod, 200, B=B)
    assert_close(attend(x, block_mask=block_mask), attend(x, dense), atol=1e-5, rtol=0)


def packed(lengths: list[int]) -> torch.Tensor:
    """(1, T) document ids for documents of these lengths packed in one row."""
    return torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])[None]


@pytest.mark.parametrize("path", ["sdpa", "flex"])
def test_packed_documents_get_exactly_the_outputs_they_get_alone(path):
    lengths = [5, 11, 1, 7]
    ids = packed(lengths)  # (1, 24)
    x = randn(1, sum(lengths), C, seed=3)
    if path == "sdpa":
        out = attend(x, document_mask(ids))
    else:
        out = attend(x, block_mask=block_mask_for(document_mask_mod(ids), ids.size(1), B=1))
    start = 0
    for n in lengths:
        alone = attend(x[:, start : start + n], causal_mask(n))
        assert_close(out[:, start : start + n], alone, atol=1e-6, rtol=0)
        start += n
    # Without the document mask (causal only), later documents read earlier ones.
    leaky = attend(x, causal_mask(ids.size(1)))
    assert not torch.allclose(leaky[:, 5:16], attend(x[:, 5:16], causal_mask(11)))


def test_prefix_lm_prefix_sees_both_ways_and_the_rest_is_causal():
    T, P = 10, 4
    mask = prefix_lm_mask(T, P)
    x = randn(1, T, C, seed=4)
    base = attend(x, mask)[0]
    for s in range(T):
        x2 = x.clone()
        x2[0, s] += 5.0
        moved = (attend(x2, mask)[0] != base).any(dim=-1)  # (T,): which outputs moved
        if s < P:
            # A prefix token reaches every prefix position, earlier ones too, and all later.
            assert moved.all(), f"changing prefix token {s} left {(~moved).nonzero().ravel()}"
        else:
            # After the prefix: causal, exactly positions s..T-1 move.
            assert moved.tolist() == [t >= s for t in range(T)], f"token {s}: {moved.tolist()}"
