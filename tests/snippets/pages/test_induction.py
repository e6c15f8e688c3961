"""Tests for snippets/pages/induction.py: an induction head forms, measured against chance.

The trained model is the one docs/see-attention.py shows: lab.model_cache keeps it in
.cache/trained/ under the fingerprint of the code, so whichever of the site build and this
file runs first trains it, and the other loads it. The two models that must NOT form an
induction head (no causal mask; uniform attention) are trained here, each in a few seconds,
and the very check that passes on the real model must fail on them.

The threshold, 0.5: a head clears it when, averaged over every query of the second copy,
more than half of its attention goes to the one key of the 17 to 32 it can see that an
induction head would choose. Spreading attention evenly gives that key 0.042 on average
(uniform_induction_score(16, 32)), so 0.5 is 12 times chance; untrained heads stay near
chance (below 0.1, checked below), and a non-causal model reaches about 0.1.
"""

import pytest
import torch

import snippets.core.attention
from lab.model_cache import trained_induction
from snippets.pages.induction import (
    AttentionOnly,
    InductionConfig,
    induction_scores,
    previous_token_scores,
    repeated_tokens,
    train_induction,
    uniform_induction_score,
)

THRESHOLD = 0.5
P = 16  # the period of the held-out rows: one segment, repeated once
CONFIG = InductionConfig()


def held_out(config: InductionConfig = CONFIG) -> torch.Tensor:
    """256 rows of P distinct tokens repeated once, never seen in training."""
    generator = torch.Generator().manual_seed(123)
    return repeated_tokens(256, config.context_length, config.vocab_size, P, None, generator)


@torch.no_grad()
def scores_of(model: AttentionOnly) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(induction (L, H), previous token (L, H), loss on the second copies)."""
    idx = held_out(model.config)
    logits, weights = model(idx)
    V = model.config.vocab_size
    second = torch.nn.functional.cross_entropy(
        logits[:, P:-1].reshape(-1, V), idx[:, P + 1 :].reshape(-1)
    )
    return induction_scores(weights, P), previous_token_scores(weights), second.item()


def assert_has_induction_head(induction: torch.Tensor) -> None:
    """The check of this file: some head's induction score clears THRESHOLD."""
    best = induction.max().item()
    assert best >= THRESHOLD, (
        f"no induction head: the best head scores {best:.3f} < {THRESHOLD} "
        f"(uniform attention: {uniform_induction_score(P, CONFIG.context_length):.3f}); "
        f"scores per layer and head:\n{induction}"
    )


@pytest.fixture(scope="module")
def trained():
    model, losses = trained_induction(CONFIG)
    return model, losses, *scores_of(model)


# --- data -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{"min_period": 1}, {"min_period": 10, "max_period": 8}, {"max_period": 27}],
)
def test_config_rejects_bad_periods(kwargs):
    with pytest.raises(ValueError, match="min_period"):
        InductionConfig(**kwargs)


# --- the model and the scores -----------------------------------------------------------


def test_model_shapes_and_causality():
    torch.manual_seed(0)
    model = AttentionOnly(CONFIG).eval()
    idx = held_out()[:2]
    logits, weights = model(idx)
    T = CONFIG.context_length
    assert logits.shape == (2, T, CONFIG.vocab_size)
    assert weights.shape == (2, CONFIG.n_layer, CONFIG.n_head, T, T)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 4, T))
    assert (weights.triu(diagonal=1) == 0).all()
    changed = idx.clone()
    changed[:, 20:] = (changed[:, 20:] + 1) % CONFIG.vocab_size
    assert torch.equal(model(changed)[0][:, :20], logits[:, :20])


def test_scores_on_hand_made_weights():
    T = 32
    t = torch.arange(T)
    induction = torch.zeros(1, 1, 1, T, T)
    induction[..., t[P:], t[P:] - P + 1] = 1.0  # every later query on its induction key
    previous = torch.zeros(1, 1, 1, T, T)
    previous[..., t[1:], t[1:] - 1] = 1.0
    uniform = torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]
    uniform = uniform.expand(1, 1, 1, T, T)
    assert induction_scores(induction, P).item() == 1.0
    assert induction_scores(previous, P).item() == 0.0
    assert previous_token_scores(previous).item() == 1.0
    assert induction_scores(uniform, P).item() == pytest.approx(uniform_induction_score(P, T))
    with pytest.raises(ValueError, match="period"):
        induction_scores(uniform, T)


def test_threshold_is_far_above_chance_and_untrained_heads():
    chance = uniform_induction_score(P, CONFIG.context_length)
    assert THRESHOLD >= 10 * chance
    for seed in range(3):
        torch.manual_seed(seed)
        induction, previous, _ = scores_of(AttentionOnly(CONFIG).eval())
        assert induction.max() < 0.1, (seed, induction)
        with pytest.raises(AssertionError, match="no induction head"):
            assert_has_induction_head(induction)


# --- the measured phenomenon ------------------------------------------------------------


def test_trained_model_has_an_induction_head(trained):
    model, losses, induction, previous, second_copy = trained
    assert_has_induction_head(induction)
    # ...in the second layer: it needs the first layer's previous-token heads.
    layer, _ = divmod(int(induction.argmax()), CONFIG.n_head)
    assert layer == 1, induction
    assert previous[0].max() > 0.3, previous
    # And the model uses it: the repeated tokens are predicted almost exactly.
    assert second_copy < 0.2, second_copy
    assert len(losses) == CONFIG.steps and losses[-1] < losses[0] / 2


def test_no_induction_head_without_the_causal_mask(monkeypatch):
    """Let every position see every other: the model reads the answer at t + 1 directly,
    and no head needs to find the earlier copy."""
    T = CONFIG.context_length
    monkeypatch.setattr(  # the layer's mask: every query sees every key
        snippets.core.attention,
        "visible",
        lambda q_pos, k_pos: torch.ones(q_pos.numel(), k_pos.numel(), dtype=torch.bool),
    )
    model, _ = train_induction(CONFIG)
    induction, _, second_copy = scores_of(model)
    with torch.no_grad():
        _, weights = model(held_out())
    t = torch.arange(T - 1)
    next_token = weights[..., t, t + 1].mean(dim=(0, -1))  # (L, H): looking ahead
    assert next_token.max() > 0.5, next_token
    assert second_copy < 0.2  # it still predicts, by looking at the answer
    with pytest.raises(AssertionError, match="no induction head"):
        assert_has_induction_head(induction)


def test_no_induction_head_with_uniform_attention(monkeypatch):
    """Replace the attention weights by uniform ones over the allowed keys."""

    def uniform(q, k, v, mask=None, *, bias=None):  # bias: ALiBi, None here
        allowed = mask.to(v.dtype)  # (T, T)
        weights = (allowed / allowed.sum(-1, keepdim=True)).expand(*q.shape[:-1], -1)
        return weights @ v, weights

    monkeypatch.setattr(snippets.core.attention, "scaled_dot_product_attention", uniform)
    # The weights no longer depend on any parameter, so a short training shows the same
    # weights a long one would.
    model, _ = train_induction(InductionConfig(steps=20))
    induction, _, second_copy = scores_of(model)
    chance = uniform_induction_score(P, CONFIG.context_length)
    torch.testing.assert_close(induction, torch.full_like(induction, chance))
    assert second_copy > 2.0  # without attention that chooses, no copying
    with pytest.raises(AssertionError, match="no induction head"):
        assert_has_induction_head(induction)
