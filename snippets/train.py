"""Training the guide's GPT on a CPU: AdamW, a schedule, clipping, accumulation,
checkpoints that resume exactly, and the same loop on several processes.

    python -m snippets.train --corpus markov --steps 800 --out runs/markov
    python -m snippets.train --corpus markov --steps 800 --out runs/markov --resume
    torchrun --nproc_per_node=2 -m snippets.train --steps 800 --out runs/ddp
    python -m snippets.train --bench-throughput     # the optimization page's table

Needs torch, tqdm and matplotlib (for the plots), and snippets/model.py, data.py,
corpus.py and tokenizer.py. Shape letters: B batch, T sequence length.
"""

# --8<-- [start:imports]
import argparse
import contextlib
import dataclasses
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from snippets.corpus import MarkovLanguage, guide_text
from snippets.data import get_batch
from snippets.model import GPT, GPTConfig
from snippets.tokenizer import CharTokenizer

# --8<-- [end:imports]

__all__ = [
    "TrainConfig",
    "param_groups",
    "make_optimizer",
    "lr_at",
    "train_step",
    "micro_batches",
    "evaluate",
    "save_checkpoint",
    "load_corpus",
    "markov_loss",
    "train",
    "main",
]

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "docs" / "assets" / "results" / "training"  # committed results
CHECKPOINT = "ckpt.pt"  # the files a run writes into its --out folder
HISTORY = "history.json"
LOSS_PLOT = "loss.svg"


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
    attention: str = "fused"  # "per-head" is the readable, slower layer
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


# --8<-- [start:batches]
def micro_batches(
    data: torch.Tensor,
    config: TrainConfig,
    generator: torch.Generator,
    rank: int = 0,
    world_size: int = 1,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """This process's share of each of the grad_accum micro-batches of one step.

    Every process draws the same batch_size windows from the same generator, cuts
    them into grad_accum micro-batches and keeps its slice of each: the optimizer
    sees the same batch whatever world_size and grad_accum are.
    """
    per_micro = config.batch_size // config.grad_accum
    if per_micro % world_size != 0:
        raise ValueError(
            f"batch_size // grad_accum ({per_micro}) must be divisible by the "
            f"number of processes ({world_size})"
        )
    share = per_micro // world_size
    mine = slice(rank * share, (rank + 1) * share)
    x, y = get_batch(data, config.batch_size, config.context_length, generator)
    pieces = zip(x.split(per_micro), y.split(per_micro), strict=True)
    return [(xs[mine], ys[mine]) for xs, ys in pieces]  # (share, T) each


# --8<-- [end:batches]


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


# --8<-- [start:checkpoint]
def save_checkpoint(state: dict, path: Path) -> None:
    """torch.save to a temporary file, then rename it over the checkpoint.

    os.replace is atomic: whoever reads path, a resumed run after a crash or a
    Ctrl-C in the middle of a save, finds the old checkpoint or the new one,
    never half of one.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())  # the bytes on disk before the name points at them
    os.replace(tmp, path)


# --8<-- [end:checkpoint]


# --8<-- [start:corpus]
# The Markov language of the objectives page: its entropy rate is the best loss.
MARKOV = MarkovLanguage.random(" adeiklnost", concentration=0.3, seed=0)


@dataclasses.dataclass
class Corpus:
    tokenizer: CharTokenizer
    train: torch.Tensor  # (N,) token ids to draw training windows from
    val: torch.Tensor  # (M,) held-out ids, cut into fixed windows
    best_loss: float | None  # the lowest loss any model can reach, if known


def load_corpus(name: str, n_chars: int = 200_000) -> Corpus:
    """Character-level token ids of a corpus: "markov" or "guide"."""
    if name == "markov":
        tokenizer = CharTokenizer(MARKOV.alphabet)
        train_text = MARKOV.sample(n_chars, seed=1)
        val_text = MARKOV.sample(max(n_chars // 10, 20_000), seed=2)  # other seed
        best = MARKOV.entropy_rate()
    elif name == "guide":
        text = guide_text()
        tokenizer = CharTokenizer.from_text(text)
        split = int(0.9 * len(text))  # the last tenth is never trained on
        train_text, val_text, best = text[:split], text[split:], None
    else:
        raise ValueError(f"corpus ({name!r}) must be 'markov' or 'guide'")

    def ids(text: str) -> torch.Tensor:
        return torch.tensor(tokenizer.encode(text), dtype=torch.long)

    return Corpus(tokenizer, ids(train_text), ids(val_text), best)


def markov_loss(x: torch.Tensor, y: torch.Tensor) -> float:
    """The loss of the Markov chain itself on windows x, y (N, T) of its text."""
    P = torch.tensor(MARKOV.transitions)  # (V, V): P[i, j] = p(next j | now i)
    return -P[x, y].log().mean().item()  # -ln p(y_t | x_t), averaged


def val_windows(val: torch.Tensor, T: int, n: int) -> tuple[torch.Tensor, ...]:
    """The first n non-overlapping windows of val: x, y (n, T), no randomness."""
    n = min(n, (len(val) - 1) // T)
    x = val[: n * T].view(n, T)  # (n * T,) -> (n, T)
    y = val[1 : n * T + 1].view(n, T)  # the same windows shifted by one
    return x, y


# --8<-- [end:corpus]


def _process_seconds() -> float | None:
    """Seconds since this process started, interpreter start-up included (Linux)."""
    try:
        ticks = int(
            Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]
        )
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return round(uptime - ticks / os.sysconf("SC_CLK_TCK"), 2)


def machine_info() -> dict:
    """Where a measurement was made: enough to tell two machines apart."""
    cpu_model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    return {
        "platform": platform.platform(),
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "torch_threads": torch.get_num_threads(),
        # 1-minute load average per core: near 0 idle, 1 with every core busy.
        "load_per_core": round(os.getloadavg()[0] / (os.cpu_count() or 1), 2),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def time_interleaved(jobs: dict, rounds: int) -> dict[str, dict[str, list]]:
    """Wall and CPU seconds of each job per round, taking turns: A B C, B C A, ...

    Taking turns spreads slow drifts of the machine (clock speed, other
    processes) over all jobs. Round 0 is a warm-up and is not kept. The CPU
    seconds of this process do not count the time it waited while another
    process had the core: with one thread, the steadier measure.
    """
    names = list(jobs)
    samples = {name: {"wall": [], "cpu": []} for name in names}
    for round_ in range(rounds + 1):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            wall, cpu = time.perf_counter(), time.process_time()
            jobs[name]()
            if round_ > 0:
                samples[name]["wall"].append(time.perf_counter() - wall)
                samples[name]["cpu"].append(time.process_time() - cpu)
    return samples


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
    progress: bool = True,
    quiet: bool = False,
    plot: bool = True,
) -> dict:
    """Train as config says, writing out/ckpt.pt, history.json and loss.svg.

    Under torchrun, every process runs this function: the model is wrapped in
    DistributedDataParallel, each process computes the gradient of its share of
    the batch, and backward averages them. Process 0 writes the files.

    Args:
        resume: continue from out/ckpt.pt if it exists.
        stop_after: stop (with a checkpoint) after this step, as if interrupted.
        progress: show a progress bar (process 0 only).
        quiet: no progress bar, and no line per validation either.
        plot: draw loss.svg at the end.

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
    step, seconds, history = 0, 0.0, _new_history(config, corpus, world_size)
    if config.corpus == "markov":  # the best loss on these very windows
        history["val_floor"] = round(markov_loss(val_x, val_y), 5)
    losses = []  # training losses of the steps since the last record
    path = out / CHECKPOINT
    if resume and path.exists():
        state = torch.load(path, weights_only=True)
        _check_same_config(state["config"], config)
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
    bar = tqdm(
        total=config.steps,
        initial=step,
        disable=not progress or quiet or rank != 0,
        unit="step",
        dynamic_ncols=True,
    )
    tokens_per_step = config.batch_size * config.context_length  # all processes
    first, first_seconds = step, seconds
    started = time.perf_counter() - seconds  # the clock goes on where it stopped
    if step == 0:  # where the curve starts: the untrained model, near ln V
        val = evaluate(model, val_x, val_y, config.batch_size, rank, world_size)
        history["records"].append(
            {"step": 0, "seconds": 0.0, "val_loss": round(val, 5)}
        )
    while step < last:
        lr = lr_at(
            step, config.lr, config.min_lr, config.warmup_steps, config.steps
        )
        for group in optimizer.param_groups:
            group["lr"] = lr
        pieces = micro_batches(corpus.train, config, batches, rank, world_size)
        loss, norm = train_step(stepper, optimizer, pieces, config.grad_clip)
        losses.append(loss)
        step += 1
        seconds = time.perf_counter() - started  # this run and the ones resumed
        tokens_per_s = (step - first) * tokens_per_step / (seconds - first_seconds)
        postfix = {"loss": f"{loss:.3f}", "tokens_per_s": f"{tokens_per_s:,.0f}"}
        bar.set_postfix(postfix, refresh=False)  # drawn by update, a few times a s
        bar.update()
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
            if rank == 0 and not quiet:
                bar.write(_describe(record, corpus.best_loss))
        if step % config.eval_interval == 0 or step == last:
            checkpoint()
    bar.close()
    history["process_seconds"] = _process_seconds()
    if rank == 0:  # again, with the time the whole command took; and the plot
        (out / HISTORY).write_text(json.dumps(history, indent=1) + "\n")
        if plot:
            plot_loss(history, out / LOSS_PLOT)
    return history


# --8<-- [end:train]

# ------------------------------------------------------------------ bookkeeping


def _new_history(config: TrainConfig, corpus: Corpus, world_size: int) -> dict:
    return {
        "schema": "attention-guide/training-run/1",
        "command": "python -m snippets.train " + " ".join(sys.argv[1:]),
        "config": dataclasses.asdict(config),
        "world_size": world_size,
        "best_loss": corpus.best_loss,
        "machine": machine_info(),
        "resumed_at": [],
        "records": [],
    }


# Fields that may change between a run and its resumption: none of them changes
# what the run computes.
RESUMABLE = ("compile",)


def _check_same_config(saved: dict, config: TrainConfig) -> None:
    """A resumed run must compute what the interrupted one would have."""
    for name, value in dataclasses.asdict(config).items():
        if name not in RESUMABLE and saved.get(name) != value:
            raise ValueError(
                f"cannot resume: the checkpoint was made with {name}="
                f"{saved.get(name)!r}, this run has {name}={value!r}"
            )


def _describe(record: dict, best: float | None) -> str:
    gap = "" if best is None else f" ({record['val_loss'] - best:+.3f} from best)"
    return (
        f"step {record['step']:>5}  {record['seconds']:6.1f} s  "
        f"train {record['train_loss']:.4f}  val {record['val_loss']:.4f}{gap}"
    )


def _pyplot():
    """matplotlib, drawing to files only, with SVGs that are the same every time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "attention-guide"  # fixed ids in the SVG
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    return plt


def plot_loss(history: dict, path: Path) -> None:
    """Loss against seconds of training, as SVG: the whole run, and a close-up."""
    plt = _pyplot()
    records = history["records"]
    best = history["best_loss"]
    trained = [r for r in records if "train_loss" in r]  # not the step-0 record
    fig, axes = plt.subplots(
        1, 2 if best is not None else 1, figsize=(8, 3.4), squeeze=False
    )
    for ax in axes[0]:
        ax.plot(
            [r["seconds"] for r in trained],
            [r["train_loss"] for r in trained],
            label="train (mean since last point)",
        )
        ax.plot(
            [r["seconds"] for r in records],
            [r["val_loss"] for r in records],
            label="validation",
            marker=".",
        )
        if best is not None:
            ax.axhline(best, color="grey", linestyle="--", label="entropy rate H")
            ax.axhspan(
                best,
                best + 0.1,
                color="grey",
                alpha=0.15,
                label="within 0.1 nats of H",
            )
        ax.set_xlabel("seconds of training")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("loss, nats per token")
    axes[0][0].legend(fontsize="small")
    if best is not None:
        close = axes[0][1]
        close.set_ylim(best - 0.03, best + 0.12)
        close.set_title("close-up", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})  # no date: same run, same file
    plt.close(fig)


def plot_schedule(config: TrainConfig, path: Path) -> None:
    """The learning rate of every step of a run with this config, as SVG."""
    plt = _pyplot()
    steps = range(config.steps + config.steps // 5)  # and a little past the end
    args = (config.lr, config.min_lr, config.warmup_steps, config.steps)
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    ax.plot(list(steps), [lr_at(s, *args) for s in steps])
    ax.axvline(
        config.warmup_steps, color="grey", linestyle=":", label="end of warmup"
    )
    ax.axvline(config.steps, color="grey", linestyle="--", label="last step")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


# ------------------------------------------------------------------ throughput


# --8<-- [start:ladder]
# The optimization page's table: a small model (vocab 65, like tiny Shakespeare's
# characters), batch 12 of 64 tokens. Each rung keeps the ones above and changes
# one thing; "readable" is the guide's per-head attention with textbook AdamW.
BENCH_MODEL = {
    "vocab_size": 65,
    "context_length": 64,
    "n_embed": 128,
    "n_head": 4,
    "n_layer": 4,
}
BENCH_BATCH = 12
LADDER = {
    "readable": {
        "attention": "per-head",
        "tie_weights": False,
        "adamw": "for-loop",
    },
    "+ fused attention": {"attention": "fused"},
    "+ weight tying": {"tie_weights": True},
    "+ foreach AdamW": {"adamw": "foreach"},
    "+ fused AdamW": {"adamw": "fused"},
    "+ torch.compile": {"compile": True},  # only with --compile
}


def ladder(with_compile: bool = False) -> dict[str, dict]:
    """Rung name -> its full settings, each rung's changes applied on the last."""
    settings, out = {"compile": False}, {}
    for name, change in LADDER.items():
        settings = {**settings, **change}
        if with_compile or not settings["compile"]:
            out[name] = settings
    return out


def make_bench_step(settings: dict, seed: int = 0):
    """A function of no arguments doing one training step of the bench model."""
    torch.manual_seed(seed)
    config = GPTConfig(
        **BENCH_MODEL,
        attention=settings["attention"],
        tie_weights=settings["tie_weights"],
    )
    model = GPT(config)
    optimizer = make_optimizer(model, 1e-3, 0.1, adamw=settings["adamw"])
    stepper = torch.compile(model) if settings["compile"] else model
    generator = torch.Generator().manual_seed(seed)
    data = torch.randint(config.vocab_size, (100_000,), generator=generator)

    def step() -> float:
        batch = get_batch(data, BENCH_BATCH, config.context_length, generator)
        return train_step(stepper, optimizer, [batch], grad_clip=1.0)[0]

    return step


# --8<-- [end:ladder]


def bench_throughput(rounds: int, steps: int, with_compile: bool) -> dict:
    """Tokens per second of every rung, the rungs taking turns round by round."""
    rungs = ladder(with_compile)
    jobs, setup = {}, {}
    for name, settings in rungs.items():
        started = time.perf_counter()
        step = make_bench_step(settings)
        step()  # the first step: allocations, and compilation with torch.compile
        setup[name] = round(time.perf_counter() - started, 2)

        def job(step=step):
            for _ in range(steps):
                step()

        jobs[name] = job
        print(f"{name}: ready in {setup[name]} s", file=sys.stderr, flush=True)
    load_before = os.getloadavg()[0]
    samples = time_interleaved(jobs, rounds)
    tokens = steps * BENCH_BATCH * BENCH_MODEL["context_length"]
    results = []
    for name, seconds in samples.items():
        wall = [tokens / s for s in seconds["wall"]]
        cpu = [tokens / s for s in seconds["cpu"]]
        results.append(
            {
                "rung": name,
                "settings": rungs[name],
                "tokens_per_s": round(statistics.median(wall)),
                "tokens_per_cpu_s": round(statistics.median(cpu)),
                "samples_tokens_per_s": [round(t) for t in wall],
                "samples_tokens_per_cpu_s": [round(t) for t in cpu],
                "first_step_s": setup[name],
            }
        )
    return {
        "schema": "attention-guide/training-throughput/1",
        "command": "python -m snippets.train " + " ".join(sys.argv[1:]),
        "model": BENCH_MODEL,
        "batch_size": BENCH_BATCH,
        "rounds": rounds,
        "steps_per_sample": steps,
        "machine": {
            **machine_info(),
            "load_1min_before": round(load_before, 2),
            "load_1min_after": round(os.getloadavg()[0], 2),
        },
        "results": results,
    }


def throughput_table(data: dict) -> str:
    """The page's table: tokens/s of each rung, against the last and the first.

    Ratios are of tokens per CPU-second, which waiting for a busy core does not
    dilute. spread: the middle half of those samples (between the quartiles),
    as a share of the median; a ratio within it tells nothing.
    """
    rows = data["results"]
    first = rows[0]["tokens_per_cpu_s"]
    lines = [
        f"{'':<18}{'tokens/s':>9}{'per CPU s':>11}{'spread':>8}"
        f"{'vs above':>10}{'vs readable':>13}"
    ]
    for before, row in zip([None, *rows], rows, strict=False):
        cpu = row["tokens_per_cpu_s"]
        q1, _, q3 = statistics.quantiles(row["samples_tokens_per_cpu_s"], n=4)
        spread = f"±{(q3 - q1) / 2 / cpu:.0%}"
        above = "" if before is None else f"x{cpu / before['tokens_per_cpu_s']:.2f}"
        lines.append(
            f"{row['rung']:<18}{row['tokens_per_s']:>9,}{cpu:>11,}{spread:>8}"
            f"{above:>10}{f'x{cpu / first:.2f}':>13}"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------ command line


HELP = {
    "corpus": "markov: a language of known best loss; guide: the guide's text",
    "corpus_chars": "markov only: characters of text to train on",
    "steps": "optimizer steps; the schedule ends at the last one",
    "batch_size": "windows per optimizer step, over all processes and micro-steps",
    "grad_accum": "micro-steps per optimizer step (gradient accumulation)",
    "lr": "peak learning rate, reached at the end of warmup",
    "min_lr": "the floor the cosine decays to, and stays at",
    "beta2": "AdamW's second-moment decay",
    "grad_clip": "largest gradient norm (0: no clipping)",
    "adamw": "AdamW implementation: fused, foreach or for-loop",
    "eval_interval": "validate and write a checkpoint every this many steps",
    "val_windows": "number of fixed validation windows",
    "compile": "torch.compile the model (slow first step)",
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m snippets.train",
        description="Train the guide's GPT on a CPU; also under torchrun (DDP).",
    )
    p.add_argument(
        "--out", type=Path, help="folder for ckpt.pt, history.json and loss.svg"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue from OUT/ckpt.pt if it exists",
    )
    p.add_argument(
        "--stop-after",
        type=int,
        metavar="STEP",
        help="stop after this step, as if interrupted (for --resume)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--threads",
        type=int,
        help="torch threads per process (default: torch's choice)",
    )
    run = p.add_argument_group("run settings (snippets.train.TrainConfig)")
    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        default = field.default
        text = HELP.get(field.name, "") + f" (default: {default})"
        if isinstance(default, bool):
            run.add_argument(
                flag,
                action=argparse.BooleanOptionalAction,
                default=default,
                help=text,
            )
        else:
            run.add_argument(
                flag,
                type=type(default),
                default=default,
                help=text,
                metavar=field.name.upper(),
            )
    bench = p.add_argument_group("measurements instead of a run")
    bench.add_argument(
        "--bench-throughput",
        action="store_true",
        help="tokens/s of the readable and the fast paths, taking "
        "turns; writes OUT or the committed throughput.json",
    )
    bench.add_argument(
        "--rounds",
        type=int,
        default=7,
        help="--bench-throughput: rounds timed (default: 7)",
    )
    bench.add_argument(
        "--bench-steps",
        type=int,
        default=10,
        help="--bench-throughput: steps per sample (default: 10)",
    )
    bench.add_argument(
        "--plot-schedule",
        type=Path,
        metavar="SVG",
        help="draw the learning-rate schedule of the settings",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    try:
        config = TrainConfig(**{k: v for k, v in vars(args).items() if k in fields})
    except ValueError as err:
        p.error(str(err))
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.plot_schedule:
        plot_schedule(config, args.plot_schedule)
        return 0
    if args.bench_throughput:
        data = bench_throughput(args.rounds, args.bench_steps, config.compile)
        print(throughput_table(data))
        path = args.out or RESULTS_DIR / "throughput.json"
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {path}")
        return 0
    if args.out is None:
        p.error("--out is required to train, e.g. --out runs/markov")
    # torchrun starts every process with WORLD_SIZE, RANK and the address of
    # process 0 in its environment; init_process_group reads them from there.
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("gloo")  # gloo: the CPU backend (GPUs: nccl)
    rank = _distributed()[0]
    try:
        history = train(
            config,
            args.out,
            resume=args.resume,
            stop_after=args.stop_after,
            progress=not args.no_progress,
        )
    finally:
        if distributed:
            dist.destroy_process_group()
    if rank == 0 and history["records"]:
        last = history["records"][-1]
        print(
            f"wrote {args.out / CHECKPOINT} at step {last['step']}, "
            f"{history['process_seconds']} s since the command started"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
