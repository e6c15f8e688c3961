"""Training the transformer page's GPT as the optimization page teaches it first:
AdamW with two parameter groups, warmup and a cosine to a floor, clipping, the
loop, and the validation loss.

Plain torch, and only what that page and the ones before it explain: one batch per
step, one process, no checkpoints (the package's loop, snippets/run/train.py, adds
those and takes the same steps). Shape letters: B batch, T sequence length.
"""

# --8<-- [start:imports]
import dataclasses
import math

import torch
import torch.nn as nn

from snippets.run.data import get_batch

# --8<-- [end:imports]

__all__ = [
    "TrainConfig",
    "param_groups",
    "make_optimizer",
    "lr_at",
    "evaluate",
    "train",
]


# --8<-- [start:config]
@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The numbers of a run besides the model's sizes (those are in GPTConfig)."""

    steps: int = 800  # optimizer steps; the schedule ends here
    batch_size: int = 32  # B windows per step, each context_length tokens long
    lr: float = 3e-3  # the peak learning rate, reached at the end of warmup
    min_lr: float = 3e-4  # the floor the cosine ends at, and stays at
    warmup_steps: int = 50
    weight_decay: float = 0.1
    beta2: float = 0.99  # AdamW's second-moment decay (beta1 is 0.9)
    grad_clip: float = 1.0  # the largest gradient norm a step may use
    eval_interval: int = 50  # validate every this many steps


# --8<-- [end:config]


# --8<-- [start:param_groups]
def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's two groups: the matrices of Linear layers decay, nothing else does.

    Biases and LayerNorm scales and shifts are few numbers that set offsets and
    sizes (a LayerNorm scale pulled to 0 silences its channel). An embedding row
    learns only in batches where its token occurs, but decay shrinks it at every
    step, so the rows of rare tokens would fade. A tied LM head is the token table
    itself, one tensor: it counts as embedding.
    """
    embeddings = {
        id(p)
        for module in model.modules()
        if isinstance(module, nn.Embedding)
        for p in module.parameters()
    }
    decay, no_decay = [], []
    for p in model.parameters():  # a tied tensor comes once
        if p.dim() == 2 and id(p) not in embeddings:
            decay.append(p)  # (out, in) weights of Linear layers
        else:
            no_decay.append(p)  # biases, LayerNorms, embedding tables
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW over param_groups(model); the loop sets lr at every step (lr_at)."""
    groups = param_groups(model, config.weight_decay)
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, config.beta2))


# --8<-- [end:param_groups]


# --8<-- [start:schedule]
def lr_at(
    step: int, max_lr: float, min_lr: float, warmup_steps: int, total_steps: int
) -> float:
    """The learning rate of step `step` (counted from 0): a linear warmup to
    max_lr, half a cosine down to min_lr at total_steps, then min_lr."""
    if step < warmup_steps:
        # Step 0 already moves (lr > 0); step warmup_steps - 1 uses max_lr.
        return max_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        # Past the end a cosine would climb again: a run kept going stays low.
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)  # 0 -> 1
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))


# --8<-- [end:schedule]


# --8<-- [start:evaluate]
@torch.no_grad()
def evaluate(model: nn.Module, val_x, val_y, batch_size: int = 32) -> float:
    """The mean loss over every position of the windows val_x, val_y (N, T)."""
    model.eval()  # dropout off: the loss of the model itself
    total, count = 0.0, 0
    for i in range(0, len(val_x), batch_size):
        x, y = val_x[i : i + batch_size], val_y[i : i + batch_size]  # (b, T)
        _, loss = model(x, y)  # the mean over this batch's b * T positions
        total, count = total + loss.item() * y.numel(), count + y.numel()
    model.train()
    return total / count


# --8<-- [end:evaluate]


# --8<-- [start:train]
def train(model, config: TrainConfig, data, val_x, val_y, generator):
    """Train model on windows of the ids `data` (N,) drawn with `generator`.

    Returns every step's training loss, and the validation loss by step done.
    """
    optimizer = make_optimizer(model, config)
    schedule = (config.lr, config.min_lr, config.warmup_steps, config.steps)
    T = model.config.context_length
    losses, val_losses = [], {0: evaluate(model, val_x, val_y)}
    for step in range(config.steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, *schedule)  # this step's rate
        x, y = get_batch(data, config.batch_size, T, generator)  # (B, T) each
        _, loss = model(x, y)  # the mean over the B * T positions
        loss.backward()  # adds this batch's gradient into every .grad
        # Above grad_clip, every gradient is scaled by grad_clip / norm.
        nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)  # the next backward starts at 0
        losses.append(loss.item())
        if (step + 1) % config.eval_interval == 0:
            val_losses[step + 1] = evaluate(model, val_x, val_y)
    return losses, val_losses


# --8<-- [end:train]
