"""Tests for snippets/layers/differential.py: differential attention equals transformers'
DiffLlamaAttention (5.23) on the same weights, whole and in cached steps; with lambda 0 it
is softmax attention of the first half of the query heads, RMS-normed per head; the spec
counts the layer's parameters and refuses sizes it cannot mean. Planted faults (lambda's
sign, lambda_init's depth off by one) fail the comparison with transformers.

Its place in a GPT, with every operation of the layer protocol: tests/snippets/test_protocol.py
("spec-differential")."""

import dataclasses
import itertools

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close
from transformers import DiffLlamaConfig, DynamicCache
from transformers.models.diffllama.modeling_diffllama import (
    DiffLlamaAttention,
    DiffLlamaRotaryEmbedding,
)

from snippets.core.blocks import rms_norm
from snippets.core.rope_scaling import RopeSpec
from snippets.layers.differential import DiffAttention, DiffAttentionSpec, differential_map
from snippets.layers.kv_heads import expand_kv

# float64 on both sides; the residue is float32 rounding where both compute in float32
# (transformers' lambda, the guide's RMSNorm, as the paper's code does).
TOL = {"rtol": 1e-6, "atol": 1e-6}
T = 11
SPECS = {  # (n_head, n_kv_head, head_size, depth)
    "gqa": DiffAttentionSpec(32, 8, 2, 8, depth=0),
    "mha-deep": DiffAttentionSpec(32, 4, 4, 6, depth=5),
    "head-size-not-c-over-h": DiffAttentionSpec(24, 4, 2, 10, depth=2, bias=True),
}


def theirs(spec: DiffAttentionSpec, seed: int = 0):
    """DiffLlamaAttention of the spec's sizes, its weights drawn away from the init."""
    config = DiffLlamaConfig(
        hidden_size=spec.n_embed,
        num_attention_heads=spec.n_head,
        num_key_value_heads=spec.n_kv_head,
        head_dim=spec.head_size,
        attention_bias=spec.bias,
        rms_norm_eps=spec.eps,
        max_position_embeddings=64,
        num_hidden_layers=spec.depth + 1,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    layer = DiffLlamaAttention(config, layer_idx=spec.depth).double().eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0.0, 0.3)
    return layer, DiffLlamaRotaryEmbedding(config).double()


@torch.no_grad()
def ours(spec: DiffAttentionSpec, module: DiffLlamaAttention, cls=DiffAttention):
    """The guide's layer with module's weights. DiffLlama turns channel pairs (i, i + D/2),
    the guide (2i, 2i + 1): scores do not change when q and k have their channels permuted
    alike, so the rows of each q and k head are reordered."""
    layer = cls(spec).double().eval()
    D = spec.head_size
    order = torch.tensor([c for i in range(D // 2) for c in (i, i + D // 2)])

    def rows(t, heads):  # each head's rows (or bias entries) in the guide's order
        return t.reshape(heads, D, *t.shape[1:])[:, order].reshape(t.shape)

    for mine, their, heads in (
        (layer.q, module.q_proj, spec.n_head),
        (layer.k, module.k_proj, spec.n_kv_head),
        (layer.v, module.v_proj, None),
        (layer.proj, module.o_proj, None),
    ):
        turn = (lambda t: t) if heads is None else (lambda t, h=heads: rows(t, h))
        mine.weight.copy_(turn(their.weight))
        if spec.bias:
            mine.bias.copy_(turn(their.bias))
    for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
        getattr(layer, name).copy_(getattr(module, name))
    return layer


def causal(T_new: int, T_all: int) -> torch.Tensor:
    """transformers' additive mask (1, 1, T_new, T_all): the new queries are the last."""
    seen = torch.ones(T_new, T_all, dtype=torch.bool).tril(T_all - T_new)
    return torch.zeros(T_new, T_all, dtype=torch.double).masked_fill(~seen, -torch.inf)[None, None]


@torch.no_grad()
def their_pieces(module, rotary, x, cuts):
    """DiffLlamaAttention on x's pieces x[:, a:b] with its DynamicCache (one piece: the
    whole pass), concatenated."""
    cache, out = DynamicCache(config=module.config), []
    for a, b in itertools.pairwise(cuts):
        positions = torch.arange(a, b)[None]
        y, _ = module(x[:, a:b], rotary(x, positions), causal(b - a, b), past_key_values=cache)
        out.append(y)
    return torch.cat(out, dim=1)


@torch.no_grad()
def our_pieces(layer, x, cuts):
    cache = layer.new_cache(x.size(0), x.size(1))
    return torch.cat([layer(x[:, a:b], cache) for a, b in itertools.pairwise(cuts)], dim=1)


def x_for(spec, seed=1):
    return torch.randn(2, T, spec.n_embed, generator=torch.Generator().manual_seed(seed)).double()


@pytest.mark.parametrize("name", SPECS)
def test_equal_to_transformers_diffllama_whole_and_cached(name):
    spec = SPECS[name]
    module, rotary = theirs(spec)
    layer, x = ours(spec, module), x_for(spec)
    full = their_pieces(module, rotary, x, (0, T))
    assert full.abs().max() > 0.1  # not an output too small to compare
    assert_close(our_pieces(layer, x, (0, T)), full, **TOL)
    with torch.no_grad():
        assert_close(layer(x), full, **TOL)  # without a cache
    cuts = (0, 4, 5, 6, T)  # a prompt, single tokens, a chunk
    assert_close(our_pieces(layer, x, cuts), their_pieces(module, rotary, x, cuts), **TOL)
    assert_close(our_pieces(layer, x, cuts), full, **TOL)


class WrongSign(DiffAttention):
    """A planted fault: the second map added, not subtracted."""

    def lam(self):
        return -super().lam()


class DepthOffByOne(DiffAttention):
    """A planted fault: lambda_init of the paper's l, not l - 1."""

    def __init__(self, spec):
        super().__init__(dataclasses.replace(spec, depth=spec.depth + 1))


@pytest.mark.parametrize("fault", [WrongSign, DepthOffByOne])
def test_a_planted_fault_fails_the_comparison(fault):
    spec = SPECS["mha-deep"]
    module, rotary = theirs(spec)
    x = x_for(spec)
    full = their_pieces(module, rotary, x, (0, T))
    with torch.no_grad():
        assert_close(ours(spec, module)(x), full, **TOL)  # the real one passes
        with pytest.raises(AssertionError):
            assert_close(ours(spec, module, fault)(x), full, **TOL)


@torch.no_grad()
def test_with_lambda_zero_it_is_softmax_attention_of_the_first_half_normed():
    """lambda = exp(q1 . k1) - exp(q2 . k2) + lambda_init = 1 - (1 + lambda_init) +
    lambda_init = 0: the second maps drop out, and each differential head is the softmax
    attention of query head i over key head g, reading values g and g + G/2 side by side,
    RMS-normed and scaled by 1 - lambda_init."""
    spec = DiffAttentionSpec(32, 8, 4, 6, depth=3, rope=None)
    torch.manual_seed(0)
    layer = spec.build().double()
    D, lam0 = spec.head_size, layer.lambda_init
    layer.lambda_q1.zero_()  # exp(0) = 1
    layer.lambda_q2.zero_()
    layer.lambda_q2[0] = torch.log(torch.tensor(1 + lam0, dtype=torch.double))
    layer.lambda_k2.zero_()
    layer.lambda_k2[0] = 1.0
    assert abs(layer.lam().item()) < 1e-15
    x = x_for(spec)
    B, H, G = 2, spec.n_head, spec.n_kv_head
    q = layer.q(x).view(B, T, H, D).transpose(1, 2)[:, : H // 2]  # the first half
    k = layer.k(x).view(B, T, G, D).transpose(1, 2)[:, : G // 2]  # the keys they read
    v = layer.v(x).view(B, T, G, D).transpose(1, 2)
    v = torch.cat([v[:, : G // 2], v[:, G // 2 :]], dim=-1)  # (B, G/2, T, 2D)
    heads = F.scaled_dot_product_attention(
        q, expand_kv(k, H // G), expand_kv(v, H // G), is_causal=True
    )  # (B, H/2, T, 2D)
    y = (1 - lam0) * rms_norm(heads, None, spec.eps)
    expected = layer.proj(y.transpose(1, 2).reshape(B, T, -1))
    assert_close(layer(x), expected, rtol=1e-12, atol=1e-12)


@torch.no_grad()
def test_the_weights_are_the_softmax_maps_and_their_difference_sums_to_one_minus_lambda():
    spec = SPECS["gqa"]
    torch.manual_seed(0)
    layer = spec.build().double()
    x = x_for(spec)
    y, weights = layer(x, return_weights=True)
    assert weights.shape == (2, spec.n_head, T, T)
    assert_close(weights.sum(-1), torch.ones(2, spec.n_head, T, dtype=torch.double))
    diff = differential_map(weights, layer.lam())  # (B, H/2, T, T)
    assert diff.shape == (2, spec.n_head // 2, T, T)
    assert_close(diff.sum(-1), (1 - layer.lam()).expand(2, spec.n_head // 2, T))
    assert_close(y, layer(x), rtol=0, atol=0)


@torch.no_grad()
def test_a_rolling_cache_longer_than_the_text_is_the_full_pass():
    layer = SPECS["gqa"].build().double()
    x = x_for(SPECS["gqa"])
    cache = layer.new_cache(2, T, window=T, sinks=2)
    steps = torch.cat([layer(x[:, t : t + 1], cache) for t in range(T)], dim=1)
    assert_close(steps, layer(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "spec",
    [
        *SPECS.values(),
        DiffAttentionSpec(16, 2, 2, 4, rope=RopeSpec(rotary_dim=2)),
        DiffAttentionSpec(16, 6, 2, 5, rope=None, bias=True),
    ],
)
def test_the_spec_counts_the_parameters_of_its_layer(spec):
    assert spec.parameters() == sum(p.numel() for p in spec.build().parameters())


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"n_kv_head": 3, "n_head": 6}, ValueError, r"n_kv_head \(3\) must be even"),
        ({"n_kv_head": 4, "n_head": 6}, ValueError, r"and divide n_head \(6\)"),
        ({"n_head": 0}, ValueError, r"n_head \(0\) must be positive"),
        ({"head_size": 2.0}, TypeError, r"head_size \(2.0\) must be an int"),
        ({"depth": -1}, ValueError, r"depth \(-1\) must be an int >= 0"),
        ({"head_size": 5}, ValueError, r"head_size \(5\): RoPE turns 5 of its channels"),
        (
            {"rope": RopeSpec(rotary_dim=10)},
            ValueError,
            r"head_size \(8\): RoPE turns 10 of its channels in pairs",
        ),
        ({"eps": 0.0}, ValueError, r"eps \(0.0\) must be > 0"),
    ],
)
def test_the_spec_refuses_sizes_it_cannot_mean(change, error, message):
    with pytest.raises(error, match=message):
        DiffAttentionSpec(**{"n_embed": 32, "n_head": 4, "n_kv_head": 2, "head_size": 8, **change})
