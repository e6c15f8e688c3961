"""Tests for snippets/pages/exercises.py: the guide's own functions pass every exercise, and
each common mistake fails with its own message, the one a learner needs.

A planted checker that accepts everything must fail this file: see the last test.
"""

import math
import time

import pytest
import torch
import torch.nn.functional as F

import snippets.pages.exercises as exercises
from snippets.core.attention import CausalSelfAttention, scaled_dot_product_attention
from snippets.core.cache import LayerCache, read
from snippets.core.masks import causal_mask, padding_mask, sliding_window_mask
from snippets.core.positions import alibi_bias, alibi_slopes, apply_rope
from snippets.layers.kv_heads import expand_kv
from snippets.layers.sparse_attention import topk_mask
from snippets.layers.taming import sink_softmax
from snippets.pages.exercises import EXERCISES, check
from snippets.run.generate import next_token_probs
from snippets.run.paged import block_slots


def split_heads(x, n_head):  # the guide's layout, as CausalSelfAttention splits q, k, v
    B, T, C = x.shape
    return x.view(B, T, n_head, C // n_head).transpose(1, 2)


def merge_heads(y):  # and as it puts the heads' outputs back side by side
    B, H, T, D = y.shape
    return y.transpose(1, 2).contiguous().view(B, T, H * D)


def kv_cache_step(cached_k, cached_v, q, k, v):  # the guide's cache and read()
    cache = LayerCache("full")
    if cached_k.size(-2):
        cache.update(cached_k, cached_v)
    q, k_all, v_all, _ = read(cache, q, k, v, "learned")
    mask = causal_mask(k_all.size(-2))[-q.size(-2) :]  # the new queries: the last rows
    return scaled_dot_product_attention(q, k_all, v_all, mask)[0], k_all, v_all


GUIDE = {
    "causal_mask": causal_mask,
    "scaled_dot_product_attention": scaled_dot_product_attention,
    "expand_kv": expand_kv,
    "apply_rope": apply_rope,
    "padding_mask": padding_mask,
    "sliding_window_mask": sliding_window_mask,
    "sink_softmax": sink_softmax,
    "next_token_probs": next_token_probs,
    "split_heads": split_heads,
    "merge_heads": merge_heads,
    "alibi_bias": alibi_bias,
    "kv_cache_step": kv_cache_step,
    "topk_mask": topk_mask,
    "block_slots": block_slots,
}


def sdpa_with(scale=None, dim=-1, fill=float("-inf"), after=False, invert=False):
    """A learner's attention with one mistake planted."""

    def answer(q, k, v, mask=None):
        D = q.size(-1)
        scores = q @ k.transpose(-2, -1) * (D**-0.5 if scale is None else scale(D))
        if mask is not None and not after:
            scores = scores.masked_fill(mask if invert else ~mask, fill)
        weights = F.softmax(scores, dim=dim)
        if mask is not None and after:
            weights = weights * mask
        return weights @ v, weights

    return answer


def rope_halves(x, offset=0, base=10000.0, theta=None):
    D, T = x.size(-1), x.size(-2)
    inv = base ** (-torch.arange(0, D, 2, dtype=torch.float) / D)
    angle = torch.arange(offset, offset + T, dtype=torch.float)[:, None] * inv
    a, b = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1)


def top_p_one_short(logits, temperature=1.0, top_k=None, top_p=None):
    if top_p is None:
        return next_token_probs(logits, temperature, top_k)
    probs = next_token_probs(logits, temperature, top_k)
    sorted_p, order = probs.sort(-1, descending=True)
    drop = sorted_p.cumsum(-1) > top_p  # drops the token that crosses top_p
    drop[:, 0] = False  # the first always stays
    sorted_p = sorted_p.masked_fill(drop, 0.0)
    out = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return out / out.sum(-1, keepdim=True)


MISTAKES = {  # exercise -> [(a wrong answer, words its message must hold)]
    "causal_mask": [
        (lambda T: torch.ones(T, T).tril(), "bool tensor"),
        (lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1), "cannot see position 0 itself"),
        (lambda T: torch.ones(T, T, dtype=torch.bool).triu(), "transpose"),
        (lambda T: torch.ones(T, T, dtype=torch.bool).tril(1), "a later one"),
        (lambda T: torch.eye(T, dtype=torch.bool), "an earlier one it should see"),
        (lambda T: torch.ones(T, dtype=torch.bool), "should have shape (1, 1)"),
    ],
    "scaled_dot_product_attention": [
        (sdpa_with(scale=lambda D: 1.0), "not scaled"),
        (sdpa_with(scale=lambda D: 1 / D), "divided by D"),
        (sdpa_with(dim=-2), "columns of your weights sum to 1"),
        (sdpa_with(fill=0.0), "a score of 0 is not hidden"),
        (sdpa_with(invert=True), "read backwards"),
        (sdpa_with(after=True), "mask the scores before softmax"),
        (lambda q, k, v, mask=None: q @ k.transpose(-2, -1), "return two things"),
    ],
    "expand_kv": [
        (lambda kv, g: kv.repeat(1, g, 1, 1), "tiled"),
        (lambda kv, g: kv.repeat_interleave(g, dim=2), "along the positions"),
        (lambda kv, g: kv, "should have shape (2, 6, 3, 4)"),
        (lambda kv, g: kv.repeat_interleave(g, dim=1).flip(1), "head h // 3"),
    ],
    "apply_rope": [
        (rope_halves, "not the two halves"),
        (lambda x, offset=0, base=10000.0, theta=None: apply_rope(x, 0, base, theta), "offset"),
        (
            lambda x, offset=0, base=10000.0, theta=None: apply_rope(
                x, offset, base, -(base ** (-torch.arange(0, x.size(-1), 2) / x.size(-1)))
            ),
            "wrong way",
        ),
        (lambda x, offset=0, base=10000.0, theta=None: apply_rope(x, offset), "base is not"),
        (lambda x, offset=0, base=10000.0, theta=None: apply_rope(x, offset, base), "theta"),
        (lambda x, offset=0, base=10000.0, theta=None: x * 1.5, "row 0 changed"),
        (
            lambda x, offset=0, base=10000.0, theta=None: apply_rope(
                x, offset, theta=base ** (-torch.arange(0, x.size(-1), 2) / (2 * x.size(-1)))
            ),
            "angles are off",
        ),
    ],
    "padding_mask": [
        (lambda lengths, T: padding_mask(lengths, T).flip(-1), "on the left"),
        (lambda lengths, T: ~padding_mask(lengths, T), "the other way"),
        (lambda lengths, T: padding_mask(lengths, T).float(), "should be bool"),
    ],
    "sliding_window_mask": [
        (lambda T, w: sliding_window_mask(T, w + 1), "one too wide"),
        (lambda T, w: causal_mask(T), "which it must not"),
        (lambda T, w: sliding_window_mask(T, w) | sliding_window_mask(T, w).T, "look"),
    ],
    "sink_softmax": [
        (lambda s, sinks: s.softmax(-1), "sinks are not used"),
        (lambda s, sinks: (s * sinks.exp().view(1, -1, 1, 1)).softmax(-1), "rows sum to 1"),
        (
            lambda s, sinks: torch.cat(
                [s, sinks.view(1, -1, 1, 1).expand(*s.shape[:-1], 1)], -1
            ).softmax(-1)[..., 1:],
            "dropped the first key",
        ),
        (lambda s, sinks: sink_softmax(s, sinks.flip(0)), "sinks[h]"),
    ],
    "next_token_probs": [
        (
            lambda lo, temperature=1.0, top_k=None, top_p=None: (lo * temperature).softmax(-1),
            "divide the logits by the temperature",
        ),  # fmt: skip
        (top_p_one_short, "one token too few"),
        (lambda lo, temperature=1.0, top_k=None, top_p=None: lo.softmax(-1) * 2, "sum to 1"),
        (
            lambda lo, temperature=1.0, top_k=None, top_p=None: (lo / temperature).softmax(-1),
            "top-k keeps the top_k most likely tokens",
        ),
    ],
}


def alibi_from(slopes, T, sign=-1.0, shift=0, power=1, causal=True):
    """ALiBi's bias from these slopes, with one mistake planted if asked."""
    back = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).float()  # i - j
    bias = sign * slopes[:, None, None] * (back.abs() + shift) ** power
    return bias.masked_fill(back < 0, float("-inf")) if causal else bias


def cache_step_with(append=True, new_first=False, mask="last"):
    """A learner's KV-cache step with one mistake planted."""

    def answer(cached_k, cached_v, q, k, v):
        if append:
            first, second = ((k, cached_k), (v, cached_v)) if new_first else (
                (cached_k, k), (cached_v, v))  # fmt: skip
            k, v = torch.cat(first, 2), torch.cat(second, 2)
        T, T_all = q.size(2), k.size(2)
        rows = {"last": causal_mask(T_all)[-T:], "first": causal_mask(T_all)[:T],
                "small": causal_mask(T), "none": None}[mask]  # fmt: skip
        return scaled_dot_product_attention(q, k, v, rows)[0], k, v

    return answer


def topk_with(causal_first=True, limit=True):
    def answer(scores, top_k):
        causal = causal_mask(scores.size(-1))
        if causal_first:
            scores = scores.masked_fill(~causal, float("-inf"))
        k = min(top_k, scores.size(-1)) if limit else top_k
        chosen = torch.zeros_like(scores, dtype=torch.bool)
        return chosen.scatter(-1, scores.topk(k, dim=-1).indices, True) & causal

    return answer


MISTAKES |= {
    "split_heads": [
        (lambda x, H: x.view(*x.shape[:2], H, -1), "(B, T, H, D)"),
        (lambda x, H: x.reshape(x.size(0), H, x.size(1), -1), "positions are mixed up"),
        (lambda x, H: x.view(*x.shape[:2], -1, H).permute(0, 3, 1, 2), "D adjacent channels"),
        (lambda x, H: x.view(*x.shape[:2], 2, -1).transpose(1, 2), "shape (2, 4, 3, 2)"),
    ],
    "merge_heads": [
        (lambda y: y.transpose(1, 2), "(B, T, H, D)"),
        (lambda y: y.reshape(y.size(0), y.size(2), -1), "positions are mixed up"),
        (lambda y: y.permute(0, 2, 3, 1).reshape(y.size(0), y.size(2), -1), "adjacent"),
        (lambda y: y.transpose(1, 2).view(y.size(0), y.size(2), -1), "raised RuntimeError"),
    ],
    "alibi_bias": [
        (lambda H, T: alibi_from(alibi_slopes(H), T, sign=1.0), "older keys get a bonus"),
        (lambda H, T: alibi_from(alibi_slopes(H), T, causal=False), "a later key"),
        (lambda H, T: alibi_bias(H, T).transpose(1, 2), "transposed"),
        (lambda H, T: alibi_from(alibi_slopes(H).flip(0), T), "wrong way"),
        (lambda H, T: alibi_from(2.0 ** (-8 * torch.arange(1, H + 1) / H), T), "not a power"),
        (lambda H, T: causal_mask(T).expand(H, T, T), "should be float"),
        (lambda H, T: alibi_from(alibi_slopes(H), T, shift=1), "the diagonal should be 0"),
        (lambda H, T: alibi_from(alibi_slopes(H), T, power=2), "each step back"),
        (lambda H, T: alibi_from(1 / 2 ** torch.arange(1, H + 1), T), "2 ** (-8 (h + 1) / H)"),
    ],
    "kv_cache_step": [
        (cache_step_with(append=False), "should have shape (2, 2, 6, 8), got (2, 2, 1, 8)"),
        (cache_step_with(new_first=True), "go after the cached ones"),
        (cache_step_with(mask="none"), "one sees a later new key"),
        (cache_step_with(mask="small"), "raised ValueError"),
        (cache_step_with(mask="first"), "differs from recomputing"),
        (lambda ck, cv, q, k, v: cache_step_with()(ck, cv, q, k, v)[0], "three things"),
        (
            lambda ck, cv, q, k, v: (
                scaled_dot_product_attention(q, k, v)[0],
                torch.cat([ck, k], 2),
                torch.cat([cv, v], 2),
            ),
            "only the new keys",
        ),  # fmt: skip
    ],
    "topk_mask": [
        (lambda s, k: s.topk(min(k, s.size(-1)), -1).indices, "not indices"),
        (
            lambda s, k: torch.zeros_like(s, dtype=torch.bool).scatter(
                -1, s.topk(k, -1).indices, True
            ),
            "chose a later key",
        ),  # fmt: skip
        (topk_with(causal_first=False), "choose among its earlier keys"),
        (lambda s, k: topk_mask(-s, k), "lowest scores"),
        (topk_with(limit=False), "with top_k = 8 >= T = 6: your function raised"),
        (lambda s, k: topk_mask(s, k).float(), "should be bool"),
    ],
}


MISTAKES |= {
    "block_slots": [
        (lambda table, p, bs: p, "the cache is paged"),
        (lambda table, p, bs: table[p % bs] * bs + p // bs, "at p % block_size"),
        (lambda table, p, bs: table[p // bs] + p % bs, "rows start at"),
        (lambda table, p, bs: table[p // bs] * bs + p % bs + 1, "one too far"),
        (lambda table, p, bs: (table[p // bs] * bs + p % bs).float(), "integer rows"),
        (lambda table, p, bs: table[p // bs] * bs, "should be row"),
        (lambda table, p, bs: table[p // bs][:-1], "should have shape (14,)"),
    ],
}


@pytest.mark.parametrize("name", EXERCISES)
def test_the_guides_own_function_passes(name):
    verdict = check(name, GUIDE[name])
    assert verdict.passed, verdict.message
    assert str(verdict) == f"{name}: correct, every property holds"


@pytest.mark.parametrize(
    ("name", "index"), [(n, i) for n, wrong in MISTAKES.items() for i in range(len(wrong))]
)
def test_each_mistake_fails_with_its_message(name, index):
    answer, words = MISTAKES[name][index]
    verdict = check(name, answer)
    assert not verdict.passed
    assert words in verdict.message, verdict.message


@pytest.mark.parametrize("name", EXERCISES)
def test_different_mistakes_get_different_messages(name):
    messages = [check(name, answer).message for answer, _ in MISTAKES[name]]
    assert len(set(messages)) == len(messages), messages


def test_the_first_four_and_the_new_ones_have_at_least_three_mistakes_each():
    for name in list(EXERCISES)[:4] + list(EXERCISES)[8:]:
        assert len(MISTAKES[name]) >= 3, name
    assert len(EXERCISES) >= 12 and set(MISTAKES) == set(EXERCISES)


def test_the_heads_exercises_grade_the_layout_the_guides_layer_uses():
    # CausalSelfAttention, rebuilt from the two graded functions, computes what it does.
    torch.manual_seed(0)
    attn, x = CausalSelfAttention(4, 16, 8), torch.randn(2, 5, 16)
    q, k, v = (split_heads(t, 4) for t in attn.qkv(x).split(16, dim=-1))
    y = scaled_dot_product_attention(q, k, v, causal_mask(5))[0]
    assert torch.allclose(attn.proj(merge_heads(y)), attn(x), atol=1e-6)


def test_the_cache_step_graded_is_recomputation():
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    out, k_all, _ = kv_cache_step(k[:, :, :3], v[:, :, :3], q[:, :, 3:], k[:, :, 3:], v[:, :, 3:])
    full = scaled_dot_product_attention(q, k, v, causal_mask(4))[0]
    assert torch.allclose(out, full[:, :, 3:], atol=1e-6) and torch.equal(k_all, k)


def test_an_answer_that_raises_gets_the_error_and_the_shapes():
    def broken(q, k, v, mask=None):
        return q @ k  # (.., 3, 8) @ (.., 5, 8): the transpose forgotten

    verdict = check("scaled_dot_product_attention", broken)
    assert not verdict.passed
    assert "raised RuntimeError" in verdict.message
    assert "given tensor (2, 2, 3, 8), tensor (2, 2, 5, 8), tensor (2, 2, 5, 8)" in verdict.message


def test_bad_calls_are_refused_by_name():
    with pytest.raises(ValueError, match=r"name \('casual_mask'\) must be one of"):
        check("casual_mask", causal_mask)
    with pytest.raises(TypeError, match="answer must be your function"):
        check("causal_mask", causal_mask(4))


def test_grading_is_deterministic_and_quick():
    for name, answer in GUIDE.items():
        start = time.perf_counter()
        assert check(name, answer) == check(name, answer)
        assert time.perf_counter() - start < 2.0  # twice: well under a second each
    assert math.isfinite(time.perf_counter())


def test_a_checker_that_accepts_everything_fails_this_file(monkeypatch):
    monkeypatch.setattr(exercises, "_CHECKS", {n: lambda answer: None for n in EXERCISES})
    for name, wrong in MISTAKES.items():  # every planted mistake is let through, and caught
        for index, (answer, _) in enumerate(wrong):
            with pytest.raises(AssertionError):
                test_each_mistake_fails_with_its_message(name, index)
            assert check(name, answer).passed
