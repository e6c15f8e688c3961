"""Tiny random transformers models of every family, and what their layers saw.

Nothing is downloaded: each model is built from a config at a tiny size that
keeps the family's choices (window and chunk sizes shrunk below the test
length, RoPE scaling with its published rule, a published layer schedule).
Freshly initialised weights (std 0.02) give nearly uniform attention, under
which wrong layers still agree: perturb() makes attention sharp.

    model = tiny_model("gemma3_text")
    seen = record_layers(model, tokens)  # per layer: input, output, weights
"""

import torch
import torch.nn as nn

from lab.oracle.tiny_configs import AUTO, COMMON, NOT_AUTO, TINY, WINDOW

__all__ = [
    "TINY",
    "tiny_config",
    "tiny_model",
    "decoder",
    "perturb",
    "record_layers",
    "attention_of",
    "WINDOW",
    "PARTS",
]


def decoder(model: nn.Module) -> nn.Module:
    """What holds the layers: model.model, the model (a bare text model), or its language model."""
    inner = model.model if hasattr(model, "model") else model
    return getattr(inner, "language_model", inner)


def tiny_config(family: str, **changes):
    """The tiny config of a family (a model_type in TINY), with changes."""
    import transformers

    if family not in TINY:
        raise ValueError(f"family ({family!r}) must be one of {list(TINY)}")
    name, fields = TINY[family]
    if "text_config" in fields:  # a multimodal wrapper around another family's text model
        text = tiny_config(fields["text_config"], **changes).to_dict()
        return getattr(transformers, name)(**{**fields, "text_config": text})
    return getattr(transformers, name)(**{**COMMON, **fields, **changes})


def tiny_model(family: str, seed: int = 0, **changes) -> nn.Module:
    """A random, sharpened, eager-attention float32 model of the family."""
    import transformers

    torch.manual_seed(seed)
    config = tiny_config(family, **changes)
    if family in NOT_AUTO:
        config._attn_implementation = "eager"
        model = getattr(transformers, NOT_AUTO[family])(config).float()
    else:
        model = getattr(transformers, AUTO.get(family, "AutoModelForCausalLM")).from_config(
            config, attn_implementation="eager", dtype=torch.float32
        )
    perturb(model, seed)
    return model.eval()


# A parallel hybrid layer's two mixers (Falcon-H1's); attention_of picks the first by default.
PARTS = ("mamba", "self_attn")


def attention_of(layer: nn.Module, part: str | None = None) -> nn.Module | None:
    """A decoder layer's attention, softmax or linear: its mixer named `part`
    (one of PARTS), or by default Falcon-H1's Mamba2 half first (its attention
    beside it: part="self_attn"), then self_attn or linear_attn, then
    Nemotron-H's mixer where its block is one (not an MLP or MoE block)."""
    if part is not None:
        if part not in PARTS or getattr(layer, part, None) is None:
            raise ValueError(f"part ({part!r}): {type(layer).__name__} has no such mixer")
        return getattr(layer, part)
    for name in ("mamba", "self_attn", "linear_attn"):
        if (module := getattr(layer, name, None)) is not None:
            return module
    if getattr(layer, "block_type", None) in ("linear_attention", "full_attention"):
        return layer.mixer
    return None


@torch.no_grad()
def perturb(model: nn.Module, seed: int = 0, std: float = 0.25) -> None:
    """Every attention weight, softmax or linear, redrawn with std `std` (biases,
    norms and sinks too, around their usual values): scores of several units,
    sharp rows."""
    g = torch.Generator().manual_seed(seed)
    rotary = getattr(decoder(model), "rotary_emb", None)
    if hasattr(rotary, "alpha"):  # Mistral Large 4's learned RoPE frequencies: exp(alpha)
        rotary.alpha.copy_(torch.randn(rotary.alpha.shape, generator=g) * std)
    for layer in decoder(model).layers:
        both = [getattr(layer, p, None) for p in PARTS]  # a parallel layer's two mixers
        for attention in both if None not in both else [attention_of(layer)]:
            for name, p in attention.named_parameters() if attention is not None else []:
                noise = torch.randn(p.shape, generator=g) * std
                if "norm" in name:  # scales about 2, whether stored as w or w - 1
                    p.copy_(p.round() + 1 + noise)
                elif name == "sinks":
                    p.copy_(noise * 8)  # logits of a few units
                else:
                    p.copy_(noise)


@torch.no_grad()
def record_layers(model: nn.Module, tokens: torch.Tensor, part: str | None = None) -> list[dict]:
    """Run the model once; per decoder layer, what its attention (softmax or
    linear; attention_of's `part` of a parallel layer) got and gave: {"x": hidden
    states (B, T, C), "y": first output, "weights": second, None for a linear layer}."""
    seen, hooks = [], []
    for layer in decoder(model).layers:
        module = attention_of(layer, part)
        seen.append({})
        if module is None:
            continue

        def hook(module, args, kwargs, output, record=seen[-1]):
            # DeepSeek-V4's decoder layer passes the hidden states by position
            record["x"] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            if isinstance(output, torch.Tensor):  # a linear layer: no weights
                output = (output, None)
            record["y"], record["weights"] = output[0], output[1]

        hooks.append(module.register_forward_hook(hook, with_kwargs=True))
    try:
        model(tokens)
    finally:
        for h in hooks:
            h.remove()
    return seen
