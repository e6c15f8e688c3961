"""The one layer protocol, as a matrix: every attention variant a GPT can hold, times
every operation the guide offers, through `GPT.forward(idx, cache=..., return_weights=...)`.

Operations: the causal forward pass; cached logits equal to one full pass (a prompt,
single tokens, a chunk) and cached greedy generation equal to recomputing; a rolling
cache with W >= T equal to the full pass; every layer's attention weights (or the
named error of a layer that has none); the parameter count; a checkpoint saved and
loaded. A cell is either checked or refused by design with an error naming why.
The variants named "spec-" choose each block's layer from a spec (GPTConfig.layers:
today's configurable layer, DeepSeek's MLA, Gated DeltaNet, Kimi Delta Attention,
Mamba2), as the published families do. The spec layers also get the same checks at
the layer, with the caches their new_cache() makes.
"""

import dataclasses
import itertools

import pytest
import torch
from torch.testing import assert_close

from snippets.core.attention import CausalSpec
from snippets.core.cache import LayerCache, ModelCache
from snippets.core.model import GPT, GPTConfig, parameter_count
from snippets.core.rope_scaling import RopeSpec
from snippets.layers.compressed_attention import CompressedSpec
from snippets.layers.configurable import AttentionSpec, ConfigurableAttention
from snippets.layers.differential import DiffAttentionSpec
from snippets.layers.linear_layers import LinearSpec
from snippets.layers.mla import LatentAttention, MLASpec
from snippets.layers.sparse_mla import DSASpec, IndexerSpec
from snippets.layers.taming import TamedSpec
from snippets.run.checkpoint import config_data, config_from_data, save_checkpoint
from snippets.run.generate import generate
from tests.snippets.equivalence import as_specs

BASE = GPTConfig(vocab_size=20, context_length=16, n_embed=32, n_head=4, n_layer=2)
V = BASE.vocab_size

C, H, T, D = BASE.n_embed, BASE.n_head, BASE.context_length, 8


def every(spec, position: str = "none") -> dict:
    """Both blocks' layer from spec; position: what the embeddings add."""
    return {"layers": (spec,) * BASE.n_layer, "position": position}


def tamed(position: str, **pieces) -> TamedSpec:
    return TamedSpec(C, H, T, position, **pieces)


GDN = LinearSpec(H, C, D, D)  # Gated DeltaNet of the softmax layer's heads and widths
LATENT = {"rope": None, "latent_norm": False, "proj_bias": True}  # the kv-heads page's MLA
VARIANTS = {
    "plain": {},
    "sinusoidal": {"position": "sinusoidal"},
    "rope": {"position": "rope"},
    "alibi": {"position": "alibi"},
    "none": {"position": "none"},
    "per-head": every(CausalSpec(C, H, T, per_head=True), "learned"),
    "gqa": every(AttentionSpec(C, H, 2, D, out_bias=True)),
    "mqa": every(AttentionSpec(C, H, 1, D, rope=None, alibi=True, out_bias=True)),
    "mla": every(MLASpec(C, H, 8, D, 0, D, **LATENT), "learned"),
    "mla-alibi": every(MLASpec(C, H, 8, D, 0, D, alibi=True, **LATENT)),
    "qk-norm-head": every(tamed("rope", qk_norm="head")),
    "qk-norm-all": every(tamed("learned", qk_norm="all"), "learned"),
    "soft-cap": every(tamed("rope", soft_cap=2.0)),
    "sinks": every(tamed("rope", sinks=True)),
    "gate-elementwise": every(tamed("learned", gate="elementwise"), "learned"),
    "gate-head": every(tamed("alibi", gate="head")),
    "tamed-all": every(tamed("rope", qk_norm="head", soft_cap=2.0, sinks=True, gate="head")),
    "hybrid": {"layers": (GDN, CausalSpec(C, H, T, "rope")), "position": "none"},
    "hybrid-mla": {"layers": (MLASpec(C, H, 8, D, 0, D, **LATENT), GDN)},
    "hybrid-small-state": {"layers": (LinearSpec(2, C, 8, 8), CausalSpec(C, H, T))},
    "rope-long": {"position": "rope", "max_length": 24},
    # Each block's layer from a spec: the configurable layer as Qwen3-Next's softmax
    # layers (gate, QK-norm) beside Gated DeltaNet; a window layer; DeepSeek's MLA;
    # Kimi Linear (KDA with MLA without RoPE); a Mamba2 hybrid (Nemotron-H); lightning
    # attention beside softmax (MiniMax-01).
    "spec-qwen3-next": {
        "layers": (
            LinearSpec(4, 32, 8, 8, chunk_size=4),
            AttentionSpec(32, 4, 2, 8, qk_norm="head", gate="elementwise"),
        ),
        "position": "none",
    },
    "spec-window": {
        "layers": (AttentionSpec(32, 4, 1, 8, kind="window", size=4), AttentionSpec(32, 4, 4, 8)),
        "position": "none",
    },
    "spec-mla": {
        "layers": (MLASpec(32, 4, 8, 6, 4, 6, q_rank=12), MLASpec(32, 4, 8, 6, 4, 6)),
        "position": "none",
    },
    "spec-kimi-linear": {
        "layers": (LinearSpec(4, 32, 8, 8, rule="kda"), MLASpec(32, 4, 8, 6, 0, 6, rope=None)),
        "position": "none",
    },
    "spec-mamba2": {
        "layers": (LinearSpec(2, 32, 8, 16, rule="mamba2"), AttentionSpec(32, 4, 1, 8)),
        "position": "learned",
    },
    "spec-minimax": {
        "layers": (
            LinearSpec(4, 32, 8, 8, rule="lightning", slopes=(0.5, 0.25, 0.125, 0.0625)),
            AttentionSpec(32, 4, 4, 8),
        ),
        "position": "none",
    },
    "spec-dsa": {  # 8 indexer heads: a key all of whose ReLU'd scores are 0 ties with
        # the others at 0, and top-k breaks such ties by the number of keys, not causally
        "layers": (
            DSASpec(MLASpec(32, 4, 8, 6, 4, 6, q_rank=12), IndexerSpec(8, 8, 4, top_k=3)),
            DSASpec(MLASpec(32, 4, 8, 6, 4, 6, q_rank=12), IndexerSpec(8, 8, 0, top_k=5)),
        ),
        "position": "none",
    },
    "spec-deepseek-v4": {
        "layers": tuple(
            CompressedSpec(32, 4, 8, 4, 12, window=5, o_groups=2, o_rank=6, **kind)
            for kind in (
                {},
                {"ratio": 3, "overlap": True, "indexer_heads": 2, "indexer_size": 8, "top_k": 2},
                {"ratio": 4},
            )
        ),
        "n_layer": 3,
        "position": "none",
    },
    # Differential attention (Ye et al. 2024): two softmax maps per head, subtracted;
    # lambda_init by each layer's depth.
    "spec-differential": {
        "layers": (DiffAttentionSpec(32, 4, 2, 8), DiffAttentionSpec(32, 4, 4, 8, depth=1)),
        "position": "none",
    },
}
# Blocks with a linear layer: no weights, no rolling cache.
LINEAR = {
    "hybrid",
    "hybrid-mla",
    "hybrid-small-state",
    "spec-qwen3-next",
    "spec-kimi-linear",
    "spec-mamba2",
    "spec-minimax",
}
LINEAR_LAYERS = r"(GatedDeltaNet|KimiDeltaAttention|Mamba2|LightningAttention)"
NO_WEIGHTS = LINEAR_LAYERS + r" has no attention weights"
# Spec layers that keep RoPE keys turned at their own positions: no rolling cache.
NO_ROLLING = {
    "gqa": r"ConfigurableAttention keeps no rolling cache: its keys turn once",
    "mqa": r"ConfigurableAttention keeps no rolling cache: its keys turn once",
    "mla": r"LatentAttention keeps no rolling cache: .*rope keys turned",
    "mla-alibi": r"LatentAttention keeps no rolling cache: .*rope keys turned",
    "hybrid-mla": r"LatentAttention keeps no rolling cache: .*rope keys turned",
    "spec-window": r"ConfigurableAttention keeps no rolling cache: its keys turn once",
    "spec-mla": r"LatentAttention keeps no rolling cache: .*rope keys turned",
    "spec-dsa": r"SparseLatentAttention keeps no rolling cache: .*rope keys turned",
    "spec-deepseek-v4": r"CompressedAttention keeps no rolling cache: .*window of its own",
}
# Layers whose weights span the raw keys, then the compressed entries, beside a sink.
ENTRIES = {"spec-deepseek-v4"}


# LayerSpecs a GPT refuses by design, with why: the matrix need not hold them.
REFUSED_KINDS = {"Large4Spec": "its layer takes an indexer too: it builds no layer alone"}


def layer_kinds_of_the_package() -> set[type]:
    """Every LayerSpec class of snippets.core and snippets.layers, their modules imported."""
    import importlib
    import pkgutil

    import snippets.core
    import snippets.layers
    from snippets.core.spec import LayerSpec

    for package in (snippets.core, snippets.layers):
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
    found, todo = set(), [LayerSpec]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith(("snippets.core.", "snippets.layers.")):
                found.add(sub)
    return found


def test_the_matrix_holds_every_kind_of_layer_the_package_has():
    """A new kind of layer (a LayerSpec in snippets/core or snippets/layers) gets a row
    of VARIANTS, or is refused by a GPT and named in REFUSED_KINDS."""
    held = {CausalSpec} | {
        type(spec) for fields in VARIANTS.values() for spec in fields.get("layers") or ()
    }
    missing = {kind.__name__ for kind in layer_kinds_of_the_package() - held} - set(REFUSED_KINDS)
    assert not missing, f"no row of VARIANTS builds a GPT of {sorted(missing)}: add one"


def model_of(name: str) -> GPT:
    torch.manual_seed(0)
    model = GPT(dataclasses.replace(BASE, **VARIANTS[name])).double().eval()
    with torch.no_grad():  # away from the small init, where much agrees by accident
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return model


def ids(T: int, B: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def check_cached_equals_full(model: GPT, cache, idx: torch.Tensor, cuts) -> None:
    """model(idx) fed in pieces through cache equals one full pass."""
    with torch.no_grad():
        pieces = [model(idx[:, a:b], cache=cache)[0] for a, b in itertools.pairwise(cuts)]
        full = model(idx)[0]
    assert cache.seen == idx.size(1)
    assert_close(torch.cat(pieces, dim=1), full, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", VARIANTS)
def test_the_forward_pass_is_causal(name):
    model, idx = model_of(name), ids(12)
    changed = idx.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % V
    with torch.no_grad():
        a, b = model(idx)[0], model(changed)[0]
    assert_close(a[:, :8], b[:, :8], rtol=0, atol=0)
    assert not torch.allclose(a[:, 8:], b[:, 8:])


@pytest.mark.parametrize("name", VARIANTS)
def test_cached_logits_and_generation_equal_recomputation(name):
    model = model_of(name)
    if name == "per-head":  # refused by design: the readable layer keeps no keys
        with pytest.raises(TypeError, match=r"per-head layer keeps no keys.*per_head=False"):
            ModelCache.for_model(model, 2)
        return
    T = model.config.longest
    cache = ModelCache.for_model(model, 2)
    check_cached_equals_full(model, cache, ids(T), (0, 5, 6, 7, T - 3, T))
    prompt = ids(4, seed=2)
    cached = generate(model, prompt, 2 * T, greedy=True)  # past the context: starts again
    assert torch.equal(cached, generate(model, prompt, 2 * T, greedy=True, kv_cache=False))


@pytest.mark.parametrize("name", VARIANTS)
def test_a_rolling_cache_longer_than_the_text_is_the_full_pass(name):
    model, T = model_of(name), 12
    refusal = None
    if name == "per-head":
        refusal = r"per-head layer keeps no keys"
    if name in LINEAR:  # refused by design: a fixed-size state rolls nothing
        refusal = LINEAR_LAYERS + r" keeps no rolling cache: it keeps a fixed-size state"
    if name in NO_ROLLING:  # refused by design, named by the layer
        refusal = NO_ROLLING[name]
    if refusal is not None:  # by the layer, when its cache is made
        with pytest.raises(TypeError, match=refusal):
            ModelCache.for_model(model, 2, window=T, sinks=2)
        return
    cache = ModelCache.for_model(model, 2, window=T, sinks=2)
    check_cached_equals_full(model, cache, ids(T), list(range(T + 1)))  # token by token


@pytest.mark.parametrize("name", VARIANTS)
def test_a_forward_pass_reads_no_value_of_its_tensors(name):
    """On the meta device a tensor has a shape and no values: reading one (bool(), .item(),
    .tolist()) raises. A forward pass that runs there, whole with its loss and cached, never
    makes the host wait for the device: its checks read shapes only."""
    model = GPT(dataclasses.replace(BASE, **VARIANTS[name])).to("meta").eval()
    idx = torch.zeros(2, 9, dtype=torch.long, device="meta")
    with torch.no_grad():
        logits, loss = model(idx, idx)
        assert logits.is_meta and loss.is_meta
        if name != "per-head":
            cache = ModelCache.for_model(model, 2)
            for a, b in ((0, 5), (5, 6), (6, 9)):  # a prompt, a token, a chunk
                model(idx[:, a:b], cache=cache)


@pytest.mark.parametrize("name", VARIANTS)
def test_every_layer_gives_its_weights_or_says_why_not(name):
    model, idx = model_of(name), ids(10)
    if name in LINEAR:
        with pytest.raises(ValueError, match=NO_WEIGHTS):
            model(idx, return_weights=True)
        return
    with torch.no_grad():
        logits, _, weights = model(idx, return_weights=True)
        assert_close(logits, model(idx)[0], rtol=1e-9, atol=1e-9)
    assert len(weights) == model.config.n_layer
    for w in weights:
        raw = w[..., :10]  # the keys of the 10 positions; then any entries
        assert w.shape[:3] == (2, model.config.n_head, 10) and raw.shape[-1] == 10
        assert w.size(-1) == 10 or name in ENTRIES
        assert torch.all(raw.triu(1) == 0)  # nothing from a later position
        total = w.sum(-1)  # 1 per row; below 1 with a sink taking its share
        sinks = any(getattr(spec, "sinks", False) for spec in model.config.layer_specs())
        if sinks or name in ENTRIES:
            assert torch.all(total < 1) and torch.all(total > 0)
        else:
            assert_close(total, torch.ones_like(total))
    if name == "per-head":
        return
    cache = ModelCache.for_model(model, 2)  # a cached step: the full pass's last row
    with torch.no_grad():
        model(idx[:, :9], cache=cache)
        _, _, step = model(idx[:, 9:], cache=cache, return_weights=True)
    for w, s in zip(weights, step, strict=True):
        entries = w.size(-1) - 10  # the same entries, after the raw keys, in both
        held = s.size(-1) - entries  # a window's cache holds only the keys it sees
        assert_close(s[..., :held], w[:, :, 9:, 10 - held : 10], rtol=1e-9, atol=1e-9)
        assert_close(s[..., held:], w[:, :, 9:, 10:], rtol=1e-9, atol=1e-9)
        assert torch.all(w[:, :, 9:, : 10 - held] == 0)


@pytest.mark.parametrize("name", VARIANTS)
def test_the_parameter_count_and_a_checkpoint(name, tmp_path):
    model = model_of(name)
    assert parameter_count(model.config) == sum(p.numel() for p in model.parameters())
    config = config_data(model.config)  # its specs too, tagged by class
    save_checkpoint({"config": config, "model": model.state_dict()}, tmp_path / "ckpt.pt")
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    loaded = GPT(config_from_data(GPTConfig, state["config"])).double().eval()
    assert loaded.config == model.config
    loaded.load_state_dict(state["model"])
    with torch.no_grad():
        assert torch.equal(loaded(ids(9))[0], model(ids(9))[0])


# The variants whose softmax layers are the plain causal layer or TamedAttention.
FUSED = [
    name
    for name in VARIANTS
    if any(type(s) in (CausalSpec, TamedSpec) for s in model_of(name).config.layer_specs())
    and name != "per-head"
]


@pytest.mark.parametrize("name", FUSED)
def test_the_plain_and_tamed_layers_are_options_of_the_configurable_layer(name):
    """The plain causal layer and TamedAttention compute what ConfigurableAttention
    computes with the same options: a GPT of them rebuilt with AttentionSpecs
    (as_specs) has the same count and computes the same logits, whole and cached."""
    model = model_of(name)
    specs = as_specs(model)
    assert all(type(s) in (AttentionSpec, LinearSpec) for s in specs.config.layers)
    assert parameter_count(specs.config) == parameter_count(model.config)
    T = model.config.longest
    idx = ids(T)
    with torch.no_grad():
        assert_close(specs(idx)[0], model(idx)[0], rtol=1e-10, atol=1e-10)
    check_cached_equals_full(specs, ModelCache.for_model(specs, 2), idx, (0, 5, 6, T))


def test_refused_combinations_name_the_option():
    with pytest.raises(ValueError, match=r"qk_norm \('rms'\) must be one of"):
        tamed("rope", qk_norm="rms")
    with pytest.raises(ValueError, match=r"per_head=True with position='rope'"):
        CausalSpec(C, H, T, "rope", per_head=True)
    with pytest.raises(ValueError, match=r"alibi=True with rope=RopeSpec"):
        AttentionSpec(C, H, 2, D, alibi=True)
    with pytest.raises(ValueError, match=r"alibi=True with rope_head_size=4"):
        MLASpec(C, H, 8, D, 4, D, alibi=True)
    model = model_of("rope")
    with pytest.raises(ValueError, match=r"cache must be a ModelCache with one cache per layer"):
        model(ids(2), cache=LayerCache())
    cache = ModelCache.for_model(model, 1)
    model(ids(14, B=1), cache=cache)
    with pytest.raises(ValueError, match=r"14 cached \+ 3 new positions exceed context_length=16"):
        model(ids(3, B=1), cache=cache)
    rolling = ModelCache.for_model(model, 1, window=4)
    with pytest.raises(ValueError, match=r"a rolling cache reads one token at a time"):
        model(ids(2, B=1), cache=rolling)
    with pytest.raises(ValueError, match=r"sinks \(2\) are for a rolling cache: give window"):
        ModelCache.for_model(model, 1, sinks=2)


class Forgetful(LayerCache):
    """A planted fault: a cache that reads its step but keeps nothing of it."""

    def update(self, *new, turn=None):
        held, positions = self.held, self.positions
        out = super().update(*new, turn=turn)
        self.held, self.positions = held, positions  # the update dropped
        return out


def test_the_matrix_catches_a_cache_that_drops_one_layers_update():
    model, T = model_of("rope"), 12
    cache = ModelCache.for_model(model, 2)
    check_cached_equals_full(model, cache, ids(T), (0, 5, 6, T))  # the real one passes
    broken = ModelCache.for_model(model, 2)
    broken.layers[1] = Forgetful()  # layer 1 reads its step, keeps nothing
    with pytest.raises(AssertionError):
        check_cached_equals_full(model, broken, ids(T), (0, 5, 6, T))


SPECS = {
    "full": AttentionSpec(32, 4, 2, 8),
    "window": AttentionSpec(32, 4, 1, 8, kind="window", size=4, qk_norm="head"),
    "chunk-nope": AttentionSpec(
        32, 4, 2, 8, kind="chunk", size=5, rope=None, temperature=(4, 0.1)
    ),  # fmt: skip
    "capped-sinks": AttentionSpec(32, 4, 4, 8, soft_cap=3.0, sinks=True, gate="head"),
    "alibi-window-capped": AttentionSpec(
        32, 4, 2, 8, kind="window", size=4, rope=None, alibi=True, soft_cap=3.0
    ),
    # Gemma 4's full layers: K=V, the norm on V, proportional RoPE, unscaled scores.
    "gemma4-full": AttentionSpec(
        32,
        4,
        1,
        8,
        qk_norm="head",
        k_eq_v=True,
        v_norm=True,
        scale=1.0,
        rope=RopeSpec(rotary_dim=4, scaling="proportional"),
    ),
}
LAYERS = {
    **{f"configurable-{k}": (lambda s=s: ConfigurableAttention(s)) for k, s in SPECS.items()},
    "latent": lambda: LatentAttention(MLASpec(32, 4, 8, 6, 4, 6, q_rank=12)),
    "latent-no-q-rank": lambda: LatentAttention(MLASpec(32, 2, 8, 6, 4, 6, rope=RopeSpec())),
    "latent-no-rope": lambda: LatentAttention(MLASpec(32, 4, 8, 6, 4, 6, rope=None)),  # Kimi
    "latent-alibi": lambda: LatentAttention(MLASpec(32, 4, 8, 6, 0, 6, rope=None, alibi=True)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_the_layers_outside_gpt_config_keep_the_protocol(name):
    torch.manual_seed(0)
    layer = LAYERS[name]().double()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.2 * torch.randn_like(p))
    x = torch.randn(2, 14, 32, dtype=torch.double)
    with torch.no_grad():
        full, weights = layer(x, return_weights=True)
        assert_close(full, layer(x), rtol=1e-9, atol=1e-9)
        cache = layer.new_cache(2, 14)
        pieces = [layer(x[:, a:b], cache) for a, b in ((0, 6), (6, 7), (7, 11), (11, 14))]
        assert_close(torch.cat(pieces, dim=1), full, rtol=1e-9, atol=1e-9)
        cache = layer.new_cache(2, 14)
        layer(x[:, :13], cache)
        _, step = layer(x[:, 13:], cache, return_weights=True)
    assert weights.shape[-2:] == (14, 14) and torch.all(weights.triu(1) == 0)
    assert_close(step[..., -cache.positions.numel() :], weights[:, :, 13:, cache.positions])
    with pytest.raises(TypeError, match=r"keeps no rolling cache: "):
        layer.new_cache(2, 14, window=4)
