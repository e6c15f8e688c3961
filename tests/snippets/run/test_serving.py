"""Tests for snippets/run/serving.py: shared prefixes, continuous batching and speculative
decoding equal to plain greedy generation; bad input refused with nothing left allocated. The
paged cache itself is tests/snippets/run/test_paged.py; the checks against transformers are
tests/lab/test_serving_oracle.py.
"""

import dataclasses
import math
import re
from collections import Counter

import pytest
import torch

from snippets.core.model import GPT
from snippets.run.generate import generate
from snippets.run.serving import generate_batch, speculative_generate
from tests.snippets.run.paged_models import (
    MODELS,
    V,
    ids,
    make,
    pool_is_empty,
)

# --- shared prefixes --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def char():
    """The committed trained char model (loaded, not trained) and its tokenizer."""
    from lab.model_cache import trained_char_gpt

    model, tokenizer, _ = trained_char_gpt()
    return model.eval(), tokenizer


# 14 characters: three blocks of 4 and half of a fourth, which a sequence that shares it
# must copy before it writes its own position 14.
STEM = "The keys of a "
ENDS = ["query", "value", "model", "cache", "query head", "past"]


def test_shared_prefixes_change_no_token_and_save_blocks(char, recording):
    model, tok = char
    prompts = [tok.encode(STEM + end) for end in ENDS]
    runs, stats = {}, {}
    for share in (True, False):
        stats[share] = {}
        runs[share] = generate_batch(
            model, prompts, 8, block_size=4, max_seqs=2, share_prefixes=share, stats=stats[share]
        )
    for on, off, prompt in zip(runs[True], runs[False], prompts, strict=True):
        assert torch.equal(on, off)
        assert torch.equal(on, generate(model, torch.tensor([prompt]), 8, greedy=True)[0])
    assert stats[False]["shared_positions"] == 0
    assert stats[True]["shared_positions"] >= 4 * len(STEM)  # the four that joined later
    on, off = recording  # blocks saved: fewer taken from the pool, never more held at once
    assert on.allocated < off.allocated
    assert stats[True]["peak_blocks"] <= stats[False]["peak_blocks"]
    for cache in recording:  # every block back in the pool, once
        assert pool_is_empty(cache.pool) and cache.tables == {} and cache.tokens == {}


# --- continuous batching ----------------------------------------------------------------------

LENGTHS_NEW = [(9, 6), (2, 11), (14, 3), (5, 0), (1, 8), (11, 5), (6, 1)]  # (prompt, new)


@pytest.mark.parametrize(
    ("model_name", "static", "block_size"),
    [("char", False, 4), ("char", True, 4), ("gqa rope", False, 1), ("window", False, 3)],
)
def test_generate_batch_is_generate_on_each_prompt(model_name, static, block_size, char, recording):
    if model_name == "char":
        model, Vm = char[0], char[0].config.vocab_size
    else:
        model, Vm = make(MODELS[model_name]), V
    prompts = [ids(n, 20 + i, Vm) for i, (n, _) in enumerate(LENGTHS_NEW)]
    new = [m for _, m in LENGTHS_NEW]
    stats = {}
    out = generate_batch(
        model, prompts, new, block_size=block_size, max_seqs=3, max_tokens=5, static=static,
        stats=stats,
    )  # fmt: skip
    for i, (prompt, got) in enumerate(zip(prompts, out, strict=True)):
        alone = generate(model, torch.tensor([prompt]), new[i], greedy=True)[0]
        assert torch.equal(got, alone), f"prompt {i}"
    (cache,) = recording
    steps = cache.steps
    assert max(sum(n for _, n, _ in step) for step in steps) <= 5  # max_tokens
    assert max(len(step) for step in steps) <= 3  # max_seqs
    prefill = [[s for s, _, at in step if at < len(prompts[s])] for step in steps]
    assert Counter(s for step in prefill for s in step)[2] >= 3  # 14 tokens, 5 at a time
    joined, left = cache.joined, cache.left
    assert len(joined) == len(left) == 6  # all but the prompt with 0 new tokens
    joined_while_running = [
        (r, s) for s in joined for r in joined if joined[r] < joined[s] < left[r]
    ]
    if static:  # a batch joins only when the one before has left
        assert not joined_while_running
    else:  # sequences join as others leave, and decode beside others' prompt chunks
        assert joined_while_running
        assert any(p and len(p) < len(step) for p, step in zip(prefill, steps, strict=True))
    assert stats["steps"] == len(steps)
    assert pool_is_empty(cache.pool)


def test_continuous_batching_takes_fewer_steps_than_static(char):
    model, tok = char
    prompts = [tok.encode(t) for t in ("Attention", "A", "Keys and values", "Q")]
    new, steps = [2, 12, 3, 10], {}
    for static in (True, False):
        stats = {}
        out = generate_batch(model, prompts, new, max_seqs=2, static=static, stats=stats)
        steps[static] = stats["steps"]
    assert steps[False] < steps[True]
    assert [len(o) - len(p) for o, p in zip(out, prompts, strict=True)] == new


# --- speculative decoding ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def drafts(char):
    """Drafts for the trained char model: itself (every draft accepted), a noisy copy (some),
    an untrained model (none)."""
    target = char[0]
    noisy = GPT(target.config).eval()
    noisy.load_state_dict(target.state_dict())
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in noisy.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.5 * p.std())
    torch.manual_seed(1)
    return {"itself": target, "noisy": noisy, "untrained": GPT(target.config).eval()}


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_speculative_decoding_is_the_targets_greedy_output(k, char, drafts):
    target, tok = char
    prompt, new = torch.tensor([tok.encode("The key ")]), 20
    greedy = generate(target, prompt, new, greedy=True)
    passes = []  # the target's forward passes, counted by a hook
    hook = target.register_forward_hook(lambda *_: passes.append(1))
    try:
        for name, draft in drafts.items():
            stats, passes[:] = {}, []
            out = speculative_generate(target, draft, prompt, new, k=k, stats=stats)
            assert torch.equal(out, greedy), name
            # One pass of the target a round (the draft "itself" is the target: its passes too).
            drafting = stats["drafted"] if draft is target else 0
            assert len(passes) == stats["rounds"] + drafting, (name, stats)
            assert 0 <= stats["accepted"] <= stats["drafted"] <= k * stats["rounds"]
            # Each round adds the accepted drafts and the target's own token.
            assert stats["accepted"] + stats["rounds"] == new, name
            if name == "itself":
                assert stats["accepted"] == stats["drafted"]
                assert stats["rounds"] == math.ceil(new / (k + 1))
            elif name == "untrained":
                assert stats["accepted"] == 0 and stats["rounds"] == new
            elif k > 1:
                assert 0 < stats["accepted"] < stats["drafted"], stats
    finally:
        hook.remove()


def test_generate_batch_refuses_a_pool_too_small_and_leaves_it_empty(recording):
    model = make({})
    rule = "prompt 1 needs 3 blocks of 4 positions; the pool has n_blocks=2"
    with pytest.raises(ValueError, match=re.escape(rule)):
        generate_batch(model, [[1, 2], list(range(10))], 1, block_size=4, n_blocks=2)
    assert all(pool_is_empty(c.pool) for c in recording)


def test_speculative_decoding_refuses_what_cannot_work():
    target, prompt = make({}), torch.tensor([ids(5, 1)])
    other = GPT(dataclasses.replace(target.config, vocab_size=V + 1))
    rule = f"the draft's vocab_size ({V + 1}) differs from the target's ({V})"
    with pytest.raises(ValueError, match=re.escape(rule)):
        speculative_generate(target, other, prompt, 4)
    for k in (0, -2, True):
        with pytest.raises(ValueError, match=re.escape(f"k ({k!r}) must be an int >= 1")):
            speculative_generate(target, target, prompt, 4, k=k)
    rule = "the prompt (5) + 28 new, in the target, reaches 33 positions, past context_length=32"
    with pytest.raises(ValueError, match=re.escape(rule)):
        speculative_generate(target, target, prompt, 28)


def test_generate_batch_refuses_a_sequence_past_the_context():
    model = make({})
    rule = "prompt 1 (30 tokens + 3 new) reaches 33 positions, past context_length=32"
    with pytest.raises(ValueError, match=re.escape(rule)):
        generate_batch(model, [[1], ids(30, 1)], 3)
