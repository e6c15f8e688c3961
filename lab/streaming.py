"""Sinks and streaming: the attention sink grown, broken by a rolling cache, and fixed.

    python -m lab.streaming --jobs 3          # docs/assets/results/streaming.json + SVG
    python -m lab.streaming --quick --out DIR # seconds: the suite's run

Trains the guide's GPT (RoPE) on Bigram-Backcopy (snippets.tasks, Guo et al. 2024):
every sequence opens with BOS, a token after a trigger copies the token before the
trigger, every other token follows a bigram chain. Attention is needed after a
trigger only; elsewhere a head has nothing to do. Three models, same data and
start: plain softmax, learned sink logits (gpt-oss) and a sigmoid output gate
(Qiu et al. 2025). For each: the attention every head puts on BOS, at trigger and
at other queries; then held-out streams 16 times the training length W, read with
a cache of everything, a rolling cache of W (BOS dropped after W tokens), and
rolling caches keeping the first 1, 2 or 4 tokens (StreamingLLM). Losses are
excess nats over what the task's own rule scores.
"""

import concurrent.futures
import dataclasses
import sys
import time

import torch
import torch.nn.functional as F

from lab.common import RESULTS_DIR, note_load_after
from lab.experiment import Command, progress
from snippets.model import GPT, GPTConfig
from snippets.streaming import stream_logits
from snippets.tasks import backcopy_best_losses, backcopy_chain, bigram_backcopy
from snippets.train import lr_at, make_optimizer, train_step

RESULT_FILE = RESULTS_DIR / "streaming.json"
PLOT_FILE = RESULTS_DIR / "streaming-sinks.svg"
SCHEMA = "attention-guide/streaming/2"
MODELS = {  # name -> GPTConfig fields
    "plain": {},
    "learned sinks": {"sinks": True},
    "output gate": {"gate": "elementwise"},
}
READERS = {  # name -> what the page calls it
    "full": "one cache, nothing dropped",
    "rolling": "rolling cache of W",
    "sinks-1": "rolling cache of W, 1 sink",
    "sinks-2": "rolling cache of W, 2 sinks",
    "sinks-4": "rolling cache of W, 4 sinks",
}


@dataclasses.dataclass(frozen=True)
class Setup:
    """Everything a run depends on besides the model's attention."""

    vocab_size: int = 32
    n_triggers: int = 4
    trigger_rate: float = 0.2
    sharpness: float = 3.0  # how peaked the bigram chain is
    context_length: int = 32  # W
    n_layer: int = 1
    n_head: int = 4
    n_embed: int = 64
    steps: int = 1500
    batch_size: int = 32
    lr: float = 1e-2
    warmup_steps: int = 50  # then a cosine to lr / 10
    weight_decay: float = 0.1
    eval_batch: int = 64  # held-out windows for the attention on BOS
    streams: int = 8  # held-out streams read side by side
    stream_factor: int = 16  # each held-out stream is this many times W long
    seed: int = 0


FULL = Setup()
QUICK = Setup(
    vocab_size=12, n_triggers=2, context_length=16, n_layer=1, n_head=2, n_embed=16,
    steps=20, batch_size=8, warmup_steps=5, eval_batch=8, streams=2, stream_factor=3,
)  # fmt: skip


def chain(setup: Setup) -> torch.Tensor:
    generator = torch.Generator().manual_seed(setup.seed)
    return backcopy_chain(
        setup.vocab_size, setup.n_triggers, setup.trigger_rate, setup.sharpness, generator
    )


def train_one(setup: Setup, name: str, transitions: torch.Tensor) -> GPT:
    """One model on Bigram-Backcopy windows of W tokens, each opening with BOS."""
    config = GPTConfig(
        vocab_size=setup.vocab_size, context_length=setup.context_length,
        n_embed=setup.n_embed, n_head=setup.n_head, n_layer=setup.n_layer,
        position="rope", max_length=setup.stream_factor * setup.context_length,
        **MODELS[name],
    )  # fmt: skip
    torch.manual_seed(setup.seed)  # the same start where the models agree
    model = GPT(config)
    optimizer = make_optimizer(model, setup.lr, setup.weight_decay)
    generator = torch.Generator().manual_seed(setup.seed)  # the same batches
    W = setup.context_length
    for step in range(setup.steps):
        lr = lr_at(step, setup.lr, setup.lr / 10, setup.warmup_steps, setup.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        idx = bigram_backcopy(setup.batch_size, W + 1, transitions, setup.n_triggers, generator)
        train_step(model, optimizer, [(idx[:, :-1], idx[:, 1:])], grad_clip=1.0)
    return model.eval()


@torch.no_grad()
def attention_on_bos(model: GPT, idx: torch.Tensor, n_triggers: int) -> dict:
    """Per layer and head, the weight on BOS (key 0) from queries in the second half
    of the window, at triggers (where a head must look back) and elsewhere; and, with
    learned sinks, the weight the sink takes (what the row is short of 1)."""
    V, T = model.config.vocab_size, idx.size(1)
    start = T // 2
    trigger = (idx[:, start:] >= V - n_triggers)[:, None]  # (B, 1, T - start)
    x = model.embed(idx)
    out = {"at_triggers": [], "elsewhere": [], "sink_share": []}
    for block in model.blocks:
        y, weights = block.attn(block.ln1(x), return_weights=True)  # (B, H, T, T)
        weights = weights[:, :, start:]  # (B, H, T - start, T)
        bos = weights[..., 0]  # (B, H, T - start)
        for key, where in (("at_triggers", trigger), ("elsewhere", ~trigger)):
            share = (bos * where).sum((0, 2)) / where.sum((0, 2))  # (H,)
            out[key].append([round(v, 4) for v in share.tolist()])
        sink = 1 - weights.sum(-1)  # (B, H, T - start): 0 without learned sinks
        out["sink_share"].append([round(v, 4) for v in sink.mean((0, 2)).tolist()])
        x = x + block.drop(y)
        x = x + block.mlp(block.ln2(x))
    uniform = sum(1 / (t + 1) for t in range(start, T)) / (T - start)
    return {**out, "query_start": start, "uniform": round(uniform, 4)}


def bands(window: int, length: int) -> list[tuple[int, int]]:
    """Position bands [0, W), [W, 2W), [2W, 4W), ... up to the stream's length."""
    edges = [0, window]
    while edges[-1] < length:
        edges.append(min(2 * edges[-1], length))
    return list(zip(edges[:-1], edges[1:], strict=True))


def read_streams(model: GPT, x: torch.Tensor, W: int) -> dict:
    """Next-token logits (B, N, V) of streams x (B, N), each reader."""
    N = x.size(1)
    return {
        "full": lambda: stream_logits(model, x, window=N),
        "rolling": lambda: stream_logits(model, x, window=W),
        "sinks-1": lambda: stream_logits(model, x, window=W, sinks=1),
        "sinks-2": lambda: stream_logits(model, x, window=W, sinks=2),
        "sinks-4": lambda: stream_logits(model, x, window=W, sinks=4),
    }


def held_out(setup: Setup):
    """The chain, held-out windows (for BOS attention) and streams with their best losses."""
    transitions = chain(setup)
    W, nt = setup.context_length, setup.n_triggers
    generator = torch.Generator().manual_seed(setup.seed + 1)
    windows = bigram_backcopy(setup.eval_batch, W, transitions, nt, generator)
    length = setup.stream_factor * W
    streams = bigram_backcopy(setup.streams, length + 1, transitions, nt, generator)
    best = backcopy_best_losses(streams, transitions, nt)  # (B, N)
    return transitions, windows, streams, best


def one_model(setup: Setup, name: str) -> dict:
    """Train one model, measure its attention on BOS, read the streams every way."""
    torch.set_num_threads(1)  # in a worker process too: the same sums on every machine
    transitions, windows, streams, best = held_out(setup)
    started = time.process_time()
    model = train_one(setup, name, transitions)
    row = {"model": name, "train_cpu_seconds": round(time.process_time() - started, 1)}
    row["bos"] = attention_on_bos(model, windows, setup.n_triggers)
    x, y = streams[:, :-1], streams[:, 1:]  # (B, N) each
    spans = bands(setup.context_length, x.size(1))
    row["excess"] = {}
    for reader, read in read_streams(model, x, setup.context_length).items():
        losses = F.cross_entropy(read().transpose(1, 2), y, reduction="none") - best
        row["excess"][reader] = [round(losses[:, a:b].mean().item(), 4) for a, b in spans]
    return row


def run(setup: Setup, header: dict, jobs: int = 1) -> dict:
    """The three models, in `jobs` processes (the rows do not depend on how many),
    after the result's header (made before the run: the machine as it was)."""
    _, _, streams, best = held_out(setup)
    W, length = setup.context_length, streams.size(1) - 1
    models = []
    if jobs == 1:  # in this process: what the suite's quick run does
        models = [one_model(setup, name) for name in MODELS]
    else:
        with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
            futures = [pool.submit(one_model, setup, name) for name in MODELS]
            models = [future.result() for future in futures]
    for row in models:
        progress(f"{row['model']}: {row}")
    note_load_after(header)
    return {
        **header,
        "setup": dataclasses.asdict(setup),
        "window": W,
        "stream_length": length,
        "bands": [list(s) for s in bands(W, length)],
        "readers": READERS,
        "best_loss": round(best.mean().item(), 4),
        "models": models,
    }


# ------------------------------------------------------------------ tables and figure


def bos_table(data: dict) -> str:
    """Weight on BOS per layer and head, at triggers and elsewhere, per model."""
    lines = [f"{'model':<14} {'layer':>5}  {'at triggers':>24}  {'elsewhere':>24}  sink"]
    for row in data["models"]:
        bos = row["bos"]
        for layer, (at, other) in enumerate(zip(bos["at_triggers"], bos["elsewhere"], strict=True)):
            cells = [" ".join(f"{v:5.2f}" for v in heads) for heads in (at, other)]
            sink = " ".join(f"{v:4.2f}" for v in bos["sink_share"][layer])
            sink = sink if row["model"] == "learned sinks" else "-"
            lines.append(f"{row['model']:<14} {layer:>5}  {cells[0]:>24}  {cells[1]:>24}  {sink}")
    lines.append(
        f"even spread over the keys a query sees: {data['models'][0]['bos']['uniform']:.3f}"
    )
    return "\n".join(lines)


def loss_table(data: dict, band_from: int = 1) -> str:
    """Excess nats per reader and model, averaged over the bands after the first
    (the first window is read the same way by every reader)."""
    names = [row["model"] for row in data["models"]]
    width = max(len(v) for v in data["readers"].values())
    lines = [f"{'reader (W=' + str(data['window']) + ')':<{width}}  " +
             "  ".join(f"{n:>13}" for n in names)]  # fmt: skip
    spans = data["bands"][band_from:]
    sizes = [b - a for a, b in spans]
    for reader, label in data["readers"].items():
        cells = []
        for row in data["models"]:
            excess = row["excess"][reader][band_from:]
            mean = sum(e * s for e, s in zip(excess, sizes, strict=True)) / sum(sizes)
            cells.append(f"{mean:>13.3f}")
        lines.append(f"{label:<{width}}  " + "  ".join(cells))
    return "\n".join(lines)


def sink_plot(data: dict):
    """Left: weight on BOS per head, elsewhere vs at triggers. Right: loss per reader."""
    from lab.style import pyplot

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.2, 3.0), layout="constrained")
    readers = list(data["readers"])
    for i, row in enumerate(data["models"]):
        bos = row["bos"]
        heads = [v for layer in bos["elsewhere"] for v in layer]
        positions = [i + 0.8 * (j / max(len(heads) - 1, 1) - 0.5) for j in range(len(heads))]
        left.bar(positions, heads, width=0.8 / len(heads), label=row["model"])
        spans = data["bands"][1:]
        sizes = [b - a for a, b in spans]
        means = [
            sum(e * s for e, s in zip(row["excess"][r][1:], sizes, strict=True)) / sum(sizes)
            for r in readers
        ]
        right.plot(range(len(readers)), means, marker="o", label=row["model"])
    left.axhline(data["models"][0]["bos"]["uniform"], linestyle="--", linewidth=1, color="#808080")
    left.set(xticks=range(len(data["models"])), xticklabels=[r["model"] for r in data["models"]],
             ylabel="weight on BOS", title="heads away from triggers")  # fmt: skip
    right.set(xticks=range(len(readers)), xticklabels=["all", "W", "W+1", "W+2", "W+4"],
              ylabel="excess nats", title="reading long streams")  # fmt: skip
    right.legend(frameon=False)
    right.grid(True)
    return fig


def main(argv: list[str] | None = None) -> int:
    """Run the experiment, write the result file and figure, print both tables."""
    # One thread by default: the same sums in the same order on every machine.
    cmd = Command("lab.streaming", __doc__, threads=1)
    cmd.parser.add_argument("--jobs", type=int, default=1, help="models trained at once")
    args = cmd.parse(argv)
    data = run(QUICK if args.quick else FULL, cmd.header(SCHEMA), args.jobs)
    cmd.write(RESULT_FILE.name, data)
    if not args.quick:
        cmd.write(PLOT_FILE.name, sink_plot(data))
    print(bos_table(data))
    print()
    print(loss_table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
