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
transformers is a tooling dependency: snippets/ never imports it.
"""

import torch

from snippets.linear_attention import GatedDeltaNet


def _layers(model):
    inner = getattr(model, "model", model)
    return inner.config, inner.layers


def load_linear_attention(model, layer_index: int) -> GatedDeltaNet:
    """A GatedDeltaNet holding copies of layer layer_index's linear-attention weights.

    Raises:
        ValueError: layer_index is out of range or not a linear-attention layer.
    """
    config, layers = _layers(model)
    if not 0 <= layer_index < len(layers):
        raise ValueError(f"layer_index ({layer_index}) must be in [0, {len(layers)})")
    kind = config.layer_types[layer_index]
    if kind != "linear_attention":
        raise ValueError(f"layer {layer_index} is a {kind!r} layer, not 'linear_attention'")
    theirs = layers[layer_index].linear_attn
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
    with torch.no_grad():
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
