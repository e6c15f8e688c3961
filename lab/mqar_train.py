"""Training the guide's GPT on multi-query associative recall (MQAR) in minutes on one core.

The recipe that learns it at this size (found on this machine; the findings are in
docs/beyond-softmax.md's run): the rows of snippets.tasks.mqar with a range of pairs per
row, the loss only at repeated keys (a key's first value is a coin toss, and its noise
swamps the signal early on), the `in_order` curriculum (the first rows replay their
pairs in order, a copy an induction head learns first, going linearly to 0 by half of
the steps), AdamW with a linear warm-up and a cosine decay, gradients clipped to norm 1.

Kept apart from the experiment (lab/beyond_softmax_recall.py) so that the trained-model
cache (lab/model_cache.py), which keys a model by the code its training reads, reads
only this, snippets.model and snippets.tasks.
"""

import dataclasses
import math

import torch

from snippets.linear_attention import GatedDeltaNet
from snippets.model import GPT, GPTConfig
from snippets.tasks import IGNORE, mqar

VARIANTS = {
    "softmax": None,
    "linear": ("linear",) * 4,
    "hybrid": ("linear", "linear", "linear", "softmax"),
}


@dataclasses.dataclass(frozen=True)
class RecallConfig:
    """One model of the recall experiment: its variant, sizes, data and recipe."""

    variant: str = "hybrid"  # a key of VARIANTS
    seed: int = 0
    n_embed: int = 64  # C
    n_head: int = 4  # H of the softmax blocks
    linear_state: tuple[int, int] = (2, 4)  # heads, D: each linear block a 2 x 4 x 4 state
    position: str = "alibi"  # of the softmax blocks (the linear ones have none)
    length: int = 32  # T: 16 pairs a row
    n_keys: int = 32
    n_values: int = 32
    min_pairs: int = 2  # distinct keys per row, drawn per row in [min, max]
    max_pairs: int = 8
    steps: int = 700
    batch: int = 64
    lr: float = 3e-3
    warmup: int = 40  # steps of linear warm-up, then cosine to 0.1 lr
    in_order_until: float = 0.5  # the curriculum's share of the steps

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"variant ({self.variant!r}) must be one of {list(VARIANTS)}")

    def gpt_config(self) -> GPTConfig:
        types = VARIANTS[self.variant]
        return GPTConfig(
            vocab_size=self.n_keys + self.n_values,
            context_length=self.length,
            n_embed=self.n_embed,
            n_head=self.n_head,
            n_layer=4,
            position=self.position,
            layer_types=types,
            linear_state=None if types is None else self.linear_state,
        )


def build(config: RecallConfig) -> GPT:
    """GPT(config.gpt_config()), its Gated DeltaNet blocks in chunks of 16 positions:
    the same function as the default 64 (tests/snippets/test_linear_attention.py), and
    at T = 32 not padded to twice its length."""
    model = GPT(config.gpt_config())
    for block in model.blocks:
        if isinstance(block.attn, GatedDeltaNet):
            block.attn.chunk_size = 16
    return model


def repeated(tokens: torch.Tensor) -> torch.Tensor:
    """(B, L) mqar rows -> (B, L) bool: True at a key seen earlier in its row (recall)."""
    keys = tokens[:, 0::2]  # (B, n)
    n = keys.size(1)
    earlier = torch.ones(n, n, dtype=torch.bool).tril(-1)  # slot j < i
    seen = ((keys[:, :, None] == keys[:, None, :]) & earlier).any(-1)  # (B, n)
    out = torch.zeros_like(tokens, dtype=torch.bool)
    out[:, 0::2] = seen
    return out


def schedule(config: RecallConfig, step: int) -> float:
    """The learning rate's factor at `step`: linear warm-up, then cosine to 0.1."""
    if step < config.warmup:
        return (step + 1) / config.warmup
    done = (step - config.warmup) / max(1, config.steps - config.warmup)
    return 0.1 + 0.45 * (1 + math.cos(math.pi * done))


def train_recall(config: RecallConfig) -> tuple[GPT, list[float]]:
    """A GPT trained on MQAR by the recipe above: (model in eval mode, loss per step)."""
    torch.manual_seed(config.seed)
    model = build(config)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=(0.9, 0.98), weight_decay=0.0
    )
    data = torch.Generator().manual_seed(config.seed)  # the same rows for every variant
    losses = []
    for step in range(config.steps):
        for group in optimizer.param_groups:
            group["lr"] = config.lr * schedule(config, step)
        in_order = max(0.0, 1 - step / (config.in_order_until * config.steps))
        tokens, targets = mqar(
            config.batch,
            config.length,
            config.n_keys,
            config.n_values,
            config.min_pairs,
            config.max_pairs,
            data,
            in_order=in_order,
        )
        targets = targets.masked_fill(~repeated(tokens), IGNORE)  # recall only
        _, loss = model(tokens, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(round(loss.item(), 4))
    return model.eval(), losses


@torch.no_grad()
def recall_at(model: GPT, config: RecallConfig, pairs: int, rows: int = 256) -> float:
    """The share of repeated keys whose value is the model's top guess, on fresh rows
    of exactly `pairs` distinct keys (shuffled order: no curriculum)."""
    data = torch.Generator().manual_seed(10_000 + pairs)  # unseen, the same for all
    tokens, targets = mqar(rows, config.length, config.n_keys, config.n_values, pairs, pairs, data)
    logits, _ = model(tokens)
    right = logits.argmax(-1) == targets
    return right[repeated(tokens)].float().mean().item()
