"""The objectives page's lesson code computes what the package computes: the same
loss (and gradients) by hand and fused, the same units, and the entropy rate that
snippets.run.corpus computes in plain Python. The lesson has no input checks."""

import math

import pytest
import torch

from snippets.core import objectives as library
from snippets.lessons import objectives as lesson
from snippets.run.corpus import MarkovLanguage


def batch(B=3, T=7, V=11, ignored=0.3, seed=0):
    """Logits (B, T, V) and targets (B, T) with about `ignored` of them ignored."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=g) * 3
    targets = torch.randint(V, (B, T), generator=g)
    drop = torch.rand(B, T, generator=g) < ignored
    drop[0, 0] = False  # at least one target counts
    return logits, targets.masked_fill(drop, library.IGNORE_INDEX)


def test_the_padding_mark_is_the_package_s_and_torch_s():
    assert lesson.IGNORE_INDEX == library.IGNORE_INDEX == -100
    assert torch.nn.CrossEntropyLoss().ignore_index == lesson.IGNORE_INDEX


@pytest.mark.parametrize("ignored", [0.0, 0.3, 0.9])
@pytest.mark.parametrize("shape", [(3, 7, 11), (1, 1, 2), (2, 16, 96)])
def test_the_losses_and_their_gradients_equal_the_package_s(shape, ignored):
    logits, targets = batch(*shape, ignored=ignored)
    pairs = [
        (lesson.cross_entropy_by_hand, library.cross_entropy_by_hand),
        (lesson.lm_loss, library.lm_loss),
        (lesson.lm_loss, library.cross_entropy_by_hand),  # fused = by hand
    ]
    for mine, theirs in pairs:
        a = logits.clone().requires_grad_()
        b = logits.clone().requires_grad_()
        loss, ref = mine(a, targets), theirs(b, targets)
        torch.testing.assert_close(loss, ref)
        loss.backward()
        ref.backward()
        torch.testing.assert_close(a.grad, b.grad)
    # Another ignore_index, as both accept one.
    other = targets.masked_fill(targets == library.IGNORE_INDEX, -1)
    torch.testing.assert_close(
        lesson.lm_loss(logits, other, ignore_index=-1),
        library.lm_loss(logits, other, ignore_index=-1),
    )
    # A non-contiguous slice of logits, as the page's shift inside the loss makes.
    if shape[1] > 1 and (targets[:, 1:] != library.IGNORE_INDEX).any():
        shifted = logits[:, :-1], targets[:, 1:]
        torch.testing.assert_close(lesson.lm_loss(*shifted), library.lm_loss(*shifted))


@pytest.mark.parametrize("loss", [0.0, 1.503, math.log(96), torch.tensor(4.583)])
def test_the_units_equal_the_package_s(loss):
    assert lesson.perplexity(loss) == library.perplexity(loss)
    for n_tokens, n_chars in [(1, 1), (2780, 4000), (4000, 4000)]:
        mine = lesson.bits_per_character(loss, n_tokens, n_chars)
        assert mine == library.bits_per_character(loss, n_tokens, n_chars)


@pytest.mark.parametrize(
    ("alphabet", "concentration", "seed"),
    [
        (" adeiklnost", 0.3, 0),  # the page's language
        (" adeiklnost", 0.3, 1),
        ("ab", 1.0, 0),
        ("abcdefghijklmnopqrstuvwxyz ", 0.1, 3),  # peaked rows, slow to mix
        ("xyz", 5.0, 2),  # nearly uniform rows
    ],
)
def test_the_entropy_rate_equals_the_corpus_s(alphabet, concentration, seed):
    lang = MarkovLanguage.random(alphabet, concentration=concentration, seed=seed)
    P = torch.tensor(lang.transitions, dtype=torch.float64)
    mine = lesson.entropy_rate(P).item()
    assert mine == pytest.approx(lang.entropy_rate(), abs=1e-12)
    assert 0 < mine < math.log(len(alphabet))  # below uniform guessing's ln V


def test_the_entropy_rate_of_chains_known_by_hand():
    # Uniform rows: every next state equally likely, H = ln n.
    n = 5
    assert lesson.entropy_rate(torch.full((n, n), 1 / n, dtype=torch.float64)).item() == (
        pytest.approx(math.log(n), abs=1e-12)
    )
    # A chain that stays put with probability s: H is the entropy of (s, 1 - s) at
    # every state, whatever pi is; zero entries (j never follows i) add nothing.
    s = 0.9
    P = torch.tensor([[s, 1 - s, 0.0], [0.0, s, 1 - s], [1 - s, 0.0, s]], dtype=torch.float64)
    expected = -(s * math.log(s) + (1 - s) * math.log(1 - s))
    assert lesson.entropy_rate(P).item() == pytest.approx(expected, abs=1e-12)
    # pi weights the rows: a chain that mostly sits in the state with a certain
    # successor has a lower rate than the average of its rows.
    P = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)  # pi = (1, 0)
    assert lesson.entropy_rate(P).item() == pytest.approx(0.0, abs=1e-12)
