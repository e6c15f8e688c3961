"""Tests for snippets/exercises.py: the guide's own functions pass every exercise, and
each common mistake fails with its own message, the one a learner needs.

A planted checker that accepts everything must fail this file: see the last test.
"""

import math
import time

import pytest
import torch
import torch.nn.functional as F

import snippets.exercises as exercises
from snippets.attention import scaled_dot_product_attention
from snippets.exercises import EXERCISES, check
from snippets.generate import next_token_probs
from snippets.kv_heads import expand_kv
from snippets.masks import causal_mask, padding_mask, sliding_window_mask
from snippets.positions import apply_rope
from snippets.taming import sink_softmax

GUIDE = {
    "causal_mask": causal_mask,
    "scaled_dot_product_attention": scaled_dot_product_attention,
    "expand_kv": expand_kv,
    "apply_rope": apply_rope,
    "padding_mask": padding_mask,
    "sliding_window_mask": sliding_window_mask,
    "sink_softmax": sink_softmax,
    "next_token_probs": next_token_probs,
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


def test_the_first_four_have_at_least_three_mistakes_each():
    for name in list(EXERCISES)[:4]:
        assert len(MISTAKES[name]) >= 3, name


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
    answer, words = MISTAKES["causal_mask"][0]
    with pytest.raises(AssertionError):
        test_each_mistake_fails_with_its_message("causal_mask", 0)
    assert check("causal_mask", answer).passed  # the planted checker lets it through
