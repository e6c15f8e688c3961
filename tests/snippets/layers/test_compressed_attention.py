"""Tests for snippets/layers/compressed_attention.py: DeepSeek-V4's window, HCA and CSA layers.

An entry depends on its own block's tokens only (and, CSA, the block before);
pooling is a softmax over the block's positions, per channel (a convex mix,
the mean when the gates are equal); RoPE on the last channels depends on
distance only and turns back; a query never sees a later token nor an entry
whose block is not complete; the cache holds window - 1 raw tokens, one entry
per ratio tokens and at most a block or two waiting, and decodes what the
whole sequence gives, whatever the steps; bad inputs are refused by name.
"""

import dataclasses

import pytest
import torch
from torch.testing import assert_close

from snippets.core.rope_scaling import RopeSpec
from snippets.layers.compressed_attention import (
    CompressedAttention,
    CompressedCache,
    CompressedSpec,
    Compressor,
    compressed_gathered,
    pool,
    turn_tail,
)

BASE = {"n_embed": 24, "n_head": 4, "head_size": 8, "rope_dims": 4, "q_rank": 12}
BASE |= {"window": 5, "o_groups": 2, "o_rank": 6, "rope": RopeSpec(base=100.0)}
SPECS = {
    "window": CompressedSpec(**BASE),
    "hca": CompressedSpec(**BASE, ratio=4),
    "csa": CompressedSpec(**BASE, ratio=3, overlap=True, indexer_heads=4, indexer_size=8, top_k=2),
}
THETA = torch.tensor([1.0, 0.1], dtype=torch.float64)  # base 100 on 4 channels
T = 17  # beyond the window and several blocks, not a whole number of them


def layer(name: str, seed: int = 0) -> CompressedAttention:
    torch.manual_seed(seed)
    attn = CompressedAttention(SPECS[name])
    with torch.no_grad():
        for p in attn.parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if p.dim() == 1 else 0.0))
    return attn.eval()


def x_of(seed: int = 1, T_len: int = T) -> torch.Tensor:
    return torch.randn(2, T_len, 24, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("overlap", [False, True])
def test_an_entry_depends_only_on_its_blocks_tokens(overlap):
    torch.manual_seed(0)
    comp = Compressor(24, 8, 4, overlap, 1e-6)
    x = x_of(T_len=16)
    base = comp(*comp.project(x), 0, 0, THETA)  # (B, 4, 8)
    assert base.shape == (2, 4, 8)
    y = x.clone()
    y[:, 4:8] += 1.0  # block 1
    changed = (comp(*comp.project(y), 0, 0, THETA) - base).abs().amax(dim=(0, 2)) > 1e-6
    assert changed.tolist() == [False, True, overlap, False]  # CSA: block 2 reads block 1


def test_pooling_is_a_softmax_over_positions_per_channel():
    c = torch.randn(1, 8, 3)
    assert_close(pool(c, torch.zeros(1, 8, 3), 4, False, False), c.view(1, 2, 4, 3).mean(2))
    z = torch.randn(1, 8, 3) * 3
    out = pool(c, z, 4, False, False)
    w = z.view(1, 2, 4, 3).softmax(dim=2)  # over the 4 positions, each channel its own
    assert_close(out, (w * c.view(1, 2, 4, 3)).sum(2))
    blocks = c.view(1, 2, 4, 3)
    assert (out <= blocks.amax(2) + 1e-6).all() and (out >= blocks.amin(2) - 1e-6).all()


def test_overlapping_pooling_reads_the_first_half_of_the_block_before():
    c, z = torch.randn(1, 8, 6), torch.zeros(1, 8, 6)
    out = pool(c, z, 4, True, False)
    blocks = c.view(1, 2, 4, 6)
    assert_close(out[:, 0], blocks[:, 0, :, 3:].mean(1))  # block 0: its own second half
    assert_close(out[:, 1], torch.cat([blocks[:, 0, :, :3], blocks[:, 1, :, 3:]], 1).mean(1))
    with pytest.raises(ValueError, match="whole blocks of 4"):
        pool(c[:, :7], z[:, :7], 4, True, False)


def test_rope_on_the_tail_depends_on_distance_and_turns_back():
    q, k = torch.randn(1, 1, 8), torch.randn(1, 1, 8)
    pos = torch.tensor([5])
    t = turn_tail(q, THETA, pos)
    assert_close(t[..., :4], q[..., :4])  # the first channels pass
    assert_close(turn_tail(t, THETA, -pos), q)

    def score(a, b):
        turned = [turn_tail(v, THETA, torch.tensor([p])) for v, p in ((q, a), (k, b))]
        return (turned[0] * turned[1]).sum()

    assert_close(score(7, 3), score(14, 10))


@pytest.mark.parametrize("name", list(SPECS))
def test_a_query_sees_no_later_token(name):
    attn, x = layer(name), x_of()
    y = x.clone()
    y[:, 9:] = torch.randn_like(y[:, 9:])
    with torch.no_grad():
        assert_close(attn(y)[:, :9], attn(x)[:, :9])


def test_an_entry_is_seen_once_its_block_is_complete():
    attn, x = layer("hca"), x_of()
    _, w = attn(x, return_weights=True)  # (B, H, T, T + 4 entries)
    seen = w[0, 0, :, T:] > 0  # (T, 4)
    # entry n (positions 4n .. 4n + 3) from query 4n + 3 on
    expected = torch.arange(4)[None] * 4 + 3 <= torch.arange(T)[:, None]
    assert torch.equal(seen, expected)
    raw = w[0, 0, :, :T] > 0
    distance = torch.arange(T)[:, None] - torch.arange(T)[None]
    assert torch.equal(raw, (distance >= 0) & (distance < 5))  # the window of 5


def test_csa_keeps_top_k_entries_and_sinks_take_weight():
    attn, x = layer("csa"), x_of()
    _, w = attn(x, return_weights=True)
    kept = (w[:, :, :, T:] > 0).sum(-1)  # entries per query
    assert kept.max() == 2 and kept[:, :, -1].min() == 2
    assert (w.sum(-1) < 1 - 1e-4).all()  # the sink's share left out


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("steps", [[T], [1] * T, [6, 1, 4, 1, 5], [3, 3, 3, 3, 3, 2]])
def test_the_cache_decodes_what_the_whole_sequence_gives(name, steps):
    attn, x = layer(name), x_of()
    cache, outs, start = attn.new_cache(2, T), [], 0
    with torch.no_grad():
        whole = attn(x)
        for n in steps:
            outs.append(attn(x[:, start : start + n], cache=cache))
            start += n
    assert_close(torch.cat(outs, 1), whole, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(SPECS))
def test_the_cache_grows_by_one_entry_per_ratio_tokens(name):
    attn, spec = layer(name), SPECS[name]
    cache = attn.new_cache(2, 40)
    with torch.no_grad():
        for t in range(40):
            attn(x_of(T_len=40)[:, t : t + 1], cache=cache)
            ratio = spec.ratio or 0
            assert len(cache.raw) == min(t + 1, spec.window - 1)
            if ratio:
                assert len(cache.entries) == (t + 1) // ratio
                waits = ratio * (2 if spec.overlap else 1) - 1
                assert len(cache.waiting) == min(t + 1, waits)
    assert len(cache) == spec.window - 1 + (40 // spec.ratio if spec.ratio else 0)


def test_a_cache_for_another_spec_or_a_rolling_one_is_refused():
    attn, x = layer("hca"), x_of()
    with pytest.raises(ValueError, match="another spec"):
        attn(x, cache=CompressedCache(SPECS["csa"], T))
    with pytest.raises(TypeError, match="CompressedAttention keeps no rolling cache"):
        attn.new_cache(2, T, window=4)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"rope_dims": 3}, "rope_dims"),
        ({"rope_dims": 10}, "rope_dims"),
        ({"o_groups": 3}, "o_groups"),
        ({"window": 0}, "window"),
        ({"ratio": 4, "overlap": True}, "indexer"),
        ({"top_k": 3}, "ratio"),
        ({"ratio": 0}, "ratio"),
    ],
)
def test_bad_specs_are_refused_by_name(change, match):
    with pytest.raises(ValueError, match=match):
        CompressedSpec(**{**BASE, **change})


def test_bad_inputs_are_refused_by_name():
    attn = layer("window")
    with pytest.raises(ValueError, match=r"x must be \(B, T, 24\)"):
        attn(torch.randn(2, 5, 16))
    with pytest.raises(TypeError, match="CompressedSpec"):
        CompressedAttention(dataclasses.asdict(SPECS["window"]))
    with pytest.raises(ValueError, match=r"rope.rotary_dim \(8\) must be None or rope_dims \(4\)"):
        CompressedSpec(**{**BASE, "rope": RopeSpec(rotary_dim=8)})
    with pytest.raises(ValueError, match=r"scaling='dynamic' changes with the length"):
        CompressedSpec(**{**BASE, "rope": RopeSpec(scaling="dynamic", original_length=8)})
    yarn = RopeSpec(scaling="yarn", factor=4.0, original_length=16)
    with pytest.raises(ValueError, match=r"attention factor is 1\.13.*attention_factor=1\.0"):
        CompressedAttention(CompressedSpec(**{**BASE, "rope": yarn}))


@pytest.mark.parametrize("query_chunk", [1, 4, 6, 64])
@pytest.mark.parametrize("name", list(SPECS))
def test_a_chunk_of_queries_at_a_time_gives_forwards_output(name, query_chunk):
    attn, x = layer(name).double(), x_of(T_len=29).double()
    with torch.no_grad():
        want = attn(x)
        assert_close(compressed_gathered(attn, x, query_chunk), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="query_chunk"):
        compressed_gathered(attn, x, 0)
