"""A GPT trained on the copy / induction task, and its heads read while it learns.

The runs of lab.positions (five position schemes) and lab.optimization (the
optimization page's headline run) are this loop with different setups. Shape
letters: B batch, L layers, H heads, T sequence length, V vocabulary.

Rows are random segments repeated until full (snippets/pages/tasks.py): once a repeat
has begun, each next token is the one that followed the current token's earlier
occurrence, which only attention can fetch (Olsson et al. 2022: a previous-token
head, then an induction head that looks for "the position whose previous token
is mine"). Every `every` steps the loop measures, on held-out rows:

- the loss on the copies (the targets a perfect copier knows: floor 0 nats) and
  on all targets (floor: snippets.pages.tasks.copy_floor);
- each head's previous-token share (not snippets.pages.induction's previous-token
  score, the plain weight on t - 1): of the weight position t gives to earlier
  positions (t itself left out), the share on t - 1. Uniform attention gives it
  1 / t; a head that splits its weight between t and t - 1, which carries the
  previous token just as well, scores 1;
- each head's induction score (snippets.pages.induction.induction_scores) on rows of
  one period: the weight on the token that followed the current token's previous
  occurrence.
"""

import dataclasses
import time

import torch

from snippets.core.model import GPT, GPTConfig
from snippets.core.positions import WITHOUT_TABLE
from snippets.pages.induction import induction_scores, uniform_induction_score
from snippets.pages.tasks import copy_targets, repeated_tokens
from snippets.run.train import fit, make_optimizer

FACTORS = (1, 2, 4)  # evaluation lengths, in multiples of the training length
PREVIOUS_THRESHOLD = 0.3  # a previous-token head: 0.3 of its look-back on t - 1
INDUCTION_THRESHOLD = 0.3  # an induction head: 0.3 of its weight on the copy's source


@dataclasses.dataclass(frozen=True)
class Setup:
    """Everything a run depends on besides the position scheme and the seed."""

    context_length: int = 32  # T, the training length
    vocab_size: int = 32
    min_period: int = 4
    max_period: int = 12
    n_layer: int = 2
    n_head: int = 4
    n_embed: int = 64
    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup_steps: int = 50
    weight_decay: float = 0.1
    # The token table's initial spread. GPT's own 0.02 lets a fixed sinusoidal
    # table (entries up to 1) swamp the tokens; std 1 matches them (Vaswani et
    # al. scale the embeddings by sqrt(C) for the same reason). Every scheme
    # starts from it.
    token_std: float = 1.0
    every: int = 25  # steps between two measurements
    eval_rows: int = 128  # rows scored at each length: the same rows for every model
    probe_period: int = 8  # the period of the rows the heads are read on
    schemes: tuple = ("learned",)
    seeds: tuple = (0, 1, 2)
    factors: tuple = FACTORS  # the lengths scored after training


def model_config(setup: Setup, position: str) -> GPTConfig:
    longest = setup.context_length * max(setup.factors)
    return GPTConfig(
        vocab_size=setup.vocab_size,
        context_length=setup.context_length,
        n_embed=setup.n_embed,
        n_head=setup.n_head,
        n_layer=setup.n_layer,
        position=position,
        # Only schemes without a table may be asked for more than they saw.
        max_length=longest if position in WITHOUT_TABLE else None,
    )


def rows(setup: Setup, n: int, length: int, seed: int, period: int | None = None):
    """n rows of length + 1 tokens (inputs and targets); periods as in training,
    or all `period`."""
    generator = torch.Generator().manual_seed(seed)
    lo, hi = (period, period) if period else (setup.min_period, setup.max_period)
    return repeated_tokens(n, length + 1, setup.vocab_size, lo, hi, generator)


@torch.no_grad()
def copy_loss(model: GPT, batch: torch.Tensor) -> dict:
    """Loss (nats) and accuracy on the copies, and the loss over all targets."""
    x, y = batch[:, :-1], batch[:, 1:]
    known = copy_targets(batch)  # (B, L)
    logits, _ = model(x)  # (B, L, V)
    losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), y, reduction="none")
    right = logits.argmax(-1) == y
    return {
        "loss": losses[known].mean().item(),
        "accuracy": right[known].float().mean().item(),
        "loss_all": losses.mean().item(),
    }


@torch.no_grad()
def attention_weights(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    """Every head's attention weights on idx (B, T): (B, L, H, T, T)."""
    _, _, weights = model(idx, return_weights=True)  # L x (B, H, T, T)
    return torch.stack(weights, dim=1)


def previous_token_shares(weights: torch.Tensor) -> torch.Tensor:
    """(B, L, H, T, T) -> (L, H): of the weight each position t >= 1 gives to
    positions before it, the share on t - 1, averaged over t and the rows."""
    T = weights.size(-1)
    t = torch.arange(1, T)
    before = 1 - weights[..., t, t]  # (B, L, H, T - 1): all but t itself
    return (weights[..., t, t - 1] / before.clamp(min=1e-9)).mean(dim=(0, -1))


def head_scores(model: GPT, probe: torch.Tensor, period: int) -> tuple[list, list]:
    """Previous-token shares and induction scores (L x H lists, 3 decimals) on probe rows
    of one period."""
    weights = attention_weights(model, probe[:, :-1])
    previous = previous_token_shares(weights)
    induction = induction_scores(weights, period)
    return [
        [[round(v, 3) for v in layer] for layer in scores.tolist()]  # L x H
        for scores in (previous, induction)
    ]


def first_head(curve: list, key: str, threshold: float, from_layer: int = 1) -> dict | None:
    """The first measurement at which some head of layer from_layer or later reaches
    threshold: its step, layer and head (counted from 1), or None."""
    for point in curve:
        for layer, scores in enumerate(point[key]):
            if layer + 1 < from_layer:
                continue
            best = max(range(len(scores)), key=scores.__getitem__)
            if scores[best] >= threshold:
                return {"step": point["step"], "layer": layer + 1, "head": best + 1}
    return None


def uniform_scores(setup: Setup) -> dict:
    """What a head spreading its weight evenly scores: the scores' chance level."""
    T = setup.context_length
    return {
        "previous": round(sum(1 / t for t in range(1, T)) / (T - 1), 3),
        "induction": round(uniform_induction_score(setup.probe_period, T), 3),
    }


def train_one(setup: Setup, position: str, seed: int) -> tuple[dict, GPT]:
    """Train one model; its row of results (curve, formation steps, losses at
    each length) and the trained model."""
    torch.set_num_threads(1)
    torch.manual_seed(seed)  # the same initial weights where the schemes agree
    model = GPT(model_config(setup, position))
    torch.nn.init.normal_(model.tok_emb.weight, std=setup.token_std)
    optimizer = make_optimizer(model, setup.lr, setup.weight_decay)
    generator = torch.Generator().manual_seed(seed)  # the same batches
    T = setup.context_length
    held_out = rows(setup, 64, T, seed=1000)
    probe = rows(setup, 32, T, seed=1001, period=setup.probe_period)
    start = time.process_time()
    curve = []

    def measure(step: int) -> None:  # after `step` steps: step 0 is the start
        model.eval()
        score = copy_loss(model, held_out)
        previous, induction = head_scores(model, probe, setup.probe_period)
        model.train()
        curve.append(
            {
                "step": step,
                "loss_copies": round(score["loss"], 4),
                "loss_all": round(score["loss_all"], 4),
                "previous": previous,
                "induction": induction,
            }
        )

    def batch():
        periods = (setup.min_period, setup.max_period)
        rows = repeated_tokens(setup.batch_size, T + 1, setup.vocab_size, *periods, generator)
        return [(rows[:, :-1], rows[:, 1:])]

    schedule = (setup.lr, setup.min_lr, setup.warmup_steps, setup.steps)
    measure(0)
    for step, *_ in fit(model, optimizer, batch, schedule, range(setup.steps), 1.0):
        if step % setup.every == 0:
            measure(step)
    model.eval()
    row = {
        "position": position,
        "seed": seed,
        "previous_formed": first_head(curve, "previous", PREVIOUS_THRESHOLD),
        # Layer 1 sees no earlier head's output, so it cannot look for "the position
        # whose previous token is mine": a score there is a head at a fixed offset
        # that happens to match the probe's period.
        "induction_formed": first_head(curve, "induction", INDUCTION_THRESHOLD, from_layer=2),
        "curve": curve,
    }
    for factor in setup.factors:
        length = T * factor
        if length > model.config.longest:
            row[f"loss_{factor}x"] = row[f"accuracy_{factor}x"] = None  # no table rows
            continue
        score = copy_loss(model, rows(setup, setup.eval_rows, length, seed=2000))
        row[f"loss_{factor}x"] = round(score["loss"], 4)
        row[f"accuracy_{factor}x"] = round(score["accuracy"], 4)
    row["parameters"] = sum(p.numel() for p in model.parameters())
    row["train_cpu_seconds"] = round(time.process_time() - start, 1)
    return row, model
