"""The kv-heads page's lesson layers compute what the package's spec layers compute.

The lesson's GroupedQueryAttention is an AttentionSpec's ConfigurableAttention with
n_kv_head key/value heads, no RoPE and a bias on proj (its qkv rows are the q, k and v
weights); its MultiHeadLatentAttention is an MLASpec's LatentAttention with the extra
parts off (tests/snippets/equivalence.py carries the weights over). With the weights
copied, each equals the package's layer in one pass and through a cache fed in
pieces; the GQA cache holds G heads, the MLA cache the latents. The lesson's
kv_cache_bytes equals the package's. The page shows each layer as a change of the
generation page's cached layer: its highlighted lines are exactly those that differ.
"""

from pathlib import Path

import pytest
import torch

import snippets.layers.kv_heads as library
from snippets.lessons import generation
from snippets.lessons import kv_heads as lesson
from tests.snippets.equivalence import as_spec_layer, from_kv_heads
from tests.snippets.lessons.highlight import assert_highlights_are_the_changes

ROOT = Path(__file__).resolve().parents[3]
H, C, R, T_MAX = 6, 48, 12, 16
X = torch.randn(2, 12, C, generator=torch.Generator().manual_seed(1))
PIECES = [[12], [1] * 12, [5, 4, 3], [7, 1, 4]]
PIECE_IDS = ["one-pass", "token-by-token", "chunks", "mixed"]


def large_weights(module):
    """Every matrix drawn with std 0.3 (seeded), so that each output depends strongly
    on the keys it attends to: a cache that loses or misorders them cannot pass."""
    torch.manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0.0, 0.3)
    return module.eval()


def run_in_pieces(layer, cache, pieces):
    """The layer's outputs for X fed as consecutive pieces through one cache."""
    out, start = [], 0
    with torch.no_grad():
        for n in pieces:
            out.append(layer(X[:, start : start + n], cache))
            start += n
    return torch.cat(out, dim=1)


def assert_context_matters(layer):
    """The last position's output changes when the first position's input does."""
    other = X.clone()
    other[:, 0] += 1.0
    with torch.no_grad():
        moved = (layer(other)[:, -1] - layer(X)[:, -1]).abs().max()
    assert moved > 0.1


# ------------------------------------------------------------------ GQA, MQA, MHA


def gqa_pair(G):
    mine = large_weights(lesson.GroupedQueryAttention(H, G, C))
    theirs = as_spec_layer(mine).eval()  # qkv's rows: q, then k, then v
    spec = theirs.spec
    assert (spec.n_kv_head, spec.rope, spec.alibi, spec.out_bias) == (G, None, False, True)
    return mine, theirs


@pytest.mark.parametrize("G", [6, 3, 2, 1], ids=["MHA", "G3", "G2", "MQA"])
def test_gqa_equals_the_package_s_layer_in_one_pass(G):
    mine, theirs = gqa_pair(G)
    with torch.no_grad():
        torch.testing.assert_close(mine(X), theirs(X))
    assert_context_matters(mine)


@pytest.mark.parametrize("pieces", PIECES, ids=PIECE_IDS)
@pytest.mark.parametrize("G", [6, 2, 1], ids=["MHA", "G2", "MQA"])
def test_gqa_through_the_cache_equals_the_package_s_and_one_pass(G, pieces):
    mine, theirs = gqa_pair(G)
    cache = generation.LayerCache()
    got = run_in_pieces(mine, cache, pieces)
    expected = run_in_pieces(theirs, theirs.new_cache(2, T_MAX), pieces)
    torch.testing.assert_close(got, expected)
    with torch.no_grad():
        torch.testing.assert_close(got, mine(X))
    # The cache holds the G shared heads, not H copies: H / G times smaller.
    assert cache.k.shape == cache.v.shape == (2, G, 12, C // H)


def test_gqa_with_g_equal_h_is_the_generation_page_s_layer():
    """G = H: the generation lesson's CausalSelfAttention, weights loaded as they are."""
    mha = large_weights(generation.CausalSelfAttention(H, C))
    gqa = lesson.GroupedQueryAttention(H, H, C).eval()
    gqa.load_state_dict(mha.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(gqa(X), mha(X))


# ------------------------------------------------------------------ MLA


def mla_pair():
    mine = large_weights(lesson.MultiHeadLatentAttention(H, C, R))
    theirs = from_kv_heads(mine).eval()  # key_up and value_up: kv_up's rows per head
    spec = theirs.spec
    assert (spec.rope_head_size, spec.q_rank, spec.latent_norm) == (0, None, False)
    assert spec.parameters() == sum(p.numel() for p in mine.parameters())
    return mine, theirs


def test_mla_equals_the_package_s_layer_in_one_pass():
    mine, theirs = mla_pair()
    with torch.no_grad():
        torch.testing.assert_close(mine(X), theirs(X))
    assert_context_matters(mine)


@pytest.mark.parametrize("pieces", PIECES, ids=PIECE_IDS)
def test_mla_through_the_cache_equals_the_package_s_and_one_pass(pieces):
    """The package's layer reads its cache in the absorbed form; the lesson's forward
    projects the latents up: the same outputs."""
    mine, theirs = mla_pair()
    cache = lesson.LatentCache()
    got = run_in_pieces(mine, cache, pieces)
    expected = run_in_pieces(theirs, theirs.new_cache(2, T_MAX), pieces)
    torch.testing.assert_close(got, expected)
    with torch.no_grad():
        torch.testing.assert_close(got, mine(X))
    assert cache.c.shape == (2, 12, R) and cache.seen == 12  # R numbers a position


@pytest.mark.parametrize("last", [12, 3, 1])
def test_mla_absorbed_equals_forward_and_the_package_s(last):
    """The last `last` positions, from the latents of all 12, read as they are: the
    lesson's absorbed form, its forward, and the package's absorbed form."""
    mine, theirs = mla_pair()
    with torch.no_grad():
        c = mine.kv_down(X)  # (B, 12, R)
        got = mine.attend_absorbed(X[:, -last:], c)
        torch.testing.assert_close(got, mine(X)[:, -last:])
        q_nope, q_rope = theirs.queries(X[:, -last:], 12 - last)
        k_rope = c.new_zeros(2, 12, 0)  # no RoPE part
        positions = torch.arange(12)
        mask = positions[-last:, None] >= positions[None, :]  # (last, 12): causal
        expected = theirs.attend_absorbed(q_nope, q_rope, c, k_rope, mask)
        torch.testing.assert_close(got, expected)


# ------------------------------------------------------------------ cache bytes


@pytest.mark.parametrize(
    "sizes",
    [
        {"n_kv_head": 32, "head_size": 128},
        {"n_kv_head": 8, "head_size": 128, "batch": 3, "bytes_per_element": 4},
        {"n_kv_head": 1, "head_size": 64, "batch": 2},
        {"kv_latent": 512, "rope_head_size": 64},
        {"kv_latent": 12, "batch": 5, "bytes_per_element": 4},
    ],
)
def test_kv_cache_bytes_equals_the_package_s(sizes):
    for n_layer, tokens in [(1, 1), (60, 4096), (2, 24)]:
        mine = lesson.kv_cache_bytes(n_layer=n_layer, tokens=tokens, **sizes)
        theirs = library.kv_cache_bytes(n_layer=n_layer, tokens=tokens, **sizes)
        assert mine == theirs


def test_kv_cache_bytes_counts_what_the_lesson_caches_hold():
    gqa = lesson.GroupedQueryAttention(H, 2, C)
    mla = lesson.MultiHeadLatentAttention(H, C, R)
    kv, latent = generation.LayerCache(), lesson.LatentCache()
    with torch.no_grad():
        gqa(X, kv)
        mla(X, latent)
    held = {
        "gqa": sum(t.numel() * t.element_size() for t in (kv.k, kv.v)),
        "mla": latent.c.numel() * latent.c.element_size(),
    }
    counted = {
        "gqa": lesson.kv_cache_bytes(
            n_layer=1, tokens=12, n_kv_head=2, head_size=C // H, batch=2,
            bytes_per_element=4,
        ),
        "mla": lesson.kv_cache_bytes(
            n_layer=1, tokens=12, kv_latent=R, batch=2, bytes_per_element=4
        ),
    }  # fmt: skip
    assert held == counted


# ------------------------------------------------------------------ the page's diff

PAGE = ROOT / "docs" / "kv-heads.md"
# Each layer the page shows as a change, and the section of the earlier lesson it
# changes: both are the generation page's cached layer with a few lines changed.
EARLIER = {
    "snippets/lessons/kv_heads.py:gqa": "snippets/lessons/generation.py:attention",
    "snippets/lessons/kv_heads.py:mla": "snippets/lessons/generation.py:attention",
}


def test_the_page_highlights_exactly_the_lines_that_differ():
    assert_highlights_are_the_changes(PAGE, EARLIER)
