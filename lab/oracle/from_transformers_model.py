"""A whole transformers model as the guide's GPT: same weights, same logits.

    gpt = load_model(hf_model)  # a *ForCausalLM of a family in WHOLE
    logits, _ = gpt(ids)        # hf_model(ids).logits
    generate(gpt, ids, 20, greedy=True)  # hf_model.generate(ids, do_sample=False, ...)

The dense families: Llama (3), Qwen3, Gemma 3 (text), Olmo 3 and SmolLM3. Every
layer's attention is lab/oracle/from_transformers.py's (its spec from the config, its
weights with the RoPE pairs reordered); around it, a BlockSpec
(snippets/core/blocks.py) from the config: the norms (Gemma's four per block and its
scales stored as w - 1, Olmo's after each sublayer only), the gated MLP
(SiLU, or Gemma's tanh-GELU), Gemma's sqrt(C) on the token vectors, and the
head tied or not. A config field the guide's GPT cannot express raises a
ValueError naming it.

The GPT is built on the meta device and takes the transformers tensors as they
are (their dtype and device): a real checkpoint is not held twice.
"""

import torch
import torch.nn as nn

from lab.oracle.from_transformers import load_attention, spec_from_config
from snippets.core.blocks import BlockSpec
from snippets.core.model import GPT, GPTConfig

__all__ = ["WHOLE", "block_spec", "gpt_config", "load_model", "sharpen"]

# model_type -> where its norms sit (snippets.core.blocks.NORMS)
WHOLE = {
    "llama": "pre",
    "qwen3": "pre",
    "smollm3": "pre",
    "gemma3_text": "pre+post",  # a norm before and after each sublayer
    "olmo3": "post",  # a norm on what each sublayer adds, none before
}
GEMMA = ("gemma3_text",)  # scales stored as w - 1; token vectors times sqrt(C)
ACTIVATIONS = {"silu": "silu", "gelu_pytorch_tanh": "gelu-tanh"}
# transformers' names of a decoder layer's norms -> the guide's, per placement
NORM_NAMES = {
    "pre": {"input_layernorm": "ln1", "post_attention_layernorm": "ln2"},
    "pre+post": {
        "input_layernorm": "ln1",
        "post_attention_layernorm": "post1",
        "pre_feedforward_layernorm": "ln2",
        "post_feedforward_layernorm": "post2",
    },
    "post": {"post_attention_layernorm": "post1", "post_feedforward_layernorm": "post2"},
}
MLP_NAMES = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down"}


def _family(config) -> str:
    family = config.model_type
    if family not in WHOLE:
        raise ValueError(f"config.model_type ({family!r}): not one of {list(WHOLE)}")
    return family


def block_spec(config) -> BlockSpec:
    """The BlockSpec of a transformers config of a family in WHOLE."""
    family = _family(config)
    act = getattr(config, "hidden_activation", None) or config.hidden_act
    if act not in ACTIVATIONS:
        raise ValueError(f"config.hidden_act ({act!r}): not one of {list(ACTIVATIONS)}")
    if cap := getattr(config, "final_logit_softcapping", None):
        raise ValueError(f"config.final_logit_softcapping ({cap!r}): the GPT has no cap")
    return BlockSpec(
        hidden=config.intermediate_size,
        activation=ACTIVATIONS[act],
        mlp_bias=bool(getattr(config, "mlp_bias", False)),
        norms=WHOLE[family],
        eps=config.rms_norm_eps,
        one_plus=family in GEMMA,
        embed_scale=family in GEMMA,
    )


def gpt_config(config) -> GPTConfig:
    """The GPTConfig of a transformers config: sizes, per-layer specs, block."""
    block = block_spec(config)
    L = config.num_hidden_layers
    return GPTConfig(
        vocab_size=config.vocab_size,
        context_length=config.max_position_embeddings,
        n_embed=config.hidden_size,
        n_head=config.num_attention_heads,
        n_layer=L,
        tie_weights=bool(config.tie_word_embeddings),
        position="none",  # RoPE (or none) inside each layer, as its spec says
        layers=tuple(spec_from_config(config, i) for i in range(L)),
        block=block,
    )


@torch.no_grad()
def load_model(model: nn.Module) -> GPT:
    """The guide's GPT computing what `model` (a transformers *ForCausalLM of a
    family in WHOLE) computes, on its weights, in eval mode."""
    config = gpt_config(model.config)
    decoder = model.model
    state = {"tok_emb.weight": decoder.embed_tokens.weight, "ln_f.weight": decoder.norm.weight}
    state["lm_head.weight"] = model.lm_head.weight  # tied: the embedding's tensor itself
    for i, layer in enumerate(decoder.layers):
        for name, ours in NORM_NAMES[config.block.norms].items():
            state[f"blocks.{i}.{ours}.weight"] = getattr(layer, name).weight
        for name, ours in MLP_NAMES.items():
            linear = getattr(layer.mlp, name)
            state[f"blocks.{i}.mlp.{ours}.weight"] = linear.weight
            if linear.bias is not None:
                state[f"blocks.{i}.mlp.{ours}.bias"] = linear.bias
        attention = load_attention(model, i).state_dict()
        state.update({f"blocks.{i}.attn.{k}": v for k, v in attention.items()})
    with torch.device("meta"):
        gpt = GPT(config)
    gpt.load_state_dict(state, strict=True, assign=True)
    if config.tie_weights:  # one tensor again, as in the model
        gpt.lm_head.weight = gpt.tok_emb.weight
    return gpt.eval()


@torch.no_grad()
def sharpen(model: nn.Module, seed: int = 0) -> nn.Module:
    """A tiny random model's weights outside attention redrawn (lab.oracle.tiny_models'
    perturb draws the attention's): token vectors of rms about 1, projections of
    std 1 / sqrt(fan-in), norm scales about their stored start. At the default
    init (std 0.02) the logits are nearly uniform, and a wrong MLP or norm still
    picks the same tokens; after this, logits spread over several units."""
    g = torch.Generator().manual_seed(seed + 1)
    for name, p in model.named_parameters():
        if "self_attn" in name:
            continue
        noise = torch.randn(p.shape, generator=g)
        if "norm" in name:  # 1 or, stored as w - 1 (Gemma), 0, give or take
            p.copy_(p.round() + 0.25 * noise)
        elif "embed" in name:
            p.copy_(noise)
        else:
            p.copy_(noise * p.size(-1) ** -0.5)
    return model
