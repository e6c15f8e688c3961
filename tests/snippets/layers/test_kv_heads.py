"""Tests for snippets/layers/kv_heads.py and the KV cache of every key/value variant of a GPT.

Every query head of a group reads its group's keys and no other; with as many
key/value heads as query heads, the grouped layer is the plain one; generating with
the cache is recomputing; kv_cache_bytes counts what the cache really holds. The
layers are spec layers (AttentionSpec with n_kv_head, MLASpec without its extra
parts); the kv-heads page's readable layers are proven equal to them in
tests/snippets/lessons/test_kv_heads.py.
"""

import dataclasses
import re

import pytest
import torch
from torch.testing import assert_close

from snippets.core.attention import CausalSelfAttention, CausalSpec
from snippets.core.cache import ModelCache
from snippets.core.model import GPT, GPTConfig, parameter_count
from snippets.core.rope_scaling import RopeSpec
from snippets.layers.configurable import AttentionSpec, ConfigurableAttention
from snippets.layers.kv_heads import expand_kv, kv_cache_bytes
from snippets.layers.mla import LatentAttention, MLASpec
from snippets.run.generate import generate
from tests.snippets.equivalence import as_spec_layer
from tests.snippets.run.test_generate import greedy_with_tampered_cache, make

C, T_MAX = 48, 16


def gqa(n_head: int, n_kv_head: int, n_embed: int = C, **options) -> ConfigurableAttention:
    """The guide's grouped layer: D = C / H, no RoPE unless asked, a bias on proj."""
    D = n_embed // n_head
    options = {"rope": None, "out_bias": True, **options}
    return ConfigurableAttention(AttentionSpec(n_embed, n_head, n_kv_head, D, **options))


def x_of(B: int = 2, T: int = 10, seed: int = 1) -> torch.Tensor:
    return torch.randn(B, T, C, generator=torch.Generator().manual_seed(seed))


# --- GQA is MHA when every query head has its own key/value head -------------------------------


@pytest.mark.parametrize("position", ["learned", "rope", "alibi"])
def test_gqa_with_n_kv_head_equal_to_n_head_is_causal_self_attention(position):
    torch.manual_seed(0)
    csa = CausalSelfAttention(6, C, T_MAX, position=position)
    grouped = as_spec_layer(csa)  # q, k, v: the rows of csa's qkv
    assert grouped.spec.n_kv_head == grouped.spec.n_head == 6
    for return_weights in (False, True):
        ours, theirs = (
            grouped(x_of(), return_weights=return_weights),
            csa(x_of(), return_weights=return_weights),
        )
        for a, b in zip(*(o if return_weights else (o,) for o in (ours, theirs)), strict=True):
            assert_close(a, b, rtol=1e-5, atol=1e-6)


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
    layer = gqa(n_head, n_kv_head, n_head * D)
    x = torch.randn(2, 9, n_head * D, generator=torch.Generator().manual_seed(1))
    _, before = layer(x, return_weights=True)  # (B, H, T, T)
    group = n_head // n_kv_head
    for g in range(n_kv_head):
        changed = gqa(n_head, n_kv_head, n_head * D)
        changed.load_state_dict(layer.state_dict())
        with torch.no_grad():  # the key rows of kv head g
            changed.k.weight[g * D : (g + 1) * D] += torch.randn(D, n_head * D)
        _, after = changed(x, return_weights=True)
        moved = [(after[:, h] - before[:, h]).abs().max().item() > 1e-3 for h in range(n_head)]
        expected = [h // group == g for h in range(n_head)]
        assert moved == expected, f"kv head {g}: query heads that moved {moved}"
        # Heads that read other kv heads see exactly the same weights.
        for h in range(n_head):
            if not expected[h]:
                assert torch.equal(after[:, h], before[:, h])


def test_heads_of_a_group_share_keys_but_not_queries():
    torch.manual_seed(0)
    _, weights = gqa(6, 2)(x_of(), return_weights=True)  # heads 0, 1, 2 read kv head 0
    assert (weights[:, 0] - weights[:, 1]).abs().max() > 1e-3


# --- models: the cache of every variant --------------------------------------------------------

BASE = GPTConfig(vocab_size=20, context_length=24, n_embed=48, n_head=6, n_layer=2)
D = BASE.n_embed // BASE.n_head
LATENT = {"rope": None, "latent_norm": False, "proj_bias": True}  # the kv-heads page's MLA


def variant(name: str, position: str = "learned") -> GPTConfig:
    """BASE with every layer the variant's; RoPE and ALiBi act in the layers."""
    if name == "MHA":
        return dataclasses.replace(BASE, position=position)
    inside = {"rope": RopeSpec() if position == "rope" else None}
    inside["alibi"] = position == "alibi"
    if name == "MLA":
        layer = MLASpec(48, 6, 16, D, 0, D, **{**LATENT, "alibi": inside["alibi"]})
    else:
        G = {"GQA": 2, "MQA": 1}[name]
        layer = AttentionSpec(48, 6, G, D, out_bias=True, **inside)
    embed = "none" if position in ("rope", "alibi") else position
    return dataclasses.replace(BASE, position=embed, layers=(layer,) * BASE.n_layer)


VARIANTS = ("MHA", "GQA", "MQA", "MLA")


def ids(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(BASE.vocab_size, shape, generator=torch.Generator().manual_seed(seed))


# Every variant with the position schemes that act inside attention (and the default).
# This MLA has no RoPE part (DeepSeek's decoupled key: snippets/layers/mla.py).
WITH_POSITIONS = [
    (v, position)
    for v in VARIANTS
    for position in ("learned", "rope", "alibi", "none")
    if (v, position) != ("MLA", "rope")
]


@pytest.mark.parametrize("name, position", WITH_POSITIONS)
def test_cached_logits_equal_a_full_forward_pass(name, position):
    model = make(variant(name, position))
    idx = ids(2, 24)
    cache = ModelCache.for_model(model, batch_size=2)
    pieces = [
        model(idx[:, a:b], cache=cache)[0]
        for a, b in ((0, 7), (7, 8), (8, 9), (9, 15), (15, 24))  # prompt, 1, 1, chunks
    ]
    with torch.no_grad():
        assert_close(torch.cat(pieces, dim=1), model(idx)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "name, position, seed",
    [(v, p, seed) for v, p in WITH_POSITIONS for seed in range(2 if p == "learned" else 1)],
)
def test_generation_with_the_cache_is_recomputation(name, position, seed):
    model = make(variant(name, position), seed=seed)
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
    model = make(variant("GQA"))
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
    layer = config.layer_specs()[0]
    if isinstance(layer, MLASpec):
        return {"kv_latent": layer.kv_latent}
    G = getattr(layer, "n_kv_head", config.n_head)
    return {"n_kv_head": G, "head_size": config.n_embed // config.n_head}


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_cache_bytes_is_what_the_cache_holds(name, dtype):
    config = variant(name)
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
    # Every number in the cache was written: nothing allocated for nothing (MLA's
    # rope keys here have width 0).
    assert all(bool((t != 0).any(dim=-1).all()) for t in cache.tensors() if t.numel())


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


# --- the model's configuration ---------------------------------------------------------------


@pytest.mark.parametrize("name", VARIANTS)
def test_parameter_count_of_every_variant(name):
    for tie in (False, True):
        config = dataclasses.replace(variant(name), tie_weights=tie)
        model = GPT(config)
        assert parameter_count(config) == sum(p.numel() for p in model.parameters())


def test_variants_get_their_layers_and_caches():
    models = {name: GPT(variant(name)) for name in VARIANTS}
    assert type(models["MHA"].blocks[0].attn) is CausalSelfAttention
    assert models["MQA"].blocks[0].attn.spec.n_kv_head == 1
    assert type(models["MLA"].blocks[0].attn) is LatentAttention
    assert type(variant("MHA").layer_specs()[0]) is CausalSpec
    shapes = {}
    for name in ("GQA", "MLA"):
        cache = ModelCache.for_model(models[name], 1)
        models[name](torch.zeros(1, 1, dtype=torch.long), cache=cache)  # made at step 1
        shapes[name] = [t.shape for t in cache.tensors()]
    assert shapes["GQA"] == [(1, 2, 24, 8)] * 4  # per layer, keys and values (B, G, T, D)
    # per layer, the latents (B, T, R) and the rope keys, of width 0 here
    assert shapes["MLA"] == [(1, 24, 16), (1, 24, 0)] * 2
