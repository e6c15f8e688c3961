"""Tests for snippets/core/objectives.py: the loss, its padding rule, its units, its start."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from snippets.core.attention import CausalSpec
from snippets.core.model import GPT, GPTConfig
from snippets.core.objectives import (
    IGNORE_INDEX,
    bits_per_character,
    cross_entropy_by_hand,
    lm_loss,
    perplexity,
)
from snippets.run.corpus import guide_text
from snippets.run.data import get_batch
from snippets.run.tokenizer import CharTokenizer

B, T, V = 3, 5, 7


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def targets(seed: int = 1) -> torch.Tensor:
    return torch.randint(V, (B, T), generator=torch.Generator().manual_seed(seed))


def padded_targets() -> torch.Tensor:
    y = targets()
    y[0, 3:] = IGNORE_INDEX
    y[2, 1:] = IGNORE_INDEX
    return y


# --- the loss ---------------------------------------------------------------------------


@pytest.mark.parametrize("y", [targets(), padded_targets()], ids=["full", "padded"])
def test_by_hand_equals_lm_loss_equals_torch(y):
    logits = randn(B, T, V)
    expected = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
    assert_close(cross_entropy_by_hand(logits, y), expected)
    assert_close(lm_loss(logits, y), expected)


def test_loss_is_the_mean_surprise_over_positions():
    logits = randn(B, T, V)
    y = targets()
    probs = logits.softmax(-1)
    surprises = [-math.log(probs[b, t, y[b, t]].item()) for b in range(B) for t in range(T)]
    assert lm_loss(logits, y).item() == pytest.approx(sum(surprises) / (B * T), rel=1e-5)


def test_ignore_index_really_ignores():
    logits = randn(B, T, V).requires_grad_()
    y = padded_targets()
    keep = y != IGNORE_INDEX
    loss = lm_loss(logits, y)
    # The mean over the kept positions only.
    assert_close(loss, F.cross_entropy(logits[keep], y[keep]))
    # Changing the logits at ignored positions changes nothing ...
    other = logits.detach().clone()
    other[~keep] = randn(int((~keep).sum()), V, seed=9) * 10
    assert_close(lm_loss(other, y), loss.detach())
    # ... and they get no gradient, while every kept position does.
    loss.backward()
    assert (logits.grad[~keep] == 0).all()
    assert (logits.grad[keep].abs().sum(-1) > 0).all()
    # Not vacuous: scored as a real token instead, the padding does change the loss.
    assert lm_loss(logits, y.masked_fill(~keep, 0)).item() != pytest.approx(loss.item())


def test_ignore_index_through_the_model():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=V, context_length=8, n_embed=16, n_head=2, n_layer=1))
    x = torch.randint(V, (B, T), generator=torch.Generator().manual_seed(3))
    y = padded_targets()
    logits, loss = model(x, y)
    keep = y != IGNORE_INDEX
    assert_close(loss, F.cross_entropy(logits[keep], y[keep]))


# --- units ------------------------------------------------------------------------------


def test_perplexity_of_uniform_guessing_is_V():
    assert perplexity(math.log(96)) == pytest.approx(96)
    assert perplexity(torch.tensor(0.0)) == 1.0


def test_bits_per_character():
    assert bits_per_character(math.log(2), 10, 10) == pytest.approx(1.0)
    # 4 nats per token, 2 characters per token: 2 nats per character.
    assert bits_per_character(4.0, 50, 100) == pytest.approx(2.0 / math.log(2))


# --- the loss at initialisation ---------------------------------------------------------


TEXT = guide_text()
CHAR = CharTokenizer.from_text(TEXT)
DATA = torch.tensor(CHAR.encode(TEXT))


@pytest.mark.parametrize(
    "config",
    [
        GPTConfig(vocab_size=CHAR.vocab_size, context_length=32),
        GPTConfig(vocab_size=CHAR.vocab_size, context_length=32, tie_weights=True),
        GPTConfig(
            vocab_size=CHAR.vocab_size,
            context_length=32,
            layers=(CausalSpec(64, 4, 32, per_head=True),) * 2,
        ),
        GPTConfig(vocab_size=512, context_length=16, n_embed=32, n_head=2, n_layer=3),
    ],
    ids=["char", "char-tied", "char-per-head", "V512"],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_fresh_model_loss_is_about_ln_V(config, seed):
    torch.manual_seed(seed)
    model = GPT(config)
    x, y = get_batch(DATA, 16, 16, generator=torch.Generator().manual_seed(seed))
    if config.vocab_size != CHAR.vocab_size:
        y = torch.randint(config.vocab_size, y.shape, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        _, loss = model(x, y)
    assert abs(loss.item() - math.log(config.vocab_size)) < 0.05


def test_large_init_starts_far_above_ln_V():
    # The check is not vacuous: a careless init fails it by a wide margin.
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=CHAR.vocab_size, context_length=32))
    torch.nn.init.normal_(model.lm_head.weight, std=1.0)
    x, y = get_batch(DATA, 16, 16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert model(x, y)[1].item() > math.log(CHAR.vocab_size) + 1


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("logits", "y", "error", "message"),
    [
        (
            randn(B, T, V),
            targets()[:, :-1],
            ValueError,
            "targets shape (3, 4) must equal the logits' (B, T) = (3, 5): one target per position",
        ),
        (
            randn(B, T, V),
            targets().float(),
            TypeError,
            "targets must be an integer tensor of ids, got torch.float32",
        ),
        (randn(B * T, V), targets(), ValueError, "logits must have shape (B, T, V), got (15, 7)"),
        (
            randn(B, T, V),
            targets().index_fill(1, torch.tensor([2]), V),
            ValueError,
            "target 7 at (b=0, t=2) is neither a token id for vocab_size=7 nor ignore_index=-100",
        ),
        (
            randn(B, T, V),
            torch.full((B, T), -1),
            ValueError,
            "target -1 at (b=0, t=0) is neither a token id",
        ),
        (
            randn(B, T, V),
            torch.full((B, T), IGNORE_INDEX),
            ValueError,
            "every target is ignore_index (-100)",
        ),
    ],
    ids=["shape", "float", "2-D logits", "id >= V", "negative", "all ignored"],
)
def test_bad_targets(logits, y, error, message):
    with pytest.raises(error, match=re.escape(message)):
        lm_loss(logits, y)


def test_model_reports_mismatched_targets():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=V, context_length=8, n_embed=16, n_head=2, n_layer=1))
    x = torch.zeros(2, 8, dtype=torch.long)
    message = "targets shape (2, 7) must equal the logits' (B, T) = (2, 8)"
    with pytest.raises(ValueError, match=re.escape(message)):
        model(x, x[:, 1:])
