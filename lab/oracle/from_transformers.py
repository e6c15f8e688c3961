"""The oracle: the guide's layer for a layer of a transformers model, same weights.

    layer = load_attention(model, layer_index)
    y = layer(x)  # x (B, T, C) at positions 0 .. T - 1, the layer's own mask

returns what `model.model.layers[layer_index].self_attn` returns (its first
output) for the hidden states it receives. Families: Llama (with Llama 3's RoPE
scaling), Mistral, Qwen3, Gemma 2, Gemma 3 (text), gpt-oss, DeepSeek-V3
(MLA), Llama 4 (text), Qwen3-Next, Gemma 4 (text, lab/oracle/from_transformers_gemma.py),
DeepSeek-V3.2 and GLM-5 (MLA with DSA's indexer), Mistral 4 (MLA with a query
temperature), Mistral Large 4 (DSA with a temperature learned per head, NoPE layers and
layers reading an earlier layer's latents) and DeepSeek-V4 (its compressed layers;
lab/oracle/from_transformers_deepseek.py), Kimi K2.5 (its text model, DeepSeek-V3's),
Kimi Linear, Qwen3.5 and MiniMax (their linear layers: lab/oracle/linear_from_transformers.py),
the Mamba2 hybrids Nemotron-H, Granite 4 and Falcon-H1 (their Mamba2 mixers there too;
Falcon-H1's attention beside them with part="self_attn", its key multiplier folded in),
and, on the same pieces, Olmo 3, SmolLM3, Seed-OSS, Apertus, EXAONE 4 (EXAONE 4.5's text
model) and MiniMax-M2. A config the guide's layer cannot express raises a ValueError
naming the field.

Two layouts differ and are converted here, not in the layer:
- RoPE pairs. The guide turns adjacent channels (2i, 2i + 1), as RoFormer,
  Llama 4 and DeepSeek do; most transformers models turn (i, i + R/2). Scores
  q . k do not change when q and k have their channels permuted alike, so the
  rows of W_q and W_k (and QK-norm scales) are permuted into the guide's order.
- RMSNorm scales that Gemma 3 and Qwen3-Next store as w - 1 become w.
- Values that come out of the permuted key projection (K=V, Gemma 4) keep
  its channel order: the output projection's columns are permuted to match.

The dispatch point is LAYER_LOADERS: a layer type ("linear_attention" for
Qwen3-Next's linear layers) can bring its own loader.
"""

import dataclasses
import math
import types
from collections.abc import Callable

import torch
import torch.nn as nn

from lab.oracle.from_transformers_deepseek import large4_spec, text_model, wire
from lab.oracle.from_transformers_deepseek import loaders as deepseek_loaders
from lab.oracle.from_transformers_gemma import FAMILY as GEMMA4
from lab.oracle.from_transformers_gemma import gemma4_fields
from lab.oracle.linear_from_transformers import load_linear_attention
from snippets.core.rope_scaling import RopeSpec
from snippets.layers.configurable import AttentionSpec, ConfigurableAttention
from snippets.layers.mla import LatentAttention, MLASpec
from snippets.run.pretrained import rope_spec as pretrained_rope_spec

__all__ = [
    "FAMILIES",
    "PARTS",
    "LAYER_LOADERS",
    "layer_type",
    "rope_spec",
    "spec_from_config",
    "load_attention",
    "load_attentions",
]

# model_type -> how its checkpoints lay out RoPE pairs: "half" (i, i + R/2)
# or "adjacent" (2i, 2i + 1, the guide's).
FAMILIES = {
    "llama": "half",
    "mistral": "half",
    "qwen3": "half",
    "gemma2": "half",
    "gemma3_text": "half",
    "gpt_oss": "half",
    "deepseek_v3": "adjacent",  # rope_interleave=True, its default
    "llama4_text": "adjacent",  # complex multiplication of (2i, 2i + 1)
    "qwen3_next": "half",
    GEMMA4: "half",
    "olmo3": "half",
    "smollm3": "half",
    "seed_oss": "half",
    "apertus": "half",
    "exaone4": "half",
    "minimax_m2": "half",
    "kimi_linear": "adjacent",  # MLA without RoPE: no pairs to reorder
    "minimax": "half",  # its softmax layers; the others are lightning attention
    "qwen3_5_text": "half",  # Qwen3-Next's layers; text positions make its mRoPE plain RoPE
    # MLA as DeepSeek-V3's; the indexer's pairs: lab/oracle/from_transformers_deepseek.py
    "deepseek_v32": "adjacent",
    "glm_moe_dsa": "adjacent",
    "mistral4": "adjacent",  # rope_interleave=True, its default
    "deepseek_v4": "adjacent",  # its own layer: lab/oracle/from_transformers_deepseek.py
    "mistral_large4_text": "adjacent",  # interleaved, as DeepSeek's: the same file
    "kimi_k25": "adjacent",  # its text model is DeepSeek-V3's (text_model() takes it)
    # Mamba2 hybrids: their attention layers (NoPE in Nemotron-H; Granite 4's as its
    # position_embedding_type says); their Mamba2 mixers: lab/oracle/linear_from_transformers.py
    "nemotron_h": "half",
    "granitemoehybrid": "half",
    "falcon_h1": "half",  # every layer "hybrid": Mamba2 and attention side by side (PARTS)
    "glm5_next_text": "adjacent",  # NoPE MLA; KDA layers: lab/oracle/linear_from_transformers.py
}
# A parallel hybrid layer's mixers, load_attention's `part`: the first loads by default.
PARTS = {"hybrid": ("mamba", "self_attn")}
# QK-norm per head, or over all heads together (OLMo's, MiniMax's).
QK_NORM = {
    **dict.fromkeys(
        ("qwen3", "gemma3_text", "qwen3_next", "qwen3_5_text", "apertus", "exaone4"), "head"
    ),
    **dict.fromkeys(("olmo3", "minimax_m2"), "all"),
}
# MLA without RoPE: Kimi Linear's (a rope part never turned), GLM-5-Next's (none).
NOPE_MLA = ("kimi_linear", "glm5_next_text")
# RMSNorm scales stored as w - 1 (transformers applies 1 + weight).
ONE_PLUS = ("gemma3_text", "qwen3_next", "qwen3_5_text")
KINDS = {"full_attention": "full", "sliding_attention": "window", "chunked_attention": "chunk"}
KINDS["hybrid"] = "full"  # Falcon-H1's: the spec of its attention half
# A layer type or a model_type with a loader of its own -> loader(model, index).
LAYER_LOADERS: dict[str, Callable[[nn.Module, int], nn.Module]] = {
    "linear_attention": load_linear_attention,  # Qwen3-Next's Gated DeltaNet, Mamba2's
    "hybrid": load_linear_attention,  # Falcon-H1's layers: their Mamba2 half by default
}


def _field(config, name: str, default=None):
    value = getattr(config, name, default)
    return default if value is None else value


def layer_type(config, index: int) -> str:
    """transformers' name for layer `index`: full, sliding, chunked, linear."""
    n = config.num_hidden_layers
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
        raise ValueError(f"layer_index ({index!r}) must be an int in 0 .. {n - 1}")
    types = getattr(config, "layer_types", None)
    if types:
        return types[index]
    if config.model_type == "mistral" and config.sliding_window:
        return "sliding_attention"  # Mistral: every layer, if it has a window
    return "full_attention"


def rope_spec(config, kind: str, head_size: int) -> RopeSpec:
    """The RopeSpec of a layer of type `kind` from config.rope_parameters (the
    package's reading of a layer's RoPE fields, snippets/run/pretrained.py)."""
    params = config.rope_parameters
    if kind in params:  # Gemma 3: one dict per layer type
        params = params[kind]
    return pretrained_rope_spec(params, head_size, config.max_position_embeddings)


def _refuse(config, name: str, value, why: str) -> None:
    raise ValueError(f"config.{name} ({value!r}): {why}")


def spec_from_config(config, index: int) -> AttentionSpec | MLASpec:
    """Layer `index` of a transformers config, as the guide's spec."""
    family = config.model_type
    if family not in FAMILIES:
        _refuse(config, "model_type", family, f"not one of {list(FAMILIES)}")
    if family == "kimi_k25":  # a multimodal wrapper: its text config is DeepSeek-V3's
        return spec_from_config(config.text_config, index)
    if family == "mistral_large4_text":  # MLA of its own kind: the DeepSeek-like file
        return large4_spec(config, index, _BASE)
    kind_name = layer_type(config, index)
    if kind_name not in KINDS:
        _refuse(config, "layer_types", kind_name, f"layer {index}: no loader for it")
    if both_ways := getattr(config, "use_bidirectional_attention", False):
        _refuse(config, "use_bidirectional_attention", both_ways, "the layer is causal")
    if family in ("deepseek_v3", "kimi_linear", "mistral4"):
        return _mla_spec(config)
    C, H = config.hidden_size, config.num_attention_heads
    kind = KINDS[kind_name]
    size = {"full": None, "window": getattr(config, "sliding_window", None)}
    size["chunk"] = getattr(config, "attention_chunk_size", None)
    uses_rope = True
    if family in ("llama4_text", "smollm3"):
        uses_rope = bool(config.no_rope_layers[index])
    if family == "exaone4":  # NoPE full layers beside window layers
        uses_rope = config.sliding_window is None or kind == "window"
    if family == "nemotron_h":  # order comes from the Mamba2 layers only
        uses_rope = False
    if family == "granitemoehybrid":
        uses_rope = config.position_embedding_type == "rope"
    if family == "smollm3" and kind == "window" and not config.use_sliding_window:
        _refuse(config, "use_sliding_window", False, "its layer_types say sliding_attention")
    if family == GEMMA4:  # its head size and G differ per layer type
        fields = gemma4_fields(config, index)
    else:
        D = _field(config, "head_dim", C // H)
        fields = {"head_size": D, "n_kv_head": config.num_key_value_heads, "scale": None}
        fields["qk_norm"] = QK_NORM.get(family)
    if family == "llama4_text" and config.use_qk_norm and uses_rope:
        fields["qk_norm"] = "head"
    if family in ("gemma2", "gemma3_text"):
        fields["scale"] = config.query_pre_attn_scalar**-0.5
    if family == "granitemoehybrid":  # the score's scale itself, not 1 / sqrt(D)
        fields["scale"] = config.attention_multiplier
    rope = rope_spec(config, kind_name, fields["head_size"]) if uses_rope else None
    temperature = None
    if family == "llama4_text" and not uses_rope and config.attn_temperature_tuning:
        temperature = (int(config.floor_scale), float(config.attn_scale))
    bias = bool(_field(config, "attention_bias", False))
    out_bias = bool(_field(config, "attention_out_bias", bias))  # Seed-OSS: its own
    return AttentionSpec(
        n_embed=C,
        n_head=H,
        kind=kind,
        size=size[kind],
        rope=rope,
        bias=bias,
        out_bias=out_bias,
        qk_norm_weight=family != "llama4_text",
        qk_norm_after_rope=family == "llama4_text",
        eps=_field(config, "rms_norm_eps", 1e-6),  # QK-norm's; Nemotron-H has none
        soft_cap=getattr(config, "attn_logit_softcapping", None),
        sinks=family == "gpt_oss",
        gate="elementwise" if family in ("qwen3_next", "qwen3_5_text") else None,
        temperature=temperature,
        **fields,
    )


def _mla_spec(config) -> MLASpec:
    rope = None  # Kimi Linear: the rope part of the key is shared, never turned
    if config.model_type not in NOPE_MLA:
        # transformers turns head_dim * partial_rotary_factor channels: the rope part's Dr
        # (DeepSeek: head_dim = Dr; Mistral 4: head_dim = Dn + Dr, factor Dr / (Dn + Dr)).
        Dr = config.qk_rope_head_dim
        rope = rope_spec(config, "full_attention", _field(config, "head_dim", Dr))
        if (rope.rotary_dim or _field(config, "head_dim", Dr)) != Dr:
            _refuse(
                config,
                "rope_parameters['partial_rotary_factor']",
                rope.rotary_dim,
                f"must turn {Dr}",
            )
        rope = dataclasses.replace(rope, rotary_dim=None)
    Dq = config.qk_nope_head_dim + config.qk_rope_head_dim
    scale = Dq**-0.5
    if rope and rope.scaling != "default" and rope.mscale_all_dim and rope.factor > 1:
        mscale = 0.1 * rope.mscale_all_dim * math.log(rope.factor) + 1  # DeepSeek
        scale = scale * mscale * mscale
    if config.num_key_value_heads != config.num_attention_heads:
        _refuse(
            config,
            "num_key_value_heads",
            config.num_key_value_heads,
            "MLA has one latent for all heads",
        )
    return MLASpec(
        n_embed=config.hidden_size,
        n_head=config.num_attention_heads,
        kv_latent=config.kv_lora_rank,
        nope_head_size=config.qk_nope_head_dim,
        rope_head_size=config.qk_rope_head_dim,
        v_head_size=config.v_head_dim,
        q_rank=config.q_lora_rank,
        rope=rope,
        scale=scale,
        # transformers builds both latent norms with their default eps (GLM-5-Next: its own)
        eps=config.rms_norm_eps if config.model_type == "glm5_next_text" else 1e-6,
        bias=bool(_field(config, "attention_bias", False)),
    )


# --- weights -------------------------------------------------------------------------------


def _half_to_adjacent(D: int, R: int, half: int | None = None) -> torch.Tensor:
    """Channel order taking pairs (i, i + half) of a head to (2i, 2i + 1),
    i < R/2; half: R/2 (partial RoPE) or D/2 (proportional). The channels that
    do not turn follow, in their order."""
    half = R // 2 if half is None else half
    pairs = [c for i in range(R // 2) for c in (i, i + half)]
    return torch.tensor(pairs + [c for c in range(D) if c not in pairs])


def _heads_rows(t: torch.Tensor, n: int, order: torch.Tensor) -> torch.Tensor:
    """Reorder the rows of each of n heads of a weight (n*D, ...) or bias (n*D,)."""
    return t.reshape(n, -1, *t.shape[1:])[:, order].reshape(t.shape)


def _copy(dst: nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    dst.weight.copy_(weight)
    if dst.bias is not None:
        dst.bias.copy_(bias)


@torch.no_grad()
def _load_gqa(
    module: nn.Module, spec: AttentionSpec, family: str, values_turned: bool = False
) -> ConfigurableAttention:
    """values_turned: the values come out of the permuted k projection (K=V,
    its own or, for a layer with a kv_source, its source's)."""
    layer = ConfigurableAttention(spec).to(module.o_proj.weight.dtype)
    H, G, D = spec.n_head, spec.n_kv_head, spec.head_size
    R = (spec.rope.rotary_dim or D) if spec.rope else D
    order = torch.arange(D)
    if spec.rope is not None and FAMILIES[family] == "half":
        half = D // 2 if spec.rope.scaling == "proportional" else R // 2
        order = _half_to_adjacent(D, R, half)
    q_w, q_b = module.q_proj.weight, module.q_proj.bias
    if spec.gate:  # Qwen3-Next: per head [query (D) | gate (D)]
        q_w, g_w = q_w.view(H, 2, D, -1).unbind(1)
        q_w, g_w = q_w.reshape(H * D, -1), g_w.reshape(H * D, -1)
        g_b = None
        if q_b is not None:
            q_b, g_b = q_b.view(H, 2, D).unbind(1)
            q_b, g_b = q_b.reshape(-1), g_b.reshape(-1)
        _copy(layer.gate, g_w, g_b)
    q_b = None if q_b is None else _heads_rows(q_b, H, order)
    _copy(layer.q, _heads_rows(q_w, H, order), q_b)
    if hasattr(layer, "k"):  # not a layer reading another's keys and values
        k_scale = getattr(module, "key_multiplier", 1.0)  # Falcon-H1's, on k_proj's output
        k_b = module.k_proj.bias
        k_b = None if k_b is None else _heads_rows(k_b, G, order) * k_scale
        _copy(layer.k, _heads_rows(module.k_proj.weight, G, order) * k_scale, k_b)
    if hasattr(layer, "v"):  # not K=V
        _copy(layer.v, module.v_proj.weight, module.v_proj.bias)
    o_w = module.o_proj.weight  # (C, H * D): each head's columns in the values' order
    o_w = _heads_rows(o_w.T, H, order).T if values_turned else o_w
    _copy(layer.proj, o_w, module.o_proj.bias)
    if spec.qk_norm and spec.qk_norm_weight:
        one = 1.0 if family in ONE_PLUS else 0.0
        heads = {"head": 1, "all": H}[spec.qk_norm]  # one scale per channel of ...
        layer.q_norm.copy_(_heads_rows(module.q_norm.weight, heads, order) + one)
        if hasattr(layer, "k_norm"):
            heads = {"head": 1, "all": G}[spec.qk_norm]
            layer.k_norm.copy_(_heads_rows(module.k_norm.weight, heads, order) + one)
    if spec.sinks:
        layer.sinks.copy_(module.sinks)
    return layer


@torch.no_grad()
def _load_mla(module: nn.Module, spec: MLASpec, config) -> LatentAttention:
    layer = LatentAttention(spec).to(module.o_proj.weight.dtype)
    Dn, Dr, R = spec.nope_head_size, spec.rope_head_size, spec.kv_latent
    order = torch.arange(Dn + Dr)  # per query head: [nope | rope]
    down = torch.arange(R + Dr)  # kv_down's rows: [latent | rope key]
    if not getattr(config, "rope_interleave", True):
        turn = _half_to_adjacent(Dr, Dr)
        order = torch.cat([order[:Dn], Dn + turn])
        down = torch.cat([down[:R], R + turn])
    if spec.q_rank is None:
        layer.q_proj.weight.copy_(_heads_rows(module.q_proj.weight, spec.n_head, order))
    else:
        _copy(layer.q_down, module.q_a_proj.weight, module.q_a_proj.bias)
        layer.q_norm.weight.copy_(module.q_a_layernorm.weight)
        layer.q_up.weight.copy_(_heads_rows(module.q_b_proj.weight, spec.n_head, order))
    kv_a = module.kv_a_proj_with_mqa
    _copy(layer.kv_down, kv_a.weight[down], None if kv_a.bias is None else kv_a.bias[down])
    layer.kv_norm.weight.copy_(module.kv_a_layernorm.weight)
    layer.kv_up.weight.copy_(module.kv_b_proj.weight)
    _copy(layer.proj, module.o_proj.weight, module.o_proj.bias)
    return layer


# DSA layers (DeepSeek-V3.2, GLM-5) and Mistral 4's: MLA as loaded here, and a piece.
_BASE = types.SimpleNamespace(
    mla_spec=_mla_spec, load_mla=_load_mla, layer_type=layer_type, rope_spec=rope_spec
)
LAYER_LOADERS.update(deepseek_loaders(**vars(_BASE)))


def load_attention(model: nn.Module, layer_index: int, part: str | None = None) -> nn.Module:
    """The guide's layer equal to the attention of decoder layer layer_index.

    model: a transformers *ForCausalLM (or its .model) of a family in FAMILIES.
    part: a parallel hybrid layer's mixer (PARTS; Falcon-H1's "mamba", the
    default, or "self_attn"). Returns a ConfigurableAttention or, for the MLA
    families, a LatentAttention (DeepSeek-V3.2's and GLM-5's sparse, Mistral 4's
    tempered): call it as layer(x) on the hidden states the transformers layer
    (the module, within the decoder layer's own multipliers) receives.
    """
    model = text_model(model)  # Mistral Large 4's whole model: its text model
    config = model.config
    kind = layer_type(config, layer_index)
    if part is not None and part not in PARTS.get(kind, ()):
        raise ValueError(f"part ({part!r}): layer {layer_index} ({kind!r}) has {PARTS.get(kind)}")
    # by model_type first: Mistral Large 4's "indexed_attention" layers are not DSA's
    loader = LAYER_LOADERS.get(config.model_type) or LAYER_LOADERS.get(kind)
    if loader is not None and part in (None, PARTS.get(kind, [None])[0]):
        return loader(model, layer_index)
    spec = spec_from_config(config, layer_index)
    decoder = model.model if hasattr(model, "model") else model
    layer = decoder.layers[layer_index]
    module = getattr(layer, "self_attn", None) or layer.mixer  # Nemotron-H: its mixer
    if isinstance(spec, MLASpec):
        return _load_mla(module, spec, config).eval()
    values_turned = spec.k_eq_v  # or its source's, for a layer reading another's
    if spec.kv_source is not None:
        values_turned = spec_from_config(config, spec.kv_source).k_eq_v
    return _load_gqa(module, spec, config.model_type, values_turned).eval()


def load_attentions(model: nn.Module, part: str | None = None) -> list[nn.Module]:
    """Every layer's load_attention (of `part`), wired as the model runs them: a
    GLM-5 layer that reuses an earlier layer's top-k choice reads that layer's."""
    model = text_model(model)
    n = model.config.num_hidden_layers
    return wire([load_attention(model, i, part) for i in range(n)])
