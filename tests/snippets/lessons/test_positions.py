"""The positions page's lesson computes what the package's position code computes.

Each lesson function equals snippets.core.positions' on the same inputs; the lesson's
batched layer, the attention page's with RoPE and ALiBi added, equals the package's
CausalSelfAttention(position=...) with the same weights for every scheme, and
without RoPE or ALiBi it is the attention page's layer. The page shows the layer as
a change: its highlighted lines are exactly the lines that differ from the
attention lesson's.
"""

from pathlib import Path

import pytest
import torch

from snippets.core import attention as library
from snippets.core import positions as package
from snippets.lessons import attention
from snippets.lessons import positions as lesson
from tests.snippets.lessons.highlight import assert_highlights_are_the_changes

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("T, C", [(1, 2), (7, 16), (600, 64)])
def test_sinusoidal_table_equals_the_package_s(T, C):
    assert torch.equal(lesson.sinusoidal_positions(T, C), package.sinusoidal_positions(T, C))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("offset", [0, 3, 1000])
def test_rope_equals_the_package_s(dtype, offset):
    for D in (2, 8, 32):
        assert torch.equal(lesson.rope_frequencies(D), package.rope_frequencies(D))
    assert torch.equal(lesson.rope_frequencies(8, 500.0), package.rope_frequencies(8, 500.0))
    x = torch.randn(2, 3, 9, 16, generator=torch.Generator().manual_seed(0))
    x = x.to(dtype)  # (B, H, T, D), as the layer turns them
    mine, theirs = lesson.apply_rope(x, offset), package.apply_rope(x, offset)
    assert mine.dtype == dtype
    assert torch.equal(mine, theirs)
    assert not torch.allclose(mine[..., 1:, :], x[..., 1:, :])  # it turned them


def test_alibi_equals_the_package_s():
    for H in range(1, 17):  # powers of two and the heads between them
        torch.testing.assert_close(lesson.alibi_slopes(H), package.alibi_slopes(H), rtol=0, atol=0)
        for T in (1, 6):
            torch.testing.assert_close(
                lesson.alibi_bias(H, T), package.alibi_bias(H, T), rtol=0, atol=0
            )


def layers(position, n_head=4, n_embed=32, context_length=16):
    """The lesson layer with the scheme, its weights drawn with std 0.3 (so that
    scores, and so the positions, matter), and the package's with the same."""
    torch.manual_seed(0)
    mine = lesson.CausalSelfAttention(n_head, n_embed, position=position)
    with torch.no_grad():
        for p in mine.parameters():
            p.normal_(0.0, 0.3)
    theirs = library.CausalSelfAttention(n_head, n_embed, context_length, position=position)
    theirs.load_state_dict(mine.state_dict())  # same names, same shapes
    return mine, theirs


@pytest.mark.parametrize("position", package.POSITIONS)
@pytest.mark.parametrize("T", [1, 7, 16])
def test_the_layer_equals_the_package_s_for_every_scheme(position, T):
    mine, theirs = layers(position)
    x = torch.randn(2, T, 32, requires_grad=True)
    out = mine(x)
    assert torch.equal(out, theirs(x))
    (g1,) = torch.autograd.grad(out.square().sum(), x)
    (g2,) = torch.autograd.grad(theirs(x).square().sum(), x)
    assert torch.equal(g1, g2)


@pytest.mark.parametrize("n_head", [3, 6])  # ALiBi's slopes for H not a power of 2
def test_alibi_layer_with_other_head_counts(n_head):
    mine, theirs = layers("alibi", n_head=n_head, n_embed=12 * n_head)
    x = torch.randn(2, 10, 12 * n_head)
    assert torch.equal(mine(x), theirs(x))


def test_rope_and_alibi_change_the_layer_and_the_others_leave_it_alone():
    x = torch.randn(2, 9, 32)
    plain = attention.CausalSelfAttention(4, 32)
    outputs = {}
    for position in package.POSITIONS:
        mine, _ = layers(position)
        plain.load_state_dict(mine.state_dict())
        outputs[position] = out = mine(x)
        same = torch.equal(out, plain(x))
        assert same == (position not in ("rope", "alibi")), position
    # Position 0 sees only itself: RoPE turns nothing there, ALiBi's bias is 0.
    for position in ("rope", "alibi"):
        assert torch.allclose(outputs[position][:, 0], outputs["none"][:, 0])


def test_the_page_highlights_exactly_the_lines_that_differ():
    assert_highlights_are_the_changes(
        ROOT / "docs" / "positions.md",
        {"snippets/lessons/positions.py:attention": "snippets/lessons/attention.py:batched"},
    )
