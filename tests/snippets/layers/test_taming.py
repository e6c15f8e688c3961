"""Tests for snippets/layers/taming.py: each piece's defining property, and the layer
composing them."""

import dataclasses
import math
import re

import pytest
import torch
from torch.testing import assert_close

from snippets.core.attention import CausalSelfAttention
from snippets.core.model import GPT, GPTConfig, parameter_count
from snippets.layers.taming import (
    OutputGate,
    QKNorm,
    TamedAttention,
    TamedSpec,
    gate_output,
    qk_norm,
    rms_norm,
    sink_attention,
    sink_softmax,
    soft_cap,
    soft_cap_score_mod,
)

B, T, C, H = 2, 8, 32, 4
D = C // H


def randn(*shape, seed=0, scale=1.0):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def rms(x):
    return x.pow(2).mean(-1).sqrt()


# --- QK-norm ---------------------------------------------------------------------------


def test_rms_norm_gives_rms_one_whatever_the_scale():
    x = randn(B, H, T, D, scale=50.0)
    assert_close(rms(rms_norm(x)), torch.ones(B, H, T), atol=1e-4, rtol=0)
    assert_close(rms_norm(1000 * x), rms_norm(x), atol=1e-5, rtol=1e-5)
    weight = randn(D, seed=3)
    assert_close(rms_norm(x, weight), rms_norm(x) * weight)


def test_rms_norm_matches_the_qwen3_formula():
    # transformers' Qwen3RMSNorm: x * rsqrt(mean(x^2) + eps), times weight, in float32.
    x, weight, eps = randn(B, T, D, scale=0.1), randn(D, seed=1), 1e-6
    expected = weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
    assert_close(rms_norm(x, weight, eps), expected)


def test_per_head_norm_treats_each_head_alone():
    q = randn(B, H, T, D)
    louder = q.clone()
    louder[:, 1] *= 100.0  # one head's queries much larger
    out, ref = qk_norm(louder), qk_norm(q)
    assert_close(rms(out), torch.ones(B, H, T), atol=1e-4, rtol=0)
    assert_close(out, ref, atol=1e-5, rtol=1e-5)  # every head as before


def test_all_heads_norm_is_olmo2_norm_before_the_split():
    x = randn(B, T, C)  # the projection's output, heads side by side
    weight = randn(C, seed=2)
    heads = x.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    expected = rms_norm(x, weight).view(B, T, H, D).transpose(1, 2)
    assert_close(qk_norm(heads, weight, across_heads=True), expected)
    # One norm for all heads: a louder head makes the other heads quieter.
    louder = heads.clone()
    louder[:, 1] *= 100.0
    out = qk_norm(louder, across_heads=True)
    assert (rms(out[:, 0]) < 0.1).all()
    assert_close(rms(out.transpose(1, 2).reshape(B, T, C)), torch.ones(B, T), atol=1e-4, rtol=0)


def test_qk_norm_bounds_the_scores():
    # Unit-rms q and k: |q . k| <= D, so a scaled score is at most sqrt(D), however large
    # the projections grew: the growth QK-norm exists to stop.
    norm = QKNorm(H, D)
    q, k = norm(randn(B, H, T, D, scale=1e3), randn(B, H, T, D, seed=1, scale=1e3))
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    assert scores.abs().max() <= math.sqrt(D) + 1e-4


def test_qk_norm_rejects_shapes_it_cannot_take():
    with pytest.raises(ValueError, match=re.escape("(B, H, T, D), got 3 dimensions (2, 8, 8)")):
        qk_norm(randn(B, T, D))
    with pytest.raises(ValueError, match=re.escape("weight of shape (8,) must be (32,)")):
        qk_norm(randn(B, H, T, D), torch.ones(D), across_heads=True)
    with pytest.raises(ValueError, match=re.escape("weight of shape (32,) must be (8,)")):
        qk_norm(randn(B, H, T, D), torch.ones(C))


# --- soft-capping ----------------------------------------------------------------------


def test_soft_cap_bounds_large_scores_and_keeps_small_ones():
    cap = 5.0
    s = torch.linspace(-1e4, 1e4, 101)
    assert (soft_cap(s, cap).abs() <= cap).all()
    assert (soft_cap(s, cap).diff() >= 0).all()  # order kept: softmax ranks the same
    small = torch.linspace(-0.1, 0.1, 21)  # |s| << c: tanh(x) = x - x^3 / 3 + ...
    assert (soft_cap(small, cap) - small).abs().max() <= 0.1**3 / (3 * cap**2) + 1e-7
    # Smooth, not a clamp: at s = c it gives c tanh(1), and past the cap it still has a slope.
    assert_close(soft_cap(torch.tensor(cap), cap), torch.tensor(cap * math.tanh(1.0)))
    s = torch.tensor([2 * cap], requires_grad=True)
    soft_cap(s, cap).sum().backward()
    assert_close(s.grad, torch.tensor([1 - math.tanh(2.0) ** 2]))


def test_soft_cap_score_mod_is_the_same_function():
    s = randn(B, H, T, T, scale=30.0)
    score_mod = soft_cap_score_mod(20.0)
    assert_close(score_mod(s, 0, 0, 0, 0), soft_cap(s, 20.0))


@pytest.mark.parametrize("cap", [0, -1.0, float("inf"), float("nan"), True, "5"])
def test_soft_cap_rejects_a_cap_that_is_not_positive(cap):
    with pytest.raises(ValueError, match=re.escape(f"cap ({cap!r}) must be")):
        soft_cap(torch.zeros(3), cap)
    with pytest.raises(ValueError, match=re.escape(f"cap ({cap!r}) must be")):
        soft_cap_score_mod(cap)


# --- sinks -----------------------------------------------------------------------------


def causal_scores(seed=0):
    scores = randn(B, H, T, T, seed=seed, scale=2.0)
    future = ~torch.ones(T, T, dtype=torch.bool).tril()
    return scores.masked_fill(future, float("-inf"))


def test_sink_rows_sum_to_one_minus_the_sink_share():
    scores, sinks = causal_scores(), torch.tensor([-2.0, 0.0, 1.0, 3.0])
    weights = sink_softmax(scores, sinks)
    z = scores.exp().sum(-1)  # (B, H, T): the keys' own mass
    share = sinks.exp().view(1, H, 1) / (z + sinks.exp().view(1, H, 1))
    assert_close(weights.sum(-1), 1 - share)
    # The keys keep their proportions: sinks scale a row, never reorder it.
    assert_close(weights / weights.sum(-1, keepdim=True), scores.softmax(-1))
    # A sink at -inf is plain softmax; a huge one takes all the weight.
    assert_close(sink_softmax(scores, torch.full((H,), float("-inf"))), scores.softmax(-1))
    assert sink_softmax(scores, torch.full((H,), 50.0)).sum(-1).max() < 1e-12


def test_sink_attention_is_an_extra_key_with_logit_b_and_zero_value():
    q, k, v = (randn(B, H, T, D, seed=s) for s in (1, 2, 3))
    sinks = torch.tensor([-1.0, 0.5, 2.0, 4.0])
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    scores = (q @ k.transpose(-2, -1) / math.sqrt(D)).masked_fill(~mask, float("-inf"))
    expected = sink_softmax(scores, sinks) @ v
    assert_close(sink_attention(q, k, v, sinks, mask), expected)
    # Written out: one more key whose score is sinks[h] for every query, value zero.
    column = sinks.view(1, H, 1, 1).expand(B, H, T, 1)
    weights = torch.cat([scores, column], -1).softmax(-1)
    zero = torch.zeros(B, H, 1, D)
    assert_close(weights @ torch.cat([v, zero], -2), expected)


def test_sink_logits_get_gradients_through_sdpa():
    q, k, v = (randn(B, H, T, D, seed=s) for s in (1, 2, 3))
    sinks = torch.zeros(H, requires_grad=True)
    sink_attention(q, k, v, sinks).pow(2).sum().backward()
    assert sinks.grad is not None and (sinks.grad != 0).all()


@pytest.mark.parametrize("bad", [torch.zeros(H + 1), torch.zeros(1, H), [0.0] * H])
def test_sinks_not_shaped_heads_are_rejected(bad):
    shape = tuple(bad.shape) if isinstance(bad, torch.Tensor) else bad
    with pytest.raises(ValueError, match=re.escape(f"sinks {shape!r} must be")):
        sink_softmax(causal_scores(), bad)
    with pytest.raises(ValueError, match=re.escape(f"shape ({H},)")):
        sink_attention(*(randn(B, H, T, D) for _ in range(3)), bad)


def test_sinks_of_plus_inf_or_nan_and_scores_not_4d_are_rejected():
    for bad in (float("inf"), float("nan")):
        sinks = torch.tensor([0.0, bad, 0.0, 0.0])
        with pytest.raises(ValueError, match=re.escape(f"sinks ([0.0, {bad}, 0.0, 0.0]) must")):
            sink_softmax(causal_scores(), sinks)
        with pytest.raises(ValueError, match="must be below \\+inf and not NaN"):
            sink_attention(*(randn(B, H, T, D) for _ in range(3)), sinks)
    with pytest.raises(
        ValueError, match=re.escape(f"scores must be (B, H, T, T_k), got shape ({H}, {T}, {T})")
    ):
        sink_softmax(causal_scores()[0], torch.zeros(H))


@pytest.mark.parametrize("eps", [0.0, -1e-6])
def test_an_eps_not_above_zero_is_rejected(eps):
    x = torch.zeros(B, H, T, D)  # a zero row: 0 / sqrt(0 + eps)
    assert torch.isfinite(rms_norm(x)).all()
    with pytest.raises(ValueError, match=re.escape(f"eps ({eps!r}) must be > 0")):
        rms_norm(x, eps=eps)
    with pytest.raises(ValueError, match=re.escape(f"eps ({eps!r}) must be > 0")):
        qk_norm(x, eps=eps, across_heads=True)


# --- the output gate -------------------------------------------------------------------


def test_a_closed_gate_gives_zero_and_an_open_one_the_output():
    y = randn(B, T, C)
    assert gate_output(y, torch.full((B, T, C), -1e4), H).abs().max() == 0
    assert_close(gate_output(y, torch.full((B, T, C), 1e4), H), y)
    assert_close(gate_output(y, torch.zeros(B, T, C), H), y / 2)


def test_a_per_head_gate_scales_its_head_only():
    y = randn(B, T, C)
    gate = torch.full((B, T, H), 1e4)
    gate[..., 2] = -1e4  # head 2 closed
    out = gate_output(y, gate, H).view(B, T, H, D)
    assert out[:, :, 2].abs().max() == 0
    assert_close(out[:, :, [0, 1, 3]], y.view(B, T, H, D)[:, :, [0, 1, 3]])
    assert OutputGate(H, C, per_head=True).logits.out_features == H


def test_a_gate_of_the_wrong_width_is_rejected():
    with pytest.raises(ValueError, match=re.escape("gate width (5) must be C=32")):
        gate_output(randn(B, T, C), randn(B, T, 5), H)


# --- the layer and the GPT -------------------------------------------------------------

PIECES = {
    "qk_norm": {"qk_norm": "head"},
    "qk_norm_all": {"qk_norm": "all"},
    "soft_cap": {"soft_cap": 2.0},
    "sinks": {"sinks": True},
    "gate": {"gate": "elementwise"},
    "gate_head": {"gate": "head"},
    "all": {"qk_norm": "head", "soft_cap": 2.0, "sinks": True, "gate": "head"},
}


def tamed(position="rope", **pieces):
    torch.manual_seed(0)
    layer = TamedAttention(H, C, 16, position=position, **pieces)
    with torch.no_grad():  # away from the start values (sinks 0, norm scales 1)
        for p in layer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return layer


def test_without_pieces_it_is_the_fused_layer():
    fused = CausalSelfAttention(H, C, 16, position="rope")
    layer = TamedAttention(H, C, 16, position="rope")
    layer.load_state_dict(fused.state_dict())
    x = randn(B, T, C)
    assert_close(layer(x), fused(x))


@pytest.mark.parametrize("position", ["rope", "alibi"])
@pytest.mark.parametrize("name", list(PIECES))
def test_fast_path_equals_the_written_out_scores_and_stays_causal(name, position):
    layer, x = tamed(position, **PIECES[name]), randn(B, T, C)
    fast = layer(x)
    slow, weights = layer(x, return_weights=True)
    assert_close(fast, slow)
    assert weights.triu(1).abs().max() == 0  # no weight on the future
    later = x.clone()
    later[:, -1] += 10.0  # the last token changed: earlier outputs may not move
    assert_close(layer(later)[:, :-1], fast[:, :-1])


def test_the_layer_caps_its_scores():
    # A tiny cap flattens every score: each query spreads evenly over the keys it sees,
    # however large the projections.
    layer, x = tamed(soft_cap=1e-3), randn(B, T, C, scale=100.0)
    _, weights = layer(x, return_weights=True)
    even = torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]
    assert_close(weights, even.expand(B, H, T, T), atol=1e-3, rtol=0)


def tamed_config(position="rope", **fields) -> GPTConfig:
    """A GPT whose every layer is a TamedSpec of `pieces`, RoPE inside."""
    sizes = {k: fields.pop(k) for k in ("vocab_size", "context_length", "n_layer") if k in fields}
    config = GPTConfig(n_embed=fields.pop("n_embed", C), n_head=fields.pop("n_head", H), **sizes)
    layer = TamedSpec(config.n_embed, config.n_head, config.context_length, position, **fields)
    return dataclasses.replace(config, position="none", layers=(layer,) * config.n_layer)


def test_gpt_config_builds_and_counts_the_pieces():
    for pieces in PIECES.values():
        config = tamed_config(vocab_size=16, **pieces)
        model = GPT(config)
        assert isinstance(model.blocks[0].attn, TamedAttention)
        assert parameter_count(config) == sum(p.numel() for p in model.parameters())


def test_a_gpt_with_every_piece_trains():
    torch.manual_seed(0)
    config = tamed_config(
        vocab_size=8, context_length=8, n_embed=16, n_head=2, n_layer=1, **PIECES["all"]
    )
    model = GPT(config)
    idx = torch.arange(8).repeat(4, 1) % 8  # 0 1 2 ... 7: each token says the next
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    first = None
    for _ in range(30):
        _, loss = model(idx[:, :-1], idx[:, 1:])
        first = first or loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < first / 3
    assert model.blocks[0].attn.sinks.grad.abs().sum() > 0


@pytest.mark.parametrize(
    ("pieces", "message"),
    [
        ({"qk_norm": "rms"}, "qk_norm ('rms') must be one of"),
        ({"gate": "channel"}, "gate ('channel') must be one of"),
        ({"sinks": 1}, "sinks (1) must be True or False"),
        ({"soft_cap": 0.0}, "cap (0.0) must be positive"),
        ({"per_head": True}, "per_head=True with position='rope'"),
    ],
)
def test_a_tamed_spec_rejects_bad_pieces(pieces, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        TamedSpec(C, H, 16, "rope", **pieces)
