"""Qwen3-Next's linear-attention layer (transformers) as the guide's GatedDeltaNet.

    layer = load_linear_attention(model, layer_index)   # a snippets GatedDeltaNet

model is a transformers Qwen3NextForCausalLM (or its inner Qwen3NextModel); layer
index i must be a "linear_attention" layer of config.layer_types. The result
computes what model.model.layers[i].linear_attn computes, with the same weights,
re-cut: transformers fuses q, k, v and the output gate z into one projection
(in_proj_qkvz), grouped per key head, and beta's and the decay's inputs into
another (in_proj_ba); the guide keeps one Linear each.

lab/from_transformers.py's load_attention, the loader of every layer type, hands
"linear_attention" layers to this one (its LAYER_LOADERS).
Kimi Linear's "linear_attention" layers are Kimi Delta Attention (snippets/kda.py),
loaded by load_kda: the same q, k, v projections and convolution, the decay's and
the output gate's low-rank pairs (forget_gate.f_a_proj, f_b_proj; g_a_proj, g_b_proj).
MiniMax's are lightning attention (snippets/lightning.py, load_lightning).
Qwen3.5's are Qwen3-Next's layer with its own weight layout (load_qwen3_5).
load_linear_attention picks the loader by config.model_type (LOADERS).

transformers is a tooling dependency: snippets/ never imports it.
"""

import torch

from snippets.kda import KimiDeltaAttention
from snippets.lightning import LightningAttention
from snippets.linear_attention import GatedDeltaNet


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
    if kind != "linear_attention":
        raise ValueError(f"layer {layer_index} is a {kind!r} layer, not 'linear_attention'")
    if config.model_type not in LOADERS:
        raise ValueError(
            f"config.model_type ({config.model_type!r}): no linear-attention loader, "
            f"only {list(LOADERS)}"
        )
    layer = layers[layer_index]
    theirs = getattr(layer, "linear_attn", None) or layer.self_attn
    return LOADERS[config.model_type](config, theirs).eval()


@torch.no_grad()
def load_kda(config, theirs) -> KimiDeltaAttention:
    """Kimi Linear's KimiLinearDeltaAttention as the guide's KimiDeltaAttention."""
    D = config.linear_head_dim  # keys and values alike
    ours = KimiDeltaAttention(
        config.hidden_size,
        config.linear_num_heads,
        D,
        D,
        conv_size=config.linear_conv_kernel_dim,
        eps=config.rms_norm_eps,  # the output norm's; q and k's unit length: 1e-6
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
        config.hidden_size,
        Hv,
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
        config.hidden_size,
        config.linear_num_value_heads,
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
        config.hidden_size,
        H,
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


# config.model_type -> loader(config, transformers' layer).
LOADERS = {
    "minimax": load_lightning,
    "qwen3_next": load_qwen3_next,
    "qwen3_5_text": load_qwen3_5,
    "kimi_linear": load_kda,
}
