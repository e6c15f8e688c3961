"""Equivalence proofs the tests use: a layer or model rebuilt as the package's
other spelling of the same function, its weights carried over.

- from_per_head: a GPT of the readable per-head layer (CausalSpec's per_head)
  as one of the fused CausalSelfAttention;
- from_kv_heads: the kv-heads lesson's MLA as snippets/layers/mla.py's LatentAttention
  with its extra parts off;
- as_spec_layer, as_specs: the plain causal layer, TamedAttention and the
  kv-heads lesson's grouped layer as ConfigurableAttention (each is one set of
  an AttentionSpec's options), a layer or a whole GPT.

They are no package code: a reader builds the model they mean. Shape letters:
B batch, T positions, C channels, H heads, G key/value heads, D head size, R
the latent's width.
"""

import dataclasses

import torch
import torch.nn as nn

from snippets.core.attention import CausalSelfAttention, CausalSpec
from snippets.core.model import GPT
from snippets.core.rope_scaling import RopeSpec
from snippets.layers.configurable import AttentionSpec, ConfigurableAttention
from snippets.layers.linear_attention import GatedDeltaNet
from snippets.layers.linear_layers import LinearSpec
from snippets.layers.mla import LatentAttention, MLASpec
from snippets.layers.taming import TamedAttention

__all__ = [
    "from_per_head",
    "from_kv_heads",
    "as_spec_layer",
    "as_specs",
]


def from_per_head(model: GPT) -> GPT:
    """A GPT of the fused layer computing exactly the function of a GPT whose
    layers are all CausalSpec(per_head=True)."""
    specs = getattr(getattr(model, "config", None), "layers", None) or ()
    if not specs or not all(getattr(s, "per_head", False) for s in specs):
        raise TypeError("model must be a GPT of CausalSpec(per_head=True) layers")
    weight = model.lm_head.weight
    fused = tuple(dataclasses.replace(s, per_head=False) for s in specs)
    new = GPT(dataclasses.replace(model.config, layers=fused))
    new = new.to(device=weight.device, dtype=weight.dtype)
    for new_block, block in zip(new.blocks, model.blocks, strict=True):
        new_block.attn = CausalSelfAttention.from_multihead(block.attn)
    # Every other parameter has the same name and shape in both models.
    rest = {k: v for k, v in model.state_dict().items() if ".attn." not in k}
    new.load_state_dict({**new.state_dict(), **rest})
    return new


@torch.no_grad()
def from_kv_heads(mla: nn.Module) -> LatentAttention:
    """The kv-heads lesson's MLA (query, kv_down, key_up, value_up, proj) as a
    LatentAttention computing exactly what it does.

    That layer is this one with its extra parts switched off: no decoupled
    RoPE key (rope_head_size 0), no query latent, no latent norm, heads of
    D = C / H, a bias on the output projection only. Its key and value
    up-projections are kv_up's rows, head by head: [keys (D) | values (D)].
    """
    H, (C, R) = mla.n_head, mla.key_up.weight.shape
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


@torch.no_grad()
def as_spec_layer(layer: nn.Module) -> ConfigurableAttention:
    """The plain causal layer, a TamedAttention or a layer with a fused qkv of
    H query and n_kv_head key/value heads (the kv-heads lesson's) as the
    ConfigurableAttention of the same function (its spec is `.spec`)."""
    if not isinstance(layer, nn.Module) or not hasattr(layer, "qkv"):
        got = type(layer).__name__
        raise TypeError(f"{got} is not a layer with a fused qkv and a proj")
    H, C = layer.n_head, layer.proj.in_features
    G, D = getattr(layer, "n_kv_head", H), C // H
    position = getattr(layer, "position", "none")
    options = {"rope": RopeSpec() if position == "rope" else None}
    options["alibi"] = position == "alibi"
    if isinstance(layer, TamedAttention):
        gate, norm = layer.gate, layer.norm
        options |= {"soft_cap": layer.cap, "sinks": layer.sinks is not None}
        if gate is not None:
            per_head = gate.logits.out_features == H
            options["gate"] = "head" if per_head else "elementwise"
        if norm is not None:
            options["qk_norm"] = "all" if norm.across_heads else "head"
            options["eps"] = norm.eps
    spec = AttentionSpec(C, H, G, D, out_bias=True, **options)
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


def as_specs(model: GPT) -> GPT:
    """A GPT of AttentionSpec layers computing exactly what model computes: each
    plain or tamed layer as its ConfigurableAttention, every other weight as
    it is (Gated DeltaNet blocks keep their LinearSpec)."""
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a GPT, got {type(model).__name__}")
    config = model.config
    layers, specs = [], []
    for block, spec in zip(model.blocks, config.layer_specs(), strict=True):
        layer = block.attn
        if isinstance(layer, GatedDeltaNet):  # built from a LinearSpec already
            assert isinstance(spec, LinearSpec)
        else:
            if not isinstance(spec, CausalSpec) or getattr(spec, "per_head", False):
                got = type(spec).__name__
                raise TypeError(f"{got}: not the spec of the plain or a tamed layer")
            layer = as_spec_layer(layer)
            spec = layer.spec
        layers.append(layer)
        specs.append(spec)
    # RoPE and ALiBi act inside attention: a spec says it, the embeddings add none
    inside = config.position in ("rope", "alibi")
    new_config = dataclasses.replace(
        config, layers=tuple(specs), position="none" if inside else config.position
    )
    weight = model.lm_head.weight
    new = GPT(new_config).to(device=weight.device, dtype=weight.dtype)
    state = {k: v for k, v in model.state_dict().items() if ".attn." not in k}
    for i, layer in enumerate(layers):
        state |= {f"blocks.{i}.attn.{k}": v for k, v in layer.state_dict().items()}
    new.load_state_dict(state)
    return new.train(model.training)
