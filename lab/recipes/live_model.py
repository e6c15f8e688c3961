"""The See-attention GPT for the reader's browser: its checkpoint, and its weights as the
attention page's JavaScript reads them.

The explorer of the attention page runs the guide's char GPT (lab/model_cache.py,
trained_char_gpt) in the page, in plain JavaScript (docs/assets/javascripts/attention-live.js).
The build (hooks/explorer_data.py) writes three files into the site, from the committed model:

- char-gpt.pt: the model as a snippets.run.train checkpoint, what
  snippets.run.generate.load_model reads;
- char-gpt.json: the manifest, the model's sizes, its characters and where each tensor starts;
- char-gpt.bin: every tensor of the state dict, float32 little-endian, one after another.

tests/pages/test_attention_live.py runs the page's forward pass and compares it with PyTorch on
the checkpoint.
"""

import dataclasses
import json
from pathlib import Path

import torch

from lab.model_cache import trained_char_gpt
from snippets.core.model import GPT, GPTConfig
from snippets.pages.char_gpt import CharGPTConfig
from snippets.run.train import TrainConfig

NAME = "char-gpt"
FILES = (f"{NAME}.pt", f"{NAME}.json", f"{NAME}.bin")
# The GPT the JavaScript computes: learned positions, softmax attention, untied LM head.
PLAIN = {
    "position": "learned",
    "dropout": 0.0,
    "tie_weights": False,
    "layers": None,  # every block the plain causal layer
    "block": None,  # the teaching block
}


def train_config(config: CharGPTConfig, vocab_size: int) -> TrainConfig:
    """The snippets.run.train run that describes train_char_gpt(config): its model and recipe
    (AdamW at a constant lr, PyTorch's default decay and betas, no clipping)."""
    run = TrainConfig(
        corpus="guide",
        steps=config.steps,
        batch_size=config.batch_size,
        context_length=config.context_length,
        n_layer=config.n_layer,
        n_head=config.n_head,
        n_embed=config.n_embed,
        dropout=0.0,
        tie_weights=False,
        lr=config.lr,
        min_lr=config.lr,
        warmup_steps=0,
        weight_decay=0.01,
        beta2=0.999,
        grad_clip=0.0,
        seed=config.seed,
    )
    if run.model_config(vocab_size) != config.gpt_config(vocab_size):
        raise ValueError(f"TrainConfig {run} does not give the model of {config}")
    return run


def check_plain(config: GPTConfig) -> None:
    """The JavaScript computes one kind of GPT; anything else is refused by name."""
    other = {k: getattr(config, k) for k, v in PLAIN.items() if getattr(config, k) != v}
    if other:
        raise ValueError(
            f"the page's forward pass computes a GPT with {PLAIN}; this one has {other}"
        )


def checkpoint_state(model: GPT, chars: str, run: TrainConfig) -> dict:
    """What snippets.run.generate.load_model reads: the run's config, the weights and
    the characters."""
    if run.model_config(len(chars)) != model.config:
        raise ValueError(f"run {run} does not describe the model {model.config}")
    return {"config": dataclasses.asdict(run), "model": model.state_dict(), "chars": chars}


def export(model: GPT, chars: str) -> tuple[dict, bytes]:
    """The manifest and the float32 weights of model, as attention-live.js reads them.

    Args:
        model: a GPT of the kind check_plain accepts.
        chars: its CharTokenizer's characters, id order.

    Returns:
        The manifest (sizes, characters, and per tensor its name, shape and offset in
        floats) and the weights' bytes.
    """
    config = model.config
    check_plain(config)
    if len(chars) != config.vocab_size:
        raise ValueError(f"{len(chars)} characters for vocab_size={config.vocab_size}")
    tensors, parts, offset = [], [], 0
    for name, tensor in model.state_dict().items():
        flat = tensor.detach().to(torch.float32).contiguous().view(-1)
        tensors.append({"name": name, "shape": list(tensor.shape), "offset": offset})
        parts.append(flat.numpy().astype("<f4").tobytes())
        offset += flat.numel()
    manifest = {
        "model": NAME,
        "weights": f"{NAME}.bin",
        "chars": chars,
        "vocab_size": config.vocab_size,
        "context_length": config.context_length,
        "n_embed": config.n_embed,
        "n_head": config.n_head,
        "n_layer": config.n_layer,
        "layer_norm_eps": model.ln_f.eps,
        "floats": offset,
        "tensors": tensors,
    }
    return manifest, b"".join(parts)


def write(folder: Path, model: GPT | None = None) -> list[Path]:
    """The three files of the page's model (FILES) in folder; model defaults to the
    committed char GPT (a planted test passes another)."""
    trained, char, _ = trained_char_gpt()
    model = trained if model is None else model
    run = train_config(CharGPTConfig(), char.vocab_size)
    folder.mkdir(parents=True, exist_ok=True)
    pt, manifest_path, weights_path = (folder / name for name in FILES)
    torch.save(checkpoint_state(model, char.chars, run), pt)
    manifest, weights = export(model, char.chars)
    manifest_path.write_text(json.dumps(manifest, ensure_ascii=False, indent=0) + "\n", "utf-8")
    weights_path.write_bytes(weights)
    return [pt, manifest_path, weights_path]
