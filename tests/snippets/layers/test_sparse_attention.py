"""Tests for snippets/layers/sparse_attention.py: the lightning indexer, top-k keys, MoBA blocks.

Each selection is causal and, when it covers every key or block, is dense causal
attention; top-k keeps exactly the best-scored earlier keys; the indexer's scores and
the mask are built as DeepSeek-V3.2-Exp's inference code builds them (its fp8 kernel
without the quantization); MoBA keeps the query's own block and the best earlier blocks
by mean-pooled key, checked against a loop over queries; the gathered form equals the
masked one; bad input is a ValueError naming the value.
"""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from snippets.layers.sparse_attention import (
    LightningIndexer,
    gather_attention,
    masked_attention,
    moba_mask,
    topk_indices,
    topk_mask,
)

B, H, T, D, C = 2, 3, 32, 8, 16


def qkv(seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, D, generator=gen) for _ in range(3)]


def indexer_scores(seed=0):
    torch.manual_seed(seed)
    indexer = LightningIndexer(4, C, 8)
    x = torch.randn(B, T, C)
    return indexer, x, indexer(x)


def dense(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_every_key_or_block_is_dense_attention():
    q, k, v = qkv()
    _, _, scores = indexer_scores()
    assert_close(masked_attention(q, k, v, topk_mask(scores, T)), dense(q, k, v))
    assert_close(gather_attention(q, k, v, topk_indices(scores, 10 * T)), dense(q, k, v))
    assert_close(masked_attention(q, k, v, moba_mask(q, k, 4, T // 4)), dense(q, k, v))


@pytest.mark.parametrize("top_k", [1, 5, 12])
def test_topk_keeps_the_best_earlier_keys(top_k):
    _, _, scores = indexer_scores()
    mask = topk_mask(scores, top_k)
    assert not mask.triu(1).any()  # causal
    t = torch.arange(T)
    assert torch.equal(mask.sum(-1), torch.minimum(t + 1, torch.tensor(top_k)).expand(B, T))
    earlier = torch.ones(T, T, dtype=torch.bool).tril()
    kept = scores.masked_fill(~mask, torch.inf).amin(-1)  # the worst kept score
    dropped = scores.masked_fill(mask | ~earlier, -torch.inf).amax(-1)  # the best dropped
    assert (kept >= dropped).all()


def test_indexer_and_mask_as_deepseek_builds_them():
    """inference/model.py of DeepSeek-V3.2-Exp: weights = weights_proj(x) * n_heads^-0.5,
    times softmax_scale = head_dim^-0.5; fp8_index sums over heads ReLU(q . k) * weight;
    topk of (score + causal mask), then index_mask = full(-inf).scatter_(topk, 0) + mask."""
    indexer, x, scores = indexer_scores()
    q = indexer.q(x).view(B, T, 4, 8)
    k = indexer.k(x)
    weights = indexer.weights(x) * 4**-0.5 * 8**-0.5
    theirs = torch.einsum("bthd,bsd->bths", q, k).relu().mul(weights[..., None]).sum(2)
    assert_close(scores, theirs)
    causal = torch.full((T, T), float("-inf")).triu(1)
    for top_k in (3, 9):
        picked = (theirs + causal).topk(min(top_k, T), dim=-1)[1]
        index_mask = torch.full((B, T, T), float("-inf")).scatter_(-1, picked, 0) + causal
        assert torch.equal(topk_mask(scores, top_k), index_mask == 0)


def test_sparse_attention_is_causal():
    q, k, v = qkv()
    indexer, x, scores = indexer_scores()
    y = masked_attention(q, k, v, topk_mask(scores, 4))
    x2, k2, v2 = x.clone(), k.clone(), v.clone()
    x2[:, 20:] += 1.0
    k2[:, :, 20:] += 1.0
    v2[:, :, 20:] += 1.0
    y2 = masked_attention(q, k2, v2, topk_mask(indexer(x2), 4))
    assert_close(y2[:, :, :20], y[:, :, :20])
    y3 = masked_attention(q, k2, v2, moba_mask(q, k2, 4, 2))
    assert_close(y3[:, :, :20], masked_attention(q, k, v, moba_mask(q, k, 4, 2))[:, :, :20])


def moba_by_loop(q, k, block_size, top_k):
    """MoBA's rule for one query at a time (the paper's section 2.2)."""
    mask = torch.zeros(B, H, T, T, dtype=torch.bool)
    for b in range(B):
        for h in range(H):
            for t in range(T):
                own = t // block_size
                means = [k[b, h, i * block_size : (i + 1) * block_size].mean(0) for i in range(own)]
                gates = torch.tensor([float(q[b, h, t] @ m) for m in means])
                best = gates.argsort(descending=True)[: top_k - 1].tolist()
                for i in [own, *best]:
                    mask[b, h, t, i * block_size : (i + 1) * block_size] = True
    return mask & torch.ones(T, T, dtype=torch.bool).tril()


@pytest.mark.parametrize("top_k", [1, 3])
def test_moba_keeps_own_block_and_the_best_earlier_ones(top_k):
    q, k, _ = qkv()
    mask = moba_mask(q, k, 4, top_k)
    assert torch.equal(mask, moba_by_loop(q, k, 4, top_k))
    own = torch.arange(T)[:, None] // 4 == torch.arange(T) // 4
    assert torch.equal(
        mask & own, (own & torch.ones(T, T, dtype=torch.bool).tril()).expand_as(mask)
    )


def test_gather_equals_mask():
    q, k, v = qkv()
    _, _, scores = indexer_scores()
    for top_k in (1, 6):
        gathered = gather_attention(q, k, v, topk_indices(scores, top_k))
        assert_close(gathered, masked_attention(q, k, v, topk_mask(scores, top_k)))


def test_bad_input_names_the_value():
    q, k, _ = qkv()
    _, _, scores = indexer_scores()
    for bad in (0, -3):
        with pytest.raises(ValueError, match=rf"top_k \({bad}\) must be a positive int"):
            topk_mask(scores, bad)
        with pytest.raises(ValueError, match=rf"top_k \({bad}\)"):
            moba_mask(q, k, 4, bad)
    with pytest.raises(ValueError, match=r"block_size \(5\) must divide T \(32\)"):
        moba_mask(q, k, 5, 2)
    with pytest.raises(ValueError, match=r"block_size \(0\)"):
        moba_mask(q, k, 0, 2)
    with pytest.raises(ValueError, match=r"n_head \(0\)"):
        LightningIndexer(0, C, 8)


def test_bad_shapes_name_the_argument():
    q, k, v = qkv()
    indexer, x, scores = indexer_scores()
    with pytest.raises(
        ValueError, match=rf"x must be \(B, T, C\) with C={C}, got shape \(5, {C}\)"
    ):
        indexer(x[0, :5])  # 2-D: no batch
    with pytest.raises(ValueError, match=rf"with C={C}, got shape \({B}, {T}, 8\)"):
        indexer(x[..., :8])  # the wrong width
    with pytest.raises(ValueError, match=rf"q must be \(B, H, T, D\), got shape \({H}, {T}, {D}\)"):
        moba_mask(q[0], k, 4, 2)
    with pytest.raises(
        ValueError,
        match=rf"k must be \(B, H, T, D\) with B={B}, H={H}, T={T}, D={D}, "
        rf"got shape \({B}, {H}, 16, {D}\)",
    ):
        moba_mask(q, k[:, :, :16], 4, 2)  # fewer keys than queries
    with pytest.raises(ValueError, match=rf"scores must be \(B, T, T\), got shape \({B}, 5, {T}\)"):
        topk_mask(scores[:, :5], 4)  # not square
    with pytest.raises(ValueError, match=rf"mask \({B}, 1, {T}, 5\) must broadcast to the scores"):
        masked_attention(q, k, v, topk_mask(scores, 4)[..., :5])
