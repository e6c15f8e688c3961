"""Tests for snippets/core/rope_scaling.py: each rule's frequencies are transformers' own
(modeling_rope_utils), and each rule does what it is for."""

import math
import re

import pytest
import torch
from torch.testing import assert_close

from snippets.core.positions import apply_rope, rope_frequencies
from snippets.core.rope_scaling import RopeSpec, frequencies, rotate

D, BASE, L = 64, 500000.0, 64
SPECS = {
    "default": ({}, RopeSpec(base=BASE)),
    "linear": ({"factor": 4.0}, RopeSpec(base=BASE, scaling="linear", factor=4.0)),
    "dynamic": (
        {"factor": 2.0},
        RopeSpec(base=BASE, scaling="dynamic", factor=2.0, original_length=L),
    ),
    "yarn": (
        {"factor": 8.0, "original_max_position_embeddings": L, "beta_fast": 32.0, "beta_slow": 1.0},
        RopeSpec(base=BASE, scaling="yarn", factor=8.0, original_length=L),
    ),
    "llama3": (
        {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": L,
        },
        RopeSpec(base=BASE, scaling="llama3", factor=8.0, original_length=L),
    ),
}


@pytest.mark.parametrize("scaling", list(SPECS))
@pytest.mark.parametrize("T", [None, 4 * L])
@pytest.mark.parametrize("partial", [1.0, 0.25])
def test_frequencies_equal_transformers_rope_init(scaling, T, partial):
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params, spec = SPECS[scaling]
    rope = {"rope_type": scaling, "rope_theta": BASE, **params}
    if partial != 1.0:
        rope["partial_rotary_factor"] = partial
        spec = RopeSpec(**{**spec.__dict__, "rotary_dim": int(D * partial)})
    config = transformers.LlamaConfig(
        hidden_size=2 * D,
        num_attention_heads=2,
        head_dim=D,
        max_position_embeddings=L if scaling == "dynamic" else 8 * L,
        rope_parameters=rope,
    )
    init = ROPE_INIT_FUNCTIONS.get(scaling)
    if init is None:  # "default" has no entry: the plain frequencies
        theirs, their_factor = rope_frequencies(int(D * partial), BASE).float(), 1.0
    else:
        theirs, their_factor = init(config, "cpu", seq_len=T)
    ours, our_factor = frequencies(spec, D, T)
    assert ours.dtype == torch.float64 and ours.shape == theirs.shape
    assert_close(ours.float(), theirs, rtol=1e-6, atol=0)  # their float32 digits
    assert our_factor == pytest.approx(their_factor, rel=1e-12)


def test_linear_turns_position_t_as_t_over_factor():
    theta, _ = frequencies(RopeSpec(scaling="linear", factor=4.0), D)
    assert_close(100 * theta, 25 * rope_frequencies(D), rtol=1e-12, atol=0)


def test_dynamic_changes_nothing_up_to_the_training_length_and_slows_after():
    spec = RopeSpec(scaling="dynamic", factor=2.0, original_length=L)
    plain = rope_frequencies(D)
    assert_close(frequencies(spec, D, L)[0], plain, rtol=1e-12, atol=0)
    longer = frequencies(spec, D, 4 * L)[0]
    assert longer[0] == plain[0]  # the fastest pair keeps theta_0 = 1
    assert (longer[1:] < plain[1:]).all()  # the others slow down
    assert (longer[1:] / plain[1:]).diff().le(0).all()  # the slower, the more


@pytest.mark.parametrize("scaling", ["yarn", "llama3"])
def test_fast_pairs_kept_slow_pairs_interpolated(scaling):
    long = 8192  # Llama 3.1's training length: pairs on both sides of the ramp
    spec = RopeSpec(**{**SPECS[scaling][1].__dict__, "original_length": long})
    plain = rope_frequencies(D, BASE)
    theta, _ = frequencies(spec, D)
    turns = long * plain / (2 * math.pi)  # turns over the training length
    fast, slow = turns > 32, turns < 1  # yarn's beta_fast and beta_slow
    if scaling == "llama3":  # by wavelength against L / 4 and L / 1
        fast, slow = turns > 4, turns < 1
    assert fast.any() and slow.any()
    assert_close(theta[fast], plain[fast], rtol=1e-12, atol=0)
    assert_close(theta[slow], plain[slow] / spec.factor, rtol=1e-12, atol=0)
    between = ~fast & ~slow
    assert ((theta[between] < plain[between]) & (theta[between] > plain[between] / 8)).all()


def test_yarn_attention_factor_is_the_papers():
    spec = SPECS["yarn"][1]
    assert frequencies(spec, D)[1] == pytest.approx(0.1 * math.log(8.0) + 1)
    deepseek = RopeSpec(
        scaling="yarn", factor=40.0, original_length=L, mscale=1.0, mscale_all_dim=1.0
    )
    assert frequencies(deepseek, D)[1] == 1.0  # the ratio of two equal mscales


def test_partial_rotation_turns_only_the_first_channels():
    x = torch.randn(2, 3, 10, D, generator=torch.Generator().manual_seed(0))
    spec = RopeSpec(rotary_dim=16)
    y = rotate(x, spec, offset=5)
    assert torch.equal(y[..., 16:], x[..., 16:])
    assert_close(y[..., :16], apply_rope(x[..., :16], 5), rtol=0, atol=0)
    assert (y[..., :16] - x[..., :16]).abs().max() > 0.1


def test_rotate_multiplies_the_turned_channels_by_the_attention_factor():
    x = torch.randn(1, 1, 6, D, generator=torch.Generator().manual_seed(0))
    spec = SPECS["yarn"][1]
    theta, factor = frequencies(spec, D)
    assert_close(rotate(x, spec), factor * apply_rope(x, theta=theta), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: RopeSpec(scaling="ntk"), "scaling ('ntk') must be one of"),
        (lambda: RopeSpec(factor=0.5), "factor (0.5) must be >= 1"),
        (lambda: RopeSpec(scaling="yarn", factor=2.0), "scaling='yarn' needs original_length"),
        (lambda: RopeSpec(rotary_dim=5), "rotary_dim (5) must be a positive even int"),
        (
            lambda: frequencies(RopeSpec(rotary_dim=96), D),
            "rotary_dim (96) must be <= head_size (64)",
        ),
        (lambda: apply_rope(torch.zeros(3, 8), theta=torch.ones(3)), "theta has shape (3,)"),
    ],
)
def test_bad_input_names_the_value(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()
