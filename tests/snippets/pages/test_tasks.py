"""Tests for snippets/pages/tasks.py: the rows are what the docstrings say, and each floor is
the loss of the best possible predictor, checked against that predictor run on rows.

The floors are formulas; the checks here compute the Bayes-optimal loss target by target
from generated rows (what a perfect model would pay, knowing how the rows are made) and
compare the two, so a generator and its floor cannot drift apart.
"""

import math

import pytest
import torch

from snippets.pages.tasks import (
    IGNORE,
    copy_floor,
    copy_targets,
    mqar,
    mqar_floor,
    repeated_tokens,
)

P = 16  # a fixed period


# --- copy / induction ------------------------------------------------------------------


def test_repeated_tokens_repeat_a_segment_of_distinct_tokens():
    generator = torch.Generator().manual_seed(0)
    rows = repeated_tokens(64, 40, 26, 4, 16, generator)
    assert rows.shape == (64, 40) and rows.dtype == torch.long
    assert 0 <= rows.min() and rows.max() < 26
    periods = set()
    for row in rows.tolist():
        period = next(p for p in range(4, 17) if row[p:] == row[:-p])
        assert len(set(row[:period])) == period  # distinct within the segment
        periods.add(period)
    assert len(periods) > 5  # the period changes from row to row


def test_repeated_tokens_fixed_period_and_seed():
    a = repeated_tokens(8, 32, 26, P, generator=torch.Generator().manual_seed(1))
    b = repeated_tokens(8, 32, 26, P, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    assert torch.equal(a[:, P:], a[:, :P])


def test_repeated_tokens_rejects_a_period_longer_than_the_vocabulary():
    with pytest.raises(ValueError, match=r"max_period \(30\) <= vocab_size \(26\)"):
        repeated_tokens(2, 32, 26, 4, 30)


def test_copy_targets_by_hand():
    tokens = torch.tensor([[5, 1, 7, 5, 1, 7, 5]])  # period 3
    # Targets are tokens 1..6; known from token 4 on (its token and the one before
    # were seen); token 3 (the second 5) could still have been new.
    expected = [[False, False, False, True, True, True]]
    assert copy_targets(tokens).tolist() == expected


def bayes_copy_losses(rows: torch.Tensor, V: int, periods: range) -> torch.Tensor:
    """What the best predictor pays on each target of each row, (B, L - 1) nats."""
    known = copy_targets(rows)  # the period is known: the copy is certain
    losses = torch.zeros(known.shape, dtype=torch.float64)
    for i in range(1, rows.size(1)):  # target i, from rows[:, :i]
        alive = [p for p in periods if p >= i]
        if not alive:
            break
        h = sum(p == i for p in alive) / len(alive)  # P(the segment ends at i)
        restart = rows[:, i] == rows[:, 0]
        pay_restart = -math.log(h) if h > 0 else math.inf
        pay_new = -math.log((1 - h) / (V - i)) if h < 1 else math.inf
        pay = torch.where(restart, pay_restart, pay_new)  # one of the V - i unseen
        losses[:, i - 1] = torch.where(known[:, i - 1], 0.0, pay)
    return losses


@pytest.mark.parametrize("V, lo, hi", [(32, 4, 16), (12, 1, 12), (20, 7, 7)])
def test_copy_floor_is_the_best_predictors_loss(V, lo, hi):
    L = 40
    rows = repeated_tokens(4000, L + 1, V, lo, hi, torch.Generator().manual_seed(2))
    measured = bayes_copy_losses(rows, V, range(lo, hi + 1))
    mean, error = measured.mean().item(), measured.mean(1).std().item() / 4000**0.5
    assert abs(copy_floor(L, V, lo, hi) - mean) < 4 * error + 1e-6  # float32 sums


def test_copy_floor_of_a_fixed_period_by_hand():
    # Period 5 known in advance: tokens 1-4 are new (ln(V - i) nats), the rest free.
    V, L = 10, 30
    by_hand = sum(math.log(V - i) for i in range(1, 5)) / L
    assert copy_floor(L, V, 5, 5) == pytest.approx(by_hand, rel=1e-12)


def test_copy_floor_rejects_bad_periods():
    with pytest.raises(ValueError, match=r"min_period \(9\) <= max_period \(8\)"):
        copy_floor(32, 16, 9, 8)


# --- MQAR ------------------------------------------------------------------------------


def test_mqar_rows_are_pairs_whose_later_keys_recall_their_first_value():
    n_keys, n_values, L = 20, 12, 48
    tokens, targets = mqar(256, L, n_keys, n_values, 2, 16, torch.Generator().manual_seed(3))
    assert tokens.shape == targets.shape == (256, L)
    keys, values = tokens[:, 0::2], tokens[:, 1::2]
    assert keys.min() >= 0 and keys.max() < n_keys
    assert values.min() >= n_keys and values.max() < n_keys + n_values
    assert torch.equal(targets[:, 0::2], values)  # at a key: its value is next
    assert (targets[:, 1::2] == IGNORE).all()
    pair_counts = set()
    for k_row, v_row in zip(keys.tolist(), values.tolist(), strict=True):
        first = {}
        for j, (k, v) in enumerate(zip(k_row, v_row, strict=True)):
            if k in first:
                assert first[k] == v  # recall: the value it had the first time
            else:
                assert j == len(first)  # new keys only open the row
                first[k] = v
        pair_counts.add(len(first))
    assert min(pair_counts) >= 2 and max(pair_counts) <= 16 and len(pair_counts) > 8


def test_mqar_is_seeded():
    a = mqar(4, 20, 8, 8, 3, generator=torch.Generator().manual_seed(5))
    b = mqar(4, 20, 8, 8, 3, generator=torch.Generator().manual_seed(5))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("lo, hi", [(1, 8), (6, 6), (2, 23)])
def test_mqar_floor_is_the_best_predictors_loss(lo, hi):
    n_values, L = 9, 48
    tokens, targets = mqar(4000, L, 30, n_values, lo, hi, torch.Generator().manual_seed(4))
    keys = tokens[:, 0::2]  # (B, n)
    n = keys.size(1)
    earlier = torch.ones(n, n, dtype=torch.bool).tril(-1)
    seen = ((keys.unsqueeze(2) == keys.unsqueeze(1)) & earlier).any(2)  # (B, n)
    # A seen key's value is certain; a new key's is one of n_values.
    losses = (~seen).float() * math.log(n_values)
    mean, error = losses.mean().item(), losses.mean(1).std().item() / 4000**0.5
    assert abs(mqar_floor(L, n_values, lo, hi) - mean) < 4 * error + 1e-6  # float32 sums


@pytest.mark.parametrize(
    "args, match",
    [
        ((2, 21, 8, 8, 3), r"length \(21\) must be even"),
        ((2, 20, 12, 8, 10), r"2 \* max_pairs \+ 2 \(22\)"),
        ((2, 40, 8, 8, 3, 9), r"max_pairs \(9\) <= n_keys \(8\)"),
        ((2, 40, 8, 0, 3), r"n_values \(0\) >= 1"),
        ((2, 40, 8, 8, 4, 3), r"min_pairs \(4\) <= max_pairs \(3\)"),
    ],
)
def test_mqar_rejects_bad_sizes(args, match):
    with pytest.raises(ValueError, match=match):
        mqar(*args)


def test_mqar_floor_rejects_more_pairs_than_slots():
    with pytest.raises(ValueError, match=r"max_pairs \(11\) <= length // 2 \(10\)"):
        mqar_floor(20, 8, 2, 11)


def test_mqar_in_order_replays_the_pairs():
    tokens, _ = mqar(8, 40, 16, 8, 5, generator=torch.Generator().manual_seed(6), in_order=1.0)
    assert torch.equal(tokens[:, 10:], tokens[:, :-10])  # period: 5 pairs
    shuffled, _ = mqar(8, 40, 16, 8, 5, generator=torch.Generator().manual_seed(6))
    assert not torch.equal(shuffled[:, 10:], shuffled[:, :-10])
