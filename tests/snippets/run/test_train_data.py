"""Tests for snippets/run/train_data.py: the corpus a run reads and the batches of each step."""

import dataclasses
import math

import pytest
import torch

from snippets.run.train import TrainConfig
from snippets.run.train_data import MARKOV, load_corpus, markov_loss, micro_batches, val_windows

TINY = TrainConfig(corpus_chars=20_000, steps=12, batch_size=8, context_length=16, warmup_steps=3)


def test_markov_corpus_knows_its_best_loss_and_holds_out_other_text():
    corpus = load_corpus("markov", 20_000)
    assert corpus.best_loss == pytest.approx(MARKOV.entropy_rate())
    assert len(corpus.train) == 20_000 and len(corpus.val) == 20_000  # at least 20,000
    assert not torch.equal(corpus.train[:1000], corpus.val[:1000])  # another seed
    assert int(corpus.train.max()) < corpus.tokenizer.vocab_size


def test_guide_corpus_holds_out_its_last_tenth():
    corpus = load_corpus("guide")
    assert corpus.best_loss is None
    total = len(corpus.train) + len(corpus.val)
    assert len(corpus.val) == total - int(0.9 * total)


def test_unknown_corpus_is_refused():
    with pytest.raises(ValueError, match=r"corpus \('shakespeare'\) must be 'markov' or 'guide'"):
        load_corpus("shakespeare")


def test_markov_loss_is_near_the_entropy_rate_on_its_own_text():
    x, y = val_windows(load_corpus("markov", 20_000).val, 64, 64)
    assert x.shape == y.shape == (64, 64) and torch.equal(x[:, 1:], y[:, :-1])
    assert math.isclose(markov_loss(x, y), MARKOV.entropy_rate(), abs_tol=0.05)


def test_micro_batches_cut_one_batch_whatever_grad_accum_and_processes():
    corpus = load_corpus("markov", 20_000)
    windows = {}
    for accum, world in ((1, 1), (4, 1), (2, 2), (1, 4)):
        config = dataclasses.replace(TINY, grad_accum=accum)
        shares = [
            micro_batches(corpus.train, config, torch.Generator().manual_seed(0), r, world)
            for r in range(world)
        ]
        # Micro-step by micro-step, the processes' slices put back together.
        x = torch.cat([torch.cat([s[i][0] for s in shares]) for i in range(accum)])
        windows[accum, world] = x
        assert all(len(s) == accum for s in shares)
    first = windows[1, 1]
    assert first.shape == (TINY.batch_size, TINY.context_length)
    for x in windows.values():
        assert torch.equal(x, first)
    with pytest.raises(ValueError, match=r"batch_size // grad_accum \(8\) must be divisible"):
        micro_batches(corpus.train, TINY, torch.Generator(), 0, 3)
