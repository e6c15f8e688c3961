"""Tests for snippets/core/blocks.py: a GPT whose attention comes per layer from a spec and
whose norms and MLP come from a BlockSpec runs every operation the teaching GPT runs.

Its equality with whole transformers models is tests/lab/test_from_transformers_model.py;
here: each piece against its formula written out, the norm placements, the parameter
count, the cache and generation through the one protocol, and the refused options."""

import dataclasses
import itertools
import math

import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

from snippets.core.blocks import (
    BlockSpec,
    GatedMLP,
    RMSNorm,
    ScaledEmbedding,
    no_norm,
)
from snippets.core.cache import ModelCache
from snippets.core.model import GPT, Block, GPTConfig, parameter_count
from snippets.core.rope_scaling import RopeSpec
from snippets.layers.configurable import AttentionSpec, ConfigurableAttention
from snippets.layers.mla import MLASpec
from snippets.layers.sparse_mla import DSASpec, IndexerSpec
from snippets.pages.char_gpt import gpt_attention
from snippets.run.generate import generate

C, V = 24, 30
SPECS = (
    AttentionSpec(C, 4, 2, 8, qk_norm="head"),
    AttentionSpec(C, 4, 1, 6, kind="window", size=4, bias=True, sinks=True),
    AttentionSpec(C, 4, 2, 8, rope=None, qk_norm="all", gate="elementwise", out_bias=True),
    AttentionSpec(
        C,
        4,
        1,
        8,
        k_eq_v=True,
        v_norm=True,
        gate="head",
        bias=True,
        rope=RopeSpec(rotary_dim=4, scaling="proportional"),
    ),  # fmt: skip
)
BLOCKS = {
    "teaching": None,
    "llama": BlockSpec(hidden=40),
    "gemma3": BlockSpec(
        hidden=40, activation="gelu-tanh", norms="pre+post", one_plus=True, embed_scale=True
    ),
    "olmo": BlockSpec(hidden=40, norms="post", mlp_bias=True),
}


def config(block=None, **changes) -> GPTConfig:
    fields = {"vocab_size": V, "context_length": 24, "n_embed": C, "n_head": 4, "n_layer": 4}
    fields.update(position="none", layers=SPECS, block=block)
    return GPTConfig(**{**fields, **changes})


def model_of(block=None, **changes) -> GPT:
    torch.manual_seed(0)
    model = GPT(config(block, **changes)).double().eval()
    with torch.no_grad():  # away from the init: norm scales and biases matter too
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


def ids(T: int, B: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


# --- the pieces against their formulas ---------------------------------------------------


def test_rms_norm_and_its_one_plus_form():
    torch.manual_seed(0)  # float32: rms_norm computes in float32, as transformers does
    x = torch.randn(3, 5, C)
    norm = RMSNorm(C, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(C))
    by_hand = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight
    assert_close(norm(x), by_hand)
    gemma = RMSNorm(C, eps=1e-5, one_plus=True)
    assert torch.all(gemma.weight == 0)  # stored as w - 1: starts as the plain norm
    with torch.no_grad():
        gemma.weight.copy_(norm.weight - 1)
    assert_close(gemma(x), by_hand)


@pytest.mark.parametrize("activation", ["silu", "gelu-tanh"])
def test_the_gated_mlp_is_down_of_act_gate_times_up(activation):
    torch.manual_seed(0)
    mlp = GatedMLP(C, 40, activation, bias=True).double()
    x = torch.randn(2, 3, C, dtype=torch.double)
    g, u = mlp.gate(x), mlp.up(x)
    if activation == "silu":
        act = g * torch.sigmoid(g)
    else:  # GELU's tanh approximation (Hendrycks and Gimpel, 2016)
        act = 0.5 * g * (1 + torch.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g**3)))
    assert_close(mlp(x), mlp.down(act * u))


def test_the_embedding_scale_is_sqrt_c_rounded_to_the_dtype():
    emb = ScaledEmbedding(5, 2560).bfloat16()
    idx = torch.tensor([[0, 3, 4]])
    expected = emb.weight[idx] * torch.tensor(2560**0.5).bfloat16()  # 50.5, not 50.596
    assert torch.equal(emb(idx), expected)
    assert isinstance(GPT(config(BLOCKS["gemma3"])).tok_emb, ScaledEmbedding)
    assert type(GPT(config(BLOCKS["llama"])).tok_emb) is nn.Embedding


def test_a_tied_head_keeps_the_scaled_embeddings_matrix():
    model = GPT(config(BLOCKS["gemma3"], tie_weights=True))
    assert model.lm_head.weight is model.tok_emb.weight


@pytest.mark.parametrize(
    "norms, before, after", [("pre", True, False), ("pre+post", True, True), ("post", False, True)]
)
def test_where_the_norms_sit(norms, before, after):
    gpt = GPT(config(BlockSpec(hidden=8, norms=norms)))
    block = gpt.blocks[0]
    assert type(gpt.ln_f) is RMSNorm and type(gpt.tok_emb) is nn.Embedding
    assert type(block) is Block and isinstance(block.mlp, GatedMLP)
    for name, present in (("ln1", before), ("ln2", before), ("post1", after), ("post2", after)):
        assert isinstance(getattr(block, name), RMSNorm) == present, name
        assert (getattr(block, name) is no_norm) == (not present), name


def test_the_teaching_block_is_unchanged():
    block = Block(GPTConfig(n_embed=C, n_head=4))
    assert [name for name, _ in block.named_children()] == ["ln1", "attn", "drop", "ln2", "mlp"]
    assert block.post1 is no_norm and block.post2 is no_norm  # no module, no weight
    assert type(block.ln1) is nn.LayerNorm and type(block.mlp).__name__ == "MLP"
    gpt = GPT(GPTConfig())
    assert type(gpt.tok_emb) is nn.Embedding and type(gpt.ln_f) is nn.LayerNorm
    assert "layers" not in repr(GPTConfig()) and "block" not in repr(GPTConfig())


def test_a_spec_builds_its_layer():
    assert isinstance(SPECS[0].build(), ConfigurableAttention)
    assert SPECS[0].build().spec is SPECS[0]
    message = r"layers\[1\] must be a LayerSpec \(a spec that builds its layer\), got BlockSpec"
    with pytest.raises(TypeError, match=message):
        GPTConfig(n_embed=C, n_head=4, position="none", layers=(SPECS[0], BlockSpec(hidden=8)))


def test_a_dsa_layer_that_reuses_another_layers_choice_is_refused_by_name():
    mla = MLASpec(32, 4, 8, 6, 4, 6, q_rank=12)
    layers = (DSASpec(mla, IndexerSpec(8, 8, 4, top_k=3)), DSASpec(mla, None))
    with pytest.raises(ValueError, match=r"layers\[1\].indexer \(None\).*GLM-5"):
        GPTConfig(vocab_size=20, n_embed=32, n_head=4, layers=layers, position="none")
    with pytest.raises(ValueError, match=r"q_rank \(None\): DSA's indexer reads"):
        DSASpec(dataclasses.replace(mla, q_rank=None), None)


# --- the GPT through the one protocol ----------------------------------------------------


@pytest.mark.parametrize("spec", SPECS, ids=range(len(SPECS)))
def test_a_layer_counts_its_parameters(spec):
    assert spec.parameters() == sum(p.numel() for p in ConfigurableAttention(spec).parameters())


@pytest.mark.parametrize(
    "block, layers, tied", list(itertools.product(BLOCKS, (True, False), (True, False)))
)
def test_the_parameter_count(block, layers, tied):
    changes = {"tie_weights": tied}
    if not layers:  # the teaching attention, with today's block
        changes.update(layers=None, position="rope")
    c = config(BLOCKS[block], **changes)
    assert parameter_count(c) == sum(p.numel() for p in GPT(c).parameters())


@pytest.mark.parametrize("block", BLOCKS)
def test_cached_pieces_and_generation_equal_recomputation(block):
    model, idx = model_of(BLOCKS[block]), ids(20)
    with torch.no_grad():
        full = model(idx)[0]
        cache = ModelCache.for_model(model, 2)
        pieces = [
            model(idx[:, a:b], cache=cache)[0] for a, b in ((0, 7), (7, 8), (8, 15), (15, 20))
        ]
    assert_close(torch.cat(pieces, dim=1), full, rtol=1e-9, atol=1e-9)
    assert {c.kind for c in cache.layers} == {"full", "window"}
    assert len(cache.layers[1]) == 3  # the window layer keeps size - 1 keys
    prompt = ids(5, seed=2)
    cached = generate(model, prompt, 40, greedy=True)  # past the context: starts again
    assert torch.equal(cached, generate(model, prompt, 40, greedy=True, kv_cache=False))


@pytest.mark.parametrize("block", BLOCKS)
def test_every_layer_gives_its_weights(block):
    model, idx = model_of(BLOCKS[block]), ids(10)
    weights = gpt_attention(model, idx)  # (B, L, H, T, T)
    assert weights.shape == (2, 4, 4, 10, 10)
    assert torch.all(weights.triu(1) == 0)
    assert torch.all(weights[:, 1].tril(-4) == 0)  # the window of 4
    total = weights.sum(-1)
    assert torch.all(total[:, 1] < 1)  # layer 1's sinks take a share
    assert_close(total[:, [0, 2, 3]], torch.ones_like(total[:, [0, 2, 3]]))


def test_a_wrong_piece_changes_the_output():
    """The checks above can fail: a block without its post norms differs."""
    model, idx = model_of(BLOCKS["gemma3"]), ids(8)
    with torch.no_grad():
        before = model(idx)[0]
        model.blocks[0].post1 = nn.Identity()
        assert not torch.allclose(model(idx)[0], before)


# --- refused options ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, error, message",
    [
        ({"layers": SPECS[:2]}, ValueError, r"layers must be a tuple of n_layer \(4\) specs"),
        ({"layers": list(SPECS)}, ValueError, r"layers must be a tuple"),
        (
            {"layers": (SPECS[0],) * 3 + (BlockSpec(8),)},
            TypeError,
            r"layers\[3\] must be a LayerSpec",
        ),
        (
            {"layers": (AttentionSpec(32, 4, 2, 8),) * 4},
            ValueError,
            r"layers\[0\].n_embed \(32\) must be n_embed \(24\)",
        ),
        (
            {"layers": (AttentionSpec(C, 2, 2, 8),) * 4},
            ValueError,
            r"layers\[0\].n_head \(2\) must be n_head \(4\)",
        ),
        (
            {"layers": (SPECS[0],) * 3 + (AttentionSpec(C, 4, 2, 8, kv_source=0),)},
            ValueError,
            r"layers\[3\].kv_source \(0\)",
        ),
        ({"position": "rope"}, ValueError, r"position='rope' acts inside attention"),
        ({"block": "gemma"}, TypeError, r"block must be a BlockSpec, got str"),
    ],
)
def test_refused_combinations_name_the_option(changes, error, message):
    with pytest.raises(error, match=message):
        config(**changes)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"hidden": 0}, r"hidden \(0\) must be positive"),
        ({"activation": "relu"}, r"activation \('relu'\) must be one of"),
        ({"norms": "sandwich"}, r"norms \('sandwich'\) must be one of"),
        ({"eps": 0.0}, r"eps \(0.0\) must be > 0"),
    ],
)
def test_a_block_spec_refuses_what_it_cannot_mean(fields, message):
    with pytest.raises(ValueError, match=message):
        BlockSpec(**{"hidden": 8, **fields})


def test_the_gated_mlp_refuses_an_activation_it_does_not_have():
    with pytest.raises(
        ValueError, match=r"activation \('relu'\): not one of \['silu', 'gelu-tanh'\]"
    ):
        GatedMLP(C, 8, "relu")


def test_learned_positions_still_add_to_a_spec_gpt():
    c = config(position="learned")
    model = GPT(c)
    assert hasattr(model, "pos_emb") and parameter_count(c) == sum(
        p.numel() for p in model.parameters()
    )
    assert dataclasses.replace(c, position="none").layers == SPECS
