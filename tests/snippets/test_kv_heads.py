"""Tests for snippets/kv_heads.py and the KV cache of every attention variant.

GQA with as many key/value heads as query heads is CausalSelfAttention; every query head
of a group reads its group's keys and no other; no variant sees the future; generating with
the cache is recomputing; kv_cache_bytes counts what the cache really holds.
"""

import dataclasses
import re

import pytest
import torch
from torch.testing import assert_close

from snippets.attention import CausalSelfAttention
from snippets.cache import ModelCache
from snippets.generate import generate
from snippets.kv_heads import (
    GroupedQueryAttention,
    MultiHeadLatentAttention,
    expand_kv,
    kv_cache_bytes,
)
from snippets.model import GPT, GPTConfig, parameter_count
from tests.snippets.test_generate import greedy_with_tampered_cache, make

C, T_MAX = 48, 16


def layers() -> dict[str, torch.nn.Module]:
    """One layer of every variant, 6 query heads of D = 8, seeded; and with ALiBi, RoPE."""
    torch.manual_seed(0)
    return {
        "MHA (CausalSelfAttention)": CausalSelfAttention(6, C, T_MAX),
        "GQA, 6 kv heads": GroupedQueryAttention(6, 6, C, T_MAX),
        "GQA, 3 kv heads": GroupedQueryAttention(6, 3, C, T_MAX),
        "GQA, 2 kv heads": GroupedQueryAttention(6, 2, C, T_MAX),
        "MQA": GroupedQueryAttention(6, 1, C, T_MAX),
        "MLA": MultiHeadLatentAttention(6, C, T_MAX, kv_latent=12),
        "GQA, 2 kv heads, RoPE": GroupedQueryAttention(6, 2, C, T_MAX, position="rope"),
        "GQA, 2 kv heads, ALiBi": GroupedQueryAttention(6, 2, C, T_MAX, position="alibi"),
        "MLA, ALiBi": MultiHeadLatentAttention(6, C, T_MAX, 12, position="alibi"),
    }


def x_of(B: int = 2, T: int = 10, seed: int = 1) -> torch.Tensor:
    return torch.randn(B, T, C, generator=torch.Generator().manual_seed(seed))


# --- GQA is MHA when every query head has its own key/value head -------------------------------


@pytest.mark.parametrize("position", ["learned", "rope", "alibi"])
def test_gqa_with_n_kv_head_equal_to_n_head_is_causal_self_attention(position):
    torch.manual_seed(0)
    csa = CausalSelfAttention(6, C, T_MAX, position=position)
    gqa = GroupedQueryAttention.from_causal(csa)
    assert gqa.n_kv_head == gqa.n_head == 6 and gqa.position == position
    for return_weights in (False, True):
        x1 = x_of().requires_grad_()
        x2 = x1.detach().clone().requires_grad_()
        y1 = csa(x1, return_weights=return_weights)
        y2 = gqa(x2, return_weights=return_weights)
        if return_weights:
            assert_close(y2[1], y1[1], rtol=1e-5, atol=1e-5)  # the weights too
            y1, y2 = y1[0], y2[0]
        assert_close(y2, y1, rtol=1e-5, atol=1e-5)
        grad = torch.randn_like(y1)
        y1.backward(grad)
        y2.backward(grad)
        assert_close(x2.grad, x1.grad, rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="csa must be a CausalSelfAttention, got Linear"):
        GroupedQueryAttention.from_causal(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("name", list(layers()))
def test_fused_and_written_out_paths_agree(name):
    layer = layers()[name]
    x = x_of()
    y, weights = layer(x, return_weights=True)
    assert_close(layer(x), y, rtol=1e-5, atol=1e-5)
    assert weights.shape == (2, 6, 10, 10)
    assert_close(weights.sum(-1), torch.ones(2, 6, 10))


@pytest.mark.parametrize("name", ["MLA", "MLA, ALiBi"])
def test_latent_form_equals_the_up_projected_form(name):
    # What the cache uses (scores against the latents) is what training computes.
    mla = layers()[name]
    x = x_of(T=12)
    c = mla.latent(x)  # (B, T, R)
    assert c.shape == (2, 12, 12)
    assert_close(mla.attend_absorbed(x, c), mla(x), rtol=1e-5, atol=1e-5)
    assert_close(mla.attend_absorbed(x[:, 7:], c), mla(x)[:, 7:], rtol=1e-5, atol=1e-5)


# --- which query heads read which keys -------------------------------------------------------


def test_expand_kv_gives_query_head_h_the_kv_head_h_over_group_size():
    kv = torch.arange(3.0).view(1, 3, 1, 1)  # kv head g holds the number g
    assert expand_kv(kv, 2).flatten().tolist() == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("group_size", [0, -1, 1.5, True])
def test_expand_kv_refuses_a_group_size_that_is_not_a_positive_int(group_size):
    # expand_kv(kv, 0) once returned an empty tensor without a word.
    with pytest.raises(ValueError, match=re.escape(f"group_size ({group_size!r})")):
        expand_kv(torch.zeros(1, 2, 3, 4), group_size)


@pytest.mark.parametrize("n_head, n_kv_head", [(6, 3), (6, 2), (8, 2), (8, 4), (4, 4)])
def test_changing_one_kv_head_changes_exactly_its_groups_query_heads(n_head, n_kv_head):
    D = 4
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(n_head, n_kv_head, n_head * D, T_MAX)
    x = torch.randn(2, 9, n_head * D, generator=torch.Generator().manual_seed(1))
    _, before = gqa(x, return_weights=True)  # (B, H, T, T)
    group = n_head // n_kv_head
    for g in range(n_kv_head):
        changed = GroupedQueryAttention(n_head, n_kv_head, n_head * D, T_MAX)
        changed.load_state_dict(gqa.state_dict())
        with torch.no_grad():  # the key rows of kv head g, after the H * D query rows
            start = n_head * D + g * D
            changed.qkv.weight[start : start + D] += torch.randn(D, n_head * D)
        _, after = changed(x, return_weights=True)
        moved = [(after[:, h] - before[:, h]).abs().max().item() > 1e-3 for h in range(n_head)]
        expected = [h // group == g for h in range(n_head)]
        assert moved == expected, f"kv head {g}: query heads that moved {moved}"
        # Heads that read other kv heads see exactly the same weights.
        for h in range(n_head):
            if not expected[h]:
                assert torch.equal(after[:, h], before[:, h])


def test_heads_of_a_group_share_keys_but_not_queries():
    gqa = layers()["GQA, 2 kv heads"]
    _, weights = gqa(x_of(), return_weights=True)  # heads 0, 1, 2 read kv head 0
    assert (weights[:, 0] - weights[:, 1]).abs().max() > 1e-3


def test_bad_sizes_name_both_numbers():
    with pytest.raises(ValueError, match=r"n_kv_head \(4\) must divide n_head \(6\)"):
        GroupedQueryAttention(6, 4, C, T_MAX)
    with pytest.raises(ValueError, match=r"n_kv_head \(0\) must be positive"):
        GroupedQueryAttention(6, 0, C, T_MAX)
    with pytest.raises(TypeError, match=r"kv_latent \(2.5\) must be an int"):
        MultiHeadLatentAttention(6, C, T_MAX, 2.5)
    with pytest.raises(ValueError, match=r"T=17 exceeds context_length=16"):
        layers()["MQA"](x_of(T=17))


# --- causality, every variant ------------------------------------------------------------------


@pytest.mark.parametrize("name", list(layers()))
@pytest.mark.parametrize("return_weights", [False, True])
def test_no_variant_sees_the_future(name, return_weights):
    layer = layers()[name]
    x = x_of(T=10).requires_grad_()
    y = layer(x, return_weights=return_weights)
    y = y[0] if return_weights else y
    t = 6
    # The outputs before position t do not depend on any input from t on ...
    (grad,) = torch.autograd.grad(y[:, :t].sum(), x)
    assert torch.equal(grad[:, t:], torch.zeros_like(grad[:, t:]))
    # ... while position t's output does depend on position t (the check can fail).
    (grad,) = torch.autograd.grad(layer(x)[:, t].sum(), x)
    assert grad[:, t].abs().max() > 0


# --- models: the cache of every variant --------------------------------------------------------

BASE = GPTConfig(vocab_size=20, context_length=24, n_embed=48, n_head=6, n_layer=2)
VARIANTS = {
    "MHA": BASE,
    "GQA": dataclasses.replace(BASE, n_kv_head=2),
    "MQA": dataclasses.replace(BASE, n_kv_head=1),
    "MLA": dataclasses.replace(BASE, attention="mla", kv_latent=16),
}


def ids(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(BASE.vocab_size, shape, generator=torch.Generator().manual_seed(seed))


# Every variant with the position schemes that act inside attention (and the default).
# MLA takes no RoPE: see test_mla_refuses_rope.
WITH_POSITIONS = [
    (variant, position)
    for variant in VARIANTS
    for position in ("learned", "rope", "alibi", "none")
    if (variant, position) != ("MLA", "rope")
]


@pytest.mark.parametrize("variant, position", WITH_POSITIONS)
def test_cached_logits_equal_a_full_forward_pass(variant, position):
    model = make(dataclasses.replace(VARIANTS[variant], position=position))
    idx = ids(2, 24)
    cache = ModelCache.for_model(model, batch_size=2)
    pieces = [
        model(idx[:, a:b], cache=cache)[0]
        for a, b in ((0, 7), (7, 8), (8, 9), (9, 15), (15, 24))  # prompt, 1, 1, chunks
    ]
    with torch.no_grad():
        assert_close(torch.cat(pieces, dim=1), model(idx)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "variant, position, seed",
    [(v, p, seed) for v, p in WITH_POSITIONS for seed in range(2 if p == "learned" else 1)],
)
def test_generation_with_the_cache_is_recomputation(variant, position, seed):
    model = make(dataclasses.replace(VARIANTS[variant], position=position), seed=seed)
    idx = ids(3, 5, seed=seed)
    for options in ({"greedy": True}, {"top_k": 5}):
        outs = [
            generate(model, idx, 30, kv_cache=kv, generator=torch.Generator().manual_seed(seed),
                     **options)  # 35 tokens: past the context of 24, the cache refills
            for kv in (True, False)
        ]  # fmt: skip
        assert torch.equal(*outs)


def test_a_cache_that_loses_a_kv_head_would_differ():
    # The equality above can fail: zeroing one shared head's keys changes the text.
    model = make(VARIANTS["GQA"])
    idx = ids(1, 6)
    expected = generate(model, idx, 10, greedy=True, kv_cache=False)

    # kv head 1 of every layer forgotten before each step
    def forget(cache):
        for layer in cache.layers:
            layer.buffers[0][:, 1].zero_()  # keys (B, G, T_max, D): head 1

    forgotten = greedy_with_tampered_cache(model, idx, 10, forget)
    assert not torch.equal(forgotten, expected)


def per_token_layer(config: GPTConfig) -> dict:
    """kv_cache_bytes's arguments for a GPTConfig."""
    if config.attention == "mla":
        return {"kv_latent": config.kv_latent}
    return {
        "n_kv_head": config.n_kv_head or config.n_head,
        "head_size": config.n_embed // config.n_head,
    }


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_cache_bytes_is_what_the_cache_holds(variant, dtype):
    config = VARIANTS[variant]
    model = make(config).to(dtype)
    B, T = 3, config.context_length
    cache = ModelCache.for_model(model, batch_size=B)
    idx = ids(B, 4)
    logits = model(idx, cache=cache)[0]  # the prompt, then one token at a time
    while cache.seen < T:
        logits = model(logits[:, -1:].argmax(-1), cache=cache)[0]
    assert cache.seen == T
    held = sum(t.numel() * t.element_size() for t in cache.tensors())
    expected = kv_cache_bytes(
        n_layer=config.n_layer, tokens=T, batch=B,
        bytes_per_element=dtype.itemsize, **per_token_layer(config),
    )  # fmt: skip
    assert held == expected
    # Every number in the cache was written: nothing allocated for nothing.
    assert all(bool((t != 0).any(dim=-1).all()) for t in cache.tensors())


def test_kv_cache_bytes_by_hand():
    # Llama-2-7B: 32 layers, 32 kv heads of 128, 16-bit: 0.5 MiB a token.
    assert kv_cache_bytes(n_layer=32, n_kv_head=32, head_size=128, tokens=1) == 2**19
    assert kv_cache_bytes(n_layer=32, n_kv_head=8, head_size=128, tokens=4096) == 2**29
    # DeepSeek-V2: 60 layers of 512 latent + 64 RoPE key numbers.
    mla = kv_cache_bytes(n_layer=60, kv_latent=512, rope_head_size=64, tokens=1)
    assert mla == 60 * 576 * 2
    assert kv_cache_bytes(n_layer=1, kv_latent=4, tokens=3, batch=2, bytes_per_element=4) == 96


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"n_kv_head": 8}, ValueError, r"give n_kv_head and head_size \(got 8, None\) or"),
        ({"n_kv_head": 8, "head_size": 4, "kv_latent": 2}, ValueError, "not both"),
        ({}, ValueError, "not neither"),
        ({"kv_latent": 0}, ValueError, r"kv_latent \(0\) must be positive"),
        ({"kv_latent": 4, "tokens": 0}, ValueError, r"tokens \(0\) must be positive"),
    ],
)
def test_kv_cache_bytes_rejects_what_means_nothing(kwargs, error, message):
    with pytest.raises(error, match=message):
        kv_cache_bytes(**{"n_layer": 2, "tokens": 4, **kwargs})


def test_mla_refuses_rope():
    # DeepSeek-V2's decoupled RoPE key is what makes RoPE and a latent cache fit.
    with pytest.raises(ValueError, match="does not take position='rope'.*decoupled"):
        MultiHeadLatentAttention(6, C, T_MAX, 12, position="rope")
    with pytest.raises(ValueError, match="does not take position='rope'.*decoupled"):
        dataclasses.replace(VARIANTS["MLA"], position="rope")


# --- the model's configuration ---------------------------------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_parameter_count_of_every_variant(variant):
    for tie in (False, True):
        config = dataclasses.replace(VARIANTS[variant], tie_weights=tie)
        model = GPT(config)
        assert parameter_count(config) == sum(p.numel() for p in model.parameters())


def test_variants_get_their_layers_and_caches():
    models = {name: GPT(config) for name, config in VARIANTS.items()}
    assert type(models["MHA"].blocks[0].attn) is CausalSelfAttention
    assert models["MQA"].blocks[0].attn.n_kv_head == 1
    assert type(models["MLA"].blocks[0].attn) is MultiHeadLatentAttention
    shapes = {}
    for name in ("GQA", "MLA"):
        cache = ModelCache.for_model(models[name], 1)
        models[name](torch.zeros(1, 1, dtype=torch.long), cache=cache)  # made at step 1
        shapes[name] = [t.shape for t in cache.tensors()]
    assert shapes["GQA"] == [(1, 2, 24, 8)] * 4  # per layer, keys and values (B, G, T, D)
    assert shapes["MLA"] == [(1, 24, 16)] * 2  # per layer, the latents (B, T, R)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"n_kv_head": 4}, r"n_kv_head \(4\) must divide n_head \(6\)"),
        ({"n_kv_head": 0}, r"n_kv_head \(0\) must be a positive int or None"),
        ({"n_kv_head": 2, "attention": "per-head"}, "n_kv_head .* needs attention='fused'"),
        ({"attention": "mla"}, r"kv_latent \(None\) must be given exactly when attention='mla'"),
        ({"kv_latent": 8}, r"kv_latent \(8\) must be given exactly when attention='mla'"),
        ({"attention": "mla", "kv_latent": 8, "n_kv_head": 2}, "needs attention='fused'"),
    ],
)
def test_bad_kv_settings_are_named(changes, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(BASE, **changes)
