"""Training the guide's GPT on a CPU: AdamW, a schedule, clipping, accumulation,
the one loop the experiments train with, runs that resume exactly, and the same
loop on several processes.

The command line (a progress bar, the loss plot, the throughput benchmark) is
lab/train.py: `python -m lab.train --help`. Shape letters: B batch, T sequence
length.
"""

# --8<-- [start:imports]
import contextlib
import dataclasses
import json
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from snippets.core.model import GPT, GPTConfig
from snippets.run.checkpoint import (
    CHECKPOINT,
    HISTORY,
    check_same_config,
    save_checkpoint,
)
from snippets.run.train_data import (
    Corpus,
    load_corpus,
    markov_loss,
    micro_batches,
    val_windows,
)

# --8<-- [end:imports]

__all__ = [
    "TrainConfig",
    "param_groups",
    "make_optimizer",
    "lr_at",
    "train_step",
    "fit",
    "evaluate",
    "train",
]


# --8<-- [start:config]
@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything a run depends on; the command line has one option per field."""

    corpus: str = "markov"  # "markov": known best loss; "guide": the guide's text
    corpus_chars: int = 200_000  # markov only: characters to train on
    steps: int = 800  # optimizer steps; the schedule ends here
    batch_size: int = 32  # windows per optimizer step, over all processes
    grad_accum: int = 1  # micro-steps per optimizer step (batch_size split k ways)
    context_length: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embed: int = 64
    dropout: float = 0.0
    tie_weights: bool = True
    lr: float = 3e-3  # the peak learning rate, reached at the end of warmup
    min_lr: float = 3e-4  # the floor the cosine ends at, and stays at
    warmup_steps: int = 50
    weight_decay: float = 0.1
    beta2: float = 0.99  # AdamW's second-moment decay (beta1 is 0.9)
    grad_clip: float = 1.0  # largest gradient norm; 0 turns clipping off
    adamw: str = "fused"  # "fused", "foreach" or "for-loop": same maths
    eval_interval: int = 50  # validate (and checkpoint) every this many steps
    val_windows: int = 256  # fixed validation windows of context_length tokens
    seed: int = 0
    compile: bool = False  # torch.compile the model (slow to start)

    def __post_init__(self):
        if self.corpus not in ("markov", "guide"):
            raise ValueError(
                f"corpus ({self.corpus!r}) must be 'markov' or 'guide'"
            )
        for name in ("steps", "batch_size", "grad_accum", "eval_interval"):
            value = getattr(self, name)
            if type(value) is not int or value <= 0:
                raise ValueError(f"{name} ({value!r}) must be a positive int")
        if self.batch_size % self.grad_accum != 0:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be divisible by "
                f"grad_accum ({self.grad_accum}): every micro-step gets as many "
                f"windows"
            )
        if self.adamw not in ("fused", "foreach", "for-loop"):
            raise ValueError(
                f"adamw ({self.adamw!r}) must be 'fused', 'foreach' or 'for-loop'"
            )
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(
                f"min_lr ({self.min_lr}) must be between 0 and lr ({self.lr})"
            )
        if not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(
                f"warmup_steps ({self.warmup_steps}) must be between 0 and "
                f"steps ({self.steps})"
            )

    def model_config(self, vocab_size: int) -> GPTConfig:
        """The GPTConfig of this run: its model fields, and the corpus's V."""
        fields = {f.name for f in dataclasses.fields(GPTConfig)}
        sizes = {k: v for k, v in dataclasses.asdict(self).items() if k in fields}
        return GPTConfig(vocab_size=vocab_size, **sizes)


# --8<-- [end:config]


# --8<-- [start:param_groups]
def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's two groups: the matrices of Linear layers decay, nothing else does.

    Decay shrinks a weight by lr * weight_decay of its value at every step, so a
    large weight must keep earning its size from the loss. That suits the matrices
    that mix channels. It does not suit
    - biases and LayerNorm scales and shifts: few numbers that set offsets and
      sizes; a LayerNorm scale pulled to 0 silences its channel;
    - embedding rows: row v learns only in batches where token v occurs, but decay
      shrinks it at every step, so the rows of rare tokens fade.
    A tied LM head is the token table itself, one tensor: it counts as embedding.
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


# The same update three ways: one tensor after another in a Python loop, a few
# batched ops over all tensors at once, or one fused kernel for everything.
ADAMW = {
    "for-loop": {"foreach": False},
    "foreach": {"foreach": True},
    "fused": {"fused": True},
}


def make_optimizer(
    model: nn.Module,
    lr: float,
    weight_decay: float,
    beta2: float = 0.99,
    adamw: str = "fused",
) -> torch.optim.AdamW:
    """AdamW over param_groups(model); lr is replaced at every step (lr_at)."""
    if adamw not in ADAMW:
        raise ValueError(f"adamw ({adamw!r}) must be one of {list(ADAMW)}")
    groups = param_groups(model, weight_decay)
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, beta2), **ADAMW[adamw])


# --8<-- [end:param_groups]


# --8<-- [start:schedule]
def lr_at(
    step: int, max_lr: float, min_lr: float, warmup_steps: int, total_steps: int
) -> float:
    """The learning rate of optimizer step `step` (counted from 0).

    Linear warmup to max_lr over the first warmup_steps steps, then half a cosine
    down to min_lr at total_steps, and min_lr from there on.
    """
    if not 0 <= min_lr <= max_lr:
        raise ValueError(f"need 0 <= min_lr ({min_lr}) <= max_lr ({max_lr})")
    if not 0 <= warmup_steps <= total_steps:
        raise ValueError(
            f"need 0 <= warmup_steps ({warmup_steps}) <= "
            f"total_steps ({total_steps})"
        )
    if step < 0:
        raise ValueError(f"step ({step}) must be >= 0")
    if step < warmup_steps:
        # Step 0 already moves (lr > 0); step warmup_steps - 1 uses max_lr.
        return max_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        # A cosine is periodic: past the end it would climb again. A run resumed
        # with more steps, or kept going, stays at the floor instead.
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)  # 0 -> 1
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))


# --8<-- [end:schedule]


# --8<-- [start:train_step]
def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    grad_clip: float,
) -> tuple[float, float]:
    """One optimizer step over k equal micro-batches: (mean loss, gradient norm).

    backward adds into .grad, so the gradients of k pieces, each loss divided by
    k, sum to the gradient of the mean loss over the whole batch: the step is the
    one a k times larger batch would give, with one piece's activations in memory.
    """
    k = len(batches)
    total = 0.0
    for i, (x, y) in enumerate(batches):  # x, y: (B / k, T)
        # Under DDP every backward averages the gradients over the processes;
        # no_sync() skips that until the last piece, when the sum is complete.
        last = i == k - 1
        skip_sync = model.no_sync() if isinstance(model, DDP) and not last else None
        with skip_sync or contextlib.nullcontext():
            _, loss = model(x, y)  # the mean over this piece's positions
            (loss / k).backward()
        total += loss.item()
    # The length of the gradient over all parameters, before clipping. Above
    # grad_clip, every gradient is scaled by grad_clip / norm: same direction, a
    # bounded step, so one unlucky batch cannot throw the weights far.
    params = [p for group in optimizer.param_groups for p in group["params"]]
    norm = torch.nn.utils.clip_grad_norm_(params, grad_clip or math.inf)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total / k, norm.item()


# --8<-- [end:train_step]


# --8<-- [start:fit]
Batches = list[tuple[torch.Tensor, torch.Tensor]]  # one step's micro-batches


def fit(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    next_batches: Callable[[], Batches],
    schedule: tuple[float, float, int, int],
    steps: range,
    grad_clip: float,
) -> Iterator[tuple[int, float, float, float]]:
    """The training loop: every step of `steps` sets lr_at(step, *schedule) as
    the learning rate, draws next_batches() and takes train_step. schedule is
    lr_at's (max_lr, min_lr, warmup_steps, total_steps): every run has its shape.

    After each step it yields (steps done, lr, loss, gradient norm), so that a
    caller logs, validates or checkpoints between steps in its own for loop.
    """
    for step in steps:
        lr = lr_at(step, *schedule)
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss, norm = train_step(model, optimizer, next_batches(), grad_clip)
        yield step + 1, lr, loss, norm


# --8<-- [end:fit]


# --8<-- [start:evaluate]
@torch.no_grad()
def evaluate(
    model: GPT,
    val_x: torch.Tensor,
    val_y: torch.Tensor,
    batch_size: int,
    rank: int = 0,
    world_size: int = 1,
) -> float:
    """Mean loss over the windows val_x, val_y (N, T); each process scores some."""
    model.eval()  # dropout off: the loss of the model itself
    total = torch.zeros(2, dtype=torch.float64)  # sum of losses, positions
    for i in range(rank * batch_size, len(val_x), world_size * batch_size):
        x, y = val_x[i : i + batch_size], val_y[i : i + batch_size]  # (b, T)
        _, loss = model(x, y)
        total += torch.tensor([loss.item() * y.numel(), y.numel()])
    if world_size > 1:
        dist.all_reduce(total)  # sums over the processes, in place
    model.train()
    return (total[0] / total[1]).item()


# --8<-- [end:evaluate]


def _distributed() -> tuple[int, int]:
    """(rank, world_size): (0, 1) unless torchrun started this process."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


# --8<-- [start:train]
def train(
    config: TrainConfig,
    out: Path,
    *,
    resume: bool = False,
    stop_after: int | None = None,
    header: dict | None = None,
    on_step: Callable[[int, float, float], None] | None = None,
    on_record: Callable[[dict], None] | None = None,
) -> dict:
    """Train as config says, writing out/ckpt.pt and out/history.json.

    Under torchrun, every process runs this function: the model is wrapped in
    DistributedDataParallel, each process computes the gradient of its share of
    the batch, and backward averages them. Process 0 writes the files.

    Args:
        config: the run.
        out: the folder of the checkpoint and the history.
        resume: continue from out/ckpt.pt if it exists.
        stop_after: stop (with a checkpoint) after this step, as if interrupted.
        header: fields the history starts with (the command, the machine).
        on_step: called by process 0 after every step with (step, loss,
            tokens per second so far): a progress bar, for example.
        on_record: called by process 0 with every validation record.

    Returns:
        The history: config, machine, and one record per validation.
    """
    out = Path(out)
    rank, world_size = _distributed()
    corpus = load_corpus(config.corpus, config.corpus_chars)
    val_x, val_y = val_windows(
        corpus.val, config.context_length, config.val_windows
    )
    torch.manual_seed(config.seed)  # the same initial weights in every process
    model = GPT(config.model_config(corpus.tokenizer.vocab_size))
    optimizer = make_optimizer(
        model, config.lr, config.weight_decay, config.beta2, config.adamw
    )
    batches = torch.Generator().manual_seed(config.seed)  # same in every process
    # Dropout draws from torch's global generator: a different stream per process.
    torch.manual_seed(config.seed + 1 + rank)
    step, seconds = 0, 0.0
    history = _new_history(config, corpus, world_size, header)
    if config.corpus == "markov":  # the best loss on these very windows
        history["val_floor"] = round(markov_loss(val_x, val_y), 5)
    losses = []  # training losses of the steps since the last record
    path = out / CHECKPOINT
    if resume and path.exists():
        state = torch.load(path, weights_only=True)
        check_same_config(state["config"], config)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        batches.set_state(state["batch_rng"])
        torch.set_rng_state(state["torch_rng"][rank])  # this process's dropout
        step, seconds, history = state["step"], state["seconds"], state["history"]
        losses = state["losses"]
        history["resumed_at"].append(step)
    # DDP broadcasts process 0's weights, then averages gradients in backward.
    ddp = DDP(model) if world_size > 1 else model
    stepper = torch.compile(ddp) if config.compile else ddp

    def checkpoint() -> None:
        # Every process's dropout stream, gathered so that a resume restores all.
        rngs = [None] * world_size
        if world_size > 1:
            dist.all_gather_object(rngs, torch.get_rng_state())
        else:
            rngs = [torch.get_rng_state()]
        if rank == 0:
            state = {
                "config": dataclasses.asdict(config),
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "batch_rng": batches.get_state(),
                "torch_rng": rngs,
                "step": step,
                "seconds": seconds,
                "losses": losses,  # of the steps since the last record
                "history": history,
                "chars": corpus.tokenizer.chars,  # to decode what the model writes
            }
            out.mkdir(parents=True, exist_ok=True)
            save_checkpoint(state, path)
            (out / HISTORY).write_text(json.dumps(history, indent=1) + "\n")
        if world_size > 1:
            dist.barrier()  # nobody reads the checkpoint before it is complete

    last = config.steps if stop_after is None else min(stop_after, config.steps)
    tokens_per_step = config.batch_size * config.context_length  # all processes
    first, first_seconds = step, seconds
    started = time.perf_counter() - seconds  # the clock goes on where it stopped
    if step == 0:  # where the curve starts: the untrained model, near ln V
        val = evaluate(model, val_x, val_y, config.batch_size, rank, world_size)
        history["records"].append(
            {"step": 0, "seconds": 0.0, "val_loss": round(val, 5)}
        )
    steps = fit(
        stepper,
        optimizer,
        lambda: micro_batches(corpus.train, config, batches, rank, world_size),
        (config.lr, config.min_lr, config.warmup_steps, config.steps),
        range(step, last),  # the steps still to take
        config.grad_clip,
    )
    for step, lr, loss, norm in steps:  # step: the steps done
        losses.append(loss)
        seconds = time.perf_counter() - started  # this run and the ones resumed
        tokens_per_s = (step - first) * tokens_per_step / (seconds - first_seconds)
        if rank == 0 and on_step is not None:
            on_step(step, loss, tokens_per_s)
        if step % config.eval_interval == 0 or step == config.steps:
            val = evaluate(model, val_x, val_y, config.batch_size, rank, world_size)
            train_loss = torch.tensor(sum(losses) / len(losses))  # this process's
            if world_size > 1:
                dist.all_reduce(train_loss)  # the sum over processes' shares
                train_loss /= world_size
            record = {
                "step": step,
                "seconds": round(seconds, 2),
                "tokens": step * tokens_per_step,
                "lr": lr,
                "train_loss": round(train_loss.item(), 5),
                "val_loss": round(val, 5),
                "grad_norm": round(norm, 4),
            }
            losses = []
            history["records"].append(record)
            if rank == 0 and on_record is not None:
                on_record(record)
        if step % config.eval_interval == 0 or step == last:
            checkpoint()
    return history


# --8<-- [end:train]

# ------------------------------------------------------------------ bookkeeping


def _new_history(
    config: TrainConfig, corpus: Corpus, world_size: int, header: dict | None
) -> dict:
    return {
        **(header or {}),
        "config": dataclasses.asdict(config),
        "world_size": world_size,
        "best_loss": corpus.best_loss,
        "resumed_at": [],
        "records": [],
    }
