"""Tests for snippets/core/positions.py and the position schemes of the model.

Each scheme's defining property, measured; the experiment is tested in tests/lab/test_positions.py.
"""

import dataclasses
import math
import re

import pytest
import torch
from torch.testing import assert_close

from snippets.core.attention import CausalSelfAttention, CausalSpec
from snippets.core.model import GPT, GPTConfig, parameter_count
from snippets.core.positions import (
    POSITIONS,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    rope_frequencies,
    sinusoidal_positions,
)
from tests.snippets.equivalence import from_per_head


def randn(*shape: int, seed: int = 1, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# --- sinusoidal ---------------------------------------------------------------------------


def test_sinusoidal_table_values():
    table = sinusoidal_positions(5, 4)
    assert table.shape == (5, 4)
    assert torch.equal(table[0], torch.tensor([0.0, 1.0, 0.0, 1.0]))  # sin 0, cos 0
    # w_0 = 1, w_1 = 10000 ** (-2 / 4) = 1 / 100
    for t in range(5):
        expected = [math.sin(t), math.cos(t), math.sin(t / 100), math.cos(t / 100)]
        assert_close(table[t], torch.tensor(expected), atol=1e-7, rtol=0)


def test_sinusoidal_shift_is_one_linear_map_for_every_t():
    T, C, k = 200, 16, 7
    table = sinusoidal_positions(T + k, C).double()
    w = 10000.0 ** (-torch.arange(0, C, 2, dtype=torch.float64) / C)  # (C/2,)
    # (sin, cos)(t + k) = [[cos kw, sin kw], [-sin kw, cos kw]] (sin, cos)(t)
    M = torch.zeros(C, C, dtype=torch.float64)
    M[0::2, 0::2] = torch.diag((k * w).cos())
    M[0::2, 1::2] = torch.diag((k * w).sin())
    M[1::2, 0::2] = torch.diag(-(k * w).sin())
    M[1::2, 1::2] = torch.diag((k * w).cos())
    # Does not depend on t: one M for all rows. float32 table: 1e-6.
    assert_close(table[:T] @ M.T, table[k:], atol=1e-6, rtol=0)
    # And it is a map of the shift k: another k needs another M.
    assert (table[: T - 1] @ M.T - table[k + 1 :]).abs().max() > 1e-2


# --- RoPE ---------------------------------------------------------------------------------


def rope_at(x: torch.Tensor, position: int) -> torch.Tensor:
    """x (D,) rotated as the single row of a sequence starting at `position`."""
    return apply_rope(x.view(1, -1), offset=position)[0]


def test_rope_frequencies():
    theta = rope_frequencies(8, base=10000.0)
    expected = torch.tensor([1.0, 10.0**-1, 10.0**-2, 10.0**-3], dtype=torch.float64)
    assert_close(theta, expected, atol=1e-15, rtol=1e-12)


@pytest.mark.parametrize("m", [0, 1, 5, 37, 1000])
def test_rope_angles_of_position_m_are_m_times_theta(m):
    # A unit vector on channel 2i turns in the plane of channels (2i, 2i + 1),
    # counter-clockwise, by m * theta_i: its image is (cos, sin) there, 0 elsewhere.
    D = 8
    theta = rope_frequencies(D)
    for i in range(D // 2):
        e = torch.zeros(D, dtype=torch.float64)
        e[2 * i] = 1.0
        expected = torch.zeros(D, dtype=torch.float64)
        expected[2 * i] = math.cos(m * theta[i].item())
        expected[2 * i + 1] = math.sin(m * theta[i].item())
        assert_close(rope_at(e, m), expected, atol=1e-12, rtol=0)


def test_rope_at_position_zero_is_the_identity():
    x = randn(3, 10, 16)
    assert_close(apply_rope(x)[:, :1], x[:, :1], atol=0, rtol=0)
    assert_close(apply_rope(x, offset=0)[:, 0], x[:, 0], atol=0, rtol=0)


def test_rope_preserves_norms():
    x = randn(2, 4, 50, 32)
    assert_close(apply_rope(x, offset=100).norm(dim=-1), x.norm(dim=-1), atol=1e-5, rtol=1e-5)


def test_rope_score_depends_only_on_the_distance():
    D = 32
    g = torch.Generator().manual_seed(0)
    for trial in range(20):
        q, k = randn(D, seed=2 * trial), randn(D, seed=2 * trial + 1)
        m, n, shift = torch.randint(0, 2000, (3,), generator=g).tolist()
        score = rope_at(q, m) @ rope_at(k, n)
        shifted = rope_at(q, m + shift) @ rope_at(k, n + shift)
        assert_close(shifted, score, atol=1e-5, rtol=1e-5)
    # Not a trivial property: without rotation the score differs, and it does
    # change with the distance.
    q, k = randn(D, seed=3), randn(D, seed=4)
    assert abs(rope_at(q, 10) @ rope_at(k, 3) - rope_at(q, 10) @ rope_at(k, 4)) > 1e-3


def test_rope_rotates_low_precision_input_in_float32_and_rounds_once():
    x = randn(4, 64, 32, seed=3)
    for dtype in (torch.bfloat16, torch.float16):
        low = x.to(dtype)
        # One rounding, at the end: exactly the float32 rotation of the same input.
        assert torch.equal(
            apply_rope(low, offset=100), apply_rope(low.float(), offset=100).to(dtype)
        )
    exact = apply_rope(x.double(), offset=100)
    assert_close(apply_rope(x, offset=100).double(), exact, atol=1e-5, rtol=0)  # float32 as before


def test_rope_offset_continues_the_sequence():
    x = randn(2, 12, 16)
    whole = apply_rope(x)
    assert_close(apply_rope(x[:, 7:], offset=7), whole[:, 7:], atol=1e-6, rtol=0)


# --- ALiBi --------------------------------------------------------------------------------


def test_alibi_slopes_for_a_power_of_two():
    assert torch.equal(alibi_slopes(8), torch.tensor([2.0**-k for k in range(1, 9)]))
    assert torch.equal(alibi_slopes(4), torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]))
    assert torch.equal(alibi_slopes(1), torch.tensor([2.0**-8]))


def test_alibi_slopes_for_other_head_counts():
    # The 8-head slopes, then every other slope of the 16-head sequence.
    expected = [2.0**-k for k in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    assert_close(alibi_slopes(12), torch.tensor(expected), atol=0, rtol=1e-6)
    six = [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    assert_close(alibi_slopes(6), torch.tensor(six), atol=0, rtol=1e-6)


def test_alibi_bias_values():
    inf = float("inf")
    bias = alibi_bias(2, 4)  # slopes 1/16, 1/256
    assert bias.shape == (2, 4, 4)
    for h, s in enumerate([1 / 16, 1 / 256]):
        expected = torch.tensor(
            [
                [0, -inf, -inf, -inf],
                [-s, 0, -inf, -inf],
                [-2 * s, -s, 0, -inf],
                [-3 * s, -2 * s, -s, 0],
            ]
        )
        assert torch.equal(bias[h], expected)


# --- the model with each scheme -------------------------------------------------------------

SMALL = GPTConfig(vocab_size=30, context_length=12, n_embed=32, n_head=4, n_layer=2)


def ids(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(SMALL.vocab_size, shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("position", POSITIONS)
def test_only_none_is_blind_to_the_order_of_earlier_tokens(position):
    # The attention page's permutation experiment, in a one-layer model: the last
    # position attends over the earlier tokens as a set unless positions say where
    # each one is.
    config = dataclasses.replace(SMALL, n_layer=1, position=position)
    torch.manual_seed(0)
    model = GPT(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.3)  # large enough that attention matters
    idx = ids(1, 10)
    swapped = idx[:, torch.tensor([3, 1, 7, 0, 5, 2, 8, 4, 6, 9])]  # last one stays
    with torch.no_grad():
        change = (model(swapped)[0][:, -1] - model(idx)[0][:, -1]).abs().max()
    if position == "none":
        assert change < 1e-5
    else:
        assert change > 1e-3


def per_head_layers(config: GPTConfig) -> GPTConfig:
    """config with every layer the readable per-head one (no positions inside)."""
    C, H, T = config.n_embed, config.n_head, config.context_length
    layers = (CausalSpec(C, H, T, per_head=True),) * config.n_layer
    return dataclasses.replace(config, layers=layers)


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "none"])
def test_per_head_and_fused_models_agree(position):
    config = per_head_layers(dataclasses.replace(SMALL, position=position))
    torch.manual_seed(0)
    per_head = GPT(config)
    fused = from_per_head(per_head)
    assert fused.config.position == position
    idx, targets = ids(3, 12), ids(3, 12, seed=2)
    logits_p, loss_p = per_head(idx, targets)
    logits_f, loss_f = fused(idx, targets)
    assert_close(logits_f, logits_p, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position", ["sinusoidal", "rope", "alibi", "none"])
def test_schemes_without_a_table_run_past_the_training_length(position):
    config = dataclasses.replace(SMALL, position=position, max_length=48)
    torch.manual_seed(0)
    model = GPT(config).eval()
    idx = ids(2, 48)
    logits, _ = model(idx)
    assert logits.shape == (2, 48, SMALL.vocab_size)
    # Causal at any length: the first 12 logits are those of the first 12 tokens.
    assert_close(logits[:, :12], model(idx[:, :12])[0], atol=1e-5, rtol=1e-5)


# The per-head layer has no scheme inside it: rope and alibi only with the fused one.
@pytest.mark.parametrize(
    ("position", "attention"),
    [(p, "fused") for p in POSITIONS]
    + [(p, "per-head") for p in ("learned", "sinusoidal", "none")],
)
def test_parameter_formula_counts_every_scheme(position, attention):
    config = dataclasses.replace(SMALL, position=position)
    config = per_head_layers(config) if attention == "per-head" else config
    assert parameter_count(config) == sum(p.numel() for p in GPT(config).parameters())
    table = SMALL.context_length * SMALL.n_embed
    assert parameter_count(config) == parameter_count(SMALL) - (position != "learned") * table


def test_learned_keeps_its_weight_names_and_only_it_has_a_table():
    names = set(dict(GPT(SMALL).named_parameters()))
    assert "pos_emb.weight" in names
    assert GPTConfig().position == "learned"
    for position in ("sinusoidal", "rope", "alibi", "none"):
        other = set(dict(GPT(dataclasses.replace(SMALL, position=position)).named_parameters()))
        assert other == names - {"pos_emb.weight"}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: GPTConfig(n_embed=12, n_head=4, position="rope"),
            "position='rope' needs an even head size D = n_embed // n_head, got 12 // 4 = 3",
        ),
        (
            lambda: GPTConfig(position="xpos"),
            "position ('xpos') must be one of ['learned', 'sinusoidal', 'rope', 'alibi', 'none']",
        ),
        (
            lambda: GPTConfig(context_length=8, max_length=16),
            "max_length (16) > context_length (8) needs a position scheme without a table",
        ),
        (
            lambda: GPTConfig(context_length=8, max_length=4, position="rope"),
            "max_length (4) must be None or an int >= context_length (8)",
        ),
        (lambda: apply_rope(torch.zeros(2, 5)), "apply_rope needs an even head size D, got D=5"),
        (lambda: sinusoidal_positions(4, 7), "C (7) must be even"),
        (lambda: apply_rope(torch.zeros(2, 4), offset=-1), "offset (-1) must be an int >= 0"),
        (lambda: rope_frequencies(8, base=1.0), "base (1.0) must be > 1"),
        (lambda: alibi_slopes(0), "n_head (0) must be positive"),
        (
            lambda: CausalSelfAttention(4, 12, 8, position="rope"),
            "position='rope' needs an even head size, got D=3",
        ),
    ],
)
def test_bad_settings_are_named(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def test_a_length_the_scheme_cannot_serve_is_named():
    learned = GPT(SMALL)
    with pytest.raises(ValueError, match=re.escape("T=13 exceeds context_length=12: the position")):
        learned(ids(1, 13))
    rope = GPT(dataclasses.replace(SMALL, position="rope"))
    with pytest.raises(ValueError, match=re.escape("GPTConfig(max_length=...) accepts longer")):
        rope(ids(1, 13))
    longer = GPT(dataclasses.replace(SMALL, position="alibi", max_length=20))
    with pytest.raises(ValueError, match=re.escape("T=21 exceeds max_length=20")):
        longer(ids(1, 21))
