"""Qwen3-Next's linear-attention layer (transformers) as the guide's GatedDeltaNet.

    layer = load_linear_attention(model, layer_index)   # a snippets GatedDeltaNet

model is a transformers Qwen3NextForCausalLM (or its inner Qwen3NextModel); layer
index i must be a "linear_attention" layer of config.layer_types. The result
computes what model.model.layers[i].linear_attn computes, with the same weights,
re-cut: transformers fuses q, k, v and the output gate z into one projection
(in_proj_qkvz), grouped per key head, and beta's and the decay's inputs into
another (in_proj_ba); the guide keeps one Linear each.

lab/oracle/from_transformers.py's load_attention, the loader of every layer type, hands
"linear_attention" layers to this one (its LAYER_LOADERS).
Kimi Linear's "linear_attention" layers are Kimi Delta Attention (snippets/layers/kda.py),
loaded by load_kda: the same q, k, v projections and convolution, the decay's and
the output gate's low-rank pairs (forget_gate.f_a_proj, f_b_proj; g_a_proj, g_b_proj).
MiniMax's are lightning attention (snippets/layers/lightning.py, load_lightning).
Qwen3.5's are Qwen3-Next's layer with its own weight layout (load_qwen3_5).
The hybrids' Mamba2 mixers (Nemotron-H's "linear_attention" blocks, Granite 4's
mamba layers, Falcon-H1's mamba half of every "hybrid" layer) are snippets/layers/mamba2.py's
Mamba2 (load_mamba2): one in-projection, the conv, A_log, dt_bias, D, the gated norm.
load_linear_attention picks the loader by config.model_type (LOADERS).

transformers is a tooling dependency: snippets/ never imports it.
"""

import torch

from snippets.layers.kda import BoundedKimiDeltaAttention, KimiDeltaAttention
from snippets.layers.lightning import LightningAttention
from snippets.layers.linear_attention import GatedDeltaNet
from snippets.layers.mamba2 import Mamba2

# The layer types whose (linear) mixer loads here: Falcon-H1's "hybrid" layers hold a
# Mamba2 mixer beside their attention; this loader takes the Mamba2 half.
LINEAR_KINDS = ("linear_attention", "hybrid")


def _layers(model):
    inner = getattr(model, "model", model)
    return inner.config, inner.layers


def load_linear_attention(model, layer_index: int) -> GatedDeltaNet:
    """The guide's layer holding copies of layer layer_index's linear-attention weights:
    a GatedDeltaNet, or its KimiDeltaAttention variant for Kimi Linear.

    Raises:
        ValueError: layer_index is out of range or not a linear-attention layer,
            or config.model_type has no loader here.
    """
    config, layers = _layers(model)
    if not 0 <= layer_index < len(layers):
        raise ValueError(f"layer_index ({layer_index}) must be in [0, {len(layers)})")
    kind = config.layer_types[layer_index]
    if kind not in LINEAR_KINDS:
        raise ValueError(f"layer {layer_index} is a {kind!r} layer, not one of {LINEAR_KINDS}")
    if config.model_type not in LOADERS:
        raise ValueError(
            f"config.model_type ({config.model_type!r}): no linear-attention loader, "
            f"only {list(LOADERS)}"
        )
    theirs = linear_mixer(layers[layer_index])
    return LOADERS[config.model_type](config, theirs).eval()


def linear_mixer(layer):
    """A decoder layer's linear mixer: linear_attn, mamba (Falcon-H1, Granite 4),
    mixer (Nemotron-H), or self_attn (MiniMax, Kimi Linear)."""
    for name in ("linear_attn", "mamba", "mixer", "self_attn"):
        if (module := getattr(layer, name, None)) is not None:
            return module
    raise ValueError(f"{type(layer).__name__} has no linear mixer")


@torch.no_grad()
def load_kda(config, theirs) -> KimiDeltaAttention:
    """Kimi Linear's KimiLinearDeltaAttention as the guide's KimiDeltaAttention;
    GLM-5-Next's Glm5NextTextLinearAttention, the same weights, as its
    BoundedKimiDeltaAttention when its config bounds the decay (linear_lower_bound)."""
    D = config.linear_head_dim  # keys and values alike
    lower = getattr(config, "linear_lower_bound", None)
    layer, bound = (
        (KimiDeltaAttention, {}) if lower is None else (BoundedKimiDeltaAttention, {"lower": lower})
    )
    ours = layer(
        config.linear_num_heads,
        config.hidden_size,
        D,
        D,
        conv_size=config.linear_conv_kernel_dim,
        eps=config.rms_norm_eps,  # the output norm's; q and k's unit length: 1e-6
        **bound,
    ).to(dtype=theirs.o_proj.weight.dtype)
    gate = theirs.forget_gate
    pairs = [
        (ours.q, theirs.q_proj),
        (ours.k, theirs.k_proj),
        (ours.v, theirs.v_proj),
        (ours.conv, theirs.conv1d),  # the same channel order: q, k, v
        (ours.a[0], gate.f_a_proj),
        (ours.a[1], gate.f_b_proj),
        (ours.b, theirs.b_proj),
        (ours.z[0], theirs.g_a_proj),
        (ours.z[1], theirs.g_b_proj),
        (ours.out, theirs.o_proj),
    ]
    for mine, their in pairs:
        mine.weight.copy_(their.weight)
    ours.dt_bias.copy_(gate.dt_bias)
    ours.A_log.copy_(gate.A_log.reshape(-1))  # stored (1, 1, H, 1)
    ours.norm_weight.copy_(theirs.o_norm.weight)
    return ours


@torch.no_grad()
def load_qwen3_next(config, theirs) -> GatedDeltaNet:
    """Qwen3-Next's Qwen3NextGatedDeltaNet as the guide's GatedDeltaNet."""
    Hk, Hv = config.linear_num_key_heads, config.linear_num_value_heads
    K, V = config.linear_key_head_dim, config.linear_value_head_dim
    ours = GatedDeltaNet(
        Hv,
        config.hidden_size,
        K,
        V,
        n_k_head=Hk,
        conv_size=config.linear_conv_kernel_dim,
        eps=config.rms_norm_eps,
    )
    ours = ours.to(dtype=theirs.out_proj.weight.dtype)
    group = Hv // Hk  # value heads per key head
    C = config.hidden_size
    # in_proj_qkvz's rows, per key head: q (K), k (K), v (group V), z (group V)
    qkvz = theirs.in_proj_qkvz.weight.view(Hk, 2 * K + 2 * group * V, C)
    q, k, v, z = qkvz.split([K, K, group * V, group * V], dim=1)
    for mine, w in ((ours.q, q), (ours.k, k), (ours.v, v), (ours.z, z)):
        mine.weight.copy_(w.reshape(-1, C))
    # in_proj_ba's rows, per key head: b (group), a (group)
    b, a = theirs.in_proj_ba.weight.view(Hk, 2 * group, C).split([group, group], 1)
    ours.b.weight.copy_(b.reshape(-1, C))
    ours.a.weight.copy_(a.reshape(-1, C))
    ours.A_log.copy_(theirs.A_log)
    ours.dt_bias.copy_(theirs.dt_bias)
    ours.conv.weight.copy_(theirs.conv1d.weight)  # the same channel order: q, k, v
    ours.norm_weight.copy_(theirs.norm.weight)
    ours.out.weight.copy_(theirs.out_proj.weight)
    return ours


@torch.no_grad()
def load_qwen3_5(config, theirs) -> GatedDeltaNet:
    """Qwen3.5's Qwen3_5GatedDeltaNet: Qwen3-Next's layer, its own weight layout.

    One projection for q, k and v, each over all its heads in turn (the
    convolution's channel order too), and one each for z, b and a: no grouping
    per key head to undo, unlike Qwen3-Next's in_proj_qkvz and in_proj_ba.
    """
    ours = GatedDeltaNet(
        config.linear_num_value_heads,
        config.hidden_size,
        config.linear_key_head_dim,
        config.linear_value_head_dim,
        n_k_head=config.linear_num_key_heads,
        conv_size=config.linear_conv_kernel_dim,
        eps=config.rms_norm_eps,
    ).to(dtype=theirs.out_proj.weight.dtype)
    q, k, v = theirs.in_proj_qkv.weight.split(
        [ours.q.out_features, ours.k.out_features, ours.v.out_features]
    )
    pairs = [
        (ours.q, q),
        (ours.k, k),
        (ours.v, v),
        (ours.z, theirs.in_proj_z.weight),
        (ours.b, theirs.in_proj_b.weight),
        (ours.a, theirs.in_proj_a.weight),
        (ours.conv, theirs.conv1d.weight),
        (ours.out, theirs.out_proj.weight),
    ]
    for mine, weight in pairs:
        mine.weight.copy_(weight)
    ours.A_log.copy_(theirs.A_log)
    ours.dt_bias.copy_(theirs.dt_bias)
    ours.norm_weight.copy_(theirs.norm.weight)  # stored as w: this norm applies w
    return ours


@torch.no_grad()
def load_lightning(config, theirs) -> LightningAttention:
    """MiniMax's MiniMaxLightningAttention as the guide's LightningAttention."""
    H, D = theirs.num_attention_heads, theirs.head_dim
    ours = LightningAttention(
        H,
        config.hidden_size,
        D,
        theirs.slope_rate.reshape(-1),  # fixed per layer and head, a buffer
        chunk_size=config.block_size,
    ).to(dtype=theirs.out_proj.weight.dtype)
    # qkv_proj's rows, per head: q (D), k (D), v (D)
    qkv = theirs.qkv_proj.weight.view(H, 3 * D, -1).split(D, dim=1)
    for mine, w in zip((ours.q, ours.k, ours.v), qkv, strict=True):
        mine.weight.copy_(w.reshape(H * D, -1))
    ours.gate.weight.copy_(theirs.output_gate.weight)
    ours.norm_weight.copy_(theirs.norm.weight)
    ours.out.weight.copy_(theirs.out_proj.weight)
    return ours


@torch.no_grad()
def load_mamba2(config, theirs) -> Mamba2:
    """Nemotron-H's, Falcon-H1's and Granite 4's Mamba2 mixers as the guide's Mamba2.

    The three share the mixer's layout (in_proj's rows: z, then xBC, then dt; conv1d
    over xBC) and differ in the norm: Nemotron-H and Granite 4 multiply the gate in
    before the grouped RMS norm; Falcon-H1 has none (mamba_rms_norm=False) or one
    applied before the gate (mamba_norm_before_gate), and multipliers on the input
    (ssm_in_multiplier) and on in_proj's five parts (mup_vector), folded here into
    in_proj's weights.
    """
    norm = theirs.norm
    if isinstance(norm, torch.nn.Identity):
        placement = "none"
    else:
        placement = "norm_first" if getattr(norm, "norm_before_gate", False) else "gate_first"
    ours = Mamba2(
        theirs.num_heads,
        config.hidden_size,
        theirs.head_dim,
        theirs.ssm_state_size,
        n_groups=theirs.n_groups,
        conv_size=theirs.conv_kernel_size,
        chunk_size=theirs.chunk_size,
        norm=placement,
        eps=getattr(norm, "variance_epsilon", 1e-5),
        dt_limit=tuple(float(t) for t in theirs.time_step_limit),
        bias=theirs.in_proj.bias is not None,
        out_bias=theirs.out_proj.bias is not None,
        conv_bias=theirs.conv1d.bias is not None,
    ).to(dtype=theirs.out_proj.weight.dtype)
    scale = getattr(theirs, "mup_vector", torch.ones(1)).reshape(-1, 1)  # Falcon-H1's
    ours.in_proj.weight.copy_(
        theirs.in_proj.weight * scale * getattr(theirs, "ssm_in_multiplier", 1.0)
    )
    if theirs.in_proj.bias is not None:
        ours.in_proj.bias.copy_(theirs.in_proj.bias * scale.reshape(-1))
    ours.conv.weight.copy_(theirs.conv1d.weight)
    if theirs.conv1d.bias is not None:
        ours.conv.bias.copy_(theirs.conv1d.bias)
    for mine, their in (
        (ours.A_log, theirs.A_log),
        (ours.dt_bias, theirs.dt_bias),
        (ours.D, theirs.D),
    ):
        mine.copy_(their)
    if placement != "none":
        ours.norm_weight.copy_(norm.weight)
    ours.out.weight.copy_(theirs.out_proj.weight)
    if theirs.out_proj.bias is not None:
        ours.out.bias.copy_(theirs.out_proj.bias)
    return ours


# config.model_type -> loader(config, transformers' layer).
LOADERS = {
    "minimax": load_lightning,
    "qwen3_next": load_qwen3_next,
    "qwen3_5_text": load_qwen3_5,
    "kimi_linear": load_kda,
    "glm5_next_text": load_kda,  # its decay bounded: BoundedKimiDeltaAttention
    **dict.fromkeys(("nemotron_h", "falcon_h1", "granitemoehybrid"), load_mamba2),
}
