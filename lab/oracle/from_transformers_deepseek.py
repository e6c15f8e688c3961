"""DeepSeek-V3.2, GLM-5 and Mistral 4 layers (transformers) as the guide's MLA variants.

    layer = load_attention(model, i)     # lab/oracle/from_transformers.py dispatches here
    layers = load_attentions(model)      # every layer, GLM-5's shared choices wired

- deepseek_v32 and glm_moe_dsa ("indexed_attention" layers): a
  snippets.layers.sparse_mla.SparseLatentAttention. DeepSeek-V3.2's indexer pairs its
  RoPE channels as (i, i + R/2), GLM-5's as (2i, 2i + 1) (transformers'
  GlmMoeDsaIndexer); GLM-5's "shared" layers (config.indexer_types) have no
  indexer and reuse the last "full" layer's choice.
- mistral4: a TemperedLatentAttention, the query temperature of
  rope_parameters' llama_4_scaling_beta over original_max_position_embeddings.
- deepseek_v4: a snippets.layers.compressed_attention.CompressedAttention, its window,
  heavily compressed or compressed sparse layer (config.layer_types).
- mistral_large4 (its text model, mistral_large4_text): a
  snippets.layers.learned_temperature.LearnedTemperatureAttention: queries from x, the
  learned per-head temperature, LeRoPE's learned frequencies (none on
  config.no_rope_layers' NoPE layers), the indexer's queries from LayerNorm(x), its
  "shared" layers reusing the last "full" one's choice, and layers reading an
  earlier layer's latents (config.kv_source_layers).

transformers is a tooling dependency: snippets/ never imports it.
"""

import functools
import math
from types import SimpleNamespace

import torch
import torch.nn as nn

from snippets.layers.compressed_attention import CompressedAttention, CompressedSpec
from snippets.layers.learned_temperature import Large4Spec, LearnedTemperatureAttention
from snippets.layers.pooled_indexer import PooledIndexer
from snippets.layers.sparse_mla import IndexerSpec, SparseLatentAttention, TemperedLatentAttention

__all__ = [
    "INDEXER_PAIRS",
    "loaders",
    "load_dsa",
    "load_mistral4",
    "load_v4",
    "load_large4",
    "large4_spec",
    "text_model",
    "wire",
]

# model_type -> the indexer's RoPE pairs (the MLA's own are adjacent in both).
INDEXER_PAIRS = {"deepseek_v32": "half", "glm_moe_dsa": "adjacent", "glm5_next_text": "adjacent"}


def _module(model: nn.Module, index: int) -> nn.Module:
    decoder = model.model if hasattr(model, "model") else model
    return decoder.layers[index].self_attn


def _mla(model: nn.Module, index: int, base):
    """The plain MLA spec and layer, as lab/oracle/from_transformers.py loads DeepSeek-V3's."""
    spec = base.mla_spec(model.config)
    return spec, base.load_mla(_module(model, index), spec, model.config)


def _refuse(name: str, value, why: str):
    raise ValueError(f"config.{name} ({value!r}): {why}")


def indexer_of(config, index: int, pairs: str):
    """(layer `index`'s IndexerSpec, or None for a "shared" layer; the earlier
    "full" layers), from config.indexer_types (every layer "full" without it)."""
    types = getattr(config, "indexer_types", None) or ["full"] * config.num_hidden_layers
    if types[index] not in ("full", "shared"):
        _refuse("indexer_types", types[index], f"layer {index}: 'full' or 'shared'")
    earlier = [i for i in range(index) if types[i] == "full"]
    if types[index] == "shared":
        if not earlier:
            _refuse("indexer_types", types[: index + 1], f"layer {index} shares no earlier indexer")
        return None, earlier
    indexer = IndexerSpec(
        n_head=config.index_n_heads,
        head_size=config.index_head_dim,
        rope_dims=config.qk_rope_head_dim,
        top_k=config.index_topk,
        pairs=pairs,
    )
    return indexer, earlier


@torch.no_grad()
def load_dsa(model: nn.Module, index: int, base) -> SparseLatentAttention:
    """Layer `index` of a DeepSeek-V3.2 or GLM-5 model: MLA with its indexer.

    A GLM-5 "shared" layer comes back without one; its `source_index` names
    the layer whose choice it reads (load_attentions wires it).
    """
    config = model.config
    family = config.model_type
    if family not in INDEXER_PAIRS:
        _refuse("model_type", family, f"not one of {list(INDEXER_PAIRS)}")
    indexer, earlier = indexer_of(config, index, INDEXER_PAIRS[family])
    spec, mla = _mla(model, index, base)
    layer = SparseLatentAttention(spec, indexer).to(mla.proj.weight.dtype)
    missing, unexpected = layer.load_state_dict(mla.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("indexer.") for k in missing)
    if indexer is None:
        layer.source_index = earlier[-1]
        return layer.eval()
    theirs, ours = _module(model, index).indexer, layer.indexer
    if (pool := getattr(config, "index_kpool", None)) is not None:  # GLM-5-Next's pools
        tail = config.index_kpool_always_select_tail
        layer.indexer = PooledIndexer(
            indexer, spec.n_embed, spec.q_rank, spec.rope, pool=pool, tail=tail
        ).to(mla.proj.weight.dtype)
        ours = layer.indexer
        ours.gate.weight.copy_(theirs.index_kpool_compress_gate)
        ours.place.copy_(theirs.index_kpool_compress_ape)
    ours.q.weight.copy_(theirs.wq_b.weight)
    ours.k.weight.copy_(theirs.wk.weight)
    ours.k_norm.weight.copy_(theirs.k_norm.weight)
    ours.k_norm.bias.copy_(theirs.k_norm.bias)
    ours.weights.weight.copy_(theirs.weights_proj.weight)
    return layer.eval()


def load_mistral4(model: nn.Module, index: int, base) -> TemperedLatentAttention:
    """Layer `index` of a Mistral 4 model: MLA with the query temperature."""
    config = model.config
    base.layer_type(config, index)  # checks the index
    params = config.rope_parameters
    beta = params.get("llama_4_scaling_beta")
    length = params.get("original_max_position_embeddings")
    if beta is None or length is None:
        _refuse("rope_parameters", params, "needs llama_4_scaling_beta and its length")
    spec, mla = _mla(model, index, base)  # its RoPE on the Dr of each head's Dn + Dr
    layer = TemperedLatentAttention(spec, int(length), float(beta)).to(mla.proj.weight.dtype)
    layer.load_state_dict(mla.state_dict())
    return layer.eval()


# DeepSeek-V4's layer types -> (its rope_parameters key, compressed sparse?)
V4_TYPES = {
    "sliding_attention": ("main", None),
    "heavily_compressed_attention": ("compress", False),
    "compressed_sparse_attention": ("compress", True),
}


@torch.no_grad()
def load_v4(model: nn.Module, index: int, base) -> CompressedAttention:
    """Layer `index` of a DeepSeek-V4 model: window, HCA or CSA."""
    config = model.config
    kind = base.layer_type(config, index)
    if kind not in V4_TYPES:
        _refuse("layer_types", kind, f"layer {index}: one of {list(V4_TYPES)}")
    rope, sparse = V4_TYPES[kind]
    D = config.head_dim
    if config.num_key_value_heads != 1:
        _refuse("num_key_value_heads", config.num_key_value_heads, "DeepSeek-V4 has one K = V head")
    turn = base.rope_spec(config, rope, D)  # the layer refuses an attention factor != 1
    ratio = None if sparse is None else config.compress_rates[kind]
    spec = CompressedSpec(
        n_embed=config.hidden_size,
        n_head=config.num_attention_heads,
        head_size=D,
        rope_dims=turn.rotary_dim or D,
        q_rank=config.q_lora_rank,
        window=config.sliding_window,
        o_groups=config.o_groups,
        o_rank=config.o_lora_rank,
        ratio=ratio,
        overlap=bool(sparse),
        indexer_heads=config.index_n_heads if sparse else None,
        indexer_size=config.index_head_dim if sparse else None,
        top_k=config.index_topk if sparse else None,
        eps=config.rms_norm_eps,
        rope=turn,
    )
    theirs = _module(model, index)
    layer = CompressedAttention(spec).to(theirs.q_a_proj.weight.dtype)
    pairs = [
        (layer.q_down.weight, theirs.q_a_proj.weight),
        (layer.q_norm, theirs.q_a_norm.weight),
        (layer.q_up.weight, theirs.q_b_proj.weight),
        (layer.kv.weight, theirs.kv_proj.weight),
        (layer.kv_norm, theirs.kv_norm.weight),
        (layer.sinks, theirs.sinks),
        (layer.o_down, theirs.o_a_proj.weight.view(layer.o_down.shape)),
        (layer.proj.weight, theirs.o_b_proj.weight),
    ]
    compressors = []
    if ratio is not None:
        compressors.append((layer.compressor, theirs.compressor))
    if sparse:
        ix = theirs.compressor.indexer
        compressors.append((layer.indexer, ix))
        pairs += [(layer.index_q.weight, ix.q_b_proj.weight)]
        pairs += [(layer.index_w.weight, ix.scorer.weights_proj.weight)]
    for ours, them in compressors:
        pairs += [(ours.c.weight, them.kv_proj.weight), (ours.z.weight, them.gate_proj.weight)]
        pairs += [(ours.bias, them.position_bias), (ours.norm, them.kv_norm.weight)]
    for ours, them in pairs:
        ours.copy_(them)
    return layer.eval()


def wire(layers: list) -> list:
    """Each shared layer reads the choice of the layer its source_index names."""
    for layer in layers:
        source = getattr(layer, "source_index", None)
        if source is not None:
            layer.choice = layers[source].choice
    return layers


def loaders(**base) -> dict:
    """Loaders by layer type or by model_type, for lab/oracle/from_transformers.py's
    LAYER_LOADERS. base: its mla_spec, load_mla, layer_type and rope_spec (passed
    in, as that module imports this one)."""
    base = SimpleNamespace(**base)
    return {
        "indexed_attention": functools.partial(load_dsa, base=base),
        "mistral4": functools.partial(load_mistral4, base=base),
        "deepseek_v4": functools.partial(load_v4, base=base),
        **dict.fromkeys(LARGE4, functools.partial(load_large4, base=base)),
    }


# --- Mistral Large 4 ---------------------------------------------------------------------

LARGE4 = ("mistral_large4_text", "mistral_large4")  # its text model, and the whole


def text_model(model: nn.Module) -> nn.Module:
    """A Mistral Large 4 or Kimi K2.5 model's text model (its decoder; Kimi K2.5's is
    DeepSeek-V3's); any other model as it is."""
    if getattr(model.config, "model_type", None) not in ("mistral_large4", "kimi_k25"):
        return model
    inner = model.model if hasattr(model, "model") else model
    return inner.language_model


def large4_source(config, index: int) -> int | None:
    """The layer whose latents layer `index` reads (config.kv_source_layers), or None.

    transformers keeps one latent per kind (RoPE, NoPE) and a reader takes the
    last one stored: the source must be of its kind, and the last of its kind."""
    mode = config.kv_sharing_modes[index]
    if mode not in ("reuse", "reuse_but_indexer"):
        return None
    source, rope = config.kv_source_layers[index], config.no_rope_layers
    modes = config.kv_sharing_modes
    stored = [j for j in range(index) if modes[j] == "store" and rope[j] == rope[index]]
    if not stored or stored[-1] != source:
        _refuse(
            "kv_source_layers",
            config.kv_source_layers,
            f"layer {index} would read layer {stored[-1] if stored else None}'s latents "
            f"(the last stored of its kind), not layer {source}'s",
        )
    return source


def large4_spec(config, index: int, base):
    """Layer `index` of a Mistral Large 4 text config as a Large4Spec."""
    base.layer_type(config, index)  # checks the index
    use_rope = bool(config.no_rope_layers[index])
    Dn, Dr = config.qk_nope_head_dim, config.qk_rope_head_dim
    rope = None
    if use_rope:
        rope = base.rope_spec(config, "full_attention", Dr)  # head_dim: Dr, set by the config
        if rope.rotary_dim is not None:
            _refuse("rope_parameters", config.rope_parameters, f"must turn all {Dr}")
    params = config.rope_parameters  # every layer's scale, NoPE too: transformers' rule
    scale = (Dn + Dr) ** -0.5
    m, factor = params.get("mscale_all_dim"), params.get("factor") or 1.0
    if params.get("rope_type", "default") != "default" and m and factor > 1:
        scale *= (0.1 * m * math.log(factor) + 1) ** 2  # YaRN's mscale, squared
    if config.num_key_value_heads != config.num_attention_heads:
        _refuse("num_key_value_heads", config.num_key_value_heads, "one latent, all heads")
    return Large4Spec(
        n_embed=config.hidden_size,
        n_head=config.num_attention_heads,
        kv_latent=config.kv_lora_rank,
        nope_head_size=Dn if use_rope else Dn + Dr,  # NoPE: the whole head from the latent
        rope_head_size=Dr if use_rope else 0,
        v_head_size=config.v_head_dim,
        rope=rope,
        scale=scale,
        eps=config.rms_norm_eps,  # the kv latent's RMSNorm
        bias=bool(config.attention_bias),
        kv_source=large4_source(config, index),
    )


@torch.no_grad()
def load_large4(model: nn.Module, index: int, base) -> LearnedTemperatureAttention:
    """Layer `index` of a Mistral Large 4 model (its text model, or the whole).

    A "shared" layer (config.indexer_types) comes back without an indexer; its
    source_index names the last earlier "full" layer, whose choice it reads."""
    model = text_model(model)
    config = model.config
    spec = large4_spec(config, index, base)
    # RoPE pairs as transformers' apply_rotary_pos_emb_interleave turns them
    indexer, earlier = indexer_of(config, index, "adjacent")
    theirs = _module(model, index)
    layer = LearnedTemperatureAttention(spec, indexer).to(theirs.o_proj.weight.dtype)
    rotary = model.rotary_emb
    if layer.turn is not None:  # LeRoPE: theta_i * exp(alpha_i), alpha loaded
        theta = layer.turn.theta.float()
        if not torch.allclose(theta, rotary.inv_freq.float(), rtol=1e-5) or (
            layer.turn.gain != rotary.attention_scaling
        ):
            _refuse("rope_parameters", config.rope_parameters, "other frequencies than its RoPE's")
        layer.turn.alpha.copy_(rotary.alpha)
    pairs = [
        (layer.q_proj.weight, theirs.q_proj.weight),
        (layer.kv_up.weight, theirs.kv_b_proj.weight),
        (layer.proj.weight, theirs.o_proj.weight),
        (layer.temperature.scale, theirs.softmax_scaling.scale),
        (layer.temperature.bias, theirs.softmax_scaling.bias),
    ]
    if spec.bias:
        pairs.append((layer.proj.bias, theirs.o_proj.bias))
    if spec.kv_source is None:
        pairs += [(layer.kv_down.weight, theirs.kv_a_proj_with_mqa.weight)]
        pairs += [(layer.kv_norm.weight, theirs.kv_a_layernorm.weight)]
        if spec.bias:
            pairs.append((layer.kv_down.bias, theirs.kv_a_proj_with_mqa.bias))
    if indexer is None:
        layer.source_index = earlier[-1]
    else:
        ours, ix = layer.indexer, theirs.indexer
        pairs += [(ours.q.weight, ix.wq_b.weight), (ours.k.weight, ix.wk.weight)]
        pairs += [(ours.k_norm.weight, ix.k_norm.weight), (ours.k_norm.bias, ix.k_norm.bias)]
        pairs += [(ours.q_norm.weight, ix.q_input_norm.weight)]
        pairs += [(ours.q_norm.bias, ix.q_input_norm.bias)]
        pairs += [(ours.weights.weight, ix.weights_proj.weight)]
        pairs += [(ours.temperature.scale, ix.softmax_scaling.scale)]
        pairs += [(ours.temperature.bias, ix.softmax_scaling.bias)]
    for mine, them in pairs:
        mine.copy_(them)
    return layer.eval()
