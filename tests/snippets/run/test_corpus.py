"""Tests for snippets/run/corpus.py: the guide snapshot and the Markov language's entropy."""

import itertools
import math
import re

import numpy as np
import pytest

from snippets.run.corpus import GUIDE_SNAPSHOT, MarkovLanguage, guide_text

ALPHABET = " adeiklnost"


@pytest.fixture(scope="module")
def lang() -> MarkovLanguage:
    return MarkovLanguage.random(ALPHABET, concentration=0.3, seed=0)


def test_guide_snapshot_is_the_documented_text():
    text = guide_text()
    assert GUIDE_SNAPSHOT.name == "guide-snapshot.txt"
    # The tokens page prints these numbers and says where the text comes from.
    assert len(text) == 23_779
    assert text.startswith("# The attention guide\n")
    assert "# Attention, masks & heads" in text


def test_transition_rows_are_distributions(lang):
    assert len(lang.transitions) == len(ALPHABET)
    for row in lang.transitions:
        assert len(row) == len(ALPHABET)
        assert all(p > 0 for p in row)
        assert sum(row) == pytest.approx(1.0, abs=1e-12)


def test_same_seed_same_language_other_seed_other_language():
    assert MarkovLanguage.random(ALPHABET, seed=0) == MarkovLanguage.random(ALPHABET, seed=0)
    assert MarkovLanguage.random(ALPHABET, seed=0) != MarkovLanguage.random(ALPHABET, seed=1)


def test_stationary_distribution_against_numpy(lang):
    P = np.array(lang.transitions)
    # The left eigenvector of P for eigenvalue 1, computed independently.
    values, vectors = np.linalg.eig(P.T)
    pi = np.real(vectors[:, np.argmin(np.abs(values - 1))])
    pi = pi / pi.sum()
    assert np.allclose(lang.stationary(), pi, atol=1e-12)
    assert np.allclose(np.array(lang.stationary()) @ P, lang.stationary(), atol=1e-12)


def test_entropy_rate_against_numpy(lang):
    P = np.array(lang.transitions)
    pi = np.array(lang.stationary())
    expected = -(pi[:, None] * P * np.log(P)).sum()
    assert lang.entropy_rate() == pytest.approx(expected, rel=1e-12)
    assert 0 < lang.entropy_rate() < math.log(len(ALPHABET))


def test_uniform_chain_has_entropy_ln_V():
    V = 5
    uniform = MarkovLanguage("abcde", tuple(tuple([1 / V] * V) for _ in range(V)))
    assert uniform.entropy_rate() == pytest.approx(math.log(V), rel=1e-12)


def test_sample_surprise_averages_to_the_entropy_rate(lang):
    # The true chain's loss on its own text is H, up to sampling noise (~0.01 here).
    text = lang.sample(40_000, seed=3)
    index = {ch: i for i, ch in enumerate(ALPHABET)}
    ids = [index[ch] for ch in text]
    surprise = [-math.log(lang.transitions[a][b]) for a, b in itertools.pairwise(ids)]
    assert sum(surprise) / len(surprise) == pytest.approx(lang.entropy_rate(), abs=0.03)


def test_sample_frequencies_match_the_stationary_distribution(lang):
    text = lang.sample(40_000, seed=4)
    for ch, p in zip(ALPHABET, lang.stationary(), strict=True):
        assert text.count(ch) / len(text) == pytest.approx(p, abs=0.02)


def test_sample_is_reproducible():
    lang = MarkovLanguage.random("ab", seed=0)
    assert lang.sample(50, seed=1) == lang.sample(50, seed=1)
    assert lang.sample(50, seed=1) != lang.sample(50, seed=2)
    assert set(lang.sample(50, seed=1)) <= {"a", "b"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: MarkovLanguage.random("aab"),
            "alphabet ('aab') must hold at least 2 characters, none repeated",
        ),
        (lambda: MarkovLanguage.random("a"), "alphabet ('a') must hold at least 2 characters"),
        (
            lambda: MarkovLanguage.random("ab", concentration=0),
            "concentration (0) must be positive",
        ),
        (lambda: MarkovLanguage.random("ab").sample(0), "n_chars (0) must be a positive int"),
        (lambda: MarkovLanguage.random("ab").sample(2.5), "n_chars (2.5) must be a positive int"),
    ],
)
def test_bad_arguments(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()
