"""Tests for snippets/core/masks.py: which keys each kind of layer sees, the
cache that keeps only those, the schedule, and Llama 4's NoPE temperature."""

import re

import pytest
import torch

from snippets.core.cache import LayerCache
from snippets.core.masks import (
    causal_mask,
    nope_temperature,
    repeat_schedule,
    sliding_window_mask,
    visible,
)

T = 20


def test_full_is_causal_and_window_is_the_masks_page_sliding_window():
    t = torch.arange(T)
    assert torch.equal(visible(t, t), causal_mask(T))
    for window in (1, 3, 8, T + 5):
        assert torch.equal(visible(t, t, "window", window), sliding_window_mask(T, window))


def test_a_chunk_layer_sees_its_own_chunk_up_to_itself():
    t = torch.arange(T)
    mask = visible(t, t, "chunk", 8)
    assert mask[7].sum() == 8 and mask[8].sum() == 1  # the last of chunk 0, the first of 1
    assert mask[8, 7].item() is False  # the chunk boundary: no key of the last chunk
    assert torch.equal(mask, mask & causal_mask(T))
    assert [int(row.sum()) for row in mask] == [i % 8 + 1 for i in range(T)]


def test_positions_not_squares_a_decode_step_sees_the_same_keys():
    t = torch.arange(T)
    for kind, size in (("full", None), ("window", 5), ("chunk", 8)):
        whole = visible(t, t, kind, size)
        assert torch.equal(visible(t[-3:], t, kind, size), whole[-3:])


@pytest.mark.parametrize("kind, size, kept", [("full", None, T), ("window", 5, 4), ("chunk", 8, 4)])
def test_the_cache_keeps_what_the_next_query_can_see(kind, size, kept):
    cache = LayerCache(kind, size)
    k = torch.arange(float(T)).view(1, 1, T, 1)  # key t holds the number t
    for start in range(0, T, 3):  # steps of 3 positions, the last of 2
        (keys,), positions = cache.update(k[:, :, start : start + 3])
        assert torch.equal(keys.flatten().long(), positions)  # tensors and positions agree
    assert cache.seen == T and len(cache) == kept
    # Exactly the keys position T may see, its own key aside.
    assert cache.positions.tolist() == [
        p for p in range(T) if visible(torch.tensor([T]), torch.tensor([p]), kind, size).item()
    ]


def test_repeat_schedule_gives_the_published_patterns():
    assert repeat_schedule(["window"] * 5 + ["full"], 12).count("full") == 2
    assert repeat_schedule(["window", "full"], 4) == ["window", "full", "window", "full"]


def test_nope_temperature_is_one_then_grows_like_a_log():
    t = torch.arange(40)
    warm = nope_temperature(t, floor_scale=8, attn_scale=0.1)
    assert (warm[:7] == 1).all() and warm[7] > 1  # (7 + 1) // 8 = 1
    assert torch.equal(warm[8:15], warm[7].expand(7))  # constant within a floor
    assert warm[39].item() == pytest.approx(1 + 0.1 * torch.log1p(torch.tensor(5.0)).item())


@pytest.mark.parametrize(
    "make, error, message",
    [
        (
            lambda: visible(torch.arange(3), torch.arange(3), "local", 2),
            ValueError,
            "kind ('local')",
        ),
        (
            lambda: visible(torch.arange(3), torch.arange(3), "window", 0),
            ValueError,
            "size of a window layer (0) must be positive",
        ),
        (
            lambda: LayerCache("chunk"),
            TypeError,
            "size of a chunk layer (None) must be an int, got NoneType",
        ),
        (lambda: repeat_schedule([], 3), ValueError, "pattern ([]) must be a non-empty list"),
        (lambda: repeat_schedule(["full"], 2.0), TypeError, "n_layer (2.0) must be an int"),
        (lambda: nope_temperature(torch.arange(3), 0, 0.1), ValueError, "floor_scale (0)"),
    ],
)
def test_bad_input_names_the_value(make, error, message):
    with pytest.raises(error, match=re.escape(message)):
        make()
