"""Tests for snippets/pages/tasks.py's Bigram-Backcopy: the rule, the chain, the best losses."""

import math
import re

import pytest
import torch
from torch.testing import assert_close

from snippets.pages.tasks import BOS, backcopy_best_losses, backcopy_chain, bigram_backcopy

V, N_TRIGGERS = 16, 3
FIRST_TRIGGER = V - N_TRIGGERS


def chain(seed=0, **options):
    return backcopy_chain(V, N_TRIGGERS, generator=torch.Generator().manual_seed(seed), **options)


def sample(batch=64, length=48, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return bigram_backcopy(batch, length, chain(), N_TRIGGERS, generator)


def test_the_chain_is_a_transition_matrix_with_its_trigger_rate():
    transitions = chain(trigger_rate=0.2)
    assert_close(transitions.sum(-1), torch.ones(V))
    assert (transitions[:, BOS] == 0).all()  # BOS never follows anything
    assert_close(transitions[:, FIRST_TRIGGER:].sum(-1), torch.full((V,), 0.2))


def test_after_a_trigger_comes_the_token_before_it():
    ids = sample()
    assert (ids[:, 0] == BOS).all() and (ids[:, 1:] != BOS).all()
    assert (ids[:, 1] < FIRST_TRIGGER).all()
    trigger = ids[:, 1:-1] >= FIRST_TRIGGER  # (B, T - 2): position t + 1 is a trigger
    assert trigger.sum() > 50  # the rule is exercised
    assert (ids[:, 2:][trigger] == ids[:, :-2][trigger]).all()


def test_elsewhere_the_bigram_chain_is_followed():
    # Over many draws after token a (not a trigger), next tokens have the chain's row a.
    transitions = chain()
    ids = bigram_backcopy(2000, 24, transitions, N_TRIGGERS, torch.Generator().manual_seed(2))
    prev, nxt = ids[:, 1:-1].flatten(), ids[:, 2:].flatten()
    a = 1
    counts = torch.bincount(nxt[prev == a], minlength=V).float()
    assert counts.sum() > 1000
    assert (counts / counts.sum() - transitions[a]).abs().max() < 0.05


def test_best_losses_are_zero_on_copies_and_the_chain_elsewhere():
    transitions, ids = chain(), sample()
    losses = backcopy_best_losses(ids, transitions, N_TRIGGERS)  # (B, T - 1)
    assert losses.shape == (ids.size(0), ids.size(1) - 1)
    after_trigger = ids[:, :-1] >= FIRST_TRIGGER
    assert (losses[after_trigger] == 0).all()
    assert_close(losses[:, 0], torch.full((ids.size(0),), math.log(FIRST_TRIGGER - 1)))
    t = 5
    b = (~after_trigger[:, t]).nonzero()[0, 0]
    expected = -transitions[ids[b, t], ids[b, t + 1]].log()
    assert_close(losses[b, t], expected)


def test_bad_sizes_are_rejected():
    with pytest.raises(
        ValueError, match=re.escape("n_triggers (14) must be in [1, vocab_size - 3 = 13]")
    ):
        backcopy_chain(V, 14)
    with pytest.raises(ValueError, match=re.escape("trigger_rate (1.0) must be in (0, 1)")):
        backcopy_chain(V, N_TRIGGERS, trigger_rate=1.0)
    with pytest.raises(ValueError, match=re.escape("length (1) must be >= 2")):
        bigram_backcopy(2, 1, chain(), N_TRIGGERS)
