"""Five position schemes, one model, one corpus: the positions page's experiment.

    python -m lab.positions            # writes docs/assets/results/positions.json + SVGs
    python -m lab.positions --quick    # seconds: the suite's run

The same small GPT is trained on the guide's Markov language with each scheme in
snippets/positions.py (same seed, steps, sizes, batches). Validation loss is measured
on the same held-out tokens cut into windows of the training length, 2x and 4x, and
reported as excess nats over the language's entropy rate (the lowest loss possible).
The page's figures are drawn here too; `python -m lab.figures` redraws them.
"""

import dataclasses
import math
import sys
import time

import torch

from lab.common import RESULTS_DIR
from lab.experiment import Command, progress
from lab.style import COLORS, INK, pyplot
from snippets.data import get_batch
from snippets.model import GPT, GPTConfig
from snippets.positions import (
    POSITIONS,
    WITHOUT_TABLE,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    rope_frequencies,
    sinusoidal_positions,
)
from snippets.train import lr_at, make_optimizer, train_step
from snippets.train_data import load_corpus, markov_loss

RESULT_FILE = RESULTS_DIR / "positions.json"
SCHEMA = "attention-guide/positions/1"
FACTORS = (1, 2, 4)  # evaluation lengths, in multiples of the training length


@dataclasses.dataclass(frozen=True)
class Setup:
    """Everything a run depends on besides the scheme."""

    context_length: int = 64  # the training length
    n_layer: int = 2
    n_head: int = 4
    n_embed: int = 64
    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup_steps: int = 50
    weight_decay: float = 0.1
    corpus_chars: int = 200_000
    val_tokens: int = 16_384  # scored at every length: the same tokens each time
    seed: int = 0


FULL = Setup()
QUICK = Setup(
    context_length=16,
    n_layer=1,
    n_head=2,
    n_embed=16,
    steps=30,
    batch_size=8,
    warmup_steps=5,
    corpus_chars=20_000,
    val_tokens=1_024,
)


def model_config(setup: Setup, position: str, vocab_size: int) -> GPTConfig:
    longest = setup.context_length * max(FACTORS)
    return GPTConfig(
        vocab_size=vocab_size,
        context_length=setup.context_length,
        n_embed=setup.n_embed,
        n_head=setup.n_head,
        n_layer=setup.n_layer,
        tie_weights=True,
        position=position,
        # Only schemes without a table may be asked for more than they saw.
        max_length=longest if position in WITHOUT_TABLE else None,
    )


@torch.no_grad()
def excess_loss(model: GPT, val: torch.Tensor, length: int, n_tokens: int, best: float):
    """Mean loss minus the entropy rate over n_tokens held-out targets, windows of length."""
    n = n_tokens // length
    x = val[: n * length].view(n, length)  # (n, length)
    y = val[1 : n * length + 1].view(n, length)
    model.eval()
    total = 0.0
    for i in range(0, n, 16):
        _, loss = model(x[i : i + 16], y[i : i + 16])
        total += loss.item() * y[i : i + 16].numel()
    model.train()
    return total / y.numel() - best


def train_one(setup: Setup, position: str, corpus) -> tuple[GPT, dict]:
    """Train one model; returns it and its row of the table."""
    config = model_config(setup, position, corpus.tokenizer.vocab_size)
    torch.manual_seed(setup.seed)  # same initial weights where the schemes agree
    model = GPT(config)
    optimizer = make_optimizer(model, setup.lr, setup.weight_decay)
    generator = torch.Generator().manual_seed(setup.seed)  # the same batches
    start = time.process_time()
    for step in range(setup.steps):
        lr = lr_at(step, setup.lr, setup.min_lr, setup.warmup_steps, setup.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = get_batch(corpus.train, setup.batch_size, setup.context_length, generator)
        train_step(model, optimizer, [(x, y)], grad_clip=1.0)
    seconds = time.process_time() - start
    row = {"position": position, "parameters": sum(p.numel() for p in model.parameters())}
    for factor in FACTORS:
        length = setup.context_length * factor
        if length > config.longest:
            row[f"excess_{factor}x"] = None  # a table has no rows for these positions
        else:
            value = excess_loss(model, corpus.val, length, setup.val_tokens, corpus.best_loss)
            row[f"excess_{factor}x"] = round(value, 4)
    row["train_cpu_seconds"] = round(seconds, 1)
    return model, row


def learned_similarity(model: GPT) -> list[list[float]]:
    """Cosine similarity of the learned position vectors, position against position."""
    table = model.pos_emb.weight.detach()  # (T, C)
    unit = table / table.norm(dim=1, keepdim=True)
    return [[round(x, 3) for x in row] for row in (unit @ unit.T).tolist()]  # (T, T)


def run(setup: Setup, header: dict) -> dict:
    """Train and score the five models; the content of the result file (after header)."""
    corpus = load_corpus("markov", setup.corpus_chars)
    result = dict(header)
    rows, models = [], {}
    for position in POSITIONS:
        progress(f"training with position={position!r}")
        models[position], row = train_one(setup, position, corpus)
        rows.append(row)
    # The chain's own loss on the same held-out targets: the sample's noise floor.
    # A finite sample's loss differs from the entropy rate by chance; a model at
    # the floor shows this excess, not 0.
    n = setup.val_tokens
    chain = markov_loss(corpus.val[:n].view(1, n), corpus.val[1 : n + 1].view(1, n))
    result.update(
        setup=dataclasses.asdict(setup),
        entropy_rate=round(corpus.best_loss, 6),
        chain_excess=round(chain - corpus.best_loss, 4),
        factors=list(FACTORS),
        rows=rows,
        learned_similarity=learned_similarity(models["learned"]),
    )
    return result


# ------------------------------------------------------------------ figures


def sinusoidal_figure(T: int = 64, C: int = 64):
    """The sinusoidal position table (snippets.positions), channels against positions."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    table = sinusoidal_positions(T, C).T.numpy()  # (C, T): positions along x
    image = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xlabel("position t")
    ax.set_ylabel("channel")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    return fig


def rope_figure(D: int = 16, positions: int = 12):
    """One vector at positions 0 .. positions - 1: three of its RoPE pairs turning on
    the unit circle, each at its own speed."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.4, 4.4))
    circle = torch.linspace(0, 2 * math.pi, 200)
    ax.plot(circle.cos().numpy(), circle.sin().numpy(), color=INK, linewidth=0.6)
    x = torch.zeros(positions, D)
    x[:, 0::2] = 1.0  # every pair starts at (1, 0)
    y = apply_rope(x).numpy()  # row t: the vector at position t
    theta = rope_frequencies(D).tolist()
    for i in (0, 1, 2):
        label = f"pair {i}: {theta[i]:.3g} rad per position"
        ax.plot(y[:, 2 * i], y[:, 2 * i + 1], "o", markersize=4, label=label)
    for t in range(7):  # pair 0 turns one radian per position: number its first points
        ax.annotate(f"{t}", (y[t, 0] * 1.12, y[t, 1] * 1.12), ha="center", va="center")
    ax.set_aspect("equal")
    ax.set_xlim(-1.35, 1.35)
    ax.set_ylim(-1.35, 1.35)
    ax.set_xlabel("channel 2i")
    ax.set_ylabel("channel 2i + 1")
    ax.legend(fontsize="small", loc="center")
    fig.tight_layout()
    return fig


def alibi_figure(n_head: int = 8, T: int = 16):
    """The bias ALiBi adds to a score, against the distance back, one line per head."""
    plt = pyplot()
    bias = alibi_bias(n_head, T)[:, -1].flip(-1).numpy()  # (H, T): last query, distance 0..
    slopes = alibi_slopes(n_head).tolist()
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for h in range(n_head):
        style = "-" if h < len(COLORS) else "--"  # more heads than colours
        label = f"head {h}: slope 1/{round(1 / slopes[h])}"
        ax.plot(range(T), bias[h], style, label=label)
    ax.set_xlabel("distance i - j back from the query")
    ax.set_ylabel("bias added to the score")
    ax.grid(True)
    ax.legend(fontsize="x-small", ncol=2)
    fig.tight_layout()
    return fig


def learned_figure(data: dict):
    """Cosine similarity of the trained "learned" position vectors, position against
    position (a result of `python -m lab.positions`)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.4, 3.8))
    image = ax.imshow(data["learned_similarity"], cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xlabel("position")
    ax.set_ylabel("position")
    fig.colorbar(image, ax=ax, label="cosine similarity")
    fig.tight_layout()
    return fig


def excess_figure(data: dict):
    """Excess loss of each position scheme at 1x, 2x, 4x the training length (a result
    of `python -m lab.positions`)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for row in data["rows"]:
        factors = [f for f in data["factors"] if row[f"excess_{f}x"] is not None]
        excess = [row[f"excess_{f}x"] for f in factors]
        ax.plot(factors, excess, marker="o", label=row["position"])
    ax.axhline(data["chain_excess"], color=INK, linestyle="--", label="the chain itself")
    ax.set_xscale("log", base=2)
    ax.set_xticks(data["factors"], [f"{f}x" for f in data["factors"]])
    ax.minorticks_off()
    ax.set_xlabel("evaluation length / training length")
    ax.set_ylabel("excess loss, nats per character")
    ax.grid(True)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


FIGURES = {  # file name -> the function drawing it from a result
    "positions-sinusoidal.svg": lambda result: sinusoidal_figure(),
    "positions-rope.svg": lambda result: rope_figure(),
    "positions-alibi.svg": lambda result: alibi_figure(),
    "positions-learned.svg": learned_figure,
    "positions-excess.svg": excess_figure,
}


# ------------------------------------------------------------------ command


def table(result: dict) -> str:
    """The Markdown table of the page."""
    head = ["scheme", "parameters"] + [f"excess at {f}x" for f in result["factors"]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    floor = f"{result['chain_excess']:.3f}"
    lines.append("| the chain itself | - | " + " | ".join([floor] * len(result["factors"])) + " |")
    for row in result["rows"]:
        cells = [row["position"], f"{row['parameters']:,}"]
        for f in result["factors"]:
            value = row[f"excess_{f}x"]
            cells.append("cannot run" if value is None else f"{value:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    # One thread by default: the same sums in the same order on every machine.
    cmd = Command("lab.positions", __doc__, threads=1)
    args = cmd.parse(argv)
    setup = QUICK if args.quick else FULL
    result = run(setup, cmd.header(SCHEMA))
    cmd.write(RESULT_FILE.name, result)
    for name, draw in FIGURES.items():
        cmd.write(name, draw(result))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
