"""Equivalence proofs the tests use: a teaching model or layer rebuilt as the
package's other spelling of the same function, its weights carried over.

- from_per_head: a "per-head" GPT as a "fused" one (the attention page's two
  layers are one function);
- from_kv_heads: the kv-heads page's MLA as snippets/mla.py's LatentAttention
  with its extra parts off;
- as_specs, as_spec_layer: a GPT of GPTConfig's teaching fields as a GPT of
  per-layer specs (every teaching option is one option of a spec; ALiBi, a bias
  no spec layer adds, is refused by name).

They were package code; a reader builds the model they mean instead. Shape
letters: B batch, T positions, C channels, H heads, G key/value heads, D head
size, R the latent's width.
"""

import dataclasses

import torch
import torch.nn as nn

from snippets.attention import CausalSelfAttention
from snippets.blocks import REPLACED
from snippets.configurable import AttentionSpec, ConfigurableAttention
from snippets.kv_heads import GroupedQueryAttention, MultiHeadLatentAttention
from snippets.linear_attention import GatedDeltaNet
from snippets.linear_layers import LinearSpec
from snippets.mla import LatentAttention, MLASpec
from snippets.model import GPT
from snippets.positional_attention import PositionalMultiHeadAttention
from snippets.rope_scaling import RopeSpec
from snippets.taming import TamedAttention

__all__ = ["from_per_head", "from_kv_heads", "as_specs", "as_spec_layer"]


def from_per_head(model: GPT) -> GPT:
    """A "fused" GPT computing exactly the function of the "per-head" model.

    Args:
        model: a GPT whose config has attention="per-head".

    Returns:
        A new GPT with attention="fused" and the same weights, on the same
            device and dtype.
    """
    if not isinstance(model, GPT) or model.config.attention != "per-head":
        raise TypeError("model must be a GPT with attention='per-head'")
    weight = model.lm_head.weight
    new = GPT(dataclasses.replace(model.config, attention="fused"))
    new = new.to(device=weight.device, dtype=weight.dtype)
    for new_block, block in zip(new.blocks, model.blocks, strict=True):
        new_block.attn = CausalSelfAttention.from_multihead(block.attn)
    # Every other parameter has the same name and shape in both models.
    rest = {k: v for k, v in model.state_dict().items() if ".attn." not in k}
    new.load_state_dict({**new.state_dict(), **rest})
    return new


@torch.no_grad()
def from_kv_heads(mla: MultiHeadLatentAttention) -> LatentAttention:
    """The kv-heads page's MLA as a LatentAttention computing exactly what it does.

    That layer is this one with its extra parts switched off: no decoupled
    RoPE key (rope_head_size 0), no query latent, no latent norm, heads of
    D = C / H, a bias on the output projection only. Its key and value
    up-projections are kv_up's rows, head by head: [keys (D) | values (D)].
    ALiBi, a bias this layer does not add, is refused.
    """
    if not isinstance(mla, MultiHeadLatentAttention):
        got = type(mla).__name__
        raise TypeError(f"mla must be a MultiHeadLatentAttention, got {got}")
    if mla.position == "alibi":
        raise ValueError("position='alibi': LatentAttention adds no ALiBi bias to its scores")
    H, C, R = mla.n_head, mla.n_embed, mla.kv_latent
    D = C // H
    spec = MLASpec(C, H, R, D, 0, D, rope=None, latent_norm=False, proj_bias=True)
    weight = mla.proj.weight
    layer = LatentAttention(spec).to(device=weight.device, dtype=weight.dtype)
    layer.q_proj.weight.copy_(mla.query.weight)
    layer.kv_down.weight.copy_(mla.kv_down.weight)
    keys = mla.key_up.weight.view(H, D, R)  # head h: rows h*D .. h*D + D - 1
    values = mla.value_up.weight.view(H, D, R)
    layer.kv_up.weight.copy_(torch.cat([keys, values], dim=1).view(2 * C, R))
    layer.proj.load_state_dict(mla.proj.state_dict())
    return layer


TEACHING = (CausalSelfAttention, GroupedQueryAttention, TamedAttention)


@torch.no_grad()
def _configurable(layer: nn.Module) -> ConfigurableAttention:
    """A fused, grouped or tamed teaching layer as a ConfigurableAttention."""
    H, C = layer.n_head, layer.n_embed
    G, D = getattr(layer, "n_kv_head", H), C // H
    options = {}
    if isinstance(layer, TamedAttention):
        gate, norm = layer.gate, layer.norm
        options = {"soft_cap": layer.cap, "sinks": layer.sinks is not None}
        if gate is not None:
            per_head = gate.logits.out_features == H
            options["gate"] = "head" if per_head else "elementwise"
        if norm is not None:
            options["qk_norm"] = "all" if norm.across_heads else "head"
            options["eps"] = norm.eps
    rope = RopeSpec() if layer.position == "rope" else None
    spec = AttentionSpec(C, H, G, D, rope=rope, out_bias=True, **options)
    weight = layer.proj.weight
    new = ConfigurableAttention(spec).to(device=weight.device, dtype=weight.dtype)
    q, k, v = layer.qkv.weight.split([H * D, G * D, G * D])  # rows: q, k, v
    for part, rows in zip((new.q, new.k, new.v), (q, k, v), strict=True):
        part.weight.copy_(rows)
    new.proj.load_state_dict(layer.proj.state_dict())
    if options.get("qk_norm"):
        new.q_norm.copy_(layer.norm.q_weight)
        new.k_norm.copy_(layer.norm.k_weight)
    if options.get("sinks"):
        new.sinks.copy_(layer.sinks)
    if options.get("gate"):
        new.gate.weight.copy_(layer.gate.logits.weight)
    return new


def as_spec_layer(layer: nn.Module) -> nn.Module:
    """One teaching softmax layer as the spec layer of the same function (its
    spec is `.spec`, as every spec layer's is)."""
    if getattr(layer, "position", None) == "alibi":
        raise ValueError(
            f"{type(layer).__name__} with position='alibi': no spec layer adds "
            f"ALiBi's bias to its scores"
        )
    if isinstance(layer, PositionalMultiHeadAttention):
        layer = CausalSelfAttention.from_multihead(layer)  # the same function
    if isinstance(layer, TEACHING):
        return _configurable(layer)
    if isinstance(layer, MultiHeadLatentAttention):
        return from_kv_heads(layer)
    raise TypeError(f"{type(layer).__name__} is not one of the teaching layers")


def as_specs(model: GPT) -> GPT:
    """A GPT of GPTConfig(layers=...) computing exactly what model computes:
    each block's attention from its spec, every other weight as it is."""
    if not isinstance(model, GPT) or model.config.layers is not None:
        raise TypeError("model must be a GPT of GPTConfig's teaching fields")
    config = model.config
    layers, specs = [], []
    for block in model.blocks:
        layer = block.attn
        if isinstance(layer, GatedDeltaNet):  # built from a LinearSpec already
            s = (layer.n_head, config.n_embed, layer.head_k, layer.head_v)
            specs.append(LinearSpec(*s, chunk_size=layer.chunk_size))
        else:
            layer = as_spec_layer(layer)
            specs.append(layer.spec)
        layers.append(layer)
    # RoPE and ALiBi act inside attention: a spec says it, the embeddings add none
    inside = config.position in ("rope", "alibi")
    new_config = dataclasses.replace(
        config,
        **REPLACED,
        layers=tuple(specs),
        position="none" if inside else config.position,
    )
    weight = model.lm_head.weight
    new = GPT(new_config).to(device=weight.device, dtype=weight.dtype)
    state = {k: v for k, v in model.state_dict().items() if ".attn." not in k}
    for i, layer in enumerate(layers):
        state |= {f"blocks.{i}.attn.{k}": v for k, v in layer.state_dict().items()}
    new.load_state_dict(state)
    return new.train(model.training)
