"""Tests for snippets/core/model.py: the claims the transformer page makes, measured."""

import dataclasses
import hashlib
import re

import pytest
import torch
from torch.testing import assert_close

from snippets.core.attention import CausalSpec
from snippets.core.model import GPT, Block, GPTConfig, parameter_count
from snippets.layers.configurable import AttentionSpec
from snippets.layers.linear_layers import LinearSpec
from snippets.layers.mla import MLASpec
from snippets.layers.taming import TamedSpec
from tests.snippets.equivalence import from_per_head

# Small sizes: the whole file runs in a few seconds on 2 CPU cores.
SMALL = GPTConfig(vocab_size=40, context_length=16, n_embed=32, n_head=4, n_layer=2)


def spelled(config: GPTConfig, attention: str = "fused", **changes) -> GPTConfig:
    """config with changes; "per-head": every layer the readable per-head one."""
    config = dataclasses.replace(config, **changes)
    if attention == "fused":
        return config
    C, H, T = config.n_embed, config.n_head, config.context_length
    layers = (CausalSpec(C, H, T, per_head=True),) * config.n_layer
    return dataclasses.replace(config, layers=layers)


def make(config: GPTConfig = SMALL, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(config).eval()


def ids(*shape: int, V: int = SMALL.vocab_size, seed: int = 1) -> torch.Tensor:
    return torch.randint(V, shape, generator=torch.Generator().manual_seed(seed))


# --- shapes and loss --------------------------------------------------------------------


@pytest.mark.parametrize("attention", ["fused", "per-head"])
@pytest.mark.parametrize("T", [1, 7, SMALL.context_length])
def test_forward_shapes(attention, T):
    model = make(spelled(SMALL, attention))
    logits, loss = model(ids(3, T))
    assert logits.shape == (3, T, SMALL.vocab_size)
    assert loss is None
    _, loss = model(ids(3, T), ids(3, T, seed=2))
    assert loss.shape == ()


def test_block_keeps_shape_and_is_residual():
    torch.manual_seed(0)
    block = Block(SMALL)
    x = torch.randn(2, 5, SMALL.n_embed)
    assert block(x).shape == x.shape
    # With both sublayers' output projections zeroed, the block is exactly the identity:
    # the stream passes through untouched.
    with torch.no_grad():
        for layer in (block.attn.proj, block.mlp.proj):
            layer.weight.zero_()
            layer.bias.zero_()
    assert torch.equal(block(x), x)


@pytest.mark.parametrize("attention", ["fused", "per-head"])
def test_model_is_causal(attention):
    model = make(spelled(SMALL, attention))
    idx = ids(2, 12)
    logits, _ = model(idx)
    changed = idx.clone()
    changed[:, 6:] = ids(2, 6, seed=5)
    logits_changed, _ = model(changed)
    assert_close(logits_changed[:, :6], logits[:, :6], atol=1e-6, rtol=0)
    assert (logits_changed[:, 6:] - logits[:, 6:]).abs().max() > 1e-4


# --- parameter count --------------------------------------------------------------------


CONFIGS = [
    GPTConfig(vocab_size=7, context_length=3, n_embed=8, n_head=1, n_layer=1),
    SMALL,
    dataclasses.replace(SMALL, n_layer=3, n_head=8, context_length=5),
    GPTConfig(vocab_size=96, context_length=32, n_embed=64, n_head=4, n_layer=2),
    GPTConfig(vocab_size=352, context_length=64, n_embed=48, n_head=6, n_layer=4),
]


@pytest.mark.parametrize(
    "config", CONFIGS, ids=lambda c: f"V{c.vocab_size}-C{c.n_embed}-L{c.n_layer}"
)
@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
@pytest.mark.parametrize("attention", ["fused", "per-head"])
def test_parameter_formula_is_exact(config, tie, attention):
    config = spelled(config, attention, tie_weights=tie)
    model = GPT(config)
    assert parameter_count(config) == sum(p.numel() for p in model.parameters())


def test_parameter_formula_closed_form():
    V, T, C, L = 50257, 1024, 768, 12
    config = GPTConfig(vocab_size=V, context_length=T, n_embed=C, n_head=12, n_layer=L)
    untied = V * C + T * C + L * (12 * C * C + 10 * C) + 2 * C + V * C
    assert parameter_count(config) == untied
    tied = dataclasses.replace(config, tie_weights=True)
    assert parameter_count(tied) == untied - V * C == 124_439_808 - L * 3 * C


def test_tied_weights_are_one_tensor_trained_by_both_uses():
    model = make(dataclasses.replace(SMALL, tie_weights=True))
    assert model.lm_head.weight is model.tok_emb.weight
    assert len(list(model.parameters())) == len(dict(model.named_parameters()))
    _, loss = model(ids(2, 8), ids(2, 8, seed=2))
    loss.backward()
    grad = model.tok_emb.weight.grad
    # Rows of tokens absent from the input still get a gradient: from the LM head.
    absent = sorted(set(range(SMALL.vocab_size)) - set(ids(2, 8).flatten().tolist()))
    assert absent and grad[absent].abs().sum() > 0


# --- per-head and fused -----------------------------------------------------------------


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_fused_and_per_head_compute_the_same_function(tie):
    per_head = make(spelled(SMALL, "per-head", tie_weights=tie))
    fused = from_per_head(per_head)
    assert not any(spec.per_head for spec in fused.config.layers)
    assert fused.config.tie_weights == tie
    assert (fused.lm_head.weight is fused.tok_emb.weight) == tie
    idx, targets = ids(3, SMALL.context_length), ids(3, SMALL.context_length, seed=2)

    logits_p, loss_p = per_head(idx, targets)
    logits_f, loss_f = fused(idx, targets)
    assert_close(logits_f, logits_p, atol=1e-5, rtol=1e-5)
    assert_close(loss_f, loss_p, atol=1e-6, rtol=1e-6)

    loss_p.backward()
    loss_f.backward()
    for name in ("tok_emb.weight", "pos_emb.weight", "ln_f.weight", "blocks.1.mlp.fc.weight"):
        assert_close(
            fused.get_parameter(name).grad, per_head.get_parameter(name).grad, atol=1e-5, rtol=1e-4
        )
    for new_block, block in zip(fused.blocks, per_head.blocks, strict=True):
        heads = block.attn.heads
        expected = torch.cat(
            [h.query.weight.grad for h in heads]
            + [h.key.weight.grad for h in heads]
            + [h.value.weight.grad for h in heads]
        )
        assert_close(new_block.attn.qkv.weight.grad, expected, atol=1e-5, rtol=1e-4)


def test_from_per_head_rejects_a_fused_model():
    with pytest.raises(TypeError, match=re.escape("a GPT of CausalSpec(per_head=True) layers")):
        from_per_head(make())


# --- positions --------------------------------------------------------------------------


def prefix_shuffled(idx: torch.Tensor, seed: int) -> torch.Tensor:
    """idx with all but the last position shuffled."""
    T = idx.size(1)
    perm = torch.randperm(T - 1, generator=torch.Generator().manual_seed(seed))
    return torch.cat([idx[:, perm], idx[:, -1:]], dim=1)


def last_logits_gap(model: GPT, idx: torch.Tensor, seed: int) -> float:
    with torch.no_grad():
        a = model(idx)[0][:, -1]
        b = model(prefix_shuffled(idx, seed))[0][:, -1]
    return (a - b).abs().max().item()


@pytest.mark.parametrize("attention", ["fused", "per-head"])
def test_without_positions_one_block_is_blind_to_order(attention):
    model = make(spelled(SMALL, attention, n_layer=1))
    idx = ids(4, 12)
    assert last_logits_gap(model, idx, seed=0) > 1e-4  # with positions: order matters
    with torch.no_grad():
        model.pos_emb.weight.zero_()
    for seed in range(3):
        assert last_logits_gap(model, idx, seed) < 1e-5


def test_without_positions_two_blocks_see_order_through_the_mask():
    model = make(dataclasses.replace(SMALL, n_layer=2))
    with torch.no_grad():
        model.pos_emb.weight.zero_()
    assert last_logits_gap(model, ids(4, 12), seed=0) > 1e-4


# --- dropout ----------------------------------------------------------------------------


def test_dropout_only_in_training_mode():
    model = make(dataclasses.replace(SMALL, dropout=0.2))
    idx = ids(2, 8)
    assert torch.equal(model(idx)[0], model(idx)[0])
    model.train()
    assert not torch.equal(model(idx)[0], model(idx)[0])


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("idx", "error", "message"),
    [
        (
            torch.zeros(1, 4),
            TypeError,
            "idx must hold integer token ids (torch.long), got torch.float32",
        ),
        (torch.zeros(1, 4, dtype=torch.bool), TypeError, "got torch.bool"),
        ([[1, 2]], TypeError, "idx must be a tensor of token ids, got <class 'list'>"),
        (torch.zeros(4, dtype=torch.long), ValueError, "idx must have shape (B, T), got (4,)"),
        (
            torch.tensor([[1, 2], [3, 40]]),
            ValueError,
            "token id 40 at (b=1, t=1) is out of range for vocab_size=40: ids run from 0 to 39",
        ),
        (torch.tensor([[1, -1]]), ValueError, "token id -1 at (b=0, t=1) is out of range"),
        (
            torch.zeros(1, 17, dtype=torch.long),
            ValueError,
            "T=17 exceeds context_length=16: the position table has only 16 rows",
        ),
    ],
    ids=["float", "bool", "list", "1-D", "id >= V", "negative id", "T too long"],
)
def test_bad_idx(idx, error, message):
    with pytest.raises(error, match=re.escape(message)):
        make()(idx)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"n_head": 5}, ValueError, "n_embed (32) must be divisible by n_head (5)"),
        ({"n_layer": 0}, ValueError, "n_layer (0) must be positive"),
        ({"vocab_size": 40.0}, TypeError, "vocab_size (40.0) must be an int, got float"),
        ({"context_length": True}, TypeError, "context_length (True) must be an int, got bool"),
        ({"dropout": 1.0}, ValueError, "dropout (1.0) must be in [0, 1)"),
        (
            {"position": "flash"},
            ValueError,
            "position ('flash') must be one of ['learned', 'sinusoidal', 'rope', 'alibi',",
        ),
    ],
)
def test_bad_config(changes, error, message):
    with pytest.raises(error, match=re.escape(message)):
        dataclasses.replace(SMALL, **changes)


def test_gpt_needs_a_config():
    with pytest.raises(
        TypeError, match=re.escape("config must be a GPTConfig, got <class 'dict'>")
    ):
        GPT({"vocab_size": 10})


# sha256 (first 16 hex digits) of GPT(GPTConfig(**changes)).state_dict() after
# torch.manual_seed(0). The plain, tamed and linear ones were recorded before
# Block took its pieces from config.block and before the layers came from specs:
# the teaching GPT's names, order and initial weights, kept so that a model
# retrained from the same seed is the committed one. The per-head, grouped and
# latent ones were recorded when their layers became specs (ConfigurableAttention
# and LatentAttention name and lay out their weights their own way).
C, H, T = 64, 4, 32  # GPTConfig's defaults
PIECES = {"qk_norm": "head", "soft_cap": 30.0, "sinks": True, "gate": "elementwise"}
SEEDED = {
    "plain": ({}, "5287a4981bd66b90"),
    "per-head": ({"layers": (CausalSpec(C, H, T, per_head=True),) * 2}, "900d59e50b939721"),
    "grouped, alibi, tied": (
        {"layers": (AttentionSpec(C, H, 2, 16, rope=None, alibi=True, out_bias=True),) * 2,
         "position": "none", "tie_weights": True},
        "6690f2299490ec57",
    ),
    "mla": (
        {"layers": (MLASpec(C, H, 8, 16, 0, 16, rope=None, latent_norm=False,
                            proj_bias=True),) * 2},
        "ffe5bf3a41496bde",
    ),
    "tamed": ({"layers": (TamedSpec(C, H, T, "learned", **PIECES),) * 2}, "8d56ca030b1b3b7c"),
    "linear": (
        {"layers": (LinearSpec(H, C, 16, 16), CausalSpec(C, H, T, "learned"))},
        "667722220b0ed126",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", SEEDED)
def test_the_seeded_initial_weights_are_the_recorded_ones(name):
    changes, digest = SEEDED[name]
    torch.manual_seed(0)
    state = GPT(GPTConfig(**changes)).state_dict()
    h = hashlib.sha256()
    for key, tensor in state.items():
        h.update(key.encode())
        h.update(tensor.numpy().tobytes())
    assert h.hexdigest()[:16] == digest
