"""The attention pages' pictures show what the pages compute."""

import re

import torch

from lab import attention_figures
from lab.shared.common import ROOT

PAGE = ROOT / "docs" / "attention.md"


def page_matrices() -> dict[str, list[list[float]]]:
    """X, W_Q, W_K and W_V as the first attention page's worked example types them."""
    text = PAGE.read_text(encoding="utf-8")
    found = {}
    for name in attention_figures.EXAMPLE:
        match = re.search(rf"^{name} = torch\.tensor\(\s*(\[\[.*?\]\])\s*\)", text, re.M | re.S)
        assert match, f"{name} = torch.tensor(...) not found in {PAGE.name}"
        found[name] = eval(match[1])  # a literal list of lists of numbers
    return found


def test_the_figure_draws_the_page_s_worked_example():
    assert page_matrices() == attention_figures.EXAMPLE


def test_the_figure_s_numbers_are_the_hand_computed_ones():
    t = attention_figures.example_tensors()
    assert t["scores"][3].tolist() == [3.0, 2.0, 3.0, 2.0]
    # Row 1 by hand: scores 2 and 4 over sqrt(2); the first key's share is 1 / (1 + e^sqrt 2).
    share = 1 / (1 + torch.exp(torch.tensor(2**0.5)))
    torch.testing.assert_close(t["weights"][1, :2], torch.stack([share, 1 - share]))
    torch.testing.assert_close(t["out"][2], torch.tensor([4 / 3, 5 / 3]))
