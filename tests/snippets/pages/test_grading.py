"""Tests for snippets/pages/grading.py, the tools the exercises grade with: an answer that raises
is reported with what it was given, a wrong shape or type is named, a mask's first wrong
entry is put in a learner's words, and the inputs are the same on every run."""

import pytest
import torch

from snippets.core.masks import causal_mask
from snippets.pages.grading import Raised, close, coded, mask_problem, qkv, run, shapes, tensor


def test_run_reports_the_error_and_the_shapes_it_was_given():
    with pytest.raises(Raised) as raised:
        run(lambda a, b, n=0: a @ b, torch.ones(2, 3), torch.ones(2, 3), n=4)
    message = str(raised.value)
    assert message.startswith("your function raised RuntimeError: ")
    assert message.endswith("(given tensor (2, 3), tensor (2, 3), 4)")
    assert run(lambda a: a + 1, 1) == 2
    assert shapes([(torch.ones(1), 2), "x"]) == "(tensor (1,), 2), 'x'"


def test_tensor_names_what_is_wrong():
    x = torch.ones(2, 3)
    assert tensor(x, (2, 3), "the mask") is x
    with pytest.raises(Raised, match=r"the mask should have shape \(3, 2\), got \(2, 3\)"):
        tensor(x, (3, 2), "the mask")
    with pytest.raises(Raised, match=r"return a torch.Tensor \(the mask\), got list"):
        tensor([1.0], (1,), "the mask")


def test_close_needs_the_shape_and_the_values():
    a = torch.tensor([1.0, 2.0])
    assert close(a + 1e-7, a) and not close(a + 1e-3, a)
    assert not close(a[None], a) and not close([1.0, 2.0], a)
    assert close(torch.tensor([float("-inf")]), torch.tensor([float("-inf")]))


@pytest.mark.parametrize(
    ("mask", "words"),
    [
        (causal_mask(4).float(), "should be a bool tensor"),
        (causal_mask(4).T, "is the transpose"),
        (torch.ones(4, 4, dtype=torch.bool).tril(1), "row 0 may see position 1, a later one"),
        (causal_mask(4) & ~torch.eye(4, dtype=torch.bool), "row 0 cannot see position 0 itself"),
        (torch.eye(4, dtype=torch.bool), "row 1 cannot see position 0, an earlier one"),
    ],
)
def test_mask_problem_names_the_first_wrong_entry(mask, words):
    assert words in mask_problem(mask, causal_mask(4), "the mask")


def test_mask_problem_of_the_right_mask_is_none():
    assert mask_problem(causal_mask(4), causal_mask(4), "the mask") is None
    window = causal_mask(4) & ~causal_mask(4).tril(-2)  # the last two keys only
    assert "row 2 may see position 0, which it must not" in mask_problem(
        causal_mask(4), window, "the mask"
    )


def test_coded_entries_spell_their_index():
    x = coded(2, 3, 4)
    assert x.dtype == torch.float64 and x.shape == (2, 3, 4)
    assert x[1, 2, 3] == 123 and x[0, 1, 0] == 10
    assert len(set(x.flatten().tolist())) == x.numel()


def test_qkv_is_seeded():
    q, k, v = qkv(0, 3, 5)
    assert (q.shape, k.shape, v.shape) == ((2, 2, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8))
    assert all(torch.equal(a, b) for a, b in zip(qkv(0, 3, 5), (q, k, v), strict=True))
    assert not torch.equal(qkv(1, 3, 5)[0], q)
