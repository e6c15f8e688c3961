"""Text to learn from: a copy of this guide's own pages, and a synthetic language.

The synthetic language is a Markov chain over a small alphabet: each character
depends only on the one before it, through a transition matrix drawn from a
fixed seed. Because that matrix is known, so is the language's entropy rate: the
lowest average loss per character any model can reach.
"""

# --8<-- [start:imports]
import bisect
import itertools
import math
import random
from dataclasses import dataclass
from pathlib import Path

# --8<-- [end:imports]

__all__ = ["GUIDE_SNAPSHOT", "guide_text", "MarkovLanguage"]

# A frozen copy of docs/index.md, docs/conventions.md and docs/attention.md, joined.
# A copy, not the live pages: numbers printed from it must not change whenever a
# page is edited (least of all the page that prints them).
# In the checkout it sits in data/; the installed package has it in snippets/texts/.
_PACKAGE = Path(__file__).resolve().parents[1]  # snippets/, installed or not
DATA = (
    _PACKAGE / "texts"
    if (_PACKAGE / "texts").is_dir()
    else _PACKAGE.parent / "data"
)
GUIDE_SNAPSHOT = DATA / "guide-snapshot.txt"


def guide_text() -> str:
    """The snapshot of the guide's pages: English prose, Markdown, math and code."""
    return GUIDE_SNAPSHOT.read_text(encoding="utf-8")


# --8<-- [start:markov]
@dataclass(frozen=True)
class MarkovLanguage:
    """Text in which each character depends only on the previous one.

    Attributes:
        alphabet: the characters, each once.
        transitions: (n, n) rows of probabilities, n = len(alphabet):
            `transitions[i][j]` is the probability that `alphabet[j]` follows
            `alphabet[i]`.
    """

    alphabet: str
    transitions: tuple[tuple[float, ...], ...]

    @classmethod
    def random(
        cls, alphabet: str, concentration: float = 0.3, seed: int = 0
    ) -> "MarkovLanguage":
        """Rows drawn from a Dirichlet(concentration) distribution, seeded.

        A concentration below 1 peaks most rows on a few successors, so the language
        is far from uniform: its entropy rate is well below ln(len(alphabet)).

        Args:
            alphabet: at least 2 characters, none repeated.
            concentration: the Dirichlet parameter, > 0.
            seed: the seed of the standard library's generator.

        Returns:
            A MarkovLanguage, the same for the same arguments on any machine.

        Raises:
            ValueError: the alphabet is too short or repeats a character, or
                concentration is not positive.
        """
        if len(set(alphabet)) != len(alphabet) or len(alphabet) < 2:
            raise ValueError(
                f"alphabet ({alphabet!r}) must hold at least 2 characters, "
                f"none repeated"
            )
        if not concentration > 0:
            raise ValueError(f"concentration ({concentration}) must be positive")
        rng = random.Random(seed)  # the standard library's: same draws everywhere
        rows = []
        for _ in alphabet:
            # Normalised Gamma draws are a Dirichlet draw. Every entry is > 0, so
            # any character can follow any other: a single stationary law exists.
            draws = [rng.gammavariate(concentration, 1.0) for _ in alphabet]
            rows.append(tuple(d / sum(draws) for d in draws))
        return cls(alphabet, tuple(rows))

    def stationary(self) -> list[float]:
        """pi with pi = pi P: how often each character occurs in a long text.

        Returns:
            n probabilities, in the order of the alphabet.
        """
        n = len(self.alphabet)
        P = self.transitions
        pi = [1.0 / n] * n
        for _ in range(10_000):  # power iteration; here well under 100 steps
            new = [sum(pi[i] * P[i][j] for i in range(n)) for j in range(n)]
            if max(abs(a - b) for a, b in zip(new, pi, strict=True)) < 1e-15:
                return new
            pi = new
        raise RuntimeError("the stationary distribution did not converge")

    def entropy_rate(self) -> float:
        """H = -sum_i pi_i sum_j P_ij ln P_ij, in nats per character.

        The expected surprise at the next character given the previous one: no
        model, however large, can average a lower cross-entropy on this text.
        """
        pi = self.stationary()
        return -sum(
            pi[i] * sum(p * math.log(p) for p in row if p > 0)
            for i, row in enumerate(self.transitions)
        )

    def sample(self, n_chars: int, seed: int = 0) -> str:
        """n_chars characters of text, the first drawn from the stationary pi.

        Args:
            n_chars: the length of the text, a positive int.
            seed: the seed of the standard library's generator.

        Raises:
            ValueError: n_chars is not a positive int.
        """
        if type(n_chars) is not int or n_chars <= 0:
            raise ValueError(f"n_chars ({n_chars!r}) must be a positive int")
        rng = random.Random(seed)

        def draw(probabilities) -> int:
            # Inverse-CDF sampling: the first index whose cumulative sum exceeds u.
            cumulative = list(itertools.accumulate(probabilities))
            return bisect.bisect(cumulative, rng.random() * cumulative[-1])

        # Starting from pi puts the chain in its long-run state at once: every
        # character's entropy given the one before is then exactly H.
        current = draw(self.stationary())
        out = [current]
        for _ in range(n_chars - 1):
            current = draw(self.transitions[current])
            out.append(current)
        return "".join(self.alphabet[i] for i in out)


# --8<-- [end:markov]
