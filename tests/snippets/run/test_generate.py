"""Tests for snippets/run/generate.py: sampling rules, their errors, and the KV cache.

No timing is asserted; the committed benchmark result is checked for what the page says.
"""

import dataclasses
import itertools
import math

import pytest
import torch
from torch.testing import assert_close

from snippets.core.attention import CausalSpec
from snippets.core.cache import ModelCache
from snippets.core.model import GPT, GPTConfig
from snippets.run.generate import (
    check_sampling,
    generate,
    next_token_probs,
    pick_next,
    stream,
)
from tests.snippets.equivalence import from_per_head

CONFIG = GPTConfig(vocab_size=20, context_length=24, n_embed=32, n_head=4, n_layer=2)


def make(config: GPTConfig = CONFIG, seed: int = 0) -> GPT:
    """A model whose next token depends on the whole context.

    At its initial scale (std 0.02) attention barely moves the logits, and a cache that
    got the earlier positions wrong could still produce the same tokens: here it cannot.
    """
    torch.manual_seed(seed)
    model = GPT(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.3)
    return model


def ids(*shape: int, V: int = CONFIG.vocab_size, seed: int = 1) -> torch.Tensor:
    return torch.randint(V, shape, generator=torch.Generator().manual_seed(seed))


LOGITS = torch.tensor([[3.0, 2.0, 1.0, 0.0, -1.0], [0.0, 0.5, 4.0, 1.5, -0.5]])


# --- the distribution to sample from ---------------------------------------------------------


def test_temperature_divides_the_logits():
    for t in (0.5, 1.0, 2.0):
        assert_close(next_token_probs(LOGITS, temperature=t), (LOGITS / t).softmax(-1))
    cold, hot = next_token_probs(LOGITS, 0.1), next_token_probs(LOGITS, 100.0)
    assert cold.max(-1).values.min() > 0.99  # nearly greedy
    assert (hot - 0.2).abs().max() < 0.01  # nearly uniform over V = 5


@pytest.mark.parametrize("k", [1, 2, 4, 5, 50])
def test_top_k_keeps_the_k_most_likely(k):
    probs = next_token_probs(LOGITS, top_k=k)
    kept = probs > 0
    assert (kept.sum(-1) == min(k, 5)).all()
    # The kept tokens are the k largest logits, in the same proportions as before.
    top = LOGITS.topk(min(k, 5), dim=-1).indices
    assert kept.gather(-1, top).all()
    assert_close(probs.sum(-1), torch.ones(2))
    full = LOGITS.softmax(-1)
    assert_close(probs[kept], (full * kept / (full * kept).sum(-1, keepdim=True))[kept])


def test_top_k_keeps_ties_with_the_kth():
    probs = next_token_probs(torch.tensor([[2.0, 1.0, 1.0, 0.0]]), top_k=2)
    assert (probs > 0).tolist() == [[True, True, True, False]]


@pytest.mark.parametrize("p", [1e-6, 0.3, 0.6, 0.7, 0.9, 0.99])
def test_top_p_keeps_the_smallest_set_reaching_p(p):
    probs = next_token_probs(LOGITS, top_p=p)
    full = LOGITS.softmax(-1)
    for row in range(2):
        kept = (probs[row] > 0).nonzero().flatten()
        mass = full[row, kept].sum().item()
        smallest = full[row, kept].min().item()
        assert mass >= p or math.isclose(mass, 1.0)  # reaches p ...
        assert mass - smallest < p  # ... and no kept token could be spared
        # The kept tokens are the most likely ones.
        dropped = full[row][probs[row] == 0].tolist()
        assert smallest >= max(dropped, default=0.0)
    assert_close(probs.sum(-1), torch.ones(2))


def test_top_p_of_one_changes_nothing_and_tiny_top_p_is_greedy():
    assert_close(next_token_probs(LOGITS, top_p=1.0), LOGITS.softmax(-1))
    tiny = next_token_probs(LOGITS, top_p=1e-9)
    assert torch.equal(tiny.argmax(-1), LOGITS.argmax(-1)) and (tiny.max(-1).values == 1).all()


def test_sampled_tokens_stay_in_the_kept_set_and_repeat_with_the_seed():
    logits = ids(4, 20, seed=3).float()
    kept = next_token_probs(logits, top_k=3, top_p=0.8) > 0
    draws = [
        pick_next(logits, top_k=3, top_p=0.8, generator=torch.Generator().manual_seed(s))
        for s in range(50)
    ]
    for draw in draws:
        assert kept.gather(-1, draw).all()
    again = pick_next(logits, top_k=3, top_p=0.8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(again, draws[0])


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings, error, message",
    [
        ({"temperature": 0}, ValueError, r"temperature \(0\) must be > 0: .* greedy=True"),
        ({"temperature": -0.5}, ValueError, r"temperature \(-0.5\) must be > 0"),
        ({"temperature": float("nan")}, ValueError, r"temperature \(nan\) must be > 0"),
        ({"temperature": "hot"}, TypeError, r"temperature \('hot'\) must be a number"),
        ({"top_k": 0}, ValueError, r"top_k \(0\) must be >= 1"),
        ({"top_k": 2.5}, TypeError, r"top_k \(2.5\) must be an int or None"),
        ({"top_p": 0.0}, ValueError, r"top_p \(0.0\) must be in \(0, 1\]"),
        ({"top_p": 1.5}, ValueError, r"top_p \(1.5\) must be in \(0, 1\]"),
    ],
)
def test_bad_settings_are_rejected_before_anything_runs(settings, error, message):
    options = {"temperature": 1.0, "top_k": None, "top_p": None, **settings}
    with pytest.raises(error, match=message):
        check_sampling(**options)
    with pytest.raises(error, match=message):
        next(stream(make(), ids(1, 3), 5, **settings))  # before any forward pass


def test_greedy_with_sampling_settings_is_an_error():
    with pytest.raises(ValueError, match="greedy=True takes the most likely token"):
        generate(make(), ids(1, 3), 2, greedy=True, temperature=0.5)


@pytest.mark.parametrize(
    "args, message",
    [
        ((ids(3), 2), r"idx must be \(B, T\) token ids with T >= 1, got \(3,\)"),
        ((ids(1, 0), 2), r"got \(1, 0\)"),
        ((ids(1, 3), -1), r"max_new_tokens \(-1\) must be an int >= 0"),
    ],
)
def test_bad_generate_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        generate(make(), *args)


# --- the generation loop ----------------------------------------------------------------------


def test_greedy_picks_the_argmax_and_crops_to_the_context():
    model = make()
    idx = ids(2, 5)
    out = generate(model, idx, 30, greedy=True, kv_cache=False)  # 35 > context_length 24
    assert out.shape == (2, 35) and torch.equal(out[:, :5], idx)
    # By hand: the model always sees the last 24 tokens at most.
    by_hand = idx
    for _ in range(30):
        logits, _ = model(by_hand[:, -CONFIG.context_length :])
        by_hand = torch.cat([by_hand, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, by_hand)


def test_generate_leaves_the_training_mode_alone():
    model = make().train()
    generate(model, ids(1, 3), 3, greedy=True)
    assert model.training
    model.eval()
    generate(model, ids(1, 3), 3, greedy=True)
    assert not model.training


def test_generate_checks_the_prompt_s_ids_itself():
    # Where input enters, on any device: before any forward pass (here none at all).
    bad = torch.tensor([[1, 20]])
    message = r"token id 20 at \(b=0, t=1\) is out of range for vocab_size=20"
    with pytest.raises(ValueError, match=message):
        generate(make(), bad, 0, kv_cache=False)  # no forward pass at all


def test_zero_new_tokens_returns_the_prompt():
    idx = ids(2, 4)
    assert torch.equal(generate(make(), idx, 0), idx)


# --- the KV cache -----------------------------------------------------------------------------


def test_cached_logits_equal_a_full_forward_pass():
    model = make()
    idx = ids(2, 20)
    cache = ModelCache.for_model(model, batch_size=2)
    pieces = [
        model(idx[:, a:b], cache=cache)[0]
        for a, b in ((0, 7), (7, 8), (8, 9), (9, 15), (15, 20))  # prompt, 1, 1, chunks
    ]
    assert cache.seen == 20
    with torch.no_grad():
        assert_close(torch.cat(pieces, dim=1), model(idx)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("new", [1, 10, 40])  # 40: past context_length, the cache refills
def test_greedy_with_the_cache_is_token_for_token_the_recomputed_output(seed, new):
    model = make(seed=seed)
    idx = ids(3, 6, seed=seed)
    cached = generate(model, idx, new, greedy=True)
    recomputed = generate(model, idx, new, greedy=True, kv_cache=False)
    assert torch.equal(cached, recomputed)


def test_sampling_with_the_cache_draws_the_same_tokens():
    model = make()
    options = {"temperature": 0.9, "top_k": 10, "top_p": 0.95}
    outs = [
        generate(model, ids(2, 4), 30, kv_cache=kv, generator=torch.Generator().manual_seed(7),
                 **options)
        for kv in (True, False)
    ]  # fmt: skip
    assert torch.equal(*outs)


def greedy_with_tampered_cache(model, idx, steps: int, tamper) -> torch.Tensor:
    """Greedy generation through the cache, calling tamper(cache) before every step:
    idx (1, T) -> (1, T + steps). The negative control of the cache-equals-recompute tests."""
    cache = ModelCache.for_model(model, 1)
    logits = model(idx, cache=cache)[0]
    out = idx
    for _ in range(steps):
        next_id = logits[:, -1].argmax(-1, keepdim=True)
        out = torch.cat([out, next_id], dim=1)
        tamper(cache)
        logits = model(next_id, cache=cache)[0]
    return out


def test_a_cache_that_ignores_earlier_positions_would_differ():
    # The equality above can fail: a cache that forgets its keys changes the text.
    model = make()
    idx = ids(1, 6)
    expected = generate(model, idx, 10, greedy=True, kv_cache=False)
    keys = lambda cache: cache.layers[0].buffers[0].zero_()  # noqa: E731
    forgotten = greedy_with_tampered_cache(model, idx, 10, keys)
    assert not torch.equal(forgotten, expected)


def test_cache_needs_the_fused_layer_and_has_a_capacity():
    C, H, T = CONFIG.n_embed, CONFIG.n_head, CONFIG.context_length
    layers = (CausalSpec(C, H, T, per_head=True),) * CONFIG.n_layer
    per_head = make(dataclasses.replace(CONFIG, layers=layers))
    with pytest.raises(TypeError, match=r"the per-head layer keeps no keys.*per_head=False"):
        generate(per_head, ids(1, 3), 2, greedy=True)
    fused = from_per_head(per_head).eval()
    assert torch.equal(
        generate(fused, ids(1, 3), 8, greedy=True),
        generate(per_head, ids(1, 3), 8, greedy=True, kv_cache=False),
    )
    cache = ModelCache.for_model(fused, 1)
    fused(ids(1, 20), cache=cache)[0]
    with pytest.raises(ValueError, match=r"20 cached \+ 5 new positions exceed context_length=24"):
        fused(ids(1, 5), cache=cache)[0]


# --- position schemes ---------------------------------------------------------------------------


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "alibi", "none"])
def test_cache_serves_every_position_scheme(position):
    # Past context_length too where the scheme has no table: RoPE and ALiBi then
    # need the cache's offset for positions the model never trained on.
    max_length = None if position == "learned" else 2 * CONFIG.context_length
    config = dataclasses.replace(CONFIG, position=position, max_length=max_length)
    model = make(config)
    T_all = config.max_length or config.context_length
    idx = ids(2, T_all)
    cache = ModelCache.for_model(model, batch_size=2)
    cuts = (0, 7, 8, 9, T_all - 5, T_all)  # a prompt, single tokens, chunks
    pieces, where = [], set()
    for a, b in itertools.pairwise(cuts):
        pieces.append(model(idx[:, a:b], cache=cache)[0])
        where |= {t.data_ptr() for t in cache.tensors()}
    # Made at the first step, room for every position, (B, G, T_max, D) per layer,
    # keys and values; written in place: the same memory at every step.
    assert [t.shape for t in cache.tensors()] == [(2, 4, T_all, 8)] * 4
    assert len(where) == 4
    with torch.no_grad():
        assert_close(torch.cat(pieces, dim=1), model(idx)[0], rtol=1e-5, atol=1e-5)
    cached = generate(model, idx[:, :5], 30, greedy=True)
    assert torch.equal(cached, generate(model, idx[:, :5], 30, greedy=True, kv_cache=False))
