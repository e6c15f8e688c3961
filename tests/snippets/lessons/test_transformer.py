"""The transformer page's lesson GPT is the package's plain GPT: the same
parameter names, the same initial weights from the same seed, the same logits and
loss."""

import pytest
import torch

from snippets.core import model as library
from snippets.lessons import transformer as lesson


@pytest.mark.parametrize("tie", [False, True])
def test_the_lesson_gpt_is_the_package_s_plain_gpt(tie):
    sizes = {"vocab_size": 40, "context_length": 12, "n_embed": 32, "n_head": 4}
    sizes |= {"n_layer": 2, "tie_weights": tie}
    torch.manual_seed(0)
    mine = lesson.GPT(lesson.GPTConfig(**sizes))
    torch.manual_seed(0)
    theirs = library.GPT(library.GPTConfig(**sizes))
    ours, ref = mine.state_dict(), theirs.state_dict()
    assert list(ours) == list(ref)
    assert all(torch.equal(ours[k], ref[k]) for k in ours)  # same init, same seed
    assert sum(p.numel() for p in mine.parameters()) == library.parameter_count(theirs.config)
    idx = torch.randint(0, 40, (3, 12), generator=torch.Generator().manual_seed(1))
    targets = torch.roll(idx, -1, dims=1)
    logits, loss = mine(idx, targets)
    ref_logits, ref_loss = theirs(idx, targets)
    assert torch.equal(logits, ref_logits)
    assert torch.equal(loss, ref_loss)
    assert mine(idx[:, :5])[1] is None


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize(
    "sizes",
    [
        (96, 32, 64, 4, 2),  # the page's model
        (40, 12, 32, 4, 3),
        (7, 5, 12, 3, 1),  # C not a power of two, one block
        (50257, 1024, 8, 2, 1),  # GPT-2's vocabulary and context
    ],
)
def test_the_hand_count_is_the_real_count_and_the_package_s(sizes, tie):
    names = ("vocab_size", "context_length", "n_embed", "n_head", "n_layer")
    kwargs = dict(zip(names, sizes, strict=True)) | {"tie_weights": tie}
    config = lesson.GPTConfig(**kwargs)
    counted = sum(p.numel() for p in lesson.GPT(config).parameters())
    assert lesson.parameter_count(config) == counted
    package = library.GPTConfig(**kwargs)
    assert lesson.parameter_count(config) == library.parameter_count(package)
