"""A whole transformers model as the guide's GPT: same weights, same logits.

    gpt = load_model(hf_model)  # a *ForCausalLM of a family in WHOLE
    logits, _ = gpt(ids)        # hf_model(ids).logits
    generate(gpt, ids, 20, greedy=True)  # hf_model.generate(ids, do_sample=False, ...)

The dense families: Llama (3), Qwen3, Gemma 3 (text), Olmo 3 and SmolLM3. The
mapping (config -> GPTConfig, transformers' tensor names -> the GPT's, the RoPE
rows reordered) is the package's loader, snippets/run/pretrained.py, which reads
the same two things from a checkpoint folder; here it is given the live model's
config.to_dict() and state_dict(). The GPT holds the transformers tensors as they
are (their dtype and device) but the reordered query and key rows: a real
checkpoint is not held twice.
"""

import torch
import torch.nn as nn

from snippets.core.model import GPT, GPTConfig
from snippets.run import pretrained

__all__ = ["WHOLE", "gpt_config", "load_model", "sharpen"]

WHOLE = pretrained.FAMILIES  # model_type -> where its norms sit


def gpt_config(config) -> GPTConfig:
    """The GPTConfig of a transformers config of a family in WHOLE."""
    return pretrained.gpt_config(config.to_dict())


@torch.no_grad()
def load_model(model: nn.Module) -> GPT:
    """The guide's GPT computing what `model` (a transformers *ForCausalLM of a
    family in WHOLE) computes, on its weights, in eval mode."""
    return pretrained.from_state_dict(model.config.to_dict(), model.state_dict())


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
