"""Tests for snippets/run/data.py: windows come from the stream, and y is x shifted by one."""

import re

import pytest
import torch

from snippets.run.data import get_batch


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_shapes_and_dtype():
    data = torch.arange(100)
    x, y = get_batch(data, batch_size=4, context_length=8, generator=generator())
    assert x.shape == y.shape == (4, 8)
    assert x.dtype == y.dtype == data.dtype


def test_y_is_x_shifted_and_both_come_from_the_stream():
    # A stream of distinct random ids: each window can be located in it exactly once.
    data = torch.randperm(500, generator=generator(1))
    position = {v: i for i, v in enumerate(data.tolist())}
    x, y = get_batch(data, batch_size=16, context_length=12, generator=generator(2))
    assert torch.equal(y[:, :-1], x[:, 1:])
    for row_x, row_y in zip(x, y, strict=True):
        i = position[row_x[0].item()]
        assert torch.equal(row_x, data[i : i + 12])
        assert torch.equal(row_y, data[i + 1 : i + 13])


def test_every_start_is_possible_and_none_runs_off_the_end():
    # T = 3 on a stream of 6: starts 0, 1 and 2 are the only valid ones.
    data = torch.arange(6)
    x, y = get_batch(data, batch_size=300, context_length=3, generator=generator())
    assert set(x[:, 0].tolist()) == {0, 1, 2}
    assert y.max().item() == 5


def test_stream_of_exactly_one_window():
    data = torch.arange(9)
    x, y = get_batch(data, batch_size=2, context_length=8)
    assert torch.equal(x, torch.arange(8).expand(2, 8))
    assert torch.equal(y, torch.arange(1, 9).expand(2, 8))


def test_generator_makes_batches_reproducible():
    data = torch.arange(1000)
    a = get_batch(data, 4, 8, generator=generator(3))
    b = get_batch(data, 4, 8, generator=generator(3))
    c = get_batch(data, 4, 8, generator=generator(4))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_stream_too_short():
    message = "data has 5 tokens; a window needs context_length + 1 = 9"
    with pytest.raises(ValueError, match=re.escape(message)):
        get_batch(torch.arange(5), batch_size=1, context_length=8)


@pytest.mark.parametrize(
    ("data", "got"),
    [
        (torch.zeros(10), "dtype torch.float32 with shape (10,)"),
        (torch.zeros(2, 10, dtype=torch.long), "dtype torch.int64 with shape (2, 10)"),
        (list(range(10)), "list"),
    ],
)
def test_stream_must_be_a_1d_integer_tensor(data, got):
    message = f"data must be a 1-D integer tensor of ids, got {got}"
    with pytest.raises(TypeError, match=re.escape(message)):
        get_batch(data, batch_size=1, context_length=4)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0, "context_length": 4}, "batch_size (0) must be a positive int"),
        ({"batch_size": 2, "context_length": 4.0}, "context_length (4.0) must be a positive int"),
        ({"batch_size": True, "context_length": 4}, "batch_size (True) must be a positive int"),
    ],
)
def test_bad_sizes(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        get_batch(torch.arange(10), **kwargs)
